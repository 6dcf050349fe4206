"""``attention.models.recipes``: each model's layer, from ``layer_for``, against transformers' own.

Llama 2 and 3, Gemma and SmolLM3 (its NoPE layers too) against ``LlamaAttention``, and
Mistral against ``MistralAttention``; Part III's recipes against the class that runs
each model: QK-norm per head (Qwen3) and over the projection (OLMo 2), Gemma 2's cap
and scale, Gemma 3's QK-norm with a window, gpt-oss's sinks, Qwen3-Next's output gate
with QK-norm (whole heads rotating, and a quarter of each, as released), Gemma 4's
value norm and keys as values (its global layer as released, with proportional RoPE);
decoding with the rolling cache against Gemma 3's and gpt-oss's sliding layers and
Llama 4 Scout's chunked layer with its L2 QK-norm, each with transformers' own cache
and mask; the released recipes with their scaled RoPE (gpt-oss's YaRN, Gemma 4's
proportional RoPE, Qwen3-Next's partial rotary); Llama 4's NoPE layers with their
query temperature, Gemma 4's layers that reuse keys and values, DeepSeek-V3's MLA, OLMo
3's RoPE per layer type, and the structure of every layer of every model in ``MODELS``.

Tolerances (float64): ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12) with float64 cos and
sin (for scaled RoPE, transformers' formulas run in float64: ``tests/rope_reference.py``),
and transformers' float32 steps (its RMS norms, its eager softmax, Llama 4's complex
rotation) run in float64 within the test (``float64_norms``, ``float64_softmax``,
``rotate_float64``); ``hf_models.FLOAT32_STEP`` (1e-5) against the modules as shipped,
and for Llama 4's temperature, which transformers computes in float32 whatever the
model's dtype (exactly where it is 1).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import (
    BASE,
    F64,
    changed,
    decode_splits,
    gqa_layouts,
    layout_input,
    layout_sizes,
    make_gqa,
    make_layer,
    randomize_new_parameters,
    vectors,
)
from hf_models import (
    EXACT,
    FLOAT32_STEP,
    _common,
    causal_4d,
    copy_projections,
    deepseek_attention,
    deepseek_v4_attention,
    deepseek_v4_in_float64,
    deepseek_v4_step,
    float64_norms,
    float64_softmax,
    freqs_cis_float64,
    gemma2_attention,
    gemma3_attention,
    gemma4_attention,
    gpt_oss_attention,
    llama4_chunked_attention,
    llama4_decode,
    llama_attention,
    mistral_attention,
    olmo2_attention,
    per_head_norms,
    qwen3_attention,
    qwen3_next_attention,
    qwen3_next_query_gate,
    rope_cos_sin,
    rotate_float64,
)
from hypothesis import given
from hypothesis import strategies as st
from rope_reference import MODULE_SCALINGS, their_cos_sin, their_frequencies
from transformers import DynamicCache, Gemma3TextConfig, GptOssConfig, Llama4TextConfig
from transformers.masking_utils import create_sliding_window_causal_mask
from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention
from transformers.models.gemma4 import modeling_gemma4
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding
from transformers.models.gpt_oss import modeling_gpt_oss
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention
from transformers.models.llama4 import modeling_llama4
from transformers.models.qwen3_next import modeling_qwen3_next
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRotaryEmbedding

from attention import (
    MODELS,
    CompressedAttention,
    CompressedCache,
    CrossAttention,
    GatedDeltaNet,
    GroupedQueryAttention,
    KVCache,
    MultiHeadLatentAttention,
    NoPEWithTemperature,
    SharedKVAttention,
    SparseLatentAttention,
    layer_for,
    rope_frequencies,
)
from attention.models import BUILDERS, LinearAttention, ModelFacts, Sizes, from_transformers
from attention.models.facts import Mamba

pytestmark = pytest.mark.usefixtures("single_thread")

SMALL = Sizes(hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=8, max_position_embeddings=8)


def positions_cos_sin(x: torch.Tensor, head_dim: int, base: float = BASE):
    """cos and sin of positions 0, 1, ... of ``x`` at ``base`` (BASE unless given)."""
    return rope_cos_sin(torch.arange(x.shape[1]).expand(x.shape[0], -1), head_dim, base)


@pytest.mark.parametrize("model", ["Llama 2 7B", "Llama 3 8B", "Gemma 2B", "SmolLM3 3B"])
@given(layout=gqa_layouts(even_head_dim=True))
def test_llama_like_recipes_match_llama_attention(model, layout):
    """Their base, no bias (attention_bias as released), a group of query heads."""
    layout = layout | {"qkv_bias": False}
    gqa = make_layer(layout, model)
    x = layout_input(layout)
    theirs = llama_attention(gqa)
    cos_sin = positions_cos_sin(x, gqa.head_dim, MODELS[model].rope.theta)
    expected, _ = theirs(x, cos_sin, causal_4d(x.shape[1], x.shape[1]))
    torch.testing.assert_close(gqa(x), expected, **EXACT)


@given(layout=gqa_layouts(even_head_dim=True), window=st.integers(1, 4))
def test_mistral_recipe_matches_mistral_attention(layout, window):
    layout = layout | {"qkv_bias": False}
    gqa = make_layer(layout, "Mistral 7B", "sliding_attention", sliding_window=window)
    x = layout_input(layout)
    n = x.shape[1]
    allowed = causal_4d(n, n) & (torch.arange(n)[:, None] - torch.arange(n) < window)
    cos_sin = positions_cos_sin(x, gqa.head_dim, MODELS["Mistral 7B"].rope.theta)
    expected, _ = mistral_attention(gqa)(x, cos_sin, allowed)
    torch.testing.assert_close(gqa(x), expected, **EXACT)


@given(layout=gqa_layouts(even_head_dim=True))
def test_smollm3_nope_layer_has_no_rotation(layout):
    """SmolLM3's every fourth layer: LlamaAttention given cos 1 and sin 0."""
    layout = layout | {"qkv_bias": False}
    facts = MODELS["SmolLM3 3B"]
    assert facts.uses_rope[3] is False
    gqa = make_layer(layout, "SmolLM3 3B")  # the first full layer is layer 0, with RoPE
    nope = layer_for(facts, 3, sizes=layout_sizes(layout)).to(F64).eval()
    assert gqa.rotary is not None and nope.rotary is None
    nope.load_state_dict(gqa.state_dict())
    x = layout_input(layout)
    ones = torch.ones(*x.shape[:2], gqa.head_dim, dtype=F64)
    expected, _ = llama_attention(nope)(x, (ones, 0 * ones), causal_4d(x.shape[1], x.shape[1]))
    torch.testing.assert_close(nope(x), expected, **EXACT)


