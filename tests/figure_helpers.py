"""What the tests of attention.figures share: reading a figure's texts and cells back.

Import it after ``matplotlib.use("Agg")``, as the test files do.
"""

import itertools

import torch
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from attention import INPUTS, LightningIndexer, scaled_dot_product_weights
from attention.figures import FACECOLOR, labelled_texts

X = INPUTS

#: Models whose layers differ in every way the strips draw.
STRIP_MODELS = [
    "gpt-oss-120b",
    "Gemma 3 27B",
    "Gemma 4 E2B",
    "Llama 4 Scout",
    "Qwen3-Next 80B-A3B",
    "Kimi Linear",
    "DeepSeek-V4-Flash",
    "Nemotron-H 47B",
    "DeepSeek-V3.2",
]


def labels(fig: Figure) -> list[str]:
    return [text.get_text() for text in fig.axes[0].texts]


def drawn(fig: Figure) -> None:
    """The figure renders, on an opaque white background (readable on dark pages)."""
    fig.canvas.draw()
    assert to_rgba(fig.get_facecolor()) == to_rgba(FACECOLOR)
    assert fig.patch.get_alpha() in (None, 1.0)


def by_gid(fig: Figure, prefix: str) -> list:
    ax = fig.axes[0]
    return [a for a in [*ax.patches, *ax.texts] if (a.get_gid() or "").startswith(prefix)]


def numbers(fig: Figure, prefix: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The numbers written in the cells with gids ``"<prefix> i j"`` (or ``"<prefix> j"``)."""
    texts = labelled_texts(fig)
    out = torch.empty(shape, dtype=torch.float64)
    for index in itertools.product(*map(range, shape)):
        out[index] = float(texts[" ".join([prefix, *map(str, index)])].replace("−", "-"))
    return out


def indexer_row():
    """The last token's index scores from a real LightningIndexer, and its picks' weights."""
    from attention.sparse import _chosen

    with torch.random.fork_rng():
        torch.manual_seed(123)
        indexer = LightningIndexer(3, 3, num_heads=3, head_dim=4, qk_rope_head_dim=2)
    with torch.no_grad():
        scores = indexer(X[None], X[None])[0]  # (6, 6), -inf above the diagonal
    allowed = _chosen(scores[None], 2)
    weights = scaled_dot_product_weights(X[None, None], X[None, None], allowed=allowed)
    return scores, weights[0, 0]
