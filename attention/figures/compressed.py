"""DeepSeek-V4's compressed attention, drawn from the package (chapter 25).

* :func:`compression_pipeline`: which tokens each compressed entry is made of, found by
  changing each token and watching which entries of a real
  :class:`~attention.TokenCompressor` move.
* :func:`compressed_cache_growth`: what a :class:`~attention.CompressedCache` holds after
  each step of a decode, read from a real cache: the window's keys, the tokens waiting
  for their group, and the entries.
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from attention import _checks
from attention.compressed import CompressedAttention, CompressedCache, TokenCompressor
from attention.figures.style import (
    CURRENT,
    DONE,
    HEAD_COLORS,
    INK,
    LAYER_COLORS,
    MUTED,
    _canvas,
    _cell,
    _int_arg,
    _row_label,
    _text,
)
from attention.rope import Rotary

__all__ = ["compressed_cache_growth", "compression_pipeline", "entry_sources"]


def entry_sources(rate: int, num_tokens: int, *, overlap: bool) -> list[list[int]]:
    """The tokens each entry of a :class:`~attention.TokenCompressor` depends on.

    Found, not assumed: a compressor with random weights and position biases compresses
    ``num_tokens`` random tokens; each token in turn is changed, and an entry that moves
    depends on it.

    Parameters
    ----------
    rate : int
        Tokens per group, 1 to 16.
    num_tokens : int
        Tokens, ``rate`` to 64.
    overlap : bool
        Entries also read the group before (CSA).

    Returns
    -------
    list of list of int
        Entry ``w``'s tokens, in order: one per full group.

    Examples
    --------
    >>> entry_sources(4, 12, overlap=False)
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    >>> entry_sources(4, 12, overlap=True)[1]  # its own group and the one before
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    owner = "entry_sources"
    rate = _int_arg(owner, "rate", rate, 1, 16)
    num_tokens = _int_arg(owner, "num_tokens", num_tokens, rate, 64)
    _checks.flag(owner, "overlap", overlap, "entries also read the group before")
    generator = torch.Generator().manual_seed(0)
    compressor = TokenCompressor(4, 4, rate=rate, overlap=overlap, rotary=Rotary(2))
    with torch.no_grad():
        for parameter in compressor.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
        x = torch.randn(1, num_tokens, 4, generator=generator, dtype=torch.float64)
        compressor = compressor.to(torch.float64)
        base = compressor(x)
        sources: list[list[int]] = [[] for _ in range(base.shape[1])]
        for t in range(num_tokens):
            changed = x.clone()
            changed[0, t] += 1.0
            moved = (compressor(changed) - base).abs().amax(dim=-1)[0] > 1e-12
            for w in torch.nonzero(moved).flatten().tolist():
                sources[w].append(t)
    return sources


