"""The figures: heatmaps of attention weights and schematic diagrams (needs matplotlib).

A room of its own above the attention core and :mod:`attention.models`: it draws what
they compute, and neither of them imports it. Install the optional extra with
``pip install "attention-step-by-step[plot]"``; the rest of the package does not need
matplotlib. Every figure has an opaque white background and dark ink, so that it
reads the same on the site's light and dark pages, and every distinction is made by
shape or text as well as colour.

* :mod:`~attention.figures.style`: the palette (:data:`~attention.figures.style.FACECOLOR`,
  the masked cells' grey hatching, :data:`~attention.figures.style.LAYER_COLORS`, ...),
  :func:`~attention.figures.style.ink` and
  :func:`~attention.figures.style.labelled_texts`, and the primitives every figure
  draws with.
* :mod:`~attention.figures.heatmaps`: :func:`~attention.figures.heatmaps.heatmap`,
  :func:`~attention.figures.heatmaps.head_grid` and
  :func:`~attention.figures.heatmaps.memory_curves`, numbers as colours; most chapters.
* :mod:`~attention.figures.basics`: the roadmap, self-attention as matrix products,
  splitting heads, the paper's diagram, a decoder block, a layer's anatomy (Part I,
  chapters 8, 14 and 15).
* :mod:`~attention.figures.caches`: a KV cache growing, latent attention, a paged
  pool, packed requests (chapters 8, 13, 28 and 29).
* :mod:`~attention.figures.layers`: layer strips, rotary pairs, sinks and gates,
  sparse attention's picks (chapters 14, 16 to 19, and 22 to 27).
* :mod:`~attention.figures.compressed`: DeepSeek-V4's compressed entries and what its
  cache holds while decoding (chapter 25).
* :mod:`~attention.figures.recurrent`: the delta rule and Gated DeltaNet (chapters
  21 and 22).
* :mod:`~attention.figures.flash`: the online softmax's tiles, the backward pass's
  blocks, one merge, a ring (chapters 7, 33 and 34).
* :mod:`~attention.figures.serving`: the serving engine's steps and its pool over
  time (chapter 32).

Everything public is importable from here:

>>> import matplotlib.pyplot as plt
>>> from attention.figures import LAYER_COLORS, labelled_texts, layer_strips
>>> fig = layer_strips("gpt-oss-20b")
>>> cell = fig.axes[0].patches[0]
>>> cell.get_gid(), cell.get_label(), LAYER_COLORS[cell.get_label()]
('gpt-oss-20b layer 0', 'sliding_attention', '#e69f00')
>>> plt.close(fig)
"""

try:
    import matplotlib  # noqa: F401
except ModuleNotFoundError as error:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        'attention.figures needs matplotlib: pip install "attention-step-by-step[plot]"'
    ) from error

from attention.figures.basics import (
    STAGES,
    attention_anatomy,
    decoder_block,
    head_split,
    matrix_form,
    roadmap,
    scaled_dot_product_diagram,
)
from attention.figures.caches import (
    cache_against_context,
    kv_cache_growth,
    latent_flow,
    packing_diagram,
    paged_blocks,
)
from attention.figures.compressed import (
    compressed_cache_growth,
    compression_pipeline,
    entry_sources,
)
from attention.figures.flash import (
    backward_blocks,
    merge_picture,
    ring_steps,
    running_max_and_sum,
    tiled_scores,
)
from attention.figures.heatmaps import ANNOTATE_MAX, Curve, head_grid, heatmap, memory_curves
from attention.figures.layers import (
    dsa_pipeline,
    kv_sources,
    layer_strips,
    rotary_pairs,
    sink_and_gate,
)
from attention.figures.recurrent import delta_chunks, delta_rule_step, gated_deltanet_diagram
from attention.figures.serving import pool_over_time, scheduler_timeline
from attention.figures.style import (
    CURRENT,
    DONE,
    FACECOLOR,
    HEAD_COLORS,
    HEAD_HATCHES,
    INK,
    LAYER_COLORS,
    LAYER_HATCHES,
    LAYER_LABELS,
    MASKED_COLOR,
    MASKED_HATCH,
    MASKED_HATCH_COLOR,
    MUTED,
    PHONE_WIDTH_INCHES,
    SEQUENCE_FILLS,
    SHARED_FILL,
    SIGNED_CMAP,
    SMALLEST_TEXT_POINTS,
    ink,
    labelled_texts,
    smallest_text_points,
)

__all__ = [
    "ANNOTATE_MAX",
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
    "STAGES",
    "Curve",
    "attention_anatomy",
    "backward_blocks",
    "cache_against_context",
    "compressed_cache_growth",
    "compression_pipeline",
    "decoder_block",
    "delta_chunks",
    "delta_rule_step",
    "dsa_pipeline",
    "entry_sources",
    "gated_deltanet_diagram",
    "head_grid",
    "head_split",
    "heatmap",
    "ink",
    "kv_cache_growth",
    "kv_sources",
    "labelled_texts",
    "latent_flow",
    "layer_strips",
    "matrix_form",
    "memory_curves",
    "merge_picture",
    "packing_diagram",
    "paged_blocks",
    "pool_over_time",
    "ring_steps",
    "roadmap",
    "rotary_pairs",
    "running_max_and_sum",
    "scaled_dot_product_diagram",
    "scheduler_timeline",
    "sink_and_gate",
    "smallest_text_points",
    "tiled_scores",
]
