"""CausalAttention (section 3.5) and Karpathy's Head: one causal head, two spellings.

The book's numbers, Karpathy's formula and weight order, parity with causal
``scaled_dot_product_attention`` (float64, to 1e-10), and, from
:class:`contracts.CausalContract`, the properties and errors every causal module shares.
"""

from __future__ import annotations

import pytest
import torch
from contracts import CausalContract
from helpers import (
    SINGLE_HEAD_CAUSAL,
    assert_book,
    assert_tight,
    build,
    make_input,
    queries_keys_values,
    shapes,
    with_edge_shapes,
)
from hypothesis import given
from torch import nn
from torch.nn import functional as F

from attention import INPUTS, CausalAttention, Head, SelfAttentionV2

pytestmark = pytest.mark.usefixtures("single_thread")


class TestCausalAttentionAndHead(CausalContract):
    classes = SINGLE_HEAD_CAUSAL

    @given(shape=shapes())
    @with_edge_shapes()
    def test_equals_causal_sdpa(self, cls, shape):
        module = build(cls, shape)
        x = make_input(shape)
        expected = F.scaled_dot_product_attention(*queries_keys_values(module, x), is_causal=True)
        assert_tight(module(x), expected)


@given(shape=shapes())
def test_multiply_by_tril_and_renormalise_equals_the_minus_infinity_mask(shape):
    ca = build(CausalAttention, shape)
    sa_v2 = build(SelfAttentionV2, shape)
    incompatible = sa_v2.load_state_dict(ca.state_dict(), strict=False)
    assert incompatible.unexpected_keys == ["mask"] and not incompatible.missing_keys
    x = make_input(shape)
    unmasked = sa_v2.attention_weights(x)  # every token sees every token
    kept = unmasked * torch.ones(shape.num_tokens, shape.num_tokens).tril().double()
    renormalised = kept / kept.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(ca.attention_weights(x), renormalised)


# ---------------------------------------------------------------------------------------
# The book's numbers
# ---------------------------------------------------------------------------------------

BATCH = torch.stack((INPUTS, INPUTS))  # (2, 6, 3), the book's batch
BOOK_CAUSAL_WEIGHTS = [
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
    [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
    [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
    [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529],
]
CAUSAL_OUTPUT = [
    [-0.4519, 0.2216],
    [-0.5874, 0.0058],
    [-0.6300, -0.0632],
    [-0.5675, -0.0843],
    [-0.5526, -0.0981],
    [-0.5299, -0.1081],
]


def test_causal_weights_from_the_books_v2_weights_masked_with_minus_infinity(seeded):
    seeded(789)
    sa_v2 = SelfAttentionV2(3, 2)
    scores = sa_v2.W_query(INPUTS) @ sa_v2.W_key(INPUTS).T
    masked = scores.masked_fill(torch.ones(6, 6).triu(diagonal=1).bool(), float("-inf"))
    assert_book(torch.softmax(masked / 2**0.5, dim=-1), BOOK_CAUSAL_WEIGHTS)


def test_causal_attention_with_the_books_v2_weights_gives_the_books_causal_weights(seeded):
    seeded(789)
    sa_v2 = SelfAttentionV2(3, 2)
    ca = CausalAttention(3, 2, context_length=6, dropout=0.0)
    incompatible = ca.load_state_dict(sa_v2.state_dict(), strict=False)
    assert incompatible.missing_keys == ["mask"]
    assert not incompatible.unexpected_keys
    weights = ca.attention_weights(INPUTS.unsqueeze(0))[0]
    assert_book(weights, BOOK_CAUSAL_WEIGHTS)
    assert torch.all(weights.triu(diagonal=1) == 0)


def test_causal_attention_output_seed_123(seeded):
    seeded(123)
    ca = CausalAttention(3, 2, context_length=6, dropout=0.0)
    assert_book(ca(BATCH), [CAUSAL_OUTPUT, CAUSAL_OUTPUT])


# ---------------------------------------------------------------------------------------
# "Let's build GPT": Karpathy's Head
# ---------------------------------------------------------------------------------------


def test_head_key_query_value_are_linears_built_in_karpathys_order(seeded):
    seeded(1337)
    key, query, value = (nn.Linear(32, 16, bias=False) for _ in range(3))
    seeded(1337)
    head = Head(n_embd=32, head_size=16, block_size=8)
    assert torch.equal(head.key.weight, key.weight)
    assert torch.equal(head.query.weight, query.weight)
    assert torch.equal(head.value.weight, value.weight)
    assert head.key.bias is None and head.query.bias is None and head.value.bias is None


def test_head_output_follows_karpathys_formula(seeded):
    seeded(1337)
    head = Head(n_embd=32, head_size=16, block_size=8)
    x = torch.randn(4, 8, 32)  # (B, T, C)
    k, q, v = head.key(x), head.query(x), head.value(x)
    wei = q @ k.transpose(-2, -1) * 16**-0.5
    tril = torch.tril(torch.ones(8, 8))
    wei = F.softmax(wei.masked_fill(tril == 0, float("-inf")), dim=-1)
    torch.testing.assert_close(head.attention_weights(x), wei)
    torch.testing.assert_close(head(x), wei @ v)
