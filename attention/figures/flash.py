"""Attention computed in pieces: FlashAttention's backward pass, one merge, a ring (Part VI).

The blocks the backward pass visits, computed, masked or skipped
(:func:`backward_blocks`, chapter 27); two partial softmaxes merged by their
log-sum-exps (:func:`merge_picture`, chapter 28); a ring of processes passing their
keys and values, step by step (:func:`ring_steps`, chapter 28), with the work
:func:`~attention.ring.ring_work` counts.

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
from matplotlib.patches import FancyArrowPatch

from attention import _checks
from attention.figures.style import (
    CURRENT,
    DONE,
    FACECOLOR,
    HEAD_COLORS,
    HEAD_HATCHES,
    INK,
    MUTED,
    _arrow,
    _canvas,
    _cell,
    _positive,
    _rounded,
    _text,
)
from attention.ring import ring_work

__all__ = ["backward_blocks", "merge_picture", "ring_steps"]


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
    world_size: int, *, causal: bool = True, zigzag: bool = False, title: str | None = None
) -> Figure:
    """A ring of processes, step by step: which key/value block each holds and works on.

    One panel per step. The processes sit on a circle, arrows pointing to the process
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
    world_size = _positive(owner, "world_size", world_size, 6)
    chunks = 2 * world_size if zigzag else world_size
    work = ring_work(chunks, world_size, causal=causal, zigzag=zigzag)  # a chunk is 1 token

    def held(rank: int) -> str:
        return f"{rank},{2 * world_size - 1 - rank}" if zigzag else f"{rank}"

    fig, axes = plt.subplots(
        1, world_size, figsize=(2.3 * world_size, 2.7), facecolor=FACECOLOR, squeeze=False
    )
    radius = 1.0
    for step, ax in enumerate(axes[0]):
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
