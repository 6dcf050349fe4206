"""Schematic figures of attention, drawn with code (needs matplotlib).

The heatmaps of :mod:`attention.plot` show numbers; these figures show structure:
where a chapter stands on the road from simplified to multi-head attention, which
matrix products turn the inputs into context vectors, how ``view`` and ``transpose``
split heads without moving a number, and the paper's scaled dot-product attention.
They are drawn from the same shapes the chapters compute (the memory picture even
from real tensors' strides), so they cannot drift from the code.

Like :mod:`attention.plot`, every figure has an opaque white background and dark
ink, so that it reads the same on the site's light and dark pages, and every
distinction is made by shape or text as well as colour.

>>> import matplotlib.pyplot as plt
>>> from attention.diagrams import roadmap
>>> fig = roadmap(current=2)
>>> [t.get_text() for t in fig.axes[0].texts if t.get_text() == "you are here"]
['you are here']
>>> plt.close(fig)
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import torch

from attention import _checks

try:
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
except ModuleNotFoundError as error:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "attention.diagrams needs matplotlib; install it with "
        "pip install 'attention-step-by-step[plot]'"
    ) from error

__all__ = [
    "STAGES",
    "backward_blocks",
    "head_split",
    "matrix_form",
    "merge_picture",
    "paged_blocks",
    "ring_steps",
    "roadmap",
    "scaled_dot_product_diagram",
]

#: Opaque background, as in attention.plot: the figures read on dark pages too.
FACECOLOR = "white"
INK = "#222222"
MUTED = "#8a8a8a"
#: The stage a page is about: a dark fill with white text.
CURRENT = "#31688e"
#: Stages already covered: a pale tint of the same blue.
DONE = "#dbe7f1"
#: Fills for heads 1, 2, ...; heads after the first are also hatched, so they differ
#: in greyscale and for colour-blind readers too.
HEAD_COLORS = ("#a6cee3", "#fdbf6f", "#b2df8a", "#cab2d6")
HEAD_HATCHES = ("", "///", "...", "xx")

#: The four stages of the book's chapter 3, in order, with the chapter of this site
#: that builds each one. The names are short, so that the figure stays legible on a phone.
STAGES = (
    ("Simplified\nattention", "chapter 1"),
    ("Trainable\nweights", "chapter 2"),
    ("Causal\nattention", "chapter 3"),
    ("Multi-head\nattention", "chapter 4"),
)


def _positive(owner: str, name: str, value: object, most: int) -> int:
    """``value`` as an int in ``[1, most]``, or a ValueError saying what was given."""
    number = _checks.whole_number(owner, value, f"{name} must be a positive integer")
    if not 1 <= number <= most:
        raise ValueError(
            f"{owner}: {name} must be between 1 and {most} for the drawing to stay "
            f"readable, got {number}"
        )
    return number


def _canvas(
    owner: str, width: float, height: float, title: str | None = None
) -> tuple[Figure, Axes]:
    """A white figure with one frameless axes whose data units are inches.

    A ``title`` goes above the drawing, as the figure's suptitle (which sphinx-gallery
    also uses as the image's alt text), in room added for it.
    """
    if title is not None and not isinstance(title, str):
        raise ValueError(f"{owner}: title must be a string or None, got {type(title).__name__}")
    if title:
        # A title wider than the figure would be cut at both edges: wrap each line to
        # the width (at 11 pt, a character is at most about 0.09 inch wide on average).
        columns = int(width / 0.09)
        title = "\n".join(
            textwrap.fill(line, columns, break_on_hyphens=False) for line in title.split("\n")
        )
    extra = 0.25 + 0.22 * (title.count("\n") + 1) if title else 0.0
    fig = plt.figure(figsize=(width, height + extra), facecolor=FACECOLOR)
    ax = fig.add_axes((0, 0, 1, height / (height + extra)))
    if title:
        fig.suptitle(title, fontsize=11, color=INK, y=1 - 0.1 / (height + extra), va="top")
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def _box(
    ax: Axes,
    x: float,
    y: float,
    w: float,
    h: float,
    text: str,
    *,
    fill: str = FACECOLOR,
    edge: str = INK,
    ink: str = INK,
    style: str = "-",
    width: float = 1.2,
    size: float = 10,
    weight: str = "normal",
) -> None:
    """A rounded box with its lower-left corner at (x, y) and centred text."""
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.08",
            facecolor=fill,
            edgecolor=edge,
            linestyle=style,
            linewidth=width,
        )
    )
    ax.text(
        x + w / 2,
        y + h / 2,
        text,
        ha="center",
        va="center",
        color=ink,
        fontsize=size,
        fontweight=weight,
        linespacing=1.15,
    )


def _arrow(
    ax: Axes, start: tuple[float, float], end: tuple[float, float], color: str = INK
) -> None:
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=12,
            color=color,
            linewidth=1.2,
            shrinkA=0,
            shrinkB=0,
        )
    )


def roadmap(
    current: int | None = None, *, note: str | None = None, title: str | None = None
) -> Figure:
    """The four stages of self-attention, left to right, with one of them marked.

    Parameters
    ----------
    current : int or None
        The stage a page is about, 1 to 4 (see :data:`STAGES`): drawn filled, with
        "you are here" above it; the stages before it are ticked and pale, the ones
        after it dashed. ``None`` marks none, for an overview.
    note : str, optional
        One line under the stages, to say where a page beyond the four stands.
    title : str, optional
        A title above the figure (every function here takes one).

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.axes[0].texts`` holds every label drawn.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = roadmap(current=3)
    >>> labels = [t.get_text() for t in fig.axes[0].texts]
    >>> "Causal\\nattention" in labels, "✓ chapter 1" in labels, "chapter 4" in labels
    (True, True, True)
    >>> plt.close(fig)
    >>> roadmap(current=5)
    Traceback (most recent call last):
    ...
    ValueError: roadmap: current must be a stage from 1 to 4 or None, got 5
    """
    valid = isinstance(current, int) and not isinstance(current, bool) and 1 <= current <= 4
    if current is not None and not valid:
        raise ValueError(
            f"roadmap: current must be a stage from 1 to {len(STAGES)} or None, got {current!r}"
        )
    if note is not None and not isinstance(note, str):
        raise ValueError(f"roadmap: note must be a string or None, got {type(note).__name__}")

    # Large type in a narrow figure: on a phone the whole row is 360 pixels wide.
    box_w, box_h, gap, margin, size = 1.55, 0.95, 0.4, 0.15, 14
    width = 2 * margin + len(STAGES) * box_w + (len(STAGES) - 1) * gap
    height = 2.05 + (0.4 if note else 0.0)
    fig, ax = _canvas("roadmap", width, height, title)
    y = 0.55 + (0.4 if note else 0.0)
    for number, (name, chapter) in enumerate(STAGES, start=1):
        x = margin + (number - 1) * (box_w + gap)
        if number == current:
            _box(
                ax,
                x,
                y,
                box_w,
                box_h,
                name,
                fill=CURRENT,
                edge=CURRENT,
                ink="white",
                width=2.4,
                weight="bold",
                size=size,
            )
            ax.text(
                x + box_w / 2,
                y + box_h + 0.12,
                "you are here",
                ha="center",
                va="bottom",
                color=CURRENT,
                fontsize=12,
                fontweight="bold",
            )
        elif current is not None and number < current:
            _box(ax, x, y, box_w, box_h, name, fill=DONE, edge=CURRENT, size=size)
        elif current is not None:
            _box(ax, x, y, box_w, box_h, name, edge=MUTED, ink=MUTED, style="--", size=size)
        else:
            _box(ax, x, y, box_w, box_h, name, fill=DONE, edge=CURRENT, size=size)
        done = current is not None and number < current
        ax.text(
            x + box_w / 2,
            y - 0.1,
            ("✓ " if done else "") + chapter,
            ha="center",
            va="top",
            fontsize=11,
            color=INK if number == current else MUTED,
        )
        if number < len(STAGES):
            _arrow(ax, (x + box_w + 0.08, y + box_h / 2), (x + box_w + gap - 0.08, y + box_h / 2))
    if note:
        ax.text(
            width / 2, 0.15, note, ha="center", va="bottom", fontsize=11, color=INK, style="italic"
        )
    return fig


def _matrix(
    ax: Axes,
    x: float,
    y: float,
    rows: int,
    cols: int,
    cell: float,
    name: str,
    fill: str,
    *,
    causal: bool = False,
) -> tuple[float, float, float, float]:
    """A grid of ``rows`` by ``cols`` cells, its top-left corner at (x, y), named below.

    Returns the grid's (left, bottom, right, top).
    """
    for i in range(rows):
        for j in range(cols):
            hidden = causal and j > i
            ax.add_patch(
                Rectangle(
                    (x + j * cell, y - (i + 1) * cell),
                    cell,
                    cell,
                    facecolor="#e4e4e4" if hidden else fill,
                    edgecolor="white" if not hidden else "#9a9a9a",
                    hatch="///" if hidden else None,
                    linewidth=0.8,
                )
            )
    left, top, right, bottom = x, y, x + cols * cell, y - rows * cell
    ax.add_patch(
        Rectangle(
            (left, bottom), right - left, top - bottom, fill=False, edgecolor=INK, linewidth=1.0
        )
    )
    ax.text((left + right) / 2, bottom - 0.08, name, ha="center", va="top", fontsize=10, color=INK)
    return left, bottom, right, top


def _labelled_arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    label: str,
    *,
    above: bool = True,
) -> None:
    """An arrow with a label at its middle, above or below it."""
    _arrow(ax, start, end)
    mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
    ax.text(
        mx,
        my + (0.07 if above else -0.07),
        label,
        ha="center",
        va="bottom" if above else "top",
        fontsize=8.5,
        color=INK,
        bbox={"facecolor": FACECOLOR, "edgecolor": "none", "pad": 0.5},
    )


def matrix_form(
    num_tokens: int = 6,
    d_in: int = 3,
    d_out: int = 2,
    *,
    causal: bool = False,
    title: str | None = None,
) -> Figure:
    """Self-attention as matrix products: X to Q, K, V, then scores, weights, context.

    Each matrix is drawn as a grid of its real shape (one cell per number), and each
    arrow says what it computes and the shape it produces, for one sequence (no batch
    dimension). The defaults are the running example of chapter 2.

    Parameters
    ----------
    num_tokens, d_in, d_out : int
        The number of tokens (1 to 12), the embedding size and the size of queries,
        keys and values (1 to 8 each).
    causal : bool
        Hatch the weights above the diagonal, as the causal mask of chapter 3 hides
        them.
    title : str, optional
        A title above the figure.

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.axes[0].texts`` holds the names and arrow labels.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = matrix_form()  # 6 tokens, d_in = 3, d_out = 2
    >>> labels = [t.get_text() for t in fig.axes[0].texts]
    >>> "X  (6, 3)" in labels, "scores  (6, 6)" in labels, "context  (6, 2)" in labels
    (True, True, True)
    >>> plt.close(fig)
    """
    t = _positive("matrix_form", "num_tokens", num_tokens, 12)
    d_in = _positive("matrix_form", "d_in", d_in, 8)
    d_out = _positive("matrix_form", "d_out", d_out, 8)

    cell = min(0.2, 1.4 / t)  # a 6-token square is 1.2 inches
    gap = 1.45  # room for an arrow and its label
    block = t * cell  # height of every matrix: one row per token
    vgap = 0.5
    height = 3 * block + 2 * vgap + 0.9
    width = 0.3 + (d_in + 2 * d_out + 2 * t) * cell + 4 * gap + 0.6
    fig, ax = _canvas("matrix_form", width, height, title)

    mid = height / 2 + 0.1  # vertical centre of X, K, the scores and the weights
    x0 = 0.3
    _, x_b, x_r, x_t = _matrix(
        ax, x0, mid + block / 2, t, d_in, cell, f"X  ({t}, {d_in})", "#d9d9d9"
    )
    qkv_x = x_r + gap
    fills = {"Q": HEAD_COLORS[0], "K": HEAD_COLORS[1], "V": HEAD_COLORS[2]}
    tops = {
        "Q": mid + block / 2 + block + vgap,
        "K": mid + block / 2,
        "V": mid + block / 2 - block - vgap,
    }
    boxes = {}
    for name, top in tops.items():
        boxes[name] = _matrix(
            ax, qkv_x, top, t, d_out, cell, f"{name}  ({t}, {d_out})", fills[name]
        )
        _, b, _, tp = boxes[name]
        w = "$X W_" + {"Q": "q", "K": "k", "V": "v"}[name] + "$"
        _labelled_arrow(
            ax,
            (x_r + 0.05, (x_b + x_t) / 2),
            (qkv_x - 0.05, (b + tp) / 2),
            f"{w} → ({t}, {d_out})",
            above=name != "V",
        )

    s_x = boxes["Q"][2] + gap
    s_top = mid + block / 2
    s_l, s_b, s_r, s_t = _matrix(ax, s_x, s_top, t, t, cell, f"scores  ({t}, {t})", "#c7c1e0")
    q_mid = (boxes["Q"][1] + boxes["Q"][3]) / 2
    k_mid = (boxes["K"][1] + boxes["K"][3]) / 2
    _labelled_arrow(
        ax,
        (boxes["Q"][2] + 0.05, q_mid),
        (s_l - 0.05, (s_b + s_t) / 2 + 0.2),
        f"$QK^\\top$ → ({t}, {t})",
    )
    _arrow(ax, (boxes["K"][2] + 0.05, k_mid), (s_l - 0.05, (s_b + s_t) / 2 - 0.1))

    w_x = s_r + gap
    w_l, w_b, w_r, w_t = _matrix(
        ax, w_x, s_top, t, t, cell, f"weights  ({t}, {t})", "#9fd3c7", causal=causal
    )
    softmax = ("mask the future,\n" if causal else "") + r"softmax$(\cdot\,/\sqrt{d_k})$"
    _labelled_arrow(
        ax,
        (s_r + 0.05, (s_b + s_t) / 2),
        (w_l - 0.05, (w_b + w_t) / 2),
        f"{softmax}\nrow by row → ({t}, {t})",
    )

    c_x = w_r + gap
    c_top = (s_b + boxes["V"][1]) / 2 + block / 2 - 0.2
    c_l, c_b, _, c_t = _matrix(
        ax, c_x, c_top, t, d_out, cell, f"context  ({t}, {d_out})", HEAD_COLORS[3]
    )
    _labelled_arrow(
        ax,
        (w_r + 0.05, (w_b + w_t) / 2),
        (c_l - 0.05, (c_b + c_t) / 2 + 0.1),
        f"weights $V$\n→ ({t}, {d_out})",
    )
    v_mid = (boxes["V"][1] + boxes["V"][3]) / 2
    _arrow(ax, (boxes["V"][2] + 0.05, v_mid), (c_l - 0.05, (c_b + c_t) / 2 - 0.15))
    return fig


def _memory_order(tensor: torch.Tensor) -> list[tuple[int, int]]:
    """For each memory slot the tensor uses, in memory order: (identity, read order).

    ``identity`` is the element's value (an integer stored as a float), ``read order``
    its position when the tensor is read in its logical, row-major order.
    """
    offsets = torch.zeros(tensor.shape, dtype=torch.long)
    for dim, stride in enumerate(tensor.stride()):
        shape = [1] * tensor.dim()
        shape[dim] = tensor.shape[dim]
        offsets = offsets + torch.arange(tensor.shape[dim]).view(shape) * stride
    slots = offsets.flatten().tolist()
    values = tensor.flatten().long().tolist()
    by_slot = sorted(zip(slots, values, range(len(slots)), strict=True))
    return [(value, order) for _, value, order in by_slot]


def head_split(
    num_tokens: int = 6, num_heads: int = 2, head_dim: int = 2, *, title: str | None = None
) -> Figure:
    """Splitting into heads and merging back, as the tensor's memory sees it.

    Each row is one step of :class:`~attention.MultiHeadAttention` for one sequence:
    a strip of the memory cells the tensor uses, in memory order. A cell's colour (and
    hatching) is its head, the number in it its token, and the small number above it
    the order in which the tensor's shape reads it. Where those small numbers run
    0, 1, 2, ... the tensor is contiguous and ``view`` can reshape it; where they jump,
    only a copy (``contiguous()`` or ``reshape``) can. The steps run on real tensors
    and the strides printed are theirs.

    Parameters
    ----------
    num_tokens, num_heads, head_dim : int
        Tokens of the sequence, heads, and features per head; at most 48 numbers in
        all (``num_tokens * num_heads * head_dim``).
    title : str, optional
        A title above the figure.

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.axes[0].texts`` holds the row titles, token numbers and read orders.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = head_split()  # 6 tokens, 2 heads of 2 features: 24 numbers
    >>> titles = [t.get_text() for t in fig.axes[0].texts if "strides" in t.get_text()]
    >>> titles[2].split("   ")
    ['q_heads = q_split.transpose(0, 1)',
     'shape (2, 6, 2), strides (2, 4, 1): same memory, not contiguous']
    >>> plt.close(fig)
    """
    t = _positive("head_split", "num_tokens", num_tokens, 12)
    h = _positive("head_split", "num_heads", num_heads, len(HEAD_COLORS))
    hd = _positive("head_split", "head_dim", head_dim, 8)
    d_out = h * hd
    n = t * d_out
    if n > 48:
        raise ValueError(
            "head_split: expected at most 48 numbers (num_tokens * num_heads * head_dim) "
            f"to draw, got {t} * {h} * {hd} = {n}"
        )

    # Element k of the queries is the number k, so it can be followed through every step.
    q = torch.arange(n, dtype=torch.float64).view(t, d_out)
    q_split = q.view(t, h, hd)
    q_heads = q_split.transpose(0, 1)
    # weights @ values with identity weights: a new, head-major tensor holding the
    # same numbers, as the real product holds the heads' context vectors.
    context = torch.eye(t, dtype=torch.float64).expand(h, t, t) @ q_heads
    context_t = context.transpose(0, 1)
    merged = context_t.contiguous().view(t, d_out)

    def shape(x: torch.Tensor) -> str:
        return str(tuple(x.shape)).replace(",)", ")")

    def describe(code: str, x: torch.Tensor, what: str) -> str:
        state = "contiguous" if x.is_contiguous() else "not contiguous"
        return f"{code}   shape {shape(x)}, strides {shape_of(x.stride())}: {what}, {state}"

    def shape_of(stride: tuple[int, ...]) -> str:
        return str(tuple(stride)).replace(",)", ")")

    steps = [
        (describe("queries", q, "one row per token"), q),
        (describe(f"q_split = queries.view({t}, {h}, {hd})", q_split, "same memory"), q_split),
        (describe("q_heads = q_split.transpose(0, 1)", q_heads, "same memory"), q_heads),
        (describe("context = weights @ v_heads", context, "new memory, head by head"), context),
        (describe("context_t = context.transpose(0, 1)", context_t, "same memory"), context_t),
        (
            describe(
                f"context_t.contiguous().view({t}, {d_out})", merged, "a copy, token by token"
            ),
            merged,
        ),
    ]

    cell = min(0.3, 7.6 / n)
    row_h = 0.95
    width = n * cell + 0.6
    height = len(steps) * row_h + 0.95
    fig, ax = _canvas("head_split", width, height, title)
    x0 = 0.3
    for row, (text, tensor) in enumerate(steps):
        top = height - 0.2 - row * row_h
        ax.text(x0, top, text, ha="left", va="top", fontsize=8.5, color=INK, family="monospace")
        y = top - 0.68
        for slot, (value, order) in enumerate(_memory_order(tensor)):
            token, feature = divmod(value, d_out)
            head = feature // hd
            ax.add_patch(
                Rectangle(
                    (x0 + slot * cell, y),
                    cell,
                    cell * 0.9,
                    facecolor=HEAD_COLORS[head],
                    edgecolor="white",
                    hatch=HEAD_HATCHES[head] or None,
                    linewidth=0.8,
                )
            )
            ax.text(
                x0 + (slot + 0.5) * cell,
                y + cell * 0.45,
                str(token),
                ha="center",
                va="center",
                fontsize=8,
                color=INK,
                fontweight="bold",
                bbox={"facecolor": HEAD_COLORS[head], "edgecolor": "none", "pad": 0.2},
            )
            jump = order != slot
            ax.text(
                x0 + (slot + 0.5) * cell,
                y + cell * 0.9 + 0.03,
                str(order),
                ha="center",
                va="bottom",
                fontsize=6.5,
                color="#b2182b" if jump else MUTED,
                fontweight="bold" if jump else "normal",
            )
    # The key: one swatch per head.
    key_y = 0.15
    for head in range(h):
        x = x0 + head * 1.3
        ax.add_patch(
            Rectangle(
                (x, key_y),
                0.25,
                0.2,
                facecolor=HEAD_COLORS[head],
                edgecolor="white",
                hatch=HEAD_HATCHES[head] or None,
            )
        )
        ax.text(x + 0.32, key_y + 0.1, f"head {head + 1}", va="center", fontsize=8.5, color=INK)
    ax.text(
        x0,
        key_y + 0.32,
        "In a cell: its token. Above it: when the shape reads it (red: out of memory order).",
        va="bottom",
        fontsize=8.5,
        color=INK,
    )
    return fig


def scaled_dot_product_diagram(
    num_tokens: int | None = 6, d_k: int = 2, d_v: int | None = None, *, title: str | None = None
) -> Figure:
    """The paper's scaled dot-product attention as a flow chart, bottom to top.

    MatMul of Q and Kᵀ, Scale by 1/√d_k, an optional Mask, SoftMax over each row,
    and MatMul with V: ``softmax(Q Kᵀ / √d_k) V``, as "Attention Is All You Need"
    draws it. With ``num_tokens`` each arrow carries its shape for one sequence.

    Parameters
    ----------
    num_tokens : int or None
        Tokens of the sequence (1 to 4096), for the shapes on the arrows; ``None``
        leaves the shapes out.
    d_k, d_v : int
        Size of the queries and keys, and of the values (``d_v`` defaults to ``d_k``).
    title : str, optional
        A title above the figure.

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.axes[0].texts`` holds the boxes' names and the shapes.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = scaled_dot_product_diagram(6, d_k=2)
    >>> labels = [t.get_text() for t in fig.axes[0].texts]
    >>> [name for name in ("MatMul", "Scale", "Mask (opt.)", "SoftMax") if name in labels]
    ['MatMul', 'Scale', 'Mask (opt.)', 'SoftMax']
    >>> "(6, 6)" in labels, "output (6, 2)" in labels
    (True, True)
    >>> plt.close(fig)
    """
    owner = "scaled_dot_product_diagram"
    t = None if num_tokens is None else _positive(owner, "num_tokens", num_tokens, 4096)
    d_k = _positive(owner, "d_k", d_k, 4096)
    d_v = d_k if d_v is None else _positive(owner, "d_v", d_v, 4096)

    box_w, box_h, step = 1.5, 0.42, 0.92  # boxes, and the distance from one to the next
    chain = [  # bottom to top: name, fill, border, what it does
        ("MatMul", "#c7c1e0", "-", "Q Kᵀ"),
        ("Scale", "#fdbf6f", "-", "÷ √d_k"),
        ("Mask (opt.)", "#f4cccc", "--", "future → −∞"),
        ("SoftMax", "#9fd3c7", "-", "over each row"),
    ]
    bottom = 0.95 if t is not None else 0.8  # the first box; the inputs sit below it
    top = bottom + len(chain) * step  # the last MatMul
    width, height = 3.9, top + box_h + 0.75
    fig, ax = _canvas("scaled_dot_product_diagram", width, height, title)
    cx = 1.3  # the centre line of the chain
    for i, (name, fill, style, what) in enumerate(chain):
        y = bottom + i * step
        _box(ax, cx - box_w / 2, y, box_w, box_h, name, fill=fill, style=style)
        ax.text(
            cx + box_w / 2 + 0.08,
            y + box_h / 2,
            what,
            ha="left",
            va="center",
            fontsize=8.5,
            color=INK,
        )
        # Every arrow up the chain carries one score per pair of tokens.
        end_x = cx if i < len(chain) - 1 else cx + 0.3
        _arrow(ax, (cx, y + box_h), (end_x, y + step))
        if t is not None:
            ax.text(
                cx - 0.08,
                y + box_h + (step - box_h) / 2,
                f"({t}, {t})",
                ha="right",
                va="center",
                fontsize=8,
                color=MUTED,
            )
    last_x = cx + 0.3 - box_w / 2  # the last MatMul sits a little to the right, towards V
    _box(ax, last_x, top, box_w, box_h, "MatMul", fill="#c7c1e0")
    ax.text(
        last_x - 0.08,
        top + box_h / 2,
        "weights V",
        ha="right",
        va="center",
        fontsize=8.5,
        color=INK,
    )

    # The inputs: Q and K feed the first MatMul; V rises past the side notes to the last.
    inputs_y = 0.42 if t is not None else 0.3
    v_x = cx + box_w / 2 + 1.25
    for name, x, size in (("Q", cx - 0.4, d_k), ("K", cx + 0.4, d_k), ("V", v_x, d_v)):
        ax.text(
            x, inputs_y, name, ha="center", va="center", fontsize=12, color=INK, fontweight="bold"
        )
        if name == "V":
            ax.plot([v_x, v_x], [inputs_y + 0.16, top + box_h / 2], color=INK, linewidth=1.2)
            _arrow(ax, (v_x, top + box_h / 2), (last_x + box_w, top + box_h / 2))
        else:
            _arrow(ax, (x, inputs_y + 0.16), (cx + (x - cx) / 2, bottom))
        if t is not None:
            ax.text(
                x, inputs_y - 0.16, f"({t}, {size})", ha="center", va="top", fontsize=8, color=MUTED
            )
    out_x = last_x + box_w / 2
    _arrow(ax, (out_x, top + box_h), (out_x, top + box_h + 0.3))
    ax.text(
        out_x,
        top + box_h + 0.34,
        "output" + (f" ({t}, {d_v})" if t is not None else ""),
        ha="center",
        va="bottom",
        fontsize=9,
        color=INK,
    )
    return fig


#: One pale fill per sequence in :func:`paged_blocks` (the sequence's id is written too).
SEQUENCE_FILLS = ("#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99")
#: A block that several sequences share: grey, and hatched.
SHARED_FILL = "#dddddd"


def paged_blocks(
    cache: object,
    labels: dict[int, Sequence[str]] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """A :class:`~attention.PagedKVCache`'s pool: which sequence's tokens fill which block.

    One row per block of the pool, one cell per slot. A slot that holds a token is
    filled with its sequence's colour and shows the token (its position, or its label);
    a block that several sequences share is grey, hatched, and says whose it is. On the right,
    each sequence's block table.

    Parameters
    ----------
    cache : PagedKVCache
        Drawn as it is now; it is only read.
    labels : dict, optional
        For a sequence id, one label per token (say the words); default: positions.
    ax : matplotlib.axes.Axes, optional
        Where to draw; default, a new figure.
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes
        Its ``texts`` hold the slots' labels and the block tables.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import torch
    >>> from attention import PagedKVCache
    >>> cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1)
    >>> cache.add(0)
    >>> cache.append(0, torch.zeros(3, 1, 1), torch.zeros(3, 1, 1))
    >>> ax = paged_blocks(cache, {0: ["a", "b", "c"]})
    >>> [t.get_text() for t in ax.texts if t.get_text() in ("a", "b", "c", "seq 0: [0, 1]")]
    ['a', 'b', 'c', 'seq 0: [0, 1]']
    >>> plt.close(ax.figure)
    """
    from attention.paged import PagedKVCache

    owner = "paged_blocks"
    if not isinstance(cache, PagedKVCache):
        raise ValueError(f"{owner}: cache must be a PagedKVCache, got {type(cache).__name__}")
    labels = labels or {}
    num_blocks, size = cache.num_blocks, cache.block_size
    cell = 0.42  # inches per slot
    table_width = 2.6
    width, height = 0.9 + size * cell + table_width, 0.3 + num_blocks * cell
    if ax is None:
        _, ax = _canvas(owner, width, height, title)
    else:
        ax.set_xlim(0, width)
        ax.set_ylim(0, height)
        ax.set_axis_off()
        if title:
            ax.set_title(title, fontsize=10, color=INK)
    readers: dict[int, list[int]] = {}  # block -> the sequences whose tables hold it
    for seq_id in cache.seq_ids:
        for block in cache.block_table(seq_id):
            readers.setdefault(block, []).append(seq_id)
    # A colour per id, not per position, so a sequence keeps its colour when others go.
    fills = {s: SEQUENCE_FILLS[s % len(SEQUENCE_FILLS)] for s in cache.seq_ids}
    left = 0.9
    for block in range(num_blocks):
        y = height - 0.15 - (block + 1) * cell  # block 0 at the top
        ax.text(
            left - 0.08,
            y + cell / 2,
            f"block {block}",
            ha="right",
            va="center",
            fontsize=8,
            color=INK if block in readers else MUTED,
        )
        owners = readers.get(block, [])
        seq_id = owners[0] if owners else None
        if seq_id is not None:
            index = cache.block_table(seq_id).index(block)
            first = index * size  # the first token this block holds
            filled = min(size, cache.num_tokens(seq_id) - first)
        fill = SHARED_FILL if len(owners) > 1 else fills.get(seq_id)
        for slot in range(size):
            x = left + slot * cell
            used = seq_id is not None and slot < filled
            ax.add_patch(
                Rectangle(
                    (x, y),
                    cell,
                    cell,
                    facecolor=fill if used else FACECOLOR,
                    edgecolor=INK if used else MUTED,
                    linewidth=0.8,
                    hatch="///" if used and len(owners) > 1 else None,
                )
            )
            if used:
                token = first + slot
                names = labels.get(seq_id)
                text = str(names[token]) if names is not None else str(token)
                ax.text(
                    x + cell / 2,
                    y + cell / 2,
                    text,
                    ha="center",
                    va="center",
                    fontsize=6.5 if len(text) > 3 else 8,
                    color=INK,
                )
        if len(owners) > 1:
            ax.text(
                left + size * cell + 0.08,
                y + cell / 2,
                "shared: " + ", ".join(map(str, owners)),
                ha="left",
                va="center",
                fontsize=7.5,
                color=INK,
            )
    x_tables = left + size * cell + 1.0
    ax.text(
        x_tables,
        height - 0.15,
        "block tables",
        ha="left",
        va="top",
        fontsize=9,
        color=INK,
        fontweight="bold",
    )
    for i, seq_id in enumerate(cache.seq_ids):
        ax.text(
            x_tables,
            height - 0.15 - (i + 1) * cell,
            f"seq {seq_id}: {cache.block_table(seq_id)}",
            ha="left",
            va="top",
            fontsize=8.5,
            color=INK,
            bbox={"facecolor": fills[seq_id], "edgecolor": "none", "pad": 1.5},
        )
    ax.text(
        x_tables,
        height - 0.15 - (len(cache.seq_ids) + 1.3) * cell,
        f"{cache.num_free_blocks} of {num_blocks} blocks free",
        ha="left",
        va="top",
        fontsize=8.5,
        color=MUTED,
    )
    return ax


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
    computes is filled, a block on the diagonal is marked "masked", and a block in the
    future of its queries (skipped) is left blank and hatched. The column of
    ``key_block`` is the outer loop's current step: its ``dK`` and ``dV`` are summed
    down the column, while each block also adds to its row's ``dQ``. Beside each row,
    what the forward pass saved for it: its output ``O`` and its log-sum-exp.

    Returns
    -------
    matplotlib.axes.Axes
        Its ``texts`` hold the labels; a block's label says what is done there.

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
        ax.text(left - 0.1, y + cell / 2, f"Q{i}", ha="right", va="center", fontsize=9, color=INK)
        ax.text(
            left + n * cell + 0.15,
            y + cell / 2,
            f"dQ{i} +=  (saved: O{i}, lse{i})",
            ha="left",
            va="center",
            fontsize=8,
            color=INK,
        )
        for j in range(n):
            x = left + j * cell
            future, diagonal = causal and j > i, causal and j == i
            current = j == key_block and not future
            fill = FACECOLOR if future else (CURRENT if current else DONE)
            ax.add_patch(
                Rectangle(
                    (x, y),
                    cell,
                    cell,
                    facecolor=fill,
                    edgecolor=MUTED if future else INK,
                    hatch="///" if future else None,
                    linewidth=0.8,
                )
            )
            label = "skipped" if future else ("masked" if diagonal else "P = exp(S - lse)")
            ax.text(
                x + cell / 2,
                y + cell / 2,
                label if future or diagonal or current else "",
                ha="center",
                va="center",
                fontsize=6.5,
                color="white" if current else (MUTED if future else INK),
                wrap=True,
            )
    for j in range(n):
        ax.text(
            left + (j + 0.5) * cell,
            height - top + 0.1,
            f"K{j},V{j}",
            ha="center",
            va="bottom",
            fontsize=9,
            color=INK,
            fontweight="bold" if j == key_block else "normal",
        )
    x = left + (key_block + 0.5) * cell
    _arrow(
        ax,
        (left + key_block * cell + 0.1, height - top - 0.05),
        (left + key_block * cell + 0.1, 0.75),
    )
    ax.text(
        x,
        0.55,
        f"dK{key_block}, dV{key_block}: summed down the column",
        ha="center",
        va="top",
        fontsize=8.5,
        color=INK,
    )
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
    if not isinstance(scores, torch.Tensor) or scores.dim() != 1:
        raise ValueError(f"{owner}: scores must be a 1-D tensor of one query's scores")
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
    ax.bar(torch.arange(num_keys), full, fill=False, edgecolor=INK, linestyle="--", linewidth=1.2)
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

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = ring_steps(4, causal=True)
    >>> len(fig.axes)
    4
    >>> plt.close(fig)
    """
    import math

    from attention.ring import ring_work

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
            ax.add_patch(
                FancyBboxPatch(
                    (x - 0.5, y - 0.38),
                    1.0,
                    0.76,
                    boxstyle="round,pad=0,rounding_size=0.1",
                    facecolor=HEAD_COLORS[r % len(HEAD_COLORS)] if blocks else FACECOLOR,
                    edgecolor=INK,
                    hatch=None if blocks else "///",
                )
            )
            kv = held((r - step) % world_size)
            ax.text(
                x,
                y,
                f"P{r}\nK,V {kv}\n{blocks} block{'s' * (blocks != 1)}",
                ha="center",
                va="center",
                fontsize=7,
                color=INK,
            )
    if title:
        fig.suptitle(title, fontsize=11, color=INK)
    fig.tight_layout()
    return fig
