"""Multi-head causal attention (section 3.6 of the book), two ways.

:class:`~attention.MultiHeadAttentionWrapper` stacks independent
:class:`~attention.CausalAttention` heads
and concatenates their outputs. :class:`~attention.MultiHeadAttention` computes all heads with
one projection per query, key and value, splitting the result into heads with
``view`` and ``transpose``, and mixes the heads with an output projection.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import torch
from torch import nn

from attention import _checks
from attention.causal import CausalAttention
from attention.scaled import scaled_dot_product_weights


class MultiHeadAttentionWrapper(nn.Module):
    """``num_heads`` independent causal attention heads, outputs concatenated.

    Parameters
    ----------
    d_in, d_out, context_length, dropout, qkv_bias
        Each head's arguments, as in :class:`~attention.CausalAttention`. So ``d_out``
        is the output size of *each head*, and the module outputs ``num_heads * d_out``
        features. (In :class:`~attention.MultiHeadAttention`, ``d_out`` is the total.)
    num_heads : int
        Number of heads, at least 1.

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)``; output ``(batch, num_tokens, num_heads * d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS
    >>> batch = torch.stack((INPUTS, INPUTS))
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttentionWrapper(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> mha(batch)[0, 0]
    tensor([-0.4519,  0.2216,  0.4772,  0.1063], grad_fn=<SelectBackward0>)
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.d_out, self.context_length, self.num_heads = _checks.sizes(
            owner, d_in=d_in, d_out=d_out, context_length=context_length, num_heads=num_heads
        )
        _checks.dropout_rate(owner, dropout)
        self.heads = nn.ModuleList(
            CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
            for _ in range(num_heads)
        )

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """Each head's attention weights, shape ``(batch, num_heads, num_tokens, num_tokens)``."""
        _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        heads = cast("Iterable[CausalAttention]", self.heads)  # a ModuleList of them
        return torch.stack([head.attention_weights(x) for head in heads], dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        # (batch, num_tokens, d_out) from each head -> (batch, num_tokens, num_heads * d_out)
        return torch.cat([head(x) for head in self.heads], dim=-1)


class MultiHeadAttention(nn.Module):
    """Multi-head causal attention with weight splits and an output projection.

    Its arguments, ``mask`` buffer (shared by all heads) and shapes are those of
    :class:`~attention.CausalAttention`, except:

    Parameters
    ----------
    d_out : int
        Total output size, split evenly across heads: each head works in
        ``head_dim = d_out // num_heads`` dimensions.
    num_heads : int
        Number of heads; must divide ``d_out``.
    qkv_bias : bool
        As in :class:`~attention.CausalAttention`.
    out_bias : bool
        Keyword only. Whether the output projection ``out_proj`` has a bias: ``True``
        (the default) as in the book, whose seeds then give the book's numbers;
        ``False`` as in Llama. The book's positional call
        ``MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads)`` stays
        as it is; :class:`~attention.GroupedQueryAttention` takes everything after
        ``context_length`` by keyword.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS
    >>> _ = torch.manual_seed(123)
    >>> batch = torch.stack((INPUTS, INPUTS))  # (2, 6, 3)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> mha(batch)[0, [0, -1]]
    tensor([[0.3190, 0.4858],
            [0.2575, 0.4028]], grad_fn=<IndexBackward0>)
    >>> gpt2 = MultiHeadAttention(768, 768, context_length=1024, dropout=0.0, num_heads=12)
    >>> sum(p.numel() for p in gpt2.parameters())
    2360064
    """

    mask: torch.Tensor  # a buffer: register_buffer("mask", ...) in __init__

    def __init__(
        self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, *, out_bias=True
    ):
        super().__init__()
        owner = type(self).__name__
        args = (d_in, d_out, context_length, num_heads, dropout)
        self.d_in, self.d_out, self.context_length, self.num_heads, self.head_dim, dropout = (
            _checks.multi_head_arguments(owner, *args)
        )
        _checks.flag(owner, "out_bias", out_bias, "whether out_proj has a bias")
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=out_bias)  # mixes what the heads found
        self.dropout = nn.Dropout(dropout)
        future = torch.ones(context_length, context_length, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer("mask", future)

    def _split_heads(self, projected: torch.Tensor) -> torch.Tensor:
        # (batch, num_tokens, d_out) -> (batch, num_tokens, num_heads, head_dim)
        # -> (batch, num_heads, num_tokens, head_dim): heads become a batch dimension,
        # so one matrix product computes every head at once.
        batch, num_tokens, _ = projected.shape
        split = projected.view(batch, num_tokens, self.num_heads, self.head_dim)
        return split.transpose(1, 2)

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """Each head's weights after dropout.

        Shape ``(batch, num_heads, num_tokens, num_tokens)``; each call draws a new
        dropout pattern while training.
        """
        _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        num_tokens = x.shape[1]
        queries = self._split_heads(self.W_query(x))  # (batch, num_heads, num_tokens, head_dim)
        keys = self._split_heads(self.W_key(x))  # (batch, num_heads, num_tokens, head_dim)
        future = self.mask[:num_tokens, :num_tokens]  # the book's mask: True = hidden
        weights = scaled_dot_product_weights(queries, keys, allowed=~future)
        return self.dropout(weights)  # (batch, num_heads, num_tokens, num_tokens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.attention_weights(x)  # (batch, num_heads, num_tokens, num_tokens)
        batch, num_tokens, _ = x.shape
        values = self._split_heads(self.W_value(x))  # (batch, num_heads, num_tokens, head_dim)
        context = weights @ values  # (batch, num_heads, num_tokens, head_dim)
        # Back to (batch, num_tokens, num_heads, head_dim). The transpose only swaps
        # strides, and view needs contiguous memory, hence contiguous() before merging
        # the heads into (batch, num_tokens, d_out).
        context = context.transpose(1, 2).contiguous().view(batch, num_tokens, self.d_out)
        return self.out_proj(context)  # (batch, num_tokens, d_out)

    @classmethod
    def from_wrapper(cls, wrapper: MultiHeadAttentionWrapper) -> MultiHeadAttention:
        """A ``MultiHeadAttention`` that computes exactly what ``wrapper`` computes.

        Head ``h``'s projection weights become rows ``h * head_dim`` to
        ``(h + 1) * head_dim`` of the fused projections, and ``out_proj`` is the
        identity with zero bias, since the wrapper only concatenates its heads. It
        keeps the wrapper's dropout rate and training mode. Building it does not
        consume the global random generator.

        Examples
        --------
        >>> import torch
        >>> from attention import INPUTS, MultiHeadAttentionWrapper
        >>> batch = torch.stack((INPUTS, INPUTS))
        >>> _ = torch.manual_seed(123)
        >>> wrapper = MultiHeadAttentionWrapper(3, 2, 6, dropout=0.0, num_heads=2)
        >>> mha = MultiHeadAttention.from_wrapper(wrapper)
        >>> mha.d_out, mha.num_heads, mha.head_dim
        (4, 2, 2)
        >>> torch.allclose(mha(batch), wrapper(batch))
        True
        """
        if not isinstance(wrapper, MultiHeadAttentionWrapper):
            raise TypeError(
                "MultiHeadAttention.from_wrapper: expected a MultiHeadAttentionWrapper, "
                f"got {type(wrapper).__name__}"
            )
        first = wrapper.heads[0]
        assert isinstance(first, CausalAttention)  # a wrapper's heads are CausalAttention
        reference = first.W_query.weight
        with torch.random.fork_rng(devices=[]):  # leave the caller's random stream alone
            mha = cls(
                wrapper.d_in,
                wrapper.num_heads * wrapper.d_out,
                wrapper.context_length,
                first.dropout.p,
                wrapper.num_heads,
                qkv_bias=first.W_query.bias is not None,
            ).to(device=reference.device, dtype=reference.dtype)
        heads = wrapper.heads
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                fused = getattr(mha, name)
                fused.weight.copy_(torch.cat([getattr(h, name).weight for h in heads]))
                if fused.bias is not None:
                    fused.bias.copy_(torch.cat([getattr(h, name).bias for h in heads]))
            mha.out_proj.weight.copy_(torch.eye(mha.d_out))
            mha.out_proj.bias.zero_()
        # A new module starts in training mode; match the wrapper's, so that an eval()
        # wrapper does not become a module that applies dropout.
        return mha.train(wrapper.training)
