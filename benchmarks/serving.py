"""Part V (a) and (b): the paged KV cache's memory and decode step for the serving batch.

The 32 requests of ``benchmarks/workload.py``'s :func:`serving_batch` (seed 0 by
default), side by side in one run:

* (a) **peak cache memory.** The batch is served as a server would: every request is
  admitted at once, its prompt prefilled, then one decode step at a time appends a
  token to every running request, and a request is freed when its answer is complete.
  A :class:`~attention.PagedKVCache` (``--block-size`` 16, vLLM's default) does the block
  accounting for real, step by step (one number per key and value: only the count of
  blocks matters); the peak is the most blocks in use at any step. A contiguous cache
  per request reserves ``MAX_LENGTH`` (4096) tokens for each, whatever it will hold;
  ``padded`` is the stricter comparison, every request reserved only the batch's
  longest length. Tokens become bytes with Llama 3 8B's key/value heads over all its
  layers in bfloat16, from ``attention.MODELS``. Target: paged <= 60% of contiguous.
* (b) **decode-step time.** Every request at its final length (prompt plus answer, the
  heaviest step), one new query each, through one attention layer, with the same
  numbers:

  - ``paged``: :func:`~attention.paged_attention` over the block tables, which copies
    each sequence's blocks out through its table and attends sequence by sequence over
    only the tokens it holds;
  - ``padded``: :func:`~attention.attend` over one contiguous ``(32, kv_heads,
    longest, head_dim)`` batch with a padding mask, which computes every request's
    padding to the longest too;
  - ``contiguous``: the same loop as ``paged`` over one ready contiguous cache per
    sequence, so that paged / contiguous is the price of the gather alone;
  - ``gather``: only the copies ``paged`` makes, what reading through block tables
    costs on a CPU (a fused GPU kernel, such as vLLM's, reads the blocks in place).

  The toy layer: ``--heads`` 8 query heads over ``--kv-heads`` 2 key/value heads of
  ``--head-dim`` 64, float32, ``--threads`` 2. Each round times the four in an order
  reversed every other round; the first ``--warmup`` rounds are dropped; the ratios are
  taken round by round and their medians reported. Target: paged / padded <= 1.5x.
  Checked, untimed: paged agrees with padded and contiguous (float32, 1e-5).

A missed target is reported, not an error: this is a measurement. Timings on a shared
machine are noisy: the JSON has the CPU's model name, versions and the load average
before and after; repeat it.

Usage::

    python benchmarks/serving.py                 # JSON on stdout, the summary on stderr
    python benchmarks/serving.py --quick         # 3 timed rounds
    python benchmarks/serving.py --out serving.json
"""

from __future__ import annotations

import argparse
import math

import harness
import torch
import workload
from harness import quartiles, ratios, say

from attention import MODELS, PagedKVCache, attend, padding_mask, paged_attention
from attention.models import kv_cache_bytes_per_token

SIDES = ("paged", "padded", "contiguous", "gather")
MODEL = "Llama 3 8B"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = workload.parser(__doc__.split("\n\n")[0], "prompt and answer length")
    parser.add_argument("--block-size", type=int, default=16, help="tokens per block")
    return workload.parse(parser, argv, "block_size")


def requests(seed: int = 0, scale: float = 1.0) -> list[tuple[int, int]]:
    """The serving batch's (prompt, answer) lengths, each times ``scale`` (at least 1)."""
    return [
        (max(1, round(p * scale)), max(1, round(a * scale)))
        for p, a in workload.serving_batch(seed)
    ]


