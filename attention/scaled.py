"""Scaled dot-product attention weights, the formula every module here shares.

``softmax(Q K^T / sqrt(d_k))``, with the positions a query may not attend to set to
``-inf`` before the softmax, so they get a weight of exactly 0.
"""

from __future__ import annotations

import torch

from attention import _checks


def scaled_dot_product_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    *,
    allowed: torch.Tensor | None = None,
    mask: None = None,
) -> torch.Tensor:
    """Attention weights ``softmax(q @ k^T / sqrt(d_k))``.

    Dividing by ``sqrt(d_k)`` keeps the scores' variance near 1 whatever the head
    size, so the softmax does not saturate into one-hot weights with tiny gradients.

    Parameters
    ----------
    q : torch.Tensor, shape (..., num_queries, d_k)
        The queries.
    k : torch.Tensor, shape (..., num_keys, d_k)
        The keys.
    allowed : torch.Tensor of bool, optional
        Keyword only. ``True`` where a query may attend, as in the boolean ``attn_mask``
        of ``scaled_dot_product_attention`` and everywhere in this package's public
        functions; broadcastable to ``(..., num_queries, num_keys)``. ``None``: every key.
        The book's modules keep the book's ``mask`` buffer, ``True`` for the hidden
        future, and pass ``allowed=~mask``.
    mask : None
        No longer taken, since ``True`` meant "hidden" there and "may attend" elsewhere:
        giving it raises a ``ValueError`` that says to write ``allowed=~mask``.

    Returns
    -------
    torch.Tensor, shape (..., num_queries, num_keys)
        Each row sums to 1; positions not allowed are exactly 0.

    Examples
    --------
    >>> import torch
    >>> q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> k = torch.tensor([[2.0, 0.0], [0.0, 2.0]])
    >>> scaled_dot_product_weights(q, k)
    tensor([[0.8044, 0.1956],
            [0.1956, 0.8044]])
    >>> past_and_present = torch.tensor([[True, False], [True, True]])
    >>> scaled_dot_product_weights(q, k, allowed=past_and_present)
    tensor([[1.0000, 0.0000],
            [0.1956, 0.8044]])
    """
    owner = "scaled_dot_product_weights"
    _checks.removed_keyword(
        owner, "mask", mask, "write allowed=~mask (allowed is True where a query may attend)"
    )
    _checks.float_tensor(owner, "q", q)
    _checks.float_tensor(owner, "k", k)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{owner}: expected q and k with the same last dimension d_k, got q of shape "
            f"{tuple(q.shape)} and k of shape {tuple(k.shape)}"
        )
    if allowed is not None:
        _checks.allowed_tensor(owner, allowed)
    return _scaled_dot_product_weights(q, k, allowed)


def _scaled_dot_product_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    allowed: torch.Tensor | None,
    scale: float | None = None,
) -> torch.Tensor:
    """:func:`scaled_dot_product_weights` of a module's own queries and keys, unchecked.

    ``scale`` multiplies the scores instead of the division by ``sqrt(d_k)``.
    """
    scores = q @ k.transpose(-2, -1)  # (..., num_queries, num_keys)
    if allowed is not None:
        # -inf, not 0: exp(-inf) = 0, so a hidden position gets no weight at all,
        # while a 0 score would still get exp(0) = 1 share of the softmax.
        scores = scores.masked_fill(~allowed, float("-inf"))
    scaled = scores / k.shape[-1] ** 0.5 if scale is None else scores * scale
    return torch.softmax(scaled, dim=-1)
