"""Heatmaps of attention weights, one head or a grid of heads (needs matplotlib).

Install the optional extra with ``pip install "attention-step-by-step[plot]"``; the
rest of the package does not need matplotlib, so import these from ``attention.figures``.

Each cell ``(i, j)`` shows how much query token ``i`` (a row) attends to key token
``j`` (a column). Positions a query may not attend to (the future, in causal
attention) are drawn as grey hatching with no number, so that "not allowed to look"
is never confused with "a weight of 0.01". Say which positions are allowed with
``allowed=``, ``True`` where a query may attend, as everywhere in this package.

The figures are meant to be saved as images and shown on both light and dark web
pages, so a figure created here has an opaque white background and dark text: it
reads the same on either page, where a transparent one would put black labels on a
near-black page. (So save them as they are: ``savefig(..., transparent=True)`` would
undo this.) The default colormap, viridis, is perceptually uniform (equal steps
in weight look like equal steps in colour) and readable in greyscale and by readers
with the common forms of colour blindness.

>>> import torch
>>> import matplotlib.pyplot as plt
>>> from attention import INPUTS, TOKENS, MultiHeadAttention
>>> from attention.figures import head_grid
>>> _ = torch.manual_seed(123)
>>> mha = MultiHeadAttention(3, 4, context_length=6, dropout=0.0, num_heads=2)
>>> fig = head_grid(mha.attention_weights(INPUTS.unsqueeze(0)), TOKENS, TOKENS)
>>> [ax.get_title() for ax in fig.axes[:2]]
['head 1', 'head 2']
>>> plt.close(fig)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import Colormap
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.patches import Patch, PathPatch
from matplotlib.path import Path
from matplotlib.typing import ColorType

from attention import _checks
from attention.figures.style import (
    FACECOLOR,
    LAYER_COLORS,
    MASKED_COLOR,
    MASKED_HATCH,
    MASKED_HATCH_COLOR,
    SMALLEST_TEXT_POINTS,
    ink,
)

__all__ = ["ANNOTATE_MAX", "Curve", "head_grid", "heatmap", "memory_curves"]

#: Matrices up to this size in both directions get their values written in the cells.
ANNOTATE_MAX = 12


def _as_array(owner: str, weights: object) -> np.ndarray:
    """``weights`` as a float64 NumPy array, whatever its device, dtype or grad."""
    if isinstance(weights, torch.Tensor):
        # detach: a tensor that requires grad refuses .numpy(); double: NumPy has no
        # bfloat16, and float64 shows every float32 or float16 value exactly.
        return weights.detach().cpu().double().numpy()
    try:
        return np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"{owner}: expected a tensor or an array of numbers, got {type(weights).__name__}"
        ) from None


def _labels(owner: str, which: str, labels: Sequence[object] | None, n: int) -> list[str]:
    """Tick labels, by default the positions 0 to n - 1."""
    if labels is None:
        return [str(i) for i in range(n)]
    if isinstance(labels, str):  # a sentence, not a list of tokens
        raise TypeError(
            f"{owner}: {which} labels must be a sequence of {n} tokens, got the string "
            f"{labels!r}; split it into tokens first"
        )
    texts = [str(label) for label in labels]
    if len(texts) != n:
        raise ValueError(f"{owner}: expected {n} {which} labels, got {len(texts)}")
    return texts


def _refuse_mask(owner: str, mask: object) -> None:
    """Raise if the old ``mask=`` (``True`` = hidden) was given, saying what to write now."""
    if isinstance(mask, str):
        instead = f"write allowed={mask!r} (allowed is True where a query may attend)"
    else:
        instead = (
            "write allowed=~mask (allowed is True where a query may attend; "
            "mask was True where a cell is hidden)"
        )
    _checks.removed_keyword(owner, "mask", mask, instead)


def _hidden(owner: str, values: np.ndarray, allowed: object) -> np.ndarray:
    """Bool array shaped like ``values``, ``True`` where a cell is drawn as hidden.

    A cell is hidden where ``allowed`` is ``False`` or where its value is not finite.
    ``values`` is ``(rows, cols)`` or ``(num_heads, rows, cols)``; an array ``allowed``
    may have either shape (one for every head, or one per head).
    """
    rows, cols = values.shape[-2:]
    # -inf is how a masked score looks before the softmax, and nan has no colour.
    hidden = ~np.isfinite(values)
    if allowed is None:
        return hidden
    if isinstance(allowed, str):
        if allowed != "causal":
            raise ValueError(
                f'{owner}: allowed must be a bool matrix, "causal" or None, got {allowed!r}'
            )
        return hidden | np.triu(np.ones((rows, cols), dtype=bool), k=1)  # the future
    if isinstance(allowed, torch.Tensor):
        allowed = allowed.detach().cpu().numpy()
    allowed = np.asarray(allowed)
    if allowed.shape not in {(rows, cols), values.shape}:
        raise ValueError(
            f"{owner}: expected allowed of shape {(rows, cols)} to match the weights, "
            f"got shape {allowed.shape}"
        )
    if allowed.dtype != np.bool_:
        raise ValueError(
            f"{owner}: allowed must be a bool matrix with True where a query may attend, "
            f"got dtype {allowed.dtype}; for a 0/1 matrix use allowed == 1 (or, for a "
            f"mask that is 1 at the hidden positions, allowed == 0)"
        )
    return hidden | ~allowed


@dataclass(frozen=True)
class _Style:
    """How every panel of one figure is drawn: its colour scale, labels and numbers."""

    row_labels: list[str]
    col_labels: list[str]
    cmap: Colormap  # with masked cells in MASKED_COLOR
    vmin: float
    vmax: float
    annotate: bool
    fmt: str


def _prepare(
    owner: str,
    values: np.ndarray,
    row_labels: Sequence[object] | None,
    col_labels: Sequence[object] | None,
    allowed: object,
    vmin: float | None,
    vmax: float | None,
    annotate: bool | None,
    cmap: str | Colormap,
    fmt: str = "{:.2f}",
) -> tuple[np.ndarray, _Style]:
    """What :func:`heatmap` and :func:`head_grid` share, checked and converted once.

    ``values`` is one matrix ``(rows, cols)`` or one per head; returns its masked cells,
    as from :func:`_hidden`, and the style of every panel.
    """
    rows, cols = values.shape[-2:]
    row_labels = _labels(owner, "row", row_labels, rows)
    col_labels = _labels(owner, "column", col_labels, cols)
    hidden = _hidden(owner, values, allowed)
    # A missing colour limit is taken from the unmasked values.
    visible = values[~hidden]
    given = vmax is not None
    if vmin is None:
        vmin = float(visible.min()) if visible.size else 0.0
    if vmax is None:
        vmax = float(visible.max()) if visible.size else vmin + 1.0
    if vmax <= vmin:
        if given:
            raise ValueError(
                f"{owner}: vmax must be greater than vmin, got vmin={vmin:g}, vmax={vmax:g}"
            )
        vmax = vmin + 1.0  # a constant matrix: any range shows it, as one colour
    if annotate is None:
        annotate = rows <= ANNOTATE_MAX and cols <= ANNOTATE_MAX
    cmap = plt.get_cmap(cmap).with_extremes(bad=MASKED_COLOR)
    return hidden, _Style(row_labels, col_labels, cmap, float(vmin), float(vmax), annotate, fmt)


def _draw(
    ax: Axes, values: np.ndarray, hidden: np.ndarray, style: _Style, title: str | None
) -> AxesImage:
    """Draw one heatmap on ``ax`` and return its image."""
    rows, cols = values.shape
    # A cell's side in points, taken before imshow shrinks the axes to make the cells square.
    fig, box = ax.get_figure(root=True), ax.get_position()  # a SubFigure has no size of its own
    assert fig is not None  # an Axes drawn on is in a figure
    width, height = fig.get_size_inches()
    cell_points = 72 * min(box.width * width / cols, box.height * height / rows)
    image = ax.imshow(
        np.ma.masked_array(values, mask=hidden),
        cmap=style.cmap,
        vmin=style.vmin,
        vmax=style.vmax,
        aspect="equal",
        interpolation="nearest",  # one flat colour per cell, however the image is scaled
    )
    ax.set_facecolor(FACECOLOR)
    if hidden.any():
        # One compound path over every masked cell: a single artist however large the
        # matrix, and the hatching runs on unbroken across neighbouring masked cells.
        squares = [_square(row, col) for row, col in np.argwhere(hidden).tolist()]
        ax.add_patch(
            PathPatch(
                Path.make_compound_path(*squares),
                facecolor="none",
                edgecolor=MASKED_HATCH_COLOR,
                hatch=MASKED_HATCH,
                linewidth=0,
            )
        )

    tick_size = 10 if max(rows, cols) <= 16 else 8 if max(rows, cols) <= 32 else 6
    ax.set_xticks(range(cols), style.col_labels, fontsize=tick_size)
    ax.set_yticks(range(rows), style.row_labels, fontsize=tick_size)
    if max(map(len, style.col_labels)) > 2:
        # Rotated and anchored at their right end, so long tokens end under their column.
        plt.setp(ax.get_xticklabels(), rotation=45, ha="right", rotation_mode="anchor")
    if title:
        ax.set_title(title)
    # Thin white lines between cells (on minor ticks at the cell edges), no tick marks.
    ax.set_xticks(np.arange(cols + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(rows + 1) - 0.5, minor=True)
    # Thinner for small cells, where 1.2 points of white would drown the colours.
    ax.grid(which="minor", color=FACECOLOR, linewidth=min(1.2, 0.06 * cell_points))
    ax.tick_params(which="both", length=0)
    ax.spines[:].set_visible(False)

    if style.annotate:
        # A number of about 4 characters needs ~2.4 font sizes of width: fit it in the cell.
        # Never under the site's smallest text, which stays legible on a phone.
        size = max(SMALLEST_TEXT_POINTS, min(10.0, 0.33 * cell_points))
        norm = image.norm
        for (i, j), value in np.ndenumerate(values):
            if hidden[i, j]:
                continue  # the hatching says "masked"; a number would say "weight"
            on_cell = ink(style.cmap, float(np.clip(norm(value), 0.0, 1.0)))
            ax.text(
                j,
                i,
                style.fmt.format(value),
                ha="center",
                va="center",
                color=on_cell,
                fontsize=size,
            )
    return image


def _square(row: int, col: int) -> Path:
    """The outline of cell ``(row, col)`` in image coordinates (cell centres at integers)."""
    x, y = col - 0.5, row - 0.5
    return Path([(x, y), (x + 1, y), (x + 1, y + 1), (x, y + 1), (x, y)], closed=True)


def _legend(fig: Figure) -> None:
    """A key for the hatching, so no reader has to guess what the grey cells mean."""
    key = Patch(
        facecolor=MASKED_COLOR, edgecolor=MASKED_HATCH_COLOR, hatch=MASKED_HATCH, label="masked"
    )
    # "outside" places it below the axes' decorations; it needs the constrained layout.
    fig.legend(handles=[key], loc="outside lower right", frameon=False, fontsize=9)


def heatmap(
    weights: object,
    row_labels: Sequence[object] | None = None,
    col_labels: Sequence[object] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = None,
    cmap: str | Colormap = "viridis",
    colorbar: bool = True,
    allowed: object = None,
    mask: None = None,
    fmt: str = "{:.2f}",
    xlabel: str | None = "key (attended to)",
    ylabel: str | None = "query (attending)",
) -> Axes:
    """Draw a matrix of attention weights as a heatmap, one row per query token.

    Parameters
    ----------
    weights : torch.Tensor or array-like, shape (num_queries, num_keys)
        Attention weights, or scores before the softmax. A tensor may require grad,
        live on any device and have any floating dtype (bfloat16 included).
        Non-finite entries (the ``-inf`` of a masked score) are drawn as masked.
    row_labels, col_labels : sequence of str, optional
        Query tokens (one per row) and key tokens (one per column); positions
        ``0, 1, ...`` by default. Pass the same tokens twice for self-attention.
    ax : matplotlib.axes.Axes, optional
        Where to draw. By default a new figure with a white background, sized to the
        matrix, with a "masked" key below it when some cells are masked. (On axes
        of your own there is no key: say what the hatching means in the caption.)
    title : str, optional
    annotate : bool, optional
        Write each value in its cell. By default only when both sides have at most 12
        cells, where the numbers still fit.
    vmin, vmax : float or None
        The weights mapped to the two ends of the colormap. ``vmin`` is 0 by default,
        the smallest possible weight; pass ``vmin=None`` for scores, which can be
        negative. ``vmax=None`` means the largest unmasked value.
    cmap : str or matplotlib.colors.Colormap
        A perceptually uniform colormap (viridis, magma, cividis, ...) keeps equal
        differences in weight looking equal.
    colorbar : bool
        Add a colorbar beside the axes.
    allowed : bool matrix, "causal" or None
        Where a query may attend: a bool matrix of the same shape, ``True`` where a
        query may attend (drawn normally) and ``False`` where it may not (drawn as
        masked: grey hatching, no number), as :func:`attention.causal_mask` and the
        ``allowed=`` of :func:`attention.attend` take it; or ``"causal"`` to hide every
        position above the diagonal (the future). For the book's
        :attr:`attention.CausalAttention.mask`, ``True`` at the hidden positions, pass
        ``allowed=~mask``. Scores' ``-inf`` (and ``nan``) is masked whatever
        ``allowed`` says, but after the softmax a masked weight is a plain 0: pass
        ``allowed`` to show it.
    mask : None
        No longer taken, since its ``True`` meant "hidden" where the rest of the
        package's ``True`` means "may attend": giving it raises a ``ValueError`` that
        says to write ``allowed=~mask``.
    fmt : str
        Format of the written values, for ``fmt.format(value)``.
    xlabel, ylabel : str or None
        Axis titles; ``None`` leaves them out.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on; ``ax.images[0]`` is the heatmap (its array is a NumPy
        masked array), ``ax.texts`` the written values and ``ax.figure`` the figure.

    Examples
    --------
    >>> import torch
    >>> import matplotlib.pyplot as plt
    >>> from attention import INPUTS, TOKENS, CausalAttention
    >>> _ = torch.manual_seed(123)
    >>> ca = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0)
    >>> weights = ca.attention_weights(INPUTS.unsqueeze(0))[0]  # (6, 6)
    >>> ax = heatmap(weights, TOKENS, TOKENS, title="causal weights", allowed="causal")
    >>> ax.get_title(), ax.get_xticklabels()[1].get_text()
    ('causal weights', 'journey')
    >>> [text.get_text() for text in ax.texts[:3]]  # row 0 sees only itself, row 1 two
    ['1.00', '0.48', '0.52']
    >>> plt.close(ax.figure)
    """
    _refuse_mask("heatmap", mask)
    values = _as_array("heatmap", weights)
    if values.ndim != 2:
        hint = " (pick one matrix, e.g. weights[0], or use head_grid)" if values.ndim > 2 else ""
        raise ValueError(
            f"heatmap: expected a 2-D matrix of weights, got shape {values.shape}{hint}"
        )
    rows, cols = values.shape
    if rows == 0 or cols == 0:
        raise ValueError(f"heatmap: expected a non-empty matrix, got shape {values.shape}")
    hidden, style = _prepare(
        "heatmap", values, row_labels, col_labels, allowed, vmin, vmax, annotate, cmap, fmt
    )

    own = ax is None
    if ax is None:
        # ~0.6 inch cells for a small matrix, shrinking so a big one stays ~7 inches,
        # plus room for the token labels (longer tokens, more room) and the colorbar.
        cell = min(0.6, max(0.12, 7.0 / max(rows, cols)))
        longest = max(map(len, [*style.row_labels, *style.col_labels]))
        margin = 1.0 + 0.07 * longest
        width = cols * cell + margin + (1.2 if colorbar else 0.3)
        height = rows * cell + margin + (0.4 if title else 0.1) + 0.3
        _, ax = plt.subplots(figsize=(width, height), layout="constrained", facecolor=FACECOLOR)
    fig = ax.get_figure()
    assert fig is not None  # an Axes drawn on is in a figure
    image = _draw(ax, values, hidden, style, title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if colorbar:
        bar = fig.colorbar(image, ax=ax, shrink=0.9, pad=0.03)
        bar.outline.set_visible(False)
    if own and hidden.any():
        # Only in a figure of our own: in someone else's there is no free corner to use.
        assert isinstance(fig, Figure)  # plt.subplots made it, above
        _legend(fig)
    return ax


def head_grid(
    weights: object,
    row_labels: Sequence[object] | None = None,
    col_labels: Sequence[object] | None = None,
    *,
    titles: Sequence[str] | None = None,
    ncols: int | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = None,
    allowed: object = None,
    mask: None = None,
    figsize: tuple[float, float] | None = None,
    suptitle: str | None = None,
    annotate: bool | None = None,
    cmap: str | Colormap = "viridis",
) -> Figure:
    """One heatmap per attention head, all on one colour scale with one colorbar.

    Sharing the scale means the same colour is the same weight in every panel, so
    heads can be compared at a glance.

    Parameters
    ----------
    weights : torch.Tensor or array-like, shape (num_heads, T, T) or (1, num_heads, T, T)
        Each head's attention weights, as from ``MultiHeadAttention.attention_weights``
        for a batch of one sequence. Non-finite entries are drawn as masked.
    row_labels, col_labels : sequence of str, optional
        Query and key tokens, as in :func:`heatmap`.
    titles : sequence of str, optional
        One title per head; ``"head 1"``, ``"head 2"``, ... by default.
    ncols : int, optional
        Panels per row; all heads in one row by default, up to 4.
    vmin, vmax : float or None
        The shared colour scale; ``vmax=None`` is the largest unmasked weight of any
        head, ``vmin=None`` the smallest.
    allowed : bool array, "causal" or None
        As in :func:`heatmap`, ``True`` where a query may attend: ``(T, T)`` for every
        head, or ``(num_heads, T, T)``.
    mask : None
        No longer taken (its ``True`` meant "hidden"): giving it raises a ``ValueError``.
    figsize : (float, float), optional
        Figure size in inches; by default sized to the number of heads and tokens.
    suptitle : str, optional
        A title above all the panels.
    annotate : bool, optional
        Write the values in the cells; by default when ``T <= 12``.
    cmap : str or matplotlib.colors.Colormap

    Returns
    -------
    matplotlib.figure.Figure
        ``fig.axes[:num_heads]`` are the heads' axes, in order, and ``fig.axes[-1]``
        is the colorbar's.

    Examples
    --------
    >>> import torch
    >>> import matplotlib.pyplot as plt
    >>> weights = torch.softmax(torch.randn(3, 4, 4), dim=-1)  # (num_heads, T, T)
    >>> fig = head_grid(weights, list("abcd"), list("abcd"), suptitle="three heads")
    >>> len(fig.axes), fig.axes[2].get_title()  # three heads and one colorbar
    (4, 'head 3')
    >>> plt.close(fig)
    """
    _refuse_mask("head_grid", mask)
    values = _as_array("head_grid", weights)
    if values.ndim == 4 and values.shape[0] == 1:
        values = values[0]  # a batch of one sequence
    if values.ndim != 3 or 0 in values.shape:
        hint = ""
        if values.ndim == 2:
            hint = "; for a single matrix use heatmap"
        elif values.ndim == 4:
            hint = "; pick one sequence of the batch, e.g. weights[0]"
        raise ValueError(
            "head_grid: expected weights of shape (num_heads, T, T) or "
            f"(1, num_heads, T, T), got shape {values.shape}{hint}"
        )
    num_heads, rows, cols = values.shape
    titles = [f"head {h + 1}" for h in range(num_heads)] if titles is None else list(titles)
    if len(titles) != num_heads:
        raise ValueError(f"head_grid: expected {num_heads} titles, got {len(titles)}")
    if ncols is None:
        ncols = min(num_heads, 4)
    ncols = _checks.positive_int("head_grid", "ncols", ncols)
    ncols = min(ncols, num_heads)
    nrows = math.ceil(num_heads / ncols)
    # Over every head at once: one colour scale, so a colour is the same weight in each panel.
    hidden, style = _prepare(
        "head_grid", values, row_labels, col_labels, allowed, vmin, vmax, annotate, cmap
    )

    if figsize is None:
        # Each panel carries its own token labels: room for them beside and below it.
        panel = min(4.0, max(2.4, 0.45 * max(rows, cols)))
        beside = 0.3 + 0.08 * max(map(len, style.row_labels))
        below = 0.5 + 0.06 * max(map(len, style.col_labels))
        width = ncols * (panel + beside) + 0.3 + 1.0
        height = nrows * (panel + below + 0.3) + (0.4 if suptitle else 0.0) + 0.3
        figsize = (width, height)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=figsize, squeeze=False, layout="constrained", facecolor=FACECOLOR
    )
    axes = axes.ravel()
    for extra in axes[num_heads:]:
        extra.remove()  # the empty end of the last row
    image = None
    for h, ax in enumerate(axes[:num_heads]):
        image = _draw(ax, values[h], hidden[h], style, titles[h])
        # Axis titles once per row and column of panels, not on every panel.
        if h + ncols >= num_heads:
            ax.set_xlabel("key (attended to)")
        if h % ncols == 0:
            ax.set_ylabel("query (attending)")
    assert image is not None  # num_heads >= 1 panels drawn
    bar = fig.colorbar(image, ax=axes[:num_heads].tolist(), shrink=0.9, pad=0.02)
    bar.outline.set_visible(False)
    if suptitle:
        fig.suptitle(suptitle)
    if hidden.any():
        _legend(fig)
    return fig


# -- Memory against context: one style for every log-log cost curve --------------------


@dataclass(frozen=True)
class Curve:
    """One line of :func:`memory_curves`: a cost at each number of tokens.

    Attributes
    ----------
    label : str or None
        The legend's entry; ``None`` adds none (a continuation of the line before).
    tokens, values : list of float
        Where the line is drawn, the same number of each, all positive (log scales).
    kind : str or None
        A layer kind of ``transformers``' ``layer_types`` (``"full_attention"``,
        ``"sliding_attention"``, ...): the line takes its colour from
        :data:`~attention.figures.style.LAYER_COLORS`, as every per-kind figure does.
    dashed : bool
        A dashed line (a bound, a continuation, a "what if").
    pair : bool
        Drawn in the colour of the curve before it (a model's line and its variant).
    marker : str or None
        A matplotlib marker for the measured points (``"o"``, ``"s"``, ...).
    """

    label: str | None
    tokens: Sequence[float]
    values: Sequence[float]
    kind: str | None = None
    dashed: bool = False
    pair: bool = False
    marker: str | None = None


def memory_curves(
    curves: Sequence[Curve],
    *,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "tokens in the cache",
    ylabel: str = "KV cache of one sequence (GiB)",
    base: int = 10,
) -> Axes:
    """Costs against the number of tokens, on log-log axes, in the site's one style.

    The chapters that count memory (the KV cache per model, local against global
    layers, each kind of layer's cache or state) all draw the same kind of figure: a
    line per model or per kind of layer, growing with the context. This draws them
    alike: white background, log scales on both axes, a light grid, lines of a layer
    kind in its colour from :data:`~attention.figures.style.LAYER_COLORS`, a legend.

    Parameters
    ----------
    curves : sequence of Curve
        The lines, in the legend's order.
    ax : matplotlib.axes.Axes, optional
        Where to draw; by default a new 7 × 4.5 inch figure.
    title, xlabel, ylabel : str
    base : int
        The base of the token axis' logarithm: 10, or 2 for lengths that are powers
        of two.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> tokens = [2**p for p in range(4, 12)]
    >>> ax = memory_curves([
    ...     Curve("full", tokens, [t * 1.0 for t in tokens], kind="full_attention"),
    ...     Curve("window 256", tokens, [min(t, 256) for t in tokens],
    ...           kind="sliding_attention"),
    ... ], base=2)
    >>> ax.get_xscale(), ax.get_yscale(), [t.get_text() for t in ax.get_legend().texts]
    ('log', 'log', ['full', 'window 256'])
    >>> plt.close(ax.figure)
    """
    owner = "memory_curves"
    if isinstance(curves, Curve) or not isinstance(curves, Sequence):
        raise TypeError(f"{owner}: expected a sequence of Curve, got {type(curves).__name__}")
    if not curves:
        raise ValueError(f"{owner}: expected at least one Curve, got none")
    for curve in curves:
        if not isinstance(curve, Curve):
            raise TypeError(f"{owner}: expected Curve items, got {type(curve).__name__}")
        if len(curve.tokens) != len(curve.values) or not len(curve.tokens):
            raise ValueError(
                f"{owner}: expected as many values as tokens (at least one) for "
                f"{curve.label!r}, got {len(curve.tokens)} and {len(curve.values)}"
            )
        if min(map(float, curve.tokens)) <= 0 or min(map(float, curve.values)) <= 0:
            raise ValueError(
                f"{owner}: expected positive tokens and values on log scales for "
                f"{curve.label!r}, got a value <= 0"
            )
        if curve.kind is not None and curve.kind not in LAYER_COLORS:
            raise ValueError(
                f"{owner}: expected a kind in {sorted(LAYER_COLORS)}, got {curve.kind!r}"
            )
    if curves[0].pair:
        raise ValueError(f"{owner}: expected the first curve without pair=True, got pair=True")
    if base not in (2, 10):
        raise ValueError(f"{owner}: expected base 2 or 10, got {base!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5), layout="constrained", facecolor=FACECOLOR)
    colour: ColorType | None = None
    for curve in curves:
        if curve.kind is not None:
            colour = LAYER_COLORS[curve.kind]
        elif not curve.pair:
            colour = None  # the next colour of the cycle
        (line,) = ax.plot(
            [float(t) for t in curve.tokens],
            [float(v) for v in curve.values],
            linestyle="--" if curve.dashed else "-",
            linewidth=1.4 if curve.dashed else 2.0,
            marker=curve.marker,
            markersize=4,
            color=colour,
            label=curve.label,
        )
        colour = line.get_color()
    ax.set_xscale("log", base=base)
    ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    labelled = [c for c in curves if c.label]
    if labelled:
        ax.legend(fontsize=8 if len(labelled) > 4 else 9)
    return ax
