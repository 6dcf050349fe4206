"""What the benchmarks here share: paired rounds, quartiles and the machine they ran on.

Every benchmark compares ways of doing one thing (ours against ``transformers``',
paged against padded, a window against full attention). Timed one after the other, a
drift in the machine's speed (other jobs, heat, frequency scaling) would hit one way
more than another. So they are timed in *paired rounds* (:func:`paired_rounds`): each
round calls every way once, in an order that changes from round to round (reversed
every other round, :func:`alternate`, or shuffled, :func:`shuffled`), and the first
rounds are dropped as warm-up. A ratio is taken within each round (:func:`ratios`), so
that a busy moment slows both of its sides alike, and then summarised by its median
and quartiles (:func:`quartiles`).

A result file says where it was measured (:func:`environment`): the CPU's model name,
the versions and the load average, since timings on a shared machine are noisy.

The scripts import this module as ``harness``: run as ``python benchmarks/NAME.py``,
a script's own folder comes first on ``sys.path``.

>>> calls = {"a": lambda: None, "b": lambda: None}
>>> timed = paired_rounds(calls, 3, warmup=1)
>>> [len(timed.times[name]) for name in calls], len(timed.warmup["a"])
([3, 3], 1)
>>> [alternate(r, ["a", "b"]) for r in range(2)]
[['a', 'b'], ['b', 'a']]
>>> quartiles([1.0, 2.0, 3.0, 4.0])
{'median': 2.5, 'q1': 1.25, 'q3': 3.75}
"""

from __future__ import annotations

import dataclasses
import datetime
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

#: A round's order from the previous round's: ``order(round_index, previous)``.
Order = Callable[[int, list], list]


def alternate(round_index: int, previous: list) -> list:
    """The given order in the first round, then reversed every round: so every other."""
    return previous[::-1] if round_index else previous


def shuffled(seed: int) -> Order:
    """Round ``r`` shuffles the previous round's order with ``random.Random(seed + r)``."""

    def order(round_index: int, previous: list) -> list:
        keys = list(previous)
        random.Random(seed + round_index).shuffle(keys)
        return keys

    return order


@dataclasses.dataclass
class Rounds:
    """What :func:`paired_rounds` measured, per call, in round order."""

    times: dict[Hashable, list[float]]  # seconds of each timed round
    warmup: dict[Hashable, list[float]]  # seconds of each warm-up round
    counts: dict[Hashable, list[float]]  # the counter's increase per timed call, if any


def paired_rounds(
    calls: Mapping[Hashable, Callable[[], object]],
    rounds: int,
    *,
    warmup: int = 0,
    order: Order = alternate,
    counter: Callable[[], float] | None = None,
    before: Callable[[Hashable], None] | None = None,
    after_round: Callable[[int], None] | None = None,
    quiet_gc: bool = False,
) -> Rounds:
    """Time every call once per round, ``warmup + rounds`` rounds, the first dropped.

    Parameters
    ----------
    calls : mapping of a name to a function of no arguments, the thing to time
    rounds, warmup : timed rounds, and rounds run first whose times are kept apart
    order : each round's order from the previous one's (the first from ``calls``'):
        :func:`alternate` (default) or :func:`shuffled`
    counter : read before and after each call; its increase goes to ``counts`` (the
        page-fault hook: ``counter=page_faults``)
    before : called with a call's name before it, outside the timed region (a mode
        switch, ``zero_grad``, a device synchronisation)
    after_round : called with the round's index after each round (progress)
    quiet_gc : collect garbage before each round and keep the collector out of it, so
        that no collection pauses a timed call

    Examples
    --------
    >>> ticks = iter(range(100))
    >>> timed = paired_rounds({"x": lambda: None}, 2, counter=lambda: next(ticks))
    >>> timed.counts
    {'x': [1, 1]}
    """
    keys = list(calls)
    timed = Rounds(*({key: [] for key in keys} for _ in range(3)))
    for round_index in range(warmup + rounds):
        keys = order(round_index, keys)
        if quiet_gc:
            gc.collect()
            gc.disable()
        try:
            for key in keys:
                if before is not None:
                    before(key)
                count = counter() if counter is not None else 0
                start = time.perf_counter()
                calls[key]()
                seconds = time.perf_counter() - start
                if round_index < warmup:
                    timed.warmup[key].append(seconds)
                    continue
                timed.times[key].append(seconds)
                if counter is not None:
                    timed.counts[key].append(counter() - count)
        finally:
            if quiet_gc:
                gc.enable()
        if after_round is not None:
            after_round(round_index)
    if counter is None:
        timed.counts = {}
    return timed


