"""Tests of attention.figures as a whole: every figure opaque, every name re-exported.

matplotlib, on the Agg backend.
"""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from figure_helpers import (  # noqa: E402
    STRIP_MODELS,
    X,
    indexer_row,
)
from helpers import jupyter_png  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

import attention.figures  # noqa: E402
from attention import PagedKVCache  # noqa: E402
from attention.figures import (  # noqa: E402  # noqa: E402
    FACECOLOR,
    SMALLEST_TEXT_POINTS,
    attention_anatomy,
    backward_blocks,
    basics,
    cache_against_context,
    caches,
    compressed,
    compressed_cache_growth,
    compression_pipeline,
    decoder_block,
    delta_chunks,
    delta_rule_step,
    dsa_pipeline,
    flash,
    gated_deltanet_diagram,
    head_split,
    heatmaps,
    kv_cache_growth,
    latent_flow,
    layer_strips,
    layers,
    matrix_form,
    merge_picture,
    packing_diagram,
    paged_blocks,
    pool_over_time,
    recurrent,
    ring_steps,
    roadmap,
    rotary_pairs,
    scaled_dot_product_diagram,
    scheduler_timeline,
    serving,
    sink_and_gate,
    smallest_text_points,
    style,
    tiled_scores,
)
from attention.serving import Admission, StepRecord  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _dsa():
    scores, weights = indexer_row()
    return dsa_pipeline(scores[5], 2, weights[5])


def _paged():
    cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1)
    cache.add(0)
    cache.update(0, torch.zeros(3, 1, 1), torch.zeros(3, 1, 1))
    return paged_blocks(cache).figure


#: Two steps of an engine: a prompt admitted with one block found cached, then a
#: decode token while a second request is preempted.
STEPS = [
    StepRecord(0, ((0, 4, "prefill"),), (Admission(0, 1, 1),), (), (), 2, 0, 2),
    StepRecord(1, ((0, 1, "decode"),), (), (1,), (0,), 0, 2, 2),
]

DRAWINGS = {
    "roadmap": lambda: roadmap(current=2),
    "scheduler_timeline": lambda: scheduler_timeline(STEPS),
    "pool_over_time": lambda: pool_over_time(STEPS, 4),
    "matrix_form": lambda: matrix_form(),
    "head_split": lambda: head_split(),
    "scaled_dot_product_diagram": lambda: scaled_dot_product_diagram(),
    "paged_blocks": _paged,
    "layer_strips": lambda: layer_strips(STRIP_MODELS),
    "attention_anatomy": lambda: attention_anatomy(current=15),
    "decoder_block": lambda: decoder_block("Llama 3 8B"),
    "latent_flow": lambda: latent_flow(),
    "gated_deltanet_diagram": lambda: gated_deltanet_diagram(),
    "packing_diagram": lambda: packing_diagram([0, 2, 5, 6]),
    "delta_rule_step": lambda: delta_rule_step(torch.eye(3), X[3], X[3]),
    "delta_chunks": lambda: delta_chunks(6, 4),
    "sink_and_gate": lambda: sink_and_gate(X[5] @ X.T, X, 1.0, torch.zeros(3)),
    "dsa_pipeline": _dsa,
    "kv_cache_growth": lambda: kv_cache_growth(3, 6),
    "rotary_pairs": lambda: rotary_pairs(),
    "backward_blocks": lambda: backward_blocks(12, 3).figure,
    "merge_picture": lambda: merge_picture(X[5] @ X.T, 3),
    "ring_steps": lambda: ring_steps(4, causal=True, zigzag=True),
    "tiled_scores": lambda: tiled_scores(X @ X.T, 2, highlight=4, layout="stacked"),
    "cache_against_context": lambda: cache_against_context(["gpt-oss-20b", "Llama 3.1 70B"]),
    "compression_pipeline": lambda: compression_pipeline(4, 12),
    "compressed_cache_growth": lambda: compressed_cache_growth(4, 4, 5, 10),
}


#: The modules of the schematic diagrams (the heatmaps' own tests check theirs).
DIAGRAM_MODULES = (basics, caches, layers, recurrent, flash, compressed, serving)


def test_every_drawing_function_is_checked_for_its_background():
    # They draw nothing: they read a figure, or compute what one shows.
    readers = {
        "kv_sources",
        "labelled_texts",
        "entry_sources",
        "running_max_and_sum",
        "smallest_text_points",
    }
    drawing = {
        name
        for module in (*DIAGRAM_MODULES, style)
        for name in module.__all__
        if callable(getattr(module, name)) and name not in readers
    }
    assert drawing - {"ink"} == set(DRAWINGS)  # ink picks a colour, it draws nothing


def test_the_room_re_exports_every_public_name_of_its_modules():
    """``from attention.figures import X`` works for every public X, once."""
    modules = (style, heatmaps, *DIAGRAM_MODULES)
    public = [name for module in modules for name in module.__all__]
    assert len(public) == len(set(public))  # no name in two modules
    assert sorted(attention.figures.__all__) == sorted(public)
    for module in modules:
        for name in module.__all__:
            assert getattr(attention.figures, name) is getattr(module, name)


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_saved_figures_are_opaque_to_their_edges(name):
    """On the site's dark theme a transparent pixel shows the dark page through: every
    pixel of the saved image, its margins included, is opaque, and its corners white."""
    image = jupyter_png(DRAWINGS[name]())
    assert image[..., 3].min() == 1.0
    for corner in (image[0, 0], image[0, -1], image[-1, 0], image[-1, -1]):
        assert tuple(corner) == to_rgba(FACECOLOR)


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_no_drawing_writes_under_the_sites_smallest_text(name):
    """The site's phone check counts on it: at its own size (100 dots per inch), a
    figure's smallest label is SMALLEST_TEXT_POINTS / 72 * 100 = 8.3 CSS pixels."""
    assert smallest_text_points(DRAWINGS[name]()) >= SMALLEST_TEXT_POINTS
