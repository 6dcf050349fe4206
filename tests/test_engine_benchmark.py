"""benchmarks/engine.py runs end to end at a tiny size and reports what it measured.

No timing is compared with anything; what is checked is that the trace is the one
described (shared system prompts), that the three ways serve it, that the ratios are
the round-by-round ratios of the raw times the report holds, and that the peak cache
figures follow from the engine's blocks and the longest request.
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
