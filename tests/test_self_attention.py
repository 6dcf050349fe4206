"""SelfAttentionV1 and SelfAttentionV2, section 3.4: self-attention with trainable weights.

The book's numbers under its seeds, parity with ``scaled_dot_product_attention``
(float64, to 1e-10), permutation equivariance, ``SelfAttentionV1.from_v2``, and, from
:class:`contracts.ModuleContract`, the properties and errors every module shares.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from contracts import ModuleContract
from helpers import (
    RANKS,
    SELF_ATTENTION,
    assert_book,
    assert_tight,
    build,
    expect,
    make,
    make_input,
    queries_keys_values,
    shapes,
    with_edge_shapes,
)
from hypothesis import given
from torch.nn import functional as F

from attention import (
    INPUTS,
    CausalAttention,
    SelfAttentionV1,
    SelfAttentionV2,
    scaled_dot_product_weights,
)

pytestmark = pytest.mark.usefixtures("single_thread")


class TestSelfAttentionV1AndV2(ModuleContract):
    classes = SELF_ATTENTION

    @RANKS
    @given(shape=shapes())
    @with_edge_shapes()
    def test_equals_sdpa_without_mask(self, cls, rank, shape):
        sa = build(cls, shape)
        x = make_input(shape, rank=rank)
        assert_tight(sa(x), F.scaled_dot_product_attention(*queries_keys_values(sa, x)))

    @RANKS
    @given(shape=shapes())
    def test_is_permutation_equivariant(self, cls, rank, shape):
        module = build(cls, shape)
        x = make_input(shape, rank=rank)
        perm = torch.randperm(shape.num_tokens, generator=torch.Generator().manual_seed(shape.seed))
        torch.testing.assert_close(module(x[..., perm, :]), module(x)[..., perm, :])

    def bad_inputs(self, cls: type) -> dict[str, tuple[object, str]]:
        """Besides, inputs neither 2-D (num_tokens, d_in) nor 3-D (batch, num_tokens, d_in)."""
        cases = super().bad_inputs(cls)
        for shape in [(1, 2, 4, 3), (3,)]:
            cases[f"{len(shape)}d_input"] = (
                torch.rand(shape),
                f"{cls.__name__}: expected a 2-D (num_tokens, d_in) or 3-D "
                f"(batch, num_tokens, d_in) input with d_in=3, "
                f"got a {len(shape)}-D tensor of shape {shape}.",
            )
        return cases


# ---------------------------------------------------------------------------------------
# The book's numbers
# ---------------------------------------------------------------------------------------

BATCH = torch.stack((INPUTS, INPUTS))  # (2, 6, 3), the book's batch
V1_OUTPUT = [
    [0.2996, 0.8053],
    [0.3061, 0.8210],
    [0.3058, 0.8203],
    [0.2948, 0.7939],
    [0.2927, 0.7891],
    [0.2990, 0.8040],
]


def test_section_3_4_step_by_step_with_the_books_weight_matrices(seeded):
    seeded(123)
    W_query, W_key, W_value = torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)
    query_2 = INPUTS[1] @ W_query
    keys = INPUTS @ W_key
    values = INPUTS @ W_value
    assert_book(query_2, [0.4306, 1.4551])
    assert_book(query_2 @ keys[1], 1.8524)  # omega_22
    assert_book(query_2 @ keys.T, [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])
    weights = scaled_dot_product_weights(query_2.unsqueeze(0), keys)[0]
    assert_book(weights, [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])
    assert_book(weights @ values, [0.3061, 0.8210])


def test_self_attention_v1_draws_the_books_weight_matrices(seeded):
    seeded(123)
    expected = [torch.rand(3, 2) for _ in range(3)]
    seeded(123)
    sa_v1 = SelfAttentionV1(3, 2)
    for name, matrix in zip(("W_query", "W_key", "W_value"), expected, strict=True):
        assert torch.equal(getattr(sa_v1, name), matrix), name


def test_self_attention_v1_output_seed_123(seeded):
    seeded(123)
    assert_book(SelfAttentionV1(3, 2)(INPUTS), V1_OUTPUT)


def test_self_attention_v1_output_is_the_same_for_each_item_of_a_batch(seeded):
    seeded(123)
    assert_book(SelfAttentionV1(3, 2)(BATCH), [V1_OUTPUT, V1_OUTPUT])


def test_self_attention_v2_output_row_0_seed_789(seeded):
    seeded(789)
    assert_book(SelfAttentionV2(3, 2)(INPUTS)[0], [-0.0739, 0.0713])


def test_self_attention_v2_attention_weights_row_0_seed_789(seeded):
    seeded(789)
    weights = SelfAttentionV2(3, 2).attention_weights(INPUTS)
    assert_book(weights[0], [0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510])


# ---------------------------------------------------------------------------------------
# Exercise 3.1: SelfAttentionV1.from_v2
# ---------------------------------------------------------------------------------------


def test_exercise_3_1_v1_from_v2_reproduces_v2(seeded):
    seeded(123)
    sa_v2 = SelfAttentionV2(3, 2)
    sa_v1 = SelfAttentionV1.from_v2(sa_v2)
    assert_book(sa_v1(INPUTS)[0], [-0.5337, -0.1051])
    torch.testing.assert_close(sa_v1(INPUTS), sa_v2(INPUTS))


def test_exercise_3_1_from_v2_leaves_the_global_generator_alone(seeded):
    seeded(123)
    sa_v2 = SelfAttentionV2(3, 2)
    before = torch.get_rng_state()
    SelfAttentionV1.from_v2(sa_v2)
    assert torch.equal(torch.get_rng_state(), before)


@given(shape=shapes())
@with_edge_shapes()
def test_v1_from_v2_equals_v2(shape):
    sa_v2 = build(SelfAttentionV2, dataclasses.replace(shape, qkv_bias=False))
    sa_v1 = SelfAttentionV1.from_v2(sa_v2)
    assert sa_v1.W_query.dtype == torch.float64
    x = make_input(shape)
    assert_tight(sa_v1(x), sa_v2(x))


def test_from_v2_with_qkv_bias_is_rejected():
    with expect(
        "SelfAttentionV1.from_v2: SelfAttentionV1 has no bias terms, so it can only copy a "
        "SelfAttentionV2 built with qkv_bias=False; this one has qkv_bias=True"
    ):
        SelfAttentionV1.from_v2(SelfAttentionV2(3, 2, qkv_bias=True))


@pytest.mark.parametrize("cls", [SelfAttentionV1, CausalAttention])
def test_from_v2_with_another_module_is_rejected(cls):
    with expect(
        f"SelfAttentionV1.from_v2: expected a SelfAttentionV2, got {cls.__name__}", TypeError
    ):
        SelfAttentionV1.from_v2(make(cls))
