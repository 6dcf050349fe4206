"""Per-token decode latency with a KV cache: GroupedQueryAttention vs transformers' LlamaAttention.

One attention layer with Llama 3 8B's head layout (``d_in`` 4096, 32 query heads, 8
key/value heads, head_dim 128, RoPE base 500000, no bias anywhere: ours is built with
``out_bias=False``), float32, on 2 threads by default. Both modules hold the same
weights; each has a cache already holding ``N`` tokens (1024 and 4096 by default: the
same random keys and values, put in through each cache's own ``update``). A *step* is
one new token: its projections, RoPE, the cache append and attention over ``N + 1``
keys. For ``transformers`` the step includes the ``LlamaRotaryEmbedding`` call that
makes its cos and sin, since a model does that once per step too (here, for one layer).
After each step both caches are cropped back to ``N`` tokens, so every step sees the
same cache length.

How it is measured:

* **Alternating paired rounds.** Each round times one step of each module, the order
  alternating from round to round, so that drift in the machine's speed hits both
  alike. The first ``--warmup`` rounds are dropped.
* **The ratio is taken per round**, ours / transformers', and its median reported,
  with the median time per step of each side and their interquartile ranges.
* **Checks, not timed:** the two steps' outputs agree (float32, tolerance 1e-4), and
  the cache's memory equals ``2 * layers * kv_heads * head_dim * 4 bytes * N`` (here
  one layer) for both caches.
* **Run-to-run spread.** One run can be lucky, so the whole paired measurement (every
  cache length, fresh caches) is repeated ``--repeats`` times (5 by default, 1 with
  ``--quick``) in the same process. Each run's median ratio is reported per cache
  length, and the target, ours no slower than ``transformers``, counts as met only if
  every run's median ratio is at most 1.0 at every cache length. Separate invocations
  can differ more than runs in one process do (thread placement, the allocator's
  state): repeat the command too, and report the machine.
* **Minor page faults per step** (``getrusage``), the median per run and side. A step
  whose cache append allocates a fresh multi-megabyte tensor may get it from
  ``mmap``, and then pays a fault for each of its pages on first touch; whether it
  does depends on the allocator's state, which differs from one process to the next.
  Before ``KVCache`` wrote in place, one of two runs of this benchmark on a 2-core
  AMD EPYC had ours at about 1000 faults per step with 1024 cached tokens (4 MB of
  fresh pages per step), the other at 0: a jump between runs that the paired rounds
  cannot cancel. ``transformers``' ``DynamicCache`` still appends with ``torch.cat``.

Usage::

    python benchmarks/decode.py                 # the full run, JSON on stdout
    python benchmarks/decode.py --quick         # a short run (fewer rounds, one repeat)
    python benchmarks/decode.py --repeats 10    # ten runs of the paired measurement
    python benchmarks/decode.py --out decode.json
    python benchmarks/decode.py --window 512 --rolling-cached 1024 8192
    python benchmarks/decode.py --rolling-cached   # no rolling-cache rows

**The rolling cache** (``rolling_rows``). The same layer, ours only, full attention
against a window of ``--window`` tokens (1024 by default, Gemma 3's), each with a cache
that has seen ``N`` tokens (``--rolling-cached``, 1024, 4096 and 16384 by default):
the full one holds all ``N`` (cropped back after each step, as above), the windowed
one only the last ``window - 1``, a ``KVCache(window=...)`` filled by its ``update`` and
left to roll, so its positions go on counting. Each round times one step of each
side at every cache length (six steps by default), the order reversed every other
round, so that a drift in the machine's speed hits every length alike; the first step
of the windowed module is checked against the same step on a copy of the full cache
(not rolled, masked instead), and each cache's bytes against the formula. The target:
the windowed step stays flat while the full one grows. Round by round, each side's
step at the longest cache is divided by its step at the shortest; every run's median
of that ratio must be at most 1.2 for the windowed side and above 1.2 for the full one.

A missed target (ratio above 1) is reported, not an error: this is a measurement.
"""

