"""benchmarks/decode.py runs end to end in quick mode at a tiny size, and its report hangs together.

No timing is compared with a target; what is checked is that the reported figures are
what the documentation says they are, computed from the raw times the report holds:
one time per side and timed round, medians and quartiles of those, and the ratio taken
per round. The cache's memory is the formula's.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "decode.py"


@pytest.fixture(scope="module")
def decode():
    spec = importlib.util.spec_from_file_location("decode_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_run_reports_agreeing_outputs_the_formulas_memory_and_its_times_summaries(
    decode, tmp_path, capsys
):
    out = tmp_path / "decode.json"
    tiny = ["--d-in", "32", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "8"]
    results = decode.main(
        ["--quick", "--cached", "8", "16", "--threads", "1", *tiny, "--out", str(out)]
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


def test_repeats_report_each_runs_median_and_the_target_needs_every_run(decode, capsys):
    tiny = ["--d-in", "32", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "8"]
    results = decode.main(["--quick", "--repeats", "3", "--cached", "8", "--threads", "1", *tiny])
    capsys.readouterr()
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


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """The first quartile, median and third quartile of ``values`` (statistics' default)."""
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, statistics.median(values), q3
