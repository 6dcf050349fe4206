"""scaled_dot_product_weights: softmax(Q K^T / sqrt(d_k)), with an optional mask."""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import F64, expect
from hypothesis import example, given
from hypothesis import strategies as st
from torch.nn import functional as F

from attention import scaled_dot_product_weights

pytestmark = pytest.mark.usefixtures("single_thread")


def test_gradcheck_passes_for_masked_scaled_dot_product_weights():
    generator = torch.Generator().manual_seed(8)
    queries = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64)
    keys = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64)
    mask = torch.ones(4, 4, dtype=torch.bool).triu(diagonal=1)
    assert torch.autograd.gradcheck(
        lambda q, k: scaled_dot_product_weights(q, k, allowed=~mask),
        (queries.requires_grad_(), keys.requires_grad_()),
    )


def test_scaled_dot_product_weights_with_different_d_k_is_rejected():
    with expect(
        "scaled_dot_product_weights: expected q and k with the same last dimension d_k, "
        "got q of shape (4, 2) and k of shape (4, 3)"
    ):
        scaled_dot_product_weights(torch.rand(4, 2), torch.rand(4, 3))


@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    num_queries=st.integers(1, 4),
    num_keys=st.integers(1, 5),
    d_k=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
@example(batch=[2, 3], num_queries=3, num_keys=4, d_k=2, seed=0)  # (batch, heads, n, n)
def test_weights_of_a_batch_are_sdpas_softmax_over_the_keys(
    batch, num_queries, num_keys, d_k, seed
):
    """Any leading dimensions: each row, over the keys, is SDPA's weights (its values the identity).

    ``scaled_dot_product_attention`` with ``values = I`` returns its attention weights
    themselves, so it computes the softmax over the last dimension independently of ours.
    """
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(*batch, num_queries, d_k, generator=generator, dtype=F64) * 2
    keys = torch.randn(*batch, num_keys, d_k, generator=generator, dtype=F64) * 2
    weights = scaled_dot_product_weights(queries, keys)
    assert weights.shape == (*batch, num_queries, num_keys)
    identity = torch.eye(num_keys, dtype=F64).expand(*batch, num_keys, num_keys)
    expected = F.scaled_dot_product_attention(queries, keys, identity)
    torch.testing.assert_close(weights, expected, rtol=1e-12, atol=1e-12)
    # Each sequence of the batch is on its own: the same as computed alone.
    for index in itertools.product(*map(range, batch)):
        alone = scaled_dot_product_weights(queries[index], keys[index])
        torch.testing.assert_close(weights[index], alone, rtol=1e-12, atol=1e-12)


def test_allowed_is_true_where_a_query_may_attend():
    """allowed=past_and_present keeps the past; the weights of the hidden future are 0."""
    generator = torch.Generator().manual_seed(3)
    queries, keys = torch.randn(2, 2, 4, 3, generator=generator, dtype=torch.float64)
    past_and_present = torch.ones(4, 4, dtype=torch.bool).tril()
    weights = scaled_dot_product_weights(queries, keys, allowed=past_and_present)
    assert torch.all(weights[:, ~past_and_present] == 0)
    assert torch.all(weights[:, past_and_present] > 0)
    scores = (queries @ keys.transpose(-2, -1)).masked_fill(~past_and_present, float("-inf"))
    torch.testing.assert_close(weights, torch.softmax(scores / 3**0.5, dim=-1))


def test_the_old_mask_keyword_explains_the_change():
    """mask= meant True = hidden; it is refused, never silently read as allowed."""
    q = torch.randn(3, 2)
    with pytest.raises(
        ValueError,
        match=r"^scaled_dot_product_weights: mask= is no longer taken; write allowed=~mask "
        r"\(allowed is True where a query may attend\) \(got mask=Tensor\)$",
    ):
        scaled_dot_product_weights(q, q, mask=torch.ones(3, 3, dtype=torch.bool).triu(1))
    with pytest.raises(TypeError, match=r"positional"):  # keyword only: no silent inversion
        scaled_dot_product_weights(q, q, torch.ones(3, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"allowed must be a bool tensor.*dtype torch.float32"):
        scaled_dot_product_weights(q, q, allowed=torch.ones(3, 3))
