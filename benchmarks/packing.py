"""Part V (c): packed against padded prefill attention for the serving batch.

The 32 prompts of ``benchmarks/requests.py``'s :func:`serving_batch` (seed 0 by
default; the outputs' lengths are not used: this is the prefill) go through one
attention layer three ways, with the same queries, keys and values:

* ``packed``: :func:`~attention.varlen_attention`, the prompts one after the other in
  ``(total_tokens, heads, dim)``, ``cu_seqlens`` saying where each starts;
* ``padded_mask``: every prompt right-padded to the longest, ``(32, heads, longest,
  dim)``, and :func:`~attention.attend` with the causal mask and the padding mask,
  ``allowed = causal_mask(longest) & padding_mask(lengths, longest)``: what a model
  does with a padded batch and its ``attention_mask``;
* ``padded_causal``: the same padded batch with ``causal=True`` and no mask. With
  padding on the right the causal mask already hides the padding from every real
  token, and without a mask tensor the fused kernel skips the blocks above the
  diagonal: the cheapest padded way. The padding's own rows are computed and thrown
  away.

The layer is a toy one, ``--heads`` 8 query heads sharing ``--kv-heads`` 2 key/value
heads of ``--head-dim`` 64, float32, on ``--threads`` 2: the shape of the work, not a
real model's size. Each round times the three, in an order reversed every other round;
the first ``--warmup`` rounds are dropped. The ratios are taken round by round
(packed / padded_mask and packed / padded_causal) and their medians reported. Checked,
untimed: the three agree at every real token (float32, 1e-4). Counted, untimed: the
tokens and the score entries each way computes (``query_key_pairs``: all of them;
``causal_pairs``: the ones on or below the diagonal, which a causal kernel needs), and
what one attention over every packed token with the block-diagonal mask would compute.

A missed expectation is reported, not an error: this is a measurement. Timings on a
shared machine are noisy: the JSON has the CPU's model name, versions and the load
average before and after; repeat it. On a busy machine, compare with ``--threads 1``
too: the packed way makes one small call per prompt, and each call waits for its
second thread when another process holds the other core (on 2 cores at a load of
about 3.5, packed took about 2.6 times as long with 2 threads as with 1, the padded
ways about the same).

Usage::

    python benchmarks/packing.py                 # JSON on stdout, the summary on stderr
    python benchmarks/packing.py --quick         # 3 timed rounds
    python benchmarks/packing.py --out packing.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from itertools import accumulate
from pathlib import Path

import torch

from attention import attend, causal_mask, padding_mask, varlen_attention


def _load_requests():
    """benchmarks/requests.py, by path: on sys.path as ``requests`` it would shadow the
    well-known HTTP package for anything imported after it."""
    path = Path(__file__).with_name("requests.py")
    spec = importlib.util.spec_from_file_location("serving_requests", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SIDES = ("packed", "padded_mask", "padded_causal")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 timed rounds, 1 warm-up")
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds")
    parser.add_argument("--warmup", type=int, default=2, help="rounds dropped before timing")
    parser.add_argument("--seed", type=int, default=0, help="serving_batch's seed")
    parser.add_argument(
        "--length-scale",
        type=float,
        default=1.0,
        help="multiply every prompt length (at least 1 token): small runs for tests",
    )
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup = 3, 1
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be >= 1 and --warmup >= 0")
    if min(args.heads, args.kv_heads, args.head_dim, args.threads) < 1:
        parser.error("--heads, --kv-heads, --head-dim and --threads must be >= 1")
    if args.heads % args.kv_heads:
        parser.error("--kv-heads must divide --heads")
    if not args.length_scale > 0:
        parser.error("--length-scale must be positive")
    return args


def prompt_lengths(seed: int = 0, scale: float = 1.0) -> list[int]:
    """The serving batch's prompt lengths, each times ``scale`` (at least 1)."""
    batch = _load_requests().serving_batch(seed)
    return [max(1, round(prompt * scale)) for prompt, _ in batch]


def counts(lengths: list[int]) -> dict:
    """Tokens and query-key pairs (score entries) per head, each way; exact integers."""
    batch, longest, total = len(lengths), max(lengths), sum(lengths)

    def triangle(n: int) -> int:
        return n * (n + 1) // 2

    return {
        "sequences": batch,
        "longest": longest,
        "tokens": {"packed": total, "padded": batch * longest},
        "query_key_pairs": {
            "packed": sum(n * n for n in lengths),
            "padded": batch * longest * longest,
            "packed_one_masked_call": total * total,
        },
        "causal_pairs": {
            "packed": sum(triangle(n) for n in lengths),
            "padded": batch * triangle(longest),
            "packed_one_masked_call": triangle(total),
        },
    }


