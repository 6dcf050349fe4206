"""Per-token decode latency with a KV cache: GroupedQueryAttention vs transformers' LlamaAttention.

One attention layer with Llama 3 8B's head layout (``d_in`` 4096, 32 query heads,
8 key/value heads, head_dim 128, RoPE base 500000), float32, on 2 threads by default.
Both modules hold the same weights; each has a cache already holding ``N`` tokens
(1024 and 4096 by default: the same random keys and values, put in through each cache's
own ``update``). A *step* is one new token: its projections, RoPE, the cache append
and attention over ``N + 1`` keys. For ``transformers`` the step includes the
``LlamaRotaryEmbedding`` call that makes its cos and sin, since a model does that once
per step too (here, for one layer). After each step both caches are cropped back to
``N`` tokens, so every step sees the same cache length.

How it is measured:

* **Alternating paired rounds.** Each round times one step of each module, the order
  alternating from round to round, so that drift in the machine's speed hits both
  alike. The first ``--warmup`` rounds are dropped.
* **The ratio is taken per round**, ours / transformers', and its median reported,
  with the median time per step of each side and their interquartile ranges.
* **Checks, not timed:** the two steps' outputs agree (float32, tolerance 1e-4), and
  the cache's memory equals ``2 * layers * kv_heads * head_dim * 4 bytes * N`` (here
  one layer) for both caches.

Usage::

    python benchmarks/decode.py                 # the full run, JSON on stdout
    python benchmarks/decode.py --quick         # a short run (fewer rounds)
    python benchmarks/decode.py --out decode.json

A missed target (ratio above 1) is reported, not an error: this is a measurement.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers
from transformers import DynamicCache, LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

from attention import GroupedQueryAttention, KVCache, kv_cache_bytes_per_token


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run: 6 rounds, 2 warm-up")
    parser.add_argument("--cached", type=int, nargs="+", default=[1024, 4096], help="cache lengths")
    parser.add_argument("--rounds", type=int, default=60, help="timed rounds per cache length")
    parser.add_argument("--warmup", type=int, default=5, help="rounds dropped before timing")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--d-in", type=int, default=4096)
    parser.add_argument("--num-heads", type=int, default=32)
    parser.add_argument("--num-kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--rope-base", type=float, default=500000.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup = 6, 2
    return args


def build(args: argparse.Namespace) -> tuple[GroupedQueryAttention, LlamaAttention, LlamaConfig]:
    """The package's module and transformers', with the same weights, float32, eval mode."""
    d_out = args.num_heads * args.head_dim
    torch.manual_seed(args.seed)
    ours = GroupedQueryAttention(
        args.d_in,
        d_out,
        context_length=max(args.cached) + 1,
        num_heads=args.num_heads,
        num_kv_heads=args.num_kv_heads,
        rope_base=args.rope_base,
    ).eval()
    config = LlamaConfig(
        hidden_size=args.d_in,
        num_attention_heads=args.num_heads,
        num_key_value_heads=args.num_kv_heads,
        head_dim=args.head_dim,
        max_position_embeddings=max(args.cached) + 1,
        rope_parameters={"rope_type": "default", "rope_theta": args.rope_base},
        attn_implementation="sdpa",
    )
    if args.d_in != d_out:
        raise SystemExit("Llama maps hidden_size to itself: need d_in == num_heads * head_dim")
    theirs = LlamaAttention(config, layer_idx=0).eval()
    with torch.no_grad():
        ours.out_proj.bias.zero_()  # Llama's o_proj has no bias
        for mine, name in (("W_query", "q_proj"), ("W_key", "k_proj"), ("W_value", "v_proj")):
            getattr(theirs, name).weight.copy_(getattr(ours, mine).weight)
        theirs.o_proj.weight.copy_(ours.out_proj.weight)
    return ours, theirs, config


def quartiles(values: list[float]) -> dict[str, float]:
    q1, median, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return {"median": median, "q1": q1, "q3": q3}


def measure(args, ours, theirs, rotary, num_cached: int) -> dict:
    generator = torch.Generator().manual_seed(args.seed + num_cached)
    shape = (1, args.num_kv_heads, num_cached, args.head_dim)
    keys, values = torch.randn(2, *shape, generator=generator)
    our_cache, their_cache = KVCache(), DynamicCache()
    our_cache.update(keys.clone(), values.clone())
    their_cache.update(keys.clone(), values.clone(), 0)
    x = torch.randn(1, 1, args.d_in, generator=generator)  # the new token
    position = torch.tensor([[num_cached]])

    def our_step() -> torch.Tensor:
        out = ours(x, cache=our_cache)
        our_cache.crop(num_cached)
        return out

    def their_step() -> torch.Tensor:
        cos_sin = rotary(x, position)
        # The cache goes 4th, by position: `past_key_values` before transformers 5.24, `cache`
        # after, and the old keyword warns (FutureWarning) from 5.24 on.
        out, _ = theirs(x, cos_sin, None, their_cache)
        their_cache.crop(-1)
        return out

    with torch.no_grad():
        formula = kv_cache_bytes_per_token(1, args.num_kv_heads, args.head_dim, torch.float32)
        their_bytes = sum(
            t.nbytes for t in (their_cache.layers[0].keys, their_cache.layers[0].values)
        )
        memory = {
            "formula_bytes": formula * num_cached,
            "ours_bytes": our_cache.nbytes,
            "transformers_bytes": their_bytes,
        }
        memory["equal"] = memory["formula_bytes"] == our_cache.nbytes == their_bytes
        difference = (our_step() - their_step()).abs().max().item()
        times: dict[str, list[float]] = {"ours": [], "transformers": []}
        ratios = []
        for round_index in range(args.warmup + args.rounds):
            steps = [("ours", our_step), ("transformers", their_step)]
            if round_index % 2:
                steps.reverse()
            taken = {}
            for name, step in steps:
                start = time.perf_counter()
                step()
                taken[name] = time.perf_counter() - start
            if round_index >= args.warmup:
                for name, seconds in taken.items():
                    times[name].append(seconds)
                ratios.append(taken["ours"] / taken["transformers"])
    return {
        "cached_tokens": num_cached,
        "max_abs_difference": difference,
        "outputs_agree": difference <= 1e-4,
        "memory": memory,
        "ms_per_token": {name: quartiles([t * 1e3 for t in ts]) for name, ts in times.items()},
        "ratio_ours_over_transformers": quartiles(ratios),
        "times_s": times,
    }


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    ours, theirs, config = build(args)
    rotary = LlamaRotaryEmbedding(config)
    results = {
        "benchmark": "decode",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "machine": platform.machine(),
            "processor": platform.processor(),
            "threads": torch.get_num_threads(),
        },
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "rows": [measure(args, ours, theirs, rotary, n) for n in args.cached],
    }
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    for row in results["rows"]:
        ms, ratio = row["ms_per_token"], row["ratio_ours_over_transformers"]["median"]
        print(
            f"{row['cached_tokens']:>6} cached: GroupedQueryAttention "
            f"{ms['ours']['median']:.2f} ms, LlamaAttention {ms['transformers']['median']:.2f} ms, "
            f"median ratio {ratio:.3f}; memory == formula: {row['memory']['equal']}",
            file=sys.stderr,
        )
    return results


if __name__ == "__main__":
    main()
