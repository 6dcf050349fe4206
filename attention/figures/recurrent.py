"""Attention with a state instead of a cache: the delta rule and Gated DeltaNet (Part IV).

One token of the delta rule, the state before, the rank-one write and the state after
(:func:`delta_rule_step`), and its chunked form, parallel inside a chunk and
sequential between (:func:`delta_chunks`), both in chapter 21; a Gated DeltaNet layer
as a block diagram at a real model's sizes (:func:`gated_deltanet_diagram`, chapter
22). The numbers drawn are those :func:`~attention.gated_delta_rule` computes.

>>> import matplotlib.pyplot as plt
>>> from attention.figures import delta_chunks
>>> fig = delta_chunks(8, 4)
>>> [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "steps"]
['8 tokens in chunks of 4: 2 sequential steps instead of 8']
>>> plt.close(fig)
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import torch
from matplotlib.figure import Figure

from attention.delta import gated_delta_rule, l2_normalise
from attention.figures.style import (
    CURRENT,
    DONE,
    HEAD_COLORS,
    SEQUENCE_FILLS,
    _arrow,
    _box,
    _cached_tag,
    _canvas,
    _cell,
    _facts,
    _int_arg,
    _labels_arg,
    _masked_or,
    _real_arg,
    _rounded,
    _row_label,
    _tensor_arg,
    _text,
    _value_cells,
)
from attention.models import LinearAttention

__all__ = ["delta_chunks", "delta_rule_step", "gated_deltanet_diagram"]


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
    >>> from attention.figures import labelled_texts
    >>> fig = gated_deltanet_diagram()
    >>> texts = labelled_texts(fig)
    >>> texts["state"]
    'state S: 32 heads × 128 × 128'
    >>> plt.close(fig)
    """
    owner = "gated_deltanet_diagram"
    m = _facts(owner, model)
    linear = m.local
    if not isinstance(linear, LinearAttention) or linear.mixer != "Gated DeltaNet":
        mixer = linear.mixer if isinstance(linear, LinearAttention) else None
        raise ValueError(
            f"{owner}: expected a model with Gated DeltaNet layers, got {m.name!r} "
            f"(linear attention: {mixer!r})"
        )
    hk, dk = linear.num_key_heads, linear.key_head_dim
    hv, dv = linear.num_value_heads, linear.value_head_dim
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
        f"2  causal conv, {linear.conv_kernel_dim} taps,\nSiLU; L2-norm q and k",
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
    >>> from attention.figures import labelled_texts
    >>> import torch
    >>> S = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    >>> fig = delta_rule_step(S, torch.tensor([1.0, 0.0]), torch.tensor([5.0, 0.0]))
    >>> texts = labelled_texts(fig)
    >>> texts["error 0"], texts["error 1"], texts["after 0 0"], texts["after 0 1"]
    ('4.00', '-2.00', '5.00', '0.00')
    >>> plt.close(fig)
    """
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
    for artist in [*ax.texts, *ax.patches]:  # the key is a column: gids "k i", not "k i 0"
        gid = artist.get_gid() or ""
        if gid.startswith("k ") and gid.endswith(" 0"):
            artist.set_gid(gid[:-2])
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
    for x, caption in captions:
        _text(ax, x, bottom, caption, va="top", size=8.5)
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
