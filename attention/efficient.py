"""Faster multi-head attention: the book's :class:`~attention.MultiHeadAttention`, rewritten.

Every class here computes exactly the function ``MultiHeadAttention`` computes, takes
the same arguments and raises the same errors, and changes one thing about *how*:

==========================  ==============================================================
``FusedQKVAttention``       one projection for queries, keys and values together
``EinsumAttention``         every product, head split and head merge as one ``einsum``
``SDPAttention``            the masked softmax replaced by ``scaled_dot_product_attention``
``TorchMHAAdapter``         ``torch.nn.MultiheadAttention`` underneath
``FastMultiHeadAttention``  fused projection + ``scaled_dot_product_attention``: use this
``FlexAttention``           ``flex_attention`` with a causal block mask (CUDA only)
==========================  ==============================================================

``cls.from_module(mha)`` builds any of them with the weights of a ``MultiHeadAttention``,
so they can be compared number for number; ``python -m attention.benchmark`` times them
side by side. :data:`VARIANTS` holds the classes that run on this installation.

>>> import torch
>>> from attention import MultiHeadAttention
>>> _ = torch.manual_seed(123)
>>> book = MultiHeadAttention(d_in=8, d_out=8, context_length=16, dropout=0.0, num_heads=2)
>>> x = torch.randn(2, 16, 8)  # (batch, num_tokens, d_in)
>>> for name in list(VARIANTS)[:5]:  # and FlexAttention where CUDA is available
...     print(name)
FusedQKVAttention
EinsumAttention
SDPAttention
TorchMHAAdapter
FastMultiHeadAttention
>>> variants = [cls.from_module(book) for cls in VARIANTS.values() if cls.runs_on_cpu]
>>> all(torch.allclose(variant(x), book(x), atol=1e-6) for variant in variants)
True
"""

from __future__ import annotations

import functools
from typing import ClassVar, Self

import torch
from torch import nn
from torch.nn import functional as F

from attention import _checks
from attention.multihead import MultiHeadAttention
from attention.scaled import scaled_dot_product_weights

try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:  # pragma: no cover - torch < 2.5
    create_block_mask = flex_attention = None

__all__ = [
    "VARIANTS",
    "EinsumAttention",
    "FastMultiHeadAttention",
    "FlexAttention",
    "FusedQKVAttention",
    "SDPAttention",
    "TorchMHAAdapter",
    "tiled_attention",
]


def _causal_mask(context_length: int) -> torch.Tensor:
    """``True`` above the diagonal (the future), like ``MultiHeadAttention.mask``."""
    return torch.ones(context_length, context_length, dtype=torch.bool).triu(diagonal=1)


def _stacked_qkv(mha: MultiHeadAttention) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The book's three projections stacked into one ``(3 * d_out, d_in)`` weight and bias."""
    layers = (mha.W_query, mha.W_key, mha.W_value)
    weight = torch.cat([layer.weight for layer in layers])
    bias = None if mha.W_query.bias is None else torch.cat([layer.bias for layer in layers])
    return weight, bias


def _copy_fused_weights(module: nn.Module, mha: MultiHeadAttention) -> None:
    """Copy ``mha`` into a module with a fused ``qkv`` projection and an ``out_proj``."""
    weight, bias = _stacked_qkv(mha)
    module.qkv.weight.copy_(weight)
    if bias is not None:
        module.qkv.bias.copy_(bias)
    module.out_proj.load_state_dict(mha.out_proj.state_dict())