from __future__ import annotations

import argparse
import platform
import statistics
from pathlib import Path

import harness
import torch
import transformers
from harness import page_faults, pooled, quartiles, ratios, say
from transformers import DynamicCache, LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

from attention import GroupedQueryAttention, KVCache, Rotary, kv_cache_bytes_per_token


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="a short run: 6 rounds, 2 warm-up, 1 repeat"
    )
    parser.add_argument("--cached", type=int, nargs="+", default=[1024, 4096], help="cache lengths")
    parser.add_argument(
        "--rolling-cached",
        type=int,
        nargs="*",
        default=[1024, 4096, 16384],
        help="tokens seen by the rolling-cache rows' caches (none: no such rows)",
    )
    parser.add_argument("--window", type=int, default=1024, help="the rolling rows' window")
    parser.add_argument("--rounds", type=int, default=60, help="timed rounds per cache length")
    parser.add_argument("--warmup", type=int, default=5, help="rounds dropped before timing")
    parser.add_argument(
        "--repeats", type=int, help="runs of the whole paired measurement (default 5; quick: 1)"
    )
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
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    if args.repeats < 1 or args.rounds < 1 or args.warmup < 0:
        parser.error("--repeats and --rounds must be at least 1, --warmup at least 0")
    if args.window < 1 or min(args.cached + args.rolling_cached) < 1:
        parser.error("--window and every cache length must be at least 1")
    return args