def page_faults() -> int:
    """Minor page faults of this process so far (pages mapped on first touch); 0 where
    ``resource`` is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def ratios(top: Sequence[float], bottom: Sequence[float]) -> list[float]:
    """``top / bottom`` round by round.

    >>> ratios([2.0, 3.0], [1.0, 4.0])
    [2.0, 0.75]
    """
    return [a / b for a, b in zip(top, bottom, strict=True)]


def quartiles(values: Sequence[float], method: str = "exclusive") -> dict[str, float]:
    """Median, first and third quartile (``statistics.quantiles``' ``method``); one value
    is all three.

    >>> quartiles([1.0, 2.0, 3.0, 4.0], method="inclusive")
    {'median': 2.5, 'q1': 1.75, 'q3': 3.25}
    >>> quartiles([5.0])
    {'median': 5.0, 'q1': 5.0, 'q3': 5.0}
    """
    if len(values) > 1:
        q1, median, q3 = statistics.quantiles(values, n=4, method=method)
    else:
        q1 = median = q3 = values[0]
    return {"median": median, "q1": q1, "q3": q3}


def ms(times: Mapping[Hashable, Sequence[float]]) -> dict:
    """Each side's seconds as quartiles in milliseconds."""
    return {side: quartiles([t * 1e3 for t in seconds]) for side, seconds in times.items()}


def pooled(rows: Sequence[Mapping], key: str = "times_s") -> dict[str, list[float]]:
    """Every run's ``row[key][side]`` lists one after the other, per side."""
    return {side: [t for row in rows for t in row[key][side]] for side in rows[0][key]}


def load_average() -> list[float] | None:
    """The machine's load average over 1, 5 and 15 minutes (None where unknown): on a
    shared machine, how busy it was while the timings ran."""
    try:
        return [round(load, 2) for load in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def now() -> str:
    """The time of the run, UTC, to the second."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def environment(*modules: Any, **more: Any) -> dict:
    """Python's and torch's versions, each of ``modules``' versions, the machine, the CPU
    and torch's threads; then ``more``."""
    versions = {module.__name__: module.__version__ for module in modules}
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        **versions,
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        **more,
    }


def settings(args: Any) -> dict:
    """A command line's arguments as JSON can hold them (paths as text)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}


def header(benchmark: str, args: Any, *modules: Any, **more: Any) -> dict:
    """A result file's first keys: the benchmark's name, the date, the environment
    (:func:`environment` of ``modules`` and ``more``) and the settings."""
    return {
        "benchmark": benchmark,
        "date": now(),
        "environment": environment(*modules, **more),
        "settings": settings(args),
    }


def finish(results: dict, out: Path | None, report: Callable[[dict], None]) -> dict:
    """The results as JSON on stdout (and in ``out`` when given), then ``report``'s
    summary and the machine's line (:func:`machine`) on stderr."""
    text = json.dumps(results, indent=2)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
    print(text)
    report(results)
    say(machine(results["environment"]))
    return results


def say(line: str = "") -> None:
    """A line of the summary, on stderr (stdout has the JSON)."""
    print(line, file=sys.stderr)


def machine(environment: dict) -> str:
    """One line for the summary: the CPU, threads, versions and the 1-minute load average
    before and after, where :func:`environment`'s block (and the script) recorded them."""
    versions = ", ".join(
        f"{name} {environment[name]}" for name in ("torch", "transformers") if name in environment
    )
    line = (
        f"{environment['cpu']}, {environment['cpu_count']} CPUs, {environment['threads']} "
        f"threads; {versions}"
    )
    load = environment.get("load_average") or {
        "before": environment.get("load_average_before"),
        "after": environment.get("load_average_after"),
    }
    if load["before"] and load["after"]:
        line += f"; load {load['before'][0]:.2f} before, {load['after'][0]:.2f} after"
    return line
