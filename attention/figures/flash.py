"""Attention computed in pieces: the online softmax's tiles, FlashAttention's backward
pass, one merge, a ring.

The score matrix cut into tiles, with each row's running maximum and sum after each
block of keys (:func:`tiled_scores`, chapter 7); the blocks the backward pass visits,
computed, masked or skipped (:func:`backward_blocks`, chapter 33); two partial
softmaxes merged by their log-sum-exps (:func:`merge_picture`, chapter 34); a ring of
processes passing their keys and values, step by step (:func:`ring_steps`, chapter
34), with the work :func:`~attention.ring.ring_work` counts.

>>> import matplotlib.pyplot as plt
>>> from attention.figures import ring_steps
>>> fig = ring_steps(3, causal=False)
>>> [ax.get_title() for ax in fig.axes]
['step 0', 'step 1', 'step 2']
>>> plt.close(fig)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from attention import _checks
from attention.figures.style import (
    CURRENT,
    DONE,
    FACECOLOR,
    HEAD_COLORS,
    HEAD_HATCHES,
    INK,
    MUTED,
    PHONE_WIDTH_INCHES,
    _arrow,
    _canvas,
    _cell,
    _layout,
    _masked_or,
    _positive,
    _rounded,
    _text,
)
from attention.ring import ring_work

__all__ = ["backward_blocks", "merge_picture", "ring_steps", "running_max_and_sum", "tiled_scores"]


#: The most tokens :func:`tiled_scores` draws: a score and two running numbers per row.
TILED_MAX = 12


def running_max_and_sum(
    scores: torch.Tensor, block_size: int, *, causal: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's running maximum and sum after each block of keys, as the online softmax
    keeps them (chapter 7), and which tiles a tiled kernel skips.

    Parameters
    ----------
    scores : torch.Tensor, shape (T, T)
        Every query's scores with every key; a ``-inf`` is a masked score.
    block_size : int
        Queries and keys per tile.
    causal : bool
        Mask the future (key after query), and skip the tiles that lie wholly in it.

    Returns
    -------
    (running_max, running_sum, skipped) : torch.Tensor
        ``running_max`` and ``running_sum`` of shape ``(T, num_blocks)``, float64: after
        key block ``j``, row ``i``'s largest score so far, ``m``, and its sum of
        ``exp(s - m)``, ``l``. ``skipped`` of shape ``(num_blocks, num_blocks)``, bool:
        query block by key block, the tiles in the future of all their queries, which add
        nothing (the row's numbers carry over).

    Examples
    --------
    >>> import torch
    >>> m, l, skipped = running_max_and_sum(torch.zeros(4, 4), 2)
    >>> m[3].tolist(), l[3].tolist()  # the last row: two keys, then four, all scoring 0
    ([0.0, 0.0], [2.0, 4.0])
    >>> skipped.tolist()
    [[False, True], [False, False]]
    """
    owner = "running_max_and_sum"
    _checks.tensor(owner, "scores", scores)
    if scores.dim() != 2 or scores.shape[0] != scores.shape[1] or scores.shape[0] == 0:
        raise ValueError(
            f"{owner}: scores must be a square (T, T) matrix, got shape {tuple(scores.shape)}"
        )
    tokens = scores.shape[0]
    block_size = _positive(owner, "block_size", block_size, tokens)
    causal = _checks.flag(owner, "causal", causal, "whether to mask the future")
    s = scores.detach().double().cpu().clone()
    if causal:
        s = s.masked_fill(torch.ones(tokens, tokens, dtype=torch.bool).triu(1), -torch.inf)
    starts = list(range(0, tokens, block_size))
    # A tile is skipped when its first key comes after its query block's last query.
    skipped = torch.tensor(
        [[causal and k > min(q + block_size, tokens) - 1 for k in starts] for q in starts]
    )
    running_max = torch.empty(tokens, len(starts), dtype=torch.float64)
    running_sum = torch.empty(tokens, len(starts), dtype=torch.float64)
    for i in range(tokens):
        m, total = torch.tensor(-torch.inf, dtype=torch.float64), torch.tensor(0.0).double()
        for j, start in enumerate(starts):
            block = s[i, start : start + block_size]
            if not skipped[i // block_size, j] and torch.isfinite(block).any():
                new_max = torch.maximum(m, block.max())
                # The correction: the sum so far was relative to the old maximum.
                total = total * torch.exp(m - new_max) + torch.exp(block - new_max).sum()
                m = new_max
            running_max[i, j], running_sum[i, j] = m, total
    return running_max, running_sum, skipped


def tiled_scores(
    scores: torch.Tensor,
    block_size: int,
    labels: Sequence[str] | None = None,
    *,
    causal: bool = True,
    highlight: int | None = None,
    layout: str = "wide",
    title: str | None = None,
) -> Figure:
    """The score matrix in tiles, and each row's running maximum and sum after each tile.

    What :func:`~attention.tiled.tiled_attention` and a fused kernel keep, drawn: the
    scores of every query (rows) with every key (columns), cut into tiles of
    ``block_size`` by ``block_size``; the masked scores hatched, as everywhere on the
    site, and the tiles wholly in the future of their queries marked "skipped". Beside
    the matrix (``layout="wide"``) or under it (``"stacked"``, for a phone), a table:
    for each row, after each block of keys, the running maximum ``m`` and the running
    sum ``l`` of ``exp(s - m)`` (:func:`running_max_and_sum`). After the last block,
    ``m + log(l)`` is the row's log-sum-exp.

    Parameters
    ----------
    scores : torch.Tensor, shape (T, T)
        Scores, before the softmax; ``T`` at most ``TILED_MAX`` (12).
    block_size : int
        Queries and keys per tile.
    labels : sequence of str, optional
        One per token (say the words); ``0, 1, ...`` by default.
    causal : bool
        Mask the future and skip the tiles wholly in it.
    highlight : int, optional
        A row to frame, in the matrix and in the table (say the one worked by hand).
    layout : {"wide", "stacked"}
        The table beside the matrix, or under it, ``PHONE_WIDTH_INCHES`` wide.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        The score of query ``i`` and key ``j`` has the gid ``"score <i> <j>"``; the
        running numbers of row ``i`` after key block ``b``, the gids ``"max <i> <b>"``
        and ``"sum <i> <b>"``; tile ``(a, b)`` the gid ``"tile <a> <b>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import torch
    >>> from attention.figures import labelled_texts
    >>> fig = tiled_scores(torch.zeros(4, 4), 2)
    >>> labelled_texts(fig)["sum 3 1"]  # the last row, after both blocks: 4 keys, e^0 each
    'ℓ 4.0000'
    >>> plt.close(fig)
    """
    owner = "tiled_scores"
    layout = _layout(owner, layout)
    running_max, running_sum, skipped = running_max_and_sum(scores, block_size, causal=causal)
    tokens = scores.shape[0]
    if tokens > TILED_MAX:
        raise ValueError(
            f"{owner}: expected at most {TILED_MAX} tokens to stay readable, got {tokens}"
        )
    labels = [str(i) for i in range(tokens)] if labels is None else [str(w) for w in labels]
    if len(labels) != tokens:
        raise ValueError(f"{owner}: expected {tokens} labels, one per token, got {len(labels)}")
    if highlight is not None:
        highlight = _checks.whole_number(owner, highlight, "highlight must be an integer")
        if not 0 <= highlight < tokens:
            raise ValueError(f"{owner}: expected highlight in [0, {tokens - 1}], got {highlight}")
    s = scores.detach().double().cpu()
    blocks = skipped.shape[0]
    stacked = layout == "stacked"
    # Sizes in inches: a label column, the matrix's cells, the table's columns.
    label_w, top = 0.75, 0.75
    cell = min(0.42, (PHONE_WIDTH_INCHES - label_w - 0.1) / tokens)
    column = min(0.9, (PHONE_WIDTH_INCHES - label_w - 0.1) / blocks) if stacked else 0.9
    matrix_w = label_w + tokens * cell
    table_w = (label_w if stacked else 0.2) + blocks * column
    gap, note = 0.5, (0.6 if stacked else 0.45)
    rows_h = tokens * cell
    if stacked:
        width = max(matrix_w, table_w) + 0.1
        height = top + rows_h + gap + 0.35 + rows_h + note
    else:
        width = matrix_w + table_w + 0.2
        height = top + rows_h + note
    fig, ax = _canvas(owner, width, height, title)

    def row_y(i: int, table_top: float) -> float:
        return table_top - (i + 1) * cell

    matrix_top = height - top
    for j in range(tokens):
        _text(ax, label_w + (j + 0.5) * cell, matrix_top + 0.05, labels[j], va="bottom",
              size=7.5, rotation=90)  # fmt: skip
    for i in range(tokens):
        y = row_y(i, matrix_top)
        weight = "bold" if i == highlight else "normal"
        _text(ax, label_w - 0.06, y + cell / 2, labels[i], ha="right", size=7.5,
              fontweight=weight)  # fmt: skip
        for j in range(tokens):
            x = label_w + j * cell
            value = float(s[i, j])
            masked = (causal and j > i) or not math.isfinite(value)
            tile_skipped = bool(skipped[i // block_size, j // block_size])
            if masked:
                _masked_or(ax, (x, y), cell, True, gid=f"score {i} {j}")
                continue
            _cell(ax, x, y, cell, cell, f"{value:.2f}", fill=DONE, size=6.5,
                  edge="white", text_gid=f"score {i} {j}", gid=f"score {i} {j}")  # fmt: skip
            assert not tile_skipped  # a skipped tile holds only masked scores
    # The tiles: a thick frame each, "skipped" across those wholly in the future.
    for a in range(blocks):
        for b in range(blocks):
            x0, y_top = label_w + b * block_size * cell, matrix_top - a * block_size * cell
            w = (min((b + 1) * block_size, tokens) - b * block_size) * cell
            h = (min((a + 1) * block_size, tokens) - a * block_size) * cell
            frame = Rectangle((x0, y_top - h), w, h, facecolor="none", edgecolor=INK,
                              linewidth=1.6, gid=f"tile {a} {b}")  # fmt: skip
            ax.add_patch(frame)
            if skipped[a, b]:
                _text(ax, x0 + w / 2, y_top - h / 2, "skipped", size=7, color=INK,
                      bbox={"facecolor": FACECOLOR, "edgecolor": "none", "pad": 1})  # fmt: skip
    # The table of running numbers.
    if stacked:
        table_left, table_top = label_w, matrix_top - rows_h - gap - 0.35
    else:
        table_left, table_top = matrix_w + 0.2, matrix_top
    for b in range(blocks):
        _text(ax, table_left + (b + 0.5) * column, table_top + 0.05, f"after block {b + 1}",
              va="bottom", size=7)  # fmt: skip
    for i in range(tokens):
        y = row_y(i, table_top)
        if stacked:
            weight = "bold" if i == highlight else "normal"
            _text(ax, label_w - 0.06, y + cell / 2, labels[i], ha="right", size=7.5,
                  fontweight=weight)  # fmt: skip
        for b in range(blocks):
            x = table_left + b * column
            carried = bool(skipped[i // block_size, b])
            fill = FACECOLOR if carried else DONE
            ax.add_patch(Rectangle((x, y), column, cell, facecolor=fill, edgecolor="white"))
            ink = MUTED if carried else INK
            m, total = float(running_max[i, b]), float(running_sum[i, b])
            _text(ax, x + column / 2, y + cell * 0.72, f"m {m:.4f}", size=6.5, color=ink,
                  gid=f"max {i} {b}")  # fmt: skip
            _text(ax, x + column / 2, y + cell * 0.28, f"ℓ {total:.4f}", size=6.5, color=ink,
                  gid=f"sum {i} {b}")  # fmt: skip
    if highlight is not None:
        for left, w in ((label_w, tokens * cell), (table_left, blocks * column)):
            y = row_y(highlight, table_top if left == table_left else matrix_top)
            ax.add_patch(Rectangle((left, y), w, cell, facecolor="none", edgecolor=CURRENT,
                                   linewidth=2.2))  # fmt: skip
    lines = ["m: the largest score so far", "ℓ: the sum of exp(score − m) so far",
             "white: a skipped tile adds nothing, m and ℓ carry over"]  # fmt: skip
    if not stacked:
        lines = ["; ".join(lines[:2]), lines[2]]
    _text(ax, 0.05, 0.05, "\n".join(lines), ha="left", va="bottom", size=7)
    return fig


def backward_blocks(
    num_tokens: int,
    block_size: int,
    *,
    causal: bool = True,
    key_block: int = 1,
    title: str | None = None,
) -> Axes:
    """The blocks of FlashAttention's backward pass, as the backward function visits them.

    The loops of :func:`~attention.flash.tiled_attention_backward`, drawn.

    A grid of query blocks (rows) by key blocks (columns). Each block the backward pass
    computes is filled, a block on the diagonal is marked "masked" (unless it is one
    token long, with no future to mask), and a block in the future of its queries
    (skipped) is left blank and hatched. The column of ``key_block`` is the outer loop's
    current step: its ``dK`` and ``dV`` are summed down the column, while each block
    also adds to its row's ``dQ``. Beside each row, what the forward pass saved for it:
    its output ``O`` and its log-sum-exp.

    Returns
    -------
    matplotlib.axes.Axes
        Its ``texts`` hold the labels; a block's label says what is done there. The cell
        of query block ``i`` and key block ``j`` has the gid ``"block <i> <j>"``, its
        label ``"label <i> <j>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> ax = backward_blocks(8, 2, key_block=1)
    >>> sum(t.get_text() == "skipped" for t in ax.texts)  # 3 + 2 + 1 future blocks
    6
    >>> plt.close(ax.figure)
    """
    owner = "backward_blocks"
    num_tokens = _positive(owner, "num_tokens", num_tokens, 4096)
    block_size = _positive(owner, "block_size", block_size, num_tokens)
    n = -(-num_tokens // block_size)  # blocks per side, the last one maybe shorter
    if n > 8:
        raise ValueError(f"{owner}: expected at most 8 blocks per side to stay readable, got {n}")
    key_block = _checks.whole_number(owner, key_block, "key_block must be an integer")
    if not 0 <= key_block < n:
        raise ValueError(f"{owner}: expected key_block in [0, {n - 1}], got {key_block}")
    cell, left, top = 0.9, 1.0, 0.6
    width, height = left + n * cell + 2.1, top + n * cell + 0.9
    _, ax = _canvas(owner, width, height, title)
    for i in range(n):
        y = height - top - (i + 1) * cell
        _text(ax, left - 0.1, y + cell / 2, f"Q{i}", ha="right")
        _text(
            ax,
            left + n * cell + 0.15,
            y + cell / 2,
            f"dQ{i} +=  (saved: O{i}, lse{i})",
            ha="left",
            size=8,
        )
        for j in range(n):
            x = left + j * cell
            # A block straddles the diagonal, and is masked, unless it is one token long.
            straddles = min((i + 1) * block_size, num_tokens) - i * block_size > 1
            future, diagonal = causal and j > i, causal and j == i and straddles
            current = j == key_block and not future
            fill = FACECOLOR if future else (CURRENT if current else DONE)
            label = "skipped" if future else ("masked" if diagonal else "P = exp(S - lse)")
            _cell(
                ax,
                x,
                y,
                cell,
                cell,
                label if future or diagonal or current else "",
                fill=fill,
                ink="white" if current else (MUTED if future else INK),
                size=6.5,
                edge=MUTED if future else INK,
                linewidth=0.8,
                hatch="///" if future else None,
                gid=f"block {i} {j}",
                text_gid=f"label {i} {j}",
            )
    for j in range(n):
        _text(
            ax,
            left + (j + 0.5) * cell,
            height - top + 0.1,
            f"K{j},V{j}",
            va="bottom",
            fontweight="bold" if j == key_block else "normal",
        )
    x = left + (key_block + 0.5) * cell
    _arrow(
        ax,
        (left + key_block * cell + 0.1, height - top - 0.05),
        (left + key_block * cell + 0.1, 0.75),
    )
    _text(ax, x, 0.55, f"dK{key_block}, dV{key_block}: summed down the column", va="top", size=8.5)
    return ax


def merge_picture(
    scores: torch.Tensor,
    split: int,
    labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> Figure:
    """The merge of two partial softmaxes, drawn from real scores.

    Three panels of bars: the softmax of the first ``split`` scores alone, that of the
    rest alone, each with its log-sum-exp; then both scaled by their share of the whole
    denominator, ``exp(lse_part - lse)``, side by side, which is the softmax of all the
    scores, drawn as outlines over the bars.

    Parameters
    ----------
    scores : torch.Tensor, shape (num_keys,)
        One query's scores.
    split : int
        How many keys the first part holds, from 1 to ``num_keys - 1``.
    labels : sequence of str, optional
        One per key (say the words).

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import torch
    >>> fig = merge_picture(torch.tensor([0.1, 0.5, 0.2, 0.9]), 2)
    >>> len(fig.axes)
    3
    >>> plt.close(fig)
    """
    owner = "merge_picture"
    _checks.tensor(owner, "scores", scores)
    if scores.dim() != 1:
        raise ValueError(
            f"{owner}: scores must be a 1-D tensor of one query's scores, got shape "
            f"{tuple(scores.shape)}"
        )
    num_keys = scores.shape[0]
    split = _positive(owner, "split", split, max(num_keys - 1, 1))
    labels = list(labels) if labels is not None else [str(i) for i in range(num_keys)]
    scores = scores.detach().double().cpu()
    parts = (slice(0, split), slice(split, num_keys))
    lses = [scores[p].logsumexp(dim=0) for p in parts]
    lse = scores.logsumexp(dim=0)
    fig, axes = plt.subplots(1, 3, figsize=(9.5, 2.9), facecolor=FACECOLOR, sharey=True)
    full = torch.softmax(scores, dim=0)
    top = float(torch.softmax(scores[parts[0]], 0).max().clamp(min=full.max())) * 1.25
    for ax, p, part_lse, fill, hatch, name in zip(
        axes[:2],
        parts,
        lses,
        HEAD_COLORS[:2],
        HEAD_HATCHES[:2],
        ("first part", "second part"),
        strict=True,
    ):
        x = torch.arange(num_keys)[p].tolist()
        ax.bar(x, torch.softmax(scores[p], 0).tolist(), color=fill, hatch=hatch, edgecolor=INK)
        ax.set_title(f"{name}: softmax alone, lse = {part_lse:.4f}", fontsize=9, color=INK)
    ax = axes[2]
    for p, part_lse, fill, hatch in zip(
        parts, lses, HEAD_COLORS[:2], HEAD_HATCHES[:2], strict=True
    ):
        share = torch.exp(part_lse - lse)
        x = torch.arange(num_keys)[p].tolist()
        heights = (share * torch.softmax(scores[p], 0)).tolist()
        ax.bar(x, heights, color=fill, hatch=hatch, edgecolor=INK)
    whole = full.tolist()  # matplotlib takes lists; a tensor warns under NumPy 2
    ax.bar(range(num_keys), whole, fill=False, edgecolor=INK, linestyle="--", linewidth=1.2)
    shares = ", ".join(f"{torch.exp(p - lse):.4f}" for p in lses)
    ax.set_title(f"merged: shares {shares}, lse = {lse:.4f}", fontsize=9, color=INK)
    for ax in axes:
        ax.set_facecolor(FACECOLOR)
        ax.set_xticks(range(num_keys), labels, rotation=45, fontsize=8)
        ax.set_ylim(0, top)
        ax.tick_params(colors=INK, labelsize=8)
    axes[0].set_ylabel("weight", color=INK)
    if title:
        fig.suptitle(title, fontsize=11, color=INK)
    fig.tight_layout()
    return fig


def ring_steps(
    world_size: int,
    *,
    causal: bool = True,
    zigzag: bool = False,
    title: str | None = None,
    layout: str = "wide",
) -> Figure:
    """A ring of processes, step by step: which key/value block each holds and works on.

    One panel per step, side by side (``layout="wide"``) or one under another
    (``"stacked"``, for a phone). The processes sit on a circle, arrows pointing to the process
    each passes its block to. A process shows which chunks of the sequence its keys and
    values hold at that step and how many blocks of scores it computes with them
    (:func:`~attention.ring.ring_work`, in units of one chunk by one chunk); one that
    computes nothing is hatched.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per step. Process ``r``'s box and its label at step ``s`` have the gid
        ``"step <s> P<r>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = ring_steps(4, causal=True)
    >>> len(fig.axes)
    4
    >>> plt.close(fig)
    """
    owner = "ring_steps"
    layout = _layout(owner, layout)
    world_size = _positive(owner, "world_size", world_size, 6)
    chunks = 2 * world_size if zigzag else world_size
    work = ring_work(chunks, world_size, causal=causal, zigzag=zigzag)  # a chunk is 1 token

    def held(rank: int) -> str:
        return f"{rank},{2 * world_size - 1 - rank}" if zigzag else f"{rank}"

    shape, size = (1, world_size), (2.3 * world_size, 2.7)
    if layout == "stacked":
        shape, size = (world_size, 1), (min(2.6, PHONE_WIDTH_INCHES), 2.7 * world_size)
    fig, axes = plt.subplots(*shape, figsize=size, facecolor=FACECOLOR, squeeze=False)
    radius = 1.0
    for step, ax in enumerate(axes.ravel()):
        ax.set_xlim(-1.8, 1.8)
        ax.set_ylim(-1.8, 1.8)
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title(f"step {step}", fontsize=10, color=INK)
        where = [
            (radius * math.sin(2 * math.pi * r / world_size),
             radius * math.cos(2 * math.pi * r / world_size))
            for r in range(world_size)
        ]  # fmt: skip
        for r in range(world_size):
            if world_size > 1:
                a, b = where[r], where[(r + 1) % world_size]
                ax.add_patch(
                    FancyArrowPatch(
                        a,
                        b,
                        arrowstyle="-|>",
                        mutation_scale=10,
                        color=MUTED,
                        connectionstyle="arc3,rad=-0.3",
                        shrinkA=22,
                        shrinkB=22,
                    )
                )
            blocks = int(work[r, step])
            x, y = where[r]
            fill = HEAD_COLORS[r % len(HEAD_COLORS)] if blocks else FACECOLOR
            hatch = None if blocks else "///"
            gid = f"step {step} P{r}"
            style = {"facecolor": fill, "edgecolor": INK, "hatch": hatch, "gid": gid}
            _rounded(ax, x - 0.5, y - 0.38, 1.0, 0.76, rounding=0.1, **style)
            kv = held((r - step) % world_size)
            text = f"P{r}\nK,V {kv}\n{blocks} block{'s' * (blocks != 1)}"
            _text(ax, x, y, text, size=7, gid=gid)
    if title:
        fig.suptitle(title, fontsize=11, color=INK)
    fig.tight_layout()
    return fig
