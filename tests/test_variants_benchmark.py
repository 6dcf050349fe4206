"""benchmarks/variants.py runs end to end at a tiny size, and what it reports hangs together.

No timing is compared with a target (that is the benchmark's job, on a quiet machine);
what is checked is that every reported number is derived as documented from the raw
times it reports: positive times, as many as the rounds asked for, medians and
quartiles of those times, ratios and roofline fractions from those medians, FLOPs from
:func:`attention.efficient.forward_flops`, targets that agree with their values, and
peak memory of the book's module bounded by the size of its attention matrices.
"""

from __future__ import annotations

import json
import math
import statistics
import sys

import pytest
from bench_scripts import load

from attention.efficient import VARIANTS, forward_flops


@pytest.fixture(scope="module")
def benchmark():
    return load("variants")


def assert_summary_of(stats: dict, times: list[float]) -> None:
    """``stats`` is the median, quartiles and extremes of ``times``, all positive."""
    assert all(t > 0 and math.isfinite(t) for t in times)
    q1, median, q3 = statistics.quantiles(times, n=4, method="inclusive")
    assert stats["median_s"] == pytest.approx(median) == pytest.approx(statistics.median(times))
    assert (stats["q1_s"], stats["q3_s"]) == pytest.approx((q1, q3))
    assert (stats["min_s"], stats["max_s"]) == (min(times), max(times))
    assert stats["min_s"] <= stats["q1_s"] <= stats["median_s"] <= stats["q3_s"] <= stats["max_s"]


def test_benchmark_runs_at_a_tiny_size_and_its_numbers_derive_from_its_times(
    benchmark, tmp_path, capsys
):
    repeats, warmup, matmul_size = 3, 1, 64
    tiny = (
        f"--batch 1 --tokens 8 --d-model 8 --heads 2 --repeats {repeats} --warmup {warmup} "
        f"--sweep-max 0 --device cpu --matmul-size {matmul_size}"
    )
    benchmark.main([*tiny.split(), "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    shape = {"batch": 1, "tokens": 8, "d_model": 8, "heads": 2}
    assert {key: results["settings"][key] for key in shape} == shape
    assert results["environment"]["device"] == "cpu" and results["environment"]["seconds"] > 0
    (run,) = results["runs"]  # a CPU times float32 only
    assert run["dtype"] == "float32"

    # The roofline: the rate of a matmul_size^3 product, from its median time.
    matmul = run["matmul"]
    assert len(matmul["times_s"]) == repeats and len(matmul["warmup_s"]) == warmup
    assert all(t > 0 for t in matmul["times_s"])
    rate = 2 * matmul_size**3 / statistics.median(matmul["times_s"])
    assert matmul["flops_per_s"] == pytest.approx(rate)

    flops = forward_flops(1, 8, 8, 8, 2)
    assert run["forward_flops"] == flops
    rows = {row["name"]: row for row in run["rows"]}
    assert len(rows) == len(run["rows"])  # each row once
    assert {benchmark.BARE, benchmark.BOOK, benchmark.TORCH_MHA} <= set(rows)
    assert {name for name, cls in VARIANTS.items() if cls.runs_on_cpu} <= set(rows)
    for name, row in rows.items():
        for mode in benchmark.MODES:
            m = row[mode]
            # Every timed round, and only those: the warm-up rounds are kept apart.
            assert len(m["times_s"]) == repeats and len(m["warmup_s"]) == warmup, (name, mode)
            assert_summary_of(m, m["times_s"])
            assert m["flops"] == flops * (3 if mode == "forward+backward" else 1)
            bare, book = rows[benchmark.BARE][mode], rows[benchmark.BOOK][mode]
            assert m["vs_bare"] == pytest.approx(m["median_s"] / bare["median_s"])
            assert m["vs_book"] == pytest.approx(m["median_s"] / book["median_s"])
            assert m["roofline_fraction"] == pytest.approx(m["flops"] / m["median_s"] / rate)
        assert row["forward"]["flops"] * 3 == row["forward+backward"]["flops"]
    for mode in benchmark.MODES:
        assert rows[benchmark.BARE][mode]["vs_bare"] == 1
        assert rows[benchmark.BOOK][mode]["vs_book"] == 1

    # The targets: each value is FastMultiHeadAttention's, each verdict follows from it.
    fast = rows[benchmark.RECOMMENDED]
    assert len(run["targets"]) == 3 * len(benchmark.MODES)  # no sweep, no memory target
    for target, (mode, key, limit, below) in zip(
        run["targets"],
        [
            (mode, key, limit, below)
            for mode in benchmark.MODES
            for key, limit, below in (
                ("vs_bare", benchmark.MAX_VS_BARE, True),
                ("vs_book", benchmark.MAX_VS_BOOK, True),
                ("roofline_fraction", benchmark.MIN_ROOFLINE, False),
            )
        ],
        strict=True,
    ):
        assert target["value"] == fast[mode][key], target
        assert target["passed"] == (target["value"] <= limit if below else target["value"] >= limit)

    printed = capsys.readouterr().out
    assert all(name in printed for name in rows)
    assert printed.count("[PASS]") + printed.count("[MISS]") == len(run["targets"])


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


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="CPU peak memory is read from Linux's /proc"
)
def test_measure_memory_runs_the_worker_in_a_fresh_process_and_sees_the_score_matrices(
    benchmark,
):
    """The book's module holds ``heads x T x T`` float32 matrices (scores, weights, ...):
    its peak is at least one and at most a handful of them. FastMultiHeadAttention
    never builds one, so its peak stays below a single matrix."""
    rows, lengths = [benchmark.BOOK, benchmark.RECOMMENDED], [256, 1024]
    spec = tiny_memory_spec(lengths, rows, threads=1)
    messages = []
    memory = benchmark.measure_memory(spec, messages.append)
    assert "error" not in memory, messages
    assert set(memory) == set(rows)
    for tokens in lengths:
        matrix = spec["batch"] * spec["heads"] * tokens * tokens * 4  # bytes of one float32
        for mode in benchmark.MODES:
            book = memory[benchmark.BOOK][str(tokens)][mode]
            assert matrix <= book <= 8 * matrix, (tokens, mode, book / matrix)
            if tokens == 1024:  # at 256 tokens one matrix is 0.5 MiB, near the noise
                assert memory[benchmark.RECOMMENDED][str(tokens)][mode] < matrix, (tokens, mode)
