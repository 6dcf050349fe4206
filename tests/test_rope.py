"""apply_rope and apply_rope_interleaved: transformers' layouts, relative positions, errors.

Tolerances (float64): EXACT (rtol 1e-10, atol 1e-12) against ``apply_rotary_pos_emb``
and ``apply_rotary_pos_emb_interleave`` given float64 cos/sin; FLOAT32_STEP (1e-5)
against ``LlamaRotaryEmbedding``'s own cos/sin, computed from float32 angles.
"""

from __future__ import annotations

import pytest
import torch
from hf_models import EXACT, FLOAT32_STEP, rope_cos_sin
from hypothesis import given
from hypothesis import strategies as st
from transformers import LlamaConfig
from transformers.models.deepseek_v3.modeling_deepseek_v3 import apply_rotary_pos_emb_interleave
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from attention import Rotary, apply_rope, apply_rope_interleaved

F64 = torch.float64
bases = st.sampled_from([10.0, 10000.0, 500000.0])


def vectors(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


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
