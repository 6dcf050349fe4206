"""The figures' one look: the palette, the hatching, the drawing primitives and checks.

Every figure of :mod:`attention.figures` draws with what is here, so that a colour or a
hatch means the same thing on every page: the opaque white background (a figure reads
the same on the site's light and dark pages), the grey hatched cell of a position a
query may not see, one colour and one hatch per kind of layer, the pale blue of what a
cache keeps. Every distinction is made by shape or text as well as by colour.

* the palette: :data:`FACECOLOR`, :data:`MASKED_COLOR`, :data:`MASKED_HATCH`,
  :data:`LAYER_COLORS`, :data:`LAYER_HATCHES`, :data:`LAYER_LABELS`, ...;
* :func:`ink`, black or white text, whichever reads better on a colour;
* :func:`labelled_texts`, what a diagram wrote, by gid, to read or to test;
* the primitives every diagram draws with (a canvas in inches, text, boxes, arrows,
  cells), and the checks of the figures' arguments, through ``attention._checks``
  so that a wrong type raises a ``TypeError`` and a wrong value a ``ValueError``, as
  everywhere in the package. These are private to :mod:`attention.figures`.

>>> from attention.figures.style import LAYER_COLORS, ink
>>> LAYER_COLORS["sliding_attention"]
'#e69f00'
>>> from matplotlib import colormaps
>>> ink(colormaps["viridis"], 0.0), ink(colormaps["viridis"], 1.0)  # dark purple, yellow
('white', 'black')
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.text import Text

from attention import _checks
from attention.models import MODELS, ModelFacts

__all__ = [
    "CURRENT",
    "DONE",
    "FACECOLOR",
    "HEAD_COLORS",
    "HEAD_HATCHES",
    "INK",
    "LAYER_COLORS",
    "LAYER_HATCHES",
    "LAYER_LABELS",
    "MASKED_COLOR",
    "MASKED_HATCH",
    "MASKED_HATCH_COLOR",
    "MUTED",
    "PHONE_WIDTH_INCHES",
    "SEQUENCE_FILLS",
    "SHARED_FILL",
    "SIGNED_CMAP",
    "SMALLEST_TEXT_POINTS",
    "ink",
    "labelled_texts",
    "smallest_text_points",
]

# -- The palette -----------------------------------------------------------------------

#: Background of every figure, opaque so that the image reads on dark pages too.
FACECOLOR = "white"
#: Masked cells are a light neutral grey, a colour viridis and its kin never use...
MASKED_COLOR = "#e4e4e4"
#: ...crossed by darker hatching, so they differ from any weight in shape, not just colour.
MASKED_HATCH_COLOR = "#9a9a9a"
#: The hatching of a masked cell.
MASKED_HATCH = "///"

#: Dark text and lines.
INK = "#222222"

#: Grey, for what is secondary (stages ahead, notes, the axes' numbers).
MUTED = "#8a8a8a"

#: The stage a page is about, a dark fill with white text.
CURRENT = "#31688e"

#: Stages already covered, a pale tint of the same blue.
DONE = "#dbe7f1"

#: Fills for heads 1, 2, ...; heads after the first are also hatched, so they differ
#: in greyscale and for colour-blind readers too.
HEAD_COLORS = ("#a6cee3", "#fdbf6f", "#b2df8a", "#cab2d6")

#: The hatching of heads 1, 2, ...
HEAD_HATCHES = ("", "///", "...", "xx")

#: One colour per kind of layer, in ``transformers``' ``layer_types`` names, shared by
#: :func:`~attention.figures.layers.layer_strips`,
#: :func:`~attention.figures.basics.attention_anatomy` and the cost figures (Okabe and
#: Ito's palette, told apart by the common forms of colour blindness). Each kind is
#: hatched its own way as well (:data:`LAYER_HATCHES`), so it reads in greyscale too.
LAYER_COLORS = {
    "full_attention": "#0072b2",
    "sliding_attention": "#e69f00",
    "chunked_attention": "#cc79a7",
    "linear_attention": "#009e73",
    "indexed_attention": "#56b4e9",
    "cross_attention": "#d55e00",
    "compressed_sparse_attention": "#332288",
    "heavily_compressed_attention": "#882255",
    "mamba": "#b8860b",
    "hybrid": "#6b4e16",
    "conv": "#44aa99",
    "mlp": "#bbbbbb",
}

#: The hatching of each kind of layer (white lines on its colour).
LAYER_HATCHES = {
    "full_attention": "",
    "sliding_attention": "////",
    "chunked_attention": "\\\\\\\\",
    "linear_attention": "....",
    "indexed_attention": "xxx",
    "cross_attention": "ooo",
    "compressed_sparse_attention": "xxx",
    "heavily_compressed_attention": "+++",
    "mamba": "||||",
    "hybrid": "||||",
    "conv": "----",
    "mlp": "",
}

#: Short names of the kinds of layer, for legends.
LAYER_LABELS = {
    "full_attention": "full attention",
    "sliding_attention": "sliding window",
    "chunked_attention": "chunked",
    "linear_attention": "linear (delta rule)",
    "indexed_attention": "sparse (indexer's top-k)",
    "cross_attention": "cross-attention (to an image)",
    "compressed_sparse_attention": "compressed, sparse (CSA)",
    "heavily_compressed_attention": "heavily compressed (HCA)",
    "mamba": "Mamba (a state)",
    "hybrid": "attention beside Mamba",
    "conv": "short convolution",
    "mlp": "no mixer (MLP only)",
}

#: One pale fill per sequence, in :func:`~attention.figures.caches.paged_blocks` and the
#: packing and chunk diagrams (the sequence's id is written too).
SEQUENCE_FILLS = ("#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99")

#: A block that several sequences share, grey and hatched.
SHARED_FILL = "#dddddd"

#: The colormap of signed values (states, errors, scores), diverging from 0 in the middle.
SIGNED_CMAP = "RdBu_r"

# -- Readable on a phone -----------------------------------------------------------------

#: The smallest text a figure of the package draws, in points. The pages draw their
#: figures at 100 dots per inch, so at its own size a figure shows this as 8.3 CSS
#: pixels, just over the site's floor of 8 for a label on a phone.
SMALLEST_TEXT_POINTS = 6.0

#: The widest a figure's ``layout="stacked"`` variant is, in inches. At 100 dots per
#: inch, with the 0.1 inch margin a notebook adds on each side when it saves a figure,
#: that is 350 pixels: a phone's column (358 pixels at 390) shows it at its own size,
#: every label as large as drawn, without scrolling.
PHONE_WIDTH_INCHES = 3.3

#: The layouts of the figures that have two: panels side by side, or one under another.
LAYOUTS = ("wide", "stacked")


def ink(cmap: Colormap, fraction: float) -> str:
    """Black or white, whichever contrasts more with colour ``cmap(fraction)``.

    The numbers written in a heatmap's cells, or in a diagram's coloured cells, take
    this colour, so that they read on a dark cell and on a bright one alike.

    Parameters
    ----------
    cmap : matplotlib.colors.Colormap
    fraction : float
        Where on the colormap, from 0 to 1.

    Returns
    -------
    str
        ``"black"`` or ``"white"``.

    Examples
    --------
    >>> from matplotlib import colormaps
    >>> ink(colormaps["Greys"], 0.0), ink(colormaps["Greys"], 1.0)  # white, then black
    ('black', 'white')
    """
    rgb = np.asarray(cmap(fraction)[:3])
    # WCAG relative luminance: undo the sRGB gamma, then weight by the eye's sensitivity.
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = float(linear @ [0.2126, 0.7152, 0.0722])
    # Above 0.179 the contrast ratio with black, (L + 0.05) / 0.05, beats white's.
    return "black" if luminance > 0.179 else "white"


def labelled_texts(fig: Figure) -> dict[str, str]:
    """The texts a diagram labels with a gid, by gid: what it says, to read or test.

    Each diagram of :mod:`attention.figures` gives its telling labels a gid (its
    docstring names them), so that a page or a test can read what was drawn without
    looking at pixels.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        A diagram (the texts of its first axes are read).

    Returns
    -------
    dict of str to str

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> from attention.figures import decoder_block
    >>> fig = decoder_block("GPT-2")
    >>> labelled_texts(fig)["layers"]
    '× 12 layers'
    >>> plt.close(fig)
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"labelled_texts: expected a matplotlib Figure, got {type(fig).__name__}")
    if not fig.axes:
        raise ValueError("labelled_texts: expected a figure with axes, got one with none")
    return {gid: t.get_text() for t in fig.axes[0].texts if (gid := t.get_gid())}


