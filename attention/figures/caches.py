"""What a cache keeps, and where: growing, paged, latent, packed (Parts II and V).

A KV cache through prefill and decode, one row per step (:func:`kv_cache_growth`,
chapter 8); multi-head latent attention's data flow, the latent it caches instead of
keys and values (:func:`latent_flow`, chapter 13); a paged cache's pool of blocks and
its block tables (:func:`paged_blocks`, chapter 28); requests padded against packed
(:func:`packing_diagram`, chapter 29). Each is drawn from the package's own objects
(a real :class:`~attention.KVCache`, a :class:`~attention.PagedKVCache` as it is, a
model's facts), so it shows what the code does.

>>> import matplotlib.pyplot as plt
>>> from attention.figures import kv_cache_growth
>>> fig = kv_cache_growth(2, 4)
>>> [len([p for p in fig.axes[0].patches if p.get_gid() == f"cache {s}"]) for s in range(3)]
[2, 3, 4]
>>> plt.close(fig)
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from attention import _checks
from attention.figures.style import (
    CURRENT,
    DONE,
    FACECOLOR,
    HEAD_COLORS,
    INK,
    LAYER_COLORS,
    MASKED_COLOR,
    MASKED_HATCH,
    MASKED_HATCH_COLOR,
    MUTED,
    SEQUENCE_FILLS,
    SHARED_FILL,
    _arrow,
    _box,
    _cached,
    _canvas,
    _cell,
    _facts,
    _int_arg,
    _labelled_arrow,
    _labels_arg,
    _models,
    _row_label,
    _text,
)
from attention.kv_cache import KVCache
from attention.paged import PagedKVCache

__all__ = [
    "cache_against_context",
    "kv_cache_growth",
    "latent_flow",
    "packing_diagram",
    "paged_blocks",
]


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
        reader = owners[0] if owners else None
        if reader is not None:
            index = cache.block_table(reader).index(block)
            first = index * size  # the first token this block holds
            filled = min(size, cache.num_tokens(reader) - first)
        fill = SHARED_FILL if len(owners) > 1 else None if reader is None else fills.get(reader)
        for slot in range(size):
            x = left + slot * cell
            used = reader is not None and slot < filled
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
            if used and reader is not None:  # used: the block is a sequence's (reader's)
                token = first + slot
                names = labels.get(reader)
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
    >>> from attention.figures import labelled_texts
    >>> fig = latent_flow("DeepSeek-V3")
    >>> texts = labelled_texts(fig)
    >>> texts["latent"], texts["rope key"]
    ('latent c\\n512', 'rotated key\\n64, all heads')
    >>> plt.close(fig)
    """
    owner = "latent_flow"
    m = _facts(owner, model)
    latent = m.latent
    if latent is None:
        raise ValueError(f"{owner}: expected a model with latent attention, got {m.name!r}")
    _checks.flag(owner, "absorbed", absorbed, "draw the absorbed form")
    h, r, dr = m.num_heads, latent.kv_lora_rank, latent.qk_rope_head_dim
    dn, dv, q_rank = latent.qk_nope_head_dim, latent.v_head_dim, latent.q_lora_rank
    width, height = 9.2, 4.3
    fig, ax = _canvas(owner, width, height, title)
    _box(ax, 0.15, 1.95, 1.05, 0.6, f"x\n{m.hidden_size:,}", fill="#eeeeee")
    c1, w1 = 2.25, 1.55
    _cached(ax, c1, 3.1, w1, 0.6, f"latent c\n{r}", "latent")
    _cached(ax, c1, 1.95, w1, 0.6, f"rotated key\n{dr}, all heads", "rope key")
    q_text = f"{q_rank:,}" if q_rank else f"{m.hidden_size:,}"
    _box(ax, c1, 0.45, w1, 0.6, f"query latent\n{q_text}" if q_rank else "x", fill=FACECOLOR)
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
    owner = "packing_diagram"
    lengths = _checks.sequence_lengths(owner, cu_seqlens)
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
                edgecolor=MASKED_HATCH_COLOR if hatch else "white",
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
                slot(left + j * cell, y, MASKED_COLOR, "", "pad", hatch=MASKED_HATCH)
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


def cache_against_context(models: object, *, title: str | None = None) -> Figure:
    """One sequence's cache against the context, one line per model, in bf16.

    Drawn by :func:`~attention.figures.heatmaps.memory_curves`, as every chapter's
    cache figure is: the contexts double from 1,024 tokens to the longest trained
    context among the models (128k at least), each model's line stopping where its
    config's positions do; the cache at each is :func:`attention.models.bill`'s, its
    recurrent states in float32. A dot marks each model's context as its source gives
    it, trained, supported or configured (``ModelFacts.context_label``), which the
    x-axis's label names.

    Parameters
    ----------
    models : str, ModelFacts or a sequence of them
        Names in ``attention.MODELS`` (or their facts), one line each; not an encoder,
        which keeps no cache.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Each model's line has the gid ``"<model> cache"`` (its y values in GiB), its
        trained context's dot ``"<model> trained"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = cache_against_context(["gpt-oss-20b", "Llama 3.1 70B"])
    >>> line = next(l for l in fig.axes[0].lines if l.get_gid() == "gpt-oss-20b cache")
    >>> int(line.get_xdata()[0]), float(line.get_ydata()[-1])  # 1k tokens; GiB at 128k
    (1024, 3.0029296875)
    >>> plt.close(fig)
    """
    from attention.figures.heatmaps import Curve, memory_curves
    from attention.models import bill

    owner = "cache_against_context"
    facts = _models(owner, models)
    encoders = [m.name for m in facts if m.bidirectional]
    if encoders:
        raise ValueError(f"{owner}: expected models that keep a cache, got encoders {encoders}")
    trained: dict[str, int] = {}
    for m in facts:
        if m.trained_context is None:
            raise ValueError(f"{owner}: expected {m.name!r} to give its trained context, got None")
        trained[m.name] = m.trained_context
    longest = max(128 * 1024, *trained.values())
    contexts = [2**p for p in range(10, 64) if 2**p <= longest]
    curves, gids = [], []
    for m in facts:
        limit, at = m.max_position_embeddings, trained[m.name]
        tokens = sorted({t for t in [*contexts, at] if limit is None or t <= limit})
        gib = [bill(m, t).cache / 2**30 for t in tokens]
        curves.append(Curve(m.name, tokens, gib))
        dot = [bill(m, at).cache / 2**30]
        curves.append(Curve(None, [at], dot, pair=True, marker="o"))
        gids += [f"{m.name} cache", f"{m.name} trained"]
    labels = {m.context_label for m in facts}
    one = len(labels) == 1
    dot_is = f"the {labels.pop()}" if one else "each model's context, as its source says"
    ax = memory_curves(
        curves,
        title=title,
        xlabel=f"tokens of context (a dot: {dot_is})",
        ylabel="cache of one sequence (GiB, bf16)",
        base=2,
    )
    for line, gid in zip(ax.lines, gids, strict=True):
        line.set_gid(gid)
    fig = ax.get_figure(root=True)
    assert isinstance(fig, Figure)  # memory_curves drew on a figure of its own
    return fig
