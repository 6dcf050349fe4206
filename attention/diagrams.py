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

import itertools
import math
import re
import textwrap
from collections.abc import Sequence

import torch

from attention import _checks

try:
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
    from matplotlib.text import Text
except ModuleNotFoundError as error:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        "attention.diagrams needs matplotlib; install it with "
        "pip install 'attention-step-by-step[plot]'"
    ) from error

# One look for every figure of the site: the opaque background (the figures read on
# dark pages too) and the hatched masked cell of attention.plot's heatmaps.
from attention.plot import FACECOLOR, MASKED_HATCH
from attention.plot import MASKED_COLOR as MASKED_FILL
from attention.plot import MASKED_HATCH_COLOR as MASKED_EDGE

__all__ = [
    "LAYER_COLORS",
    "LAYER_HATCHES",
    "LAYER_LABELS",
    "STAGES",
    "attention_anatomy",
    "backward_blocks",
    "decoder_block",
    "delta_chunks",
    "delta_rule_step",
    "dsa_pipeline",
    "gated_deltanet_diagram",
    "head_split",
    "kv_cache_growth",
    "kv_sources",
    "labelled_texts",
    "latent_flow",
    "layer_strips",
    "matrix_form",
    "merge_picture",
    "packing_diagram",
    "paged_blocks",
    "ring_steps",
    "roadmap",
    "rotary_pairs",
    "scaled_dot_product_diagram",
    "sink_and_gate",
]

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


