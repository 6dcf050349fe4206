"""Tests of attention.figures.basics: Part I's diagrams and the map of a layer.

matplotlib, on the Agg backend.
"""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from figure_helpers import (  # noqa: E402
    STRIP_MODELS,
    by_gid,
    drawn,
    labels,
)
from helpers import jupyter_png  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from attention import (  # noqa: E402
    INPUTS,
    MODELS,
    MultiHeadAttention,
    SelfAttentionV1,
)
from attention.figures import (  # noqa: E402
    CURRENT,
    STAGES,
    attention_anatomy,
    decoder_block,
    head_split,
    labelled_texts,
    matrix_form,
    roadmap,
    scaled_dot_product_diagram,
)
from attention.models import (  # noqa: E402
    Chunked,
    Sliding,
    kv_cache_bytes_per_token,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.mark.parametrize("current", [None, 1, 2, 3, 4])
def test_roadmap_draws_every_stage_in_order(current):
    fig = roadmap(current=current)
    drawn(fig)
    names = [name for name, _ in STAGES]
    found = [text for text in labels(fig) if text in names]
    assert found == names  # left to right, as the texts were added


@pytest.mark.parametrize("current", [1, 2, 3, 4])
def test_roadmap_marks_the_current_stage_and_ticks_the_ones_before(current):
    fig = roadmap(current=current)
    texts = fig.axes[0].texts
    (here,) = [t for t in texts if t.get_text() == "you are here"]
    (box_label,) = [t for t in texts if t.get_text() == STAGES[current - 1][0]]
    # "you are here" stands above the current stage's box, in the box's column.
    assert here.get_position()[0] == pytest.approx(box_label.get_position()[0])
    assert box_label.get_color() == "white"  # white on the dark fill of the current stage
    filled = [p for p in fig.axes[0].patches if to_rgba(p.get_facecolor()) == to_rgba(CURRENT)]
    assert len(filled) == 1
    ticked = [t.get_text() for t in texts if t.get_text().startswith("✓")]
    assert ticked == [f"✓ {chapter}" for _, chapter in STAGES[: current - 1]]


def test_roadmap_without_a_stage_marks_none_and_shows_a_note():
    fig = roadmap(note="beyond the roadmap")
    assert "you are here" not in labels(fig)
    assert "beyond the roadmap" in labels(fig)


@pytest.mark.parametrize(
    ("bad", "error"),
    [(0, ValueError), (5, ValueError), (True, TypeError), (2.0, TypeError), ("2", TypeError)],
)
def test_roadmap_rejects_a_stage_that_is_not_one_to_four(bad, error):
    # A stage of the wrong type is a TypeError, a number out of range a ValueError.
    with pytest.raises(error, match=r"roadmap: current must be a stage from 1 to 4"):
        roadmap(current=bad)


def test_matrix_form_labels_the_shapes_the_modules_compute():
    # The shapes on the figure are the shapes SelfAttentionV1 really produces.
    torch.manual_seed(123)
    sa = SelfAttentionV1(d_in=3, d_out=2)
    queries = INPUTS @ sa.W_query
    scores = queries @ (INPUTS @ sa.W_key).T
    fig = matrix_form(num_tokens=6, d_in=3, d_out=2)
    drawn(fig)
    text = labels(fig)
    assert f"X  {tuple(INPUTS.shape)}" in text
    assert f"Q  {tuple(queries.shape)}" in text
    assert f"scores  {tuple(scores.shape)}" in text
    assert f"weights  {tuple(scores.shape)}" in text
    assert f"context  {tuple(sa(INPUTS).shape)}" in text
    assert sum("→ (6, 2)" in t for t in text) == 4  # three projections and weights @ V


def test_matrix_form_draws_each_matrix_cell_by_cell():
    fig = matrix_form(num_tokens=4, d_in=5, d_out=3)
    cells = [p for p in fig.axes[0].patches if type(p).__name__ == "Rectangle"]
    # X, Q, K, V, scores, weights, context, plus one outline per matrix
    assert len(cells) == 4 * 5 + 3 * 4 * 3 + 2 * 4 * 4 + 4 * 3 + 7
    assert "X  (4, 5)" in labels(fig)


def test_matrix_form_hatches_the_future_only_when_causal():
    def hatched(fig):
        return sum(p.get_hatch() == "///" for p in fig.axes[0].patches)

    assert hatched(matrix_form()) == 0
    assert hatched(matrix_form(causal=True)) == 6 * 5 // 2  # above the diagonal


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"num_tokens": 0}, r"num_tokens must be between 1 and 12 .* got 0", ValueError),
        ({"num_tokens": 13}, r"num_tokens must be between 1 and 12 .* got 13", ValueError),
        ({"d_in": 2.5}, r"d_in must be a positive integer, got 2.5 of type float", TypeError),
        ({"d_out": True}, r"d_out must be a positive integer, got the boolean True", TypeError),
    ],
)
def test_matrix_form_rejects_shapes_it_cannot_draw(kwargs, message, error):
    with pytest.raises(error, match=rf"matrix_form: {message}"):
        matrix_form(**kwargs)