@pytest.mark.parametrize("floor_scale", [2, 8192], ids=["warming", "scout"])
@given(layout=gqa_layouts(even_head_dim=True))
def test_llama4_nope_layer_recipe_matches_llama4_text_attention(layout, floor_scale):
    """Scout's global NoPE layer: its queries scaled by the temperature, no QK-norm.

    The module's own layer comes from ``from_transformers``; it is the recipe's layer
    (the same kind, scales and weight shapes). With Scout's floor_scale of 8192 the
    factor is 1 on these few tokens, and the comparison is exact; with 2 it grows
    from the second token on, and transformers computes it in float32.
    """
    layout = layout | {"qkv_bias": False}
    scout = changed(MODELS["Llama 4 Scout"], temperature_tuning={"floor_scale": floor_scale})
    recipe = make_layer(layout, scout)
    assert isinstance(recipe, NoPEWithTemperature) and recipe.q_norm is None
    config = Llama4TextConfig(
        hidden_size=recipe.d_in,
        num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_kv_heads,
        head_dim=recipe.head_dim,
        num_hidden_layers=1,
        no_rope_layers=[0],  # 0: this layer is NoPE
        floor_scale=floor_scale,
        attn_scale=recipe.attn_scale,
        attn_temperature_tuning=True,
        use_qk_norm=True,  # on the RoPE layers only
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(layout["seed"])
        theirs = modeling_llama4.Llama4TextAttention(config, layer_idx=0).to(F64).eval()
    gqa = from_transformers(theirs)
    assert type(gqa) is type(recipe) and gqa.rotary is None and gqa.q_norm is None
    scales = ("attn_scale", "floor_scale", "scale")
    assert [getattr(gqa, a) for a in scales] == [getattr(recipe, a) for a in scales]
    shapes = {name: tensor.shape for name, tensor in gqa.state_dict().items()}
    assert shapes == {name: tensor.shape for name, tensor in recipe.state_dict().items()}
    x = layout_input(layout)
    expected, _ = theirs(x, None, causal_4d(x.shape[1], x.shape[1]))
    tolerance = EXACT if floor_scale > x.shape[1] else FLOAT32_STEP
    torch.testing.assert_close(gqa(x), expected, **tolerance)


def test_gemma4_shared_layers_attend_with_the_keys_and_values_of_their_source():
    """Gemma 4 E2B's last 20 layers reuse keys and values; a SharedKVAttention with a
    store layer's queries and keys and values gives that layer's output."""
    facts = MODELS["Gemma 4 E2B"]
    first_shared = facts.kv_shared.index(True)
    kind = facts.layer_types[first_shared]
    source = max(
        i for i in range(first_shared) if facts.layer_types[i] == kind
    )  # the last storing layer of that kind
    sizes = dataclasses.replace(SMALL, num_kv_heads=1, sliding_window=3)
    torch.manual_seed(0)
    store = layer_for(facts, source, sizes=sizes).to(F64).eval()
    shared = layer_for(facts, first_shared, sizes=sizes).to(F64).eval()
    assert isinstance(shared, SharedKVAttention) and isinstance(store, GroupedQueryAttention)
    assert shared.window == store.window and shared.rotary.base == store.rotary.base
    with torch.no_grad():
        for name in ("W_query", "out_proj"):
            getattr(shared, name).weight.copy_(getattr(store, name).weight)
        shared.q_norm.weight.copy_(store.q_norm.weight)
    x = torch.randn(1, 6, 32, dtype=F64)
    _, keys, values, _ = store._project(x, None)
    torch.testing.assert_close(shared(x, keys, values), store(x), **EXACT)


@given(seed=st.integers(0, 2**16))
def test_deepseek_v3_recipe_matches_deepseek_v3_attention(seed):
    sizes = Sizes(hidden_size=32, num_heads=4, q_lora_rank=12, kv_lora_rank=8)
    sizes = dataclasses.replace(sizes, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)
    sizes = dataclasses.replace(sizes, max_position_embeddings=8)
    unscaled = changed(MODELS["DeepSeek-V3"], rope={"scaling": None})
    torch.manual_seed(seed)
    mla = layer_for(unscaled, 0, sizes=sizes).to(F64).eval()
    assert type(mla) is MultiHeadLatentAttention and mla.rotary.base == 10000.0
    x = torch.randn(1, 6, 32, dtype=F64)
    positions = torch.arange(6)[None]
    cos_sin = rope_cos_sin(positions, 4, mla.rotary.base)
    theirs = float64_norms(deepseek_attention(mla))  # its RMS norms in float64
    expected, _ = theirs(x, cos_sin, causal_4d(6, 6))
    torch.testing.assert_close(mla(x), expected, **EXACT)


# --- Part III's recipes against their transformers classes, at RoPE's base BASE -----------


def at_base(model: str, **rope: object) -> ModelFacts:
    """``model``'s facts with RoPE's base ``BASE`` (and ``rope``'s other changes): the
    comparisons below give transformers' attention cos and sin of that base."""
    return changed(MODELS[model], rope={"theta": BASE, **rope})


def causal_window(n: int, window: int | None = None) -> torch.Tensor:
    """``(1, 1, n, n)``, True where query i may attend key j: j <= i, and i - j < window."""
    allowed = causal_4d(n, n)
    if window is not None:
        allowed = allowed & (torch.arange(n)[:, None] - torch.arange(n)[None, :] < window)
    return allowed


def additive_causal(n: int, window: int | None = None) -> torch.Tensor:
    """The eager kernels' mask: 0 where a query may attend, -inf elsewhere."""
    hidden = ~causal_window(n, window)
    return torch.zeros(1, 1, n, n, dtype=F64).masked_fill(hidden, float("-inf"))


# --- QK-norm: Qwen3 (per head) and OLMo 2 (over the projection) ---------------------------


@given(layout=gqa_layouts(even_head_dim=True))
def test_qwen3_recipe_matches_qwen3_attention(layout):
    gqa = randomize_new_parameters(make_layer(layout, at_base("Qwen3 8B")), layout["seed"])
    x = layout_input(layout)
    cos_sin, mask = positions_cos_sin(x, gqa.head_dim), causal_4d(x.shape[1], x.shape[1])
    exact = float64_norms(qwen3_attention(gqa), ("q_norm", "k_norm"))
    torch.testing.assert_close(gqa(x), exact(x, cos_sin, mask)[0], **EXACT)
    shipped = qwen3_attention(gqa)  # normalizes in float32
    torch.testing.assert_close(gqa(x), shipped(x, cos_sin, mask)[0], **FLOAT32_STEP)


@given(layout=gqa_layouts(even_head_dim=True))
def test_olmo2_recipe_matches_olmo2_attention(layout):
    gqa = make_layer(layout, at_base("OLMo 2 7B"))
    gqa = randomize_new_parameters(gqa, layout["seed"])
    assert gqa.q_norm.weight.shape == (gqa.d_out,)
    assert gqa.k_norm.weight.shape == (gqa.num_kv_heads * gqa.head_dim,)
    x = layout_input(layout)
    cos_sin, mask = positions_cos_sin(x, gqa.head_dim), causal_4d(x.shape[1], x.shape[1])
    exact = float64_norms(olmo2_attention(gqa), ("q_norm", "k_norm"))
    torch.testing.assert_close(gqa(x), exact(x, cos_sin, mask)[0], **EXACT)
    shipped = olmo2_attention(gqa)
    torch.testing.assert_close(gqa(x), shipped(x, cos_sin, mask)[0], **FLOAT32_STEP)


# --- softcap and scale: Gemma 2; QK-norm in place of the cap: Gemma 3 ---------------------


@given(
    layout=gqa_layouts(even_head_dim=True),
    query_pre_attn_scalar=st.sampled_from([1, 7, 168]),
    softcap=st.floats(0.05, 5.0),
    window=st.one_of(st.none(), st.integers(1, 4)),
)
def test_gemma2_recipe_matches_gemma2_attention(layout, query_pre_attn_scalar, softcap, window):
    """Global layers, and sliding ones (Gemma 2 alternates them); the cap and scale drawn."""
    kind = "full_attention" if window is None else "sliding_attention"
    scores = {"query_pre_attn_scalar": query_pre_attn_scalar, "softcap": softcap}
    gemma2 = changed(at_base("Gemma 2 9B"), scores=scores)
    gqa = make_layer(layout, gemma2, kind, sliding_window=window)
    theirs = gemma2_attention(gqa, query_pre_attn_scalar)
    x = layout_input(layout)
    cos_sin, mask = positions_cos_sin(x, gqa.head_dim), additive_causal(x.shape[1], window)
    with float64_softmax():
        out, weights = theirs(x, cos_sin, mask)
    torch.testing.assert_close(gqa(x), out, **EXACT)
    torch.testing.assert_close(gqa.attention_weights(x), weights, **EXACT)
    out, weights = theirs(x, cos_sin, mask)  # softmax in float32
    torch.testing.assert_close(gqa(x), out, **FLOAT32_STEP)
    torch.testing.assert_close(gqa.attention_weights(x), weights, **FLOAT32_STEP)


@given(
    layout=gqa_layouts(even_head_dim=True),
    query_pre_attn_scalar=st.sampled_from([1, 7, 168]),
    window=st.one_of(st.none(), st.integers(1, 4)),
)
def test_gemma3_recipe_matches_gemma3_attention(layout, query_pre_attn_scalar, window):
    """Gemma 3 replaced Gemma 2's cap with QK-norm (zero-centred weights: 1 + w).

    The global layer's linear RoPE scaling is left out here (transformers' attention
    takes the cos and sin it is given); tests/test_models_recipes.py runs it.
    """
    kind = "full_attention" if window is None else "sliding_attention"
    scores = {"query_pre_attn_scalar": query_pre_attn_scalar}
    gemma3 = changed(at_base("Gemma 3 27B", scaling=None), scores=scores)
    gqa = make_layer(layout, gemma3, kind, sliding_window=window)
    gqa = randomize_new_parameters(gqa, layout["seed"])
    x = layout_input(layout)
    mask = causal_window(x.shape[1], window)
    cos_sin = positions_cos_sin(x, gqa.head_dim)
    exact = float64_norms(gemma3_attention(gqa, query_pre_attn_scalar), ("q_norm", "k_norm"))
    torch.testing.assert_close(gqa(x), exact(x, cos_sin, mask)[0], **EXACT)
    shipped = gemma3_attention(gqa, query_pre_attn_scalar)
    torch.testing.assert_close(gqa(x), shipped(x, cos_sin, mask)[0], **FLOAT32_STEP)


# --- sinks: gpt-oss -----------------------------------------------------------------------


@given(layout=gqa_layouts(even_head_dim=True), window=st.one_of(st.none(), st.integers(1, 4)))
def test_gpt_oss_recipe_matches_gpt_oss_attention(layout, window):
    """Full-attention layers, and sliding ones (gpt-oss alternates them); plain RoPE."""
    kind = "full_attention" if window is None else "sliding_attention"
    gpt_oss = at_base("gpt-oss-20b", scaling=None)
    gqa = make_layer(layout, gpt_oss, kind, sliding_window=window)
    gqa = randomize_new_parameters(gqa, layout["seed"])
    theirs = gpt_oss_attention(gqa)
    x = layout_input(layout)
    cos, sin = positions_cos_sin(x, gqa.head_dim)
    half = gqa.head_dim // 2  # gpt-oss's rotary embedding gives each angle once
    out, weights = theirs(
        x, (cos[..., :half], sin[..., :half]), additive_causal(x.shape[1], window)
    )
    # gpt-oss's eager kernel keeps the logits' dtype: float64 throughout, no patch needed.
    torch.testing.assert_close(gqa(x), out, **EXACT)
    ours = gqa.attention_weights(x)
    torch.testing.assert_close(ours, weights, **EXACT)
    assert (ours.sum(-1) < 1).all()


# --- output gate with QK-norm: Qwen3-Next -------------------------------------------------


@given(layout=gqa_layouts(even_head_dim=True))
def test_qwen3_next_recipe_with_whole_heads_rotating_matches_qwen3_next_attention(layout):
    gqa = make_layer(layout, at_base("Qwen3-Next 80B-A3B", partial_rotary_factor=1.0))
    gqa = randomize_new_parameters(gqa, layout["seed"])
    x = layout_input(layout)
    cos_sin, mask = positions_cos_sin(x, gqa.head_dim), causal_4d(x.shape[1], x.shape[1])
    exact = float64_norms(qwen3_next_attention(gqa), ("q_norm", "k_norm"))
    torch.testing.assert_close(gqa(x), exact(x, cos_sin, mask)[0], **EXACT)
    shipped = qwen3_next_attention(gqa)  # 1 + weight, in float32
    torch.testing.assert_close(gqa(x), shipped(x, cos_sin, mask)[0], **FLOAT32_STEP)


@given(layout=gqa_layouts(even_head_dim=True), seed=st.integers(0, 2**16))
def test_qwen3_next_recipe_as_released_with_a_quarter_of_each_head_rotating(layout, seed):
    """QK-norm, the gate and partial_rotary_factor=0.25 together, as Qwen3-Next runs them."""
    layout = layout | {"head_dim": 8, "d_model": layout["num_heads"] * 8, "seed": seed}
    gqa = make_layer(layout, at_base("Qwen3-Next 80B-A3B"))
    assert gqa.rotary.partial_rotary_factor == 0.25
    gqa = randomize_new_parameters(gqa, seed)
    x = layout_input(layout)
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    cos_sin = rope_cos_sin(positions, 2, BASE)  # the rotary dimension: int(8 * 0.25) = 2
    mask = causal_4d(x.shape[1], x.shape[1])
    exact = float64_norms(qwen3_next_attention(gqa), ("q_norm", "k_norm"))
    torch.testing.assert_close(gqa(x), exact(x, cos_sin, mask)[0], **EXACT)
    shipped = qwen3_next_attention(gqa)
    cos_sin = Qwen3NextRotaryEmbedding(shipped.config)(x, positions)  # float32 angles
    torch.testing.assert_close(gqa(x), shipped(x, cos_sin, mask)[0], **FLOAT32_STEP)


def test_qwen3_next_query_and_gate_rows_alternate_per_head():
    """Head h's query rows, then head h's gate rows: what view + chunk(2) splits."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 2, "d_model": 4}
    layout |= {"context_length": 2, "num_tokens": 2, "batch": 1, "qkv_bias": True, "seed": 0}
    gqa = make_gqa(layout, parts=("W_gate",))
    weight, bias = qwen3_next_query_gate(gqa)
    q, g = gqa.W_query.weight, gqa.W_gate.weight
    torch.testing.assert_close(weight, torch.cat((q[:2], g[:2], q[2:], g[2:])), **EXACT)
    qb, gb = gqa.W_query.bias, gqa.W_gate.bias
    torch.testing.assert_close(bias, torch.cat((qb[:2], gb[:2], qb[2:], gb[2:])), **EXACT)


# --- value norm and keys as values: Gemma 4 -----------------------------------------------


@given(layout=gqa_layouts(even_head_dim=True), seed=st.integers(0, 2**16))
def test_gemma4_global_layer_recipe_as_released(layout, seed):
    """Keys as values, the value norm, QK-norm, scale 1 and proportional RoPE over a
    quarter of a head of 16, on Gemma 4's global layer with its default rope_parameters.

    EXACT takes float64 cos and sin from :func:`rope_frequencies` (checked against
    transformers' formula in float64 by tests/test_rope.py); as shipped, Gemma 4's
    own rotary embedding, in float32.
    """
    layout = layout | {"head_dim": 16, "d_model": layout["num_heads"] * 16, "seed": seed}
    scaling = {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    gqa = make_layer(layout, "Gemma 4 31B")
    assert gqa.rotary.scaling == scaling and gqa.rotary.base == 1e6 and gqa.W_value is None
    gqa = randomize_new_parameters(gqa, seed)
    x = layout_input(layout)
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    mask = causal_4d(x.shape[1], x.shape[1])
    inv_freq, factor = rope_frequencies(16, 1e6, scaling)
    angles = positions.to(F64)[..., None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    cos_sin = (angles.cos() * factor, angles.sin() * factor)
    exact = float64_norms(gemma4_attention(gqa, released_rope=True), ("q_norm", "k_norm", "v_norm"))
    full = exact.config.rope_parameters["full_attention"]
    assert full == {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}
    torch.testing.assert_close(gqa(x), exact(x, cos_sin, mask, shared_kv_states={})[0], **EXACT)
    shipped = gemma4_attention(gqa, released_rope=True)
    cos_sin = Gemma4TextRotaryEmbedding(shipped.config)(x, positions, "full_attention")
    out, _ = shipped(x, cos_sin, mask, shared_kv_states={})
    torch.testing.assert_close(gqa(x), out, **FLOAT32_STEP)


@pytest.mark.parametrize(
    ("model", "keys_as_values"),
    [("Gemma 4 31B", True), ("Gemma 4 E2B", False)],
    ids=["k_eq_v", "own_values"],
)
@given(layout=gqa_layouts(even_head_dim=True))
def test_gemma4_recipes_match_gemma4_text_attention(layout, model, keys_as_values):
    """The global layer of Gemma 4 31B (keys as values) and of E2B (its own values)."""
    gqa = make_layer(layout, at_base(model, scaling=None))
    gqa = randomize_new_parameters(gqa, layout["seed"])
    assert (gqa.W_value is None) == keys_as_values
    x = layout_input(layout)
    cos_sin, mask = positions_cos_sin(x, gqa.head_dim), causal_4d(x.shape[1], x.shape[1])
    exact = float64_norms(gemma4_attention(gqa), ("q_norm", "k_norm", "v_norm"))
    out, _ = exact(x, cos_sin, mask, shared_kv_states={})
    torch.testing.assert_close(gqa(x), out, **EXACT)
    shipped, _ = gemma4_attention(gqa)(x, cos_sin, mask, shared_kv_states={})
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


def test_keys_as_values_caches_keys_and_values_apart():
    """After k_norm and RoPE the keys differ from the values: the cache holds both."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 4, "d_model": 8}
    layout |= {"context_length": 6, "num_tokens": 6, "batch": 1, "qkv_bias": False, "seed": 2}
    gqa = make_layer(layout, at_base("Gemma 4 31B", scaling=None))
    x = layout_input(layout)
    cache = KVCache()
    steps = [gqa(x[:, :4], cache=cache), gqa(x[:, 4:5], cache=cache), gqa(x[:, 5:], cache=cache)]
    torch.testing.assert_close(torch.cat(steps, dim=1), gqa(x), **EXACT)
    assert cache.nbytes == 6 * gqa.cache_bytes_per_token == 6 * 2 * 4 * 8


# --- Gemma 3's and gpt-oss's sliding layers, Llama 4 Scout's chunked layer: decoding ------


def randomized(gqa: GroupedQueryAttention, seed: int) -> GroupedQueryAttention:
    """``gqa`` with its QK-norm weights and sinks drawn at random (they start at 1 and 0)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in (gqa.q_norm, gqa.k_norm, gqa.sinks):
            weight = getattr(parameter, "weight", parameter)
            if weight is not None:
                weight.copy_(torch.rand(weight.shape, generator=generator, dtype=F64) + 0.5)
    return gqa


def gemma3_sliding_attention(gqa: GroupedQueryAttention, query_pre_attn_scalar: int):
    """``Gemma3Attention`` on a sliding layer, holding ``gqa``'s weights.

    Gemma 3 stores its QK-norm weights zero-centred (applied as ``1 + w``): ours minus one.
    """
    assert per_head_norms(gqa) and gqa.scale == query_pre_attn_scalar**-0.5
    config = Gemma3TextConfig(
        **_common(gqa, "sdpa"),
        head_dim=gqa.head_dim,
        query_pre_attn_scalar=query_pre_attn_scalar,
        sliding_window=gqa.window,
        layer_types=["sliding_attention"],
        rms_norm_eps=gqa.q_norm.eps,
    )
    theirs = Gemma3Attention(config, layer_idx=0).to(F64).eval()
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight - 1.0)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight - 1.0)
    return theirs


def gpt_oss_sliding_attention(gqa: GroupedQueryAttention):
    """``GptOssAttention`` on a sliding layer (eager: the kernel with the sinks)."""
    config = GptOssConfig(
        **_common(gqa, "eager"),
        head_dim=gqa.head_dim,
        sliding_window=gqa.window,
        layer_types=["sliding_attention"],
    )
    theirs = GptOssAttention(config, layer_idx=0).to(F64).eval()
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.sinks.copy_(gqa.sinks)
    return theirs


def sliding_decode(gqa, theirs, x, splits, tolerance, cos_sin=None):
    """Decode with ours and theirs, each with its own cache and theirs with its own mask."""
    config = theirs.config
    ours, their_cache = KVCache(window=gqa.window), DynamicCache(config=config)
    assert type(their_cache.layers[0]).__name__ == "DynamicSlidingWindowLayer"
    for start, stop in splits:
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        new = x[:, start:stop]
        mask = create_sliding_window_causal_mask(config, new, None, their_cache, positions)
        cos, sin = rope_cos_sin(positions, gqa.head_dim, gqa.rotary.base)
        if cos_sin == "half":  # gpt-oss's rotary embedding gives each angle once
            cos, sin = cos[..., : gqa.head_dim // 2], sin[..., : gqa.head_dim // 2]
        expected, _ = theirs(new, (cos, sin), mask, their_cache)
        torch.testing.assert_close(gqa(new, cache=ours), expected, **tolerance)
        assert ours.seen_tokens == their_cache.get_seq_length() == stop
        assert len(ours) == min(stop, gqa.window - 1)
        assert ours.nbytes <= x.shape[0] * gqa.window * gqa.cache_bytes_per_token
    torch.testing.assert_close(ours.keys, their_cache.layers[0].keys, **tolerance)


@given(
    layout=gqa_layouts(max_tokens=2, even_head_dim=True),
    window=st.integers(2, 5),
    query_pre_attn_scalar=st.sampled_from([3, 168]),
    data=st.data(),
)
def test_rolling_decoding_matches_gemma3_sliding_layer(layout, window, query_pre_attn_scalar, data):
    """QK-norm (1 + w), query_pre_attn_scalar ** -0.5 and a window, decoding 3 x window
    tokens after a prefill with transformers' own sliding cache and mask. Gemma3RMSNorm
    computes in float32: swapped for a float64 norm of the same function here."""
    n = 3 * window + data.draw(st.integers(1, 3), label="prefill")
    layout |= {"num_tokens": n, "context_length": n}
    scores = {"query_pre_attn_scalar": query_pre_attn_scalar}  # the local base: 10000
    gemma3 = changed(MODELS["Gemma 3 27B"], scores=scores)
    gqa = make_layer(layout, gemma3, "sliding_attention", sliding_window=window)
    assert gqa.rotary.base == 10000.0
    gqa = randomized(gqa, layout["seed"])
    theirs = float64_norms(
        gemma3_sliding_attention(gqa, query_pre_attn_scalar), ("q_norm", "k_norm")
    )
    x = layout_input(layout)
    sliding_decode(gqa, theirs, x, decode_splits(n, n - 3 * window), EXACT)


def test_rolling_decoding_matches_gemma3_as_shipped():
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 8, "d_model": 32}
    layout |= {"num_tokens": 14, "context_length": 14, "batch": 2, "qkv_bias": False, "seed": 9}
    gqa = make_layer(layout, "Gemma 3 27B", "sliding_attention", sliding_window=4)  # 168
    gqa = randomized(gqa, 9)
    theirs = gemma3_sliding_attention(gqa, 168)  # its norms in float32
    sliding_decode(gqa, theirs, layout_input(layout), decode_splits(14, 2), FLOAT32_STEP)


@given(
    layout=gqa_layouts(max_tokens=2, even_head_dim=True),
    window=st.integers(2, 5),
    data=st.data(),
)
def test_rolling_decoding_matches_gpt_oss_sliding_layer(layout, window, data):
    """Sinks and a window (gpt-oss's 128 at toy size), decoding with its sliding cache.
    Its eager kernel keeps the logits' dtype: float64 throughout, no patch needed."""
    n = 3 * window + data.draw(st.integers(1, 3), label="prefill")
    layout |= {"num_tokens": n, "context_length": n}
    unscaled = changed(MODELS["gpt-oss-20b"], rope={"scaling": None})  # its base, 150000
    gqa = make_layer(layout, unscaled, "sliding_attention", sliding_window=window)
    gqa = randomized(gqa, 1)
    theirs = gpt_oss_sliding_attention(gqa)
    x = layout_input(layout)
    sliding_decode(gqa, theirs, x, decode_splits(n, n - 3 * window), EXACT, cos_sin="half")


@given(layout=gqa_layouts(max_tokens=2, even_head_dim=True), chunk=st.integers(2, 4))
def test_chunked_decoding_with_qk_norm_matches_llama4_scouts_chunked_layer(layout, chunk):
    """Scout's chunked layers apply an L2 norm (RMS, no weight) to q and k after RoPE;
    its recipe, an RMSNorm without a weight, before. A rotation keeps the RMS, so the
    order does not matter. Llama4TextL2Norm computes in float32: patched to float64.
    Scout's llama3 RoPE scaling is left out (tests/test_models_recipes.py runs it)."""
    n = 3 * chunk + 1
    layout |= {"num_tokens": n, "context_length": n}
    unscaled = changed(MODELS["Llama 4 Scout"], rope={"scaling": None})
    gqa = make_layer(layout, unscaled, "chunked_attention", attention_chunk_size=chunk)
    assert gqa.rotary.base == 500000.0 and gqa.q_norm.weight is None
    theirs = llama4_chunked_attention(gqa, use_qk_norm=True)
    assert isinstance(theirs.qk_norm, modeling_llama4.Llama4TextL2Norm)
    x = layout_input(layout)

    def rotary(new, positions):
        return freqs_cis_float64(positions, gqa.head_dim, 500000.0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(modeling_llama4, "apply_rotary_emb", rotate_float64)
        patch.setattr(modeling_llama4.Llama4TextL2Norm, "forward", lambda self, t: self._norm(t))
        llama4_decode(gqa, theirs, x, decode_splits(n, 1), rotary, EXACT)


# --- the released recipes with their scaled RoPE: gpt-oss, Gemma 4, Qwen3-Next ------------


def part3_ours(theirs: torch.nn.Module, seed: int, facts: ModelFacts) -> GroupedQueryAttention:
    """The package's layer for ``theirs`` (a float64 attention module of the model
    ``facts`` describes, built from a small config), from ``from_transformers``, after
    drawing ``theirs``' norm weights and sinks at random (they start at ones or zeros,
    which would hide a mix-up). It has the structure of the recipe of ``facts``'
    first full-attention layer at the same sizes: the same parts, weights of the same
    shapes, the same RoPE."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in theirs.named_parameters():
            if name in ("q_norm.weight", "k_norm.weight", "sinks"):
                parameter.copy_(torch.rand(parameter.shape, generator=generator, dtype=F64) - 0.5)
    ours = from_transformers(theirs)
    sizes = Sizes(
        hidden_size=ours.d_in,
        num_heads=ours.num_heads,
        num_kv_heads=ours.num_kv_heads,
        head_dim=ours.head_dim,
        max_position_embeddings=ours.context_length,
    )
    recipe = layer_for(facts, facts.layer_types.index("full_attention"), sizes=sizes)
    assert type(recipe) is type(ours)
    shapes = {name: tensor.shape for name, tensor in ours.state_dict().items()}
    assert shapes == {name: tensor.shape for name, tensor in recipe.state_dict().items()}
    rope = ("base", "partial_rotary_factor", "interleaved")
    assert [getattr(ours.rotary, a) for a in rope] == [getattr(recipe.rotary, a) for a in rope]
    return ours


def test_gpt_oss_attention_with_its_yarn_matches_in_float64():
    """gpt-oss's attention as released: yarn (factor 32, no truncation) and sinks.

    Over an original context of 8 positions here, so that 20 tokens reach past it.
    """
    yarn = {**MODULE_SCALINGS["yarn"]}
    gpt_oss = changed(MODELS["gpt-oss-120b"], rope={"scaling": yarn})  # its bias, as released
    config = modeling_gpt_oss.GptOssConfig(
        attention_bias=True,  # as released
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=256,
        rope_parameters={**yarn, "rope_theta": 150000.0},
        layer_types=["full_attention"],
        num_hidden_layers=1,
        attn_implementation="eager",  # the kernel with the sinks
    )
    theirs = modeling_gpt_oss.GptOssAttention(config, layer_idx=0).to(F64).eval()
    gqa = part3_ours(theirs, 6, gpt_oss)
    assert gqa.rotary.base == 150000.0 and gqa.sinks is not None
    assert gqa.rotary.scaling == gpt_oss.rope.scaling
    x = vectors(14, 2, 20, gqa.d_in)
    positions = torch.arange(20)[None]
    mask = torch.zeros(1, 1, 20, 20, dtype=F64).masked_fill(~causal_4d(20, 20), float("-inf"))
    inv_freq, factor = their_frequencies(config, float64=True)
    cos, sin = (t[..., : gqa.head_dim // 2] for t in their_cos_sin(inv_freq, factor, positions))
    # gpt-oss's eager kernel keeps the logits' dtype: float64 throughout
    expected, weights = theirs(x, (cos, sin), mask)
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    torch.testing.assert_close(gqa.attention_weights(x), weights, **EXACT)
    shipped, _ = theirs(x, modeling_gpt_oss.GptOssRotaryEmbedding(config)(x, positions), mask)
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


def test_gemma4_global_attention_with_proportional_rope_matches_in_float64():
    """A global layer of Gemma 4: its head rotates a quarter of its pairs."""
    proportional = {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    config = modeling_gemma4.Gemma4TextConfig(
        attention_bias=False,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,  # the sliding layer's, unused here
        global_head_dim=16,
        num_global_key_value_heads=2,
        attention_k_eq_v=True,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        attn_implementation="sdpa",
    )
    assert config.rope_parameters["full_attention"] == {**proportional, "rope_theta": 1e6}
    theirs = modeling_gemma4.Gemma4TextAttention(config, layer_idx=1).to(F64).eval()
    gqa = part3_ours(theirs, 7, MODELS["Gemma 4 31B"])
    assert gqa.rotary.scaling == proportional and gqa.rotary.base == 1e6 and gqa.scale == 1.0
    assert theirs.head_dim == gqa.head_dim and theirs.v_proj is None and gqa.W_value is None
    x = vectors(15, 2, 9, gqa.d_in)
    positions = torch.arange(9)[None]
    layer = config.per_layer_config["full_attention"]
    inv_freq, factor = their_frequencies(layer, float64=True, layer_type="full_attention")
    cos_sin = their_cos_sin(inv_freq, factor, positions)
    rotary = modeling_gemma4.Gemma4TextRotaryEmbedding(config)
    shipped_cos_sin = rotary(x, positions, "full_attention")
    shipped, _ = theirs(x, shipped_cos_sin, causal_4d(9, 9), shared_kv_states={})
    exact = float64_norms(theirs, ("q_norm", "k_norm", "v_norm"))  # swaps them in place
    expected, _ = exact(x, cos_sin, causal_4d(9, 9), shared_kv_states={})
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


def test_qwen3_next_attention_with_partial_rotary_matches_in_float64():
    """Qwen3-Next's attention as released: a quarter of each head rotates, QK-norm
    (zero-centred: ours is 1 plus its weight) and the output gate."""
    config = modeling_qwen3_next.Qwen3NextConfig(
        attention_bias=False,
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        partial_rotary_factor=0.25,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7},
        layer_types=["full_attention"],
        num_hidden_layers=1,
        attn_implementation="sdpa",
    )
    assert config.rope_parameters["partial_rotary_factor"] == 0.25
    theirs = modeling_qwen3_next.Qwen3NextAttention(config, layer_idx=0).to(F64).eval()
    gqa = part3_ours(theirs, 8, MODELS["Qwen3-Next 80B-A3B"])
    assert gqa.rotary.base == 1e7 and gqa.rotary.partial_rotary_factor == 0.25
    torch.testing.assert_close(gqa.q_norm.weight, 1.0 + theirs.q_norm.weight, **EXACT)
    x = vectors(16, 2, 9, gqa.d_in)
    positions = torch.arange(9)[None]
    inv_freq, factor = their_frequencies(config, float64=True)
    assert len(inv_freq) == 2  # a rotary dim of 4 in a head of 16
    cos_sin = their_cos_sin(inv_freq, factor, positions)
    shipped_cos_sin = modeling_qwen3_next.Qwen3NextRotaryEmbedding(config)(x, positions)
    shipped, _ = theirs(x, shipped_cos_sin, causal_4d(9, 9))
    exact = float64_norms(theirs, ("q_norm", "k_norm"))
    expected, _ = exact(x, cos_sin, causal_4d(9, 9))
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


# --- every layer of every model --------------------------------------------------------


def small_sizes(facts) -> Sizes:
    if facts.compressed is not None:  # DeepSeek-V4: its latent, groups and indexer too
        return Sizes(
            hidden_size=16, num_heads=4, head_dim=8, q_lora_rank=6, qk_rope_head_dim=4,
            o_groups=2, o_lora_rank=4, index_n_heads=2, index_head_dim=8, index_topk=2,
            max_position_embeddings=64,
        )  # fmt: skip
    if facts.latent is not None:
        return Sizes(hidden_size=32, num_heads=2, kv_lora_rank=8, max_position_embeddings=8)
    if isinstance(facts.local, LinearAttention) and facts.local.mixer != "Gated DeltaNet":
        return Sizes()
    return SMALL


BUILT = [  # an encoder's layers are not causal: no recipe (chapter 35 builds them)
    name
    for name, facts in MODELS.items()
    if facts.positions == "rope"
    and not facts.bidirectional
    and facts.value_head_dim is None  # nor MiMo-V2-Flash's values, narrower than its keys
]


def test_olmo3_scales_its_rope_on_the_full_layers_only():
    """OLMo 3 as released: YaRN on the full layers, the same base unscaled on the
    sliding ones, as ``Olmo3RotaryEmbedding`` computes them per layer type."""
    from transformers import AutoConfig
    from transformers.models.olmo3.modeling_olmo3 import (
        Olmo3RotaryEmbedding,
        apply_rotary_pos_emb,
    )

    from attention.models import released_config

    fields = {k: v for k, v in released_config("OLMo 3 7B").items() if k != "model_type"}
    config = AutoConfig.for_model("olmo3", **fields)
    theirs = Olmo3RotaryEmbedding(config)
    facts = MODELS["OLMo 3 7B"]
    x = torch.randn(1, 2, 40, facts.head_dim, dtype=F64)  # (batch, heads, tokens, dim)
    # cos and sin in float32, as transformers computes them: positions kept small
    step = 50
    positions = torch.arange(40)[None] * step
    for kind, scaled in (("sliding_attention", False), ("full_attention", True)):
        index = facts.layer_types.index(kind)
        layer = layer_for(facts, index, sizes=Sizes(hidden_size=16, num_heads=2, num_kv_heads=2))
        assert (layer.rotary.scaling is not None) is scaled
        cos, sin = theirs(x, positions, layer_type=kind)
        expected, _ = apply_rotary_pos_emb(x, x, cos.to(F64), sin.to(F64))
        ours = torch.cat([layer.rotary(x[..., i : i + 1, :], start=step * i) for i in range(40)], 2)
        # YaRN scales every entry by 1.2 (attention_factor): far above the tolerance
        torch.testing.assert_close(ours, expected, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("index", [0, 2, 3], ids=["sliding", "CSA", "HCA"])
def test_deepseek_v4_flash_recipe_matches_deepseek_v4_attention(index):
    """DeepSeek-V4-Flash's layers, at small sizes, against ``DeepseekV4Attention`` built
    from its released config.json with the same sizes: the recipe reads the facts as
    ``DeepseekV4Config`` reads the file (its RoPE per layer kind, YaRN on the compressed
    layers, QK-norm, sinks). float64, a full pass, then a prefill and steps past a
    compression boundary (rate 4 and 128 as released: 130 tokens), EXACT."""
    from transformers import DeepseekV4Config, DynamicCache
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4RotaryEmbedding

    from attention.models import released_config

    facts = MODELS["DeepSeek-V4-Flash"]
    sizes = small_sizes(facts)
    sizes = dataclasses.replace(sizes, max_position_embeddings=None)
    torch.manual_seed(index)
    ours = layer_for(facts, index, sizes=sizes).to(F64).eval()
    with torch.no_grad():
        for name, parameter in ours.named_parameters():
            if "norm" in name or name.endswith(("position_bias", "sinks")):
                parameter.add_(0.3 * torch.randn_like(parameter))
    fields = dict(released_config("DeepSeek-V4-Flash"))
    fields.pop("model_type", None)
    fields |= {
        "hidden_size": 16, "num_attention_heads": 4, "head_dim": 8, "q_lora_rank": 6,
        "qk_rope_head_dim": 4, "o_groups": 2, "o_lora_rank": 4, "index_n_heads": 2,
        "index_head_dim": 8, "index_topk": 2, "vocab_size": 32, "n_routed_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 8, "quantization_config": None,
        "attn_implementation": "eager",
    }  # fmt: skip
    x = vectors(index, 1, 131, 16)
    with deepseek_v4_in_float64():
        config = DeepseekV4Config(**fields)
        theirs = deepseek_v4_attention(ours, config, index)
        rotary = DeepseekV4RotaryEmbedding(config)
        expected = deepseek_v4_step(theirs, config, rotary, x, 0, None)
        torch.testing.assert_close(ours(x), expected, **EXACT)
        cache, their_cache = (
            CompressedCache(window=facts.sliding_window),
            DynamicCache(config=config),
        )
        for start, stop in ((0, 126), (126, 127), (127, 128), (128, 131)):
            chunk = x[:, start:stop]
            expected = deepseek_v4_step(theirs, config, rotary, chunk, start, their_cache)
            torch.testing.assert_close(ours(chunk, cache=cache), expected, **EXACT)


def test_an_encoder_has_no_causal_recipe():
    with pytest.raises(ValueError, match=r"^layer_for: no recipe for 'ModernBERT base': an enc"):
        layer_for(MODELS["ModernBERT base"], 0)


@pytest.mark.parametrize("name", BUILT)
def test_every_layer_of_every_model_has_its_kind(name):
    facts = MODELS[name]
    for i, kind in enumerate(facts.layer_types):
        layer = layer_for(facts, i, sizes=small_sizes(facts))
        if kind == "linear_attention":
            assert isinstance(layer, GatedDeltaNet)
            continue
        if kind == "cross_attention":  # Llama 3.2 Vision: queries from x, keys from an image
            assert isinstance(layer, CrossAttention) and layer.q_norm is not None
            x, image = torch.randn(1, 3, layer.d_in), torch.randn(1, 5, layer.d_context)
            assert layer(x, image).shape == (1, 3, layer.d_out)
            continue
        if facts.compressed is not None:  # DeepSeek-V4: sliding, CSA and HCA alike
            assert isinstance(layer, CompressedAttention) and layer.kind == kind
            assert layer.window == facts.sliding_window
            rates = {
                "compressed_sparse_attention": facts.compressed.csa_rate,
                "heavily_compressed_attention": facts.compressed.hca_rate,
            }
            assert layer.compress_rate == rates.get(kind)
            assert (layer.indexer is not None) == (kind == "compressed_sparse_attention")
            x = torch.randn(1, 9, layer.d_in)
            assert layer(x).shape == (1, 9, layer.d_out)
            continue
        if facts.latent is not None:
            sparse = kind == "indexed_attention"
            assert isinstance(layer, SparseLatentAttention) == sparse
            continue
        if facts.kv_shared[i]:
            assert isinstance(layer, SharedKVAttention)
            continue
        local, scores, parts = facts.local, facts.scores, facts.parts
        kept = local.tokens_kept if local is not None and kind == local.kind else None
        assert layer.window == (kept if kind == "sliding_attention" else None)
        assert layer.chunk == (kept if kind == "chunked_attention" else None)
        assert (layer.rotary is not None) == facts.uses_rope[i]
        assert (layer.sinks is not None) == bool(scores and scores.sinks)
        assert (layer.W_gate is not None) == bool(parts and parts.output_gate)
        assert (layer.v_norm is not None) == bool(parts and parts.value_norm)
        qk_norm = parts.qk_norm if parts is not None else None
        has_qk_norm = qk_norm is not None and (qk_norm != "l2" or facts.uses_rope[i])
        assert (layer.q_norm is not None) == (layer.k_norm is not None) == has_qk_norm
        k_eq_v = facts.global_layers is not None and facts.global_layers.k_eq_v
        assert (layer.W_value is None) == (k_eq_v and kind == "full_attention")
        x = torch.randn(1, 3, layer.d_in)
        assert layer(x).shape == (1, 3, layer.d_out)


@pytest.mark.parametrize("name", BUILT)
def test_every_built_model_has_its_familys_builder(name):
    """layer_for dispatches on the config class: each model's layers are its builder's."""
    facts = MODELS[name]
    builder = BUILDERS[facts.config_class]
    for i in sorted({facts.layer_types.index(kind) for kind in set(facts.layer_types)}):
        torch.manual_seed(0)
        ours = layer_for(facts, i, sizes=small_sizes(facts))
        torch.manual_seed(0)
        theirs = builder(facts, i, small_sizes(facts))
        assert repr(ours) == repr(theirs)
        for key, tensor in ours.state_dict().items():
            assert torch.equal(tensor, theirs.state_dict()[key]), key


def test_a_size_applies_where_the_model_uses_it_and_is_ignored_elsewhere():
    """One Sizes for a hybrid's two kinds: the Gated DeltaNet layer takes the width and
    its own sizes, the attention layer the width and the heads; each ignores the rest."""
    facts = MODELS["Qwen3-Next 80B-A3B"]
    sizes = dataclasses.replace(SMALL, linear_key_head_dim=4, sliding_window=3)
    deltanet, full = layer_for(facts, 0, sizes=sizes), layer_for(facts, 3, sizes=sizes)
    assert (deltanet.d_in, deltanet.key_head_dim, deltanet.value_head_dim) == (32, 4, 128)
    assert (full.d_in, full.num_heads, full.head_dim, full.window) == (32, 4, 8, None)
    gemma = MODELS["Gemma 4 31B"]  # the global layers take num_kv_heads and head_dim too
    glob = layer_for(gemma, 5, sizes=sizes)
    assert (glob.num_kv_heads, glob.head_dim, glob.window) == (2, 8, None)
    assert layer_for(gemma, 0, sizes=sizes).window == 3


def test_a_layer_at_the_models_sizes():
    facts = MODELS["Gemma 4 31B"]
    glob = layer_for(facts, 5)
    assert (glob.num_heads, glob.num_kv_heads, glob.head_dim) == (32, 4, 512)
    assert glob.W_query.in_features == glob.out_proj.out_features == facts.hidden_size
    assert glob.rotary.scaling == facts.rope.scaling and glob.scale == 1.0
    local = layer_for(facts, 0)
    assert (local.num_kv_heads, local.head_dim, local.window) == (16, 256, 1024)
    assert local.rotary.base == facts.rope.local_theta and local.rotary.scaling is None


def test_one_seed_draws_the_recipes_weights_in_the_modules_order():
    """The parts come after the module's own layers: from one seed, W_query to out_proj
    are those of the plain module."""
    facts = MODELS["Qwen3-Next 80B-A3B"]
    torch.manual_seed(0)
    layer = layer_for(facts, 3, sizes=SMALL)
    torch.manual_seed(0)
    plain = GroupedQueryAttention(32, 32, 8, num_heads=4, num_kv_heads=2, out_bias=False)
    for name, tensor in plain.state_dict().items():
        assert torch.equal(layer.state_dict()[name], tensor), name


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: layer_for("Llama 3 8B", 0), TypeError, "facts must be a ModelFacts"),
        (
            lambda: layer_for(MODELS["Llama 3 8B"], 32),
            ValueError,
            "from 0 to 31 for 'Llama 3 8B', got 32",
        ),
        (lambda: layer_for(MODELS["GPT-2"], 0), ValueError, "no recipe for 'GPT-2'"),
        (lambda: layer_for(MODELS["Kimi Linear"], 0), ValueError, "no recipe for 'Kimi"),
        (lambda: layer_for(MODELS["BLOOM 176B"], 0), ValueError, "no recipe for 'BLOOM 176B'"),
        (
            lambda: BUILDERS["DeepseekV4Config"](MODELS["Llama 3 8B"], 0, Sizes()),
            ValueError,
            "layer_for: 'Llama 3 8B' is not a DeepSeek-V4 model",
        ),
        (
            lambda: layer_for(
                dataclasses.replace(
                    MODELS["Nemotron-H 47B"],
                    mamba=Mamba(mixer="Mamba", inner_size=16, state_size=4, conv_kernel_dim=4),
                ),
                0,
            ),
            ValueError,
            r"no recipe for layer 0 of 'Nemotron-H 47B': a Mamba \(Mamba-1\) mixer",
        ),
        (
            lambda: layer_for(MODELS["Nemotron 3 Nano 30B"], 1),
            ValueError,
            "no recipe for layer 1 of 'Nemotron 3 Nano 30B' yet, a 'mlp' layer",
        ),
        (
            lambda: layer_for(MODELS["Llama 3 8B"], 0, sizes=Sizes(num_hedas=2)),
            TypeError,
            "unexpected keyword argument 'num_hedas'",
        ),
        (
            lambda: layer_for(MODELS["Llama 3 8B"], 0, num_heads=2),
            TypeError,
            "unexpected keyword argument 'num_heads'",
        ),
        (
            lambda: layer_for(MODELS["Llama 3 8B"], 0, sizes={"num_heads": 2}),
            TypeError,
            r"sizes must be a Sizes \(Sizes\(hidden_size=",
        ),
        (lambda: Sizes(num_heads=2.0), TypeError, "Sizes: num_heads must be a positive integer"),
        (lambda: Sizes(head_dim=True), TypeError, "Sizes: head_dim must be a positive integer"),
        (lambda: Sizes(sliding_window=0), ValueError, "Sizes: sliding_window must be at least 1"),
        (
            lambda: layer_for(dataclasses.replace(MODELS["Llama 3 8B"], config_class="X"), 0),
            ValueError,
            "no recipe for 'Llama 3 8B' yet: no builder for its config class, X",
        ),
    ],
    ids=[
        "not facts",
        "past the last layer",
        "learned positions",
        "KDA",
        "ALiBi",
        "V4's builder, another model",
        "Mamba-1",
        "an MLP layer",
        "misspelt",
        "not a size",
        "sizes as a dict",
        "a float size",
        "a bool size",
        "a zero size",
        "no builder",
    ],
)
def test_layer_for_rejects_what_it_cannot_build(call, error, message):
    with pytest.raises(error, match=message):
        call()
