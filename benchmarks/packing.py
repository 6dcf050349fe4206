"""Part V (c): packed against padded prefill attention for the serving batch.

The 32 prompts of ``benchmarks/workload.py``'s :func:`serving_batch` (seed 0 by
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
from itertools import accumulate

import harness
import torch
import workload
from harness import quartiles, ratios, say

from attention import attend, causal_mask, padding_mask, varlen_attention

SIDES = ("packed", "padded_mask", "padded_causal")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = workload.parser(__doc__.split("\n\n")[0], "prompt length")
    return workload.parse(parser, argv)


def prompt_lengths(seed: int = 0, scale: float = 1.0) -> list[int]:
    """The serving batch's prompt lengths, each times ``scale`` (at least 1)."""
    batch = workload.serving_batch(seed)
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
    with torch.no_grad():
        return harness.paired_rounds(ways, args.rounds, warmup=args.warmup).times


def summarize(times: dict[str, list[float]]) -> dict:
    """Milliseconds per way and the ratios round by round, as quartiles."""
    per_round = {f"packed_over_{side}": ratios(times["packed"], times[side]) for side in SIDES[1:]}
    return {
        "ms": harness.ms(times),
        "ratio": {name: quartiles(values) for name, values in per_round.items()},
        "ratios": per_round,
        "packed_faster": all(quartiles(r)["median"] < 1.0 for r in per_round.values()),
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = harness.load_average()
    lengths = prompt_lengths(args.seed, args.length_scale)
    data = inputs(lengths, args)
    ways = calls(data)
    difference = check(data, ways)
    times = measure(args, ways)
    results = {
        # The machine's 1, 5 and 15-minute load averages before and after the run.
        **harness.header(
            "packing", args, load_average={"before": load_before, "after": harness.load_average()}
        ),
        "prompt_lengths": lengths,
        "counts": counts(lengths),
        "max_abs_difference": difference,
        "outputs_agree": all(value <= 1e-4 for value in difference.values()),
        **summarize(times),
        "times_s": times,
    }
    return harness.finish(results, args.out, report)


def report(results: dict) -> None:
    """The summary, on stderr."""
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


if __name__ == "__main__":
    main()
