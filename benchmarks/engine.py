"""The serving engine (``attention.serving``) against ``transformers``' own two ways.

One tiny Llama-family model built from a config (seeded random weights, float32),
and one request trace: ``--num-requests`` (32) requests, each one of ``--systems`` (4)
shared system prompts of ``--system-length`` (48) tokens followed by a user part of 8
to 40 tokens, all asking for ``--max-new-tokens`` (16) tokens, greedy. Three ways
serve the whole trace:

* ``engine``: :class:`~attention.serving.Engine` over a
  :class:`~attention.serving.ModelRunner`, continuous batching with chunked prefill
  (``--max-batch-tokens`` 256 a step) and automatic prefix caching, a pool of
  ``--num-blocks`` (128) blocks of ``--block-size`` (16) tokens;
* ``generate_batch``: ``transformers``' continuous batching, given the same pool
  (``ContinuousBatchingConfig(num_blocks, page_size, max_batch_tokens)``), its block
  sharing on, no warm-up call;
* ``generate``: plain ``model.generate``, one request at a time.

On a model this small every operation is tiny, and waking a thread pool costs more
than the arithmetic: on a busy two-core machine, two threads made the engine (many
small operations a step) 20 times slower and the others barely faster, so the default
is ``--threads`` 1.

Each round serves the trace once each way, in an order reversed every other round;
the first ``--warmup`` rounds are dropped; each round's tokens per second are divided
within the round, and the ratios' medians and quartiles reported. Also reported,
untimed: the peak cache each way holds (the engine's most blocks in use at once;
``generate_batch``'s cache tensor, every block of its pool; ``generate``'s largest
request's ``DynamicCache``, every layer's keys and values), the prefix cache's hit
rate (the share of the admitted requests' blocks found cached), and how many
requests get the same tokens from the engine as from ``generate``.

Speculative decoding (:func:`~attention.serving.speculative_decode`), untimed: every
prompt of the trace, ``--max-new-tokens`` tokens, greedy, a draft tree of
``--branching`` (2,2: two guesses, then two after each) verified by the same target
model a step. The target is the benchmark's model as a
:class:`~attention.serving.Decoder` (:meth:`~attention.serving.Decoder.from_transformers`)
in float64, so that verifying a tree and decoding one token at a time cannot differ by
rounding at a near tie. Two drafts: ``small_config``, its own random weights from a
smaller config (1 layer of width 32, 2 query heads over 1 key/value head of 16, the
target's vocabulary), the draft the issue asks for; and ``first_layer``, the target's
embedding, first block, final norm and head, a draft that resembles its target as a
trained one would. Reported for each: the tokens accepted per target call (the bonus
token included), pooled over the trace and as quartiles of each prompt's mean, the
target calls, and how many prompts get exactly ``greedy_decode``'s tokens (all should).

**Target** (issue 45): the engine at least matches ``generate_batch`` in tokens per
second on the CPU, with no more peak cache. A missed target is reported, not an
error; timings on a shared machine are noisy, and the JSON names the machine.

Usage::

    python benchmarks/engine.py                  # JSON on stdout, the summary on stderr
    python benchmarks/engine.py --quick          # 3 timed rounds, 1 warm-up
    python benchmarks/engine.py --out engine.json
"""

from __future__ import annotations

import argparse
import copy
import logging
import random
from pathlib import Path

import harness
import torch
from harness import quartiles, ratios, say
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM
from transformers.generation.configuration_utils import ContinuousBatchingConfig

from attention.serving import (
    Decoder,
    Engine,
    ModelRunner,
    greedy_decode,
    speculative_decode,
)

SIDES = ("engine", "generate_batch", "generate")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="3 timed rounds, 1 warm-up")
    add("--rounds", type=int, default=10, help="timed rounds")
    add("--warmup", type=int, default=2, help="rounds dropped before timing")
    add("--seed", type=int, default=0, help="the trace's and the weights' seed")
    add("--num-requests", type=int, default=32)
    add("--systems", type=int, default=4, help="distinct shared system prompts")
    add("--system-length", type=int, default=48, help="tokens of each system prompt")
    add("--max-new-tokens", type=int, default=16)
    add("--num-blocks", type=int, default=128, help="the pool, both engines")
    add("--block-size", type=int, default=16, help="tokens per block, both engines")
    add("--max-batch-tokens", type=int, default=256, help="tokens per step, both engines")
    add("--threads", type=int, default=1, help="torch intra-op threads (see above)")
    add("--branching", default="2,2", help="speculative draft tree: children per depth")
    add("--out", type=Path, help="also write the JSON results here")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup = 3, 1
    sizes = ("num_requests", "systems", "system_length", "max_new_tokens", "num_blocks")
    sizes += ("block_size", "max_batch_tokens", "threads", "rounds")
    if min(getattr(args, name) for name in sizes) < 1 or args.warmup < 0:
        parser.error("every size and --rounds must be >= 1, --warmup >= 0")
    try:
        args.branching = tuple(int(width) for width in args.branching.split(","))
    except ValueError:
        parser.error(f"--branching must be ints joined by commas, got {args.branching!r}")
    if min(args.branching) < 1:
        parser.error(f"every --branching width must be >= 1, got {args.branching}")
    return args


