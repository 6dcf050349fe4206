"""apply_rope, apply_rope_interleaved, Rotary and rope_frequencies: transformers' layouts,
relative positions, the scalings for longer contexts, errors.

``rope_frequencies`` against transformers' ``ROPE_INIT_FUNCTIONS`` for every type
(default, linear, dynamic, yarn, llama3, proportional), with or without a partial
rotary factor; ``apply_rope`` with gpt-oss's YaRN, Gemma 4's proportional RoPE and
Qwen3-Next's partial rotary against their rotary embeddings; a factor of 1 is plain
RoPE, static scalings keep scores relative, each module's table is its own.

Tolerances (float64): EXACT (rtol 1e-10, atol 1e-12) against ``apply_rotary_pos_emb``
and ``apply_rotary_pos_emb_interleave`` given float64 cos/sin, and against
transformers' RoPE formulas run in float64 (``tests/rope_reference.py`` says how);
FLOAT32_STEP (1e-5) against the rotary embeddings' own cos/sin, computed from float32
angles, and rtol 1e-5 on the speeds ``ROPE_INIT_FUNCTIONS`` return in float32.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import F64, rotary_gqa, scaled_gqa, vectors
from hf_models import EXACT, FLOAT32_STEP, rope_cos_sin
from hypothesis import given
from hypothesis import strategies as st
from rope_reference import MODULE_SCALINGS, rope_config, their_cos_sin, their_frequencies
from transformers import LlamaConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave
from transformers.models.gemma4 import modeling_gemma4
from transformers.models.gpt_oss import modeling_gpt_oss
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.qwen3_next import modeling_qwen3_next

from attention import (
    GroupedQueryAttention,
    MultiHeadLatentAttention,
    Rotary,
    apply_rope,
    apply_rope_interleaved,
    rope_frequencies,
)

pytestmark = pytest.mark.usefixtures("single_thread")

bases = st.sampled_from([10.0, 10000.0, 500000.0])


@given(
    num_tokens=st.integers(1, 8),
    half=st.integers(1, 4),
    start=st.integers(0, 1000),
    base=bases,
    seed=st.integers(0, 2**16),
)
def test_half_split_layout_is_transformers_apply_rotary_pos_emb(
    num_tokens, half, start, base, seed
):
    q = vectors(seed, 2, 3, num_tokens, 2 * half)  # (batch, heads, tokens, head_dim)
    k = vectors(seed + 1, 2, 3, num_tokens, 2 * half)
    positions = torch.arange(start, start + num_tokens).expand(2, -1)  # (batch, tokens)
    q_theirs, k_theirs = apply_rotary_pos_emb(q, k, *rope_cos_sin(positions, 2 * half, base))
    torch.testing.assert_close(apply_rope(q, positions[:, None], base), q_theirs, **EXACT)
    torch.testing.assert_close(apply_rope(k, positions[0], base), k_theirs, **EXACT)


@given(num_tokens=st.integers(1, 8), half=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_interleaved_layout_is_deepseeks_after_reordering(num_tokens, half, seed):
    """DeepSeek's apply_rotary_pos_emb_interleave rotates neighbours and returns evens then odds."""
    q, k = vectors(seed, 2, num_tokens, 2 * half), vectors(seed + 1, 2, num_tokens, 2 * half)
    positions = torch.arange(num_tokens)[None]
    q_theirs, k_theirs = apply_rotary_pos_emb_interleave(
        q[:, None], k[:, None], *rope_cos_sin(positions, 2 * half, 10000.0)
    )
    for ours, theirs in (
        (apply_rope_interleaved(q), q_theirs),
        (apply_rope_interleaved(k), k_theirs),
    ):
        evens_then_odds = torch.cat((ours[..., 0::2], ours[..., 1::2]), dim=-1)
        torch.testing.assert_close(evens_then_odds, theirs[:, 0], **EXACT)


def test_matches_llama_rotary_embedding_with_its_float32_angles():
    config = LlamaConfig(
        hidden_size=32,
        num_attention_heads=2,
        head_dim=16,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    x = vectors(0, 1, 2, 64, 16)
    positions = torch.arange(64)[None]
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)
    theirs, _ = apply_rotary_pos_emb(x, x, cos, sin)
    torch.testing.assert_close(apply_rope(x, positions), theirs, **FLOAT32_STEP)