def labelled_texts(fig: Figure) -> dict[str, str]:
    """The texts a diagram labels with a gid, by gid: what it says, to read or test.

    Each diagram of this module gives its telling labels a gid (its docstring names
    them), so that a page or a test can read what was drawn without looking at pixels.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        A figure of this module's (the texts of its first axes are read).

    Returns
    -------
    dict of str to str

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = decoder_block("GPT-2")
    >>> labelled_texts(fig)["layers"]
    '× 12 layers'
    >>> plt.close(fig)
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"labelled_texts: expected a matplotlib Figure, got {type(fig).__name__}")
    if not fig.axes:
        raise ValueError("labelled_texts: expected a figure with axes, got one with none")
    return {t.get_gid(): t.get_text() for t in fig.axes[0].texts if t.get_gid()}


def _canvas(
    owner: str, width: float, height: float, title: str | None = None
) -> tuple[Figure, Axes]:
    """A white figure with one frameless axes whose data units are inches.

    A ``title`` goes above the drawing, as the figure's suptitle (which sphinx-gallery
    also uses as the image's alt text), in room added for it.
    """
    if title is not None and not isinstance(title, str):
        raise TypeError(f"{owner}: title must be a string or None, got {type(title).__name__}")
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


def _text(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    *,
    ha: str = "center",
    va: str = "center",
    size: float = 9,
    color: object = INK,
    **style: object,
) -> Text:
    """``text`` at (x, y), in inches on a :func:`_canvas`: in ink, 9 points, centred on
    the point unless ``ha`` and ``va`` say otherwise; ``style`` goes to ``ax.text``
    (``fontweight=``, ``gid=``, ``rotation=``...)."""
    return ax.text(x, y, text, ha=ha, va=va, fontsize=size, color=color, **style)


def _rounded(
    ax: Axes, x: float, y: float, w: float, h: float, *, rounding: float = 0.08, **style: object
) -> None:
    """A rectangle with rounded corners and its lower-left corner at (x, y); ``style``
    goes to its ``FancyBboxPatch`` (``facecolor=``, ``edgecolor=``, ``gid=``...)."""
    box = f"round,pad=0,rounding_size={rounding}"
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=box, **style))


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
    _rounded(ax, x, y, w, h, facecolor=fill, edgecolor=edge, linestyle=style, linewidth=width)
    _text(ax, x + w / 2, y + h / 2, text, color=ink, size=size, fontweight=weight, linespacing=1.15)


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


def _cell(
    ax: Axes,
    x: float,
    y: float,
    w: float,
    h: float,
    text: str,
    *,
    fill: object,
    ink: object = INK,
    size: float = 8,
    edge: str = "white",
    linewidth: float = 1,
    text_gid: str | None = None,
    **patch: object,
) -> None:
    """A square cell with its lower-left corner at (x, y) and centred text.

    ``patch`` goes to the cell's ``Rectangle`` (``gid=``, ``label=``, ``linestyle=``).
    """
    ax.add_patch(
        Rectangle((x, y), w, h, facecolor=fill, edgecolor=edge, linewidth=linewidth, **patch)
    )
    _text(ax, x + w / 2, y + h / 2, text, size=size, color=ink, gid=text_gid)


def _masked_or(ax: Axes, xy: tuple[float, float], side: float, masked: bool, **cell) -> None:
    """A square cell styled by ``cell`` (``facecolor=``, ``gid=``...), or hatched as every
    masked cell of the site."""
    style = {"edgecolor": "white", "linewidth": 1} | cell
    if masked:
        style |= {"facecolor": MASKED_FILL, "edgecolor": MASKED_EDGE, "linewidth": 0}
        style |= {"hatch": MASKED_HATCH, "label": "masked"}
    ax.add_patch(Rectangle(xy, side, side, **style))


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
        raise TypeError(f"roadmap: note must be a string or None, got {type(note).__name__}")

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
            _text(
                ax,
                x + box_w / 2,
                y + box_h + 0.12,
                "you are here",
                va="bottom",
                color=CURRENT,
                size=12,
                fontweight="bold",
            )
        elif current is not None and number < current:
            _box(ax, x, y, box_w, box_h, name, fill=DONE, edge=CURRENT, size=size)
        elif current is not None:
            _box(ax, x, y, box_w, box_h, name, edge=MUTED, ink=MUTED, style="--", size=size)
        else:
            _box(ax, x, y, box_w, box_h, name, fill=DONE, edge=CURRENT, size=size)
        done = current is not None and number < current
        _text(
            ax,
            x + box_w / 2,
            y - 0.1,
            ("✓ " if done else "") + chapter,
            va="top",
            size=11,
            color=INK if number == current else MUTED,
        )
        if number < len(STAGES):
            _arrow(ax, (x + box_w + 0.08, y + box_h / 2), (x + box_w + gap - 0.08, y + box_h / 2))
    if note:
        _text(ax, width / 2, 0.15, note, va="bottom", size=11, style="italic")
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
    _text(ax, (left + right) / 2, bottom - 0.08, name, va="top", size=10)
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
    _text(
        ax,
        mx,
        my + (0.07 if above else -0.07),
        label,
        va="bottom" if above else "top",
        size=8.5,
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
        _text(ax, x0, top, text, ha="left", va="top", size=8.5, family="monospace")
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
            _text(
                ax,
                x0 + (slot + 0.5) * cell,
                y + cell * 0.45,
                str(token),
                size=8,
                fontweight="bold",
                bbox={"facecolor": HEAD_COLORS[head], "edgecolor": "none", "pad": 0.2},
            )
            jump = order != slot
            _text(
                ax,
                x0 + (slot + 0.5) * cell,
                y + cell * 0.9 + 0.03,
                str(order),
                va="bottom",
                size=6.5,
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
        _text(ax, x + 0.32, key_y + 0.1, f"head {head + 1}", ha="left", size=8.5)
    _text(
        ax,
        x0,
        key_y + 0.32,
        "In a cell: its token. Above it: when the shape reads it (red: out of memory order).",
        ha="left",
        va="bottom",
        size=8.5,
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
        _text(ax, cx + box_w / 2 + 0.08, y + box_h / 2, what, ha="left", size=8.5)
        # Every arrow up the chain carries one score per pair of tokens.
        end_x = cx if i < len(chain) - 1 else cx + 0.3
        _arrow(ax, (cx, y + box_h), (end_x, y + step))
        if t is not None:
            _text(
                ax,
                cx - 0.08,
                y + box_h + (step - box_h) / 2,
                f"({t}, {t})",
                ha="right",
                size=8,
                color=MUTED,
            )
    last_x = cx + 0.3 - box_w / 2  # the last MatMul sits a little to the right, towards V
    _box(ax, last_x, top, box_w, box_h, "MatMul", fill="#c7c1e0")
    _text(ax, last_x - 0.08, top + box_h / 2, "weights V", ha="right", size=8.5)

    # The inputs: Q and K feed the first MatMul; V rises past the side notes to the last.
    inputs_y = 0.42 if t is not None else 0.3
    v_x = cx + box_w / 2 + 1.25
    for name, x, size in (("Q", cx - 0.4, d_k), ("K", cx + 0.4, d_k), ("V", v_x, d_v)):
        _text(ax, x, inputs_y, name, size=12, fontweight="bold")
        if name == "V":
            ax.plot([v_x, v_x], [inputs_y + 0.16, top + box_h / 2], color=INK, linewidth=1.2)
            _arrow(ax, (v_x, top + box_h / 2), (last_x + box_w, top + box_h / 2))
        else:
            _arrow(ax, (x, inputs_y + 0.16), (cx + (x - cx) / 2, bottom))
        if t is not None:
            _text(ax, x, inputs_y - 0.16, f"({t}, {size})", va="top", size=8, color=MUTED)
    out_x = last_x + box_w / 2
    _arrow(ax, (out_x, top + box_h), (out_x, top + box_h + 0.3))
    _text(
        ax,
        out_x,
        top + box_h + 0.34,
        "output" + (f" ({t}, {d_v})" if t is not None else ""),
        va="bottom",
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
        Its ``texts`` hold the slots' labels and the block tables. The cell of slot ``s``
        of block ``b``, and its label, have the gid ``"block <b> slot <s>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import torch
    >>> from attention import PagedKVCache
    >>> cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1)
    >>> cache.add(0)
    >>> cache.update(0, torch.zeros(3, 1, 1), torch.zeros(3, 1, 1))
    >>> ax = paged_blocks(cache, {0: ["a", "b", "c"]})
    >>> [t.get_text() for t in ax.texts if t.get_text() in ("a", "b", "c", "seq 0: [0, 1]")]
    ['a', 'b', 'c', 'seq 0: [0, 1]']
    >>> plt.close(ax.figure)
    """
    from attention.paged import PagedKVCache

    owner = "paged_blocks"
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"{owner}: cache must be a PagedKVCache, got {type(cache).__name__}")
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
        _text(
            ax,
            left - 0.08,
            y + cell / 2,
            f"block {block}",
            ha="right",
            size=8,
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
            gid = f"block {block} slot {slot}"
            ax.add_patch(
                Rectangle(
                    (x, y),
                    cell,
                    cell,
                    facecolor=fill if used else FACECOLOR,
                    edgecolor=INK if used else MUTED,
                    linewidth=0.8,
                    hatch="///" if used and len(owners) > 1 else None,
                    gid=gid,
                )
            )
            if used:
                token = first + slot
                names = labels.get(seq_id)
                text = str(names[token]) if names is not None else str(token)
                _text(
                    ax, x + cell / 2, y + cell / 2, text, size=6.5 if len(text) > 3 else 8, gid=gid
                )
        if len(owners) > 1:
            _text(
                ax,
                left + size * cell + 0.08,
                y + cell / 2,
                "shared: " + ", ".join(map(str, owners)),
                ha="left",
                size=7.5,
            )
    x_tables = left + size * cell + 1.0
    _text(ax, x_tables, height - 0.15, "block tables", ha="left", va="top", fontweight="bold")
    for i, seq_id in enumerate(cache.seq_ids):
        _text(
            ax,
            x_tables,
            height - 0.15 - (i + 1) * cell,
            f"seq {seq_id}: {cache.block_table(seq_id)}",
            ha="left",
            va="top",
            size=8.5,
            bbox={"facecolor": fills[seq_id], "edgecolor": "none", "pad": 1.5},
        )
    _text(
        ax,
        x_tables,
        height - 0.15 - (len(cache.seq_ids) + 1.3) * cell,
        f"{cache.num_free_blocks} of {num_blocks} blocks free",
        ha="left",
        va="top",
        size=8.5,
        color=MUTED,
    )
    return ax


# -- Parts II to V: one visual language ------------------------------------------------

#: One colour per kind of layer, in ``transformers``' ``layer_types`` names, shared by
#: :func:`layer_strips`, :func:`attention_anatomy` and the cost figures (Okabe and
#: Ito's palette, told apart by the common forms of colour blindness). Each kind is
#: hatched its own way as well (:data:`LAYER_HATCHES`), so it reads in greyscale too.
LAYER_COLORS = {
    "full_attention": "#0072b2",
    "sliding_attention": "#e69f00",
    "chunked_attention": "#cc79a7",
    "linear_attention": "#009e73",
    "indexed_attention": "#56b4e9",
    "cross_attention": "#d55e00",
}
#: The hatching of each kind of layer (white lines on its colour).
LAYER_HATCHES = {
    "full_attention": "",
    "sliding_attention": "////",
    "chunked_attention": "\\\\\\\\",
    "linear_attention": "....",
    "indexed_attention": "xxx",
    "cross_attention": "ooo",
}
#: Short names of the kinds of layer, for legends.
LAYER_LABELS = {
    "full_attention": "full attention",
    "sliding_attention": "sliding window",
    "chunked_attention": "chunked",
    "linear_attention": "linear (delta rule)",
    "indexed_attention": "sparse (indexer's top-k)",
    "cross_attention": "cross-attention (to an image)",
}


def _facts(owner: str, model: object) -> object:
    """A ModelFacts, from itself or from its name in MODELS."""
    from attention.models import MODELS, ModelFacts

    if isinstance(model, ModelFacts):
        return model
    if not isinstance(model, str):
        raise TypeError(
            f"{owner}: expected a model name or a ModelFacts, got {type(model).__name__}"
        )
    if model not in MODELS:
        raise ValueError(f"{owner}: expected a name in MODELS, got {model!r}")
    return MODELS[model]


def _models(owner: str, models: object) -> list:
    """One or several models (names or ModelFacts) as a non-empty list of ModelFacts."""
    if isinstance(models, str) or not isinstance(models, Sequence):
        models = [models]
    facts = [_facts(owner, m) for m in models]
    if not facts:
        raise ValueError(f"{owner}: expected at least one model, got none")
    return facts


def kv_sources(model: object) -> tuple[int | None, ...]:
    """For each layer, the layer whose keys and values it reuses, or ``None``.

    A layer among the last ``num_kv_shared_layers`` computes no keys and values: it
    reuses those of the last earlier layer of its own kind that computes its own (Gemma
    3n, Gemma 4 E2B and E4B, ``kv_shared_layer_index`` in ``transformers``).

    Parameters
    ----------
    model : str or ModelFacts
        A name in ``attention.MODELS``, or its facts.

    Returns
    -------
    tuple of int or None
        One entry per layer.

    Examples
    --------
    >>> sources = kv_sources("Gemma 4 E2B")
    >>> len(sources), sources[:15].count(None), sorted(set(sources[15:]))
    (35, 15, [13, 14])
    """
    facts = _facts("kv_sources", model)
    kinds, shared = facts.layer_types, facts.kv_shared
    own = [i for i in range(facts.layers) if not shared[i]]
    return tuple(
        max(j for j in own if kinds[j] == kinds[i]) if shared[i] else None
        for i in range(facts.layers)
    )


def layer_strips(models: object, *, title: str | None = None) -> Figure:
    """One row of cells per model, one cell per layer, coloured by the layer's kind.

    Each cell is a layer, in order from the first, with the colour and hatching of its
    kind in :data:`LAYER_COLORS` (``MODELS[name].layer_types``). A white dot marks a
    layer without RoPE (NoPE); a layer that reuses another layer's keys and values is
    drawn hollow, with an arrow to the layer it takes them from (:func:`kv_sources`).

    Parameters
    ----------
    models : str, ModelFacts or a sequence of them
        Names in ``attention.MODELS`` (or their facts), one row each.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Every layer's cell has the gid ``"<model> layer <i>"`` (and its kind as its
        label), every reuse arrow the gid ``"<model> reuse <i> <- <j>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = layer_strips(["gpt-oss-20b", "Gemma 4 E2B"])
    >>> cells = [p for p in fig.axes[0].patches if (p.get_gid() or "").startswith("gpt")]
    >>> len(cells), cells[0].get_label(), cells[1].get_label()
    (24, 'sliding_attention', 'full_attention')
    >>> plt.close(fig)
    """
    from matplotlib.patches import Circle
    from matplotlib.path import Path

    owner = "layer_strips"
    facts = _models(owner, models)
    most = max(m.layers for m in facts)
    cell = min(0.22, 7.0 / most)
    label_w = 0.2 + 0.085 * max(len(m.name) for m in facts)
    row_h = max(0.24, cell * 1.6)
    # Room under a row for the reuse arrows: one lane per layer that is reused.
    lanes = [len({s for s in kv_sources(m) if s is not None}) for m in facts]
    unders = [0.28 + (0.16 * n + 0.1 if n else 0.0) for n in lanes]
    kinds = [k for k in LAYER_COLORS if any(k in m.layer_types for m in facts)]
    extras = []
    if any(_nope_layers(m) for m in facts):
        extras.append("nope")
    if any(m.num_kv_shared_layers for m in facts):
        extras.append("shared")
    width = label_w + most * cell + 0.95
    legend_items = len(kinds) + len(extras)
    per_line = max(1, int((width - 0.3) // 2.3))
    legend_h = 0.32 * math.ceil(legend_items / per_line) + 0.1
    height = 0.35 + sum(0.05 + row_h + u for u in unders) + legend_h
    fig, ax = _canvas(owner, width, height, title)

    y = height - 0.3  # top of the next row
    # Layer numbers above the first row, every 10 layers (every 5 in short stacks).
    step = 5 if most <= 30 else 10
    for i in range(0, most, step):
        _text(ax, label_w + (i + 0.5) * cell, y + 0.02, str(i), va="bottom", size=7, color=MUTED)
    for m, under in zip(facts, unders, strict=True):
        top = y - 0.05
        bottom = top - row_h
        _text(ax, label_w - 0.1, bottom + row_h / 2, m.name, ha="right")
        _text(
            ax,
            label_w + m.layers * cell + 0.08,
            bottom + row_h / 2,
            f"{m.layers} layers",
            ha="left",
            size=8,
            color=MUTED,
        )
        nope = _nope_layers(m)
        sources = kv_sources(m)
        for i, kind in enumerate(m.layer_types):
            x = label_w + i * cell
            hollow = sources[i] is not None
            ax.add_patch(
                Rectangle(
                    (x, bottom),
                    cell,
                    row_h,
                    facecolor=FACECOLOR if hollow else LAYER_COLORS[kind],
                    edgecolor=LAYER_COLORS[kind] if hollow else FACECOLOR,
                    hatch=None if hollow else LAYER_HATCHES[kind] or None,
                    linewidth=1.2 if hollow else 0.6,
                    gid=f"{m.name} layer {i}",
                    label=kind,
                )
            )
            if i in nope:
                ax.add_patch(
                    Circle(
                        (x + cell / 2, bottom + row_h / 2),
                        cell * 0.22,
                        facecolor="white",
                        edgecolor=INK,
                        linewidth=0.6,
                        gid=f"{m.name} nope {i}",
                    )
                )
        # Reuse arrows: down from the layer, along the lane of its source, up into it.
        targets = sorted({s for s in sources if s is not None})
        for i, source in enumerate(sources):
            if source is None:
                continue
            lane = bottom - 0.12 - 0.16 * targets.index(source)
            start, end = label_w + (i + 0.5) * cell, label_w + (source + 0.5) * cell
            path = Path([(start, bottom - 0.02), (start, lane), (end, lane), (end, bottom - 0.02)])
            ax.add_patch(
                FancyArrowPatch(
                    path=path,
                    arrowstyle="-|>",
                    mutation_scale=7,
                    color=LAYER_COLORS[m.layer_types[source]],
                    linewidth=0.8,
                    gid=f"{m.name} reuse {i} <- {source}",
                )
            )
        if targets:
            first = min(i for i, s in enumerate(sources) if s is not None)
            _text(
                ax,
                label_w + (first + 0.5) * cell + 0.05,
                bottom - 0.16 * len(targets) - 0.08,
                f"layers {first}–{m.layers - 1} reuse the keys and values of layers "
                + " and ".join(map(str, targets)),
                ha="left",
                va="top",
                size=7.5,
            )
        y = bottom - under

    # The legend: every kind drawn, then the marks.
    x0, ly = 0.2, y - 0.05
    for n, item in enumerate([*kinds, *extras]):
        x = x0 + (n % per_line) * 2.3
        yy = ly - (n // per_line) * 0.32
        if item == "nope":
            ax.add_patch(
                Rectangle(
                    (x, yy - 0.2),
                    0.2,
                    0.2,
                    facecolor=LAYER_COLORS["full_attention"],
                    edgecolor=FACECOLOR,
                )
            )
            ax.add_patch(
                Circle((x + 0.1, yy - 0.1), 0.045, facecolor="white", edgecolor=INK, linewidth=0.6)
            )
            text = "no RoPE (NoPE)"
        elif item == "shared":
            ax.add_patch(
                Rectangle(
                    (x, yy - 0.2), 0.2, 0.2, facecolor=FACECOLOR, edgecolor=INK, linewidth=1.2
                )
            )
            text = "reuses another layer's K, V"
        else:
            _swatch(ax, (x, yy - 0.2), 0.2, item)
            text = LAYER_LABELS[item]
            if item == "linear_attention":
                mixers = sorted({m.linear_attention for m in facts if m.linear_attention})
                text = "linear: " + ", ".join(_short_mixer(s) for s in mixers)
        _text(ax, x + 0.28, yy - 0.1, text, ha="left", size=8.5)
    return fig


def _swatch(ax: Axes, xy: tuple[float, float], side: float, kind: str) -> None:
    """A square of a layer kind's colour and hatch, as the layer strips draw it."""
    colour, hatch = LAYER_COLORS[kind], LAYER_HATCHES[kind] or None
    ax.add_patch(Rectangle(xy, side, side, facecolor=colour, edgecolor=FACECOLOR, hatch=hatch))


def _short_mixer(name: str) -> str:
    return {"Kimi Delta Attention": "KDA"}.get(name, name)


def _nope_layers(facts: object) -> set[int]:
    """Attention layers that apply no rotation although the model has no learned table
    and no ALiBi: NoPE layers."""
    if facts.positions in ("learned", "alibi"):
        return set()
    return {
        i
        for i, (kind, rope) in enumerate(zip(facts.layer_types, facts.uses_rope, strict=True))
        if not rope and kind != "linear_attention"
    }


def _family(name: str) -> str:
    """A model's family, its name without the size: "Gemma 3 27B" -> "Gemma 3"."""
    return re.sub(r"[ -]E?\d+(\.\d+)?[Bb](-A\d+B)?$", "", name)


def _families(facts: Sequence) -> list[str]:
    """The families of ``facts``, each once, in order."""
    return list(dict.fromkeys(_family(m.name) for m in facts))


def _anatomy_steps(facts: Sequence) -> list[tuple[str, tuple[int, ...], bool, list]]:
    """The steps of :func:`attention_anatomy`: (name, chapters, in every model, notes).

    Each note is ``(label, families, kind)``: the families of ``facts`` that use the
    variant the label names, and the layer kind whose colour marks it (or None).
    """

    def users(test):
        return _families([m for m in facts if test(m)])

    def partial(m):
        return m.positions == "rope" and (
            m.partial_rotary_factor != 1.0 or m.qk_rope_head_dim is not None
        )

    return [
        (
            "project Q, K, V",
            (9, 13),
            True,
            [("K, V from a latent (MLA)", users(lambda m: m.kv_lora_rank is not None), None)],
        ),
        ("QK-norm", (15,), False, [("", users(lambda m: m.qk_norm is not None), None)]),
        (
            "RoPE",
            (11, 14),
            all(m.positions == "rope" for m in facts),
            [
                ("scaled", users(lambda m: m.rope_scaling is not None), None),
                ("partial", users(partial), None),
            ],
        ),
        (
            "scores q · k",
            (2, 22),
            True,
            [
                (
                    "only the indexer's top-k keys",
                    users(lambda m: m.index_topk is not None),
                    "indexed_attention",
                )
            ],
        ),
        (
            "scale, softcap",
            (15,),
            False,
            [
                (
                    "own scale",
                    users(lambda m: m.scale is not None or m.query_pre_attn_scalar is not None),
                    None,
                ),
                ("softcap", users(lambda m: m.attn_logit_softcapping is not None), None),
            ],
        ),
        (
            "mask",
            (3, 12, 17),
            True,
            [
                ("sliding", users(lambda m: m.sliding_window is not None), "sliding_attention"),
                (
                    "chunked",
                    users(lambda m: m.attention_chunk_size is not None),
                    "chunked_attention",
                ),
            ],
        ),
        ("softmax (+ sink)", (16,), True, [("sink", users(lambda m: m.sinks), None)]),
        (
            "weights · V",
            (2, 18),
            True,
            [
                ("values are the keys", users(lambda m: m.attention_k_eq_v), None),
                ("K, V of an earlier layer", users(lambda m: m.num_kv_shared_layers > 0), None),
            ],
        ),
        ("output gate", (16,), False, [("", users(lambda m: m.output_gate), None)]),
        ("output projection", (4,), True, []),
    ]


def attention_anatomy(
    models: object = None, *, current: int | None = None, title: str | None = None
) -> Figure:
    """The steps of a 2025–26 attention layer, in order, each with who uses it.

    Top to bottom: project queries, keys and values; QK-norm; RoPE (scaled or partial);
    the scores; their scale and softcap; the mask (causal, sliding, chunked); the
    softmax, with a sink; the weighted sum of the values; the output gate; the output
    projection. Each box names the chapters that build its step; beside it, the models
    that use each variant of it, computed from their facts (a family once: "Gemma 3").
    A dashed box is a step some models skip.

    Parameters
    ----------
    models : sequence of str or ModelFacts, optional
        The models whose use is shown; every model in
        ``attention.MODELS`` by default.
    current : int, optional
        A chapter: the steps it builds are filled dark blue.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Each step's box label has the gid ``"step <name>"``; each note beside it the gid
        ``"note <name>: <label>"`` and the text ``"<label>: <families>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = attention_anatomy()
    >>> labelled_texts(fig)["note softmax (+ sink): sink"]
    'sink: gpt-oss, DeepSeek-V4-Flash'
    >>> plt.close(fig)
    """
    from attention.models import MODELS

    owner = "attention_anatomy"
    facts = list(MODELS.values()) if models is None else _models(owner, models)
    if current is not None:
        current = _positive(owner, "current", current, 99)
    steps = _anatomy_steps(facts)
    # Wider than tall: on a phone the site shows it 720 pixels wide, and it must fit the
    # screen's height there. So each note gets a line of its own, up to 80 characters.
    box_x, box_w, box_h, gap = 0.2, 1.9, 0.46, 0.16
    notes = [
        [(label, f"{label}: " if label else "", families, kind) for label, families, kind in n]
        for *_, n in steps
    ]
    longest = [len(lead + ", ".join(f)) for n in notes for _, lead, f, _ in n if f]
    note_x, columns = box_x + box_w + 0.25, min(max(longest, default=0), 80)
    # Each step takes the room of its box or of its notes' lines, whichever is taller.
    blocks = []
    for step_notes in notes:
        lines = []
        for label, lead, families, kind in step_notes:
            if families:
                text = textwrap.fill(
                    lead + ", ".join(families), 80, subsequent_indent="  ", break_on_hyphens=False
                )
                lines.append((label, text, kind))
        blocks.append(lines)
    rooms = [
        max(box_h, 0.17 * sum(t.count("\n") + 1 for _, t, _ in lines) + 0.06) for lines in blocks
    ]
    width = note_x + columns * 0.072 + 0.1
    height = sum(rooms) + gap * (len(steps) - 1) + 0.9
    fig, ax = _canvas(owner, width, height, title)
    _text(ax, box_x + box_w / 2, height - 0.08, "hidden states x", va="top")
    y = height - 0.45
    _arrow(ax, (box_x + box_w / 2, y + 0.17), (box_x + box_w / 2, y))
    for (name, chapters, everywhere, _), lines, room in zip(steps, blocks, rooms, strict=True):
        here = current in chapters
        top = y
        by = top - (room + box_h) / 2
        chapter = "ch. " + ", ".join(map(str, chapters))
        _box(
            ax,
            box_x,
            by,
            box_w,
            box_h,
            "",
            fill=CURRENT if here else FACECOLOR,
            edge=CURRENT if here else INK,
            style="-" if everywhere else "--",
            width=2.0 if here else 1.2,
        )
        ink = "white" if here else INK
        _text(
            ax,
            box_x + box_w / 2,
            by + box_h * 0.63,
            name,
            size=10,
            color=ink,
            fontweight="bold" if here else "normal",
            gid=f"step {name}",
        )
        _text(
            ax,
            box_x + box_w / 2,
            by + box_h * 0.24,
            chapter,
            size=7.5,
            color="white" if here else MUTED,
        )
        line_y = top - (room - 0.17 * sum(t.count("\n") + 1 for _, t, _ in lines)) / 2
        for label, text, kind in lines:
            x = note_x
            if kind is not None:
                _swatch(ax, (x, line_y - 0.145), 0.13, kind)
                x += 0.18
            _text(
                ax,
                x,
                line_y,
                text,
                ha="left",
                va="top",
                size=8.5,
                linespacing=1.1,
                gid=f"note {name}: {label}",
            )
            line_y -= 0.17 * (text.count("\n") + 1)
        y = top - room
        if name != steps[-1][0]:
            _arrow(
                ax, (box_x + box_w / 2, by), (box_x + box_w / 2, y - gap + (room - box_h) / 2 - 0.0)
            )
            y -= gap
    _arrow(ax, (box_x + box_w / 2, by), (box_x + box_w / 2, by - 0.2))
    _text(ax, box_x + box_w / 2, by - 0.24, "back to the residual stream", va="top")
    return fig


def _circle_plus(ax: Axes, x: float, y: float, r: float = 0.11) -> None:
    from matplotlib.patches import Circle

    ax.add_patch(Circle((x, y), r, facecolor=FACECOLOR, edgecolor=INK, linewidth=1.2))
    arm = 0.6 * r
    ax.plot([x - arm, x + arm], [y, y], color=INK, linewidth=1.2)
    ax.plot([x, x], [y - arm, y + arm], color=INK, linewidth=1.2)


def decoder_block(model: object = "GPT-2", *, title: str | None = None) -> Figure:
    """A decoder-only transformer: embeddings, ``layers`` blocks, then the logits.

    Each block adds to the residual stream twice: a norm and attention, then a norm
    and the MLP. Each block's attention keeps its own KV cache, whose size per token
    the figure gives from the model's facts (``2 × num_kv_heads × head_dim``
    numbers, or for latent attention ``kv_lora_rank + qk_rope_head_dim``).

    Parameters
    ----------
    model : str or ModelFacts
        A name in ``attention.MODELS``, or its facts.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        The layer count has the gid ``"layers"``, the cache's label ``"cache"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = decoder_block("GPT-2")
    >>> texts = labelled_texts(fig)
    >>> texts["layers"]
    '× 12 layers'
    >>> plt.close(fig)
    """
    facts = _facts("decoder_block", model)
    numbers = facts.layer_kv_bytes_per_token(torch.float16)
    per_token = max(numbers) // 2  # 16-bit numbers
    # Wider than tall: on a phone the site shows it 720 pixels wide, and it must fit the
    # screen's height there.
    width, height = 6.5, 5.95
    fig, ax = _canvas("decoder_block", width, height, title)
    lane, bx, bw, bh = 1.3, 2.0, 1.7, 0.42  # the residual stream's x; the blocks' boxes
    cx, cw, ch = 4.3, 1.75, 0.72  # the cache's box
    frame_top, frame_bottom = 5.0, 1.2  # of the block repeated `layers` times
    final_y = 0.42  # the final norm's box
    shape = f"tokens → (tokens, {facts.hidden_size:,})"
    _text(ax, lane, height - 0.08, shape, va="top", size=8.5, color=MUTED)
    embed_y = frame_top + 0.2
    _box(ax, lane - 0.9, embed_y, 1.8, bh, "token embeddings", fill="#eeeeee")
    frame = {"facecolor": "#f6f6f6", "edgecolor": MUTED, "linestyle": "--", "linewidth": 1.2}
    _rounded(ax, 0.3, frame_bottom, width - 0.45, frame_top - frame_bottom, rounding=0.15, **frame)
    layers = f"× {facts.layers} layers"
    right = width - 0.25
    bold = {"size": 11, "fontweight": "bold", "gid": "layers"}
    _text(ax, right, frame_bottom + 0.1, layers, ha="right", va="bottom", **bold)
    muted = {"size": 8.5, "color": MUTED, "style": "italic"}
    _text(ax, right, frame_top - 0.08, "one decoder block", ha="right", va="top", **muted)
    # The residual stream runs straight down; each half of the block branches off it and
    # is added back onto it.
    ax.plot([lane, lane], [embed_y, final_y + bh], color=INK, linewidth=1.6)
    branch, mid = frame_top - 0.28, bx + bw / 2
    for name in ("attention", "MLP"):
        norm_y = branch - 0.15 - bh
        main_y = norm_y - 0.2 - bh
        plus = main_y - 0.3
        ax.plot([lane, mid], [branch, branch], color=INK, linewidth=1.2)
        _arrow(ax, (mid, branch), (mid, norm_y + bh))
        _box(ax, bx, norm_y, bw, bh, "norm")
        _arrow(ax, (mid, norm_y), (mid, main_y + bh))
        attention = name == "attention"
        _box(
            ax,
            bx,
            main_y,
            bw,
            bh,
            name,
            fill=LAYER_COLORS["full_attention"] if attention else FACECOLOR,
            ink="white" if attention else INK,
            weight="bold" if attention else "normal",
        )
        ax.plot([mid, mid], [main_y, plus], color=INK, linewidth=1.2)
        _arrow(ax, (mid, plus), (lane + 0.11, plus))
        _circle_plus(ax, lane, plus)
        if attention:
            # The cache beside the attention: written and read at every step.
            kv = "latent + rotated key" if facts.attention == "MLA" else "keys and values"
            level = main_y + bh / 2
            cy = level - ch / 2
            _box(ax, cx, cy, cw, ch, "", fill=DONE, edge=CURRENT)
            _text(ax, cx + cw / 2, cy + 0.55, "KV cache", fontweight="bold")
            details = f"{kv}:\n{per_token:,} numbers\nper token"
            _text(ax, cx + cw / 2, cy + 0.26, details, size=8, gid="cache")
            ax.add_patch(
                FancyArrowPatch(
                    (bx + bw + 0.05, level),
                    (cx - 0.05, level),
                    arrowstyle="<|-|>",
                    mutation_scale=10,
                    color=CURRENT,
                    linewidth=1.2,
                )
            )
        branch = plus - 0.33
    _text(ax, lane - 0.08, 2.3, "residual stream", ha="right", size=8, color=MUTED, rotation=90)
    _arrow(ax, (lane, frame_bottom - 0.15), (lane, final_y + bh))
    _box(ax, lane - 0.9, final_y, 1.8, bh, "final norm, unembed", fill="#eeeeee")
    _arrow(ax, (lane, final_y), (lane, final_y - 0.18))
    _text(ax, lane, final_y - 0.22, "logits for the next token", va="top")
    return fig


def _cached(ax: Axes, x: float, y: float, w: float, h: float, text: str, gid: str) -> None:
    """A box the cache keeps: pale blue, a thick border, "cached" above it."""
    _box(ax, x, y, w, h, "", fill=DONE, edge=CURRENT, width=2.2)
    _text(ax, x + w / 2, y + h / 2, text, gid=gid)
    _cached_tag(ax, x + w - 0.05, y + h + 0.04)


def _cached_tag(ax: Axes, right: float, bottom: float) -> None:
    """The word "cached", bold in the current stage's blue, its lower right at the point."""
    _text(
        ax,
        right,
        bottom,
        "cached",
        ha="right",
        va="bottom",
        size=7.5,
        color=CURRENT,
        fontweight="bold",
    )


def latent_flow(
    model: object = "DeepSeek-V3", *, absorbed: bool = False, title: str | None = None
) -> Figure:
    """Multi-head latent attention's data flow, at a model's sizes.

    Left to right: the input ``x`` is compressed by ``W_dkv`` to the latent ``c``
    (``kv_lora_rank`` numbers, cached) and by ``W_kr`` to one rotated key shared by
    all heads (``qk_rope_head_dim``, cached); ``W_uk`` and ``W_uv`` decompress the latent
    into each head's keys and values; the queries come from ``W_dq`` and ``W_uq``. With
    ``absorbed=True``, the form for decoding: ``W_uk`` folded into the queries, which
    meet the cached latents directly, and ``W_uv`` applied after the weighted sum.

    Parameters
    ----------
    model : str or ModelFacts
        A model with latent attention (``kv_lora_rank`` set).
    absorbed : bool
        Draw the absorbed form.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        The cached boxes' labels have the gids ``"latent"`` and ``"rope key"``, the
        heads' the gids ``"keys"``, ``"values"``, ``"queries"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = latent_flow("DeepSeek-V3")
    >>> texts = labelled_texts(fig)
    >>> texts["latent"], texts["rope key"]
    ('latent c\\n512', 'rotated key\\n64, all heads')
    >>> plt.close(fig)
    """
    owner = "latent_flow"
    m = _facts(owner, model)
    if m.kv_lora_rank is None:
        raise ValueError(f"{owner}: expected a model with latent attention, got {m.name!r}")
    _checks.flag(owner, "absorbed", absorbed, "draw the absorbed form")
    h, r, dr = m.num_heads, m.kv_lora_rank, m.qk_rope_head_dim
    dn, dv = m.qk_nope_head_dim, m.v_head_dim
    width, height = 9.2, 4.3
    fig, ax = _canvas(owner, width, height, title)
    _box(ax, 0.15, 1.95, 1.05, 0.6, f"x\n{m.hidden_size:,}", fill="#eeeeee")
    c1, w1 = 2.25, 1.55
    _cached(ax, c1, 3.1, w1, 0.6, f"latent c\n{r}", "latent")
    _cached(ax, c1, 1.95, w1, 0.6, f"rotated key\n{dr}, all heads", "rope key")
    q_text = f"{m.q_lora_rank:,}" if m.q_lora_rank else f"{m.hidden_size:,}"
    _box(ax, c1, 0.45, w1, 0.6, f"query latent\n{q_text}" if m.q_lora_rank else "x", fill=FACECOLOR)
    _labelled_arrow(ax, (1.25, 2.4), (c1 - 0.05, 3.4), "$W_{dkv}$")
    _labelled_arrow(ax, (1.25, 2.25), (c1 - 0.05, 2.25), "$W_{kr}$, RoPE")
    _labelled_arrow(ax, (1.25, 2.1), (c1 - 0.05, 0.75), "$W_{dq}$", above=False)
    c2, w2 = 4.75, 2.0
    attn_x, attn_w = 7.6, 1.45
    if not absorbed:
        _box(ax, c2, 3.45, w2, 0.55, f"keys: {h} heads × {dn}", fill=HEAD_COLORS[1])
        ax.texts[-1].set_gid("keys")
        _box(ax, c2, 2.6, w2, 0.55, f"values: {h} heads × {dv}", fill=HEAD_COLORS[2])
        ax.texts[-1].set_gid("values")
        _labelled_arrow(ax, (c1 + w1 + 0.05, 3.5), (c2 - 0.05, 3.72), "$W_{uk}$")
        _labelled_arrow(ax, (c1 + w1 + 0.05, 3.3), (c2 - 0.05, 2.88), "$W_{uv}$", above=False)
        queries = f"queries: {h} heads\n× ({dn} + {dr} rotated)"
        _arrow(ax, (c2 + w2 + 0.05, 3.72), (attn_x - 0.05, 2.6))
        _arrow(ax, (c2 + w2 + 0.05, 2.88), (attn_x - 0.05, 2.4))
        note = (
            f"cached per token and layer: {r} + {dr} = {r + dr} numbers; "
            f"decompressed, {h} heads' keys and values would be "
            f"{h * (dn + dr + dv):,}"
        )
    else:
        queries = f"queries: {h} heads\n× ({r} latent + {dr} rotated)"
        _arrow(ax, (c1 + w1 + 0.05, 3.4), (attn_x - 0.05, 2.55))
        note = (
            f"absorbed: $W_{{uk}}$ moves to the query side, the scores read the {r} "
            f"latent numbers directly; $W_{{uv}}$ comes after the weighted sum"
        )
    _arrow(ax, (c1 + w1 + 0.05, 2.25), (attn_x - 0.05, 2.25))
    _box(ax, c2, 0.45, w2, 0.75, queries, fill=HEAD_COLORS[0], size=9)
    ax.texts[-1].set_gid("queries")
    uq = "$W_{uq}$, RoPE" + (",\nthen $W_{uk}^T$" if absorbed else "")
    _labelled_arrow(ax, (c1 + w1 + 0.05, 0.75), (c2 - 0.05, 0.82), uq, above=False)
    _arrow(ax, (c2 + w2 + 0.05, 0.82), (attn_x - 0.05, 2.05))
    inside = "attention\nper head" + ("\nover c, then\n$W_{uv}$" if absorbed else "")
    _box(
        ax,
        attn_x,
        1.75,
        attn_w,
        1.05,
        inside,
        fill=LAYER_COLORS["full_attention"],
        ink="white",
        weight="bold",
        size=9.5,
    )
    _text(ax, 0.15, 0.12, note, ha="left", va="bottom", size=8, gid="note")
    return fig


def gated_deltanet_diagram(
    model: object = "Qwen3-Next 80B-A3B", *, title: str | None = None
) -> Figure:
    """A Gated DeltaNet layer as a block diagram, top to bottom, at a model's sizes.

    The six stages of :class:`~attention.GatedDeltaNet`: project ``x`` to queries, keys,
    values, the gate ``z`` and the logits ``b`` and ``a``; a short causal convolution
    and SiLU over the queries, keys and values, then L2-norm of the queries and keys;
    the write strength ``β = sigmoid(b)`` and the decay ``g``; the gated delta rule over
    the state (the only thing cached, ``heads × key_head_dim × value_head_dim``); the
    gated RMSNorm with ``silu(z)``; the output projection.

    Parameters
    ----------
    model : str or ModelFacts
        A model whose linear-attention layers are Gated DeltaNet.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        The sizes' labels have the gids ``"qkv"``, ``"conv"``, ``"state"``, ``"io"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = gated_deltanet_diagram()
    >>> texts = labelled_texts(fig)
    >>> texts["state"]
    'state S: 32 heads × 128 × 128'
    >>> plt.close(fig)
    """
    owner = "gated_deltanet_diagram"
    m = _facts(owner, model)
    if m.linear_attention != "Gated DeltaNet":
        raise ValueError(
            f"{owner}: expected a model with Gated DeltaNet layers, got {m.name!r} "
            f"(linear_attention={m.linear_attention!r})"
        )
    hk, dk = m.linear_num_key_heads, m.linear_key_head_dim
    hv, dv = m.linear_num_value_heads, m.linear_value_head_dim
    width, height = 6.8, 6.6
    fig, ax = _canvas(owner, width, height, title)
    a_x, a_w = 0.35, 2.55  # queries, keys, values
    b_x, b_w = 3.15, 2.0  # b and a, the gates' logits
    c_x, c_w = 5.4, 1.25  # z, the output gate
    mid = {"a": a_x + a_w / 2, "b": b_x + b_w / 2, "c": c_x + c_w / 2}
    _text(ax, width / 2, 6.55, f"x: (tokens, {m.hidden_size:,})", va="top", gid="io")
    _arrow(ax, (width / 2, 6.3), (width / 2, 6.1))
    _box(ax, a_x, 5.6, c_x + c_w - a_x, 0.5, "1  project: six linear maps, no bias", fill="#eeeeee")
    row = 4.65
    _box(
        ax,
        a_x,
        row,
        a_w,
        0.55,
        f"q, k: {hk} heads × {dk}\nv: {hv} heads × {dv}",
        fill=HEAD_COLORS[0],
        size=9,
    )
    ax.texts[-1].set_gid("qkv")
    _box(ax, b_x, row, b_w, 0.55, f"b, a: {hv} each", fill=HEAD_COLORS[3], size=9)
    _box(ax, c_x, row, c_w, 0.55, f"z: {hv} × {dv}", fill=HEAD_COLORS[1], size=9)
    for key in mid:
        _arrow(ax, (mid[key], 5.6), (mid[key], row + 0.55))
    _box(
        ax,
        a_x,
        3.65,
        a_w,
        0.6,
        f"2  causal conv, {m.linear_conv_kernel_dim} taps,\nSiLU; L2-norm q and k",
        size=9,
    )
    ax.texts[-1].set_gid("conv")
    _box(ax, b_x, 3.65, b_w, 0.6, "3  β = sigmoid(b)\ng = −exp(A) · softplus(a + dt)", size=8.5)
    _arrow(ax, (mid["a"], row), (mid["a"], 4.25))
    _arrow(ax, (mid["b"], row), (mid["b"], 4.25))
    # The delta rule: the one box that keeps something between tokens.
    _box(ax, a_x, 2.05, b_x + b_w - a_x, 1.1, "", fill=DONE, edge=CURRENT, width=2.2)
    _text(
        ax,
        a_x + 0.15,
        2.95,
        "4  gated delta rule, per value head",
        ha="left",
        size=9.5,
        fontweight="bold",
    )
    _text(
        ax,
        a_x + 0.15,
        2.6,
        r"$S \leftarrow e^{g}(I - \beta k k^\top) S + \beta k v^\top$,"
        r"   $o = S^\top q$",
        ha="left",
        size=9.5,
    )
    _text(
        ax,
        a_x + 0.15,
        2.25,
        f"state S: {hv} heads × {dk} × {dv}",
        ha="left",
        color=CURRENT,
        gid="state",
    )
    _cached_tag(ax, b_x + b_w - 0.05, 3.19)
    _arrow(ax, (mid["a"], 3.65), (mid["a"], 3.15))
    _arrow(ax, (mid["b"], 3.65), (mid["b"], 3.15))
    _box(ax, a_x, 1.05, c_x + c_w - a_x, 0.5, "5  gated RMSNorm: norm(o) · w · silu(z)")
    _arrow(ax, (mid["a"], 2.05), (mid["a"], 1.55))
    _arrow(ax, (mid["c"], row), (mid["c"], 1.55))
    _arrow(ax, (width / 2, 1.05), (width / 2, 0.75))
    _text(ax, width / 2, 0.7, f"6  output projection: {hv} × {dv} → {m.hidden_size:,}", va="top")
    return fig


def packing_diagram(
    cu_seqlens: object, labels: Sequence[str] | None = None, *, title: str | None = None
) -> Figure:
    """The same requests padded to a rectangle, and packed into one row.

    Above, one row per request, padded to the longest: the padding hatched as every
    masked cell on this site. Below, the requests one after the other, with the
    boundaries ``cu_seqlens`` marks under the row.

    Parameters
    ----------
    cu_seqlens : sequence of int or 1-D integer tensor
        ``0``, then the running total of the requests' lengths, as
        :func:`~attention.varlen_attention` takes it (at most 24 tokens in all).
    labels : sequence of str, optional
        One per packed token (the words); positions by default.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Padding cells have the gid ``"pad"``, a request's cells ``"padded <i>"`` and
        ``"packed <i>"``; the boundary labels the gid ``"cu_seqlens"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = packing_diagram([0, 2, 5, 6])
    >>> [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "cu_seqlens"]
    ['0', '2', '5', '6']
    >>> plt.close(fig)
    """
    from attention.varlen import _lengths

    owner = "packing_diagram"
    lengths = _lengths(owner, cu_seqlens, None)
    bounds = [0, *(sum(lengths[: i + 1]) for i in range(len(lengths)))]
    total, longest = bounds[-1], max(lengths)
    if total > 24 or len(lengths) > len(SEQUENCE_FILLS):
        raise ValueError(
            f"{owner}: expected at most 24 tokens in at most {len(SEQUENCE_FILLS)} requests "
            f"for the drawing to stay readable, got {total} in {len(lengths)}"
        )
    names = _labels_arg(owner, labels, total, ", one per token")
    cell = min(0.62, 7.0 / total) if labels is not None else min(0.45, 7.0 / total)
    left = 1.2
    width = left + max(total, longest) * cell + 0.3
    rows = len(lengths)
    height = 0.45 + rows * cell + 0.65 + cell + 0.45
    fig, ax = _canvas(owner, width, height, title)
    size = 8 if cell >= 0.6 else 7

    def slot(x, y, fill, text, gid, hatch=None):
        ax.add_patch(
            Rectangle(
                (x, y),
                cell,
                cell,
                facecolor=fill,
                hatch=hatch,
                edgecolor=MASKED_EDGE if hatch else "white",
                linewidth=0.8,
                gid=gid,
            )
        )
        if text:
            _text(ax, x + cell / 2, y + cell / 2, text, size=size, rotation=0)

    top = height - 0.4
    _text(
        ax,
        0.15,
        top + 0.05,
        f"padded: {rows} × {longest} slots, {rows * longest - total} of them padding",
        ha="left",
        va="bottom",
        fontweight="bold",
    )
    for i, n in enumerate(lengths):
        y = top - (i + 1) * cell
        _text(ax, left - 0.1, y + cell / 2, f"request {i}", ha="right", size=8.5)
        for j in range(longest):
            if j < n:
                slot(left + j * cell, y, SEQUENCE_FILLS[i], names[bounds[i] + j], f"padded {i}")
            else:
                slot(left + j * cell, y, MASKED_FILL, "", "pad", hatch=MASKED_HATCH)
    y = top - rows * cell - 0.65 - cell
    _text(
        ax,
        0.15,
        y + cell + 0.05,
        f"packed: 1 × {total}, no padding",
        ha="left",
        va="bottom",
        fontweight="bold",
    )
    for i, (start, end) in enumerate(itertools.pairwise(bounds)):
        for t in range(start, end):
            slot(left + t * cell, y, SEQUENCE_FILLS[i], names[t], f"packed {i}")
    for b in bounds:
        x = left + b * cell
        ax.plot([x, x], [y - 0.12, y + cell + 0.05], color=INK, linewidth=1.6)
        _text(ax, x, y - 0.14, str(b), va="top", fontweight="bold", gid="cu_seqlens")
    _text(
        ax, left - 0.1, y - 0.14, "cu_seqlens", ha="right", va="top", size=8.5, family="monospace"
    )
    return fig


# -- Values drawn cell by cell: the delta rule, sinks and gates, DSA ----------------------

#: Signed values (states, errors, scores): a diverging map, 0 white-ish in the middle.
SIGNED_CMAP = "RdBu_r"


def _tensor_arg(owner: str, name: str, x: object, rank: int, most: int = 8) -> torch.Tensor:
    """``x`` as a float64 tensor of ``rank`` dimensions, each of 1 to ``most`` entries."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: expected {name} as a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{owner}: expected {name} of a floating dtype, got {x.dtype}")
    if x.dim() != rank or not all(1 <= n <= most for n in x.shape):
        raise ValueError(
            f"{owner}: expected {name} with {rank} dimension(s) of 1 to {most} entries "
            f"for the drawing to stay readable, got shape {tuple(x.shape)}"
        )
    return x.detach().to("cpu", torch.float64)


def _real_arg(owner: str, name: str, value: object, low: float, high: float) -> float:
    """``value`` as a float in ``[low, high]``: TypeError for a non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        else:
            raise TypeError(f"{owner}: expected {name} as a number, got {type(value).__name__}")
    value = float(value)
    if not low <= value <= high:
        raise ValueError(f"{owner}: expected {name} in [{low:g}, {high:g}], got {value:g}")
    return value


def _int_arg(owner: str, name: str, value: object, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]``: TypeError for a non-integer."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}: expected {name} as an int, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(
            f"{owner}: expected {name} from {low} to {high} for the drawing to stay "
            f"readable, got {value}"
        )
    return value


def _labels_arg(owner: str, labels: object, n: int, each: str = "") -> list[str]:
    """``n`` labels: the given ones, or positions; ``each`` says what they label."""
    if labels is None:
        return [str(i) for i in range(n)]
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise TypeError(
            f"{owner}: expected labels as a sequence of str, got {type(labels).__name__}"
        )
    if len(labels) != n:
        raise ValueError(f"{owner}: expected {n} labels{each}, got {len(labels)}")
    return [str(label) for label in labels]


def _value_cells(
    ax: Axes,
    x: float,
    top: float,
    values: torch.Tensor,
    cell: float,
    gid: str,
    *,
    cmap: str = SIGNED_CMAP,
    low: float = -1.0,
    high: float = 1.0,
    hidden: torch.Tensor | None = None,
    fmt: str = "{:.2f}",
    size: float = 8,
) -> None:
    """A matrix (or a row, for 1-D ``values``), one coloured cell per entry with its number.

    Row ``i`` of the matrix lies ``i`` cells below ``top``. A cell and its number both
    have the gid ``"<gid> <i> <j>"`` (``"<gid> <j>"`` for a row); ``hidden`` cells are
    hatched as every masked cell of the site, and get no number.
    """
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    from attention.plot import _ink

    colours, norm = colormaps[cmap], Normalize(low, high)
    grid = values if values.dim() == 2 else values[None]
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            value = float(grid[i, j])
            name = f"{gid} {i} {j}" if values.dim() == 2 else f"{gid} {j}"
            masked = hidden is not None and bool(
                (hidden if hidden.dim() == 2 else hidden[None])[i, j]
            )
            cx, cy = x + j * cell, top - (i + 1) * cell
            if masked:
                _masked_or(ax, (cx, cy), cell, True, gid=name)
                ax.add_patch(
                    Rectangle((cx, cy), cell, cell, facecolor="none", edgecolor="white", lw=1)
                )
                continue
            fraction = float(min(1.0, max(0.0, norm(value))))
            fill, ink = colours(fraction), _ink(colours, fraction)
            text = fmt.format(value)
            _cell(
                ax, cx, cy, cell, cell, text, fill=fill, ink=ink, size=size, gid=name, text_gid=name
            )


def _row_label(ax: Axes, x: float, y: float, text: str, size: float = 8.5, **kw) -> None:
    _text(ax, x, y, text, ha="right", size=size, **kw)


def delta_rule_step(
    state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float = 1.0, *, title=None
) -> Figure:
    """One token of the delta rule: the state, one rank-one write, the corrected state.

    The state ``S`` (``d_k × d_v``) before the token, what it returns for the token's
    key, ``Sᵀk``, the error ``β (v − Sᵀk)``, the write ``k (β (v − Sᵀk))ᵀ``, which is a
    column times a row (rank one), and the state after: what
    :func:`~attention.gated_delta_rule` returns for this one token from ``state``
    (no decay, ``g = 0``). Under it, what the new state returns for ``k``: ``v`` itself
    when ``β = 1``. ``k`` is L2-normalised first, as the function does.

    Parameters
    ----------
    state : torch.Tensor, shape (d_k, d_v)
        The state before the token (at most 6 × 6).
    k : torch.Tensor, shape (d_k,)
    v : torch.Tensor, shape (d_v,)
    beta : float
        The write strength, in [0, 1].
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        The cells (and their numbers) have the gids ``"before i j"``, ``"write i j"``,
        ``"after i j"``, ``"k i"`` (the normalised key), ``"v j"``, ``"stored j"``
        (``Sᵀk`` before), ``"error j"`` (``β (v − Sᵀk)``) and ``"read j"`` (``Sᵀk``
        after).

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import torch
    >>> S = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    >>> fig = delta_rule_step(S, torch.tensor([1.0, 0.0]), torch.tensor([5.0, 0.0]))
    >>> texts = labelled_texts(fig)
    >>> texts["error 0"], texts["error 1"], texts["after 0 0"], texts["after 0 1"]
    ('4.00', '-2.00', '5.00', '0.00')
    >>> plt.close(fig)
    """
    from attention.delta import gated_delta_rule, l2_normalise

    owner = "delta_rule_step"
    state = _tensor_arg(owner, "state", state, 2, most=6)
    d_k, d_v = state.shape
    k = _tensor_arg(owner, "k", k, 1, most=6)
    v = _tensor_arg(owner, "v", v, 1, most=6)
    if k.shape[0] != d_k or v.shape[0] != d_v:
        raise ValueError(
            f"{owner}: expected k of {d_k} and v of {d_v} numbers for a state of "
            f"{d_k} × {d_v}, got {k.shape[0]} and {v.shape[0]}"
        )
    beta = _real_arg(owner, "beta", beta, 0.0, 1.0)
    # The state after the token, from the package's own recurrence.
    keys = k.view(1, 1, 1, d_k)
    _, after = gated_delta_rule(
        keys,
        keys,
        v.view(1, 1, 1, d_v),
        torch.zeros(1, 1, 1, dtype=torch.float64),
        torch.full((1, 1, 1), beta, dtype=torch.float64),
        initial_state=state.view(1, 1, d_k, d_v),
    )
    after = after[0, 0]
    unit = l2_normalise(k)
    stored = state.T @ unit
    error = beta * (v - stored)
    write = torch.outer(unit, error)
    read = after.T @ unit
    shown = torch.cat([t.flatten() for t in (state, after, write, v, stored, error, read)])
    bound = max(1e-9, float(shown.abs().max()))
    cell = 0.5
    gap = 0.55
    left = 0.25
    x_before = left
    x_k = x_before + d_v * cell + gap
    x_write = x_k + cell + 0.12
    x_after = x_write + d_v * cell + gap
    width = x_after + d_v * cell + 0.3
    vectors = 3  # v, stored, error: rows above the write
    main_top = 0.3 + vectors * (cell + 0.1) + 0.15
    height = main_top + d_k * cell + 0.45 + cell + 0.3
    fig, ax = _canvas(owner, width, height, title)
    top = height - 0.3

    def vector_row(i, values, gid, label):
        y = top - i * (cell + 0.1)
        _value_cells(ax, x_write, y, values, cell, gid, low=-bound, high=bound)
        _row_label(ax, x_write - 0.12, y - cell / 2, label)

    vector_row(0, v, "v", "v, the token's value")
    vector_row(1, stored, "stored", "Sᵀk, what S returns for k now")
    vector_row(2, error, "error", f"β (v − Sᵀk), with β = {beta:g}")
    y = height - main_top
    _value_cells(ax, x_before, y, state, cell, "before", low=-bound, high=bound)
    _value_cells(ax, x_k, y, unit[:, None], cell, "k", low=-bound, high=bound)
    for text in ax.texts:  # the key is a column: gids "k i", not "k i 0"
        if (text.get_gid() or "").startswith("k ") and text.get_gid().endswith(" 0"):
            text.set_gid(text.get_gid()[:-2])
    for patch in ax.patches:
        if (patch.get_gid() or "").startswith("k ") and patch.get_gid().endswith(" 0"):
            patch.set_gid(patch.get_gid()[:-2])
    _value_cells(ax, x_write, y, write, cell, "write", low=-bound, high=bound)
    _value_cells(ax, x_after, y, after, cell, "after", low=-bound, high=bound)
    middle = y - d_k * cell / 2
    for x, sign in ((x_before + d_v * cell + gap / 2, "+"), (x_after - gap / 2, "=")):
        _text(ax, x, middle, sign, size=18)
    _text(ax, x_k + cell + 0.06, middle, "×")
    bottom = y - d_k * cell - 0.08
    captions = (
        (x_before + d_v * cell / 2, f"S before\n{d_k} × {d_v} ($d_k × d_v$)"),
        (x_k + cell / 2, "k"),
        (x_write + d_v * cell / 2, "k (β (v − Sᵀk))ᵀ\none rank-one write"),
        (x_after + d_v * cell / 2, "S after"),
    )
    for x, text in captions:
        _text(ax, x, bottom, text, va="top", size=8.5)
    read_top = bottom - 0.45
    _value_cells(ax, x_after, read_top, read, cell, "read", low=-bound, high=bound)
    _row_label(ax, x_after - 0.12, read_top - cell / 2, "what S returns for k after")
    return fig


def delta_chunks(
    num_tokens: int, chunk_size: int, labels: Sequence[str] | None = None, *, title=None
) -> Figure:
    """The chunked form of the delta rule: parallel inside a chunk, sequential between.

    The tokens, cut into chunks of ``chunk_size`` as
    ``gated_delta_rule(..., chunk_size=chunk_size)`` cuts them (the last chunk may be
    shorter). Under each chunk, its ``size × size`` lower triangle: token ``t`` accounts
    for the writes of the tokens ``s ≤ t`` of its chunk, all at once, in matrix products
    and one triangular solve (the cells above the diagonal are masked, hatched as on
    every page). Along the bottom, the state ``S`` passed from chunk to chunk: the only
    sequential steps, one per chunk.

    Parameters
    ----------
    num_tokens : int
        1 to 16.
    chunk_size : int
        1 to ``num_tokens``.
    labels : sequence of str, optional
        One per token (the words); positions by default.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Token cells have the gid ``"token <t>"`` and the label of their chunk; the
        triangle cells ``"chunk <c> <i> <j>"``, masked ones labelled ``"masked"``; the
        states' boxes ``"state <c>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = delta_chunks(6, 4)
    >>> [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "steps"]
    ['6 tokens in chunks of 4: 2 sequential steps instead of 6']
    >>> plt.close(fig)
    """
    owner = "delta_chunks"
    num_tokens = _int_arg(owner, "num_tokens", num_tokens, 1, 16)
    chunk_size = _int_arg(owner, "chunk_size", chunk_size, 1, num_tokens)
    names = _labels_arg(owner, labels, num_tokens)
    starts = list(range(0, num_tokens, chunk_size))
    sizes = [min(chunk_size, num_tokens - s) for s in starts]
    cell = 0.62 if labels is not None else 0.4
    gap = 0.7
    tri = min(0.3, cell * 0.75)
    xs = [gap + c * gap + s * cell for c, s in enumerate(starts)]
    width = xs[-1] + sizes[-1] * cell + gap + 0.1
    tri_h = chunk_size * tri
    height = 0.35 + cell + 0.3 + tri_h + 0.75 + 0.75 + 0.45
    fig, ax = _canvas(owner, width, height, title)
    top = height - 0.35
    size = 8 if labels is not None else 7.5
    for c, (x0, start, n) in enumerate(zip(xs, starts, sizes, strict=True)):
        fill = SEQUENCE_FILLS[c % len(SEQUENCE_FILLS)]
        for i in range(n):
            x, name = x0 + i * cell, names[start + i]
            gid, label = f"token {start + i}", f"chunk {c}"
            _cell(ax, x, top - cell, cell, cell, name, fill=fill, size=size, gid=gid, label=label)
        _text(
            ax,
            x0 + n * cell / 2,
            top + 0.05,
            f"chunk {c + 1}",
            va="bottom",
            size=8.5,
            fontweight="bold",
        )
        # The chunk's triangle, centred under its tokens.
        tx = x0 + (n * cell - n * tri) / 2
        ty = top - cell - 0.3
        for i in range(n):
            for j in range(n):
                xy, gid = (tx + j * tri, ty - (i + 1) * tri), f"chunk {c} {i} {j}"
                _masked_or(ax, xy, tri, j > i, facecolor=fill, linewidth=0.8, gid=gid)
    tri_bottom = top - cell - 0.3 - tri_h
    _text(
        ax,
        0.1,
        tri_bottom - 0.12,
        textwrap.fill(
            "inside a chunk, all at once: each token's write accounts for the earlier "
            "writes of its chunk (products and one triangular solve)",
            int((width - 0.2) / 0.072),
        ),
        ha="left",
        va="top",
        size=8,
        wrap=False,
    )
    # The states, in the gaps, and the sequential arrows through the chunks.
    lane = tri_bottom - 0.8
    for c in range(len(starts) + 1):
        x = xs[c] - gap / 2 if c < len(starts) else xs[-1] + sizes[-1] * cell + gap / 2
        state = {"facecolor": DONE, "edgecolor": CURRENT, "linewidth": 1.4, "gid": f"state {c}"}
        _rounded(ax, x - 0.24, lane - 0.17, 0.48, 0.34, rounding=0.06, **state)
        _text(ax, x, lane, f"$S_{c}$", size=9.5)
        if c:
            _arrow(ax, (xs[c - 1] - gap / 2 + 0.26, lane), (x - 0.26, lane), color=CURRENT)
            _text(
                ax,
                xs[c - 1] + sizes[c - 1] * cell / 2,
                lane + 0.05,
                f"+ chunk {c}",
                va="bottom",
                size=8,
                color=CURRENT,
            )
    _text(
        ax,
        0.1,
        lane - 0.3,
        textwrap.fill(
            "between chunks, in order: the state S (d_k × d_v per head) carries everything before",
            int((width - 0.2) / 0.072),
        ),
        ha="left",
        va="top",
        size=8,
    )
    _text(
        ax,
        0.1,
        0.12,
        f"{num_tokens} tokens in chunks of {chunk_size}: {len(starts)} sequential steps "
        f"instead of {num_tokens}",
        ha="left",
        va="bottom",
        size=8.5,
        color=CURRENT,
        fontweight="bold",
        gid="steps",
    )
    return fig


def _contrast(colour: object) -> str:
    """Black or white, whichever reads better on ``colour`` (as attention.plot's cells)."""
    from matplotlib.colors import ListedColormap

    from attention.plot import _ink as ink_on

    return ink_on(ListedColormap([colour]), 0.0)


def _header(ax: Axes, x: float, y: float, text: str, size: float = 9.5) -> None:
    _text(ax, x, y, text, ha="left", va="bottom", size=size, fontweight="bold")


def sink_and_gate(
    scores: torch.Tensor,
    values: torch.Tensor,
    sink: float,
    gate_logits: torch.Tensor,
    labels: Sequence[str] | None = None,
    *,
    title=None,
) -> Figure:
    """A sink and an output gate, on one query's row of attention.

    Top: the query's scores over its keys and the head's sink logit, one more column;
    the softmax over all of them, computed by :func:`~attention.attend` with
    ``sinks=``; the sink's weight is dropped, so the keys' weights sum to less than 1.
    Bottom: the head's output ``o`` (those weights times ``values``, from the same
    call), the gate ``sigmoid(gate_logits)`` and the gated output ``o ⊙ gate``, which
    goes on to the output projection.

    Parameters
    ----------
    scores : torch.Tensor, shape (num_keys,)
        The query's scaled scores, 1 to 8 keys.
    values : torch.Tensor, shape (num_keys, d_v)
        The keys' values, ``d_v`` at most 6.
    sink : float
        The head's sink logit (gpt-oss's ``sinks``); ``-inf`` is no sink.
    gate_logits : torch.Tensor, shape (d_v,)
        ``W_gate x`` for the query, before the sigmoid (Qwen3-Next's gate).
    labels : sequence of str, optional
        The keys' tokens; positions by default.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Cells and their numbers have the gids ``"scores j"``, ``"sink logit"``,
        ``"weights j"``, ``"sink weight"``, ``"output j"``, ``"gate j"``,
        ``"gated j"``; the keys' total the gid ``"sum"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import torch
    >>> fig = sink_and_gate(torch.zeros(3), torch.eye(3), 0.0, torch.zeros(3))
    >>> texts = labelled_texts(fig)
    >>> texts["weights 0"], texts["sink weight"], texts["gate 0"]
    ('0.25', '0.25', '0.50')
    >>> plt.close(fig)
    """
    from attention.step import attend

    owner = "sink_and_gate"
    scores = _tensor_arg(owner, "scores", scores, 1, most=8)
    n = scores.shape[0]
    values = _tensor_arg(owner, "values", values, 2, most=8)
    if values.shape[0] != n or values.shape[1] > 6:
        raise ValueError(
            f"{owner}: expected values of shape ({n}, d_v ≤ 6), one row per score, "
            f"got {tuple(values.shape)}"
        )
    d_v = values.shape[1]
    sink = _real_arg(owner, "sink", sink, -math.inf, math.inf)
    gate_logits = _tensor_arg(owner, "gate_logits", gate_logits, 1, most=6)
    if gate_logits.shape[0] != d_v:
        raise ValueError(
            f"{owner}: expected gate_logits of {d_v} numbers, one per value feature, "
            f"got {gate_logits.shape[0]}"
        )
    names = _labels_arg(owner, labels, n)
    # The query's scores as q · k with one-hot keys and scale 1; one-hot values give
    # the weights themselves, the real values the head's output.
    q = scores.view(1, 1, 1, n)
    one_hot = torch.eye(n, dtype=torch.float64).view(1, 1, n, n)
    sinks = torch.tensor([sink], dtype=torch.float64)
    weights = attend(q, one_hot, one_hot, scale=1.0, sinks=sinks)[0, 0, 0]
    output = attend(q, one_hot, values.view(1, 1, n, d_v), scale=1.0, sinks=sinks)[0, 0, 0]
    sink_weight = max(0.0, 1.0 - float(weights.sum()))  # what the keys do not get
    gate = torch.sigmoid(gate_logits)
    gated = output * gate

    cell = 0.55
    left = 2.35
    width = left + (n + 1) * cell + 0.45 + 0.3
    height = 5.0
    fig, ax = _canvas(owner, width, height, title)
    ink_bound = max(1e-9, float(torch.cat([output, gated]).abs().max()))
    finite = scores[scores.isfinite()]
    score_bound = max(1e-9, float(finite.abs().max())) if finite.numel() else 1.0
    if math.isfinite(sink):
        score_bound = max(score_bound, abs(sink))
    x_sink = left + n * cell + 0.45
    top = height - 0.35
    sinks_in = ", ".join(_families([m for m in _all_models() if m.sinks]))
    _header(ax, 0.12, top, f"A sink ({sinks_in}): one more logit, its weight dropped")
    top -= 0.3
    for j, name in enumerate(names):
        _text(ax, left + (j + 0.5) * cell, top - 0.02, name, va="top", size=8)
    _text(ax, x_sink + cell / 2, top - 0.02, "sink", va="top", size=8)
    top -= 0.25

    def sink_cell(y, value, gid, colour, dropped=False):
        ink = INK if dropped or colour == FACECOLOR else _contrast(colour)
        _cell(
            ax,
            x_sink,
            y - cell,
            cell,
            cell,
            f"{value:.2f}" if math.isfinite(value) else "−∞",
            fill=FACECOLOR if dropped else colour,
            ink=MUTED if dropped else ink,
            edge=INK,
            linewidth=1.1,
            linestyle="--",
            gid=gid,
            text_gid=gid,
        )

    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    _value_cells(
        ax,
        left,
        top,
        scores,
        cell,
        "scores",
        low=-score_bound,
        high=score_bound,
        hidden=~scores.isfinite(),
    )
    norm = Normalize(-score_bound, score_bound)
    sink_fill = colormaps[SIGNED_CMAP](norm(sink)) if math.isfinite(sink) else FACECOLOR
    sink_cell(top, sink, "sink logit", sink_fill)
    _row_label(ax, left - 0.12, top - cell / 2, "scores q · k")
    top -= cell + 0.12
    _value_cells(ax, left, top, weights, cell, "weights", cmap="viridis", low=0.0, high=1.0)
    sink_cell(top, sink_weight, "sink weight", None, dropped=True)
    _row_label(ax, left - 0.12, top - cell / 2, f"softmax over {n} + 1")
    _text(ax, x_sink + cell / 2, top - cell - 0.04, "dropped", va="top", size=8, fontweight="bold")
    _text(
        ax,
        left,
        top - cell - 0.04,
        f"the keys get {float(weights.sum()):.2f} in all"
        + (", not 1" if sink_weight >= 0.005 else ""),
        ha="left",
        va="top",
        size=8.5,
        gid="sum",
    )
    top -= cell + 0.55
    gates_in = ", ".join(_families([m for m in _all_models() if m.output_gate]))
    _header(ax, 0.12, top, f"An output gate ({gates_in}): after the head")
    top -= 0.12
    rows = (
        (output, "output", "o = weights · V", SIGNED_CMAP, -ink_bound, ink_bound),
        (gate, "gate", "gate = σ(W_gate x)", "viridis", 0.0, 1.0),
        (gated, "gated", "o ⊙ gate, to W_O", SIGNED_CMAP, -ink_bound, ink_bound),
    )
    for vector, gid, label, cmap, low, high in rows:
        _value_cells(ax, left, top, vector, cell, gid, cmap=cmap, low=low, high=high)
        _row_label(ax, left - 0.12, top - cell / 2, label)
        top -= cell + 0.12
    return fig


def _all_models() -> list:
    from attention.models import MODELS

    return list(MODELS.values())


def dsa_pipeline(
    index_scores: torch.Tensor,
    top_k: int,
    weights: torch.Tensor,
    labels: Sequence[str] | None = None,
    *,
    model: object = "DeepSeek-V3.2",
    title=None,
) -> Figure:
    """DeepSeek Sparse Attention for one query: score every key, keep the top k, attend.

    Three rows over the same keys: the lightning indexer's scores (``-inf``, a key the
    query may not see, is masked); the ``top_k`` keys picked, as
    :func:`~attention.topk_sparse_attention` picks them; the attention weights, which
    only the picked keys get. Beside each row, what the step is at a real model's
    sizes (from ``MODELS``).

    Parameters
    ----------
    index_scores : torch.Tensor, shape (num_keys,)
        The indexer's scores for one query, 1 to 12 keys.
    top_k : int
        How many keys the query reads.
    weights : torch.Tensor, shape (num_keys,)
        The query's attention weights: 0 off the picked keys, summing to 1 over them.
    labels : sequence of str, optional
        The keys' tokens; positions by default.
    model : str or ModelFacts
        A model with an indexer, for the sizes beside the rows.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Cells and numbers have the gids ``"scores j"``, ``"picked j"`` (label
        ``"picked"`` or ``"masked"``) and ``"weights j"``; the sizes ``"sizes <row>"``.

    Raises
    ------
    ValueError
        If ``weights`` reads a key the indexer did not pick, or does not sum to 1.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> import torch
    >>> fig = dsa_pipeline(torch.tensor([0.3, -1.0, 2.0]), 1, torch.tensor([0.0, 0.0, 1.0]))
    >>> [p.get_label() for p in fig.axes[0].patches if (p.get_gid() or "")[:6] == "picked"]
    ['masked', 'masked', 'picked']
    >>> plt.close(fig)
    """
    from attention.sparse import _chosen

    owner = "dsa_pipeline"
    index_scores = _tensor_arg(owner, "index_scores", index_scores, 1, most=12)
    n = index_scores.shape[0]
    top_k = _int_arg(owner, "top_k", top_k, 1, 10**9)
    weights = _tensor_arg(owner, "weights", weights, 1, most=12)
    if weights.shape[0] != n:
        raise ValueError(f"{owner}: expected {n} weights, one per key, got {weights.shape[0]}")
    m = _facts(owner, model)
    if not m.index_topk:
        raise ValueError(f"{owner}: expected a model with an indexer, got {m.name!r}")
    names = _labels_arg(owner, labels, n)
    picked = _chosen(index_scores.view(1, 1, n), top_k)[0, 0]
    if bool((weights[~picked] != 0).any()) or abs(float(weights.sum()) - 1.0) > 1e-5:
        raise ValueError(
            f"{owner}: expected weights that are 0 off the {int(picked.sum())} picked keys "
            f"and sum to 1, got {[round(w, 4) for w in weights.tolist()]}"
        )
    cell = 0.62 if labels is not None else 0.45
    left = 2.6
    width = left + n * cell + 0.25
    height = 0.45 + 3 * cell + 2 * 0.62 + 0.2
    fig, ax = _canvas(owner, width, height, title)
    top = height - 0.1
    for j, name in enumerate(names):
        _text(ax, left + (j + 0.5) * cell, top, name, va="top", size=8)
    top -= 0.35
    finite = index_scores[index_scores.isfinite()]
    # Only the order counts: the lowest visible score dark, the highest bright.
    low, high = (float(finite.min()), float(finite.max())) if finite.numel() else (0.0, 1.0)
    high = max(high, low + 1e-9)
    steps = (
        (
            "1  the indexer scores every key",
            f"{m.name}: {m.index_n_heads} heads × {m.index_head_dim}, "
            f"one key of {m.index_head_dim} per token",
        ),
        (
            f"2  keep the top {top_k}",
            f"{m.name}: the top {m.index_topk:,} of every key",
        ),
        (
            "3  attention over the picks only",
            f"MLA, {m.num_heads} heads, over ≤ {m.index_topk:,} keys",
        ),
    )
    for row, (label, sizes) in enumerate(steps):
        if row == 0:
            _value_cells(
                ax,
                left,
                top,
                index_scores,
                cell,
                "scores",
                cmap="viridis",
                low=low,
                high=high,
                hidden=~index_scores.isfinite(),
                fmt="{:.2f}" if cell > 0.5 else "{:.1f}",
            )
        elif row == 1:
            for j in range(n):
                chosen = bool(picked[j])
                xy, gid = (left + j * cell, top - cell), f"picked {j}"
                _masked_or(ax, xy, cell, not chosen, facecolor=CURRENT, gid=gid, label="picked")
                if chosen:
                    _text(
                        ax,
                        left + (j + 0.5) * cell,
                        top - cell / 2,
                        "✓",
                        size=10,
                        color="white",
                        gid=f"picked {j}",
                    )
        else:
            _value_cells(
                ax,
                left,
                top,
                weights,
                cell,
                "weights",
                cmap="viridis",
                low=0.0,
                high=1.0,
                hidden=~picked,
                fmt="{:.2f}" if cell > 0.5 else "{:.1f}",
            )
        _text(ax, 0.12, top - cell / 2 + 0.02, label, ha="left", va="bottom", fontweight="bold")
        _text(
            ax,
            0.12,
            top - cell / 2 - 0.02,
            textwrap.fill(sizes, int((left - 0.25) / 0.062)),
            ha="left",
            va="top",
            size=7.5,
            color=CURRENT,
            gid=f"sizes {row}",
        )
        if row < 2:
            mid = left + n * cell / 2
            _arrow(ax, (mid, top - cell - 0.08), (mid, top - cell - 0.54), color=MUTED)
        top -= cell + 0.62
    return fig


def kv_cache_growth(
    prefill: int, num_tokens: int, labels: Sequence[str] | None = None, *, title=None
) -> Figure:
    """A KV cache through prefill and decode: one row per step, the cache growing.

    The first row is the prefill: ``prefill`` queries at once, their keys and values
    written to the cache. Each later row is one decode step: one new query, whose key
    and value join the cache (dark), and which reads every cached key. The cache's
    length on each row is ``len(cache)`` of a real :class:`~attention.KVCache` after
    that step's ``update``.

    Parameters
    ----------
    prefill : int
        Tokens in the prompt, 1 to ``num_tokens``.
    num_tokens : int
        Tokens in all, 1 to 10.
    labels : sequence of str, optional
        One per token (the words); positions by default.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Row ``s`` (0 the prefill) has query cells with the gid ``"query <s>"`` and cache
        cells ``"cache <s>"`` labelled ``"new"`` or ``"cached"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = kv_cache_growth(3, 5)
    >>> rows = [[p for p in fig.axes[0].patches if p.get_gid() == f"cache {s}"] for s in range(3)]
    >>> [len(r) for r in rows]
    [3, 4, 5]
    >>> plt.close(fig)
    """
    from attention.kv_cache import KVCache

    owner = "kv_cache_growth"
    num_tokens = _int_arg(owner, "num_tokens", num_tokens, 1, 10)
    prefill = _int_arg(owner, "prefill", prefill, 1, num_tokens)
    names = _labels_arg(owner, labels, num_tokens)
    # Run a real cache: one (batch, heads, tokens, head_dim) update per step.
    cache = KVCache()
    steps = [range(prefill), *(range(t, t + 1) for t in range(prefill, num_tokens))]
    held = []
    for step in steps:
        new = torch.zeros(1, 1, len(step), 2)
        cache.update(new, new)
        held.append(len(cache))
    cell = 0.6 if labels is not None else 0.42
    row_h = 0.42
    left = 1.15
    x_cache = left + prefill * cell + 0.55
    width = x_cache + num_tokens * cell + 1.25
    height = 0.45 + len(steps) * (row_h + 0.16) + 0.3
    fig, ax = _canvas(owner, width, height, title)
    top = height - 0.12
    _text(ax, left, top, "queries", ha="left", va="top", size=8.5, color=MUTED)
    _text(
        ax,
        x_cache,
        top,
        "the cache: keys and values, one per token",
        ha="left",
        va="top",
        size=8.5,
        color=MUTED,
    )
    top -= 0.33
    size = 8 if labels is not None else 7.5
    for s, (step, length) in enumerate(zip(steps, held, strict=True)):
        y = top - row_h
        label = f"prefill, {len(step)}" if s == 0 else f"decode {s}"
        _row_label(ax, left - 0.12, y + row_h / 2, label)
        for i, t in enumerate(step):
            x = left + i * cell
            _cell(ax, x, y, cell, row_h, names[t], fill=HEAD_COLORS[1], size=size, gid=f"query {s}")
        _arrow(ax, (left + len(step) * cell + 0.08, y + row_h / 2), (x_cache - 0.08, y + row_h / 2))
        for t in range(length):
            fresh = t >= length - len(step)
            _cell(
                ax,
                x_cache + t * cell,
                y,
                cell,
                row_h,
                names[t],
                fill=CURRENT if fresh else DONE,
                ink="white" if fresh else INK,
                size=size,
                gid=f"cache {s}",
                label="new" if fresh else "cached",
            )
        reads = "each reads\nthe keys up to itself" if s == 0 else f"reads {length} keys"
        _text(
            ax,
            x_cache + length * cell + 0.1,
            y + row_h / 2,
            reads,
            ha="left",
            size=7.5,
            gid=f"reads {s}",
        )
        top = y - 0.16
    return fig


def rotary_pairs(
    head_dim: int = 16,
    partial_rotary_factor: float = 0.25,
    base: float = 10000.0,
    *,
    title=None,
) -> Figure:
    """Which features of a head turn together: proportional RoPE against partial rotary.

    Two strips of a head's ``head_dim`` features. Above, proportional RoPE (Gemma 4's
    global layers): feature ``j`` pairs with ``j + head_dim/2`` across the whole head,
    and only the first ``partial_rotary_factor`` of the pairs turn, at the speeds of a
    head of ``head_dim``; the others have speed 0. Below, partial rotary (GPT-NeoX,
    Qwen3-Next): the first ``rotary_dim = head_dim × partial_rotary_factor`` features
    are a head of their own, ``j`` paired with ``j + rotary_dim/2``, and the rest are
    left unchanged. The speeds are :func:`~attention.rope_frequencies`'.

    Parameters
    ----------
    head_dim : int
        Even, 4 to 32.
    partial_rotary_factor : float
        In (0, 1], with ``head_dim × partial_rotary_factor`` a positive even number.
    base : float
        RoPE's base.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Each pair's arc has the gid ``"<layout> <j> <partner>"`` (``layout`` is
        ``"proportional"`` or ``"partial"``) and the label ``"turns"`` or
        ``"speed 0"``; the features left unchanged ``"partial still <j>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = rotary_pairs(8, 0.5)
    >>> sorted(p.get_gid() for p in fig.axes[0].patches if p.get_label() == "turns")
    ['partial 0 2', 'partial 1 3', 'proportional 0 4', 'proportional 1 5']
    >>> plt.close(fig)
    """
    from attention.rope import rope_frequencies

    owner = "rotary_pairs"
    head_dim = _int_arg(owner, "head_dim", head_dim, 4, 32)
    factor = _real_arg(owner, "partial_rotary_factor", partial_rotary_factor, 0.0, 1.0)
    base = _real_arg(owner, "base", base, 1.0, math.inf)
    rotary_dim = int(head_dim * factor)
    if head_dim % 2 or rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(
            f"{owner}: expected an even head_dim and head_dim × partial_rotary_factor "
            f"a positive even number, got {head_dim} × {factor:g} = {head_dim * factor:g}"
        )
    proportional, _ = rope_frequencies(
        head_dim, base, {"rope_type": "proportional", "partial_rotary_factor": factor}
    )
    partial, _ = rope_frequencies(
        head_dim, base, {"rope_type": "default", "partial_rotary_factor": factor}
    )
    layouts = (
        (
            "proportional",
            f"proportional (Gemma 4's global layers): j with j + {head_dim // 2}, "
            f"{int((proportional > 0).sum())} of {len(proportional)} pairs turn",
            proportional,
            head_dim // 2,
        ),
        (
            "partial",
            f"partial rotary (Qwen3-Next): j with j + {rotary_dim // 2} in the first "
            f"{rotary_dim}, {head_dim - rotary_dim} features unchanged",
            partial,
            rotary_dim // 2,
        ),
    )
    cell = min(0.36, 7.0 / head_dim)
    left = 0.3
    width = left + head_dim * cell + 0.3

    def room(half):  # the height of the highest arc, plus a margin
        return 0.18 + 0.1 * (half - 1) + 0.08

    height = sum(0.3 + room(half) + cell + 0.35 for *_, half in layouts) + 0.35
    fig, ax = _canvas(owner, width, height, title)
    top = height - 0.1
    fastest = float(proportional.max())
    from matplotlib import colormaps
    from matplotlib.path import Path

    speeds_cmap = colormaps["viridis"]
    for layout, caption, speeds, half in layouts:
        _text(
            ax,
            left,
            top,
            textwrap.fill(caption, int((width - left) / 0.068)),
            ha="left",
            va="top",
            size=8.5,
            fontweight="bold",
        )
        arc_room = room(half)
        y = top - 0.3 - arc_room - cell
        for j in range(head_dim):
            still = layout == "partial" and j >= rotary_dim
            _cell(
                ax,
                left + j * cell,
                y,
                cell,
                cell,
                str(j),
                fill=FACECOLOR if still else DONE,
                ink=MUTED if still else INK,
                size=7 if cell < 0.3 else 8,
                edge=INK if still else "white",
                linewidth=0.6 if still else 1,
                linestyle=":" if still else "-",
                gid=f"{layout} still {j}" if still else f"{layout} feature {j}",
            )
        for j, speed in enumerate(speeds.tolist()):
            partner = j + half
            turns = speed > 0
            x0, x1 = left + (j + 0.5) * cell, left + (partner + 0.5) * cell
            rise = min(arc_room - 0.05, 0.18 + 0.1 * j)
            path = Path(
                [(x0, y + cell), (x0, y + cell + rise), (x1, y + cell + rise), (x1, y + cell)],
                [Path.MOVETO, Path.CURVE4, Path.CURVE4, Path.CURVE4],
            )
            # Brighter for faster pairs: the log of the speed, from base⁻¹ up to the fastest.
            shade = 1 - math.log(fastest / speed) / math.log(base) if turns else 0.0
            ax.add_patch(
                FancyArrowPatch(
                    path=path,
                    arrowstyle="-",
                    color=speeds_cmap(0.85 * shade) if turns else MUTED,
                    linewidth=2.0 if turns else 0.8,
                    linestyle="-" if turns else "--",
                    gid=f"{layout} {j} {partner}",
                    label="turns" if turns else "speed 0",
                )
            )
        top = y - 0.35
    _text(
        ax,
        left,
        0.1,
        "solid arcs: pairs that turn (brighter: faster); dashed: speed 0",
        ha="left",
        va="bottom",
        size=8,
    )
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