def inputs(lengths: list[int], args: argparse.Namespace) -> dict:
    """The packed q, k, v, the same padded, the padded batch's mask and cu_seqlens."""
    generator = torch.Generator().manual_seed(args.seed)
    total = sum(lengths)
    q = torch.randn(total, args.heads, args.head_dim, generator=generator)
    k = torch.randn(total, args.kv_heads, args.head_dim, generator=generator)
    v = torch.randn(total, args.kv_heads, args.head_dim, generator=generator)
    longest = max(lengths)

    def padded(x: torch.Tensor) -> torch.Tensor:
        out = x.new_zeros(len(lengths), longest, *x.shape[1:])
        for row, piece in enumerate(x.split(lengths)):
            out[row, : len(piece)] = piece
        return out.transpose(1, 2).contiguous()  # (batch, heads, longest, dim)

    real = padding_mask(lengths, longest)  # (batch, longest)
    return {
        "packed": (q, k, v),
        "padded": (padded(q), padded(k), padded(v)),
        "allowed": real[:, None, None, :] & causal_mask(longest),
        "real": real,
        "cu_seqlens": [0, *accumulate(lengths)],
    }


def calls(data: dict) -> dict:
    """The three ways, each a function of no arguments."""
    q, k, v = data["packed"]
    padded, allowed, cu_seqlens = data["padded"], data["allowed"], data["cu_seqlens"]
    return {
        "packed": lambda: varlen_attention(q, k, v, cu_seqlens),
        "padded_mask": lambda: attend(*padded, allowed=allowed),
        "padded_causal": lambda: attend(*padded, causal=True),
    }


def check(data: dict, ways: dict) -> dict[str, float]:
    """Largest difference of each padded way from the packed one, at the real tokens."""
    with torch.no_grad():
        packed = ways["packed"]()
        real = data["real"]
        return {
            side: (ways[side]().transpose(1, 2)[real] - packed).abs().max().item()
            for side in SIDES[1:]
        }


def measure(args: argparse.Namespace, ways: dict) -> dict[str, list[float]]:
    """Paired alternating rounds: each round times every way, the order reversed every
    other round; the warm-up rounds are dropped."""
    times = {side: [] for side in SIDES}
    order = list(SIDES)
    with torch.no_grad():
        for round_index in range(args.warmup + args.rounds):
            taken = {}
            for side in order[::-1] if round_index % 2 else order:
                start = time.perf_counter()
                ways[side]()
                taken[side] = time.perf_counter() - start
            if round_index >= args.warmup:
                for side, seconds in taken.items():
                    times[side].append(seconds)
    return times


def quartiles(values: list[float]) -> dict[str, float]:
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return {"median": median, "q1": q1, "q3": q3}


def summarize(times: dict[str, list[float]]) -> dict:
    """Milliseconds per way and the ratios round by round, as quartiles."""
    ratios = {
        f"packed_over_{side}": [a / b for a, b in zip(times["packed"], times[side], strict=True)]
        for side in SIDES[1:]
    }
    return {
        "ms": {side: quartiles([t * 1e3 for t in ts]) for side, ts in times.items()},
        "ratio": {name: quartiles(values) for name, values in ratios.items()},
        "ratios": ratios,
        "packed_faster": all(quartiles(r)["median"] < 1.0 for r in ratios.values()),
    }


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages, where the system reports them."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    lengths = prompt_lengths(args.seed, args.length_scale)
    data = inputs(lengths, args)
    ways = calls(data)
    difference = check(data, ways)
    times = measure(args, ways)
    results = {
        "benchmark": "packing",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "machine": platform.machine(),
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            # The machine's 1, 5 and 15-minute load averages before and after the run.
            "load_average": {"before": load_before, "after": load_average()},
            "threads": torch.get_num_threads(),
        },
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "prompt_lengths": lengths,
        "counts": counts(lengths),
        "max_abs_difference": difference,
        "outputs_agree": all(value <= 1e-4 for value in difference.values()),
        **summarize(times),
        "times_s": times,
    }
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    report(results)
    return results


def report(results: dict) -> None:
    """The summary, on stderr."""

    def say(line: str = "") -> None:
        print(line, file=sys.stderr)

    count = results["counts"]
    tokens, pairs = count["tokens"], count["causal_pairs"]
    say(
        f"(c) prefill of {count['sequences']} prompts: {tokens['packed']} tokens packed, "
        f"{tokens['padded']} padded to {count['longest']}"
    )
    say(
        f"  causal query-key pairs per head: packed {pairs['packed']:,}, padded "
        f"{pairs['padded']:,} ({pairs['padded'] / pairs['packed']:.1f}x), one masked call "
        f"over the packed tokens {pairs['packed_one_masked_call']:,}"
    )
    ms = results["ms"]
    say("  median ms: " + ", ".join(f"{side} {ms[side]['median']:.1f}" for side in SIDES))
    for name, entry in results["ratio"].items():
        say(f"  {name}: median {entry['median']:.3f} (q1 {entry['q1']:.3f}, q3 {entry['q3']:.3f})")
    say(f"  outputs agree: {results['outputs_agree']}; packed faster: {results['packed_faster']}")
    environment = results["environment"]
    load = environment["load_average"]
    loads = (
        f", load {load['before'][0]:.2f} before, {load['after'][0]:.2f} after"
        if load["before"] and load["after"]
        else ""
    )
    say(
        f"{environment['cpu']}, {environment['cpu_count']} CPUs, {environment['threads']} "
        f"threads{loads}; torch {environment['torch']}"
    )


if __name__ == "__main__":
    main()