@given(
    num_tokens=st.integers(1, 6),
    half=st.integers(1, 4),
    shift=st.integers(-50, 5000),
    base=bases,
    seed=st.integers(0, 2**16),
)
def test_scores_depend_only_on_relative_positions(num_tokens, half, shift, base, seed):
    q, k = vectors(seed, num_tokens, 2 * half), vectors(seed + 1, num_tokens, 2 * half)
    positions = torch.arange(num_tokens) * 7 + 60  # any positions, then all shifted
    for rope in (apply_rope, apply_rope_interleaved):
        scores = rope(q, positions, base) @ rope(k, positions, base).T
        shifted = rope(q, positions + shift, base) @ rope(k, positions + shift, base).T
        torch.testing.assert_close(shifted, scores, rtol=1e-9, atol=1e-9)


@given(num_tokens=st.integers(1, 6), half=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_rotation_keeps_lengths_and_position_zero_is_identity(num_tokens, half, seed):
    x = vectors(seed, num_tokens, 2 * half)
    rotated = apply_rope(x, torch.arange(num_tokens) + 3)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), **EXACT)
    torch.testing.assert_close(apply_rope(x, torch.zeros(num_tokens, dtype=torch.long)), x)


def rotated_as_complex_numbers(x: torch.Tensor, positions: torch.Tensor, base: float, layout):
    """The same rotation written another way, in float64: pair ``j`` as ``a + ib``, times
    ``e^(i p w_j)`` with ``w_j = base ** (-2 j / head_dim)``.

    ``layout`` says which numbers pair up: ``"half"`` pairs ``j`` with ``j + head_dim / 2``,
    ``"interleaved"`` pairs ``2 j`` with ``2 j + 1``; the result is put back the same way.
    """
    x = x.to(F64)
    half = x.shape[-1] // 2
    if layout == "half":
        pairs = torch.complex(x[..., :half], x[..., half:])
    else:
        pairs = torch.complex(x[..., 0::2], x[..., 1::2])
    speeds = torch.tensor([base ** (-2 * j / x.shape[-1]) for j in range(half)], dtype=F64)
    turned = pairs * torch.polar(torch.ones((), dtype=F64), positions.to(F64)[:, None] * speeds)
    if layout == "half":
        return torch.cat((turned.real, turned.imag), dim=-1)
    return torch.stack((turned.real, turned.imag), dim=-1).flatten(-2)


#: Per dtype: how far each output number may be from the float64 rotation of the same
#: input (numbers of size ~1), a few units in the last place of the dtype (the largest
#: error seen is under half of it). A wrong angle, a wrong pairing or no rotation at all
#: is off by ~1; angles computed in the input's dtype are off at large positions (at
#: 30000, by ~100 radians in bfloat16 and ~1e-3 in float32).
DTYPE_TOLERANCE = {torch.bfloat16: 3e-2, torch.float16: 4e-3, torch.float32: 2e-6}


