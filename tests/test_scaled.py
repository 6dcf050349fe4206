"""scaled_dot_product_weights: softmax(Q K^T / sqrt(d_k)), with an optional mask."""

from __future__ import annotations

import pytest
import torch
from helpers import expect

from attention import scaled_dot_product_weights

pytestmark = pytest.mark.usefixtures("single_thread")


def test_gradcheck_passes_for_masked_scaled_dot_product_weights():
    generator = torch.Generator().manual_seed(8)
    queries = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64)
    keys = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64)
    mask = torch.ones(4, 4, dtype=torch.bool).triu(diagonal=1)
    assert torch.autograd.gradcheck(
        lambda q, k: scaled_dot_product_weights(q, k, mask=mask),
        (queries.requires_grad_(), keys.requires_grad_()),
    )


def test_scaled_dot_product_weights_with_different_d_k_is_rejected():
    with expect(
        "scaled_dot_product_weights: queries and keys must have the same last dimension d_k, "
        "got queries of shape (4, 2) and keys of shape (4, 3)"
    ):
        scaled_dot_product_weights(torch.rand(4, 2), torch.rand(4, 3))
