"""Causal (masked) self-attention with dropout (section 3.5 of the book)."""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.scaled import scaled_dot_product_weights


class CausalAttention(nn.Module):
    """One head of causal self-attention: each token attends only to itself and the past.

    Parameters
    ----------
    d_in, d_out : int
        Sizes of each input embedding and of each query, key, value and output vector,
        as in :class:`~attention.SelfAttentionV2`.
    context_length : int
        The most tokens the module accepts; the size of its causal mask.
    dropout : float
        Probability in [0, 1) of dropping each attention weight while training.
        The kept weights are scaled by ``1 / (1 - dropout)``. Off in ``eval()``.
    qkv_bias : bool
        Whether the query, key and value projections have a bias term.

    Attributes
    ----------
    mask : torch.Tensor
        The book's mask: booleans of shape ``(context_length, context_length)``,
        ``True`` above the diagonal, the future positions each query must not see (as
        ``masked_fill`` wants them). The package's functions take the opposite,
        ``allowed=~mask``: ``True`` where a query may attend. A registered buffer, so
        it is saved in ``state_dict`` and moves with ``.to(device)``, but it is not a
        trainable parameter.

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)`` with ``num_tokens <= context_length``; output
    ``(batch, num_tokens, d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS
    >>> batch = torch.stack((INPUTS, INPUTS))  # (2, 6, 3)
    >>> _ = torch.manual_seed(123)
    >>> ca = CausalAttention(d_in=3, d_out=2, context_length=6, dropout=0.0)
    >>> ca(batch)[0, :2]
    tensor([[-0.4519,  0.2216],
            [-0.5874,  0.0058]], grad_fn=<SliceBackward0>)
    """

    mask: torch.Tensor  # a buffer: register_buffer("mask", ...) in __init__

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.d_out, self.context_length = _checks.sizes(
            owner, d_in=d_in, d_out=d_out, context_length=context_length
        )
        dropout = _checks.dropout_rate(owner, dropout)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        future = torch.ones(context_length, context_length, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer("mask", future)

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """Masked attention weights after dropout, shape ``(batch, num_tokens, num_tokens)``.

        Each call draws a new dropout pattern while training.
        """
        _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        num_tokens = x.shape[1]
        queries = self.W_query(x)  # (batch, num_tokens, d_out)
        keys = self.W_key(x)  # (batch, num_tokens, d_out)
        # The mask is built once for context_length tokens; crop it to this input.
        future = self.mask[:num_tokens, :num_tokens]
        # The book's mask is True for the hidden future; the function takes where a
        # query may attend, so the present and the past: ~future.
        weights = scaled_dot_product_weights(queries, keys, allowed=~future)
        return self.dropout(weights)  # (batch, num_tokens, num_tokens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.attention_weights(x)  # (batch, num_tokens, num_tokens)
        return weights @ self.W_value(x)  # (batch, num_tokens, d_out)
