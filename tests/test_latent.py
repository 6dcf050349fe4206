"""MultiHeadLatentAttention against transformers' DeepseekV3Attention, its cache, errors;
with DeepSeek-V3's YaRN (``rope_scaling``), its softmax scale and rotation included.

Tolerances (float64):

* EXACT (rtol 1e-10, atol 1e-12) against ``DeepseekV3Attention`` (sdpa) given float64
  cos/sin and with its two RMS norms swapped for float64 ones (``float64_norms``): the
  projections, the decoupled RoPE (interleaved and half-split), the latent cache and
  the attention agree to rounding.
* FLOAT32_STEP (1e-5) against the module untouched, with ``DeepseekV3RotaryEmbedding``:
  ``DeepseekV3RMSNorm`` normalizes in float32 and the rotary angles are float32.
* With YaRN, EXACT against transformers' RoPE formulas run in float64
  (``tests/rope_reference.py``), FLOAT32_STEP against the module as shipped.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import BAD_ARGUMENTS, F64, count_check_calls, layout_input, make, vectors
from hf_models import (
    EXACT,
    FLOAT32_STEP,
    causal_4d,
    deepseek_attention,
    deepseek_config,
    float64_norms,
    padded_causal_4d,
    rope_cos_sin,
)
from hypothesis import given
from hypothesis import strategies as st
from rope_reference import their_cos_sin, their_frequencies
from transformers import DynamicCache
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3RotaryEmbedding,
)

from attention import (
    KVCache,
    LatentCache,
    MultiHeadLatentAttention,
    Rotary,
    kv_cache_bytes_per_token,
    latent_cache_bytes_per_token,
    padding_mask,
)

pytestmark = pytest.mark.usefixtures("single_thread")


@st.composite
def mla_layouts(draw: st.DrawFn, max_tokens: int = 6) -> dict:
    context_length = draw(st.integers(1, max_tokens))
    return {
        "num_heads": draw(st.integers(1, 3)),
        "q_lora_rank": draw(st.none() | st.integers(1, 6)),
        "kv_lora_rank": draw(st.integers(1, 6)),
        "qk_nope_head_dim": draw(st.integers(1, 4)),
        "qk_rope_head_dim": 2 * draw(st.integers(1, 3)),
        "v_head_dim": draw(st.integers(1, 4)),
        "attention_bias": draw(st.booleans()),
        "rope_interleave": draw(st.booleans()),
        "context_length": context_length,
        "num_tokens": draw(st.integers(1, context_length)),
        "batch": draw(st.integers(1, 2)),
        "d_model": draw(st.integers(1, 8)),
        "seed": draw(st.integers(0, 2**16)),
    }


def make_mla(layout: dict) -> MultiHeadLatentAttention:
    sizes = ("num_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")
    kwargs = {k: layout[k] for k in (*sizes, "v_head_dim")}
    rope = Rotary(layout["qk_rope_head_dim"], interleaved=layout["rope_interleave"])
    kwargs["rotary"] = rope
    # DeepSeek's attention_bias: a bias on the down-projections and on out_proj, or none
    kwargs |= {"qkv_bias": layout["attention_bias"], "out_bias": layout["attention_bias"]}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(layout["seed"])
        d = layout["d_model"]
        mla = MultiHeadLatentAttention(d, d, layout["context_length"], **kwargs)
        # Norm weights start at 1; random ones check that they are copied and applied.
        for norm in (mla.kv_norm, getattr(mla, "q_norm", None)):
            if norm is not None:
                torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
    return mla.to(F64).eval()


@given(layout=mla_layouts())
def test_matches_deepseek_v3_attention_in_float64(layout):
    mla = make_mla(layout)
    theirs = float64_norms(deepseek_attention(mla))
    x = layout_input(layout)
    n = x.shape[1]
    positions = torch.arange(n).expand(x.shape[0], -1)
    cos_sin = rope_cos_sin(positions, mla.qk_rope_head_dim, mla.rotary.base)
    expected, _ = theirs(x, cos_sin, causal_4d(n, n))
    torch.testing.assert_close(mla(x), expected, **EXACT)


@given(layout=mla_layouts())
def test_matches_deepseek_v3_attention_as_shipped(layout):
    """Untouched: its own rotary embedding and RMS norms, which compute in float32."""
    mla = make_mla(layout)
    theirs = deepseek_attention(mla, "eager")
    x = layout_input(layout)
    n = x.shape[1]
    rotary = DeepseekV3RotaryEmbedding(deepseek_config(mla))
    mask = torch.zeros(1, 1, n, n, dtype=F64).masked_fill(~causal_4d(n, n), float("-inf"))
    expected, weights = theirs(x, rotary(x, torch.arange(n)[None]), mask)
    torch.testing.assert_close(mla(x), expected, **FLOAT32_STEP)
    torch.testing.assert_close(mla.attention_weights(x), weights, **FLOAT32_STEP)


@given(layout=mla_layouts(max_tokens=7), data=st.data())
def test_cache_holds_the_latent_and_the_rotated_key_like_dynamic_cache(layout, data):
    """Prefill + steps == full pass, and the cache holds exactly what DeepSeek's holds."""
    mla = make_mla(layout)
    theirs = float64_norms(deepseek_attention(mla))
    x = layout_input(layout)
    n = x.shape[1]
    prefill = data.draw(st.integers(1, n), label="prefill")
    ours, their_cache = LatentCache(), DynamicCache()
    pieces = []
    for start, stop in zip([0, *range(prefill, n)], range(prefill, n + 1), strict=False):
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        cos_sin = rope_cos_sin(positions, mla.qk_rope_head_dim, mla.rotary.base)
        mask = causal_4d(stop - start, stop) if stop - start > 1 else None
        # The cache goes 4th, by position: `past_key_values` before transformers 5.24, `cache`
        # after, and the old keyword warns (FutureWarning) from 5.24 on.
        expected, _ = theirs(x[:, start:stop], cos_sin, mask, their_cache)
        pieces.append(mla(x[:, start:stop], cache=ours))
        torch.testing.assert_close(pieces[-1], expected, **EXACT)
    torch.testing.assert_close(torch.cat(pieces, dim=1), mla(x), **EXACT)
    # transformers stores the latent and the rotary key as one-head "keys" and "values".
    torch.testing.assert_close(ours.latent, their_cache.layers[0].keys[:, 0], **EXACT)
    torch.testing.assert_close(ours.rope_keys, their_cache.layers[0].values[:, 0], **EXACT)
    assert ours.nbytes == x.shape[0] * n * mla.cache_bytes_per_token


