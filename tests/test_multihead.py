"""MultiHeadAttentionWrapper and MultiHeadAttention, section 3.6.

The book's numbers, parity with ``scaled_dot_product_attention`` on split heads and
with ``nn.MultiheadAttention`` (float64, to 1e-10), the wrapper as a MultiHeadAttention
with concatenated head weights (``from_wrapper``), and, from
:class:`contracts.CausalContract`, the properties and errors every causal module shares.
"""

from __future__ import annotations

import pytest
import torch
from contracts import CausalContract
from helpers import (
    MULTI_HEAD,
    TRAIN_AND_EVAL,
    Shape,
    assert_book,
    assert_tight,
    build,
    causal_mask,
    expect,
    make,
    make_input,
    shapes,
    with_edge_shapes,
)
from hypothesis import given
from torch import nn
from torch.nn import functional as F

from attention import INPUTS, CausalAttention, MultiHeadAttention, MultiHeadAttentionWrapper

pytestmark = pytest.mark.usefixtures("single_thread")


class TestWrapperAndMultiHeadAttention(CausalContract):
    classes = MULTI_HEAD


# ---------------------------------------------------------------------------------------
# The book's numbers
# ---------------------------------------------------------------------------------------

BATCH = torch.stack((INPUTS, INPUTS))  # (2, 6, 3), the book's batch
WRAPPER_OUTPUT = [
    [-0.4519, 0.2216, 0.4772, 0.1063],
    [-0.5874, 0.0058, 0.5891, 0.3257],
    [-0.6300, -0.0632, 0.6202, 0.3860],
    [-0.5675, -0.0843, 0.5478, 0.3589],
    [-0.5526, -0.0981, 0.5321, 0.3428],
    [-0.5299, -0.1081, 0.5077, 0.3493],
]
MHA_OUTPUT = [
    [0.3190, 0.4858],
    [0.2943, 0.3897],
    [0.2856, 0.3593],
    [0.2693, 0.3873],
    [0.2639, 0.3928],
    [0.2575, 0.4028],
]


@pytest.mark.parametrize(
    ("cls", "shape", "published"),
    [
        (MultiHeadAttentionWrapper, (2, 6, 4), WRAPPER_OUTPUT),  # two heads of 2, side by side
        (MultiHeadAttention, (2, 6, 2), MHA_OUTPUT),  # two heads of 1, mixed by out_proj
    ],
    ids=["MultiHeadAttentionWrapper", "MultiHeadAttention"],
)
def test_output_seed_123(seeded, cls, shape, published):
    seeded(123)
    module = cls(3, 2, context_length=6, dropout=0.0, num_heads=2)
    out = module(BATCH)
    assert out.shape == shape
    assert_book(out, [published, published])


def test_exercise_3_2_wrapper_with_d_out_1_gives_two_output_features():
    wrapper = MultiHeadAttentionWrapper(3, 1, context_length=6, dropout=0.0, num_heads=2)
    assert wrapper(BATCH).shape == (2, 6, 2)


def test_exercise_3_3_gpt2_sized_multi_head_attention():
    gpt2 = MultiHeadAttention(768, 768, context_length=1024, dropout=0.0, num_heads=12)
    assert sum(p.numel() for p in gpt2.parameters()) == 2_360_064
    assert (gpt2.num_heads, gpt2.head_dim) == (12, 64)
    assert gpt2.mask.shape == (1024, 1024)


# ---------------------------------------------------------------------------------------
# MultiHeadAttention against SDPA on split heads and against nn.MultiheadAttention
# ---------------------------------------------------------------------------------------