@pytest.mark.parametrize("dtype", list(DTYPE_TOLERANCE), ids=str)
@pytest.mark.parametrize(
    ("rope", "layout"), [(apply_rope, "half"), (apply_rope_interleaved, "interleaved")]
)
@given(half=st.integers(1, 4), base=bases, seed=st.integers(0, 2**16))
def test_keeps_dtype_and_shape_and_rotates_by_the_right_angles_in_that_dtype(
    rope, layout, dtype, half, base, seed
):
    """Same shape and dtype as the input, and the rotation to the dtype's precision.

    The positions run from 0 to 30000, where an angle computed in float32 or bfloat16
    instead of float64 is visibly off.
    """
    positions = torch.tensor([0, 1, 2, 5, 17, 250, 4099, 30000])
    x = vectors(seed, 2, 3, len(positions), 2 * half).to(dtype)  # (batch, heads, tokens, dim)
    rotated = rope(x, positions, base)
    assert rotated.shape == x.shape
    assert rotated.dtype == dtype
    expected = rotated_as_complex_numbers(x, positions, base, layout)
    tolerance = DTYPE_TOLERANCE[dtype]
    torch.testing.assert_close(rotated.to(F64), expected, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("rope", [apply_rope, apply_rope_interleaved])
@pytest.mark.parametrize(
    ("x", "kwargs", "message"),
    [
        (torch.randn(3, 5), {}, r"head_dim must be even.*got head_dim=5 \(x of shape \(3, 5\)\)"),
        (torch.randn(4), {}, r"shape \(\.\.\., num_tokens, head_dim\), got a 1-D tensor"),
        (torch.ones(3, 4, dtype=torch.long), {}, r"floating-point tensor.*torch.int64"),
        (torch.randn(3, 4), {"positions": [0, 1]}, r"num_tokens=3, got shape \(2,\)"),
        (torch.randn(3, 4), {"positions": [0.0, 1.0, 2.0]}, r"integers.*torch.float32"),
        (torch.randn(3, 4), {"base": 1}, r"base must be a number greater than 1, got 1"),
    ],
)
def test_bad_input_names_what_was_expected_and_given(rope, x, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rope(x, **kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rotary_table_rows_are_the_angles_computed_for_those_positions(dtype):
    """A Rotary's cos/sin table, grown on demand, holds exactly what apply_rope computes."""
    from attention import rope

    rotary = Rotary(16, 500000.0)
    x = torch.zeros(1, dtype=dtype)
    for start, num_tokens in ((0, 3), (5, 1), (60, 10), (300, 1), (7, 200), (4095, 2)):
        cos, sin = rotary.cos_sin(start, num_tokens, x)
        positions = torch.arange(start, start + num_tokens)
        expected_cos, expected_sin = rope._cos_sin(positions, 16, 500000.0, dtype)
        assert cos.dtype == sin.dtype == dtype and cos.shape == (num_tokens, 8)
        assert torch.equal(cos, expected_cos) and torch.equal(sin, expected_sin)
    assert rotary._tables[(x.device, dtype)][0].shape[0] >= 4097
    # The table's rows and apply_rope's own computation: the same numbers
    q = vectors(0, 2, 70, 16).to(dtype)
    assert torch.equal(rotary(q), apply_rope(q, torch.arange(70), 500000.0))
    assert torch.equal(rotary(q[..., 9:, :], start=9), apply_rope(q, base=500000.0)[..., 9:, :])


def test_a_rotary_table_first_made_in_inference_mode_serves_training():
    """A table made under inference_mode is a plain tensor, so backward can save it later."""
    rotary = Rotary(22)
    with torch.inference_mode():
        rotary(vectors(0, 3, 22))
    q = vectors(1, 3, 22).requires_grad_()
    rotary(q).sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"head_dim": 0}, r"^Rotary: head_dim must be at least 1, got 0"),
        ({"head_dim": 3}, r"^Rotary: RoPE rotates pairs of numbers.*int\(3 \* 1.0\) = 3"),
        ({"base": 1.0}, r"^Rotary: base must be a number greater than 1, got 1.0"),
        ({"partial_rotary_factor": 0.0}, r"^Rotary: partial_rotary_factor must be a number in"),
        ({"scaling": {"rope_type": "linear"}}, r"^Rotary: scaling with rope_type 'linear' needs"),
    ],
)
def test_rotary_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Rotary(**({"head_dim": 8} | kwargs))


def test_rotary_with_a_scaling_and_a_partial_factor_is_apply_ropes():
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
    rotary = Rotary(16, 100.0, scaling, partial_rotary_factor=0.5)
    q = vectors(2, 12, 16)
    expected = apply_rope(q, base=100.0, scaling=scaling, partial_rotary_factor=0.5)
    assert rotary.rotary_dim == 8 and torch.equal(rotary(q), expected)


# --- rope_frequencies against transformers' ROPE_INIT_FUNCTIONS (tests/rope_reference.py) ---


TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "proportional")


#: Speeds as transformers ships them (float32) against ours: float32's rounding of
#: ``base ** (i / dim)`` is under 1e-6 relative; 0 stays 0 (proportional).
SPEEDS_IN_FLOAT32 = {"rtol": 1e-5, "atol": 0.0}


