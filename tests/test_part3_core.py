"""Part III's layers: each model's recipe against the transformers class that runs it.

The layers :func:`layer_for` builds (``attention.models.recipes``) from the parts of
``GroupedQueryAttention``: QK-norm (Qwen3 per head, OLMo 2 over the projection),
``softcap`` and ``scale`` (Gemma 2; with QK-norm and a window, Gemma 3), ``sinks``
(gpt-oss), ``W_gate`` with QK-norm (Qwen3-Next), ``v_norm`` and no ``W_value`` (Gemma 4);
the parts on their own; :func:`attend`'s ``softcap`` and ``sinks``; :class:`RMSNorm`.

Tolerances (float64): ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12) with transformers'
float32 steps (its RMS norms, its eager softmax) run in float64 within the test
(``float64_norms``, ``float64_softmax``) and float64 cos/sin; ``hf_models.FLOAT32_STEP``
(1e-5) against the modules as shipped.
"""

from __future__ import annotations

import pytest
import torch
from helpers import F64, changed, expect, gqa_layouts, layout_input, make_gqa, make_layer
from hf_models import (
    EXACT,
    FLOAT32_STEP,
    causal_4d,
    float64_norms,
    float64_softmax,
    gemma2_attention,
    gemma3_attention,
    gemma4_attention,
    gpt_oss_attention,
    olmo2_attention,
    qwen3_attention,
    qwen3_next_attention,
    qwen3_next_query_gate,
    rope_cos_sin,
)
from hypothesis import given
from hypothesis import strategies as st
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextRotaryEmbedding

from attention import (
    GroupedQueryAttention,
    KVCache,
    RMSNorm,
    Rotary,
    apply_rope,
    attend,
    rope_frequencies,
)
from attention.models import MODELS, ModelFacts

pytestmark = pytest.mark.usefixtures("single_thread")

BASE = 10000.0


def at_base(model: str, **rope: object) -> ModelFacts:
    """``model``'s facts with RoPE's base ``BASE`` (and ``rope``'s other changes): the
    comparisons below give transformers' attention cos and sin of that base."""
    return changed(MODELS[model], rope={"theta": BASE, **rope})


def randomize_new_parameters(gqa: GroupedQueryAttention, seed: int) -> GroupedQueryAttention:
    """Give the norms' weights and the sinks random values, so that copying them matters.

    (They start at ones and zeros, which a mix-up of two of them would not reveal.)
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for norm in (gqa.q_norm, gqa.k_norm):
            if norm is not None and norm.weight is not None:
                norm.weight.copy_(0.5 + torch.rand(norm.weight.shape, generator=generator))
        if gqa.sinks is not None:
            gqa.sinks.copy_(torch.randn(gqa.sinks.shape, generator=generator, dtype=F64))
    return gqa


def positions_cos_sin(x: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    return rope_cos_sin(positions, head_dim, BASE)


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


# --- QK-norm: Qwen3 (per head) and OLMo 2 (over the projection) -------------------------


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


def test_qk_norm_per_head_and_over_the_projection_differ_with_more_than_one_head():
    """One head's size depends on the others only when the norm spans the projection."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 4, "d_model": 8}
    layout |= {"context_length": 4, "num_tokens": 4, "batch": 1, "qkv_bias": False, "seed": 3}
    x = layout_input(layout)
    head = make_gqa(layout, parts=("qk_norm",))(x)
    projection = make_gqa(layout, parts=("qk_norm_projection",))(x)
    assert (head - projection).abs().max() > 1e-3


# --- softcap and scale: Gemma 2 -----------------------------------------------------------


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
    takes the cos and sin it is given); tests/test_recipes.py runs it.
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


