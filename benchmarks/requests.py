"""The serving benchmarks' batch: 32 requests with a realistic spread of lengths.

Part V measures a paged cache, decoding and packed prefill on the same batch
(``benchmarks/serving.py`` and ``benchmarks/packing.py``), so it is defined once, here.
Chat and API traffic has many short prompts and a long tail of long ones (documents,
code, long conversations), and answers that are shorter and spread less: both are
drawn log-normal, then clipped.

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

import math
import random

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
