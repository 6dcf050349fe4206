"""Gemma 4's last layers: queries of their own over an earlier layer's keys and values.

Chapter 19's sharing across layers: a layer that ``num_kv_shared_layers`` covers
computes no keys or values and caches nothing; it reuses those of the last earlier
layer of its kind.
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.masks import causal_mask, sliding_window_mask
from attention.norms import RMSNorm
from attention.rope import Rotary
from attention.step import attend

__all__ = ["SharedKVAttention"]


class SharedKVAttention(nn.Module):
    """Queries of its own; the keys and values of an earlier layer (Gemma 4's last layers).

    ``Gemma4TextAttention`` in a layer that ``num_kv_shared_layers`` covers has only a
    query projection, its norm and an output projection: it attends with the keys and
    values the last earlier layer of its kind computed, and caches nothing.

    Parameters
    ----------
    d_in, d_out : int
        Size of each input embedding and of the output.
    num_heads, head_dim : int
        Query heads and their size.
    rotary : Rotary, optional
        The queries' RoPE (the source layer rotated its keys already).
    window : int, optional
        A sliding window, for a local layer.
    scale : float, optional
        The factor on the scores; default ``1 / sqrt(head_dim)``.

    Attributes
    ----------
    W_query, q_norm, out_proj : nn.Linear, RMSNorm, nn.Linear

    Examples
    --------
    >>> import torch
    >>> layer = SharedKVAttention(8, 8, num_heads=2, head_dim=4)
    >>> keys, values = torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)  # another layer's
    >>> layer(torch.randn(1, 5, 8), keys, values).shape
    torch.Size([1, 5, 8])
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        *,
        num_heads: int,
        head_dim: int,
        rotary: Rotary | None = None,
        window: int | None = None,
        scale: float | None = None,
    ):
        super().__init__()
        self.d_in, self.d_out, self.num_heads, self.head_dim = _checks.sizes(
            type(self).__name__, d_in=d_in, d_out=d_out, num_heads=num_heads, head_dim=head_dim
        )
        if window is not None:
            window = _checks.positive_int(type(self).__name__, "window", window)
        self.rotary, self.window, self.scale = rotary, window, scale
        self.W_query = nn.Linear(d_in, num_heads * head_dim, bias=False)
        self.q_norm = RMSNorm(head_dim)
        self.out_proj = nn.Linear(num_heads * head_dim, d_out, bias=False)

    def forward(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Attend over ``keys`` and ``values``, ``(batch, kv_heads, num_tokens, head_dim)``.

        They are those of the same ``num_tokens`` tokens as ``x``,
        ``(batch, num_tokens, d_in)``, rotated and normed by their own layer.
        """
        x = _checks.module_input(self, x, d_in=self.d_in)
        batch, n, _ = x.shape
        q = self.W_query(x).view(batch, n, self.num_heads, self.head_dim).transpose(1, 2)
        q = self.q_norm(q)  # (batch, num_heads, n, head_dim)
        if self.rotary is not None:
            q = self.rotary(q)
        allowed = causal_mask(n) if self.window is None else sliding_window_mask(n, self.window)
        context = attend(q, keys, values, allowed=allowed.to(x.device), scale=self.scale)
        return self.out_proj(context.transpose(1, 2).reshape(batch, n, -1))