def test_a_small_softcap_changes_the_output():
    """So the Gemma 2 comparison sees the cap: a cap of 0.05 flattens every row."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 4, "d_model": 8}
    layout |= {"context_length": 5, "num_tokens": 5, "batch": 1, "qkv_bias": False, "seed": 1}
    x = layout_input(layout)
    capped = make_gqa(layout, softcap=0.05)
    assert (capped(x) - make_gqa(layout)(x)).abs().max() > 1e-3
    weights = capped.attention_weights(x)  # scores within (-0.05, 0.05): nearly uniform
    uniform = torch.tril(torch.ones(5, 5, dtype=F64)) / torch.arange(1, 6, dtype=F64)[:, None]
    torch.testing.assert_close(weights[0, 0], uniform, atol=0.06, rtol=0)


# --- sinks: gpt-oss ---------------------------------------------------------------------


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


# --- output gate with QK-norm: Qwen3-Next ---------------------------------------------------


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


@given(layout=gqa_layouts(even_head_dim=True), seed=st.integers(0, 2**16))
def test_gemma4_global_layer_recipe_as_released(layout, seed):
    """Keys as values, the value norm, QK-norm, scale 1 and proportional RoPE over a
    quarter of a head of 16, on Gemma 4's global layer with its default rope_parameters.

    EXACT takes float64 cos and sin from :func:`rope_frequencies` (checked against
    transformers' formula in float64 by tests/test_part3_rope.py); as shipped, Gemma 4's
    own rotary embedding, in float32.
    """
    layout = layout | {"head_dim": 16, "d_model": layout["num_heads"] * 16, "seed": seed}
    scaling = {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    gqa = make_layer(layout, "Gemma 4 31B")
    assert gqa.rotary.scaling == scaling and gqa.rope_base == 1e6 and gqa.W_value is None
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


# --- attend: softcap and sinks --------------------------------------------------------------


def attend_inputs(seed: int, num_heads: int = 4, num_kv_heads: int = 2, n: int = 5):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, num_heads, n, 8, generator=generator, dtype=F64)
    k, v = (torch.randn(2, num_kv_heads, n, 8, generator=generator, dtype=F64) for _ in "kv")
    return q, k, v


def written_out(q, k, v, allowed=None, scale=None, softcap=None, sinks=None):
    """Gemma 2's and gpt-oss's eager kernels, written out: scale, cap, mask, sink, softmax."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is not None:
        column = sinks[None, :, None, None].expand(*scores.shape[:-1], 1)
        weights = torch.softmax(torch.cat((scores, column), dim=-1), dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1)
    return weights @ v


@given(
    seed=st.integers(0, 2**16),
    softcap=st.one_of(st.none(), st.floats(0.01, 50.0)),
    with_sinks=st.booleans(),
    causal=st.booleans(),
    implementation=st.sampled_from(["sdpa", "eager"]),
)
def test_attend_caps_and_sinks_as_written_out(seed, softcap, with_sinks, causal, implementation):
    q, k, v = attend_inputs(seed)
    sinks = torch.randn(4, generator=torch.Generator().manual_seed(seed), dtype=F64)
    sinks = sinks if with_sinks else None
    allowed = torch.ones(5, 5, dtype=torch.bool).tril() if causal else None
    ours = attend(
        q, k, v, causal=causal, softcap=softcap, sinks=sinks, implementation=implementation
    )
    expected = written_out(q, k, v, allowed, softcap=softcap, sinks=sinks)
    torch.testing.assert_close(ours, expected, **EXACT)


def test_attend_runs_sdpa_without_cap_or_sinks_and_the_eager_way_with_them(monkeypatch):
    """SDPA cannot cap scores or add a sink: with either, the eager way runs."""
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    q, k, v = attend_inputs(0)
    attend(q, k, v, causal=True)
    assert len(calls) == 1
    attend(q, k, v, causal=True, softcap=30.0)
    attend(q, k, v, causal=True, sinks=torch.zeros(4, dtype=F64))
    assert len(calls) == 1


@given(seed=st.integers(0, 2**16), causal=st.booleans())
def test_attend_with_an_enormous_softcap_is_uncapped(seed, causal):
    q, k, v = attend_inputs(seed)
    uncapped = attend(q, k, v, causal=causal, implementation="eager")
    torch.testing.assert_close(attend(q, k, v, causal=causal, softcap=1e9), uncapped, **EXACT)


@given(seed=st.integers(0, 2**16), causal=st.booleans())
def test_attend_with_sinks_of_minus_infinity_has_no_sink(seed, causal):
    q, k, v = attend_inputs(seed)
    no_sink = attend(q, k, v, causal=causal, implementation="eager")
    sinks = torch.full((4,), float("-inf"), dtype=F64)
    torch.testing.assert_close(attend(q, k, v, causal=causal, sinks=sinks), no_sink, **EXACT)


def test_attend_sink_takes_its_share_and_a_fully_masked_query_gets_zeros():
    """A sink of log(3) next to one key of score 0: the key keeps 1 / (1 + 3) of the weight."""
    q = torch.zeros(1, 1, 2, 4, dtype=F64)
    k, v = torch.zeros(1, 1, 2, 4, dtype=F64), torch.ones(1, 1, 2, 4, dtype=F64)
    allowed = torch.tensor([[True, False], [False, False]])  # query 1 sees nothing
    sinks = torch.tensor([3.0], dtype=F64).log()
    out = attend(q, k, v, allowed=allowed, sinks=sinks)
    torch.testing.assert_close(out[0, 0, 0], torch.full((4,), 0.25, dtype=F64), **EXACT)
    assert torch.equal(out[0, 0, 1], torch.zeros(4, dtype=F64))


BAD_ATTEND = [
    pytest.param(
        {"softcap": 0}, "attend: softcap must be a positive, finite number", ValueError, id="0"
    ),
    pytest.param(
        {"softcap": -1.0}, "attend: softcap must be a positive, finite", ValueError, id="neg"
    ),
    pytest.param(
        {"softcap": float("inf")},
        "attend: softcap must be a positive, finite",
        ValueError,
        id="inf",
    ),
    pytest.param(
        {"softcap": True}, "attend: softcap must be a positive number", TypeError, id="bool"
    ),
    pytest.param(
        {"softcap": "30"}, "attend: softcap must be a positive number", TypeError, id="str"
    ),
    pytest.param(
        {"sinks": torch.zeros(2, dtype=F64)},
        "attend: sinks must be None or a tensor of shape (num_heads,) = (4,)",
        ValueError,
        id="shape",
    ),
    pytest.param(
        {"sinks": torch.zeros(4)},
        "attend: sinks must be None or a tensor of shape (num_heads,) = (4,) and of "
        "q's dtype torch.float64, got shape (4,) and dtype torch.float32",
        ValueError,
        id="dtype",
    ),
    pytest.param(
        {"sinks": [0.0] * 4}, "attend: sinks must be None or a tensor", TypeError, id="list"
    ),
]


@pytest.mark.parametrize(("kwargs", "message", "error"), BAD_ATTEND)
def test_attend_rejects_bad_softcap_and_sinks(kwargs, message, error):
    q, k, v = attend_inputs(0)
    with expect(message, error):
        attend(q, k, v, **kwargs)


# --- the module's defaults are today's module -------------------------------------------------


def todays_module(layout: dict, x: torch.Tensor, rope: bool) -> torch.Tensor:
    """Today's GroupedQueryAttention written out from the same seed: four nn.Linear layers
    drawn in order, the heads, RoPE, causal SDPA over repeated heads, out_proj."""
    d, heads, kv_heads = layout["d_model"], layout["num_heads"], layout["num_kv_heads"]
    head_dim, bias = layout["head_dim"], layout["qkv_bias"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(layout["seed"])
        layers = [
            torch.nn.Linear(d, d, bias=bias),
            torch.nn.Linear(d, kv_heads * head_dim, bias=bias),
            torch.nn.Linear(d, kv_heads * head_dim, bias=bias),
            torch.nn.Linear(d, d, bias=bias),
        ]
    w_q, w_k, w_v, out = (layer.to(F64) for layer in layers)
    b, n, _ = x.shape

    def split(t, h):
        return t.view(b, n, h, head_dim).transpose(1, 2)

    q, k, v = split(w_q(x), heads), split(w_k(x), kv_heads), split(w_v(x), kv_heads)
    if rope:
        q, k = apply_rope(q, base=BASE), apply_rope(k, base=BASE)
    group = heads // kv_heads
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out(context.transpose(1, 2).reshape(b, n, d))


NEW_OFF = {
    "softcap": None,
    "sinks": False,
    "scale": None,
    "rotary": None,
    "q_norm": None,
    "k_norm": None,
    "v_norm": None,
    "W_gate": None,
}


@given(layout=gqa_layouts(even_head_dim=True), rope=st.booleans())
def test_defaults_are_todays_module(layout, rope):
    """Same seed: the same parameter names, weights, random-number use and outputs."""
    base = {"rope_base": BASE} if rope else {}
    with torch.random.fork_rng(devices=[]):
        gqa = make_gqa(layout, **base)
        after_default = torch.random.get_rng_state()
    explicit = make_gqa(layout, **base, **NEW_OFF)
    names = ["W_query.weight", "W_key.weight", "W_value.weight", "out_proj.weight"]
    if layout["qkv_bias"]:  # make_gqa: out_bias follows qkv_bias
        names = [
            f"{layer}.{kind}"
            for layer in ("W_query", "W_key", "W_value", "out_proj")
            for kind in ("weight", "bias")
        ]
    assert [name for name, _ in gqa.named_parameters()] == names
    assert [name for name, _ in explicit.named_parameters()] == names
    assert gqa.W_gate is gqa.q_norm is gqa.k_norm is gqa.v_norm is gqa.sinks is None
    x = layout_input(layout)
    torch.testing.assert_close(gqa(x), todays_module(layout, x, rope), **EXACT)
    assert torch.equal(gqa(x), explicit(x))
    with torch.random.fork_rng(devices=[]):
        make_gqa(layout, **base, **NEW_OFF)
        assert torch.equal(torch.random.get_rng_state(), after_default)


OPTIONS_ON = [
    pytest.param({"parts": ("qk_norm",)}, {"q_norm.weight", "k_norm.weight"}, id="qk_norm"),
    pytest.param(
        {"parts": ("qk_norm_projection",)},
        {"q_norm.weight", "k_norm.weight"},
        id="qk_norm_projection",
    ),
    pytest.param({"softcap": 30.0}, set(), id="softcap"),
    pytest.param({"sinks": True}, {"sinks"}, id="sinks"),
    pytest.param({"scale": 0.5}, set(), id="scale"),
    pytest.param({"parts": ("v_norm",)}, set(), id="v_norm"),
    pytest.param({"parts": ("W_gate",)}, {"W_gate.weight", "W_gate.bias"}, id="W_gate"),
]


@pytest.mark.parametrize(("option", "new_names"), OPTIONS_ON)
def test_each_option_and_part_keeps_the_existing_weights_of_the_same_seed(option, new_names):
    """Parts come after out_proj: W_query to out_proj are drawn as before."""
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 2, "d_model": 8}
    layout |= {"context_length": 4, "num_tokens": 4, "batch": 1, "qkv_bias": True, "seed": 5}
    default = make_gqa(layout).state_dict()
    with_option = make_gqa(layout, **option).state_dict()
    for name, tensor in default.items():
        assert torch.equal(with_option[name], tensor), name
    assert set(with_option) - set(default) == new_names


# --- the module's limits: cap, sink and gate that do nothing -----------------------------------


@given(layout=gqa_layouts(even_head_dim=True))
def test_module_softcap_towards_infinity_is_no_cap(layout):
    x = layout_input(layout)
    capped = make_gqa(layout, rope_base=BASE, softcap=1e9)
    plain = make_gqa(layout, rope_base=BASE)
    torch.testing.assert_close(capped(x), plain(x), **EXACT)
    torch.testing.assert_close(capped.attention_weights(x), plain.attention_weights(x), **EXACT)


@given(layout=gqa_layouts(even_head_dim=True))
def test_module_sinks_of_minus_infinity_are_no_sinks(layout):
    x = layout_input(layout)
    sunk = make_gqa(layout, rope_base=BASE, sinks=True)
    with torch.no_grad():
        sunk.sinks.fill_(float("-inf"))
    plain = make_gqa(layout, rope_base=BASE)
    torch.testing.assert_close(sunk(x), plain(x), **EXACT)
    torch.testing.assert_close(sunk.attention_weights(x), plain.attention_weights(x), **EXACT)


@given(layout=gqa_layouts(even_head_dim=True), bias=st.sampled_from([1e3, float("inf")]))
def test_module_saturated_gate_is_no_gate(layout, bias):
    """A gate bias so large that sigmoid gives exactly 1 passes every output through."""
    layout = layout | {"qkv_bias": True}
    x = layout_input(layout)
    gated = make_gqa(layout, rope_base=BASE, parts=("W_gate",))
    with torch.no_grad():
        gated.W_gate.weight.zero_()
        gated.W_gate.bias.fill_(bias)
    torch.testing.assert_close(gated(x), make_gqa(layout, rope_base=BASE)(x), **EXACT)


def test_module_gate_of_zero_logits_halves_the_heads_outputs():
    """sigmoid(0) = 1/2 on every number into out_proj: the output minus the bias halves."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 2, "d_model": 4}
    layout |= {"context_length": 3, "num_tokens": 3, "batch": 1, "qkv_bias": True, "seed": 7}
    x = layout_input(layout)
    gated, plain = make_gqa(layout, parts=("W_gate",)), make_gqa(layout)
    with torch.no_grad():
        gated.W_gate.weight.zero_()
        gated.W_gate.bias.zero_()
    bias = plain.out_proj.bias
    torch.testing.assert_close(gated(x) - bias, (plain(x) - bias) / 2, **EXACT)


def test_module_sinks_make_rows_sum_below_one():
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 2, "d_model": 4}
    layout |= {"context_length": 3, "num_tokens": 3, "batch": 1, "qkv_bias": False, "seed": 7}
    gqa = make_gqa(layout, sinks=True)
    sums = gqa.attention_weights(layout_input(layout)).sum(-1)
    assert (sums < 1).all() and (sums > 0).all()


def test_cache_bytes_per_token_is_the_same_without_w_value():
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 2, "d_model": 8}
    layout |= {"context_length": 4, "num_tokens": 4, "batch": 1, "qkv_bias": False, "seed": 0}
    plain, shared = make_gqa(layout), make_gqa(layout, parts=("no_W_value", "v_norm"))
    assert shared.W_value is None
    assert shared.cache_bytes_per_token == plain.cache_bytes_per_token == 2 * 2 * 2 * 8


# --- RMSNorm ------------------------------------------------------------------------------------


@given(seed=st.integers(0, 2**16), dim=st.integers(1, 9), affine=st.booleans())
def test_rms_norm_matches_torch_rms_norm(seed, dim, affine):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, dim, generator=generator, dtype=F64)
    ours = RMSNorm(dim, elementwise_affine=affine).to(F64)
    theirs = torch.nn.RMSNorm(dim, eps=1e-6, elementwise_affine=affine, dtype=F64)
    if affine:
        with torch.no_grad():
            weight = torch.randn(dim, generator=generator, dtype=F64)
            ours.weight.copy_(weight)
            theirs.weight.copy_(weight)
    torch.testing.assert_close(ours(x), theirs(x), **EXACT)


def test_rms_norm_starts_at_ones_and_computes_in_the_inputs_dtype():
    norm = RMSNorm(3)
    assert torch.equal(norm.weight, torch.ones(3)) and norm.eps == 1e-6
    assert norm(torch.ones(2, 3, dtype=torch.bfloat16).to(torch.float32)).dtype == torch.float32
    half = RMSNorm(3, elementwise_affine=False)
    assert half.weight is None and list(half.state_dict()) == []
    assert half(torch.ones(3, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert torch.equal(half(torch.zeros(4, 3)), torch.zeros(4, 3))


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"dim": 0}, "RMSNorm: dim must be at least 1, got 0", ValueError),
        ({"dim": 2.0}, "RMSNorm: dim must be a positive integer, got 2.0", TypeError),
        ({"dim": 3, "eps": 0}, "RMSNorm: eps must be a positive number, got 0", ValueError),
        ({"dim": 3, "eps": True}, "RMSNorm: eps must be a positive number, got True", TypeError),
        (
            {"dim": 3, "elementwise_affine": 1},
            "RMSNorm: elementwise_affine must be True or False",
            TypeError,
        ),
    ],
    ids=["dim0", "dim_float", "eps0", "eps_bool", "affine_int"],
)
def test_rms_norm_rejects_bad_arguments(kwargs, message, error):
    with expect(message, error):
        RMSNorm(**kwargs)


def test_rms_norm_rejects_an_input_of_the_wrong_size_or_type():
    with expect("RMSNorm: expected a tensor whose last dimension is dim=3, got (2, 4)"):
        RMSNorm(3)(torch.ones(2, 4))
    with expect("RMSNorm: expected a tensor whose last dimension is dim=3, got list", TypeError):
        RMSNorm(3)([1.0, 2.0, 3.0])


# --- the module's errors ------------------------------------------------------------------------


BAD_OPTIONS = [
    ({"softcap": 0}, r"softcap must be a positive, finite number .*got 0"),
    ({"softcap": -50.0}, r"softcap must be a positive, finite number .*got -50.0"),
    ({"softcap": True}, r"softcap must be a positive number .*got True of type bool", TypeError),
    ({"sinks": 1}, r"sinks must be True or False .*got 1 of type int", TypeError),
    ({"scale": 0}, r"scale must be a positive number or None, got 0"),
    ({"scale": -0.5}, r"scale must be a positive number or None, got -0.5"),
    ({"scale": True}, r"scale must be a positive number or None, got True", TypeError),
    # Part III's former flags: each says which part or recipe replaces it
    ({"qk_norm": True}, r"qk_norm= is no longer taken; give the parts q_norm= and k_norm="),
    ({"value_norm": True}, r"value_norm= is no longer taken; give the part v_norm="),
    ({"output_gate": True}, r"output_gate= is no longer taken; assign the part W_gate"),
    ({"keys_as_values": True}, r"keys_as_values= is no longer taken; set layer.W_value = None"),
    ({"rope_scaling": {}}, r"rope_scaling= is no longer taken; give rotary=Rotary\("),
    ({"partial_rotary_factor": 0.5}, r"partial_rotary_factor= .*rotary=Rotary\("),
    ({"rope_base": 1e4, "rotary": Rotary(4)}, r"give rope_base or rotary, not both"),
]


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [(kwargs, message, *(error or [ValueError])) for kwargs, message, *error in BAD_OPTIONS],
    ids=[", ".join(map(repr, row[0].items())) for row in BAD_OPTIONS],
)
def test_module_rejects_bad_options(kwargs, message, error):
    with pytest.raises(error, match="^GroupedQueryAttention: " + message):
        GroupedQueryAttention(8, 8, 4, num_heads=2, num_kv_heads=1, **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"q_norm": "rms"}, {"W_gate": torch.ones(2)}, {"rotary": 10000.0}, {"qk_nrom": True}],
    ids=["q_norm", "W_gate", "rotary", "misspelt"],
)
def test_module_rejects_parts_that_are_not_modules_and_unknown_keywords(kwargs):
    with pytest.raises(TypeError, match=r"^GroupedQueryAttention: "):
        GroupedQueryAttention(8, 8, 4, num_heads=2, num_kv_heads=1, **kwargs)


@given(layout=gqa_layouts(even_head_dim=True), window=st.one_of(st.none(), st.integers(1, 4)))
def test_every_option_on_decodes_with_a_cache_as_one_full_pass(layout, window):
    """Prefill then one token at a time gives the full pass's outputs, every option on."""
    layout = layout | {"num_tokens": layout["context_length"]}
    options = {"softcap": 2.0, "sinks": True, "scale": 0.7}
    parts = ("W_gate", "qk_norm", "v_norm", "no_W_value")
    gqa = make_gqa(layout, rope_base=BASE, window=window, parts=parts, **options)
    gqa = randomize_new_parameters(gqa, layout["seed"])
    x = layout_input(layout)
    cache, prefill = KVCache(), (layout["num_tokens"] + 1) // 2
    steps = [gqa(x[:, :prefill], cache=cache)]
    steps += [gqa(x[:, i : i + 1], cache=cache) for i in range(prefill, x.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), gqa(x), **EXACT)
