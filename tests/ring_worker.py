"""The process that tests/test_ring.py spawns: one rank of ring attention over gloo.

It lives in a module of its own so that ``torch.multiprocessing.spawn`` can import it
in each new process. Every rank reads the whole problems, runs ``ring_attention`` on
its own tokens for each, and saves its rows of the output for the parent to check.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist

from attention import ring_attention, ring_positions


def run_rank(rank: int, world_size: int, folder: str) -> None:
    """Run every problem on every ring size of ``problems.pt`` that includes ``rank``.

    A ring of ``n`` processes is the group of ranks ``0`` to ``n - 1``, so one spawn
    of the largest ring tests the smaller ones too.
    """
    torch.set_num_threads(1)  # the ranks share the machine's cores
    folder = Path(folder)
    dist.init_process_group(
        "gloo", init_method=f"file://{folder / 'rendezvous'}", rank=rank, world_size=world_size
    )
    try:
        outputs = {}
        for ring_size, problems in torch.load(folder / "problems.pt").items():
            # Every process creates every group, in the same order, as new_group requires.
            group = None if ring_size == world_size else dist.new_group(list(range(ring_size)))
            if rank >= ring_size:
                continue
            for name, (q, k, v, causal, zigzag) in problems.items():
                mine = ring_positions(q.shape[-2], ring_size, zigzag=zigzag)[rank]
                local = [t[..., mine, :] for t in (q, k, v)]
                out = ring_attention(*local, causal=causal, zigzag=zigzag, group=group)
                outputs[ring_size, name] = out
        torch.save(outputs, folder / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
