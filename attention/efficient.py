"""Faster multi-head attention: the book's :class:`~attention.MultiHeadAttention`, rewritten.

Every class here computes exactly the function ``MultiHeadAttention`` computes, with
its arguments, shapes and errors (naming itself). Each changes one thing about *how*:

==========================  ==============================================================
``FusedQKVAttention``       one projection for queries, keys and values together
``EinsumAttention``         every product, head split and head merge as one ``einsum``
``SDPAttention``            the masked softmax replaced by ``scaled_dot_product_attention``
``TorchMHAAdapter``         ``torch.nn.MultiheadAttention`` underneath
``FastMultiHeadAttention``  fused projection + ``scaled_dot_product_attention``: use this
``FlexAttention``           ``flex_attention`` with a causal block mask (trains on CUDA only)
==========================  ==============================================================

``EinsumAttention`` and ``SDPAttention`` keep the book's layers: they subclass
``MultiHeadAttention`` and override only ``forward``. The fused ones share
``FastMultiHeadAttention.forward`` and swap its attention step,
:meth:`~FastMultiHeadAttention.attend`, the way Hugging Face models pick an attention
kernel and keep the module.

``cls.from_module(mha)`` builds any of them with the weights of a ``MultiHeadAttention``;
:func:`variants_of` builds all of :data:`VARIANTS`, the classes that run on this
installation (``benchmarks/variants.py`` in the repository times them).

>>> import torch
>>> from attention import MultiHeadAttention
>>> _ = torch.manual_seed(123)
>>> book = MultiHeadAttention(d_in=8, d_out=8, context_length=16, dropout=0.0, num_heads=2)
>>> x = torch.randn(2, 16, 8)  # (batch, num_tokens, d_in)
>>> list(VARIANTS)[:5]  # and FlexAttention where CUDA is available
['FusedQKVAttention', 'EinsumAttention', 'SDPAttention', 'TorchMHAAdapter',
 'FastMultiHeadAttention']
>>> variants = [cls.from_module(book) for cls in VARIANTS.values() if cls.runs_on_cpu]
>>> all(torch.allclose(variant(x), book(x), atol=1e-6) for variant in variants)
True
"""

from __future__ import annotations

import functools
import warnings
from typing import ClassVar, Self

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from attention import _checks
from attention.multihead import MultiHeadAttention
from attention.step import _attend
from attention.tiled import tiled_attention  # lives in tiled.py; still importable from here

__all__ = [
    "VARIANTS",
    "EinsumAttention",
    "FastMultiHeadAttention",
    "FlexAttention",
    "FusedQKVAttention",
    "SDPAttention",
    "TorchMHAAdapter",
    "causal_mask_mod",
    "forward_flops",
    "tiled_attention",
    "variants_of",
]


class _FromModule(nn.Module):
    """``from_module`` and ``runs_on_cpu``, for every variant."""

    #: Whether the class runs forward and backward on a CPU (else tests skip it).
    runs_on_cpu: ClassVar[bool] = True

    def _copy_weights(self, mha: MultiHeadAttention) -> None:
        self.load_state_dict(mha.state_dict())  # the book's layers, under the book's names

    @classmethod
    def from_module(cls, mha: MultiHeadAttention) -> Self:
        """This variant with the weights, dropout rate, training mode, device and dtype of ``mha``.

        ``mha`` is the book's module, not a subclass (such as ``SDPAttention``), whose
        ``forward`` may compute another function. Building the variant does not consume
        the global random generator.
        """
        if type(mha) is not MultiHeadAttention:
            raise TypeError(
                f"{cls.__name__}.from_module: expected a MultiHeadAttention, "
                f"got {type(mha).__name__}"
            )
        if mha.out_proj.bias is None:
            raise ValueError(
                f"{cls.__name__}.from_module: the variants have the book's out_proj, with a "
                f"bias; got a MultiHeadAttention built with out_bias=False"
            )
        reference = mha.W_query.weight
        with torch.random.fork_rng(devices=[]):  # leave the caller's random stream alone
            args = (mha.d_in, mha.d_out, mha.context_length, mha.dropout.p, mha.num_heads)
            new = cls(*args, qkv_bias=mha.W_query.bias is not None)
        new = new.to(device=reference.device, dtype=reference.dtype)
        with torch.no_grad():
            new._copy_weights(mha)
        return new.train(mha.training)


