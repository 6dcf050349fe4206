"""Tests of attention.figures.serving: the scheduler's timeline and the pool over time.

Both are drawn from a real engine's records; what is checked is what they say (the
texts by gid) and the bars' heights, against the records themselves.
"""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
from serving_models import shared_model  # noqa: E402

from attention.figures import labelled_texts, pool_over_time, scheduler_timeline  # noqa: E402
from attention.serving import Engine, ModelRunner, StepRecord  # noqa: E402

SYSTEM = [5, 17, 33, 2, 41, 8, 12, 40, 29, 3]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def served() -> Engine:
    """A small pool and a shared system prompt: a preemption and prefix hits."""
    engine = Engine(ModelRunner(shared_model(0), num_blocks=10, block_size=4), max_batch_tokens=8)
    engine.run(
        [
            (0, [*SYSTEM, 7, 19, 4], 6),
            (0, list(range(20, 38)), 3),
            (2, [*SYSTEM, 22, 23], 5),
            (3, [*SYSTEM, 7, 19, 4, 9], 4),
        ]
    )
    return engine


def test_the_timeline_says_each_requests_tokens_hits_and_preemptions(served):
    texts = labelled_texts(scheduler_timeline(served.records))
    for s, record in enumerate(served.records):
        assert texts[f"total s{s}"] == str(record.num_tokens)
        for rid, num, _ in record.batch:
            assert texts[f"r{rid} s{s}"] == str(num)
        for admission in record.admitted:
            key = f"hit r{admission.request_id} s{s}"
            if admission.blocks_hit:
                assert texts[key] == f"+{admission.blocks_hit}"
            else:
                assert key not in texts
        for rid in record.preempted:
            assert texts[f"out r{rid} s{s}"] == "out"
    assert any(key.startswith("out ") for key in texts)  # the trace preempts
    assert any(key.startswith("hit ") for key in texts)  # and hits


def test_the_pools_bars_are_the_records_blocks(served):
    fig = pool_over_time(served.records, served.cache.num_blocks)
    heights = {p.get_gid(): p.get_height() for p in fig.axes[0].patches}
    scale = heights["used s0"] / max(served.records[0].used_blocks, 1e-9)
    for s, record in enumerate(served.records):
        for name in ("used", "cached", "free"):
            assert heights[f"{name} s{s}"] == pytest.approx(
                getattr(record, f"{name}_blocks") * scale
            )
    peak = max(r.used_blocks for r in served.records)
    assert labelled_texts(fig)["peak"] == f"most blocks read at once: {peak} of 10"


def test_bad_records_are_refused():
    with pytest.raises(TypeError, match="records must be a list of StepRecord"):
        scheduler_timeline("steps")
    with pytest.raises(TypeError, match="records must hold StepRecord, got dict"):
        pool_over_time([{}], 4)
    with pytest.raises(ValueError, match="expected 1 to 40 steps"):
        scheduler_timeline([])
    step = StepRecord(0, ((0, 4, "prefill"),), (), (), (), 1, 0, 3)
    with pytest.raises(ValueError, match="num_blocks must be the pool's size"):
        pool_over_time([step], 5)
    with pytest.raises(TypeError, match="num_blocks must be an int"):
        pool_over_time([step], 4.0)
    many = StepRecord(0, tuple((i, 1, "decode") for i in range(7)), (), (), (), 7, 0, 0)
    with pytest.raises(ValueError, match="at most 6 requests"):
        scheduler_timeline([many])
