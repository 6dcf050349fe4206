"""Every module computes what PyTorch's own attention kernels compute with the same weights.

The references are ``torch.nn.functional.scaled_dot_product_attention`` and
``torch.nn.MultiheadAttention``. Everything runs in float64, so agreement is checked
to 1e-10 over hypothesis-drawn shapes plus the corner cases in ``EDGE_SHAPES``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers import (
    CAUSAL,
    Shape,
    build,
    causal_mask,
    make_input,
    shapes,
    with_edge_shapes,
)
from hypothesis import given
from torch import nn
from torch.nn import functional as F

from attention import MultiHeadAttention, SelfAttentionV1

pytestmark = pytest.mark.usefixtures("single_thread")

TIGHT = {"atol": 1e-10, "rtol": 1e-10}


def assert_tight(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, **TIGHT)


# ---------------------------------------------------------------------------------------
# Single-head modules against scaled_dot_product_attention
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rank", [2, 3], ids=["2d", "3d"])
@given(shape=shapes())
@with_edge_shapes()
def test_self_attention_v1_equals_sdpa_without_mask(rank, shape):
    sa = build("SelfAttentionV1", shape)
    x = make_input(shape, rank=rank)
    expected = F.scaled_dot_product_attention(x @ sa.W_query, x @ sa.W_key, x @ sa.W_value)
    assert_tight(sa(x), expected)


@pytest.mark.parametrize("rank", [2, 3], ids=["2d", "3d"])
@given(shape=shapes())
@with_edge_shapes()
def test_self_attention_v2_equals_sdpa_without_mask(rank, shape):
    sa = build("SelfAttentionV2", shape)
    x = make_input(shape, rank=rank)
    expected = F.scaled_dot_product_attention(sa.W_query(x), sa.W_key(x), sa.W_value(x))
    assert_tight(sa(x), expected)


@given(shape=shapes())
@with_edge_shapes()
def test_v1_from_v2_equals_v2(shape):
    sa_v2 = build("SelfAttentionV2", dataclasses.replace(shape, qkv_bias=False))
    sa_v1 = SelfAttentionV1.from_v2(sa_v2)
    assert sa_v1.W_query.dtype == torch.float64
    x = make_input(shape)
    assert_tight(sa_v1(x), sa_v2(x))


@given(shape=shapes())
@with_edge_shapes()
def test_causal_attention_equals_causal_sdpa(shape):
    ca = build("CausalAttention", shape)
    x = make_input(shape)
    expected = F.scaled_dot_product_attention(
        ca.W_query(x), ca.W_key(x), ca.W_value(x), is_causal=True
    )
    assert_tight(ca(x), expected)


@given(shape=shapes())
@with_edge_shapes()
def test_head_equals_causal_sdpa(shape):
    head = build("Head", shape)
    x = make_input(shape)
    expected = F.scaled_dot_product_attention(
        head.query(x), head.key(x), head.value(x), is_causal=True
    )
    assert_tight(head(x), expected)


# ---------------------------------------------------------------------------------------
# MultiHeadAttention against SDPA on split heads and against nn.MultiheadAttention
# ---------------------------------------------------------------------------------------


def _split(projected: torch.Tensor, num_heads: int) -> torch.Tensor:
    batch, num_tokens, d_out = projected.shape
    return projected.reshape(batch, num_tokens, num_heads, d_out // num_heads).transpose(1, 2)


@given(shape=shapes())
@with_edge_shapes()
def test_multi_head_attention_equals_causal_sdpa_per_head_then_out_proj(shape):
    mha = build("MultiHeadAttention", shape)
    x = make_input(shape)
    heads = F.scaled_dot_product_attention(
        _split(mha.W_query(x), shape.num_heads),
        _split(mha.W_key(x), shape.num_heads),
        _split(mha.W_value(x), shape.num_heads),
        is_causal=True,
    )  # (batch, num_heads, num_tokens, head_dim)
    merged = heads.transpose(1, 2).reshape(shape.batch, shape.num_tokens, shape.d_out)
    assert_tight(mha(x), mha.out_proj(merged))


def _torch_multihead(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention holding ``mha``'s weights (needs d_in == d_out)."""
    reference = nn.MultiheadAttention(
        mha.d_out, mha.num_heads, bias=True, batch_first=True, dtype=torch.float64
    )
    projections = (mha.W_query, mha.W_key, mha.W_value)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
        if mha.W_query.bias is None:
            reference.in_proj_bias.zero_()
        else:
            reference.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        reference.out_proj.weight.copy_(mha.out_proj.weight)
        reference.out_proj.bias.copy_(mha.out_proj.bias)
    return reference