class _BookLayers(_FromModule, MultiHeadAttention):
    """A variant that keeps the book's layers, state-dict keys and errors: it swaps ``forward``."""

    @property
    def dropout_p(self) -> float:
        return self.dropout.p


class EinsumAttention(_BookLayers):
    """The book's attention with every product written as an ``einsum``.

    Each index names an axis, so the head split and merge need no ``view`` or
    ``transpose``. Letters: ``b`` batch, ``t`` token, ``c`` input feature, ``h`` head,
    ``d`` head feature, ``q``/``k`` query/key token, ``o`` output feature.

    >>> import torch
    >>> from attention import MultiHeadAttention
    >>> mha = MultiHeadAttention(4, 4, context_length=6, dropout=0.0, num_heads=2)
    >>> mha.W_query.weight.view(2, 2, 4).shape  # (d_out, d_in) read as (h, d, c)
    torch.Size([2, 2, 4])
    >>> x = torch.randn(2, 6, 4)  # (b, t, c)
    >>> torch.allclose(EinsumAttention.from_module(mha)(x), mha(x), atol=1e-6)
    True
    """

    def _project(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        weight = layer.weight.view(self.num_heads, self.head_dim, self.d_in)
        projected = torch.einsum("btc,hdc->bhtd", x, weight)  # (batch, heads, tokens, head_dim)
        if layer.bias is not None:
            projected = projected + layer.bias.view(self.num_heads, 1, self.head_dim)
        return projected

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        num_tokens = x.shape[1]
        layers = (self.W_query, self.W_key, self.W_value)
        # each (batch, heads, tokens, head_dim)
        queries, keys, values = (self._project(layer, x) for layer in layers)
        scores = torch.einsum("bhqd,bhkd->bhqk", queries, keys)  # (batch, heads, tokens, tokens)
        scores = scores.masked_fill(self.mask[:num_tokens, :num_tokens], float("-inf"))
        weights = self.dropout(torch.softmax(scores / self.head_dim**0.5, dim=-1))
        context = torch.einsum("bhqk,bhkd->bhqd", weights, values)  # (batch, heads, tokens, hd)
        # out_proj's weight (d_out, d_out) read as (d_out, heads, head_dim): summing over
        # h and d merges the heads and projects them in one product.
        out_weight = self.out_proj.weight.view(self.d_out, self.num_heads, self.head_dim)
        out = torch.einsum("bhtd,ohd->bto", context, out_weight)
        return out if self.out_proj.bias is None else out + self.out_proj.bias


class SDPAttention(_BookLayers):
    """The book's attention with ``scaled_dot_product_attention(is_causal=True)``.

    The book's layers, with the scores, mask, softmax, dropout (in training mode only)
    and weighted sum replaced by one call that PyTorch dispatches to a fused kernel.

    >>> from attention import MultiHeadAttention
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> sdpa = SDPAttention.from_module(mha)
    >>> isinstance(sdpa, MultiHeadAttention), list(sdpa.state_dict()) == list(mha.state_dict())
    (True, True)
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        batch, num_tokens, _ = x.shape
        queries = self._split_heads(self.W_query(x))  # (batch, heads, tokens, head_dim)
        keys = self._split_heads(self.W_key(x))
        values = self._split_heads(self.W_value(x))
        dropout_p = self.dropout_p if self.training else 0.0
        # (batch, heads, tokens, head_dim)
        context = _attend(queries, keys, values, causal=True, dropout=dropout_p)
        context = context.transpose(1, 2).reshape(batch, num_tokens, self.d_out)
        return self.out_proj(context)  # (batch, num_tokens, d_out)


def _load_fused(mha: MultiHeadAttention, weight, bias, out_proj: nn.Module) -> None:
    """Copy ``mha``'s projections into a fused ``(3 * d_out, d_in)`` one, and its ``out_proj``."""
    layers = (mha.W_query, mha.W_key, mha.W_value)
    weight.copy_(torch.cat([layer.weight for layer in layers]))
    if bias is not None:
        bias.copy_(torch.cat([layer.bias for layer in layers]))
    out_proj.load_state_dict(mha.out_proj.state_dict())


class _Arguments(_FromModule, nn.Module):
    """The book's arguments and input checks, for the variants with layers of their own."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        args = (d_in, d_out, context_length, num_heads, dropout)
        self.d_in, self.d_out, self.context_length, self.num_heads, self.head_dim, dropout = (
            _checks.multi_head_arguments(type(self).__name__, *args)
        )
        self.dropout_p = dropout


class TorchMHAAdapter(_Arguments):
    """``torch.nn.MultiheadAttention`` behind the book's interface, in ``.mha``.

    ``nn.MultiheadAttention`` projects the query from ``embed_dim`` to ``embed_dim``
    features, so it needs ``d_in == d_out`` (anything else raises a ``ValueError``).
    With ``qkv_bias=False`` its input bias is removed, so the parameters are the
    book's. The mask goes in as ``attn_mask`` with the ``is_causal`` hint and
    ``need_weights=False``, which lets PyTorch pick a fused kernel.

    >>> import torch
    >>> from attention import MultiHeadAttention
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(4, 4, context_length=6, dropout=0.0, num_heads=2)
    >>> x = torch.randn(2, 6, 4)
    >>> torch.allclose(TorchMHAAdapter.from_module(mha)(x), mha(x), atol=1e-6)
    True
    >>> TorchMHAAdapter(3, 4, context_length=6, dropout=0.0, num_heads=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: TorchMHAAdapter: torch.nn.MultiheadAttention needs d_in == d_out ...
    """

    mask: torch.Tensor  # a buffer: register_buffer("mask", ...) in __init__

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        if self.d_in != self.d_out:
            raise ValueError(
                f"TorchMHAAdapter: torch.nn.MultiheadAttention needs d_in == d_out (its query "
                f"projection maps embed_dim features to embed_dim), got d_in={d_in} and "
                f"d_out={d_out}; use FastMultiHeadAttention for d_in != d_out"
            )
        self.mha = nn.MultiheadAttention(d_out, num_heads, self.dropout_p, batch_first=True)
        if not qkv_bias:
            self.mha.register_parameter("in_proj_bias", None)
        self.register_buffer("mask", _causal_mask(context_length))

    def _copy_weights(self, mha: MultiHeadAttention) -> None:
        _load_fused(mha, self.mha.in_proj_weight, self.mha.in_proj_bias, self.mha.out_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        num_tokens = x.shape[1]
        future = self.mask[:num_tokens, :num_tokens]
        out, _ = self.mha(x, x, x, attn_mask=future, need_weights=False, is_causal=True)
        return out  # (batch, num_tokens, d_out)


def _causal_mask(context_length: int) -> torch.Tensor:
    """``True`` above the diagonal (the future), like ``MultiHeadAttention.mask``."""
    return torch.ones(context_length, context_length, dtype=torch.bool).triu(diagonal=1)


class FastMultiHeadAttention(_Arguments):
    """Multi-head causal attention as fast as plain PyTorch gets: the one to use.

    One fused projection ``qkv`` (rows ``0:d_out`` for queries, ``d_out:2*d_out`` for
    keys, the rest for values), ``scaled_dot_product_attention(is_causal=True)`` and
    the output projection. The fused projection reads the input once; the fused
    kernel never forms the ``(num_tokens, num_tokens)`` scores, so memory grows
    linearly with the tokens, and ``is_causal`` lets it skip the blocks above the
    diagonal. So there is no ``attention_weights``: to look at the weights, use
    :class:`~attention.MultiHeadAttention` with the same weights.

    >>> import torch
    >>> from attention import INPUTS, MultiHeadAttention
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> FastMultiHeadAttention.from_module(mha)(torch.stack((INPUTS, INPUTS)))[0, [0, -1]]
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

    def _copy_weights(self, mha: MultiHeadAttention) -> None:
        _load_fused(mha, self.qkv.weight, self.qkv.bias, self.out_proj)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _checks.module_input(self, x, d_in=self.d_in, context_length=self.context_length)
        B, T, _ = x.shape
        # (B, T, 3 * d_out) -> (3, B, num_heads, T, head_dim); unbind gives three views.
        qkv = self.qkv(x).view(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        y = self.attend(q, k, v)  # (B, num_heads, T, head_dim)
        # (B, num_heads, T, head_dim) -> (B, T, d_out); reshape copies only if it must.
        return self.out_proj(y.transpose(1, 2).reshape(B, T, self.d_out))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention of ``(B, num_heads, T, head_dim)`` heads: the step a variant swaps.

        The package's :func:`~attention.attend` with ``causal=True``.
        """
        dropout_p = self.dropout_p if self.training else 0.0
        return _attend(q, k, v, causal=True, dropout=dropout_p)


class FusedQKVAttention(FastMultiHeadAttention):
    """The fused projection with the book's masked softmax and dropout as its attention step.

    The attention itself is the book's: :func:`~attention.attend`'s eager
    implementation, the weights of :func:`~attention.scaled_dot_product_weights` with
    ``allowed=~mask`` (the book's ``mask`` buffer, ``True`` for the future), then
    ``dropout``.

    >>> import torch
    >>> from attention import INPUTS, MultiHeadAttention
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> fused = FusedQKVAttention.from_module(mha)
    >>> fused.qkv
    Linear(in_features=3, out_features=6, bias=False)
    >>> fused(torch.stack((INPUTS, INPUTS)))[0, [0, -1]]
    tensor([[0.3190, 0.4858],
            [0.2575, 0.4028]], grad_fn=<IndexBackward0>)
    """

    mask: torch.Tensor  # a buffer: register_buffer("mask", ...) in __init__

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self.dropout = nn.Dropout(self.dropout_p)
        self.register_buffer("mask", _causal_mask(context_length))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        num_tokens = q.shape[-2]
        future = self.mask[:num_tokens, :num_tokens]  # the book's mask: True = hidden
        dropout_p = self.dropout.p if self.training else 0.0
        # the eager implementation: the book's weights, dropout, weighted sum
        return _attend(q, k, v, ~future, dropout=dropout_p, implementation="eager")


def causal_mask_mod(batch, head, q_idx, kv_idx):
    """flex_attention's mask_mod: query ``q_idx`` may see key ``kv_idx`` at or before it."""
    return q_idx >= kv_idx


@functools.cache
def _compiled_flex_attention():
    # flex_attention is only fused (and fast) when compiled; compile once, on first use.
    return torch.compile(flex_attention)


class FlexAttention(FastMultiHeadAttention):
    """The fused projection with ``flex_attention`` and a causal block mask.

    ``flex_attention`` takes the mask as a function of the positions
    (:func:`causal_mask_mod`) and ``create_block_mask`` turns it into a block-sparse
    map, so the compiled kernel skips every block above the diagonal. It runs compiled
    on CUDA; on a CPU this torch has no backward pass for it, so there it runs
    uncompiled and only without gradients (else ``NotImplementedError``), and
    :data:`VARIANTS` lists it only where CUDA is available. It has no dropout:
    training with ``dropout > 0`` raises a ``ValueError``.

    >>> import torch
    >>> from attention import INPUTS, MultiHeadAttention
    >>> _ = torch.manual_seed(123)
    >>> mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> flex = FlexAttention.from_module(mha)
    >>> with torch.no_grad():
    ...     print(flex(torch.stack((INPUTS, INPUTS)))[0, [0, -1]])
    tensor([[0.3190, 0.4858],
            [0.2575, 0.4028]])
    >>> flex(INPUTS.unsqueeze(0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    NotImplementedError: FlexAttention: on a CPU, flex_attention has no backward pass ...
    """

    runs_on_cpu: ClassVar[bool] = False

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__(d_in, d_out, context_length, dropout, num_heads, qkv_bias)
        self._block_masks = {}  # (num_tokens, device) -> BlockMask, built once each

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.training and self.dropout_p > 0:
            raise ValueError(
                f"FlexAttention: flex_attention cannot drop attention weights, so it cannot "
                f"train with dropout={self.dropout_p}; call .eval(), or build it with "
                f"dropout=0.0"
            )
        on_cuda, T = q.device.type == "cuda", q.shape[-2]
        if not on_cuda and q.requires_grad:
            raise NotImplementedError(
                f"FlexAttention: on a CPU, flex_attention has no backward pass (torch "
                f"{torch.__version__}), got an input on {q.device} that needs gradients; run "
                f"it under torch.no_grad(), on CUDA, or use FastMultiHeadAttention"
            )
        key = (T, q.device)
        if key not in self._block_masks:
            self._block_masks[key] = create_block_mask(
                causal_mask_mod, None, None, T, T, device=q.device
            )
        if on_cuda:
            return _compiled_flex_attention()(q, k, v, block_mask=self._block_masks[key])
        with warnings.catch_warnings():  # uncompiled on purpose: the CPU path is a check
            warnings.filterwarnings("ignore", "flex_attention called without torch.compile")
            return flex_attention(q, k, v, block_mask=self._block_masks[key])


#: The variants that run on this installation, by class name. FlexAttention is listed
#: only where CUDA is available.
VARIANTS: dict[str, type[_FromModule]] = {
    cls.__name__: cls
    for cls in (
        FusedQKVAttention,
        EinsumAttention,
        SDPAttention,
        TorchMHAAdapter,
        FastMultiHeadAttention,
    )
}
if torch.cuda.is_available():
    VARIANTS["FlexAttention"] = FlexAttention


def variants_of(mha: MultiHeadAttention) -> dict[str, nn.Module]:
    """``mha`` and every variant of :data:`VARIANTS` that runs on its device, with its weights.

    ``mha``, the book's module, comes first, under its class name.

    Returns
    -------
    dict of str to torch.nn.Module
        By class name, each built with ``from_module(mha)``.

    Examples
    --------
    >>> from attention import MultiHeadAttention
    >>> book = MultiHeadAttention(4, 4, context_length=8, dropout=0.0, num_heads=2)
    >>> list(variants_of(book))[:3]
    ['MultiHeadAttention', 'FusedQKVAttention', 'EinsumAttention']
    """
    on_cpu = mha.W_query.weight.device.type == "cpu"
    modules: dict[str, nn.Module] = {type(mha).__name__: mha}
    for name, cls in VARIANTS.items():
        if cls.runs_on_cpu or not on_cpu:
            modules[name] = cls.from_module(mha)
    return modules


def forward_flops(batch: int, tokens: int, d_in: int, d_out: int, heads: int) -> int:
    """Useful floating-point operations of one causal multi-head attention forward.

    A product of ``(m, k)`` and ``(k, n)`` matrices counts ``2 * m * k * n``. The
    projections are ``3 * 2*B*T*d_in*d_out`` (queries, keys, values) plus
    ``2*B*T*d_out*d_out`` (output); the two attention products (scores and the
    weighted sum) are ``2*B*heads*T*T*head_dim`` each, of which causal attention
    needs only the half on and below the diagonal. Softmax, scaling and masking are
    not counted. Forward plus backward counts about 3 times this.

    Examples
    --------
    >>> forward_flops(batch=1, tokens=2, d_in=4, d_out=4, heads=2)  # 256 + 32
    288
    >>> forward_flops(batch=8, tokens=1024, d_in=768, d_out=768, heads=12) / 1e9
    51.539607552
    """
    head_dim = d_out // heads
    projections = 3 * 2 * batch * tokens * d_in * d_out + 2 * batch * tokens * d_out * d_out
    attention = 2 * (2 * batch * heads * tokens * tokens * head_dim) // 2
    return projections + attention