class _Attention(nn.Module):
    """What every variant shares: the book's arguments, input checks and ``from_module``."""

    #: Whether the class runs on a CPU; the tests and the benchmark skip it where not.
    runs_on_cpu: ClassVar[bool] = True

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        dropout: float,
        num_heads: int,
        qkv_bias: bool = False,
    ):
        super().__init__()
        # The same checks in the same order as MultiHeadAttention, so a bad argument
        # gives the same error, naming this class instead.
        owner = type(self).__name__
        self.d_in = _checks.positive_int(owner, "d_in", d_in)
        self.d_out = _checks.positive_int(owner, "d_out", d_out)
        self.context_length = _checks.positive_int(owner, "context_length", context_length)
        self.num_heads = _checks.positive_int(owner, "num_heads", num_heads)
        self.dropout_p = _checks.dropout_rate(owner, dropout)
        _checks.heads_divide(owner, d_out, num_heads)
        self.head_dim = d_out // num_heads

    def _add_book_layers(self, qkv_bias: bool) -> None:
        """The book's four projections, created in its order, for variants that keep them."""
        self.W_query = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.W_key = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.W_value = nn.Linear(self.d_in, self.d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(self.d_out, self.d_out)

    def _check(self, x: object) -> torch.Tensor:
        return _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)

    def _copy_weights(self, mha: MultiHeadAttention) -> None:
        raise NotImplementedError

    @classmethod
    def from_module(cls, mha: MultiHeadAttention) -> Self:
        """This variant with the weights, dropout rate and training mode of ``mha``.

        Its device and dtype are those of ``mha``'s weights. Building it does not
        consume the global random generator.

        Parameters
        ----------
        mha : MultiHeadAttention
            The book's module to copy.
        """
        if not isinstance(mha, MultiHeadAttention):
            raise ValueError(
                f"{cls.__name__}.from_module: expected a MultiHeadAttention, "
                f"got {type(mha).__name__}"
            )
        reference = mha.W_query.weight
        with torch.random.fork_rng(devices=[]):  # leave the caller's random stream alone
            new = cls(
                mha.d_in,
                mha.d_out,
                mha.context_length,
                mha.dropout.p,
                mha.num_heads,
                qkv_bias=mha.W_query.bias is not None,
            ).to(device=reference.device, dtype=reference.dtype)
        with torch.no_grad():
            new._copy_weights(mha)
        return new.train(mha.training)