def build(args: argparse.Namespace) -> tuple[GroupedQueryAttention, LlamaAttention, LlamaConfig]:
    """The package's module and transformers', with the same weights, float32, eval mode."""
    d_out = args.num_heads * args.head_dim
    torch.manual_seed(args.seed)
    ours = GroupedQueryAttention(
        args.d_in,
        d_out,
        context_length=max(args.cached + args.rolling_cached) + 1,
        num_heads=args.num_heads,
        num_kv_heads=args.num_kv_heads,
        rotary=Rotary(d_out // args.num_heads, args.rope_base),
        out_bias=False,  # Llama's o_proj has no bias
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
        for mine, name in (("W_query", "q_proj"), ("W_key", "k_proj"), ("W_value", "v_proj")):
            getattr(theirs, name).weight.copy_(getattr(ours, mine).weight)
        theirs.o_proj.weight.copy_(ours.out_proj.weight)
    return ours, theirs, config


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
        steps = {"ours": our_step, "transformers": their_step}
        timed = harness.paired_rounds(steps, args.rounds, warmup=args.warmup, counter=page_faults)
    times, faults = timed.times, timed.counts
    return {
        "cached_tokens": num_cached,
        "max_abs_difference": difference,
        "outputs_agree": difference <= 1e-4,
        "memory": memory,
        "ms_per_token": harness.ms(times),
        "ratio_ours_over_transformers": quartiles(ratios(times["ours"], times["transformers"])),
        "page_faults_per_step": {name: statistics.median(f) for name, f in faults.items()},
        "times_s": times,
    }


def summarize(runs: list[list[dict]]) -> list[dict]:
    """One row per cache length over every run: pooled figures and each run's median ratio."""
    rows = []
    for per_length in zip(*runs, strict=True):
        first, times = per_length[0], pooled(per_length)
        run_medians = [row["ratio_ours_over_transformers"]["median"] for row in per_length]
        rows.append(
            pooled_checks(per_length)
            | {
                "ms_per_token": harness.ms(times),
                "ratio_ours_over_transformers": quartiles(
                    ratios(times["ours"], times["transformers"])
                ),
                "median_ratio_per_run": run_medians,
                "page_faults_per_step": {
                    name: [row["page_faults_per_step"][name] for row in per_length]
                    for name in first["page_faults_per_step"]
                },
                "times_s": times,
            }
        )
    return rows


def pooled_checks(per_length: list[dict]) -> dict:
    """One cache length's untimed checks over every run: each must hold in all."""
    first = per_length[0]
    return {
        "cached_tokens": first["cached_tokens"],
        "max_abs_difference": max(row["max_abs_difference"] for row in per_length),
        "outputs_agree": all(row["outputs_agree"] for row in per_length),
        "memory": first["memory"] | {"equal": all(r["memory"]["equal"] for r in per_length)},
    }


def build_windowed(args: argparse.Namespace, ours: GroupedQueryAttention) -> GroupedQueryAttention:
    """``ours`` with a window: the same weights; positions go on past the longest cache."""
    steps = args.warmup + args.rounds + 1  # the checked step, then every round's
    windowed = GroupedQueryAttention(
        ours.d_in,
        ours.d_out,
        context_length=max(args.rolling_cached, default=0) + steps,
        num_heads=ours.num_heads,
        num_kv_heads=ours.num_kv_heads,
        rotary=ours.rotary,
        out_bias=False,
        window=args.window,
    ).eval()
    windowed.load_state_dict(ours.state_dict())
    return windowed


def rolling_steps(args, full, windowed, num_cached: int) -> dict:
    """One cache length's two steps, full and windowed, and their untimed checks."""
    generator = torch.Generator().manual_seed(args.seed + num_cached)
    shape = (1, args.num_kv_heads, num_cached, args.head_dim)
    keys, values = torch.randn(2, *shape, generator=generator)
    full_cache, rolling = KVCache(), KVCache(window=args.window)
    full_cache.update(keys.clone(), values.clone())
    rolling.update(keys.clone(), values.clone())  # keeps window - 1
    x = torch.randn(1, 1, args.d_in, generator=generator)  # the new token

    def full_step() -> torch.Tensor:
        out = full(x, cache=full_cache)
        full_cache.crop(num_cached)
        return out

    def windowed_step() -> torch.Tensor:
        return windowed(x, cache=rolling)  # rolls: the cache stays at window - 1 tokens

    per_token = kv_cache_bytes_per_token(1, args.num_kv_heads, args.head_dim, torch.float32)
    memory = {
        "full_bytes": full_cache.nbytes,
        "windowed_bytes": rolling.nbytes,
        "window_bytes": per_token * args.window,  # the bound
    }
    memory["equal"] = (
        full_cache.nbytes == per_token * num_cached
        and rolling.nbytes == per_token * min(num_cached, args.window - 1) <= memory["window_bytes"]
    )
    # The first rolling step against the same step masked over the whole cache.
    masked = KVCache()
    masked.update(keys.clone(), values.clone())
    difference = (windowed_step() - windowed(x, cache=masked)).abs().max().item()
    return {
        "cached_tokens": num_cached,
        "max_abs_difference": difference,
        "outputs_agree": difference <= 1e-4,
        "memory": memory,
        "steps": {"full": full_step, "windowed": windowed_step},
        "cache": rolling,
    }


def measure_rolling(args, full, windowed, lengths: list[int]) -> dict:
    """Rounds that time one step of each side at each cache length, the order reversed
    every other round, so that the machine's drift hits every length and side alike."""
    with torch.no_grad():
        rows = [rolling_steps(args, full, windowed, n) for n in lengths]
        steps = {
            (row["cached_tokens"], side): step
            for row in rows
            for side, step in row["steps"].items()
        }
        times = harness.paired_rounds(steps, args.rounds, warmup=args.warmup).times
    shortest, longest = lengths[0], lengths[-1]
    growth = {
        side: ratios(times[longest, side], times[shortest, side]) for side in ("full", "windowed")
    }
    for row in rows:
        row["memory"]["windowed_bytes_after"] = row.pop("cache").nbytes
        del row["steps"]
        row["times_s"] = {side: times[row["cached_tokens"], side] for side in ("full", "windowed")}
        row["ms_per_token"] = harness.ms(row["times_s"])
    return {"rows": rows, "growth": growth}


def summarize_rolling(runs: list[dict]) -> tuple[list[dict], dict]:
    """One row per cache length (pooled times, each run's median per side), and the target.

    The growth is taken round by round, the longest cache's step over the shortest's,
    and each run's median reported.
    """
    rows = []
    for per_length in zip(*(run["rows"] for run in runs), strict=True):
        times = pooled(per_length)
        rows.append(
            pooled_checks(per_length)
            | {
                "ms_per_token": harness.ms(times),
                "median_ms_per_run": {
                    name: [row["ms_per_token"][name]["median"] for row in per_length]
                    for name in times
                },
                "times_s": times,
            }
        )
    if len(rows) < 2:
        return rows, {"what": "needs two cache lengths or more", "met": None}
    growth = {
        side: [statistics.median(run["growth"][side]) for run in runs]
        for side in ("full", "windowed")
    }
    shortest, longest = rows[0]["cached_tokens"], rows[-1]["cached_tokens"]
    target = {
        "what": (
            f"every run's median ratio, round by round, of the windowed step at {longest} "
            f"tokens seen to the one at {shortest} <= 1.2, and of the full step > 1.2"
        ),
        "growth_per_run": growth,
        "worst_windowed_growth": max(growth["windowed"]),
        "least_full_growth": min(growth["full"]),
        "met": max(growth["windowed"]) <= 1.2 < min(growth["full"]),
    }
    return rows, target


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    ours, theirs, config = build(args)
    rotary = LlamaRotaryEmbedding(config)
    results = harness.header("decode", args, transformers, processor=platform.processor())
    runs = [
        [measure(args, ours, theirs, rotary, n) for n in args.cached] for _ in range(args.repeats)
    ]
    results["rows"] = summarize(runs)
    worst = {row["cached_tokens"]: max(row["median_ratio_per_run"]) for row in results["rows"]}
    results["target"] = {
        "what": "every run's median ratio ours / transformers <= 1.0 at every cache length",
        "worst_run_median_ratio": worst,
        "met": all(ratio <= 1.0 for ratio in worst.values()),
    }
    lengths = sorted(args.rolling_cached)
    if lengths:
        windowed = build_windowed(args, ours)
        rolling_runs = [measure_rolling(args, ours, windowed, lengths) for _ in range(args.repeats)]
        results["rolling_rows"], results["rolling_target"] = summarize_rolling(rolling_runs)
    return harness.finish(results, args.out, report)


def report(results: dict) -> None:
    """Each row, the rolling rows and the targets, on stderr."""
    for row in results["rows"]:
        ms, ratio = row["ms_per_token"], row["ratio_ours_over_transformers"]["median"]
        per_run = ", ".join(f"{r:.3f}" for r in row["median_ratio_per_run"])
        faults = row["page_faults_per_step"]
        say(
            f"{row['cached_tokens']:>6} cached: GroupedQueryAttention "
            f"{ms['ours']['median']:.2f} ms, LlamaAttention {ms['transformers']['median']:.2f} ms, "
            f"median ratio {ratio:.3f} (per run: {per_run}); page faults per step "
            f"{faults['ours']} vs {faults['transformers']}; "
            f"memory == formula: {row['memory']['equal']}"
        )
    window = results["settings"]["window"]
    for row in results.get("rolling_rows", []):
        ms, memory = row["ms_per_token"], row["memory"]
        say(
            f"{row['cached_tokens']:>6} seen: full {ms['full']['median']:.2f} ms "
            f"({memory['full_bytes'] / 2**20:.1f} MiB cached), window {window} "
            f"{ms['windowed']['median']:.2f} ms ({memory['windowed_bytes'] / 2**20:.1f} MiB); "
            f"outputs agree: {row['outputs_agree']}; memory == formula: {memory['equal']}"
        )
    if "rolling_target" in results:
        rolling = results["rolling_target"]
        verdict = {True: "met", False: "missed", None: "not measured"}[rolling["met"]]
        say(f"rolling target ({rolling['what']}): {verdict}")
    target = results["target"]
    say(f"target ({target['what']}): {'met' if target['met'] else 'missed'}")


if __name__ == "__main__":
    main()