# -- Checks of the figures' arguments, through attention._checks ---------------------


def _positive(owner: str, name: str, value: object, most: int) -> int:
    """``value`` as an int in ``[1, most]``, or a ValueError saying what was given."""
    number = _checks.whole_number(owner, value, f"{name} must be a positive integer")
    if not 1 <= number <= most:
        raise ValueError(
            f"{owner}: {name} must be between 1 and {most} for the drawing to stay "
            f"readable, got {number}"
        )
    return number


def _tensor_arg(owner: str, name: str, x: object, rank: int, most: int = 8) -> torch.Tensor:
    """``x`` as a float64 tensor of ``rank`` dimensions, each of 1 to ``most`` entries."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: expected {name} as a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        # A tensor of the wrong dtype is a wrong value, as _checks.float_tensor says.
        raise ValueError(f"{owner}: expected {name} of a floating dtype, got {x.dtype}")
    if x.dim() != rank or not all(1 <= n <= most for n in x.shape):
        raise ValueError(
            f"{owner}: expected {name} with {rank} dimension(s) of 1 to {most} entries "
            f"for the drawing to stay readable, got shape {tuple(x.shape)}"
        )
    return x.detach().to("cpu", torch.float64)


def _real_arg(owner: str, name: str, value: object, low: float, high: float) -> float:
    """``value`` as a float in ``[low, high]``: TypeError for a non-number."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()  # a tensor of one number, such as a learned sink logit
    value = _checks.real_number(owner, value, f"expected {name} as a number")
    if not low <= value <= high:
        raise ValueError(f"{owner}: expected {name} in [{low:g}, {high:g}], got {value:g}")
    return value


