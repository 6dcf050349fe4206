"""benchmarks/flash.py runs end to end at a tiny size and reports what it measured.

No timing is compared with anything; what is checked is that every side agrees with
the others, that the tiled form saves fewer bytes than plain attention and a smaller
share the longer the sequence, and that the ratios are the round-by-round ratios of
the raw times the report holds.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def flash():
    # Imported by name from benchmarks/, so that the ring's processes can import it too.
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("flash")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_a_tiny_quick_run_agrees_and_reports_its_own_times(flash, tmp_path, capsys):
    out = tmp_path / "flash.json"
    tiny = ["--tokens", "64", "128", "--cache", "300", "--ring-tokens", "64", "--heads", "1"]
    tiny += ["--head-dim", "8", "--block-size", "32", "--splits", "3", "--threads", "1"]
    results = flash.main(["--quick", *tiny, "--rounds", "2", "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(capsys.readouterr().out)
    training = results["training"]
    assert [row["tokens"] for row in training] == [64, 128]
    for row in training:
        assert row["outputs_agree"]
        saved = row["saved_bytes"]
        assert saved["flash"] == (4 * row["tokens"] * 8 + row["tokens"]) * 4  # q, k, v, out, lse
        assert saved["flash"] < saved["sdpa_math"] and saved["flash"] < saved["plain"]
        times = row["times_s"]
        assert all(len(ts) == 2 for ts in times.values())
        ratios = [a / b for a, b in zip(times["flash"], times["plain"], strict=True)]
        assert row["ratio"]["flash_over_plain"] == statistics.median(ratios)
        assert row["ms"]["flash"] == statistics.median(times["flash"]) * 1e3
    assert training[1]["saved_fraction"]["plain"] < training[0]["saved_fraction"]["plain"]
    (decode,) = results["decode"]
    assert decode["outputs_agree"] and decode["cached_tokens"] == 300
    ring = results["ring"]
    assert ring["outputs_agree"] and ring["processes"] == 2
    assert len(ring["times_s"]["ring"]) == 2


def test_the_gpu_mode_is_an_option_and_quick_shrinks_the_sizes(flash):
    args = flash.parse_args(["--device", "cuda", "--quick"])
    assert args.device == "cuda" and args.rounds == 2
    assert max(args.tokens) < 1024 and max(args.cache) < 16384