class FusedQKVAttention(_Attention):
    """The book's attention with one ``(d_in, 3 * d_out)`` projection for Q, K and V.

    One matrix product reads the input once and fills a single large output, instead
    of three products that each read it; the attention itself is the book's masked
    softmax (:func:`~attention.scaled_dot_product_weights`) and dropout.

    Parameters
    ----------
    d_in, d_out, context_length, dropout, num_heads, qkv_bias
        As for :class:`~attention.MultiHeadAttention`.

    Attributes
    ----------
    qkv : torch.nn.Linear
        Rows ``0:d_out`` project queries, ``d_out:2*d_out`` keys, the rest values.
    mask : torch.Tensor
        Booleans ``(context_length, context_length)``, ``True`` above the diagonal.

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)`` with ``num_tokens <= context_length``; output
    ``(batch, num_tokens, d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS, MultiHeadAttention
    >>> batch = torch.stack((INPUTS, INPUTS))
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> fused = FusedQKVAttention.from_module(mha)
    >>> fused.qkv
    Linear(in_features=3, out_features=6, bias=False)
    >>> fused(batch)[0, [0, -1]]
    tensor([[0.3190, 0.4858],
            [0.2575, 0.4028]], grad_fn=<IndexBackward0>)
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(self.dropout_p)
        self.register_buffer("mask", _causal_mask(context_length))

    _copy_weights = _copy_fused_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check(x)
        batch, num_tokens, _ = x.shape
        qkv = self.qkv(x)  # (batch, num_tokens, 3 * d_out)
        # -> (3, batch, num_heads, num_tokens, head_dim): the leading 3 picks Q, K or V.
        qkv = qkv.view(batch, num_tokens, 3, self.num_heads, self.head_dim)
        queries, keys, values = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        future = self.mask[:num_tokens, :num_tokens]
        weights = scaled_dot_product_weights(queries, keys, mask=future)
        context = self.dropout(weights) @ values  # (batch, num_heads, num_tokens, head_dim)
        context = context.transpose(1, 2).reshape(batch, num_tokens, self.d_out)
        return self.out_proj(context)  # (batch, num_tokens, d_out)


class EinsumAttention(_Attention):
    """The book's attention with every product written as an ``einsum``.

    Each index names an axis, so the head split and merge need no ``view`` or
    ``transpose``: a projection weight ``(d_out, d_in)`` is read as ``(num_heads,
    head_dim, d_in)`` and the product lands directly in ``(batch, heads, tokens,
    head_dim)``. Letters: ``b`` batch, ``t`` token, ``c`` input feature, ``h`` head,
    ``d`` head feature, ``q``/``k`` query/key token, ``o`` output feature. The
    parameters are the book's (``W_query``, ``W_key``, ``W_value``, ``out_proj``).

    Parameters
    ----------
    d_in, d_out, context_length, dropout, num_heads, qkv_bias
        As for :class:`~attention.MultiHeadAttention`.

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)`` with ``num_tokens <= context_length``; output
    ``(batch, num_tokens, d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS, MultiHeadAttention
    >>> batch = torch.stack((INPUTS, INPUTS))
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> EinsumAttention.from_module(mha)(batch)[0, [0, -1]]
    tensor([[0.3190, 0.4858],
            [0.2575, 0.4028]], grad_fn=<IndexBackward0>)
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self._add_book_layers(qkv_bias)
        self.dropout = nn.Dropout(self.dropout_p)
        self.register_buffer("mask", _causal_mask(context_length))

    def _copy_weights(self, mha: MultiHeadAttention) -> None:
        self.load_state_dict(mha.state_dict(), strict=True)

    def _project(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        weight = layer.weight.view(self.num_heads, self.head_dim, self.d_in)
        projected = torch.einsum("btc,hdc->bhtd", x, weight)  # (batch, heads, tokens, head_dim)
        if layer.bias is not None:
            projected = projected + layer.bias.view(self.num_heads, 1, self.head_dim)
        return projected

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check(x)
        num_tokens = x.shape[1]
        queries = self._project(self.W_query, x)  # (batch, heads, tokens, head_dim)
        keys = self._project(self.W_key, x)
        values = self._project(self.W_value, x)
        scores = torch.einsum("bhqd,bhkd->bhqk", queries, keys)  # (batch, heads, tokens, tokens)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], float("-inf"))
        weights = self.dropout(torch.softmax(scores / self.head_dim**0.5, dim=-1))
        context = torch.einsum("bhqk,bhkd->bhqd", weights, values)  # (batch, heads, tokens, hd)
        # out_proj's weight (d_out, d_out) read as (d_out, heads, head_dim): summing over
        # h and d merges the heads and projects them in one product.
        out_weight = self.out_proj.weight.view(self.d_out, self.num_heads, self.head_dim)
        return torch.einsum("bhtd,ohd->bto", context, out_weight) + self.out_proj.bias


class SDPAttention(_Attention):
    """The book's attention with ``scaled_dot_product_attention(is_causal=True)``.

    The book's projections, head split and merge, with the scores, mask, softmax,
    dropout and weighted sum replaced by one call that PyTorch dispatches to a fused
    kernel; ``is_causal=True`` means no mask buffer is needed. Dropout applies only
    in training mode, as ``nn.Dropout`` does.

    Parameters
    ----------
    d_in, d_out, context_length, dropout, num_heads, qkv_bias
        As for :class:`~attention.MultiHeadAttention`.

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)`` with ``num_tokens <= context_length``; output
    ``(batch, num_tokens, d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS, MultiHeadAttention
    >>> batch = torch.stack((INPUTS, INPUTS))
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> SDPAttention.from_module(mha)(batch)[0, [0, -1]]
    tensor([[0.3190, 0.4858],
            [0.2575, 0.4028]], grad_fn=<IndexBackward0>)
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self._add_book_layers(qkv_bias)

    def _copy_weights(self, mha: MultiHeadAttention) -> None:
        # The book's state_dict minus its mask buffer, which this class does not need.
        self.load_state_dict({k: v for k, v in mha.state_dict().items() if k != "mask"})

    def _split_heads(self, projected: torch.Tensor) -> torch.Tensor:
        batch, num_tokens, _ = projected.shape  # (batch, num_tokens, d_out)
        return projected.view(batch, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check(x)
        batch, num_tokens, _ = x.shape
        queries = self._split_heads(self.W_query(x))  # (batch, heads, tokens, head_dim)
        keys = self._split_heads(self.W_key(x))
        values = self._split_heads(self.W_value(x))
        context = F.scaled_dot_product_attention(
            queries,
            keys,
            values,
            dropout_p=self.dropout_p if self.training else 0.0,
            is_causal=True,
        )  # (batch, heads, tokens, head_dim)
        context = context.transpose(1, 2).reshape(batch, num_tokens, self.d_out)
        return self.out_proj(context)  # (batch, num_tokens, d_out)


class TorchMHAAdapter(_Attention):
    """``torch.nn.MultiheadAttention`` behind the book's interface.

    ``nn.MultiheadAttention`` projects the query from ``embed_dim`` to ``embed_dim``
    features, so it can only compute the book's function when ``d_in == d_out``; any
    other ``d_in`` raises a ``ValueError`` here rather than adding a projection the
    book does not have. Its ``bias=True`` gives both projections a bias; with
    ``qkv_bias=False`` the input projection's bias is removed, so the parameters are
    exactly the book's. The causal mask is passed both as ``attn_mask`` (``True`` =
    may not attend, as in the book) and as the ``is_causal`` hint, with
    ``need_weights=False``, which lets PyTorch use its fused kernels. (In inference,
    eval mode without gradients, ``nn.MultiheadAttention`` takes its own fast path
    instead, which applies the mask as a matrix and so does materialise the scores.)

    Parameters
    ----------
    d_in, d_out, context_length, dropout, num_heads, qkv_bias
        As for :class:`~attention.MultiHeadAttention`; ``d_in`` must equal ``d_out``.

    Attributes
    ----------
    mha : torch.nn.MultiheadAttention
        Built with ``batch_first=True``.

    Shapes
    ------
    Input ``(batch, num_tokens, d_out)`` with ``num_tokens <= context_length``; output
    ``(batch, num_tokens, d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import MultiHeadAttention
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(4, 4, context_length=6, dropout=0.0, num_heads=2)
    >>> adapter = TorchMHAAdapter.from_module(mha)
    >>> x = torch.randn(2, 6, 4)
    >>> torch.allclose(adapter(x), mha(x), atol=1e-6)
    True
    >>> TorchMHAAdapter(3, 4, context_length=6, dropout=0.0, num_heads=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: TorchMHAAdapter: torch.nn.MultiheadAttention needs d_in == d_out ...
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        if self.d_in != self.d_out:
            raise ValueError(
                f"TorchMHAAdapter: torch.nn.MultiheadAttention needs d_in == d_out (its query "
                f"projection maps embed_dim features to embed_dim), got d_in={d_in} and "
                f"d_out={d_out}; use FastMultiHeadAttention for d_in != d_out"
            )
        self.mha = nn.MultiheadAttention(
            d_out, num_heads, dropout=self.dropout_p, bias=True, batch_first=True
        )
        if not qkv_bias:
            self.mha.register_parameter("in_proj_bias", None)
        self.register_buffer("mask", _causal_mask(context_length))

    def _copy_weights(self, mha: MultiHeadAttention) -> None:
        weight, bias = _stacked_qkv(mha)
        self.mha.in_proj_weight.copy_(weight)
        if bias is not None:
            self.mha.in_proj_bias.copy_(bias)
        self.mha.out_proj.load_state_dict(mha.out_proj.state_dict())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check(x)
        num_tokens = x.shape[1]
        future = self.mask[:num_tokens, :num_tokens]
        out, _ = self.mha(x, x, x, attn_mask=future, need_weights=False, is_causal=True)
        return out  # (batch, num_tokens, d_out)


class FastMultiHeadAttention(_Attention):
    """Multi-head causal attention as fast as plain PyTorch gets: the one to use.

    Fused Q/K/V projection, ``scaled_dot_product_attention(is_causal=True)`` and the
    output projection; nothing else. It is fast because:

    * one matrix product projects queries, keys and values, reading the input once
      (three kernel launches become one, and one large product runs closer to the
      machine's peak than three smaller ones);
    * ``scaled_dot_product_attention`` runs a fused kernel (FlashAttention or the
      memory-efficient kernel on a GPU, a tiled flash-style kernel on a CPU) that
      computes the softmax block by block with a running maximum, so the
      ``(num_tokens, num_tokens)`` score matrix is never materialised: memory grows
      linearly with the number of tokens, not quadratically, and the whole
      scores-mask-softmax-dropout-product chain is one pass over memory;
    * ``is_causal=True`` lets the kernel skip the blocks above the diagonal, half
      of the attention work, and needs no mask buffer;
    * the heads are split and merged with views, so the only copy is the one the
      merge needs, and there are few Python operations per call.

    It has no ``attention_weights``: the kernel never forms them. To look at the
    weights, use :class:`~attention.MultiHeadAttention` with the same weights.

    Parameters
    ----------
    d_in, d_out, context_length, dropout, num_heads, qkv_bias
        As for :class:`~attention.MultiHeadAttention`. Dropout applies only in
        training mode.

    Attributes
    ----------
    qkv : torch.nn.Linear
        Rows ``0:d_out`` project queries, ``d_out:2*d_out`` keys, the rest values.

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)`` with ``num_tokens <= context_length``; output
    ``(batch, num_tokens, d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS, MultiHeadAttention
    >>> batch = torch.stack((INPUTS, INPUTS))
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> FastMultiHeadAttention.from_module(mha)(batch)[0, [0, -1]]
    tensor([[0.3190, 0.4858],
            [0.2575, 0.4028]], grad_fn=<IndexBackward0>)
    >>> gpt2 = FastMultiHeadAttention(768, 768, context_length=1024, dropout=0.0, num_heads=12)
    >>> sum(p.numel() for p in gpt2.parameters())  # the same as the book's module
    2360064
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    _copy_weights = _copy_fused_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check(x)
        B, T, _ = x.shape
        # (B, T, 3 * d_out) -> (3, B, num_heads, T, head_dim); unbind gives three views.
        qkv = self.qkv(x).view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        dropout_p = self.dropout_p if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        # (B, num_heads, T, head_dim) -> (B, T, d_out); reshape copies only if it must.
        return self.out_proj(y.transpose(1, 2).reshape(B, T, self.d_out))


def _causal(batch, head, q_idx, kv_idx):
    """flex_attention's mask_mod: query ``q_idx`` may see key ``kv_idx`` at or before it."""
    return q_idx >= kv_idx


@functools.cache
def _compiled_flex_attention():
    # flex_attention is only fused (and fast) when compiled; compile once, on first use.
    return torch.compile(flex_attention)


class FlexAttention(_Attention):
    """Fused projection + ``flex_attention`` with a causal block mask (CUDA only).

    ``flex_attention`` takes the mask as a function of the query and key positions;
    ``create_block_mask`` turns it into a block-sparse map, so the compiled kernel
    skips every block above the diagonal. The same function could express sliding
    windows or document masks, which is the point of FlexAttention.

    It runs on CUDA only. On a CPU, this torch runs ``flex_attention`` uncompiled,
    which materialises the full score matrix, and not at all backwards; compiled,
    it rejects float64 and takes minutes to build. So a CPU input raises
    ``NotImplementedError``, and :data:`VARIANTS` lists this class only where CUDA
    is available. ``flex_attention`` has no dropout, so training with
    ``dropout > 0`` raises a ``ValueError`` (evaluation is fine).

    Parameters
    ----------
    d_in, d_out, context_length, dropout, num_heads, qkv_bias
        As for :class:`~attention.MultiHeadAttention`.

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)`` with ``num_tokens <= context_length``, on a
    CUDA device; output ``(batch, num_tokens, d_out)``.

    Examples
    --------
    >>> import torch
    >>> flex = FlexAttention(4, 4, context_length=8, dropout=0.0, num_heads=2)
    >>> flex(torch.randn(1, 8, 4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    NotImplementedError: FlexAttention runs on CUDA only, got an input on cpu; ...
    """

    runs_on_cpu: ClassVar[bool] = False

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        if flex_attention is None:  # pragma: no cover - torch < 2.5
            raise NotImplementedError(
                f"FlexAttention needs torch.nn.attention.flex_attention (torch >= 2.5), "
                f"this is torch {torch.__version__}"
            )
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self._block_masks = {}  # (num_tokens, device) -> BlockMask, built once each

    _copy_weights = _copy_fused_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._check(x)
        if self.training and self.dropout_p > 0:
            raise ValueError(
                f"FlexAttention: flex_attention cannot drop attention weights, so it cannot "
                f"train with dropout={self.dropout_p}; call .eval(), or build it with "
                f"dropout=0.0"
            )
        if x.device.type != "cuda":
            raise NotImplementedError(
                f"FlexAttention runs on CUDA only, got an input on {x.device}; on a CPU, "
                f"torch {torch.__version__} runs flex_attention unfused and without "
                f"backward. Use FastMultiHeadAttention"
            )
        B, T, _ = x.shape
        key = (T, x.device)
        if key not in self._block_masks:
            self._block_masks[key] = create_block_mask(_causal, None, None, T, T, device=x.device)
        qkv = self.qkv(x).view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # each (B, num_heads, T, head_dim)
        y = _compiled_flex_attention()(q, k, v, block_mask=self._block_masks[key])
        return self.out_proj(y.transpose(1, 2).reshape(B, T, self.d_out))


#: The variants that run on this installation, by class name. FlexAttention is listed
#: only where flex_attention exists and CUDA is available.
VARIANTS: dict[str, type[nn.Module]] = {
    cls.__name__: cls
    for cls in (
        FusedQKVAttention,
        EinsumAttention,
        SDPAttention,
        TorchMHAAdapter,
        FastMultiHeadAttention,
    )
}
if flex_attention is not None and torch.cuda.is_available():
    VARIANTS["FlexAttention"] = FlexAttention


# ---------------------------------------------------------------------------------------
# How the fused kernels work: attention block by block, with the online softmax
# ---------------------------------------------------------------------------------------


def _tiled_inputs(
    queries: object, keys: object, values: object, block_size: object, causal: object
) -> int:
    """Check :func:`tiled_attention`'s arguments; return ``block_size`` as an int."""
    owner = "tiled_attention"
    tensors = {"queries": queries, "keys": keys, "values": values}
    for name, tensor in tensors.items():
        _checks.float_tensor(owner, name, tensor)
        if tensor.dim() < 2:
            raise ValueError(
                f"{owner}: {name} must have shape (..., num_tokens, features), got a "
                f"{tensor.dim()}-D tensor of shape {tuple(tensor.shape)}"
            )
    shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
    if len({(t.dtype, t.device) for t in tensors.values()}) > 1:
        raise ValueError(
            f"{owner}: queries, keys and values must share one dtype and device, got "
            + ", ".join(f"{name} {t.dtype} on {t.device}" for name, t in tensors.items())
        )
    if not queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]:
        raise ValueError(
            f"{owner}: queries, keys and values must have the same leading (batch, head) "
            f"dimensions, got {shapes}"
        )
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"{owner}: queries and keys must have the same number of features (their dot "
            f"products are the scores), got {shapes}"
        )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"{owner}: keys and values must have the same number of tokens (one value per "
            f"key), got {shapes}"
        )
    if queries.shape[-2] == 0 or keys.shape[-2] == 0:
        raise ValueError(f"{owner}: needs at least one query and one key, got {shapes}")
    if not isinstance(causal, bool):
        raise ValueError(f"{owner}: causal must be True or False, got {causal!r}")
    if causal and queries.shape[-2] != keys.shape[-2]:
        raise ValueError(
            f"{owner}: causal attention needs as many queries as keys (query i sees keys "
            f"0 to i), got {shapes}"
        )
    return _checks.positive_int(owner, "block_size", block_size)


