"""benchmarks/engine.py runs end to end at a tiny size and reports what it measured.

No timing is compared with anything; what is checked is that the trace is the one
described (shared system prompts), that the three ways serve it, that the ratios are
the round-by-round ratios of the raw times the report holds, that the peak cache
figures follow from the engine's blocks and the longest request, and that speculative
decoding's figures are its accepted tokens per step, with greedy decoding's tokens.
"""

from __future__ import annotations

import json
import statistics

import pytest
from bench_scripts import load

TINY = [
    "--num-requests", "4", "--systems", "2", "--system-length", "8",
    "--max-new-tokens", "3", "--num-blocks", "16", "--block-size", "4",
    "--max-batch-tokens", "16", "--threads", "1", "--rounds", "1", "--warmup", "0",
]  # fmt: skip


@pytest.fixture(scope="module")
def engine():
    return load("engine")


def test_the_trace_shares_its_system_prompts(engine):
    args = engine.parse_args(TINY)
    prompts = engine.trace(args)
    assert len(prompts) == 4
    assert prompts[0][:8] == prompts[2][:8] != prompts[1][:8] == prompts[3][:8]
    assert all(8 + 8 <= len(p) <= 8 + 40 for p in prompts)


def test_a_tiny_run_serves_the_trace_three_ways_and_reports_its_own_times(engine, tmp_path, capsys):
    out = tmp_path / "engine.json"
    results = engine.main([*TINY, "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(capsys.readouterr().out)
    times = results["times_s"]
    assert all(len(times[side]) == 1 for side in engine.SIDES)
    speed = [12 / t for t in times["engine"]]
    theirs = [12 / t for t in times["generate_batch"]]
    ratios = [a / b for a, b in zip(speed, theirs, strict=True)]
    assert results["ratios"]["engine_over_generate_batch"] == pytest.approx(ratios)
    assert results["ratio"]["engine_over_generate_batch"]["median"] == pytest.approx(
        statistics.median(ratios)
    )
    # Two system prompts of two full blocks each: the later requests find them cached.
    assert results["prefix_hit_rate"] > 0
    assert results["same_tokens_as_generate"] >= 3  # float32: a near tie may differ
    peak = results["peak_cache_bytes"]
    per_block = 2 * 2 * 2 * 16 * 4 * 4  # k and v, 2 layers, 2 heads of 16, 4 tokens, f32
    assert peak["engine_pool"] == 16 * per_block
    assert peak["engine"] % per_block == 0 and 0 < peak["engine"] <= peak["engine_pool"]
    longest = max(results["prompt_lengths"]) + 3 - 1
    assert peak["generate"] == longest * per_block // 4


def test_speculative_decoding_reports_the_tokens_each_target_call_accepted(engine):
    results = engine.main([*TINY, "--branching", "2,1"])
    spec = results["speculative"]
    assert spec["branching"] == [2, 1]
    assert set(spec["drafts"]) == {"small_config", "first_layer"}
    for entry in spec["drafts"].values():
        per_prompt = entry["accepted_per_step"]
        assert len(per_prompt) == 4  # every prompt of the trace
        # Each call accepts the path (at most the tree's depth, 2) and the bonus token,
        # and the calls stop once the 3 tokens asked for are made.
        assert all(1 <= n <= 3 for steps in per_prompt for n in steps)
        assert all(sum(steps) - 2 <= 3 <= sum(steps) for steps in per_prompt)
        steps = [n for steps in per_prompt for n in steps]
        assert entry["target_calls"] == len(steps)
        assert entry["mean_accepted"] == pytest.approx(sum(steps) / len(steps))
        means = [sum(s) / len(s) for s in per_prompt]
        assert entry["per_prompt_mean_accepted"]["median"] == pytest.approx(
            statistics.median(means)
        )
        assert entry["same_tokens_as_greedy"] == 4  # float64: exactly the target's tokens


def test_a_branching_that_is_not_a_list_of_positive_ints_is_refused(engine, capsys):
    for bad in ("2,x", "2,0"):
        with pytest.raises(SystemExit):
            engine.parse_args([*TINY, "--branching", bad])
        assert "--branching" in capsys.readouterr().err
