"""What the test files share: ids, shapes, builders, tolerances and argument tables.

Every module of Part I is described by one :class:`Shape`, so a single hypothesis draw
can build any of the six modules and an input that fits it. :data:`VALID` holds small,
valid constructor arguments for each module, which the error tests override one at a
time; the tables after it list the arguments each module must reject.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import re
from collections.abc import Callable

import pytest
import torch
from hypothesis import example
from hypothesis import strategies as st
from torch import nn

from attention import (
    MODELS,
    CausalAttention,
    GroupedQueryAttention,
    Head,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    MultiHeadLatentAttention,
    ProjectionRMSNorm,
    RMSNorm,
    Rotary,
    SelfAttentionV1,
    SelfAttentionV2,
    _checks,
    layer_for,
)
from attention.models import ModelFacts, Sizes

F64 = torch.float64

#: Part I's modules by subject: each subject's test file runs the shared tests on its own.
SELF_ATTENTION = (SelfAttentionV1, SelfAttentionV2)
SINGLE_HEAD_CAUSAL = (CausalAttention, Head)
MULTI_HEAD = (MultiHeadAttentionWrapper, MultiHeadAttention)
#: The name of each causal module's mask buffer.
MASK_BUFFER = {
    CausalAttention: "mask",
    Head: "tril",
    MultiHeadAttentionWrapper: "heads.0.mask",
    MultiHeadAttention: "mask",
}


#: The two modes of a module, as the test ids name them.
TRAIN_AND_EVAL = pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
#: An unbatched ``(num_tokens, d_in)`` input and a batched one.
RANKS = pytest.mark.parametrize("rank", [2, 3], ids=["2d", "3d"])


def ids(value: object) -> str | None:
    """Test ids that name dtypes (``float64``, not ``dtype0``); pytest names classes itself."""
    return str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else None


# ---------------------------------------------------------------------------------------
# Tolerances
# ---------------------------------------------------------------------------------------

#: Agreement in float64 with PyTorch's own kernels, to rounding.
TIGHT = {"atol": 1e-10, "rtol": 1e-10}


def assert_tight(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, **TIGHT)


def assert_book(actual: torch.Tensor, published: list | float) -> None:
    """``actual`` matches the book's 4-decimal numbers."""
    expected = torch.tensor(published, dtype=actual.dtype)
    torch.testing.assert_close(actual.detach(), expected, atol=1e-4, rtol=0)


# ---------------------------------------------------------------------------------------
# Shapes and the modules built from them
# ---------------------------------------------------------------------------------------


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


def with_edge_shapes(*, square: bool = False, **others: object) -> Callable:
    """Decorator adding :data:`EDGE_SHAPES` as explicit examples of the ``shape`` argument.

    ``others`` are the values of the test's other hypothesis arguments in those examples.
    """

    def decorate(test: Callable) -> Callable:
        for shape in EDGE_SHAPES:
            if square:
                shape = dataclasses.replace(shape, d_in=shape.d_out)
            test = example(shape=shape, **others)(test)
        return test

    return decorate


