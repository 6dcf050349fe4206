"""Self-attention with trainable weights (section 3.4 of the book).

Two versions of the same computation: :class:`SelfAttentionV1` keeps its projection
matrices as raw parameters, :class:`SelfAttentionV2` uses ``nn.Linear`` layers (which
start from a better random initialisation). Neither masks the future: every token
sees every other token.
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.scaled import scaled_dot_product_weights


class SelfAttentionV1(nn.Module):
    """Scaled dot-product self-attention with weight matrices as ``nn.Parameter``.

    The weights are ``torch.rand(d_in, d_out)``, created in the order ``W_query``,
    ``W_key``, ``W_value``, as in the book, so the same seed gives the same numbers.

    Parameters
    ----------
    d_in : int
        Size of each input embedding.
    d_out : int
        Size of each query, key, value and output vector.

    Shapes
    ------
    Input ``(num_tokens, d_in)`` or ``(batch, num_tokens, d_in)``; output the same with
    ``d_out`` as the last dimension.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS
    >>> _ = torch.manual_seed(123)
    >>> sa_v1 = SelfAttentionV1(d_in=3, d_out=2)
    >>> sa_v1(INPUTS)[1]
    tensor([0.3061, 0.8210], grad_fn=<SelectBackward0>)
    """

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.d_out = _checks.sizes(owner, d_in=d_in, d_out=d_out)
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """Attention weights, shape ``(..., num_tokens, num_tokens)``; rows sum to 1."""
        _checks.module_input(self, x, d_in=self.d_in, ranks=(2, 3))
        queries = x @ self.W_query  # (..., num_tokens, d_out)
        keys = x @ self.W_key  # (..., num_tokens, d_out)
        return scaled_dot_product_weights(queries, keys)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.attention_weights(x)  # (..., num_tokens, num_tokens)
        values = x @ self.W_value  # (..., num_tokens, d_out)
        return weights @ values  # (..., num_tokens, d_out)

    @classmethod
    def from_v2(cls, v2: SelfAttentionV2) -> SelfAttentionV1:
        """A ``SelfAttentionV1`` computing exactly what ``v2`` computes (exercise 3.1).

        ``nn.Linear`` stores its weight as ``(d_out, d_in)`` and computes
        ``x @ weight.T``, so each V1 matrix is the transpose of the V2 weight.
        Building it does not consume the global random generator.

        Parameters
        ----------
        v2 : SelfAttentionV2
            Built with ``qkv_bias=False``: V1 has no bias terms to copy into.

        Examples
        --------
        >>> import torch
        >>> from attention import INPUTS, SelfAttentionV2
        >>> _ = torch.manual_seed(123)
        >>> sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
        >>> sa_v1 = SelfAttentionV1.from_v2(sa_v2)
        >>> sa_v1(INPUTS)[0]
        tensor([-0.5337, -0.1051], grad_fn=<SelectBackward0>)
        >>> torch.allclose(sa_v1(INPUTS), sa_v2(INPUTS))
        True
        """
        if not isinstance(v2, SelfAttentionV2):
            raise TypeError(
                f"SelfAttentionV1.from_v2: expected a SelfAttentionV2, got {type(v2).__name__}"
            )
        if v2.W_query.bias is not None:
            raise ValueError(
                "SelfAttentionV1.from_v2: SelfAttentionV1 has no bias terms, so it can only "
                "copy a SelfAttentionV2 built with qkv_bias=False; this one has qkv_bias=True"
            )
        reference = v2.W_query.weight
        with torch.random.fork_rng(devices=[]):  # leave the caller's random stream alone
            v1 = cls(v2.d_in, v2.d_out).to(device=reference.device, dtype=reference.dtype)
        with torch.no_grad():
            v1.W_query.copy_(v2.W_query.weight.T)
            v1.W_key.copy_(v2.W_key.weight.T)
            v1.W_value.copy_(v2.W_value.weight.T)
        return v1


class SelfAttentionV2(nn.Module):
    """Scaled dot-product self-attention with ``nn.Linear`` projections.

    Parameters
    ----------
    d_in, d_out : int
        As in :class:`SelfAttentionV1`.
    qkv_bias : bool
        Whether the three projections have a bias term.

    Shapes
    ------
    As in :class:`SelfAttentionV1`.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS
    >>> _ = torch.manual_seed(789)  # the book's seed for this class (section 3.4.2)
    >>> sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
    >>> sa_v2.W_query.weight.shape  # nn.Linear stores (d_out, d_in): W_query's transpose
    torch.Size([2, 3])
    >>> sa_v2(INPUTS)[0]
    tensor([-0.0739,  0.0713], grad_fn=<SelectBackward0>)
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.d_out = _checks.sizes(owner, d_in=d_in, d_out=d_out)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """Attention weights, shape ``(..., num_tokens, num_tokens)``; rows sum to 1."""
        _checks.module_input(self, x, d_in=self.d_in, ranks=(2, 3))
        queries = self.W_query(x)  # (..., num_tokens, d_out)
        keys = self.W_key(x)  # (..., num_tokens, d_out)
        return scaled_dot_product_weights(queries, keys)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.attention_weights(x)  # (..., num_tokens, num_tokens)
        return weights @ self.W_value(x)  # (..., num_tokens, d_out)