def _int_arg(owner: str, name: str, value: object, low: int, high: int) -> int:
    """``value`` as an int in ``[low, high]``: TypeError for a non-integer."""
    value = _checks.whole_number(owner, value, f"expected {name} as an int")
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


def _facts(owner: str, model: object) -> ModelFacts:
    """A ModelFacts, from itself or from its name in MODELS."""
    if isinstance(model, ModelFacts):
        return model
    if not isinstance(model, str):
        raise TypeError(
            f"{owner}: expected a model name or a ModelFacts, got {type(model).__name__}"
        )
    if model not in MODELS:
        raise ValueError(f"{owner}: expected a name in MODELS, got {model!r}")
    return MODELS[model]


def _models(owner: str, models: object) -> list[ModelFacts]:
    """One or several models (names or ModelFacts) as a non-empty list of ModelFacts."""
    if isinstance(models, str) or not isinstance(models, Sequence):
        models = [models]
    facts = [_facts(owner, m) for m in models]
    if not facts:
        raise ValueError(f"{owner}: expected at least one model, got none")
    return facts


def _all_models() -> list[ModelFacts]:
    return list(MODELS.values())


def _family(name: str) -> str:
    """A model's family, its name without the size: "Gemma 3 27B" -> "Gemma 3"."""
    return re.sub(r"[ -]E?\d+(\.\d+)?[Bb](-A\d+B)?$", "", name)


def _families(facts: Sequence) -> list[str]:
    """The families of ``facts``, each once, in order."""
    return list(dict.fromkeys(_family(m.name) for m in facts))


def smallest_text_points(fig: Figure) -> float:
    """The size of the smallest text ``fig`` shows, in points (labels, ticks, titles).

    With the figure's width in inches and the width it is shown at, this gives the
    size its smallest label takes on a screen: ``points / 72 * shown / inches`` pixels.

    Parameters
    ----------
    fig : matplotlib.figure.Figure

    Returns
    -------
    float
        ``inf`` for a figure without text.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.set_xticks([0, 1], ["a", "b"], fontsize=7)
    >>> smallest_text_points(fig)
    7.0
    >>> plt.close(fig)
    """
    if not isinstance(fig, Figure):
        raise TypeError(
            f"smallest_text_points: expected a matplotlib Figure, got {type(fig).__name__}"
        )
    fig.draw_without_rendering()  # the tick labels exist once the figure is laid out
    sizes = [
        float(text.get_fontsize())
        for text in fig.findobj(Text)
        if text.get_visible() and text.get_text().strip()
    ]
    return min(sizes, default=float("inf"))


def _layout(owner: str, layout: object) -> str:
    """``layout``, checked: ``"wide"`` (panels side by side) or ``"stacked"``."""
    if not isinstance(layout, str):
        raise TypeError(f"{owner}: layout must be a string, got {type(layout).__name__}")
    if layout not in LAYOUTS:
        raise ValueError(f"{owner}: layout must be 'wide' or 'stacked', got {layout!r}")
    return layout


# -- The drawing primitives: a canvas in inches, text, boxes, arrows, cells ------------


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
    **style: Any,
) -> Text:
    """``text`` at (x, y), in inches on a :func:`_canvas`: in ink, 9 points, centred on
    the point unless ``ha`` and ``va`` say otherwise; ``style`` goes to ``ax.text``
    (``fontweight=``, ``gid=``, ``rotation=``...)."""
    return ax.text(x, y, text, ha=ha, va=va, fontsize=size, color=color, **style)


def _rounded(
    ax: Axes, x: float, y: float, w: float, h: float, *, rounding: float = 0.08, **style: Any
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
    **patch: Any,
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
    style: dict[str, Any] = {"edgecolor": "white", "linewidth": 1} | cell
    if masked:
        style |= {"facecolor": MASKED_COLOR, "edgecolor": MASKED_HATCH_COLOR, "linewidth": 0}
        style |= {"hatch": MASKED_HATCH, "label": "masked"}
    ax.add_patch(Rectangle(xy, side, side, **style))


def _swatch(ax: Axes, xy: tuple[float, float], side: float, kind: str) -> None:
    """A square of a layer kind's colour and hatch, as the layer strips draw it."""
    colour, hatch = LAYER_COLORS[kind], LAYER_HATCHES[kind] or None
    ax.add_patch(Rectangle(xy, side, side, facecolor=colour, edgecolor=FACECOLOR, hatch=hatch))


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
            fill, on_fill = colours(fraction), ink(colours, fraction)
            text = fmt.format(value)
            _cell(
                ax,
                cx,
                cy,
                cell,
                cell,
                text,
                fill=fill,
                ink=on_fill,
                size=size,
                gid=name,
                text_gid=name,
            )


def _row_label(ax: Axes, x: float, y: float, text: str, size: float = 8.5, **kw) -> None:
    _text(ax, x, y, text, ha="right", size=size, **kw)