@st.composite
def scalings(draw: st.DrawFn, rope_type: str | None = None) -> tuple[int, float, dict, int | None]:
    """``(head_dim, base, scaling, num_tokens)``: any type, with its optional keys or not."""
    rope_type = rope_type or draw(st.sampled_from(TYPES))
    head_dim = 2 * draw(st.integers(2, 64))
    base = draw(st.sampled_from([10000.0, 150000.0, 500000.0, 1e6]))
    factor = draw(st.sampled_from([1.0, 2.0, 8.0, 32.0, 40.0]) | st.floats(1.0, 64.0))
    original = draw(st.sampled_from([64, 4096, 8192]) | st.integers(8, 10000))
    scaling: dict = {"rope_type": rope_type}
    if rope_type in ("linear", "dynamic", "yarn", "llama3"):
        scaling["factor"] = factor
    if rope_type in ("dynamic", "yarn", "llama3"):
        scaling["original_max_position_embeddings"] = original
    if rope_type == "yarn":
        options = {
            "beta_fast": st.sampled_from([32.0, 16.0, 64.0]),
            "beta_slow": st.sampled_from([1.0, 0.5, 2.0]),
            "truncate": st.booleans(),
            "attention_factor": st.floats(0.5, 2.0),
            "mscale": st.sampled_from([0.0, 0.707, 1.0]),
            "mscale_all_dim": st.sampled_from([0.0, 0.707, 1.0]),
        }
        for name, values in options.items():
            if draw(st.booleans()):
                scaling[name] = draw(values)
    if rope_type == "llama3":
        scaling["low_freq_factor"] = draw(st.sampled_from([1.0, 2.0]))
        scaling["high_freq_factor"] = scaling["low_freq_factor"] + draw(st.sampled_from([1, 3.0]))
    if rope_type == "proportional":
        scaling["partial_rotary_factor"] = draw(
            st.sampled_from([0.25, 0.5, 1.0]) | st.floats(0.01, 1)
        )
        if draw(st.booleans()):
            scaling["factor"] = factor
    elif draw(st.booleans()):
        fraction = draw(st.sampled_from([0.25, 0.5, 0.75]))
        rotary_dim = int(head_dim * fraction)
        if rotary_dim % 2 == 0 and rotary_dim >= 4:
            scaling["partial_rotary_factor"] = fraction
    num_tokens = None
    if rope_type == "dynamic":
        num_tokens = draw(st.none() | st.integers(1, 4 * original))
    if draw(st.booleans()):
        scaling["rope_theta"] = base
    return head_dim, base, scaling, num_tokens


@given(case=scalings())
def test_rope_frequencies_are_transformers_formulas_run_in_float64(case):
    head_dim, base, scaling, num_tokens = case
    inv_freq, attention_factor = rope_frequencies(head_dim, base, scaling, num_tokens)
    config = rope_config(head_dim, base, scaling)
    theirs, their_factor = their_frequencies(config, float64=True, num_tokens=num_tokens)
    assert inv_freq.dtype == F64 and isinstance(attention_factor, float)
    torch.testing.assert_close(inv_freq, theirs, **EXACT)
    assert attention_factor == pytest.approx(their_factor, rel=1e-12)


@given(case=scalings())
def test_rope_frequencies_match_rope_init_functions_as_shipped(case):
    head_dim, base, scaling, num_tokens = case
    inv_freq, attention_factor = rope_frequencies(head_dim, base, scaling, num_tokens)
    config = rope_config(head_dim, base, scaling)
    theirs, their_factor = their_frequencies(config, float64=False, num_tokens=num_tokens)
    torch.testing.assert_close(inv_freq, theirs.to(F64), **SPEEDS_IN_FLOAT32)
    assert attention_factor == pytest.approx(their_factor, rel=1e-12)


def test_each_type_changes_the_speeds_it_should():
    """A sanity check of the cases the property tests draw, with the released values."""
    default, _ = rope_frequencies(64, 500000.0)
    llama31 = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    scaled, factor = rope_frequencies(64, 500000.0, llama31)
    wavelength = 2 * math.pi / default
    assert factor == 1.0
    fast, slow = wavelength < 8192 / 4, wavelength > 8192
    assert torch.equal(scaled[fast], default[fast]) and fast.any()
    torch.testing.assert_close(scaled[slow], default[slow] / 8, **EXACT)
    between = ~fast & ~slow
    assert between.any() and (scaled[between] < default[between]).all()
    assert (scaled[between] > default[between] / 8).all()


# --- apply_rope with a scaling, against transformers' rotary embeddings and functions -----


def test_gpt_oss_yarn_rotation_matches_gpt_oss_rotary_embedding():
    """gpt-oss's released RoPE: yarn, factor 32 over 4096 positions, no truncation."""
    yarn = {
        "rope_type": "yarn",
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
        "original_max_position_embeddings": 4096,
    }
    config = modeling_gpt_oss.GptOssConfig(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=131072,
        rope_parameters={**yarn, "rope_theta": 150000.0},
    )
    q = vectors(0, 2, 4, 7, 16)  # (batch, heads, tokens, head_dim)
    positions = torch.tensor([[0, 1, 2, 3, 4096, 70000, 131071]]).expand(2, -1)
    ours = apply_rope(q, positions[:, None], 150000.0, yarn)
    rotate = modeling_gpt_oss.apply_rotary_pos_emb
    # gpt-oss's cos and sin have head_dim / 2 columns (it splits the head itself)
    inv_freq, scaling = their_frequencies(config, float64=True)
    cos, sin = (t[..., :8] for t in their_cos_sin(inv_freq, scaling, positions))
    torch.testing.assert_close(ours, rotate(q, q, cos, sin)[0], **EXACT)
    assert scaling == pytest.approx(0.1 * math.log(32) + 1)
    # As shipped, float32 angles are within 1e-5 only at small positions (at 131071 they
    # are off by ~1e-2 radians): the first four tokens
    cos, sin = modeling_gpt_oss.GptOssRotaryEmbedding(config)(q, positions[:, :4])
    torch.testing.assert_close(
        ours[..., :4, :], rotate(q[..., :4, :], q[..., :4, :], cos, sin)[0], **FLOAT32_STEP
    )


