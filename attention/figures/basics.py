"""Part I's figures, and the map of a layer: where each chapter stands, what it computes.

The heatmaps of :mod:`attention.figures.heatmaps` show numbers; these figures show
structure: where a chapter stands on the road from simplified to multi-head attention,
which matrix products turn the inputs into context vectors, how ``view`` and
``transpose`` split heads without moving a number, and the paper's scaled dot-product
attention. They are drawn from the same shapes the chapters compute (the memory
picture even from real tensors' strides), so they cannot drift from the code. Then
the two maps of a real model: a decoder block with its KV cache, and the steps of
today's attention layer with the models that use each.

Drawn by chapters 1 to 7 (:func:`roadmap`), 2 (:func:`matrix_form`), 4
(:func:`head_split`), 5 (:func:`scaled_dot_product_diagram`), 8 (:func:`decoder_block`),
14 and 15 and the home page (:func:`attention_anatomy`).

>>> import matplotlib.pyplot as plt
>>> from attention.figures import roadmap
>>> fig = roadmap(current=2)
>>> [t.get_text() for t in fig.axes[0].texts if t.get_text() == "you are here"]
['you are here']
>>> plt.close(fig)
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle

from attention import _checks
from attention.figures.style import (
    CURRENT,
    DONE,
    FACECOLOR,
    HEAD_COLORS,
    HEAD_HATCHES,
    INK,
    LAYER_COLORS,
    MUTED,
    _arrow,
    _box,
    _canvas,
    _facts,
    _families,
    _labelled_arrow,
    _models,
    _positive,
    _rounded,
    _swatch,
    _text,
)
from attention.models import MODELS, Chunked, Sliding, layer_kv_cache_bytes_per_token

__all__ = [
    "STAGES",
    "attention_anatomy",
    "decoder_block",
    "head_split",
    "matrix_form",
    "roadmap",
    "scaled_dot_product_diagram",
]


#: The four stages of the book's chapter 3, in order, with the chapter of this site
#: that builds each one. The names are short, so that the figure stays legible on a phone.
STAGES = (
    ("Simplified\nattention", "chapter 1"),
    ("Trainable\nweights", "chapter 2"),
    ("Causal\nattention", "chapter 3"),
    ("Multi-head\nattention", "chapter 4"),
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
    what = f"current must be a stage from 1 to {len(STAGES)} or None"
    if current is not None:
        # Through _checks: a number of the wrong type is a TypeError, 5 a ValueError.
        current = _checks.whole_number("roadmap", current, what)
        if not 1 <= current <= len(STAGES):
            raise ValueError(f"roadmap: {what}, got {current!r}")
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


def _anatomy_steps(facts: Sequence) -> list[tuple[str, tuple[int, ...], bool, list]]:
    """The steps of :func:`attention_anatomy`: (name, chapters, in every model, notes).

    Each note is ``(label, families, kind)``: the families of ``facts`` that use the
    variant the label names, and the layer kind whose colour marks it (or None).
    """

    def users(test):
        return _families([m for m in facts if test(m)])

    def partial(m):
        return m.rope is not None and (m.rope.partial_rotary_factor != 1.0 or m.latent is not None)

    def group(name, test):  # a test of one group, False where a model lacks it
        return users(lambda m: getattr(m, name) is not None and test(getattr(m, name)))

    def scores(test):
        return group("scores", test)

    def parts(test):
        return group("parts", test)

    def local(kind):  # the models whose local layers are of this kind
        return users(lambda m: isinstance(m.local, kind))

    return [
        (
            "project Q, K, V",
            (9, 13),
            True,
            [("K, V from a latent (MLA)", users(lambda m: m.latent is not None), None)],
        ),
        ("QK-norm", (15,), False, [("", parts(lambda p: p.qk_norm is not None), None)]),
        (
            "RoPE",
            (11, 14),
            all(m.positions == "rope" for m in facts),
            [
                (
                    "scaled",
                    # DeepSeek-V4 scales the RoPE of its compressed layers only
                    users(
                        lambda m: (
                            (m.rope is not None and m.rope.scaling is not None)
                            or (m.compressed is not None and m.compressed.rope_scaling is not None)
                        )
                    ),
                    None,
                ),
                ("partial", users(partial), None),
            ],
        ),
        (
            "scores q · k",
            (2, 24),
            True,
            [
                (
                    "only the indexer's top-k keys",
                    users(lambda m: m.indexer is not None),
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
                    scores(lambda s: s.scale is not None or s.query_pre_attn_scalar is not None),
                    None,
                ),
                ("softcap", scores(lambda s: s.softcap is not None), None),
            ],
        ),
        (
            "mask",
            (3, 12, 17, 18),
            True,
            [
                ("sliding", local(Sliding), "sliding_attention"),
                ("chunked", local(Chunked), "chunked_attention"),
            ],
        ),
        ("softmax (+ sink)", (16,), True, [("sink", scores(lambda s: s.sinks), None)]),
        (
            "weights · V",
            (2, 19),
            True,
            [
                (
                    "values are the keys",
                    group("global_layers", lambda g: g.k_eq_v),
                    None,
                ),
                ("K, V of an earlier layer", users(lambda m: m.num_kv_shared_layers > 0), None),
            ],
        ),
        ("output gate", (16,), False, [("", parts(lambda p: p.output_gate), None)]),
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
    >>> from attention.figures import labelled_texts
    >>> fig = attention_anatomy()
    >>> labelled_texts(fig)["note softmax (+ sink): sink"]
    'sink: gpt-oss, DeepSeek-V4-Flash, DeepSeek-V4-Pro'
    >>> plt.close(fig)
    """
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
    >>> from attention.figures import labelled_texts
    >>> fig = decoder_block("GPT-2")
    >>> texts = labelled_texts(fig)
    >>> texts["layers"]
    '× 12 layers'
    >>> plt.close(fig)
    """
    facts = _facts("decoder_block", model)
    numbers = layer_kv_cache_bytes_per_token(facts, torch.float16)
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
    _text(
        ax,
        right,
        frame_bottom + 0.1,
        layers,
        ha="right",
        va="bottom",
        size=11,
        fontweight="bold",
        gid="layers",
    )
    _text(
        ax,
        right,
        frame_top - 0.08,
        "one decoder block",
        ha="right",
        va="top",
        size=8.5,
        color=MUTED,
        style="italic",
    )
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