def tiny_model(seed: int) -> torch.nn.Module:
    """The benchmark's model: 2 layers, 4 query heads over 2 key/value heads of 16."""
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=1024,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


def small_draft_model(seed: int) -> torch.nn.Module:
    """The speculative draft: 1 layer of width 32, 2 query heads over 1 key/value head."""
    config = LlamaConfig(
        vocab_size=256,  # the target's: the draft proposes the target's tokens
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        max_position_embeddings=1024,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


def speculative(model, prompts, args) -> dict:
    """Accepted tokens per target call, each draft, over every prompt; float64 (see above)."""
    target = Decoder.from_transformers(copy.deepcopy(model).double())
    drafts = {
        "small_config": Decoder.from_transformers(small_draft_model(args.seed + 1).double()),
        "first_layer": Decoder(target.embedding, [target.blocks[0]], target.norm, target.head),
    }
    greedy = [greedy_decode(target, prompt, args.max_new_tokens) for prompt in prompts]
    figures = {}
    for name, draft in drafts.items():
        outputs = [
            speculative_decode(target, draft, p, args.max_new_tokens, branching=args.branching)
            for p in prompts
        ]
        steps = [n for out in outputs for n in out.accepted_per_step]
        figures[name] = {
            "mean_accepted": sum(steps) / len(steps),
            "per_prompt_mean_accepted": quartiles([out.mean_accepted for out in outputs]),
            "accepted_per_step": [out.accepted_per_step for out in outputs],
            "target_calls": len(steps),
            "same_tokens_as_greedy": sum(
                out.tokens == tokens for out, tokens in zip(outputs, greedy, strict=True)
            ),
        }
    return {"branching": list(args.branching), "drafts": figures}


def trace(args: argparse.Namespace) -> list[list[int]]:
    """The prompts: system prompt ``i % systems``, then a user part of 8 to 40 tokens."""
    rng = random.Random(args.seed)
    systems = [
        [rng.randrange(3, 256) for _ in range(args.system_length)] for _ in range(args.systems)
    ]
    return [
        systems[i % args.systems] + [rng.randrange(3, 256) for _ in range(rng.randint(8, 40))]
        for i in range(args.num_requests)
    ]


def serve_engine(model, prompts, args) -> tuple[list[list[int]], Engine]:
    runner = ModelRunner(model, num_blocks=args.num_blocks, block_size=args.block_size)
    engine = Engine(runner, max_batch_tokens=args.max_batch_tokens)
    for prompt in prompts:
        engine.submit(prompt, args.max_new_tokens)
    outputs = engine.run()
    return [outputs[i] for i in range(len(prompts))], engine


def batch_config(args) -> ContinuousBatchingConfig:
    return ContinuousBatchingConfig(
        num_blocks=args.num_blocks,
        page_size=args.block_size,  # transformers 5.23's name for the block size
        max_batch_tokens=args.max_batch_tokens,
    )


def generation_config(args) -> GenerationConfig:
    return GenerationConfig(
        max_new_tokens=args.max_new_tokens,
        min_new_tokens=args.max_new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    )


def serve_generate_batch(model, prompts, args) -> list[list[int]]:
    results = model.generate_batch(
        prompts,
        generation_config=generation_config(args),
        continuous_batching_config=batch_config(args),
        warmup=False,
    )
    return [list(results[f"req_{i}"].generated_tokens) for i in range(len(prompts))]


def serve_generate(model, prompts, args) -> list[list[int]]:
    outputs = []
    for prompt in prompts:
        ids = torch.tensor([prompt])
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), **generation_config(args).to_diff_dict()
        )
        outputs.append(out[0, len(prompt) :].tolist())
    return outputs


