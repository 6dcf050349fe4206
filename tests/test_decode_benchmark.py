"""benchmarks/decode.py runs end to end in quick mode at a tiny size, and its report hangs together.

No timing is compared with a target; what is checked is that the reported figures are
what the documentation says they are, computed from the raw times the report holds:
one time per side and timed round, medians and quartiles of those, and the ratio taken
per round. The cache's memory is the formula's.
"""

from __future__ import annotations

import json
import statistics

import pytest
import torch
from bench_scripts import load


@pytest.fixture(scope="module")
def decode():
    return load("decode")


def test_quick_run_reports_agreeing_outputs_the_formulas_memory_and_its_times_summaries(
    decode, tmp_path, capsys
):
    out = tmp_path / "decode.json"
    tiny = ["--d-in", "32", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "8"]
    rolling = ["--rolling-cached", "8", "16", "32", "--window", "4"]
    results = decode.main(
        ["--quick", "--cached", "8", "16", "--threads", "1", *tiny, *rolling, "--out", str(out)]
    )
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(capsys.readouterr().out)
    assert results["environment"]["threads"] == 1
    assert [row["cached_tokens"] for row in results["rows"]] == [8, 16]
    for row in results["rows"]:
        assert 0 <= row["max_abs_difference"] <= 1e-4
        assert row["outputs_agree"]
        memory = row["memory"]
        # 2 (key and value) * 2 kv heads * head_dim 8 * 4 bytes per token
        expected_bytes = 2 * 2 * 8 * 4 * row["cached_tokens"]
        assert memory["formula_bytes"] == memory["ours_bytes"] == expected_bytes
        assert memory["transformers_bytes"] == expected_bytes and memory["equal"]
        # --quick: 6 timed rounds, one step of each side per round, every time positive.
        times = row["times_s"]
        assert len(times["ours"]) == len(times["transformers"]) == 6
        assert all(t > 0 for side in times.values() for t in side)
        for side in ("ours", "transformers"):
            ms = row["ms_per_token"][side]
            assert ms["q1"] <= ms["median"] <= ms["q3"]
            expected = quartiles([t * 1e3 for t in times[side]])
            assert (ms["q1"], ms["median"], ms["q3"]) == pytest.approx(expected)
        # The ratio is taken round by round, then summarised, not the ratio of the medians.
        per_round = [o / t for o, t in zip(times["ours"], times["transformers"], strict=True)]
        ratio = row["ratio_ours_over_transformers"]
        assert (ratio["q1"], ratio["median"], ratio["q3"]) == pytest.approx(quartiles(per_round))


def test_rolling_rows_report_flat_windowed_memory_and_the_growth_of_each_run(decode, capsys):
    """Window 4 against full attention at 8, 16 and 32 tokens seen, two runs."""
    tiny = ["--d-in", "32", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "8"]
    rolling = ["--rolling-cached", "32", "8", "16", "--window", "4", "--repeats", "2"]
    results = decode.main(["--quick", "--cached", "8", "--threads", "1", *tiny, *rolling])
    capsys.readouterr()
    rows = results["rolling_rows"]
    assert [row["cached_tokens"] for row in rows] == [8, 16, 32]  # sorted
    per_token = 2 * 2 * 8 * 4  # key and value, 2 kv heads, head_dim 8, float32
    for row in rows:
        assert row["outputs_agree"] and 0 <= row["max_abs_difference"] <= 1e-4
        memory = row["memory"]
        assert memory["full_bytes"] == per_token * row["cached_tokens"]
        # window - 1 tokens held before the timed steps and after them: it rolled
        assert memory["windowed_bytes"] == memory["windowed_bytes_after"] == per_token * 3
        assert memory["window_bytes"] == per_token * 4 and memory["equal"]
        times = row["times_s"]
        assert len(times["full"]) == len(times["windowed"]) == 2 * 6
        for side in ("full", "windowed"):
            ms = row["ms_per_token"][side]
            expected = quartiles([t * 1e3 for t in times[side]])
            assert (ms["q1"], ms["median"], ms["q3"]) == pytest.approx(expected)
            per_run = [statistics.median(times[side][i : i + 6]) * 1e3 for i in (0, 6)]
            assert row["median_ms_per_run"][side] == pytest.approx(per_run)
    # The growth is taken round by round (longest cache over shortest), then each run's median.
    target = results["rolling_target"]
    for side in ("full", "windowed"):
        ratios = [
            long / short
            for long, short in zip(rows[-1]["times_s"][side], rows[0]["times_s"][side], strict=True)
        ]
        per_run = [statistics.median(ratios[i : i + 6]) for i in (0, 6)]
        assert target["growth_per_run"][side] == pytest.approx(per_run)
    assert target["worst_windowed_growth"] == max(target["growth_per_run"]["windowed"])
    assert target["least_full_growth"] == min(target["growth_per_run"]["full"])
    met = target["worst_windowed_growth"] <= 1.2 < target["least_full_growth"]
    assert target["met"] == met


def test_repeats_report_each_runs_median_and_the_target_needs_every_run(decode, capsys):
    tiny = ["--d-in", "32", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "8"]
    results = decode.main(
        ["--quick", "--repeats", "3", "--cached", "8", "--threads", "1", *tiny, "--rolling-cached"]
    )
    capsys.readouterr()
    assert "rolling_rows" not in results and "rolling_target" not in results
    (row,) = results["rows"]
    assert len(row["median_ratio_per_run"]) == 3 and all(r > 0 for r in row["median_ratio_per_run"])
    assert len(row["times_s"]["ours"]) == len(row["times_s"]["transformers"]) == 3 * 6
    assert all(len(faults) == 3 for faults in row["page_faults_per_step"].values())
    worst = max(row["median_ratio_per_run"])
    assert results["target"]["worst_run_median_ratio"] == {8: worst}
    assert results["target"]["met"] == (worst <= 1.0)


def test_ours_is_built_without_an_output_bias_like_llama(decode):
    tiny = ["--d-in", "16", "--num-heads", "2", "--num-kv-heads", "1", "--head-dim", "8"]
    args = decode.parse_args([*tiny, "--cached", "4"])
    ours, theirs, _ = decode.build(args)
    assert ours.out_proj.bias is None and theirs.o_proj.bias is None
    assert args.repeats == 5 and decode.parse_args(["--quick"]).repeats == 1
    assert args.window == 1024 and args.rolling_cached == [1024, 4096, 16384]
    windowed = decode.build_windowed(decode.parse_args([*tiny, "--window", "3"]), ours)
    assert windowed.window == 3 and windowed.out_proj.bias is None
    for name, tensor in ours.state_dict().items():
        assert torch.equal(windowed.state_dict()[name], tensor)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """The first quartile, median and third quartile of ``values`` (statistics' default)."""
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, statistics.median(values), q3