def tiled_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    block_size: int = 64,
    causal: bool = True,
) -> torch.Tensor:
    """Scaled dot-product attention computed block by block, as flash-style kernels do.

    The same function as ``scaled_dot_product_attention(queries, keys, values,
    is_causal=causal)``, written in plain PyTorch to show how the fused kernels avoid
    the ``(num_tokens, num_tokens)`` score matrix. The queries are taken
    ``block_size`` at a time; for each block of queries, the keys and values arrive
    ``block_size`` at a time, and the *online softmax* keeps three running
    quantities per query: the largest score seen so far ``m``, the softmax
    denominator ``denom`` (the sum of ``exp(score - m)``) and the weighted sum of
    values ``acc``. When a block brings a larger score, ``denom`` and ``acc`` are
    rescaled by ``exp(m_old - m_new)``, as if they had been computed with the new
    maximum from the start. After the last block, ``acc / denom`` is the context
    vector. With ``causal=True``, key blocks entirely in the future of a query block
    are skipped, and a block that straddles the diagonal is masked.

    At any moment only a ``(..., block_size, block_size)`` block of scores exists.
    A real kernel keeps it in fast on-chip memory; this function is slow, a lesson
    rather than a tool: use :class:`FastMultiHeadAttention` for speed.

    Parameters
    ----------
    queries : torch.Tensor, shape (..., num_queries, head_dim)
    keys : torch.Tensor, shape (..., num_keys, head_dim)
    values : torch.Tensor, shape (..., num_keys, value_dim)
        Floating point, one dtype and device, the same leading dimensions (for
        example ``(batch, num_heads)``). With ``causal=True``, ``num_queries`` must
        equal ``num_keys``.
    block_size : int, default 64
        Tokens per block, for queries and keys alike; the last block may be shorter.
    causal : bool, default True
        Whether query ``i`` sees only keys ``0`` to ``i``.

    Returns
    -------
    torch.Tensor, shape (..., num_queries, value_dim)
        ``softmax(queries @ keys^T / sqrt(head_dim)) @ values``, masked if causal.

    Raises
    ------
    ValueError
        For arguments that are not floating-point tensors of matching shapes, dtypes
        and devices, no queries or no keys, a ``block_size`` that is not a positive
        integer, or a ``causal`` that is not a bool.

    Examples
    --------
    Our running sentence attends to itself, two tokens at a time:

    >>> import torch
    >>> from torch.nn import functional as F
    >>> from attention import INPUTS
    >>> tiled = tiled_attention(INPUTS, INPUTS, INPUTS, block_size=2)  # (6, 3)
    >>> tiled[4]  # the context vector of "one"
    tensor([0.5206, 0.5514, 0.5236])
    >>> fused = F.scaled_dot_product_attention(INPUTS, INPUTS, INPUTS, is_causal=True)
    >>> torch.allclose(tiled, fused, atol=1e-6)
    True
    """
    block_size = _tiled_inputs(queries, keys, values, block_size, causal)
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    scale = queries.shape[-1] ** -0.5
    blocks = []
    for q_start in range(0, num_queries, block_size):
        q_end = min(q_start + block_size, num_queries)
        q = queries[..., q_start:q_end, :] * scale  # (..., bq, head_dim)
        shape = (*q.shape[:-1], 1)  # one running value per query
        m = torch.full(shape, float("-inf"), dtype=q.dtype, device=q.device)  # max so far
        denom = torch.zeros(shape, dtype=q.dtype, device=q.device)  # sum of exp(score - m)
        acc = q.new_zeros((*q.shape[:-1], values.shape[-1]))  # sum of exp(score - m) * value
        for k_start in range(0, num_keys, block_size):
            if causal and k_start >= q_end:
                break  # this key block and every later one lie in the future
            k_end = min(k_start + block_size, num_keys)
            scores = q @ keys[..., k_start:k_end, :].transpose(-2, -1)  # (..., bq, bk)
            if causal and k_end > q_start + 1:  # the block straddles the diagonal
                q_pos = torch.arange(q_start, q_end, device=q.device).unsqueeze(-1)
                k_pos = torch.arange(k_start, k_end, device=q.device)
                scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
            m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
            rescale = torch.exp(m - m_new)  # 0 on the first block, where m is -inf
            p = torch.exp(scores - m_new)  # (..., bq, bk); masked scores give 0
            denom = denom * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ values[..., k_start:k_end, :]
            m = m_new
        blocks.append(acc / denom)
    return torch.cat(blocks, dim=-2)