def generate_batch_cache_bytes(model, prompts, args) -> int:
    """The bytes of the cache tensor ``generate_batch``'s manager allocates for this pool.

    Its batch processor, which owns the cache, is built by the generation thread when
    the first request arrives: one request is served first.
    """
    with model.continuous_batching_context_manager(
        generation_config=generation_config(args),
        continuous_batching_config=batch_config(args),
        warmup=False,
    ) as manager:
        manager.add_request(prompts[0], max_new_tokens=1)
        manager.get_result(timeout=60)
        return int(manager.batch_processor.cache.cache_tensor.nbytes)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    # transformers warns on every generate_batch call that eos_token_id is unset (on purpose).
    logging.getLogger("ContinuousBatchingLogger").setLevel(logging.ERROR)
    load_before = harness.load_average()
    model = tiny_model(args.seed)
    prompts = trace(args)
    generated = args.num_requests * args.max_new_tokens
    with torch.no_grad():
        ours, engine = serve_engine(model, prompts, args)
        theirs = serve_generate(model, prompts, args)
        batched = serve_generate_batch(model, prompts, args)
        batch_bytes = generate_batch_cache_bytes(model, prompts, args)
        calls = {
            "engine": lambda: serve_engine(model, prompts, args),
            "generate_batch": lambda: serve_generate_batch(model, prompts, args),
            "generate": lambda: serve_generate(model, prompts, args),
        }
        timed = harness.paired_rounds(calls, args.rounds, warmup=args.warmup, quiet_gc=True)
    per_second = {side: [generated / s for s in timed.times[side]] for side in SIDES}
    round_ratios = {
        "engine_over_generate_batch": ratios(per_second["engine"], per_second["generate_batch"]),
        "engine_over_generate": ratios(per_second["engine"], per_second["generate"]),
    }
    per_token = 2 * model.config.num_hidden_layers * model.config.num_key_value_heads
    per_token *= model.config.head_dim * 4  # float32 keys and values, every layer
    longest = max(len(p) for p in prompts) + args.max_new_tokens - 1
    peak = {
        "engine": engine.peak_used_blocks * engine.runner.cache_bytes_per_block,
        "engine_pool": engine.cache.nbytes,
        "generate_batch": batch_bytes,
        "generate": longest * per_token,
    }
    results = {
        **harness.header(
            "engine",
            args,
            load_average={"before": load_before, "after": harness.load_average()},
        ),
        "generated_tokens": generated,
        "prompt_lengths": [len(p) for p in prompts],
        "tokens_per_s": {side: quartiles(values) for side, values in per_second.items()},
        "ratios": round_ratios,
        "ratio": {name: quartiles(values) for name, values in round_ratios.items()},
        "peak_cache_bytes": peak,
        "prefix_hit_rate": engine.prefix_hit_rate,
        "engine_steps": len(engine.records),
        "preemptions": sum(len(r.preempted) for r in engine.records),
        "same_tokens_as_generate": sum(a == b for a, b in zip(ours, theirs, strict=True)),
        "same_tokens_as_generate_batch": sum(a == b for a, b in zip(ours, batched, strict=True)),
        "speculative": speculative(model, prompts, args),
        "speed_target_met": quartiles(round_ratios["engine_over_generate_batch"])["median"] >= 1,
        "memory_target_met": peak["engine"] <= peak["generate_batch"],
        "times_s": timed.times,
    }
    return harness.finish(results, args.out, report)


def report(results: dict) -> None:
    """The summary, on stderr."""
    speed = results["tokens_per_s"]
    say(
        f"{len(results['prompt_lengths'])} requests, {results['generated_tokens']} tokens; "
        "tokens per second, median: "
        + ", ".join(f"{side} {speed[side]['median']:.0f}" for side in SIDES)
    )
    for name, entry in results["ratio"].items():
        say(f"  {name}: median {entry['median']:.2f} (q1 {entry['q1']:.2f}, q3 {entry['q3']:.2f})")
    peak = {side: n / 2**20 for side, n in results["peak_cache_bytes"].items()}
    say(
        f"peak cache, MiB: engine {peak['engine']:.3f} (pool {peak['engine_pool']:.3f}), "
        f"generate_batch {peak['generate_batch']:.3f}, generate {peak['generate']:.3f}"
    )
    say(
        f"prefix hit rate {results['prefix_hit_rate']:.2f}; same tokens as generate: "
        f"{results['same_tokens_as_generate']}, as generate_batch: "
        f"{results['same_tokens_as_generate_batch']}; targets met: speed "
        f"{results['speed_target_met']}, memory {results['memory_target_met']}"
    )
    spec = results["speculative"]
    for name, entry in spec["drafts"].items():
        per_prompt = entry["per_prompt_mean_accepted"]
        say(
            f"speculative, draft {name}, tree {spec['branching']}: {entry['mean_accepted']:.2f} "
            f"tokens per target call (per prompt: median {per_prompt['median']:.2f}, q1 "
            f"{per_prompt['q1']:.2f}, q3 {per_prompt['q3']:.2f}), {entry['target_calls']} "
            f"calls; same tokens as greedy: {entry['same_tokens_as_greedy']}"
        )


if __name__ == "__main__":
    main()