def build(cls: type, shape: Shape, *, dropout: float = 0.0, dtype: torch.dtype = F64) -> nn.Module:
    """Build a ``cls`` for ``shape`` from ``shape.seed``, leaving the global RNG alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(shape.seed)
        module = _construct(cls, shape, dropout)
    return module.to(dtype)


def _construct(cls: type, s: Shape, dropout: float) -> nn.Module:
    if cls is SelfAttentionV1:
        return SelfAttentionV1(s.d_in, s.d_out)
    if cls is SelfAttentionV2:
        return SelfAttentionV2(s.d_in, s.d_out, qkv_bias=s.qkv_bias)
    if cls is CausalAttention:
        return CausalAttention(s.d_in, s.d_out, s.context_length, dropout, qkv_bias=s.qkv_bias)
    if cls is Head:
        return Head(s.d_in, s.d_out, s.context_length, dropout)
    if cls is MultiHeadAttentionWrapper:
        return MultiHeadAttentionWrapper(
            s.d_in, s.head_dim, s.context_length, dropout, s.num_heads, qkv_bias=s.qkv_bias
        )
    if cls is MultiHeadAttention:
        return MultiHeadAttention(
            s.d_in, s.d_out, s.context_length, dropout, s.num_heads, qkv_bias=s.qkv_bias
        )
    raise AssertionError(f"unknown module {cls}")


def make_input(shape: Shape, *, rank: int = 3, dtype: torch.dtype = F64) -> torch.Tensor:
    """A standard-normal ``(batch, num_tokens, d_in)`` input; ``rank=2`` drops the batch."""
    generator = torch.Generator().manual_seed(shape.seed + 1)
    size = (shape.batch, shape.num_tokens, shape.d_in)[3 - rank :]
    return torch.randn(size, generator=generator, dtype=dtype)


def causal_mask(num_tokens: int) -> torch.Tensor:
    """``True`` above the diagonal: the future, the positions a query must not see."""
    return torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal=1)


def queries_keys_values(module: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The queries, keys and values a single-head module computes from ``x``."""
    if isinstance(module, SelfAttentionV1):  # weight matrices, not layers
        return x @ module.W_query, x @ module.W_key, x @ module.W_value
    if isinstance(module, Head):  # Karpathy's names
        return module.query(x), module.key(x), module.value(x)
    return module.W_query(x), module.W_key(x), module.W_value(x)


# ---------------------------------------------------------------------------------------
# Valid constructor arguments, and the ones each module must reject
# ---------------------------------------------------------------------------------------

#: Each module with valid arguments: Part I's take 3 input features, at most 4 tokens.
VALID: dict[type, dict] = {
    SelfAttentionV1: {"d_in": 3, "d_out": 2},
    SelfAttentionV2: {"d_in": 3, "d_out": 2},
    CausalAttention: {"d_in": 3, "d_out": 2, "context_length": 4, "dropout": 0.0},
    Head: {"n_embd": 3, "head_size": 2, "block_size": 4, "dropout": 0.0},
    MultiHeadAttentionWrapper: {
        "d_in": 3,
        "d_out": 2,
        "context_length": 4,
        "dropout": 0.0,
        "num_heads": 2,
    },
    MultiHeadAttention: {
        "d_in": 3,
        "d_out": 2,
        "context_length": 4,
        "dropout": 0.0,
        "num_heads": 2,
    },
    GroupedQueryAttention: {
        "d_in": 8,
        "d_out": 8,
        "context_length": 4,
        "num_heads": 4,
        "num_kv_heads": 2,
    },
    MultiHeadLatentAttention: {
        "d_in": 8,
        "d_out": 8,
        "context_length": 4,
        "num_heads": 2,
        "kv_lora_rank": 4,
        "qk_nope_head_dim": 2,
        "qk_rope_head_dim": 2,
        "v_head_dim": 2,
    },
}
#: Valid arguments every efficient variant accepts (TorchMHAAdapter needs d_in == d_out).
VARIANT_ARGUMENTS = {"d_in": 4, "d_out": 4, "context_length": 4, "dropout": 0.0, "num_heads": 2}


def make(cls: type, **overrides: object) -> nn.Module:
    """A ``cls`` built from :data:`VALID`'s arguments, with ``overrides`` replacing some."""
    return cls(**{**VALID[cls], **overrides})


def size_names(cls: type) -> tuple[str, str]:
    """What a module calls d_in and context_length: Karpathy's Head has its own names."""
    return ("n_embd", "block_size") if cls is Head else ("d_in", "context_length")


def size_arguments(cls: type) -> list[str]:
    """The constructor arguments of ``cls`` that are sizes (positive integers)."""
    return [name for name in VALID[cls] if name != "dropout"]


def expect(message: str, error: type[Exception] = ValueError):
    """``pytest.raises`` for an ``error`` whose message starts with ``message``.

    A wrong value raises a ValueError (the default); a wrong type, a TypeError.
    """
    return pytest.raises(error, match="^" + re.escape(message))


def _rejected(*rows: tuple) -> list:
    """``(kwargs, message pattern[, error])`` rows as pytest params, named by their arguments.

    ``error`` is the exception's class: ValueError (for a wrong value) unless given.
    """
    params = []
    for kwargs, message, *error in rows:
        name = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        params.append(pytest.param(kwargs, message, *(error or [ValueError]), id=name))
    return params


