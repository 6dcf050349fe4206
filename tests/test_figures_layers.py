"""Tests of attention.figures.layers: layer strips, rotary pairs, sinks and gates, DSA.

matplotlib, on the Agg backend.
"""

import math

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # no display: render off-screen, before pyplot is imported

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from figure_helpers import (  # noqa: E402
    STRIP_MODELS,
    X,
    by_gid,
    drawn,
    indexer_row,
    numbers,
)
from matplotlib.colors import to_rgba  # noqa: E402

from attention import (  # noqa: E402
    MODELS,
    TOKENS,
    apply_rope,
    attend,
    rope_frequencies,
)
from attention.figures import (  # noqa: E402
    FACECOLOR,
    LAYER_COLORS,
    dsa_pipeline,
    kv_sources,
    labelled_texts,
    layer_strips,
    rotary_pairs,
    sink_and_gate,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


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


def test_every_kind_of_layer_has_a_colour_a_hatching_and_a_label():
    """So that any model the atlas reads can be drawn (a missing kind was a KeyError)."""
    from attention.figures.style import LAYER_HATCHES, LAYER_LABELS
    from attention.models import KINDS

    assert set(LAYER_COLORS) == set(LAYER_HATCHES) == set(LAYER_LABELS) == set(KINDS)
    assert len({to_rgba(colour) for colour in LAYER_COLORS.values()}) == len(KINDS)


@pytest.mark.parametrize("name", STRIP_MODELS)
def test_layer_strip_dots_exactly_the_layers_without_rope(name):
    m = MODELS[name]
    dots = {int(p.get_gid().split()[-1]) for p in by_gid(layer_strips(name), f"{name} nope ")}
    mix_otherwise = ("linear_attention", "mamba", "conv", "mlp")  # no positions to rotate
    attention_layers = {i for i, k in enumerate(m.layer_types) if k not in mix_otherwise}
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
    # A tensor of the wrong dtype is a wrong value, as everywhere in the package.
    with pytest.raises(ValueError, match=r"sink_and_gate: expected scores of a floating"):
        sink_and_gate(torch.zeros(3, dtype=torch.long), torch.zeros(3, 2), 0.0, torch.zeros(2))


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
    assert f"{m.indexer.num_heads} heads × {m.indexer.head_dim}" in texts["sizes 0"]
    assert f"top {m.indexer.top_k:,}" in texts["sizes 1"]
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
