"""benchmarks/harness.py: the paired rounds every benchmark times with, and its summaries.

The rounds are checked by what they call and in which order, not by how long anything
takes: every call once per round, the order reversed (or shuffled) from round to round,
warm-up rounds kept apart, the hooks called where they must be.
"""

from __future__ import annotations

import gc

import pytest
from bench_scripts import load

harness = load("harness")


def recorder(names, log):
    return {name: (lambda name=name: log.append(name)) for name in names}


def test_every_call_runs_once_a_round_in_an_order_reversed_every_other_round():
    log = []
    timed = harness.paired_rounds(recorder("abc", log), 3, warmup=1)
    assert log == list("abccbaabccba")
    assert all(len(timed.times[name]) == 3 for name in "abc")
    assert all(len(timed.warmup[name]) == 1 for name in "abc")
    assert all(t >= 0 for seconds in timed.times.values() for t in seconds)
    assert timed.counts == {}


def test_shuffled_rounds_differ_but_repeat_with_the_seed():
    def orders(seed):
        log = []
        harness.paired_rounds(recorder("abcdef", log), 4, order=harness.shuffled(seed))
        return ["".join(log[i : i + 6]) for i in range(0, 24, 6)]

    first = orders(0)
    assert first == orders(0) and first != orders(1)
    assert all(sorted(order) == list("abcdef") for order in first)
    assert len(set(first)) > 1


def test_the_counter_is_read_around_each_timed_call_only():
    count = {"n": 0}

    def call(step):
        return lambda: count.__setitem__("n", count["n"] + step)

    timed = harness.paired_rounds(
        {"one": call(1), "ten": call(10)}, 2, warmup=1, counter=lambda: count["n"]
    )
    assert timed.counts == {"one": [1, 1], "ten": [10, 10]}


def test_before_runs_outside_the_timed_region_and_after_round_once_a_round(monkeypatch):
    clock = iter(range(0, 1000, 1))
    monkeypatch.setattr(harness.time, "perf_counter", lambda: next(clock))
    events = []

    def before(name):
        next(clock), next(clock)  # costs two ticks that must not be timed
        events.append(("before", name))

    timed = harness.paired_rounds(
        recorder("ab", []), 2, before=before, after_round=lambda r: events.append(("round", r))
    )
    assert timed.times == {"a": [1, 1], "b": [1, 1]}
    assert events == [
        ("before", "a"), ("before", "b"), ("round", 0),
        ("before", "b"), ("before", "a"), ("round", 1),
    ]  # fmt: skip


def test_quiet_gc_keeps_the_collector_out_of_a_round_and_gives_it_back():
    seen = []
    harness.paired_rounds({"x": lambda: seen.append(gc.isenabled())}, 2, quiet_gc=True)
    assert seen == [False, False] and gc.isenabled()


def test_ratios_are_round_by_round_and_quartiles_follow_statistics():
    assert harness.ratios([2.0, 9.0], [1.0, 3.0]) == [2.0, 3.0]
    with pytest.raises(ValueError):
        harness.ratios([1.0], [1.0, 2.0])
    assert harness.quartiles([4.0, 1.0, 3.0, 2.0]) == {"median": 2.5, "q1": 1.25, "q3": 3.75}
    assert harness.ms({"a": [0.001, 0.003]})["a"]["median"] == pytest.approx(2.0)


def test_the_environment_says_where_it_ran():
    environment = harness.environment(pytest, extra=1)
    assert {"python", "torch", "pytest", "machine", "cpu", "cpu_count", "threads"} <= set(
        environment
    )
    assert environment["pytest"] == pytest.__version__ and environment["extra"] == 1
    environment["load_average"] = {"before": [1.5, 1, 1], "after": [2.25, 1, 1]}
    line = harness.machine(environment)
    assert line.startswith(f"{environment['cpu']}, ") and "load 1.50 before, 2.25 after" in line