#: Part II's modules: arguments each rejects, over :data:`VALID`'s, and the message's pattern.
BAD_ARGUMENTS = {
    GroupedQueryAttention: _rejected(
        (
            {"num_heads": 4, "num_kv_heads": 3},
            r"num_heads=4 and num_kv_heads=3 \(4 / 3 = 1.33333\)",
        ),
        ({"num_kv_heads": 0}, r"num_kv_heads must be at least 1, got 0"),
        ({"d_out": 10}, r"d_out=10 and num_heads=4"),
        (
            {"rope_base": 10000.0},
            r"rope_base= is no longer taken; give rotary=Rotary\(head_dim, base\)",
        ),
        ({"rotary": 10000.0}, r"rotary must be a Rotary or None, got 10000.0", TypeError),
        ({"window": 0}, r"window must be at least 1, got 0"),
        ({"dropout": 1.5}, r"dropout must be in \[0, 1\).*got 1.5"),
        ({"out_bias": 0}, r"out_bias must be True or False.*got 0 of type int", TypeError),
    ),
    MultiHeadLatentAttention: _rejected(
        ({"qk_rope_head_dim": 3}, r"qk_rope_head_dim must be even.*got qk_rope_head_dim=3"),
        ({"kv_lora_rank": 0}, r"kv_lora_rank must be at least 1, got 0"),
        ({"q_lora_rank": -1}, r"q_lora_rank must be at least 1, got -1"),
        (
            {"v_head_dim": 2.0},
            r"v_head_dim must be a positive integer, got 2.0 of type float",
            TypeError,
        ),
        (
            {"rope_base": 0.5},
            r"rope_base= is no longer taken; give rotary=Rotary\(qk_rope_head_dim, base",
        ),
        ({"rotary": "5"}, r"rotary must be a Rotary or None, got str", TypeError),
        ({"rotary": Rotary(6)}, r"expected a rotary over qk_rope_head_dim=\d+ numbers"),
        ({"eps": 0}, r"eps must be a positive number, got 0"),
        ({"eps": None}, r"eps must be a positive number, got None", TypeError),
        ({"dropout": -0.1}, r"dropout must be in \[0, 1\).*got -0.1"),
        ({"qkv_bias": 1}, r"qkv_bias must be True or False.*got 1 of type int", TypeError),
        ({"out_bias": "no"}, r"out_bias must be True or False.*got 'no' of type str", TypeError),
        (
            {"bias": True},
            r"bias= is no longer taken; write qkv_bias= .* out_bias= .*\(got bias=True\)",
        ),
    ),
}

#: Arguments MultiHeadAttention rejects, over VARIANT_ARGUMENTS: every variant must too.
BAD_VARIANT_ARGUMENTS = {
    "d_in zero": {"d_in": 0},
    "d_out a float": {"d_out": 2.5},
    "context_length a bool": {"context_length": True},
    "num_heads zero": {"num_heads": 0},
    "d_out not divisible by num_heads": {"d_out": 5, "num_heads": 2},
    "dropout one": {"dropout": 1.0},
    "dropout negative": {"dropout": -0.1},
    "dropout a string": {"dropout": "0.1"},
}
#: Inputs a MultiHeadAttention built from VARIANT_ARGUMENTS rejects: every variant must too.
BAD_VARIANT_INPUTS = {
    "too many tokens": torch.rand(2, 5, 4),
    "wrong last dimension": torch.rand(2, 3, 3),
    "unbatched": torch.rand(3, 4),
    "4-D": torch.rand(1, 2, 3, 4),
    "integers": torch.ones(2, 3, 4, dtype=torch.int64),
    "booleans": torch.ones(2, 3, 4, dtype=torch.bool),
    "float64 into float32": torch.rand(2, 3, 4, dtype=torch.float64),
    "a list": [[[0.1, 0.2, 0.3, 0.4]]],
}


# ---------------------------------------------------------------------------------------
# Part II: layouts of a GroupedQueryAttention, drawn by hypothesis
# ---------------------------------------------------------------------------------------