def gemma4_config() -> modeling_gemma4.Gemma4TextConfig:
    """Gemma 4's layer pattern in miniature: a sliding layer and a global one whose head
    is twice as wide and rotates with proportional RoPE over a quarter of its pairs.
    transformers' default rope_parameters for Gemma 4 are those of the released models.
    """
    return modeling_gemma4.Gemma4TextConfig(
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        global_head_dim=16,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        intermediate_size=64,
        vocab_size=100,
    )


def test_gemma4_proportional_rotation_matches_gemma4_rotary_embedding():
    config = gemma4_config()
    params = config.rope_parameters["full_attention"]
    assert params["rope_type"] == "proportional" and params["partial_rotary_factor"] == 0.25
    scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    base = params["rope_theta"]
    x = vectors(1, 1, 2, 6, 16)
    positions = torch.tensor([[0, 1, 5, 300, 9000, 250000]])
    ours = apply_rope(x, positions[:, None], base, scaling)
    layer = config.per_layer_config["full_attention"]
    inv_freq, factor = their_frequencies(layer, float64=True, layer_type="full_attention")
    rotate = modeling_gemma4.apply_rotary_pos_emb
    torch.testing.assert_close(
        ours, rotate(x, *their_cos_sin(inv_freq, factor, positions)), **EXACT
    )
    rotary = modeling_gemma4.Gemma4TextRotaryEmbedding(config)
    cos, sin = rotary(x, positions[:, :3], "full_attention")  # float32: small positions
    torch.testing.assert_close(ours[..., :3, :], rotate(x[..., :3, :], cos, sin), **FLOAT32_STEP)
    # Three quarters of the pairs do not turn: numbers 2..7 and 10..15 pass unchanged
    still = torch.cat((torch.arange(2, 8), torch.arange(10, 16)))
    assert torch.equal(ours[..., still], x[..., still])