def test_head_split_reports_the_strides_of_the_chapters_tensors():
    # MultiHeadAttention's own tensors, for one sequence, have these strides.
    torch.manual_seed(123)
    mha = MultiHeadAttention(3, 4, context_length=6, dropout=0.0, num_heads=2)
    with torch.no_grad():
        queries = mha.W_query(INPUTS)  # (6, 4)
    q_heads = queries.view(6, 2, 2).transpose(0, 1)
    titles = [t for t in labels(head_split()) if "strides" in t]
    assert len(titles) == 6
    assert f"strides {queries.stride()}" in titles[0]
    assert f"strides {q_heads.stride()}" in titles[2]
    assert titles[2].endswith("not contiguous")
    assert titles[3].endswith(", contiguous")  # the product is a new, head-major tensor
    assert titles[4].endswith("not contiguous")  # so view fails here...
    assert titles[5].endswith(", contiguous")  # ...and works after the copy


def test_head_split_memory_strip_follows_each_number():
    fig = head_split(num_tokens=3, num_heads=2, head_dim=1)
    drawn(fig)
    # Per row: 6 memory cells, each with a token number inside and a read order above.
    numbers = [t.get_text() for t in fig.axes[0].texts if t.get_text().isdigit()]
    assert len(numbers) == 6 * 2 * 6
    first_row_tokens = numbers[0:12:2]
    assert first_row_tokens == ["0", "0", "1", "1", "2", "2"]  # token by token
    context_tokens = numbers[36:48:2]
    assert context_tokens == ["0", "1", "2", "0", "1", "2"]  # head by head
    # Memory slot by slot, the order in which the transposed shapes read the numbers:
    # q_heads reads head 1 first, jumping over head 2's numbers...
    assert numbers[25:36:2] == ["0", "3", "1", "4", "2", "5"]
    # ...and context_t reads token by token from head-by-head memory.
    assert numbers[49:60:2] == ["0", "2", "4", "1", "3", "5"]
    # Every contiguous tensor reads its memory in order.
    for row in (0, 1, 3, 5):
        assert numbers[row * 12 + 1 : row * 12 + 12 : 2] == [str(i) for i in range(6)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_heads": 5}, r"num_heads must be between 1 and 4"),
        ({"head_dim": 0}, r"head_dim must be between 1 and 8 .* got 0"),
        ({"num_tokens": 12, "num_heads": 2, "head_dim": 4}, r"at most 48 numbers .* = 96"),
    ],
)
def test_head_split_rejects_what_it_cannot_draw(kwargs, message):
    with pytest.raises(ValueError, match=rf"head_split: .*{message}"):
        head_split(**kwargs)


def test_scaled_dot_product_diagram_has_the_papers_boxes_bottom_to_top():
    fig = scaled_dot_product_diagram(6, d_k=2)
    drawn(fig)
    texts = {}
    for text in fig.axes[0].texts:  # the first MatMul, the one at the bottom
        texts.setdefault(text.get_text(), text.get_position()[1])
    order = ["MatMul", "Scale", "Mask (opt.)", "SoftMax"]
    heights = [texts[name] for name in order]
    assert heights == sorted(heights)  # the chain runs upwards, as in the paper
    assert [t.get_text() for t in fig.axes[0].texts].count("MatMul") == 2
    assert "output (6, 2)" in texts
    assert "(6, 6)" in texts


def test_scaled_dot_product_diagram_marks_the_mask_optional_with_a_dashed_border():
    fig = scaled_dot_product_diagram()
    styles = [p.get_linestyle() for p in fig.axes[0].patches if hasattr(p, "get_boxstyle")]
    assert styles.count("--") == 1


def test_scaled_dot_product_diagram_without_shapes_and_with_other_sizes():
    assert "(6, 6)" not in labels(scaled_dot_product_diagram(None))
    text = labels(scaled_dot_product_diagram(1024, d_k=64, d_v=32))
    assert "(1024, 1024)" in text
    assert "output (1024, 32)" in text
    assert "(1024, 64)" in text


