"""FlashAttention, the whole algorithm: what the tiled form costs and saves (chapters 33, 34).

Three comparisons, each in paired alternating rounds (every round times each side, the
order reversed every other round; the first ``--warmup`` rounds are dropped; ratios
are taken round by round and their medians reported):

* ``training``: causal forward + backward at ``--tokens`` (1k and 4k) of
  :func:`~attention.flash_attention` (the tiled forward, the backward from the saved
  log-sum-exp) against autograd through plain attention (the book's masked softmax)
  and through ``scaled_dot_product_attention``'s math path; with the bytes each saves
  for the backward pass (counted on the meta device by
  :func:`attention.flash.saved_bytes`, which counts what a CPU would save);
* ``decode``: one new token reading ``--cache`` (16k and 64k) cached tokens,
  :func:`~attention.split_kv_attention` in ``--splits`` parts against SDPA;
* ``ring``: causal ring attention in the zigzag order on 2 gloo processes of one
  thread each against the same attention in one process of one thread.

``--device cuda`` times something else, on a GPU: the backward pass (and forward +
backward) of :func:`~attention.flash_attention` against SDPA's flash backend
(``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``) in float16 and bfloat16, with peak
memory, and writes the JSON that chapter 33 draws (``docs/benchmarks/flash-gpu.json``).

Timings on a shared machine are noisy: the JSON has the CPU's model, versions and the
load average before and after. A missed expectation is reported, not an error.

Usage::

    python benchmarks/flash.py --quick                   # small sizes, 2 timed rounds
    python benchmarks/flash.py --out flash.json          # 1k/4k tokens, 16k/64k cache
    python benchmarks/flash.py --device cuda --out docs/benchmarks/flash-gpu.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from harness import cpu_model, paired_rounds
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention import flash_attention, ring_attention, ring_positions, split_kv_attention
from attention.flash import saved_bytes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 timed rounds")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--rounds", type=int, help="timed rounds (5; --quick: 2)")
    parser.add_argument("--warmup", type=int, default=1, help="rounds dropped before timing")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (CPU)")
    parser.add_argument("--tokens", type=int, nargs="+", help="1024 4096 (--quick: 256 512)")
    parser.add_argument("--cache", type=int, nargs="+", help="16384 65536 (--quick: 2k, 4k)")
    parser.add_argument("--splits", type=int, default=8, help="split-KV parts")
    parser.add_argument("--ring-tokens", type=int, help="4096 (--quick: 512)")
    parser.add_argument("--heads", type=int, default=2, help="query heads (training, ring)")
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=256, help="tiled block (CPU)")
    parser.add_argument("--out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    defaults = {
        "rounds": (5, 2),
        "tokens": ([1024, 4096], [256, 512]),
        "cache": ([16384, 65536], [2048, 4096]),
        "ring_tokens": (4096, 512),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return args


def paired(ways: dict, rounds: int, warmup: int, sync=lambda: None) -> dict[str, list[float]]:
    """Paired alternating rounds (the harness's): seconds per way, warm-up dropped.

    ``sync`` (a GPU's synchronisation) runs before each call, outside the timed region,
    and after it, inside, so that a call is timed until its kernels finish.
    """

    def synced(way):
        return lambda: (way(), sync())

    calls = {name: synced(way) for name, way in ways.items()}
    timed = paired_rounds(calls, rounds, warmup=warmup, before=lambda name: sync())
    return {name: list(times) for name, times in timed.times.items()}


def summary(times: dict[str, list[float]], first: str) -> dict:
    """Median milliseconds per way, and ``first`` over each other way, round by round."""
    ratios = {
        f"{first}_over_{name}": [a / b for a, b in zip(times[first], ts, strict=True)]
        for name, ts in times.items()
        if name != first
    }
    return {
        "ms": {name: statistics.median(ts) * 1e3 for name, ts in times.items()},
        "ratio": {name: statistics.median(r) for name, r in ratios.items()},
        "times_s": times,
    }


def plain_attention(q, k, v):
    """The book's masked softmax, differentiated by autograd."""
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def sdpa_math(q, k, v):
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def grad_step(fn, q, k, v, grad, out=None):
    """A timed step: the backward pass of ``out`` (kept), or forward + backward of ``fn``."""
    if out is not None:
        return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)
    return lambda: torch.autograd.grad(fn(q, k, v), (q, k, v), grad)


def training(args: argparse.Namespace) -> list[dict]:
    rows = []
    for tokens in args.tokens:
        shape = (1, args.heads, tokens, args.head_dim)
        q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
        grad = torch.randn(shape)

        def flash(q=q, k=k, v=v):
            return flash_attention(q, k, v, causal=True, block_size=args.block_size)

        fns = {"flash": flash, "plain": plain_attention, "sdpa_math": sdpa_math}
        outs = {name: fn(q, k, v) for name, fn in fns.items()}
        agree = all(torch.allclose(o, outs["plain"], atol=1e-4) for o in outs.values())

        steps = {name: grad_step(fn, q, k, v, grad) for name, fn in fns.items()}
        times = paired(steps, args.rounds, args.warmup)
        meta = [torch.empty(shape, device="meta", requires_grad=True) for _ in range(3)]
        saved = {name: saved_bytes(fn, *meta) for name, fn in fns.items()}
        rows.append(
            {
                "tokens": tokens,
                "outputs_agree": agree,
                **summary(times, "flash"),
                "saved_bytes": saved,
                "saved_fraction": {n: saved["flash"] / b for n, b in saved.items() if n != "flash"},
            }
        )
    return rows


def decode(args: argparse.Namespace) -> list[dict]:
    rows = []
    for cached in args.cache:
        q = torch.randn(1, 8, 1, 128)  # one new token, 8 query heads of 128 (Llama-like)
        k, v = torch.randn(1, 2, cached, 128), torch.randn(1, 2, cached, 128)  # 2 kv heads
        ways = {
            "split_kv": lambda q=q, k=k, v=v: split_kv_attention(q, k, v, num_splits=args.splits),
            "sdpa": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        }
        with torch.no_grad():
            agree = torch.allclose(ways["split_kv"](), ways["sdpa"](), atol=1e-5)
            times = paired(ways, args.rounds, args.warmup)
        rows.append({"cached_tokens": cached, "num_splits": args.splits, "outputs_agree": agree,
                     **summary(times, "split_kv")})  # fmt: skip
    return rows


def ring_rank(rank: int, world_size: int, folder: str, rounds: int, warmup: int) -> None:
    """One process of the ring benchmark; rank 0 also times the one-process baseline."""
    torch.set_num_threads(1)
    folder = Path(folder)
    dist.init_process_group(
        "gloo", init_method=f"file://{folder / 'rendezvous'}", rank=rank, world_size=world_size
    )
    q, k, v = torch.load(folder / "qkv.pt")
    mine = ring_positions(q.shape[-2], world_size, zigzag=True)[rank]
    local = [t[..., mine, :] for t in (q, k, v)]
    chunk = q.shape[-2] // (2 * world_size)

    def ring():
        dist.barrier()
        ring_attention(*local, causal=True, zigzag=True)
        dist.barrier()  # the ring is done when its slowest process is

    def one_process():
        dist.barrier()
        if rank == 0:  # the others wait: one process, one thread, the same blocks
            flash_attention(q, k, v, causal=True, block_size=chunk)
        dist.barrier()

    with torch.no_grad():
        out = ring_attention(*local, causal=True, zigzag=True)
        times = paired({"ring": ring, "one_process": one_process}, rounds, warmup)
    torch.save({"out": out, "times": times}, folder / f"rank{rank}.pt")
    dist.destroy_process_group()


def ring(args: argparse.Namespace) -> dict:
    world_size, tokens = 2, args.ring_tokens
    q, k, v = (torch.randn(1, args.heads, tokens, args.head_dim) for _ in range(3))
    with tempfile.TemporaryDirectory() as folder:
        torch.save((q, k, v), Path(folder) / "qkv.pt")
        multiprocessing.get_context("forkserver").set_forkserver_preload(["torch", "attention"])
        mp.start_processes(
            ring_rank,
            args=(world_size, folder, args.rounds, args.warmup),
            nprocs=world_size,
            start_method="forkserver",
        )
        results = [torch.load(Path(folder) / f"rank{r}.pt") for r in range(world_size)]
    out = torch.empty_like(q)
    for rank, mine in enumerate(ring_positions(tokens, world_size, zigzag=True)):
        out[..., mine, :] = results[rank]["out"]
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return {
        "tokens": tokens,
        "processes": world_size,
        "threads_per_process": 1,
        "outputs_agree": torch.allclose(out, expected, atol=1e-5),
        **summary(results[0]["times"], "ring"),
    }


def sdpa_flash(q, k, v):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def cuda_row(args: argparse.Namespace, dtype: torch.dtype, tokens: int) -> dict:
    """One size and dtype on the GPU: gradients compared, then timed and peak memory."""
    shape = (4, 16, tokens, args.head_dim)  # batch 4, 16 heads
    q, k, v, grad = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    fns = {
        "tiled": lambda q, k, v: flash_attention(q, k, v, causal=True, block_size=128),
        "sdpa_flash": sdpa_flash,
    }
    grads = {n: grad_step(fn, q, k, v, grad)() for n, fn in fns.items()}
    pairs = zip(grads["tiled"], grads["sdpa_flash"], strict=True)
    row = {
        "dtype": str(dtype).removeprefix("torch."),
        "tokens": tokens,
        "shape": list(shape),
        "max_grad_difference": max((a - b).abs().max().item() for a, b in pairs),
    }
    for mode in ("backward", "forward+backward"):
        ways, peak = {}, {}
        for name, fn in fns.items():
            out = fn(q, k, v) if mode == "backward" else None
            ways[name] = grad_step(fn, q, k, v, grad, out)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            ways[name]()
            torch.cuda.synchronize()
            peak[name] = torch.cuda.max_memory_allocated()
        times = paired(ways, args.rounds, args.warmup, sync=torch.cuda.synchronize)
        row[mode] = {**summary(times, "tiled"), "peak_bytes": peak}
    return row


def cuda(args: argparse.Namespace) -> list[dict]:
    """flash_attention against SDPA's flash backend, backward and forward + backward."""
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for tokens in args.tokens:
            rows.append(cuda_row(args, dtype, tokens))
            torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(0)
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    env = {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "load_average_before": load,
    }
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    results = {"environment": env, "settings": settings}
    if args.device == "cuda":
        env["device_name"] = torch.cuda.get_device_name()
        env["cuda"] = torch.version.cuda
        results["cuda"] = cuda(args)
    else:
        torch.set_num_threads(args.threads)
        env["threads"] = args.threads
        results["training"] = training(args)
        results["decode"] = decode(args)
        results["ring"] = ring(args)
    env["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    report(results)
    return results


def report(results: dict) -> None:
    def say(line: str = "") -> None:
        print(line, file=sys.stderr)

    env = results["environment"]
    machine = env.get("device_name", env["cpu"])
    say(f"{machine}, torch {env['torch']}, load {env['load_average_before']}")
    for row in results.get("training", []):
        r, s = row["ratio"], row["saved_fraction"]
        say(f"training {row['tokens']:>6} tokens: flash {row['ms']['flash']:.0f} ms, "
            f"x{r['flash_over_plain']:.2f} plain, x{r['flash_over_sdpa_math']:.2f} sdpa math; "
            f"saves {s['plain']:.3f} of plain's bytes, {s['sdpa_math']:.3f} of math's")  # fmt: skip
    for row in results.get("decode", []):
        say(f"decode {row['cached_tokens']:>6} cached: split-KV ({row['num_splits']} parts) "
            f"x{row['ratio']['split_kv_over_sdpa']:.2f} sdpa")  # fmt: skip
    if "ring" in results:
        row = results["ring"]
        say(f"ring {row['tokens']} tokens on {row['processes']} processes: "
            f"x{row['ratio']['ring_over_one_process']:.2f} one process")  # fmt: skip
    for row in results.get("cuda", []):
        backward = row["backward"]["ratio"]["tiled_over_sdpa_flash"]
        both = row["forward+backward"]["ratio"]["tiled_over_sdpa_flash"]
        say(f"cuda {row['dtype']} {row['tokens']} tokens: backward x{backward:.2f} "
            f"sdpa flash, forward+backward x{both:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