@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_partial_rotary_matches_qwen3_next_apply_rotary_pos_emb(fraction):
    config = modeling_qwen3_next.Qwen3NextConfig(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        partial_rotary_factor=fraction,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    assert config.rope_parameters["partial_rotary_factor"] == fraction
    q, k = vectors(2, 1, 2, 5, 32), vectors(3, 1, 1, 5, 32)
    positions = torch.tensor([[0, 3, 17, 1000, 40000]])
    rotate = modeling_qwen3_next.apply_rotary_pos_emb
    inv_freq, factor = their_frequencies(config, float64=True)
    q_theirs, k_theirs = rotate(q, k, *their_cos_sin(inv_freq, factor, positions))
    ours_q = apply_rope(q, positions[:, None], 10000.0, partial_rotary_factor=fraction)
    ours_k = apply_rope(k, positions[:, None], 10000.0, partial_rotary_factor=fraction)
    torch.testing.assert_close(ours_q, q_theirs, **EXACT)
    torch.testing.assert_close(ours_k, k_theirs, **EXACT)
    cos, sin = modeling_qwen3_next.Qwen3NextRotaryEmbedding(config)(q, positions[:, :3])
    small = rotate(q[..., :3, :], k[..., :3, :], cos, sin)[0]  # float32: small positions
    torch.testing.assert_close(ours_q[..., :3, :], small, **FLOAT32_STEP)
    rotary_dim = int(32 * fraction)
    assert torch.equal(ours_q[..., rotary_dim:], q[..., rotary_dim:])


# --- scalings' properties: factor 1 is plain RoPE, partial rotary, relative scores, tables ---


@given(case=scalings(), seed=st.integers(0, 2**16))
def test_a_factor_of_one_is_plain_rope(case, seed):
    head_dim, base, scaling, _ = case
    scaling = {**scaling, "factor": 1.0}
    if scaling["rope_type"] == "default":
        del scaling["factor"]
    if scaling["rope_type"] == "proportional":
        scaling["partial_rotary_factor"] = 1.0
    if scaling["rope_type"] == "yarn":  # an explicit attention factor is not scaling
        scaling.pop("attention_factor", None)
    fraction = scaling.pop("partial_rotary_factor", 1.0)
    x = vectors(seed, 5, head_dim)
    positions = torch.tensor([0, 1, 7, 4000, 100000])
    if scaling["rope_type"] == "dynamic":
        # transformers' dynamic NTK still stretches past the original context with a
        # factor of 1: base * (num_tokens / original) ** (dim / (dim - 2)). Within it:
        positions = positions.clamp(max=scaling["original_max_position_embeddings"] - 1)
    plain = apply_rope(x, positions, base, partial_rotary_factor=fraction)
    scaled = apply_rope(x, positions, base, scaling, partial_rotary_factor=fraction)
    # YaRN's blend x * (1 - k) + x * k and llama3's may round the speed by an ulp, which
    # at position 100000 moves the angle by ~1e-11: hence 1e-10, not bit for bit.
    torch.testing.assert_close(scaled, plain, rtol=1e-10, atol=1e-10)
    if fraction == 1.0:
        plain = apply_rope_interleaved(x, positions, base)
        interleaved = apply_rope_interleaved(x, positions, base, scaling)
        torch.testing.assert_close(interleaved, plain, rtol=1e-10, atol=1e-10)


@given(
    seed=st.integers(0, 2**16),
    half=st.integers(1, 8),
    extra=st.integers(1, 12),
    scaling=st.sampled_from([None, MODULE_SCALINGS["yarn"], MODULE_SCALINGS["llama3"]]),
)
def test_partial_rotary_rotates_the_first_dims_as_a_head_of_their_own(seed, half, extra, scaling):
    """The first rotary_dim numbers turn as apply_rope turns a head of that size; the
    others pass unchanged."""
    rotary_dim, head_dim = 2 * half, 2 * half + extra
    fraction = rotary_dim / head_dim
    if int(head_dim * fraction) != rotary_dim:  # float rounding of the ratio
        return
    x = vectors(seed, 2, 6, head_dim)
    positions = torch.tensor([0, 2, 9, 33, 500, 7000])
    rotated = apply_rope(x, positions, 10000.0, scaling, partial_rotary_factor=fraction)
    expected = apply_rope(x[..., :rotary_dim], positions, 10000.0, scaling)
    assert torch.equal(rotated[..., :rotary_dim], expected)
    assert torch.equal(rotated[..., rotary_dim:], x[..., rotary_dim:])


@given(
    seed=st.integers(0, 2**16),
    shift=st.integers(-50, 5000),
    name=st.sampled_from(["linear", "yarn", "llama3"]),
)
def test_static_scalings_keep_scores_relative(seed, shift, name):
    scaling = MODULE_SCALINGS[name]
    q, k = vectors(seed, 6, 16), vectors(seed + 1, 6, 16)
    positions = torch.arange(6) * 11 + 40
    scores = apply_rope(q, positions, scaling=scaling) @ apply_rope(k, positions, scaling=scaling).T
    shifted = (
        apply_rope(q, positions + shift, scaling=scaling)
        @ apply_rope(k, positions + shift, scaling=scaling).T
    )
    torch.testing.assert_close(shifted, scores, rtol=1e-9, atol=1e-9)


def test_each_scaling_gets_its_own_table():
    """Each module's cos/sin table is its own: its scaling's and its rotary dim's."""
    x = vectors(10, 2, 12, 32)
    results = {}
    for name, scaling in [("plain", None), *MODULE_SCALINGS.items()]:
        for fraction in (1.0, 0.5):
            gqa = scaled_gqa(scaling, seed=5, partial_rotary_factor=fraction)
            results[name, fraction] = gqa(x)
    assert len({tuple(out.flatten().tolist()) for out in results.values()}) == len(results)
    # and each equals a module built afresh
    for (name, fraction), out in results.items():
        scaling = None if name == "plain" else MODULE_SCALINGS[name]
        assert torch.equal(scaled_gqa(scaling, seed=5, partial_rotary_factor=fraction)(x), out)


def test_dynamic_apply_rope_scales_for_the_largest_position():
    """apply_rope's dynamic NTK uses max(positions) + 1, as transformers' forward does."""
    scaling = MODULE_SCALINGS["dynamic"]
    x = vectors(11, 3, 16)
    for positions in ([0, 1, 2], [3, 4, 20], [100, 5, 6]):
        length = max(positions) + 1
        inv_freq, _ = rope_frequencies(16, 10000.0, scaling, num_tokens=length)
        angles = torch.tensor(positions, dtype=F64)[:, None] * inv_freq
        cos, sin = angles.cos(), angles.sin()
        expected = torch.cat((x[:, :8] * cos - x[:, 8:] * sin, x[:, 8:] * cos + x[:, :8] * sin), -1)
        torch.testing.assert_close(apply_rope(x, positions, scaling=scaling), expected, **EXACT)
    # without positions: the number of tokens
    long = vectors(12, 20, 16)
    assert torch.equal(
        apply_rope(long, scaling=scaling), apply_rope(long, torch.arange(20), scaling=scaling)
    )


# --- scalings' errors ---------------------------------------------------------------------


LLAMA3 = MODULE_SCALINGS["llama3"]


YARN = MODULE_SCALINGS["yarn"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"scaling": {"rope_type": "nope"}},
            r"scaling\['rope_type'\] must be one of 'default', 'linear'.*got 'nope'",
        ),
        ({"scaling": {"rope_type": "longrope", "factor": 2.0}}, r"must be one of .*got 'longrope'"),
        ({"scaling": {"factor": 2.0}}, r"needs a 'rope_type' key.*got the keys \['factor'\]"),
        (
            {"scaling": {"rope_type": "linear", "factor": 0.5}},
            r"scaling\['factor'\] must be a number >= 1 .*got 0.5",
        ),
        (
            {"scaling": {"rope_type": "linear"}},
            r"rope_type 'linear' needs the keys \['factor'\], missing \['factor'\]",
        ),
        (
            {"scaling": {"rope_type": "yarn", "factor": 4.0}},
            r"missing \['original_max_position_embeddings'\]",
        ),
        (
            {"scaling": {**LLAMA3, "high_freq_factor": 1.0}},
            r"high_freq_factor'\] must be a number greater than "
            r"scaling\['low_freq_factor'\]=1.0, got 1.0",
        ),
        (
            {"scaling": {**YARN, "beta_fast": 0.5}},
            r"beta_fast'\].*must be at least scaling\['beta_slow'\], "
            r"got beta_fast=0.5 and beta_slow=1.0",
        ),
        (
            {"scaling": {**YARN, "original_max_position_embeddings": 0}},
            r"original_max_position_embeddings'\] must be at least 1, got 0",
        ),
        (
            {"scaling": {**YARN, "low_freq_factor": 1.0}},
            r"rope_type 'yarn' takes the keys \[.*\], got unknown keys \['low_freq_factor'\]",
        ),
        (
            {"scaling": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}},
            r"scaling\['rope_theta'\]=500000.0 differs from base=10000.0",
        ),
        ({"partial_rotary_factor": 0.3}, r"rotary dimension must be even.*int\(16 \* 0.3\) = 4"),
        (
            {"partial_rotary_factor": 0.2},
            r"rotary dimension must be even and at least 2, "
            r"got int\(head_dim \* partial_rotary_factor\) = int\(16 \* 0.2\) = 3",
        ),
        (
            {"partial_rotary_factor": 0.0},
            r"partial_rotary_factor must be a number in \(0, 1\], got 0.0",
        ),
        (
            {"partial_rotary_factor": 1.5},
            r"partial_rotary_factor must be a number in \(0, 1\], got 1.5",
        ),
        (
            {"scaling": {"rope_type": "default", "partial_rotary_factor": 0.5}},
            r"scaling\['partial_rotary_factor'\]=0.5 differs from partial_rotary_factor=1.0",
        ),
        (
            {
                "scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
                "partial_rotary_factor": 0.5,
            },
            r"proportional RoPE rotates the whole head",
        ),
        (
            {
                "scaling": {
                    "rope_type": "dynamic",
                    "factor": 2.0,
                    "original_max_position_embeddings": 8,
                },
                "partial_rotary_factor": 0.125,
            },
            r"dynamic NTK.*at least 4, got 2",
        ),
    ],
)
def test_bad_scalings_name_what_was_expected_and_given(kwargs, message):
    x = vectors(0, 3, 16)
    if kwargs.get("partial_rotary_factor") == 0.3:  # 4.8 -> 4 is even: accepted
        assert apply_rope(x, **kwargs).shape == x.shape
        return
    with pytest.raises(ValueError, match=message):
        apply_rope(x, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"scaling": [("rope_type", "linear")]},
            r"scaling must be a dict in transformers' rope_parameters form.*got list",
        ),
        (
            {"scaling": {"rope_type": "linear", "factor": True}},
            r"scaling\['factor'\] must be a number.*got True",
        ),
        ({"scaling": {**YARN, "truncate": 1}}, r"truncate'\] must be True or False"),
        ({"base": "10000"}, r"base must be a number greater than 1, got '10000' of type str"),
    ],
)
def test_scalings_of_a_wrong_type_raise_a_type_error(kwargs, message):
    with pytest.raises(TypeError, match=message):
        apply_rope(vectors(0, 3, 16), **kwargs)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rope_frequencies(0), r"rope_frequencies: head_dim must be at least 1, got 0"),
        (
            lambda: rope_frequencies(7),
            r"rotary dimension must be even and at least 2, got .* = int\(7 \* 1.0\) = 7",
        ),
        (lambda: rope_frequencies(8, num_tokens=0), r"num_tokens must be at least 1, got 0"),
        (lambda: rope_frequencies(8, base=1.0), r"base must be a number greater than 1, got 1.0"),
        (
            lambda: GroupedQueryAttention(8, 8, 4, num_heads=2, num_kv_heads=1, rope_scaling=YARN),
            r"GroupedQueryAttention: rope_scaling= is no longer taken; give rotary=Rotary",
        ),
        (
            lambda: Rotary(8, 10.0, partial_rotary_factor=0.125),
            r"Rotary: RoPE rotates pairs.* = int\(8 \* 0.125\) = 1",
        ),
        (
            lambda: Rotary(8, 10.0, {"rope_type": "nope"}),
            r"Rotary: scaling\['rope_type'\] must be one of .*got 'nope'",
        ),
        (
            lambda: Rotary(4, scaling={**YARN, "rope_theta": 50.0}, interleaved=True),
            r"Rotary: scaling\['rope_theta'\]=50.0 differs from base=10000.0",
        ),
        (
            lambda: MultiHeadLatentAttention(
                8,
                8,
                4,
                num_heads=1,
                kv_lora_rank=2,
                qk_nope_head_dim=2,
                qk_rope_head_dim=4,
                v_head_dim=2,
                rope_scaling=YARN,
            ),
            r"MultiHeadLatentAttention: rope_scaling= is no longer taken; give rotary=Rotary",
        ),
        (
            lambda: Rotary(4, partial_rotary_factor=0.5, interleaved=True),
            r"Rotary: an interleaved rotation turns the whole head, got partial_rotary_factor=0.5",
        ),
        (
            lambda: apply_rope_interleaved(
                torch.zeros(2, 8),
                scaling={"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5},
            ),
            r"apply_rope_interleaved: scaling\['partial_rotary_factor'\]=0.5 differs from "
            r"partial_rotary_factor=1.0",
        ),
    ],
)
def test_bad_arguments_elsewhere_name_what_was_expected_and_given(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_an_optional_key_given_as_none_is_absent_as_in_transformers():
    spelled_out = {**YARN, "attention_factor": None, "mscale": None, "beta_fast": None}
    absent = {k: v for k, v in YARN.items() if k != "beta_fast"}
    ours = rope_frequencies(16, 10000.0, spelled_out)
    assert torch.equal(ours[0], rope_frequencies(16, 10000.0, absent)[0])
    assert ours[1] == rope_frequencies(16, 10000.0, absent)[1]
    config = rope_config(16, 10000.0, spelled_out)
    theirs, factor = their_frequencies(config, float64=True)
    torch.testing.assert_close(ours[0], theirs, **EXACT)
    assert ours[1] == pytest.approx(factor, rel=1e-12)
    with pytest.raises(TypeError, match=r"scaling\['factor'\] must be a number >= 1.*got None"):
        rope_frequencies(16, 10000.0, {**YARN, "factor": None})


def test_odd_head_dim_with_an_even_rotary_part_is_accepted():
    """transformers allows an odd head_dim when the rotated part is even (Phi-style)."""
    x = vectors(13, 4, 9)
    rotated = apply_rope(x, partial_rotary_factor=0.5)  # int(4.5) = 4 rotate
    assert torch.equal(rotated[..., 4:], x[..., 4:])
    gqa = rotary_gqa(
        18, 18, 4, num_heads=2, num_kv_heads=1, rope_base=100.0, partial_rotary_factor=0.5
    )
    assert gqa(torch.zeros(1, 4, 18)).shape == (1, 4, 18)