@given(shape=shapes(square=True))
@with_edge_shapes(square=True)
def test_multi_head_attention_equals_torch_multihead_attention(shape):
    mha = build("MultiHeadAttention", shape)
    reference = _torch_multihead(mha)
    x = make_input(shape)
    expected, _ = reference(x, x, x, attn_mask=causal_mask(shape.num_tokens), need_weights=False)
    assert_tight(mha(x), expected)


@given(shape=shapes(square=True))
@with_edge_shapes(square=True)
def test_multi_head_attention_weights_equal_torch_per_head_weights(shape):
    mha = build("MultiHeadAttention", shape)
    reference = _torch_multihead(mha)
    x = make_input(shape)
    _, expected = reference(
        x,
        x,
        x,
        attn_mask=causal_mask(shape.num_tokens),
        need_weights=True,
        average_attn_weights=False,
    )  # (batch, num_heads, num_tokens, num_tokens)
    assert_tight(mha.attention_weights(x), expected)


# ---------------------------------------------------------------------------------------
# The wrapper is a MultiHeadAttention with concatenated head weights and no mixing
# ---------------------------------------------------------------------------------------


def _fused_by_hand(wrapper) -> MultiHeadAttention:
    """A MultiHeadAttention whose projections stack the wrapper's heads, out_proj = I."""
    heads = wrapper.heads
    with torch.random.fork_rng(devices=[]):
        mha = MultiHeadAttention(
            wrapper.d_in,
            wrapper.num_heads * wrapper.d_out,
            wrapper.context_length,
            0.0,
            wrapper.num_heads,
            qkv_bias=heads[0].W_query.bias is not None,
        ).double()
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            fused = getattr(mha, name)
            fused.weight.copy_(torch.cat([getattr(head, name).weight for head in heads], dim=0))
            if fused.bias is not None:
                fused.bias.copy_(torch.cat([getattr(head, name).bias for head in heads]))
        nn.init.eye_(mha.out_proj.weight)
        nn.init.zeros_(mha.out_proj.bias)
    return mha


@given(shape=shapes())
@with_edge_shapes()
def test_hand_fused_multi_head_attention_equals_wrapper(shape):
    wrapper = build("MultiHeadAttentionWrapper", shape)
    mha = _fused_by_hand(wrapper)
    x = make_input(shape)
    assert_tight(mha(x), wrapper(x))
    assert_tight(mha.attention_weights(x), wrapper.attention_weights(x))


@given(shape=shapes())
@with_edge_shapes()
def test_from_wrapper_equals_wrapper(shape):
    wrapper = build("MultiHeadAttentionWrapper", shape)
    mha = MultiHeadAttention.from_wrapper(wrapper)
    x = make_input(shape)
    assert_tight(mha(x), wrapper(x))
    assert_tight(mha.attention_weights(x), wrapper.attention_weights(x))


@given(shape=shapes())
@with_edge_shapes()
def test_from_wrapper_builds_the_hand_fused_weights(shape):
    wrapper = build("MultiHeadAttentionWrapper", shape)
    converted = MultiHeadAttention.from_wrapper(wrapper).state_dict()
    by_hand = _fused_by_hand(wrapper).state_dict()
    assert converted.keys() == by_hand.keys()
    for key, value in by_hand.items():
        assert torch.equal(converted[key], value), key


def test_from_wrapper_keeps_dropout_and_leaves_the_global_generator_alone():
    shape = Shape(2, 4, 4, d_in=3, num_heads=2, head_dim=2, qkv_bias=True, seed=5)
    wrapper = build("MultiHeadAttentionWrapper", shape, dropout=0.25)
    before = torch.get_rng_state()
    mha = MultiHeadAttention.from_wrapper(wrapper)
    assert torch.equal(torch.get_rng_state(), before)
    assert mha.dropout.p == 0.25


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_from_wrapper_copies_the_wrappers_training_mode(training):
    shape = Shape(2, 4, 4, d_in=3, num_heads=2, head_dim=2, qkv_bias=False, seed=6)
    wrapper = build("MultiHeadAttentionWrapper", shape, dropout=0.5).train(training)
    mha = MultiHeadAttention.from_wrapper(wrapper)
    assert mha.training is training
    if not training:  # dropout is off, so the two compute the same thing
        x = make_input(shape)
        assert_tight(mha(x), wrapper(x))


# ---------------------------------------------------------------------------------------
# Dropout is off in eval mode
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CAUSAL)
@given(shape=shapes())
@with_edge_shapes()
def test_eval_mode_with_dropout_equals_the_same_module_without_dropout(name, shape):
    with_dropout = build(name, shape, dropout=0.5).eval()
    without = build(name, shape, dropout=0.0)
    x = make_input(shape)
    assert torch.equal(with_dropout(x), without(x))
    assert torch.equal(with_dropout.attention_weights(x), without.attention_weights(x))
