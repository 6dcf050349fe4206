"""benchmarks/packing.py runs end to end at a tiny size and reports what it says.

No timing is compared with anything; what is checked is that the three ways agree, the
counted tokens and score entries follow from the prompt lengths, and the ratios are the
round-by-round ratios of the raw times the report holds.
"""

from __future__ import annotations

import json
import statistics

import pytest
from bench_scripts import load


@pytest.fixture(scope="module")
def packing():
    return load("packing")


def test_the_prompts_are_the_serving_batchs(packing):
    batch = load("workload").serving_batch(0)
    assert packing.prompt_lengths(0) == [prompt for prompt, _ in batch]
    assert len(batch) == 32
    assert packing.prompt_lengths(0, scale=0.01) == [max(1, round(p * 0.01)) for p, _ in batch]


def test_counts_follow_from_the_lengths(packing):
    count = packing.counts([1, 3, 2])
    assert count["tokens"] == {"packed": 6, "padded": 9}
    assert count["query_key_pairs"] == {"packed": 14, "padded": 27, "packed_one_masked_call": 36}
    assert count["causal_pairs"] == {"packed": 10, "padded": 18, "packed_one_masked_call": 21}


def test_a_tiny_quick_run_agrees_and_reports_its_own_times(packing, tmp_path, capsys):
    out = tmp_path / "packing.json"
    tiny = ["--length-scale", "0.02", "--heads", "4", "--kv-heads", "2", "--head-dim", "8"]
    results = packing.main(["--quick", "--threads", "1", *tiny, "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(capsys.readouterr().out)
    assert results["outputs_agree"]
    assert results["counts"] == packing.counts(results["prompt_lengths"])
    times = results["times_s"]
    assert all(len(times[side]) == 3 for side in packing.SIDES)
    for side in packing.SIDES[1:]:
        ratios = [a / b for a, b in zip(times["packed"], times[side], strict=True)]
        assert results["ratios"][f"packed_over_{side}"] == ratios
        assert results["ratio"][f"packed_over_{side}"]["median"] == statistics.median(ratios)
    assert results["ms"]["packed"]["median"] == statistics.median(t * 1e3 for t in times["packed"])
