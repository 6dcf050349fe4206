"""Shapes, hypothesis strategies and module factories shared by the test files.

Every module is described by one :class:`Shape`, so a single hypothesis draw can
build any of the six modules and an input that fits it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from hypothesis import example
from hypothesis import strategies as st
from torch import nn

from attention import (
    CausalAttention,
    Head,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV1,
    SelfAttentionV2,
)

#: Modules whose tokens see every other token.
NON_CAUSAL = ("SelfAttentionV1", "SelfAttentionV2")
#: Modules with a causal mask and a dropout layer.
CAUSAL = ("CausalAttention", "Head", "MultiHeadAttentionWrapper", "MultiHeadAttention")
ALL_MODULES = NON_CAUSAL + CAUSAL
#: The name of each causal module's mask buffer.
MASK_BUFFER = {
    "CausalAttention": "mask",
    "Head": "tril",
    "MultiHeadAttentionWrapper": "heads.0.mask",
    "MultiHeadAttention": "mask",
}


@dataclasses.dataclass(frozen=True)
class Shape:
    """Sizes of one module and of the input it gets.

    ``d_out`` is the total output size, ``num_heads * head_dim``; single-head modules
    use ``d_out`` as their output size and ignore ``num_heads``.
    """

    batch: int
    num_tokens: int
    context_length: int
    d_in: int
    num_heads: int
    head_dim: int
    qkv_bias: bool
    seed: int

    @property
    def d_out(self) -> int:
        return self.num_heads * self.head_dim


@st.composite
def shapes(draw: st.DrawFn, *, square: bool = False, max_tokens: int = 5) -> Shape:
    """Small shapes; with ``square=True``, ``d_in == d_out`` (as nn.MultiheadAttention needs)."""
    context_length = draw(st.integers(1, max_tokens))
    num_heads = draw(st.integers(1, 3))
    head_dim = draw(st.integers(1, 3))
    return Shape(
        batch=draw(st.integers(1, 3)),
        num_tokens=draw(st.integers(1, context_length)),
        context_length=context_length,
        d_in=num_heads * head_dim if square else draw(st.integers(1, 5)),
        num_heads=num_heads,
        head_dim=head_dim,
        qkv_bias=draw(st.booleans()),
        seed=draw(st.integers(0, 2**32 - 1)),
    )


#: Corner cases every parity test runs explicitly, whatever hypothesis draws.
EDGE_SHAPES = (
    # batch 1, a single token, one head, everything of size 1
    Shape(1, 1, 1, d_in=1, num_heads=1, head_dim=1, qkv_bias=False, seed=0),
    # num_tokens == context_length, two heads, d_in != d_out, with biases
    Shape(1, 4, 4, d_in=3, num_heads=2, head_dim=2, qkv_bias=True, seed=1),
    # fewer tokens than context_length, one head, d_in > d_out
    Shape(3, 2, 5, d_in=5, num_heads=1, head_dim=3, qkv_bias=True, seed=2),
    # three heads, d_in < d_out, no biases
    Shape(2, 5, 5, d_in=2, num_heads=3, head_dim=2, qkv_bias=False, seed=3),
)


def with_edge_shapes(*, square: bool = False) -> Callable:
    """Decorator adding :data:`EDGE_SHAPES` as explicit examples of the ``shape`` argument."""

    def decorate(test: Callable) -> Callable:
        for shape in EDGE_SHAPES:
            if square:
                shape = dataclasses.replace(shape, d_in=shape.d_out)
            test = example(shape=shape)(test)
        return test

    return decorate


def build(
    name: str, shape: Shape, *, dropout: float = 0.0, dtype: torch.dtype = torch.float64
) -> nn.Module:
    """Build module ``name`` for ``shape`` from ``shape.seed``, leaving the global RNG alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(shape.seed)
        module = _construct(name, shape, dropout)
    return module.to(dtype)


def _construct(name: str, s: Shape, dropout: float) -> nn.Module:
    if name == "SelfAttentionV1":
        return SelfAttentionV1(s.d_in, s.d_out)
    if name == "SelfAttentionV2":
        return SelfAttentionV2(s.d_in, s.d_out, qkv_bias=s.qkv_bias)
    if name == "CausalAttention":
        return CausalAttention(s.d_in, s.d_out, s.context_length, dropout, qkv_bias=s.qkv_bias)
    if name == "Head":
        return Head(s.d_in, s.d_out, s.context_length, dropout)
    if name == "MultiHeadAttentionWrapper":
        return MultiHeadAttentionWrapper(
            s.d_in, s.head_dim, s.context_length, dropout, s.num_heads, qkv_bias=s.qkv_bias
        )
    if name == "MultiHeadAttention":
        return MultiHeadAttention(
            s.d_in, s.d_out, s.context_length, dropout, s.num_heads, qkv_bias=s.qkv_bias
        )
    raise AssertionError(f"unknown module {name}")


def make_input(shape: Shape, *, rank: int = 3, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """A standard-normal ``(batch, num_tokens, d_in)`` input; ``rank=2`` drops the batch."""
    generator = torch.Generator().manual_seed(shape.seed + 1)
    size = (shape.batch, shape.num_tokens, shape.d_in)[3 - rank :]
    return torch.randn(size, generator=generator, dtype=dtype)


def causal_mask(num_tokens: int) -> torch.Tensor:
    """``True`` above the diagonal: the future, the positions a query must not see."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal=1)