@st.composite
def gqa_layouts(draw: st.DrawFn, *, max_tokens: int = 6, even_head_dim: bool = False) -> dict:
    """Sizes of a GroupedQueryAttention whose d_in equals d_out (as Llama's hidden_size)."""
    num_kv_heads = draw(st.integers(1, 3))
    num_heads = num_kv_heads * draw(st.integers(1, 3))
    head_dim = 2 * draw(st.integers(1, 3)) if even_head_dim else draw(st.integers(1, 5))
    context_length = draw(st.integers(1, max_tokens))
    return {
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "d_model": num_heads * head_dim,
        "context_length": context_length,
        "num_tokens": draw(st.integers(1, context_length)),
        "batch": draw(st.integers(1, 2)),
        "qkv_bias": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**16)),
    }


def make_gqa(layout: dict, *, parts: tuple[str, ...] = (), **kwargs) -> GroupedQueryAttention:
    """A float64 GroupedQueryAttention in eval mode, with ``layout``'s sizes and seed.

    Llama's layout: ``layout["qkv_bias"]`` is ``attention_bias``, a bias on all four
    projections or on none, so ``out_bias`` follows ``qkv_bias``. ``parts`` are added
    after construction, as :mod:`attention.models.recipes` adds them, from the same seed:
    ``"W_gate"``, ``"qk_norm"`` (per head), ``"qk_norm_projection"`` (OLMo 2's),
    ``"v_norm"`` and ``"no_W_value"`` (Gemma 4's keys as values). ``rope_base`` is
    this helper's shorthand for ``rotary=Rotary(layout["head_dim"], rope_base)``.
    """
    d = layout["num_heads"] * layout["head_dim"]
    base = kwargs.pop("rope_base", None)
    if base is not None:
        kwargs["rotary"] = Rotary(layout["head_dim"], base)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(layout["seed"])
        module = GroupedQueryAttention(
            d,
            d,
            layout["context_length"],
            num_heads=layout["num_heads"],
            num_kv_heads=layout["num_kv_heads"],
            qkv_bias=layout["qkv_bias"],
            out_bias=layout["qkv_bias"],
            **kwargs,
        )
        add_parts(module, parts)
    return module.to(F64).eval()


def add_parts(module: GroupedQueryAttention, parts: tuple[str, ...]) -> GroupedQueryAttention:
    """Assign ``parts`` (names as in :func:`make_gqa`) to ``module``, in the recipes' order."""
    heads, kv_heads, head_dim = module.num_heads, module.num_kv_heads, module.head_dim
    unknown = set(parts) - {"W_gate", "qk_norm", "qk_norm_projection", "v_norm", "no_W_value"}
    assert not unknown, unknown
    if "W_gate" in parts:
        bias = module.W_query.bias is not None
        module.W_gate = nn.Linear(module.d_in, heads * head_dim, bias=bias)
    if "qk_norm" in parts:
        module.q_norm, module.k_norm = RMSNorm(head_dim), RMSNorm(head_dim)
    if "qk_norm_projection" in parts:
        module.q_norm = ProjectionRMSNorm(heads * head_dim)
        module.k_norm = ProjectionRMSNorm(kv_heads * head_dim)
    if "v_norm" in parts:
        module.v_norm = RMSNorm(head_dim, elementwise_affine=False)
    if "no_W_value" in parts:
        module.W_value = None
    return module


def changed(facts: ModelFacts, **changes: object) -> ModelFacts:
    """``facts`` with some facts changed: a dict changes some of a group's fields
    (``rope={"theta": 1e4}``), any other value replaces the field (``attention_bias``).
    Another RoPE base or scaling, a cap or a bias is another model, not another size."""
    for name, value in changes.items():
        if isinstance(value, dict):
            value = dataclasses.replace(getattr(facts, name), **value)
        facts = dataclasses.replace(facts, **{name: value})
    return facts