def test_cache_per_token_is_latent_plus_rope_key_whatever_the_heads():
    kwargs = {"kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8}
    few = MultiHeadLatentAttention(32, 32, 8, num_heads=2, **kwargs)
    many = MultiHeadLatentAttention(32, 32, 8, num_heads=16, **kwargs)
    assert few.cache_bytes_per_token == many.cache_bytes_per_token == (16 + 4) * 4
    assert latent_cache_bytes_per_token(1, 16, 4, torch.float32) == few.cache_bytes_per_token
    # DeepSeek-V3 (61 layers, bf16) against caching 128 heads' keys (192) and values (128)
    v3 = latent_cache_bytes_per_token(61, 512, 64, torch.bfloat16)
    per_head_cache = 61 * 128 * (192 + 128) * 2
    assert v3 == 70272 and per_head_cache == kv_cache_bytes_per_token(61, 128, 160, 2)
    assert per_head_cache / v3 == pytest.approx(71.1, abs=0.05)


def test_going_past_context_length_names_both_numbers():
    mla = MultiHeadLatentAttention(
        8, 8, 3, num_heads=2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=2
    )
    cache = LatentCache()
    mla(torch.randn(1, 2, 8), cache=cache)
    with pytest.raises(
        ValueError, match=r"holds 2 tokens and 2 more make 4, past context_length=3"
    ):
        mla(torch.randn(1, 2, 8), cache=cache)
    with pytest.raises(TypeError, match=r"must be a LatentCache .* got KVCache"):
        mla(torch.randn(1, 1, 8), cache=KVCache())


@pytest.mark.parametrize(("kwargs", "message", "error"), BAD_ARGUMENTS[MultiHeadLatentAttention])
def test_bad_arguments_name_what_was_expected_and_given(kwargs, message, error):
    with pytest.raises(error, match=message):
        make(MultiHeadLatentAttention, **kwargs)


@pytest.mark.parametrize("q_lora_rank", [None, 6])
def test_a_forward_checks_its_input_once_and_nothing_else(monkeypatch, q_lora_rank):
    """Rotation and mask run unchecked: only forward's own check runs, and the
    cache's public update checks the two tensors it is given (one call each)."""
    mla = MultiHeadLatentAttention(
        16, 16, context_length=6, num_heads=2, kv_lora_rank=4, qk_nope_head_dim=4,
        qk_rope_head_dim=4, v_head_dim=4, q_lora_rank=q_lora_rank,
    )  # fmt: skip
    x, cache = torch.randn(2, 6, 16), LatentCache()
    counts = count_check_calls(monkeypatch)
    once = {"cached_input": 1, "module_input": 1, "float_tensor": 1}
    for step in (x[:, :4], x[:, 4:5], x[:, 5:]):  # prefill, then two decoding steps
        counts.clear()
        mla(step, cache=cache)
        assert counts == once | {"float_tensor": 3}  # x, then the new keys and values
    counts.clear()
    mla.attention_weights(x)
    assert counts == once


def test_qkv_bias_and_out_bias_are_two_keyword_only_flags():
    """qkv_bias: the down-projections; out_bias: out_proj. num_heads is keyword-only."""
    sizes = {"kv_lora_rank": 4, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 2}
    mla = MultiHeadLatentAttention(
        8, 8, 4, num_heads=2, q_lora_rank=3, qkv_bias=True, out_bias=False, **sizes
    )
    layers = mla.named_children()
    biased = [name for name, layer in layers if getattr(layer, "bias", None) is not None]
    assert biased == ["W_dq", "W_dkv", "W_kr"]
    default = MultiHeadLatentAttention(8, 8, 4, num_heads=2, **sizes)
    assert default.out_proj.bias is None and default.W_dkv.bias is None
    with_out_bias = MultiHeadLatentAttention(8, 8, 4, num_heads=2, out_bias=True, **sizes)
    assert with_out_bias.out_proj.bias is not None
    with pytest.raises(TypeError, match=r"takes 4 positional arguments but 5 positional"):
        MultiHeadLatentAttention(8, 8, 4, 2, **sizes)


@given(layout=mla_layouts(max_tokens=7), data=st.data())
def test_a_right_padded_batch_matches_deepseek_v3_in_prefill_and_decoding(layout, data):
    """allowed= as transformers' attention_mask, through its own masking utils, in float64."""
    mla = make_mla(layout)
    theirs = float64_norms(deepseek_attention(mla))
    x = layout_input(layout)
    b, n = x.shape[:2]
    prefill = data.draw(st.integers(1, n), label="prefill")
    lengths = data.draw(st.lists(st.integers(1, prefill), min_size=b, max_size=b), label="lengths")
    decoded = torch.ones(b, n - prefill, dtype=torch.bool)
    attention_mask = torch.cat((padding_mask(lengths, prefill), decoded), dim=1)
    ours, their_cache = LatentCache(), DynamicCache()
    for start, stop in zip([0, *range(prefill, n)], range(prefill, n + 1), strict=False):
        positions = torch.arange(start, stop).expand(b, -1)
        cos_sin = rope_cos_sin(positions, mla.qk_rope_head_dim, mla.rotary.base)
        mask = padded_causal_4d(attention_mask[:, :stop], stop - start)
        expected, _ = theirs(x[:, start:stop], cos_sin, mask, their_cache)
        keys = attention_mask[:, None, None, :stop]  # (batch, 1, 1, keys): every query
        got = mla(x[:, start:stop], cache=ours, allowed=keys)
        torch.testing.assert_close(got, expected, **EXACT)


def test_a_bad_allowed_names_the_expected_and_given_shapes():
    mla = make(MultiHeadLatentAttention)
    with pytest.raises(
        ValueError,
        match=r"^MultiHeadLatentAttention: expected allowed broadcastable to \(batch, "
        r"num_heads, num_queries, num_keys\) = \(1, 2, 3, 3\), got shape \(4,\)",
    ):
        mla(torch.randn(1, 3, 8), allowed=torch.ones(4, dtype=torch.bool))


# --- its cache counts what it has seen ----------------------------------------------------


def test_latent_attention_counts_what_its_cache_has_seen():
    mla = MultiHeadLatentAttention(
        8, 8, 6, num_heads=2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=4
    ).double()
    x = torch.randn(1, 6, 8, dtype=F64)
    cache = LatentCache()
    steps = [mla(x[:, :3], cache=cache), *(mla(x[:, i : i + 1], cache=cache) for i in range(3, 6))]
    assert cache.seen_tokens == len(cache) == 6
    torch.testing.assert_close(torch.cat(steps, dim=1), mla(x), **EXACT)


# --- rope_scaling: DeepSeek-V3's YaRN -----------------------------------------------------


#: DeepSeek-V3's released rope_parameters (config.json), with a short original context.
DEEPSEEK_YARN = {
    "rope_type": "yarn",
    "factor": 40.0,
    "original_max_position_embeddings": 8,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}


def deepseek_yarn_attention(mla: MultiHeadLatentAttention, scaling: dict):
    """``DeepseekV3Attention`` with ``mla``'s weights and a yarn ``rope_parameters``.

    It reads ``mscale_all_dim`` when it is built, for its softmax scale, so the module
    is built from a yarn config and given the weights of ``deepseek_attention``'s.
    """
    config = deepseek_config(mla)
    config.rope_parameters = {**scaling, "rope_theta": mla.rotary.base}
    config.max_position_embeddings = 320
    theirs = DeepseekV3Attention(config, layer_idx=0).to(F64).eval()
    theirs.load_state_dict(deepseek_attention(mla).state_dict())
    return theirs, config


@pytest.mark.parametrize("interleave", [True, False], ids=["interleaved", "half-split"])
@pytest.mark.parametrize(
    "scaling",
    [DEEPSEEK_YARN, {**DEEPSEEK_YARN, "mscale": 0.707, "mscale_all_dim": 0.0}],
    ids=["deepseek-v3", "attention-factor-only"],
)
def test_mla_yarn_matches_deepseek_v3_attention(interleave, scaling):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        mla = MultiHeadLatentAttention(
            32, 32, 40, num_heads=3, q_lora_rank=12, kv_lora_rank=8, qk_nope_head_dim=6,
            qk_rope_head_dim=8, v_head_dim=5,
            rotary=Rotary(8, scaling=scaling, interleaved=interleave),
        ).to(F64).eval()  # fmt: skip
    theirs, config = deepseek_yarn_attention(mla, scaling)
    mscale = 0.1 * scaling["mscale_all_dim"] * math.log(40.0) + 1.0
    assert theirs.scaling == pytest.approx(14**-0.5 * mscale**2)
    x = vectors(9, 2, 24, 32)
    positions = torch.arange(24)[None]
    inv_freq, factor = their_frequencies(config, float64=True)
    cos_sin = their_cos_sin(inv_freq, factor, positions)
    expected, _ = float64_norms(theirs)(x, cos_sin, causal_4d(24, 24))
    torch.testing.assert_close(mla(x), expected, **EXACT)
    # As shipped: its own rotary embedding and norms (float32), the eager path
    theirs, _ = deepseek_yarn_attention(mla, scaling)
    theirs.config._attn_implementation = "eager"
    mask = torch.zeros(1, 1, 24, 24, dtype=F64).masked_fill(~causal_4d(24, 24), float("-inf"))
    shipped, weights = theirs(x, DeepseekV3RotaryEmbedding(config)(x, positions), mask)
    torch.testing.assert_close(mla(x), shipped, **FLOAT32_STEP)
    torch.testing.assert_close(mla.attention_weights(x), weights, **FLOAT32_STEP)
    # Decoding with the latent cache gives the same outputs
    cache = LatentCache()
    steps = [mla(x[:, :10], cache=cache)] + [
        mla(x[:, p : p + 1], cache=cache) for p in range(10, 24)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), mla(x), **EXACT)
