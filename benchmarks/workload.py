"""The serving benchmarks' workload: 32 requests with a realistic spread of lengths.

Part V measures a paged cache, decoding and packed prefill on the same batch
(``benchmarks/serving.py`` and ``benchmarks/packing.py``), so it is defined once, here,
with the options of the toy attention layer both put it through (:func:`parser`).
Chat and API traffic has many short prompts and a long tail of long ones (documents,
code, long conversations), and answers that are shorter and spread less: both are
drawn log-normal, then clipped.

(This module was ``requests.py``, a name that shadowed the HTTP package for anything
imported after it.)

>>> batch = serving_batch()
>>> len(batch), batch == serving_batch(seed=0)
(32, True)
>>> all(PROMPT_RANGE[0] <= p <= PROMPT_RANGE[1] for p, _ in batch)
True
>>> all(OUTPUT_RANGE[0] <= o <= OUTPUT_RANGE[1] for _, o in batch)
True
>>> max(p + o for p, o in batch) <= MAX_LENGTH
True
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path

#: Requests in the batch.
NUM_REQUESTS = 32
#: Prompt lengths: log-normal with this median and spread (of the log), clipped to the range.
PROMPT_MEDIAN, PROMPT_SIGMA, PROMPT_RANGE = 300, 1.0, (50, 2000)
#: Output lengths, likewise.
OUTPUT_MEDIAN, OUTPUT_SIGMA, OUTPUT_RANGE = 150, 0.8, (20, 1000)
#: The longest a request can get, prompt and output: the contiguous cache's reservation.
MAX_LENGTH = 4096


def _draw(rng: random.Random, median: int, sigma: float, bounds: tuple[int, int]) -> int:
    low, high = bounds
    return min(high, max(low, round(rng.lognormvariate(math.log(median), sigma))))


def serving_batch(seed: int = 0) -> list[tuple[int, int]]:
    """32 requests as ``(prompt_len, output_len)``, the same for the same ``seed``.

    Prompts: log-normal, median 300 tokens, sigma 1.0, clipped to 50..2000. Outputs:
    log-normal, median 150 tokens, sigma 0.8, clipped to 20..1000. So no request is
    longer than 3000 tokens, below :data:`MAX_LENGTH` (4096). Drawn with Python's
    ``random.Random(seed)``, prompt then output for each request.
    """
    rng = random.Random(seed)
    batch = []
    for _ in range(NUM_REQUESTS):
        prompt = _draw(rng, PROMPT_MEDIAN, PROMPT_SIGMA, PROMPT_RANGE)
        output = _draw(rng, OUTPUT_MEDIAN, OUTPUT_SIGMA, OUTPUT_RANGE)
        batch.append((prompt, output))
    return batch


def parser(description: str, scaled: str) -> argparse.ArgumentParser:
    """The Part V scripts' shared options: rounds, the batch (its seed, ``scaled`` by
    ``--length-scale``) and the toy layer (heads, key/value heads, head size, threads)."""
    parser = argparse.ArgumentParser(description=description)
    add = parser.add_argument
    add("--quick", action="store_true", help="3 timed rounds, 1 warm-up")
    add("--rounds", type=int, default=10, help="timed rounds")
    add("--warmup", type=int, default=2, help="rounds dropped before timing")
    add("--seed", type=int, default=0, help="serving_batch's seed")
    add(
        "--length-scale",
        type=float,
        default=1.0,
        help=f"multiply every {scaled} (at least 1 token): small runs for tests",
    )
    add("--heads", type=int, default=8)
    add("--kv-heads", type=int, default=2)
    add("--head-dim", type=int, default=64)
    add("--threads", type=int, default=2, help="torch intra-op threads")
    add("--out", type=Path, help="also write the JSON results here")
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str] | None, *sizes: str):
    """``parser``'s arguments, checked; ``sizes`` are more options that must be >= 1."""
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup = 3, 1
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be >= 1 and --warmup >= 0")
    names = ["heads", "kv_heads", "head_dim", "threads", *sizes]
    if min(getattr(args, name) for name in names) < 1:
        options = [f"--{name.replace('_', '-')}" for name in names]
        parser.error(f"{', '.join(options[:-1])} and {options[-1]} must be >= 1")
    if args.heads % args.kv_heads:
        parser.error("--kv-heads must divide --heads")
    if not args.length_scale > 0:
        parser.error("--length-scale must be positive")
    return args