def _split(projected: torch.Tensor, num_heads: int) -> torch.Tensor:
    batch, num_tokens, d_out = projected.shape
    return projected.reshape(batch, num_tokens, num_heads, d_out // num_heads).transpose(1, 2)


@given(shape=shapes())
@with_edge_shapes()
def test_multi_head_attention_equals_causal_sdpa_per_head_then_out_proj(shape):
    mha = build(MultiHeadAttention, shape)
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
    mha = build(MultiHeadAttention, shape)
    reference = _torch_multihead(mha)
    x = make_input(shape)
    expected, _ = reference(x, x, x, attn_mask=causal_mask(shape.num_tokens), need_weights=False)
    assert_tight(mha(x), expected)


@given(shape=shapes(square=True))
@with_edge_shapes(square=True)
def test_multi_head_attention_weights_equal_torch_per_head_weights(shape):
    mha = build(MultiHeadAttention, shape)
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


@pytest.mark.parametrize(
    "fuse", [_fused_by_hand, MultiHeadAttention.from_wrapper], ids=["by_hand", "from_wrapper"]
)
@given(shape=shapes())
@with_edge_shapes()
def test_fused_multi_head_attention_equals_wrapper(fuse, shape):
    wrapper = build(MultiHeadAttentionWrapper, shape)
    mha = fuse(wrapper)
    x = make_input(shape)
    assert_tight(mha(x), wrapper(x))
    assert_tight(mha.attention_weights(x), wrapper.attention_weights(x))


@given(shape=shapes())
@with_edge_shapes()
def test_from_wrapper_builds_the_hand_fused_weights(shape):
    wrapper = build(MultiHeadAttentionWrapper, shape)
    converted = MultiHeadAttention.from_wrapper(wrapper).state_dict()
    by_hand = _fused_by_hand(wrapper).state_dict()
    assert converted.keys() == by_hand.keys()
    for key, value in by_hand.items():
        assert torch.equal(converted[key], value), key


def test_from_wrapper_keeps_dropout_and_leaves_the_global_generator_alone():
    shape = Shape(2, 4, 4, d_in=3, num_heads=2, head_dim=2, qkv_bias=True, seed=5)
    wrapper = build(MultiHeadAttentionWrapper, shape, dropout=0.25)
    before = torch.get_rng_state()
    mha = MultiHeadAttention.from_wrapper(wrapper)
    assert torch.equal(torch.get_rng_state(), before)
    assert mha.dropout.p == 0.25


@TRAIN_AND_EVAL
def test_from_wrapper_copies_the_wrappers_training_mode(training):
    shape = Shape(2, 4, 4, d_in=3, num_heads=2, head_dim=2, qkv_bias=False, seed=6)
    wrapper = build(MultiHeadAttentionWrapper, shape, dropout=0.5).train(training)
    mha = MultiHeadAttention.from_wrapper(wrapper)
    assert mha.training is training
    if not training:  # dropout is off, so the two compute the same thing
        x = make_input(shape)
        assert_tight(mha(x), wrapper(x))


@pytest.mark.parametrize("cls", [MultiHeadAttention, CausalAttention])
def test_from_wrapper_with_another_module_is_rejected(cls):
    expected = "expected a MultiHeadAttentionWrapper"
    with expect(f"MultiHeadAttention.from_wrapper: {expected}, got {cls.__name__}", TypeError):
        MultiHeadAttention.from_wrapper(make(cls))


# ---------------------------------------------------------------------------------------
# Constructor arguments only these two have
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("d_out", "num_heads", "division"), [(5, 2, "5 / 2 = 2.5"), (2, 4, "2 / 4 = 0.5")]
)
def test_d_out_not_divisible_by_num_heads_is_rejected(d_out, num_heads, division):
    message = (
        f"MultiHeadAttention: d_out must be divisible by num_heads so each head gets "
        f"d_out // num_heads dimensions, got d_out={d_out} and num_heads={num_heads} "
        f"({division})"
    )
    with expect(message):
        make(MultiHeadAttention, d_out=d_out, num_heads=num_heads)


def test_wrapper_accepts_any_d_out_because_it_is_per_head():
    wrapper = make(MultiHeadAttentionWrapper, d_out=5, num_heads=2)
    assert wrapper(torch.rand(1, 4, 3)).shape == (1, 4, 10)
