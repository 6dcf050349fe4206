"""What today's layers do differently: their kinds, positions, sinks, gates, picks.

A model's layers as a strip of cells, one colour per kind, with the layers that skip
RoPE and those that reuse another layer's keys and values (:func:`layer_strips`,
:func:`kv_sources`: chapters 17, 19, 22 and 27, and every model's card); which
features RoPE turns together, proportional against partial (:func:`rotary_pairs`,
chapter 14); a sink and an output gate on one query's row (:func:`sink_and_gate`,
chapter 16); DeepSeek Sparse Attention's indexer, picks and weights
(:func:`dsa_pipeline`, chapter 24). The numbers come from the package's own functions
and from :data:`attention.models.table.MODELS`.

>>> import matplotlib.pyplot as plt
>>> from attention.figures import layer_strips
>>> fig = layer_strips("Gemma 3 27B")
>>> sum((p.get_gid() or "").startswith("Gemma 3 27B layer") for p in fig.axes[0].patches)
62
>>> plt.close(fig)
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle
from matplotlib.path import Path
from matplotlib.typing import ColorType

from attention.figures.style import (
    CURRENT,
    DONE,
    FACECOLOR,
    INK,
    LAYER_COLORS,
    LAYER_HATCHES,
    LAYER_LABELS,
    MUTED,
    SIGNED_CMAP,
    _all_models,
    _arrow,
    _canvas,
    _cell,
    _facts,
    _families,
    _int_arg,
    _labels_arg,
    _masked_or,
    _models,
    _real_arg,
    _row_label,
    _swatch,
    _tensor_arg,
    _text,
    _value_cells,
    ink,
)
from attention.models import LinearAttention
from attention.rope import rope_frequencies
from attention.sparse import topk_sparse_attention
from attention.step import attend

__all__ = ["dsa_pipeline", "kv_sources", "layer_strips", "rotary_pairs", "sink_and_gate"]


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
    kind in :data:`~attention.figures.style.LAYER_COLORS` (``MODELS[name].layer_types``).
    A white dot marks a layer without RoPE (NoPE); a layer that reuses another layer's
    keys and values is drawn hollow, with an arrow to the layer it takes them from
    (:func:`kv_sources`).

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
    if any(m.nope_layers for m in facts):
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
        nope = m.nope_layers
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
                mixers = sorted(
                    {m.local.mixer for m in facts if isinstance(m.local, LinearAttention)}
                )
                text = "linear: " + ", ".join(_short_mixer(s) for s in mixers)
        _text(ax, x + 0.28, yy - 0.1, text, ha="left", size=8.5)
    return fig


def _short_mixer(name: str) -> str:
    return {"Kimi Delta Attention": "KDA"}.get(name, name)


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


def _contrast(colour: ColorType) -> str:
    """Black or white, whichever reads better on ``colour`` (as the heatmaps' cells)."""
    return ink(ListedColormap([colour]), 0.0)


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
    >>> from attention.figures import labelled_texts
    >>> import torch
    >>> fig = sink_and_gate(torch.zeros(3), torch.eye(3), 0.0, torch.zeros(3))
    >>> texts = labelled_texts(fig)
    >>> texts["weights 0"], texts["sink weight"], texts["gate 0"]
    ('0.25', '0.25', '0.50')
    >>> plt.close(fig)
    """
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
    sinks_in = ", ".join(
        _families([m for m in _all_models() if m.scores is not None and m.scores.sinks])
    )
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
    gates_in = ", ".join(
        _families([m for m in _all_models() if m.parts is not None and m.parts.output_gate])
    )
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


def _picked(index_scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """``True`` at the keys :func:`~attention.topk_sparse_attention` reads for one query.

    Asked of the function itself, so the figure picks as it does (ties, ``-inf``): with
    a query and keys of zeros every picked key gets the same weight, one over the
    number of picks, and one-hot values return the weights; a key is picked where its
    weight is above 0. ``index_scores`` is ``(num_keys,)``, checked.
    """
    n = index_scores.shape[0]
    zeros = index_scores.new_zeros(1, 1, n, 1)
    one_hot = torch.eye(n, dtype=index_scores.dtype).view(1, 1, n, n)
    scores = index_scores.view(1, 1, n)  # one query, the last token: it sees every key
    weights = topk_sparse_attention(zeros[:, :, -1:], zeros, one_hot, scores, top_k)
    return weights[0, 0, 0] > 0


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
    owner = "dsa_pipeline"
    index_scores = _tensor_arg(owner, "index_scores", index_scores, 1, most=12)
    n = index_scores.shape[0]
    top_k = _int_arg(owner, "top_k", top_k, 1, 10**9)
    weights = _tensor_arg(owner, "weights", weights, 1, most=12)
    if weights.shape[0] != n:
        raise ValueError(f"{owner}: expected {n} weights, one per key, got {weights.shape[0]}")
    m = _facts(owner, model)
    indexer = m.indexer
    if indexer is None:
        raise ValueError(f"{owner}: expected a model with an indexer, got {m.name!r}")
    names = _labels_arg(owner, labels, n)
    picked = _picked(index_scores, top_k)
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
            f"{m.name}: {indexer.num_heads} heads × {indexer.head_dim}, "
            f"one key of {indexer.head_dim} per token",
        ),
        (
            f"2  keep the top {top_k}",
            f"{m.name}: the top {indexer.top_k:,} of every key",
        ),
        (
            "3  attention over the picks only",
            f"MLA, {m.num_heads} heads, over ≤ {indexer.top_k:,} keys",
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
