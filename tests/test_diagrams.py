"""Tests of the schematic figures in attention.diagrams (matplotlib, Agg backend)."""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from attention import INPUTS, MultiHeadAttention, SelfAttentionV1  # noqa: E402
from attention.diagrams import (  # noqa: E402
    CURRENT,
    FACECOLOR,
    STAGES,
    head_split,
    matrix_form,
    roadmap,
    scaled_dot_product_diagram,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def labels(fig: Figure) -> list[str]:
    return [text.get_text() for text in fig.axes[0].texts]


def drawn(fig: Figure) -> None:
    """The figure renders, on an opaque white background (readable on dark pages)."""
    fig.canvas.draw()
    assert to_rgba(fig.get_facecolor()) == to_rgba(FACECOLOR)
    assert fig.patch.get_alpha() in (None, 1.0)


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


@pytest.mark.parametrize("bad", [0, 5, True, 2.0, "2"])
def test_roadmap_rejects_a_stage_that_is_not_one_to_four(bad):
    with pytest.raises(ValueError, match=r"roadmap: current must be a stage from 1 to 4"):
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


@pytest.mark.parametrize("draw", [roadmap, matrix_form, head_split, scaled_dot_product_diagram])
def test_a_title_goes_above_the_drawing_in_room_of_its_own(draw):
    plain = draw()
    titled = draw(title="A diagram\non two lines")
    assert titled.get_suptitle() == "A diagram\non two lines"
    width, height = plain.get_size_inches()
    assert titled.get_size_inches()[0] == pytest.approx(width)
    assert titled.get_size_inches()[1] > height  # the drawing keeps its size
    assert titled.axes[0].get_position().y1 < 1.0
    with pytest.raises(TypeError, match=rf"{draw.__name__}: title must be a string or None"):
        draw(title=3)


@pytest.mark.parametrize("draw", [roadmap, matrix_form, head_split, scaled_dot_product_diagram])
def test_a_long_title_is_wrapped_to_the_figure_and_never_cut_at_its_edges(draw):
    words = "Scaled dot-product attention, bottom to top: MatMul, Scale, Mask (opt.), "
    fig = draw(title=words * 3)
    fig.canvas.draw()
    title = fig._suptitle.get_window_extent()
    edges = fig.bbox
    assert edges.x0 <= title.x0 and title.x1 <= edges.x1
    assert title.y1 <= edges.y1
    assert fig.get_suptitle().replace("\n", " ") == (words * 3).strip()
    plt.close(fig)


# -- Parts II to V ---------------------------------------------------------------------

from attention import MODELS  # noqa: E402
from attention.diagrams import (  # noqa: E402
    LAYER_COLORS,
    attention_anatomy,
    decoder_block,
    gated_deltanet_diagram,
    kv_sources,
    labelled_texts,
    latent_flow,
    layer_strips,
    packing_diagram,
)

STRIP_MODELS = [
    "gpt-oss-120b",
    "Gemma 3 27B",
    "Gemma 4 E2B",
    "Llama 4 Scout",
    "Qwen3-Next 80B-A3B",
    "Kimi Linear",
    "DeepSeek-V3.2",
]


def by_gid(fig: Figure, prefix: str) -> list:
    ax = fig.axes[0]
    return [a for a in [*ax.patches, *ax.texts] if (a.get_gid() or "").startswith(prefix)]


@pytest.mark.parametrize("name", STRIP_MODELS)
def test_layer_strip_cells_are_the_models_layer_types_in_their_colours(name):
    fig = layer_strips(STRIP_MODELS)
    drawn(fig)
    m = MODELS[name]
    cells = by_gid(fig, f"{name} layer ")
    assert [c.get_gid() for c in cells] == [f"{name} layer {i}" for i in range(m.layers)]
    assert tuple(c.get_label() for c in cells) == m.layer_types
    lefts = [c.get_x() for c in cells]
    assert lefts == sorted(lefts)  # left to right, layer 0 first
    for cell, kind, shared in zip(cells, m.layer_types, m.kv_shared, strict=True):
        colour = cell.get_edgecolor() if shared else cell.get_facecolor()
        assert to_rgba(colour) == to_rgba(LAYER_COLORS[kind])
        assert (to_rgba(cell.get_facecolor()) == to_rgba(FACECOLOR)) == shared


@pytest.mark.parametrize("name", STRIP_MODELS)
def test_layer_strip_dots_exactly_the_layers_without_rope(name):
    m = MODELS[name]
    dots = {int(p.get_gid().split()[-1]) for p in by_gid(layer_strips(name), f"{name} nope ")}
    attention_layers = {i for i, k in enumerate(m.layer_types) if k != "linear_attention"}
    assert dots == {i for i in attention_layers if not m.uses_rope[i]}


def test_layer_strip_arrows_run_from_each_shared_layer_to_its_source():
    m = MODELS["Gemma 4 E2B"]
    arrows = by_gid(layer_strips("Gemma 4 E2B"), "Gemma 4 E2B reuse ")
    first_shared = m.layers - m.num_kv_shared_layers
    expected = set()
    for i in range(first_shared, m.layers):
        # The last earlier layer of the same kind that computes its own keys and values.
        source = max(j for j in range(first_shared) if m.layer_types[j] == m.layer_types[i])
        expected.add(f"Gemma 4 E2B reuse {i} <- {source}")
    assert {a.get_gid() for a in arrows} == expected
    assert len(arrows) == m.num_kv_shared_layers == 20
    assert kv_sources(m)[:first_shared] == (None,) * first_shared
    assert not by_gid(layer_strips("gpt-oss-120b"), "gpt-oss-120b reuse")


def test_layer_strips_reject_what_is_not_a_model():
    with pytest.raises(ValueError, match=r"layer_strips: expected a name in MODELS, got 'GPT-5'"):
        layer_strips("GPT-5")
    with pytest.raises(TypeError, match=r"layer_strips: expected a model name or a ModelFacts"):
        layer_strips([3])
    with pytest.raises(ValueError, match=r"layer_strips: expected at least one model"):
        layer_strips([])


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
        ("note QK-norm: ", lambda m: m.qk_norm is not None),
        ("note softmax (+ sink): sink", lambda m: m.sinks),
        ("note output gate: ", lambda m: m.output_gate),
        ("note mask: sliding", lambda m: m.sliding_window is not None),
        ("note mask: chunked", lambda m: m.attention_chunk_size is not None),
        ("note scale, softcap: softcap", lambda m: m.attn_logit_softcapping is not None),
        ("note scores q · k: only the indexer's top-k keys", lambda m: m.index_topk),
        ("note project Q, K, V: K, V from a latent (MLA)", lambda m: m.attention == "MLA"),
        ("note weights · V: values are the keys", lambda m: m.attention_k_eq_v),
        ("note RoPE: scaled", lambda m: m.rope_scaling is not None),
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
    per_layer = m.kv_bytes_per_token() // m.layers // 2  # 2 bytes per bfloat16 number
    assert f"{per_layer:,} numbers" in texts["cache"]


def test_labelled_texts_reads_the_texts_with_a_gid_of_the_first_axes():
    fig, (ax, other) = plt.subplots(1, 2)
    ax.text(0, 0, "kept", gid="a")
    ax.text(0, 0, "no gid")
    other.text(0, 0, "other axes", gid="b")
    assert labelled_texts(fig) == {"a": "kept"}


def test_labelled_texts_refuses_what_is_not_a_figure_with_axes():
    with pytest.raises(TypeError, match="expected a matplotlib Figure, got Axes"):
        labelled_texts(plt.subplots()[1])
    with pytest.raises(ValueError, match="expected a figure with axes, got one with none"):
        labelled_texts(plt.figure())


@pytest.mark.parametrize("absorbed", [False, True])
def test_latent_flow_caches_what_the_latent_cache_counts(absorbed):
    from attention import latent_cache_bytes_per_token

    m = MODELS["DeepSeek-V3"]
    fig = latent_flow(m, absorbed=absorbed)
    drawn(fig)
    texts = labelled_texts(fig)
    assert texts["latent"] == f"latent c\n{m.kv_lora_rank}"
    assert texts["rope key"] == f"rotated key\n{m.qk_rope_head_dim}, all heads"
    cached = latent_cache_bytes_per_token(1, m.kv_lora_rank, m.qk_rope_head_dim, torch.int8)
    if absorbed:
        assert "keys" not in texts and "values" not in texts
        assert f"{m.num_heads} heads\n× ({m.kv_lora_rank} latent" in texts["queries"]
    else:
        assert texts["keys"] == f"keys: {m.num_heads} heads × {m.qk_nope_head_dim}"
        assert texts["values"] == f"values: {m.num_heads} heads × {m.v_head_dim}"
        assert f"= {cached} numbers" in texts["note"]


def test_latent_flow_needs_a_model_with_latent_attention():
    with pytest.raises(ValueError, match=r"latent_flow: expected a model with latent"):
        latent_flow("Llama 3 8B")
    with pytest.raises(TypeError, match=r"latent_flow: absorbed must be True or False"):
        latent_flow(absorbed="yes")


def test_gated_deltanet_diagram_state_is_the_state_the_facts_count():
    m = MODELS["Qwen3-Next 80B-A3B"]
    fig = gated_deltanet_diagram(m)
    drawn(fig)
    texts = labelled_texts(fig)
    heads, dk, dv = m.linear_num_value_heads, m.linear_key_head_dim, m.linear_value_head_dim
    assert texts["state"] == f"state S: {heads} heads × {dk} × {dv}"
    # ModelFacts counts the same state in float32, beside the convolution's window.
    conv = (2 * m.linear_num_key_heads * dk + heads * dv) * m.linear_conv_kernel_dim * 2
    linear_layer = m.layer_types.index("linear_attention")
    assert m.layer_state_bytes()[linear_layer] == conv + 4 * heads * dk * dv
    assert f"{m.linear_conv_kernel_dim} taps" in texts["conv"]
    assert texts["qkv"].startswith(f"q, k: {m.linear_num_key_heads} heads × {dk}")
    with pytest.raises(ValueError, match=r"gated_deltanet_diagram: expected a model with"):
        gated_deltanet_diagram("Kimi Linear")  # Kimi Delta Attention is another layer


def test_packing_diagram_pads_and_packs_the_requests_cu_seqlens_describes():
    from attention import TOKENS, padding_mask, varlen_mask

    lengths = [2, 3, 1]
    cu_seqlens = [0, 2, 5, 6]
    fig = packing_diagram(torch.tensor(cu_seqlens), TOKENS)
    drawn(fig)
    patches = fig.axes[0].patches
    real = padding_mask(lengths, max(lengths))
    assert sum(p.get_gid() == "pad" for p in patches) == int((~real).sum())
    for i, n in enumerate(lengths):
        assert sum(p.get_gid() == f"padded {i}" for p in patches) == n
        assert sum(p.get_gid() == f"packed {i}" for p in patches) == n
    # The packed cells of a request are the keys varlen_mask lets its last token see.
    allowed = varlen_mask(cu_seqlens)  # (6, 6), causal inside each block
    packed = sorted((p.get_x(), p.get_gid()) for p in patches if "packed" in (p.get_gid() or ""))
    for i, end in enumerate(cu_seqlens[1:]):
        cells = [slot for slot, (_, gid) in enumerate(packed) if gid == f"packed {i}"]
        assert cells == allowed[end - 1].nonzero().flatten().tolist()
    labels = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "cu_seqlens"]
    assert labels == [str(b) for b in cu_seqlens]
    words = [t.get_text() for t in fig.axes[0].texts if t.get_text() in TOKENS]
    assert words == [*TOKENS, *TOKENS]  # padded row by row, then packed


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (([0, 2, 2],), ValueError, r"cu_seqlens must increase strictly"),
        (([0, 30],), ValueError, r"at most 24 tokens"),
        (([0, 2], ["a"]), ValueError, r"expected 2 labels"),
        (([0, 2], "ab"), TypeError, r"expected labels as a sequence of str"),
    ],
)
def test_packing_diagram_rejects_what_it_cannot_draw(args, error, message):
    with pytest.raises(error, match=rf"packing_diagram: .*{message}"):
        packing_diagram(*args)