def make_layer(
    layout: dict, model: str | ModelFacts, kind: str = "full_attention", **sizes: int | None
):
    """``layer_for(facts, ...)`` at ``layout``'s sizes and seed, float64, eval mode.

    ``model``: a name in ``MODELS``, or a changed entry (:func:`changed`). The model's
    first layer of ``kind`` that computes its own keys and values; the layout's
    ``qkv_bias`` is ``attention_bias`` (all four projections); ``sizes``: more
    :class:`~attention.models.Sizes` (``sliding_window``, ``attention_chunk_size``).
    """
    facts = MODELS[model] if isinstance(model, str) else model
    facts = dataclasses.replace(facts, attention_bias=layout["qkv_bias"])
    index = next(
        i
        for i, (k, shared) in enumerate(zip(facts.layer_types, facts.kv_shared, strict=True))
        if k == kind and not shared
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(layout["seed"])
        layer = layer_for(facts, index, sizes=layout_sizes(layout, **sizes))
    return layer.to(F64).eval()


def layout_sizes(layout: dict, **more: int | None) -> Sizes:
    """The :class:`~attention.models.Sizes` of ``layout`` (and ``more``)."""
    return Sizes(
        hidden_size=layout["num_heads"] * layout["head_dim"],
        max_position_embeddings=layout["context_length"],
        num_heads=layout["num_heads"],
        num_kv_heads=layout["num_kv_heads"],
        head_dim=layout["head_dim"],
        **more,
    )


def layout_input(layout: dict) -> torch.Tensor:
    """A float64 standard-normal ``(batch, num_tokens, d_model)`` input for ``layout``."""
    generator = torch.Generator().manual_seed(layout["seed"] + 1)
    size = (layout["batch"], layout["num_tokens"], layout["d_model"])
    return torch.randn(size, generator=generator, dtype=F64)


#: RoPE's base in the Part III comparisons (transformers' attention takes cos and sin of it).
BASE = 10000.0


def randomize_new_parameters(gqa: GroupedQueryAttention, seed: int) -> GroupedQueryAttention:
    """Give the norms' weights and the sinks random values, so that copying them matters.

    (They start at ones and zeros, which a mix-up of two of them would not reveal.)
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for norm in (gqa.q_norm, gqa.k_norm):
            if norm is not None and norm.weight is not None:
                norm.weight.copy_(0.5 + torch.rand(norm.weight.shape, generator=generator))
        if gqa.sinks is not None:
            gqa.sinks.copy_(torch.randn(gqa.sinks.shape, generator=generator, dtype=F64))
    return gqa


def decode_splits(n: int, prefill: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of a prefill of ``prefill`` tokens, then one token at a time to ``n``."""
    return list(itertools.pairwise([0, *range(prefill, n + 1)]))


def vectors(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def rotary_gqa(
    d_in: int,
    d_out: int,
    context_length: int,
    *,
    rope_base: float,
    rope_scaling: dict | None = None,
    partial_rotary_factor: float = 1.0,
    **kwargs,
) -> GroupedQueryAttention:
    """A GroupedQueryAttention whose ``rotary`` part has the scaling and partial factor."""
    head_dim = d_out // kwargs["num_heads"]
    rotary = Rotary(head_dim, rope_base, rope_scaling, partial_rotary_factor)
    return GroupedQueryAttention(d_in, d_out, context_length, rotary=rotary, **kwargs)


def scaled_gqa(scaling: dict | None, seed: int = 0, **kwargs) -> GroupedQueryAttention:
    options = {"num_heads": 4, "num_kv_heads": 2, "rope_base": 10000.0, "out_bias": False}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gqa = rotary_gqa(32, 32, 64, **{**options, **kwargs}, rope_scaling=scaling)
    return gqa.to(F64).eval()


def count_check_calls(monkeypatch) -> dict[str, int]:
    """Count calls of every function in attention._checks from now on, by name."""
    counts: dict[str, int] = {}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            counts[name] = counts.get(name, 0) + 1
            return function(*args, **kwargs)

        return wrapper

    for name, function in list(vars(_checks).items()):
        if inspect.isfunction(function) and function.__module__ == _checks.__name__:
            monkeypatch.setattr(_checks, name, counted(name, function))
    return counts


def jupyter_png(fig):
    """``fig`` as a page of the site holds it: saved as Jupyter's inline backend saves
    figures (``bbox_inches="tight"``, the figure's own colours), read back as RGBA."""
    import io

    from matplotlib.image import imread

    buffer = io.BytesIO()
    fig.canvas.print_figure(
        buffer,
        format="png",
        facecolor=fig.get_facecolor(),
        edgecolor=fig.get_edgecolor(),
        bbox_inches="tight",
    )
    buffer.seek(0)
    return imread(buffer)