def compression_pipeline(
    rate: int = 4, num_tokens: int = 12, *, overlap: bool = True, title: str | None = None
) -> Figure:
    """Tokens becoming compressed entries: each entry and the tokens it sums.

    The top row is the tokens, coloured by their group of ``rate``. Below, one row per
    entry: the tokens it is a weighted sum of (:func:`entry_sources`), then the entry,
    which RoPE turns as its group's first token. With ``overlap`` (CSA) each entry
    reads its group and the group before; without (HCA), its group alone.

    Parameters
    ----------
    rate : int
        Tokens per group, 2 to 8.
    num_tokens : int
        Tokens, ``rate`` to 16.
    overlap : bool
        CSA's overlapping groups (True) or HCA's (False).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Token cells have the gid ``"token <t>"``; entry ``w``'s row has cells with the
        gid ``"reads <w>"`` (label: the token) and the entry, ``"entry <w>"``.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = compression_pipeline(4, 12)
    >>> [p.get_label() for p in fig.axes[0].patches if p.get_gid() == "reads 2"]
    ['4', '5', '6', '7', '8', '9', '10', '11']
    >>> plt.close(fig)
    """
    owner = "compression_pipeline"
    rate = _int_arg(owner, "rate", rate, 2, 8)
    num_tokens = _int_arg(owner, "num_tokens", num_tokens, rate, 16)
    sources = entry_sources(rate, num_tokens, overlap=overlap)
    cell, row_h, left = 0.42, 0.36, 1.2
    width = left + num_tokens * cell + 1.9
    height = 0.5 + (len(sources) + 1) * (row_h + 0.14) + 0.35
    fig, ax = _canvas(owner, width, height, title)
    top = height - 0.12
    kind = "compressed_sparse_attention" if overlap else "heavily_compressed_attention"
    group_fills = (HEAD_COLORS[0], HEAD_COLORS[1])
    what = "each entry reads its group and the one before" if overlap else "one entry per group"
    _text(ax, left, top, f"tokens, in groups of {rate}: {what}", ha="left", va="top", size=8.5,
          color=MUTED)  # fmt: skip
    y = top - 0.3 - row_h
    _row_label(ax, left - 0.12, y + row_h / 2, "tokens")
    for t in range(num_tokens):
        fill = group_fills[(t // rate) % 2]
        _cell(ax, left + t * cell, y, cell, row_h, str(t), fill=fill, gid=f"token {t}")
    x_entry = left + num_tokens * cell + 0.25
    for w, tokens in enumerate(sources):
        y -= row_h + 0.14
        _row_label(ax, left - 0.12, y + row_h / 2, f"entry {w}")
        for t in tokens:
            own = t // rate == w
            _cell(
                ax,
                left + t * cell,
                y,
                cell,
                row_h,
                str(t),
                fill=CURRENT if own else DONE,
                ink="white" if own else INK,
                gid=f"reads {w}",
                label=str(t),
            )
        _cell(
            ax,
            x_entry,
            y,
            0.55,
            row_h,
            f"e{w}",
            fill=LAYER_COLORS[kind],
            ink="white",
            gid=f"entry {w}",
            label=f"position {w * rate}",
        )
        _text(ax, x_entry + 0.62, y + row_h / 2, f"at {w * rate}", ha="left", size=7.5,
              color=MUTED)  # fmt: skip
    _text(ax, left, y - 0.1, "dark: the entry's own group; light: the group before "
          "(softmax of the gates, weighted sum, RMSNorm, RoPE)", ha="left", va="top",
          size=7.5, color=MUTED)  # fmt: skip
    return fig


def compressed_cache_growth(
    rate: int = 4,
    window: int = 4,
    prefill: int = 5,
    num_tokens: int = 12,
    *,
    title: str | None = None,
) -> Figure:
    """What a CSA layer's :class:`~attention.CompressedCache` holds, step by step.

    A real layer (``CompressedAttention`` with ``compress_rate=rate``) decodes
    ``num_tokens`` tokens: a prefill of ``prefill``, then one token at a time. After each
    step, one row: the tokens whose keys the window holds (``window - 1``), the tokens
    waiting for their group to fill (their vectors and gates), and the entries made so
    far. A group's last token completes an entry, and the waiting row empties.

    Parameters
    ----------
    rate : int
        Tokens per entry, 2 to 8.
    window : int
        The layer's window, 2 to 8.
    prefill : int
        Tokens of the first step, 1 to ``num_tokens``.
    num_tokens : int
        Tokens in all, up to 16.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Row ``s`` (0 the prefill) has cells with the gids ``"window <s>"``,
        ``"waiting <s>"`` and ``"entries <s>"``, each labelled with its token or entry.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig = compressed_cache_growth(4, 4, 5, 8)
    >>> def held(gid):
    ...     return [p.get_label() for p in fig.axes[0].patches if p.get_gid() == gid]
    >>> held("window 0"), held("waiting 0"), held("entries 0")
    (['2', '3', '4'], ['4'], ['e0'])
    >>> held("waiting 3"), held("entries 3")  # token 7 completes the second group
    ([], ['e0', 'e1'])
    >>> plt.close(fig)
    """
    owner = "compressed_cache_growth"
    rate = _int_arg(owner, "rate", rate, 2, 8)
    window = _int_arg(owner, "window", window, 2, 8)
    num_tokens = _int_arg(owner, "num_tokens", num_tokens, 1, 16)
    prefill = _int_arg(owner, "prefill", prefill, 1, num_tokens)
    torch.manual_seed(0)
    layer = CompressedAttention(
        8, 8, 64, num_heads=2, head_dim=4, q_lora_rank=4, window=window, rope_dim=2,
        compress_rate=rate, index_top_k=2, index_num_heads=2, index_head_dim=4, o_groups=2,
        o_lora_rank=2,
    )  # fmt: skip
    cache = CompressedCache(window)
    x = torch.randn(1, num_tokens, 8)
    steps = [(0, prefill), *((t, t + 1) for t in range(prefill, num_tokens))]
    rows = []
    with torch.no_grad():
        for start, stop in steps:
            layer(x[:, start:stop], cache=cache)
            seen = cache.seen_tokens
            rows.append(
                (
                    list(range(seen - len(cache), seen)),
                    list(range(seen - cache.num_waiting, seen)),
                    cache.num_entries,
                )
            )
    cell, row_h, left = 0.36, 0.34, 1.15
    slots = (window - 1, rate - 1, num_tokens // rate)
    x_wait = left + slots[0] * cell + 0.45
    x_entries = x_wait + slots[1] * cell + 0.45
    width = x_entries + max(slots[2], 1) * cell + 0.3
    height = 0.55 + len(rows) * (row_h + 0.1) + 0.15
    fig, ax = _canvas(owner, width, height, title)
    top = height - 0.12
    for x_part, text in ((left, "window's keys"), (x_wait, "waiting"), (x_entries, "entries")):
        _text(ax, x_part, top, text, ha="left", va="top", size=8, color=MUTED)
    y = top - 0.3
    kind = LAYER_COLORS["compressed_sparse_attention"]
    for s, (held, waiting, entries) in enumerate(rows):
        y -= row_h + 0.1
        label = f"prefill, {prefill}" if s == 0 else f"token {prefill + s - 1}"
        _row_label(ax, left - 0.12, y + row_h / 2, label, size=8)
        for i, t in enumerate(held):
            _cell(ax, left + i * cell, y, cell, row_h, str(t), fill=DONE, size=7.5,
                  gid=f"window {s}", label=str(t))  # fmt: skip
        for i, t in enumerate(waiting):
            _cell(ax, x_wait + i * cell, y, cell, row_h, str(t), fill=HEAD_COLORS[1], size=7.5,
                  gid=f"waiting {s}", label=str(t))  # fmt: skip
        for w in range(entries):
            _cell(ax, x_entries + w * cell, y, cell, row_h, f"e{w}", fill=kind, ink="white",
                  size=7.5, gid=f"entries {s}", label=f"e{w}")  # fmt: skip
    return fig
