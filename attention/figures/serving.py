"""The serving engine's figures: the scheduler's steps, and the pool's blocks over time.

Both read the :class:`~attention.serving.StepRecord` list an
:class:`~attention.serving.Engine` keeps (``engine.records``), so a page draws what
the engine did, not a picture of what it might do (chapter 32).
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attention.figures.style import (
    CURRENT,
    DONE,
    FACECOLOR,
    INK,
    MASKED_COLOR,
    MASKED_HATCH,
    MASKED_HATCH_COLOR,
    SEQUENCE_FILLS,
    _canvas,
    _text,
)
from attention.serving.engine import StepRecord

__all__ = ["pool_over_time", "scheduler_timeline"]

#: The hatch of a decode token's cell, a prefill chunk's being solid.
DECODE_HATCH = "..."


def _records(owner: str, records: object, most_steps: int) -> list[StepRecord]:
    if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
        raise TypeError(
            f"{owner}: records must be a list of StepRecord (engine.records), got "
            f"{type(records).__name__}"
        )
    records = list(records)
    wrong = [type(r).__name__ for r in records if not isinstance(r, StepRecord)]
    if wrong:
        raise TypeError(f"{owner}: records must hold StepRecord, got {wrong[0]}")
    if not 1 <= len(records) <= most_steps:
        raise ValueError(
            f"{owner}: expected 1 to {most_steps} steps for the drawing to stay readable, "
            f"got {len(records)}"
        )
    return records


def scheduler_timeline(records: Sequence[StepRecord], *, title: str | None = None) -> Figure:
    """Which request ran how many tokens in each step: one row per request, one column a step.

    A cell holds the number of tokens its request brought to that step's packed
    batch: solid for a chunk of the prompt (prefill), dotted for a decode token. A
    request admitted with blocks found in the prefix cache has its first cell framed
    in ink, and says ``+N`` under its count for its ``N`` blocks hit; a preempted request's
    cell is grey, hatched as every masked cell on this site, and says ``out``. Under
    each column, the step's total tokens.

    Parameters
    ----------
    records : list of StepRecord
        ``engine.records``, 1 to 40 steps of at most 6 requests.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        The cell of request ``r`` at step ``s`` has the gid ``"r<r> s<s>"`` and so does
        its text; the hits ``"hit r<r> s<s>"``, the preemptions ``"out r<r> s<s>"``, the
        totals ``"total s<s>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from attention.serving import StepRecord
    >>> from attention.figures import labelled_texts
    >>> steps = [StepRecord(0, ((0, 4, "prefill"),), (), (), (), 1, 0, 3),
    ...          StepRecord(1, ((0, 1, "decode"),), (), (), (0,), 0, 1, 3)]
    >>> texts = labelled_texts(scheduler_timeline(steps))
    >>> texts["r0 s0"], texts["r0 s1"], texts["total s0"]
    ('4', '1', '4')
    >>> plt.close("all")
    """
    owner = "scheduler_timeline"
    records = _records(owner, records, 40)
    requests = sorted(
        {rid for r in records for rid, _, _ in r.batch} | {p for r in records for p in r.preempted}
    )
    if len(requests) > len(SEQUENCE_FILLS):
        raise ValueError(
            f"{owner}: expected at most {len(SEQUENCE_FILLS)} requests for the drawing to "
            f"stay readable, got {len(requests)}"
        )
    row = {rid: i for i, rid in enumerate(requests)}
    cell = min(0.42, 7.2 / len(records))
    left, bottom = 1.05, 0.75
    width = left + len(records) * cell + 0.2
    height = bottom + len(requests) * cell + 0.2
    fig, ax = _canvas(owner, width, height, title)
    size = 7.5 if cell >= 0.35 else 6
    top = height - 0.1

    def y_of(rid: int) -> float:
        return top - (row[rid] + 1) * cell

    for rid in requests:
        _text(ax, left - 0.08, y_of(rid) + cell / 2, f"request {rid}", ha="right", size=8.5)
    for s, record in enumerate(records):
        x = left + s * cell
        hits = {a.request_id: a.blocks_hit for a in record.admitted}
        for rid, num, kind in record.batch:
            fill = SEQUENCE_FILLS[row[rid]]
            framed = hits.get(rid, 0) > 0
            ax.add_patch(
                Rectangle(
                    (x, y_of(rid)),
                    cell,
                    cell,
                    facecolor=fill,
                    hatch=DECODE_HATCH if kind == "decode" else None,
                    edgecolor=INK if framed else FACECOLOR,
                    linewidth=1.6 if framed else 0.8,
                    gid=f"r{rid} s{s}",
                )
            )
            middle = y_of(rid) + cell / 2
            # A hit's label shares the cell, below the count: rows touch, no room between.
            _text(ax, x + cell / 2, middle + (0.1 * cell if framed else 0), str(num), size=size,
                  gid=f"r{rid} s{s}")  # fmt: skip
            if framed:
                _text(ax, x + cell / 2, middle - 0.24 * cell, f"+{hits[rid]}", size=size - 1.5,
                      fontweight="bold", gid=f"hit r{rid} s{s}")  # fmt: skip
        for rid in record.preempted:
            ax.add_patch(
                Rectangle(
                    (x, y_of(rid)),
                    cell,
                    cell,
                    facecolor=MASKED_COLOR,
                    hatch=MASKED_HATCH,
                    edgecolor=MASKED_HATCH_COLOR,
                    linewidth=0.8,
                )
            )
            _text(ax, x + cell / 2, y_of(rid) + cell / 2, "out", size=6, gid=f"out r{rid} s{s}")
        total_y = top - len(requests) * cell - 0.12
        _text(ax, x + cell / 2, total_y, str(record.num_tokens), va="top", size=6.5,
              gid=f"total s{s}")  # fmt: skip
    _text(ax, left - 0.08, top - len(requests) * cell - 0.12, "tokens", ha="right", va="top",
          size=7.5)  # fmt: skip
    _text(
        ax,
        0.1,
        0.12,
        "solid: a prompt chunk; dotted: a decode token; +N: blocks found cached; out: preempted",
        ha="left",
        va="bottom",
        size=7,
        gid="legend",
    )
    return fig


def pool_over_time(
    records: Sequence[StepRecord], num_blocks: int, *, title: str | None = None
) -> Figure:
    """The pool's blocks after each step: read by requests, kept only by the cache, free.

    One column per step, stacked from the bottom: blocks that running requests read
    (dark), blocks that only the prefix cache holds, waiting for a request that shares
    their prefix (pale, hatched), and free blocks (white, outlined).

    Parameters
    ----------
    records : list of StepRecord
        ``engine.records``, 1 to 60 steps.
    num_blocks : int
        The pool's size, ``engine.cache.num_blocks``: each column's height.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Step ``s``'s three bars have the gids ``"used s<s>"``, ``"cached s<s>"`` and
        ``"free s<s>"``, their height the blocks; the peak is labelled ``"peak"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from attention.serving import StepRecord
    >>> from attention.figures import labelled_texts
    >>> steps = [StepRecord(0, ((0, 4, "prefill"),), (), (), (), 1, 0, 3),
    ...          StepRecord(1, ((0, 1, "decode"),), (), (), (0,), 0, 1, 3)]
    >>> labelled_texts(pool_over_time(steps, num_blocks=4))["peak"]
    'most blocks read at once: 1 of 4'
    >>> plt.close("all")
    """
    owner = "pool_over_time"
    records = _records(owner, records, 60)
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int):
        raise TypeError(f"{owner}: num_blocks must be an int, got {type(num_blocks).__name__}")
    wrong = [
        r.step for r in records if r.used_blocks + r.cached_blocks + r.free_blocks != num_blocks
    ]
    if num_blocks < 1 or wrong:
        raise ValueError(
            f"{owner}: num_blocks must be the pool's size, what each step's used, cached and "
            f"free blocks add up to, got {num_blocks} (steps {wrong[:3]} differ)"
        )
    column = min(0.32, 7.0 / len(records))
    left, bottom, plot_height = 0.55, 0.55, 2.2
    width = left + len(records) * column + 0.2
    height = bottom + plot_height + 0.6
    fig, ax = _canvas(owner, width, height, title)
    scale = plot_height / num_blocks
    for s, record in enumerate(records):
        x, y = left + s * column, bottom
        parts = (
            ("used", record.used_blocks, CURRENT, None, FACECOLOR),
            ("cached", record.cached_blocks, DONE, MASKED_HATCH, MASKED_HATCH_COLOR),
            ("free", record.free_blocks, FACECOLOR, None, MASKED_HATCH_COLOR),
        )
        for name, count, fill, hatch, edge in parts:
            ax.add_patch(
                Rectangle(
                    (x + 0.02, y),
                    column - 0.04,
                    count * scale,
                    facecolor=fill,
                    hatch=hatch,
                    edgecolor=edge,
                    linewidth=0.6,
                    gid=f"{name} s{s}",
                )
            )
            y += count * scale
        if s % max(1, len(records) // 10) == 0:
            _text(ax, x + column / 2, bottom - 0.06, str(s), va="top", size=7)
    _text(ax, left + len(records) * column / 2, 0.12, "step", va="bottom", size=8)
    _text(ax, left - 0.08, bottom, "0", ha="right", size=7)
    _text(ax, left - 0.08, bottom + plot_height, str(num_blocks), ha="right", size=7)
    peak = max(r.used_blocks for r in records)
    _text(
        ax,
        left,
        bottom + plot_height + 0.1,
        f"most blocks read at once: {peak} of {num_blocks}",
        ha="left",
        va="bottom",
        size=8,
        gid="peak",
    )
    _text(
        ax,
        left,
        bottom + plot_height + 0.32,
        "dark: read by requests; hatched: kept only by the prefix cache; white: free",
        ha="left",
        va="bottom",
        size=7,
        gid="legend",
    )
    return fig