# -- The delta rule, sinks and gates, DSA, the KV cache, rotary pairs ----------------
import itertools  # noqa: E402
import math  # noqa: E402

from attention import (  # noqa: E402
    TOKENS,
    KVCache,
    LightningIndexer,
    apply_rope,
    attend,
    gated_delta_rule,
    rope_frequencies,
    scaled_dot_product_weights,
)
from attention.diagrams import (  # noqa: E402
    delta_chunks,
    delta_rule_step,
    dsa_pipeline,
    kv_cache_growth,
    rotary_pairs,
    sink_and_gate,
)

X = INPUTS


def numbers(fig: Figure, prefix: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The numbers written in the cells with gids ``"<prefix> i j"`` (or ``"<prefix> j"``)."""
    texts = labelled_texts(fig)
    out = torch.empty(shape, dtype=torch.float64)
    for index in itertools.product(*map(range, shape)):
        out[index] = float(texts[" ".join([prefix, *map(str, index)])].replace("−", "-"))
    return out


def running_state(tokens: int, beta: float = 1.0) -> torch.Tensor:
    x = X.view(1, 6, 1, 3)[:, :tokens]
    _, state = gated_delta_rule(
        x, x, x, torch.zeros(1, tokens, 1), torch.full((1, tokens, 1), beta)
    )
    return state[0, 0]


@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_delta_rule_step_draws_the_state_gated_delta_rule_computes(beta):
    state, k, v = running_state(3), X[3], X[4]
    fig = delta_rule_step(state, k, v, beta)
    drawn(fig)
    x = lambda t: t.view(1, 1, 1, -1)  # noqa: E731
    _, after = gated_delta_rule(
        x(k),
        x(k),
        x(v),
        torch.zeros(1, 1, 1),
        torch.full((1, 1, 1), beta),
        initial_state=state[None, None],
    )
    assert torch.allclose(numbers(fig, "before", (3, 3)), state.double(), atol=0.006)
    assert torch.allclose(numbers(fig, "after", (3, 3)), after[0, 0].double(), atol=0.006)
    write = numbers(fig, "write", (3, 3))
    # The write is what turns the state before into the state after, and it is rank one:
    # the key's column times the error's row.
    assert torch.allclose(write, (after[0, 0] - state).double(), atol=0.011)
    unit = k / k.norm()
    error = numbers(fig, "error", (3,))
    assert torch.allclose(numbers(fig, "k", (3,)), unit.double(), atol=0.006)
    assert torch.allclose(error, beta * (v - state.T @ unit).double(), atol=0.006)
    assert torch.allclose(write, torch.outer(unit.double(), error), atol=0.011)
    read = numbers(fig, "read", (3,))
    assert torch.allclose(read, (after[0, 0].T @ unit).double(), atol=0.006)
    if beta == 1.0:  # the corrected state returns the value for the key
        assert torch.allclose(read, v.double(), atol=0.006)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((torch.zeros(3, 3), [1.0, 0, 0], torch.zeros(3)), TypeError, "k as a torch.Tensor"),
        ((torch.zeros(3, 3), torch.zeros(2), torch.zeros(3)), ValueError, "k of 3 and v of 3"),
        ((torch.zeros(7, 3), torch.zeros(7), torch.zeros(3)), ValueError, "1 to 6 entries"),
        ((torch.zeros(2, 2), torch.ones(2), torch.ones(2), 1.5), ValueError, r"beta in \[0, 1\]"),
        ((torch.zeros(2, 2), torch.ones(2), torch.ones(2), "1"), TypeError, "beta as a number"),
    ],
)
def test_delta_rule_step_rejects_what_it_cannot_draw(args, error, message):
    with pytest.raises(error, match=rf"delta_rule_step: expected .*{message}"):
        delta_rule_step(*args)


@pytest.mark.parametrize(("tokens", "chunk"), [(6, 4), (6, 2), (5, 5), (7, 3)])
def test_delta_chunks_cuts_where_the_chunked_form_cuts(tokens, chunk):
    fig = delta_chunks(tokens, chunk)
    drawn(fig)
    patches = fig.axes[0].patches
    starts = list(range(0, tokens, chunk))
    for c, start in enumerate(starts):
        members = [
            int(p.get_gid().split()[1])
            for p in patches
            if (p.get_gid() or "").startswith("token ") and p.get_label() == f"chunk {c}"
        ]
        assert members == list(range(start, min(start + chunk, tokens)))
        n = len(members)
        cells = {
            tuple(map(int, p.get_gid().split()[2:])): p.get_label() == "masked"
            for p in patches
            if (p.get_gid() or "").startswith(f"chunk {c} ")
        }
        tril = torch.ones(n, n, dtype=torch.bool).tril()
        assert cells == {(i, j): not bool(tril[i, j]) for i in range(n) for j in range(n)}
    states = [p for p in patches if (p.get_gid() or "").startswith("state ")]
    assert len(states) == len(starts) + 1
    # The state passed between chunks is all a chunk needs: running the chunks one by
    # one, each from the state the previous one left, gives the one-pass numbers.
    x = torch.randn(1, tokens, 1, 3)
    g, beta = -torch.rand(1, tokens, 1), torch.rand(1, tokens, 1)
    whole, _ = gated_delta_rule(x, x, x, g, beta, chunk_size=chunk)
    state, outs = None, []
    for start in starts:
        part = slice(start, start + chunk)
        out, state = gated_delta_rule(
            x[:, part], x[:, part], x[:, part], g[:, part], beta[:, part], initial_state=state
        )
        outs.append(out)
    assert torch.allclose(torch.cat(outs, dim=1), whole, atol=1e-5)
    steps = [t.get_text() for t in fig.axes[0].texts if t.get_gid() == "steps"]
    assert steps == [
        f"{tokens} tokens in chunks of {chunk}: {len(starts)} sequential steps instead of {tokens}"
    ]


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((6, 7), ValueError, "chunk_size from 1 to 6"),
        ((6.0, 2), TypeError, "num_tokens as an int"),
        ((17, 2), ValueError, "num_tokens from 1 to 16"),
        ((3, 2, ["a"]), ValueError, "3 labels"),
    ],
)
def test_delta_chunks_rejects_what_it_cannot_draw(args, error, message):
    with pytest.raises(error, match=rf"delta_chunks: expected {message}"):
        delta_chunks(*args)


@pytest.mark.parametrize("sink", [0.0, 1.5, -math.inf])
def test_sink_and_gate_draws_what_attend_computes_with_the_sink(sink):
    scores = X[5] @ X.T / math.sqrt(3)
    gate_logits = torch.tensor([2.0, -1.0, 0.0])
    fig = sink_and_gate(scores, X, sink, gate_logits, TOKENS)
    drawn(fig)
    # The same row, as attend computes it for a query whose scores these are.
    q = X[5].view(1, 1, 1, 3)
    v = torch.eye(6).view(1, 1, 6, 6)
    weights = attend(q, X.view(1, 1, 6, 3), v, sinks=torch.tensor([sink]))[0, 0, 0]
    output = attend(q, X.view(1, 1, 6, 3), X.view(1, 1, 6, 3), sinks=torch.tensor([sink]))
    assert torch.allclose(numbers(fig, "weights", (6,)), weights.double(), atol=0.006)
    texts = labelled_texts(fig)
    # The sink's weight is the softmax's last column over the scores and the sink.
    full = torch.softmax(torch.cat([scores, torch.tensor([sink])]), dim=0)
    assert float(texts["sink weight"]) == pytest.approx(float(full[-1]), abs=0.006)
    assert f"{float(weights.sum()):.2f} in all" in texts["sum"]
    o = output[0, 0, 0].double()
    assert torch.allclose(numbers(fig, "output", (3,)), o, atol=0.006)
    gate = torch.sigmoid(gate_logits).double()
    assert torch.allclose(numbers(fig, "gate", (3,)), gate, atol=0.006)
    assert torch.allclose(numbers(fig, "gated", (3,)), o * gate, atol=0.006)
    if sink == -math.inf:
        assert texts["sink weight"] == "0.00" and "1.00 in all" in texts["sum"]


def test_sink_and_gate_rejects_what_it_cannot_draw():
    with pytest.raises(ValueError, match=r"sink_and_gate: expected values of shape \(3, d_v"):
        sink_and_gate(torch.zeros(3), torch.zeros(2, 2), 0.0, torch.zeros(2))
    with pytest.raises(ValueError, match=r"sink_and_gate: expected gate_logits of 2"):
        sink_and_gate(torch.zeros(3), torch.zeros(3, 2), 0.0, torch.zeros(3))
    with pytest.raises(TypeError, match=r"sink_and_gate: expected sink as a number"):
        sink_and_gate(torch.zeros(3), torch.zeros(3, 2), "0", torch.zeros(2))
    with pytest.raises(TypeError, match=r"sink_and_gate: expected scores of a floating"):
        sink_and_gate(torch.zeros(3, dtype=torch.long), torch.zeros(3, 2), 0.0, torch.zeros(2))


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


@pytest.mark.parametrize("query", [2, 5])
def test_dsa_pipeline_picks_the_keys_topk_sparse_attention_reads(query):
    from attention import topk_sparse_attention

    scores, weights = indexer_row()
    fig = dsa_pipeline(scores[query], 2, weights[query], TOKENS)
    drawn(fig)
    m = MODELS["DeepSeek-V3.2"]
    picked = {
        int(p.get_gid().split()[1])
        for p in fig.axes[0].patches
        if (p.get_gid() or "").startswith("picked") and p.get_label() == "picked"
    }
    finite = scores[query].isfinite()
    assert picked == set(scores[query].masked_fill(~finite, -math.inf).topk(2).indices.tolist())
    # Those keys, and only those, change the output of topk_sparse_attention.
    qkv = X.view(1, 1, 6, 3)
    out = topk_sparse_attention(qkv, qkv, qkv, scores[None], top_k=2)[0, 0, query]
    chosen = X[sorted(picked)]
    by_hand = torch.softmax(chosen @ X[query] / math.sqrt(3), dim=-1) @ chosen
    assert torch.allclose(out, by_hand, atol=1e-6)
    texts = labelled_texts(fig)
    drawn_weights = {j for j in range(6) if f"weights {j}" in texts}
    assert drawn_weights == picked
    assert f"{m.index_n_heads} heads × {m.index_head_dim}" in texts["sizes 0"]
    assert f"top {m.index_topk:,}" in texts["sizes 1"]
    masked = [
        int(p.get_gid().split()[1])
        for p in fig.axes[0].patches
        if (p.get_gid() or "").startswith("scores") and p.get_label() == "masked"
    ]
    assert masked == [j for j in range(6) if not finite[j]]


def test_dsa_pipeline_refuses_weights_on_keys_it_did_not_pick():
    scores, weights = indexer_row()
    with pytest.raises(ValueError, match=r"dsa_pipeline: expected weights that are 0 off"):
        dsa_pipeline(scores[5], 1, weights[5])  # weights of top-2 against a top-1 pick
    with pytest.raises(ValueError, match=r"dsa_pipeline: expected a model with an indexer"):
        dsa_pipeline(scores[5], 2, weights[5], model="Llama 3 8B")
    with pytest.raises(TypeError, match=r"dsa_pipeline: expected top_k as an int"):
        dsa_pipeline(scores[5], 2.0, weights[5])


@pytest.mark.parametrize(("prefill", "tokens"), [(3, 6), (1, 4), (5, 5)])
def test_kv_cache_growth_rows_are_a_kv_caches_lengths(prefill, tokens):
    fig = kv_cache_growth(prefill, tokens, TOKENS[:tokens] if tokens <= 6 else None)
    drawn(fig)
    patches = fig.axes[0].patches
    cache = KVCache()
    steps = [prefill] + [1] * (tokens - prefill)
    for s, n in enumerate(steps):
        cache.update(torch.zeros(1, 1, n, 4), torch.zeros(1, 1, n, 4))
        row = [p for p in patches if p.get_gid() == f"cache {s}"]
        assert len(row) == len(cache)
        assert [p.get_label() for p in row] == ["cached"] * (len(cache) - n) + ["new"] * n
        assert sum(p.get_gid() == f"query {s}" for p in patches) == n
    with pytest.raises(ValueError, match=r"kv_cache_growth: expected prefill from 1 to 4"):
        kv_cache_growth(5, 4)
    with pytest.raises(TypeError, match=r"kv_cache_growth: expected num_tokens as an int"):
        kv_cache_growth(1, "4")


@pytest.mark.parametrize(("head_dim", "factor"), [(16, 0.25), (8, 0.5), (12, 1 / 3)])
def test_rotary_pairs_pair_the_features_rope_turns_together(head_dim, factor):
    fig = rotary_pairs(head_dim, factor)
    drawn(fig)
    rotary_dim = int(head_dim * factor)
    arcs = {
        p.get_gid(): p.get_label()
        for p in fig.axes[0].patches
        if p.get_label() in ("turns", "speed 0")
    }

    def moved(layout_kwargs):
        """For each feature, the features a turn by position 1 mixes it with."""
        basis = torch.eye(head_dim, dtype=torch.float64)
        turned = apply_rope(basis[:, None], positions=[1], **layout_kwargs)[:, 0]
        return {
            j: set(torch.nonzero(turned[j].abs() > 1e-12).flatten().tolist()) - {j}
            for j in range(head_dim)
        }

    proportional = {"rope_type": "proportional", "partial_rotary_factor": factor}
    for layout, mixes in (
        ("proportional", moved({"scaling": proportional})),
        ("partial", moved({"partial_rotary_factor": factor})),
    ):
        turning = {f"{layout} {j} {min(p)}" for j, p in mixes.items() if p and min(p) > j}
        assert {
            gid for gid, label in arcs.items() if gid.startswith(layout) and label == "turns"
        } == turning
    speeds, _ = rope_frequencies(head_dim, 1e4, proportional)
    assert sum(label == "speed 0" for label in arcs.values()) == int((speeds == 0).sum())
    still = [p for p in fig.axes[0].patches if (p.get_gid() or "").startswith("partial still")]
    assert len(still) == head_dim - rotary_dim


def test_rotary_pairs_rejects_what_it_cannot_draw():
    with pytest.raises(ValueError, match=r"rotary_pairs: expected an even head_dim"):
        rotary_pairs(16, 0.1)
    with pytest.raises(TypeError, match=r"rotary_pairs: expected head_dim as an int"):
        rotary_pairs(16.0)


# -- Parts V and VI: the paged pool, the backward pass, the merge, the ring --------------

from attention import PagedKVCache, merge_attention_states  # noqa: E402
from attention.diagrams import (  # noqa: E402
    backward_blocks,
    merge_picture,
    paged_blocks,
    ring_steps,
)
from attention.ring import ring_positions, ring_work  # noqa: E402


def test_paged_blocks_fill_the_slots_each_block_table_points_at():
    cache = PagedKVCache(num_blocks=8, block_size=2, num_kv_heads=1, head_dim=1)
    words = {0: list(TOKENS[:3]), 1: [*TOKENS[:3], "and", "then"], 2: ["one"]}
    cache.add(0)
    cache.update(0, torch.zeros(3, 1, 1), torch.zeros(3, 1, 1))
    cache.fork(0, 1)  # shares 0's blocks; its partly filled last block is copied on write
    cache.update(1, torch.zeros(2, 1, 1), torch.zeros(2, 1, 1))
    cache.add(2)
    cache.update(2, torch.zeros(1, 1, 1), torch.zeros(1, 1, 1))
    ax = paged_blocks(cache, words)
    drawn(ax.figure)
    # Token t of a sequence sits in slot t % block_size of block table[t // block_size].
    expected, readers = {}, {}
    for seq_id in cache.seq_ids:
        table = cache.block_table(seq_id)
        for block in table:
            readers.setdefault(block, []).append(seq_id)
        for t in range(cache.num_tokens(seq_id)):
            expected.setdefault(f"block {table[t // 2]} slot {t % 2}", words[seq_id][t])
    cells = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("block ")}
    assert len(cells) == cache.num_blocks * cache.block_size
    filled = {gid for gid, p in cells.items() if to_rgba(p.get_facecolor()) != to_rgba(FACECOLOR)}
    assert filled == set(expected)
    assert {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()} == expected
    shared = {b for b, seqs in readers.items() if len(seqs) > 1}
    assert shared  # the fork's first block
    hatched = {int(gid.split()[1]) for gid, p in cells.items() if p.get_hatch()}
    assert hatched == shared
    texts = [t.get_text() for t in ax.texts]
    for block in shared:
        assert "shared: " + ", ".join(map(str, readers[block])) in texts
    for seq_id in cache.seq_ids:
        assert f"seq {seq_id}: {cache.block_table(seq_id)}" in texts
    with pytest.raises(TypeError, match=r"paged_blocks: cache must be a PagedKVCache"):
        paged_blocks({0: [0, 1]})


@pytest.mark.parametrize(
    ("num_tokens", "block_size", "causal"), [(12, 3, True), (8, 2, False), (7, 3, True)]
)
def test_backward_blocks_skip_and_mask_the_blocks_the_backward_pass_does(
    num_tokens, block_size, causal
):
    ax = backward_blocks(num_tokens, block_size, causal=causal, key_block=1)
    drawn(ax.figure)
    cells = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("block ")}
    labels = {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}
    starts = range(0, num_tokens, block_size)
    assert len(cells) == len(starts) ** 2
    # The loops of tiled_attention_backward: key blocks outside, then the query blocks
    # from `first` on; the scores are masked where the block straddles the diagonal.
    for j, k_start in enumerate(starts):
        k_end = min(k_start + block_size, num_tokens)
        first = (k_start // block_size) * block_size if causal else 0
        for i, q_start in enumerate(starts):
            computed = q_start >= first
            masked = computed and causal and k_end > q_start + 1
            cell, label = cells[f"block {i} {j}"], labels[f"label {i} {j}"]
            assert (cell.get_hatch() is None) == computed
            assert (label == "skipped") == (not computed)
            assert (label == "masked") == masked
            current = computed and j == 1  # key_block, the outer loop's step
            assert (to_rgba(cell.get_facecolor()) == to_rgba(CURRENT)) == current
    with pytest.raises(ValueError, match=r"backward_blocks: expected at most 8 blocks"):
        backward_blocks(18, 2)
    with pytest.raises(ValueError, match=r"backward_blocks: expected key_block in \[0, 3\]"):
        backward_blocks(8, 2, key_block=4)


def test_merge_picture_bars_are_the_parts_softmaxes_and_their_merge():
    scores = torch.tensor([0.1, 0.5, -0.2, 0.9, 1.3, -1.0], dtype=torch.float64)
    split = 2
    fig = merge_picture(scores, split, TOKENS)
    drawn(fig)
    heights = [[p.get_height() for p in ax.patches] for ax in fig.axes]
    parts = (scores[:split], scores[split:])
    alone = [torch.softmax(part, dim=0) for part in parts]
    assert heights[0] == pytest.approx(alone[0].tolist())
    assert heights[1] == pytest.approx(alone[1].tolist())
    # With one-hot values a part's output is its weights: merged, the weights of all keys.
    eye = torch.eye(6, dtype=torch.float64)
    outs = [alone[0][None] @ eye[:split], alone[1][None] @ eye[split:]]
    lses = [part.logsumexp(dim=0)[None] for part in parts]
    merged, lse = merge_attention_states(outs, lses)
    assert heights[2][:6] == pytest.approx(merged[0].tolist())  # the scaled parts' bars
    assert heights[2][6:] == pytest.approx(torch.softmax(scores, dim=0).tolist())  # outlines
    assert fig.axes[2].get_title().endswith(f"lse = {lse.item():.4f}")
    assert fig.axes[0].get_title().endswith(f"lse = {lses[0].item():.4f}")
    assert [t.get_text() for t in fig.axes[2].get_xticklabels()] == list(TOKENS)


@pytest.mark.parametrize("zigzag", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_ring_steps_show_the_blocks_ring_work_counts(causal, zigzag):
    world = 4
    chunks = 2 * world if zigzag else world  # one token a chunk
    work = ring_work(chunks, world, causal=causal, zigzag=zigzag)
    held = ring_positions(chunks, world, zigzag=zigzag)
    fig = ring_steps(world, causal=causal, zigzag=zigzag)
    drawn(fig)
    assert [ax.get_title() for ax in fig.axes] == [f"step {s}" for s in range(world)]
    for step, ax in enumerate(fig.axes):
        for r in range(world):
            gid = f"step {step} P{r}"
            (box,) = [p for p in ax.patches if p.get_gid() == gid]
            (label,) = [t for t in ax.texts if t.get_gid() == gid]
            blocks = int(work[r, step])
            kv = ",".join(map(str, held[(r - step) % world].tolist()))
            assert label.get_text() == f"P{r}\nK,V {kv}\n{blocks} block{'s' * (blocks != 1)}"
            assert bool(box.get_hatch()) == (blocks == 0)


# -- Every figure: an opaque image, and the tall ones fit a phone's screen -------------


from helpers import jupyter_png  # noqa: E402

import attention.diagrams as diagrams_module  # noqa: E402


def _dsa():
    scores, weights = indexer_row()
    return dsa_pipeline(scores[5], 2, weights[5])


def _paged():
    cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1)
    cache.add(0)
    cache.update(0, torch.zeros(3, 1, 1), torch.zeros(3, 1, 1))
    return paged_blocks(cache).figure


DRAWINGS = {
    "roadmap": lambda: roadmap(current=2),
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
}


def test_every_drawing_function_is_checked_for_its_background():
    readers = {"kv_sources", "labelled_texts"}  # they draw nothing
    drawing = {
        name
        for name in diagrams_module.__all__
        if callable(getattr(diagrams_module, name)) and name not in readers
    }
    assert drawing == set(DRAWINGS)


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_saved_figures_are_opaque_to_their_edges(name):
    """On the site's dark theme a transparent pixel shows the dark page through: every
    pixel of the saved image, its margins included, is opaque, and its corners white."""
    image = jupyter_png(DRAWINGS[name]())
    assert image[..., 3].min() == 1.0
    for corner in (image[0, 0], image[0, -1], image[-1, 0], image[-1, -1]):
        assert tuple(corner) == to_rgba(FACECOLOR)


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
