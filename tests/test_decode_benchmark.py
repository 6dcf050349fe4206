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
