"""Scaled dot-product attention weights, the formula every module here shares.

``softmax(Q K^T / sqrt(d_k))``, with hidden positions set to ``-inf`` before the
softmax so they get a weight of exactly 0.
"""

from __future__ import annotations

import torch

from attention._checks import float_tensor


def scaled_dot_product_weights(
    queries: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Attention weights ``softmax(queries @ keys^T / sqrt(d_k))``.

    Dividing by ``sqrt(d_k)`` keeps the scores' variance near 1 whatever the head
    size, so the softmax does not saturate into one-hot weights with tiny gradients.

    Parameters
    ----------
    queries : torch.Tensor, shape (..., num_queries, d_k)
    keys : torch.Tensor, shape (..., num_keys, d_k)
    mask : torch.Tensor of bool, shape (num_queries, num_keys), optional
        ``True`` marks a position to hide, as in ``Tensor.masked_fill``. (This is the
        opposite of the boolean ``attn_mask`` of ``scaled_dot_product_attention``,
        where ``True`` means "may attend".)

    Returns
    -------
    torch.Tensor, shape (..., num_queries, num_keys)
        Each row sums to 1; hidden positions are exactly 0.

    Examples
    --------
    >>> import torch
    >>> q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> k = torch.tensor([[2.0, 0.0], [0.0, 2.0]])
    >>> scaled_dot_product_weights(q, k)
    tensor([[0.8044, 0.1956],
            [0.1956, 0.8044]])
    >>> hide_future = torch.tensor([[False, True], [False, False]])
    >>> scaled_dot_product_weights(q, k, mask=hide_future)
    tensor([[1.0000, 0.0000],
            [0.1956, 0.8044]])
    """
    float_tensor("scaled_dot_product_weights", "queries", queries)
    float_tensor("scaled_dot_product_weights", "keys", keys)
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            "scaled_dot_product_weights: queries and keys must have the same last "
            f"dimension d_k, got queries of shape {tuple(queries.shape)} and keys of "
            f"shape {tuple(keys.shape)}"
        )
    return _scaled_dot_product_weights(queries, keys, mask)


def _scaled_dot_product_weights(
    queries: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """:func:`scaled_dot_product_weights` of a module's own queries and keys, unchecked."""
    scores = queries @ keys.transpose(-2, -1)  # (..., num_queries, num_keys)
    if mask is not None:
        # -inf, not 0: exp(-inf) = 0, so a hidden position gets no weight at all,
        # while a 0 score would still get exp(0) = 1 share of the softmax.
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1)
