"""benchmarks/decode.py runs end to end in quick mode at a tiny size (no timing checks)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "decode.py"


@pytest.fixture(scope="module")
def decode():
    spec = importlib.util.spec_from_file_location("decode_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_run_reports_agreeing_outputs_and_cache_memory_equal_to_the_formula(
    decode, tmp_path, capsys
):
    out = tmp_path / "decode.json"
    tiny = ["--d-in", "32", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "8"]
    results = decode.main(
        ["--quick", "--cached", "8", "16", "--threads", "1", *tiny, "--out", str(out)]
    )
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(capsys.readouterr().out)
    assert [row["cached_tokens"] for row in results["rows"]] == [8, 16]
    for row in results["rows"]:
        assert row["outputs_agree"], row["max_abs_difference"]
        memory = row["memory"]
        # 2 (key and value) * 2 kv heads * head_dim 8 * 4 bytes per token
        assert memory["equal"] and memory["ours_bytes"] == 2 * 2 * 8 * 4 * row["cached_tokens"]
        assert len(row["times_s"]["ours"]) == len(row["times_s"]["transformers"]) == 6
        assert row["ratio_ours_over_transformers"]["median"] > 0


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