def peak_memory(batch: list[tuple[int, int]], block_size: int, max_length: int) -> dict:
    """(a): the most token slots each way holds at any step of serving the batch.

    Paged: a real PagedKVCache, every prompt prefilled, then one token per running
    request per step, each request freed when its answer is complete.
    """
    one = torch.zeros(1, 1, 1)
    needed = sum(math.ceil((p + a) / block_size) for p, a in batch)
    cache = PagedKVCache(needed, block_size, num_kv_heads=1, head_dim=1)
    for seq_id, (prompt, _) in enumerate(batch):
        cache.add(seq_id)
        cache.update(seq_id, one.expand(prompt, 1, 1), one.expand(prompt, 1, 1))
    peak = cache.num_blocks - cache.num_free_blocks
    left = {seq_id: answer for seq_id, (_, answer) in enumerate(batch)}
    steps = 0
    while left:
        steps += 1
        for seq_id in list(left):
            cache.update(seq_id, one, one)
            left[seq_id] -= 1
            if left[seq_id] == 0:
                cache.free(seq_id)
                del left[seq_id]
        # Measured after the step's frees: a finished request's blocks are returned
        # before the next step writes (its last token was written this step).
        in_use = cache.num_blocks - cache.num_free_blocks
        peak = max(peak, in_use)
    assert cache.num_free_blocks == cache.num_blocks  # every block came back
    longest = max(p + a for p, a in batch)
    return {
        "decode_steps": steps,
        "tokens_at_most": sum(p + a for p, a in batch),
        "slots": {
            "contiguous": len(batch) * max_length,
            "padded": len(batch) * longest,
            "paged": peak * block_size,
        },
        "paged_peak_blocks": peak,
    }


def memory_bytes(slots: dict[str, int]) -> dict:
    """Token slots as bytes of the real model's cache, all layers, bfloat16."""
    per_token = kv_cache_bytes_per_token(MODELS[MODEL], torch.bfloat16)
    return {
        "model": MODEL,
        "bytes_per_token": per_token,
        "bytes": {way: n * per_token for way, n in slots.items()},
        "paged_over_contiguous": slots["paged"] / slots["contiguous"],
        "paged_over_padded": slots["paged"] / slots["padded"],
    }


def decode_inputs(lengths: list[int], args: argparse.Namespace) -> dict:
    """The same keys and values in a paged cache and in a padded contiguous batch."""
    generator = torch.Generator().manual_seed(args.seed)
    kv_shape = (args.kv_heads, args.head_dim)
    blocks = sum(math.ceil(n / args.block_size) for n in lengths)
    cache = PagedKVCache(blocks, args.block_size, args.kv_heads, args.head_dim)
    longest = max(lengths)
    keys = torch.zeros(len(lengths), args.kv_heads, longest, args.head_dim)
    values = torch.zeros_like(keys)
    for seq_id, n in enumerate(lengths):
        k = torch.randn(n, *kv_shape, generator=generator)
        v = torch.randn(n, *kv_shape, generator=generator)
        cache.add(seq_id)
        cache.update(seq_id, k, v)
        keys[seq_id, :, :n] = k.transpose(0, 1)
        values[seq_id, :, :n] = v.transpose(0, 1)
    queries = torch.randn(len(lengths), args.heads, 1, args.head_dim, generator=generator)
    allowed = padding_mask(lengths, longest)[:, None, None, :]  # (batch, 1, 1, longest)
    # One contiguous cache per sequence, (1, kv_heads, length, dim): no padding, no gather.
    own = [
        (keys[b : b + 1, :, :n].contiguous(), values[b : b + 1, :, :n].contiguous())
        for b, n in enumerate(lengths)
    ]
    return {
        "cache": cache,
        "queries": queries,
        "padded": (keys, values),
        "allowed": allowed,
        "contiguous": own,
    }


def calls(data: dict) -> dict:
    """The ways, each a function of no arguments, in the order of ``SIDES``."""
    cache, queries, (keys, values), allowed = (
        data["cache"],
        data["queries"],
        data["padded"],
        data["allowed"],
    )
    seq_ids = list(range(queries.shape[0]))

    def gather():  # what paged_attention copies before attending: each sequence's blocks
        # Each copy is dropped before the next, as in paged_attention, so that the
        # allocator reuses the memory (keeping all of them costs fresh pages instead).
        shape = (-1, cache.num_kv_heads, cache.head_dim)
        for s in seq_ids:
            index = torch.tensor(cache._tables[s], dtype=torch.long)
            cache.key_blocks.index_select(0, index).view(shape)
            cache.value_blocks.index_select(0, index).view(shape)

    own = data["contiguous"]

    def contiguous():  # sequence by sequence, each over its own contiguous cache
        return torch.cat([attend(queries[b : b + 1], *own[b]) for b in seq_ids])

    return {
        "paged": lambda: paged_attention(queries, cache, seq_ids),
        "padded": lambda: attend(queries, keys, values, allowed=allowed),
        "contiguous": contiguous,
        "gather": gather,
    }