@pytest.mark.parametrize(
    ("bad", "error"), [(0, ValueError), (-1, ValueError), ("6", TypeError), (6.0, TypeError)]
)
def test_scaled_dot_product_diagram_rejects_a_bad_size(bad, error):
    with pytest.raises(error, match=r"scaled_dot_product_diagram: num_tokens must be"):
        scaled_dot_product_diagram(bad)


def families_in(text: str) -> set[str]:
    """The families a note lists after its label, however its lines were wrapped."""
    listed = " ".join(text.split()).split(": ", 1)[-1]
    return {name.strip() for name in listed.split(",")}


def uses(test) -> set[str]:
    """The families (names without their size) of the models that pass ``test``."""
    import re

    return {
        re.sub(r"[ -]E?\d+(\.\d+)?[Bb](-A\d+B)?$", "", m.name) for m in MODELS.values() if test(m)
    }


@pytest.mark.parametrize(
    ("gid", "test"),
    [
        ("note QK-norm: ", lambda m: m.parts and m.parts.qk_norm is not None),
        ("note softmax (+ sink): sink", lambda m: m.scores and m.scores.sinks),
        ("note output gate: ", lambda m: m.parts and m.parts.output_gate),
        ("note mask: sliding", lambda m: isinstance(m.local, Sliding)),
        ("note mask: chunked", lambda m: isinstance(m.local, Chunked)),
        ("note scale, softcap: softcap", lambda m: m.scores and m.scores.softcap is not None),
        ("note scores q · k: only the indexer's top-k keys", lambda m: m.indexer),
        ("note project Q, K, V: K, V from a latent (MLA)", lambda m: m.attention == "MLA"),
        (
            "note weights · V: values are the keys",
            lambda m: m.global_layers and m.global_layers.k_eq_v,
        ),
        (
            "note RoPE: scaled",
            lambda m: (
                (m.rope and m.rope.scaling is not None)
                or (m.compressed and m.compressed.rope_scaling is not None)
            ),
        ),
    ],
)
def test_anatomy_names_exactly_the_models_that_use_each_step(gid, test):
    fig = attention_anatomy()
    drawn(fig)
    (note,) = [t for t in fig.axes[0].texts if t.get_gid() == gid]
    assert families_in(note.get_text()) == uses(test)


def test_anatomy_steps_run_in_the_layers_order_and_mark_the_chapter():
    fig = attention_anatomy(current=16)
    steps = by_gid(fig, "step ")
    names = [t.get_gid()[5:] for t in steps]
    assert names == [
        "project Q, K, V", "QK-norm", "RoPE", "scores q · k", "scale, softcap", "mask",
        "softmax (+ sink)", "weights · V", "output gate", "output projection",
    ]  # fmt: skip
    heights = [t.get_position()[1] for t in steps]
    assert heights == sorted(heights, reverse=True)  # top to bottom
    filled = [t.get_gid()[5:] for t in steps if t.get_color() == "white"]
    assert filled == ["softmax (+ sink)", "output gate"]  # chapter 16's two steps


def test_anatomy_of_models_without_a_step_leaves_its_note_out():
    fig = attention_anatomy(["Llama 3 8B"])
    assert not [t for t in fig.axes[0].texts if (t.get_gid() or "").startswith("note")]
    with pytest.raises(TypeError, match=r"attention_anatomy: current must be a positive"):
        attention_anatomy(current="13")


@pytest.mark.parametrize("name", ["GPT-2", "Llama 3 8B", "DeepSeek-V3"])
def test_decoder_block_gives_the_models_layers_and_cache_per_layer(name):
    m = MODELS[name]
    fig = decoder_block(name)
    drawn(fig)
    texts = labelled_texts(fig)
    assert texts["layers"] == f"× {m.layers} layers"
    per_layer = kv_cache_bytes_per_token(m) // m.layers // 2  # 2 bytes per bfloat16 number
    assert f"{per_layer:,} numbers" in texts["cache"]


LAYER_DIAGRAMS = {
    "anatomy": lambda: attention_anatomy(),
    "anatomy, chapter 14": lambda: attention_anatomy(current=14),
    **{f"decoder block, {name}": lambda name=name: decoder_block(name) for name in STRIP_MODELS},
}


@pytest.mark.parametrize("name", LAYER_DIAGRAMS)
def test_the_layer_diagrams_are_wider_than_tall(name):
    """The site shows them as wide figures, 720 pixels wide on a phone (custom.css).
    Taller than wide, they were taller there than a phone's screen (844 pixels, less
    the page's sticky header), and could not be seen whole."""
    height, width, _ = jupyter_png(LAYER_DIAGRAMS[name]()).shape
    assert height / width <= 0.95
