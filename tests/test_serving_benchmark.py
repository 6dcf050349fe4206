"""benchmarks/serving.py runs end to end at a tiny size and reports what it says.

No timing is compared with anything; what is checked is that the paged and padded
decode steps agree, the memory accounting follows from the lengths, and the ratios are
the round-by-round ratios of the raw times the report holds.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest
from bench_scripts import load


@pytest.fixture(scope="module")
def serving():
    return load("serving")


def test_the_requests_are_the_serving_batchs(serving):
    assert serving.requests(0) == load("workload").serving_batch(0)


def test_peak_memory_follows_the_requests_as_they_finish(serving):
    # Blocks of 4. Prompts 5 and 3 (2 + 1 blocks); answers 1 and 6 tokens. After step 1
    # the first (6 tokens) is freed; the second grows to 9 tokens, 3 blocks.
    memory = serving.peak_memory([(5, 1), (3, 6)], block_size=4, max_length=16)
    assert memory["decode_steps"] == 6
    assert memory["slots"] == {"contiguous": 32, "padded": 18, "paged": 4 * 3}
    assert memory["tokens_at_most"] == 15


def test_a_tiny_quick_run_agrees_and_reports_its_own_times(serving, tmp_path, capsys):
    out = tmp_path / "serving.json"
    tiny = ["--length-scale", "0.02", "--heads", "4", "--kv-heads", "2", "--head-dim", "8"]
    results = serving.main(["--quick", "--threads", "1", *tiny, "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(capsys.readouterr().out)
    assert results["outputs_agree"]
    memory = results["memory"]
    lengths = [p + a for p, a in results["requests"]]
    assert memory["slots"]["contiguous"] == len(lengths) * results["max_length"]
    assert memory["slots"]["padded"] == len(lengths) * max(lengths)
    assert memory["slots"]["paged"] <= sum(math.ceil(n / 16) * 16 for n in lengths)
    assert memory["bytes"]["paged"] == memory["slots"]["paged"] * memory["bytes_per_token"]
    times = results["times_s"]
    assert all(len(times[side]) == 3 for side in serving.SIDES)
    ratios = [a / b for a, b in zip(times["paged"], times["padded"], strict=True)]
    assert results["ratios"]["paged_over_padded"] == ratios
    assert results["ratio"]["paged_over_padded"]["median"] == statistics.median(ratios)
