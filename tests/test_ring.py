"""ring_attention: real processes over gloo, and the same steps simulated in one.

The test spawns 4 local CPU processes (rings of 4 and, in a group of two of them, of
2), runs ring attention over
``torch.distributed`` (non-causal, causal in contiguous blocks, causal in the zigzag
order, grouped heads) and checks that the rows each process returns, put back in the
sequence's order, equal ``scaled_dot_product_attention`` on the whole sequence in
float64 to 1e-10. The simulation and the work counts are checked without processes.
"""

from __future__ import annotations

import multiprocessing
import re

import pytest
import torch
import torch.multiprocessing as mp
from helpers import assert_tight
from hypothesis import given
from hypothesis import strategies as st
from ring_worker import run_rank
from torch.nn import functional as F

from attention import ring_attention, ring_positions, ring_work, simulate_ring_attention

F64 = torch.float64


def problems(world_size: int) -> dict:
    generator = torch.Generator().manual_seed(world_size)
    num_tokens = 4 * world_size  # two tokens per chunk in the zigzag order

    def randn(heads, features=8):
        return torch.randn(2, heads, num_tokens, features, generator=generator, dtype=F64)

    q, k, v = randn(2), randn(2), randn(2, 5)
    gqa_q = randn(6)  # three query heads per key/value head
    return {
        "full": (q, k, v, False, False),
        "causal": (q, k, v, True, False),
        "causal zigzag": (q, k, v, True, True),
        "gqa causal zigzag": (gqa_q, k, v, True, True),
    }


def test_ring_attention_on_2_and_4_processes_equals_sdpa_on_the_whole_sequence(tmp_path):
    # One spawn of 4 processes: the ring of 2 is the group of ranks 0 and 1 among them.
    cases = {ring_size: problems(ring_size) for ring_size in (4, 2)}
    torch.save(cases, tmp_path / "problems.pt")
    # A fork server imports torch once and forks the 4 processes from a clean,
    # single-threaded copy: as safe as spawn, without 4 imports of torch.
    multiprocessing.get_context("forkserver").set_forkserver_preload(["ring_worker"])
    mp.start_processes(
        run_rank, args=(4, str(tmp_path)), nprocs=4, join=True, start_method="forkserver"
    )
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in range(4)]
    checked = 0
    for ring_size, ring_cases in cases.items():
        for name, (q, k, v, causal, zigzag) in ring_cases.items():
            positions = ring_positions(q.shape[-2], ring_size, zigzag=zigzag)
            out = torch.full((*q.shape[:-1], v.shape[-1]), float("nan"), dtype=F64)
            for rank, mine in enumerate(positions):
                out[..., mine, :] = ranks[rank][ring_size, name]
            expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            assert_tight(out, expected)
            checked += 1
    assert checked == 8
    assert all((2, "full") not in ranks[r] for r in (2, 3))  # outside the ring of 2


@given(
    world_size=st.integers(1, 5),
    chunk=st.integers(1, 3),
    causal=st.booleans(),
    zigzag=st.booleans(),
    group=st.integers(1, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_simulated_ring_equals_sdpa(world_size, chunk, causal, zigzag, group, seed):
    num_tokens = world_size * chunk * (2 if zigzag else 1)
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2 * group, num_tokens, 4, generator=generator, dtype=F64)
    k, v = (torch.randn(1, 2, num_tokens, 4, generator=generator, dtype=F64) for _ in range(2))
    out = simulate_ring_attention(q, k, v, world_size=world_size, causal=causal, zigzag=zigzag)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert_tight(out, expected)


def test_ring_positions_cover_the_sequence_once_and_zigzag_pairs_early_with_late():
    contiguous = ring_positions(16, 4)
    zigzag = ring_positions(16, 4, zigzag=True)
    for layout in (contiguous, zigzag):
        assert sorted(torch.cat(layout).tolist()) == list(range(16))
    assert [p.tolist() for p in zigzag] == [
        [0, 1, 14, 15],
        [2, 3, 12, 13],
        [4, 5, 10, 11],
        [6, 7, 8, 9],
    ]


@pytest.mark.parametrize("world_size", [2, 3, 4, 8])
def test_zigzag_balances_the_causal_work_that_contiguous_blocks_do_not(world_size):
    num_tokens = 8 * world_size
    contiguous = ring_work(num_tokens, world_size, causal=True).sum(dim=1)
    zigzag = ring_work(num_tokens, world_size, causal=True, zigzag=True).sum(dim=1)
    block = (num_tokens // world_size) ** 2
    # Process r sees r + 1 blocks of keys; the last one does world_size times the first's work.
    assert contiguous.tolist() == [block * (r + 1) for r in range(world_size)]
    assert len(set(zigzag.tolist())) == 1  # every process the same
    assert zigzag.max() < contiguous.max()
    full = ring_work(num_tokens, world_size).sum(dim=1)
    assert full.tolist() == [num_tokens * num_tokens // world_size] * world_size


def test_ring_attention_needs_a_process_group():
    q = torch.zeros(1, 4, 2)
    with pytest.raises(RuntimeError, match=r"^ring_attention: expected an initialized"):
        ring_attention(q, q, q)


BAD_RING = {
    "tokens not a multiple": (
        lambda: ring_positions(10, 4),
        ValueError,
        "ring_positions: expected a number of tokens divisible by 4",
    ),
    "zigzag needs 2 * world_size": (
        lambda: ring_work(12, 4, causal=True, zigzag=True),
        ValueError,
        "ring_work: expected a number of tokens divisible by 8",
    ),
    "world_size zero": (
        lambda: ring_positions(8, 0),
        ValueError,
        "ring_positions: world_size must be at least 1",
    ),
    "zigzag not a bool": (
        lambda: ring_positions(8, 2, zigzag=1),
        TypeError,
        "ring_positions: zigzag must be True or False",
    ),
    "simulation with fewer queries": (
        lambda: simulate_ring_attention(
            torch.zeros(2, 4), torch.zeros(4, 4), torch.zeros(4, 4), world_size=2
        ),
        ValueError,
        "simulate_ring_attention: expected as many queries as keys",
    ),
    "ring with a bad tensor": (
        lambda: ring_attention([1.0], torch.zeros(2, 2), torch.zeros(2, 2)),
        TypeError,
        "ring_attention: q must be a torch.Tensor",
    ),
}


@pytest.mark.parametrize(("call", "error", "match"), list(BAD_RING.values()), ids=list(BAD_RING))
def test_ring_functions_reject_bad_arguments(call, error, match):
    with pytest.raises(error, match="^" + re.escape(match)):
        call()