def measure(args: argparse.Namespace, ways: dict) -> dict[str, list[float]]:
    """Paired alternating rounds: each round times every way, the order reversed every
    other round; the warm-up rounds are dropped."""
    with torch.no_grad():
        return harness.paired_rounds(ways, args.rounds, warmup=args.warmup).times


def summarize(times: dict[str, list[float]]) -> dict:
    """Milliseconds per way and the ratios round by round, as quartiles."""
    per_round = {
        name: ratios(times[top], times[bottom])
        for name, top, bottom in (
            ("paged_over_padded", "paged", "padded"),
            ("paged_over_contiguous", "paged", "contiguous"),
            ("gather_over_paged", "gather", "paged"),
        )
    }
    return {
        "ms": harness.ms(times),
        "ratio": {name: quartiles(values) for name, values in per_round.items()},
        "ratios": per_round,
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    load_before = harness.load_average()
    batch = requests(args.seed, args.length_scale)
    memory = peak_memory(batch, args.block_size, workload.MAX_LENGTH)
    memory |= memory_bytes(memory["slots"])
    lengths = [p + a for p, a in batch]
    data = decode_inputs(lengths, args)
    ways = calls(data)
    with torch.no_grad():
        paged = ways["paged"]()
        difference = max(
            (paged - ways[side]()).abs().max().item() for side in ("padded", "contiguous")
        )
    times = measure(args, ways)
    summary = summarize(times)
    results = {
        # The machine's 1, 5 and 15-minute load averages before and after the run.
        **harness.header(
            "serving", args, load_average={"before": load_before, "after": harness.load_average()}
        ),
        "requests": batch,
        "max_length": workload.MAX_LENGTH,
        "memory": memory,
        "memory_target_met": memory["paged_over_contiguous"] <= 0.6,
        "decode_lengths": lengths,
        "max_abs_difference": difference,
        "outputs_agree": difference <= 1e-5,
        **summary,
        "decode_target_met": summary["ratio"]["paged_over_padded"]["median"] <= 1.5,
        "times_s": times,
    }
    return harness.finish(results, args.out, report)


def report(results: dict) -> None:
    """The summary, on stderr."""
    memory = results["memory"]
    slots, size = memory["slots"], memory["bytes"]
    gib = {way: n / 2**30 for way, n in size.items()}
    say(
        f"(a) peak cache for {len(results['requests'])} requests over "
        f"{memory['decode_steps']} decode steps ({memory['model']}, bfloat16, all layers):"
    )
    say(
        f"  contiguous at {results['max_length']}: {slots['contiguous']:,} slots "
        f"{gib['contiguous']:.2f} GiB; padded to the longest: {slots['padded']:,} slots "
        f"{gib['padded']:.2f} GiB; paged: {slots['paged']:,} slots {gib['paged']:.2f} GiB"
    )
    say(
        f"  paged / contiguous {memory['paged_over_contiguous']:.3f} (target <= 0.6: "
        f"{results['memory_target_met']}); paged / padded {memory['paged_over_padded']:.3f}"
    )
    ms = results["ms"]
    say(
        "(b) decode step, median ms: "
        + ", ".join(f"{side} {ms[side]['median']:.2f}" for side in SIDES)
    )
    for name, entry in results["ratio"].items():
        say(f"  {name}: median {entry['median']:.3f} (q1 {entry['q1']:.3f}, q3 {entry['q3']:.3f})")
    say(
        f"  outputs agree: {results['outputs_agree']}; paged <= 1.5x padded: "
        f"{results['decode_target_met']}"
    )


if __name__ == "__main__":
    main()
