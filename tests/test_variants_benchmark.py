"""benchmarks/variants.py runs end to end at a tiny size (a smoke test: no timing is checked)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from attention.efficient import VARIANTS

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "variants.py"


@pytest.fixture(scope="module")
def benchmark():
    spec = importlib.util.spec_from_file_location("variants_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_benchmark_runs_at_a_tiny_size_and_writes_its_results(benchmark, tmp_path, capsys):
    tiny = "--batch 1 --tokens 8 --d-model 8 --heads 2 --repeats 2 --warmup 1 --sweep-max 0"
    benchmark.main([*tiny.split(), "--matmul-size", "64", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    rows = {row["name"] for row in results["runs"][0]["rows"]}
    assert {"bare reference", "MultiHeadAttention", "torch.nn.MultiheadAttention"} <= rows
    assert {name for name, cls in VARIANTS.items() if cls.runs_on_cpu} <= rows
    assert "FastMultiHeadAttention" in capsys.readouterr().out


def tiny_memory_spec(lengths: list[int], rows: list[str], **extra) -> dict:
    """What the memory worker measures, at a size that runs in a moment."""
    return {
        "device": "cpu",
        "dtype": "float32",
        "batch": 1,
        "d_model": 8,
        "heads": 2,
        "lengths": lengths,
        "rows": rows,
        "seed": 0,
        **extra,
    }


def test_benchmark_memory_worker_reports_every_row_and_length(benchmark):
    spec = tiny_memory_spec([4, 8], ["bare reference", "FastMultiHeadAttention"])
    memory = benchmark.memory_worker(spec)
    assert set(memory) == {"bare reference", "FastMultiHeadAttention"}
    for per_length in memory.values():
        assert set(per_length) == {"4", "8"}
        for peaks in per_length.values():
            assert set(peaks) == {"forward", "forward+backward"}
            assert all(v is None or v >= 0 for v in peaks.values())


def test_measure_memory_runs_the_worker_as_this_file_in_a_fresh_process(benchmark):
    spec = tiny_memory_spec([4], ["MultiHeadAttention"], threads=1)
    messages = []
    memory = benchmark.measure_memory(spec, messages.append)
    assert "error" not in memory, messages
    assert set(memory) == {"MultiHeadAttention"}
    assert set(memory["MultiHeadAttention"]["4"]) == {"forward", "forward+backward"}
