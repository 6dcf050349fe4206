"""Every efficient variant computes what the book's MultiHeadAttention computes.

Each variant is built with ``from_module`` from a ``MultiHeadAttention`` and compared
in float64 to 1e-10, in eval and train mode, forward and backward, over
hypothesis-drawn shapes plus the corner cases in ``EDGE_SHAPES``. Bad arguments and
bad inputs must raise the book's ``ValueError``, naming the variant instead.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from helpers import (
    BAD_VARIANT_ARGUMENTS,
    BAD_VARIANT_INPUTS,
    TRAIN_AND_EVAL,
    VARIANT_ARGUMENTS,
    Shape,
    assert_tight,
    build,
    make_input,
    shapes,
    with_edge_shapes,
)
from hypothesis import given

from attention import (
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
)
from attention.efficient import (
    VARIANTS,
    EinsumAttention,
    FastMultiHeadAttention,
    FlexAttention,
    SDPAttention,
    TorchMHAAdapter,
    variants_of,
)

#: The variants that run on a CPU (all but FlexAttention), which these tests use.
CPU_VARIANTS = [cls for cls in VARIANTS.values() if cls.runs_on_cpu]
#: Variants that can only compute the book's function when d_in == d_out.
SQUARE_ONLY = (TorchMHAAdapter,)


def fit(cls: type, shape: Shape) -> Shape:
    """``shape``, made square for the variants that need ``d_in == d_out``."""
    return dataclasses.replace(shape, d_in=shape.d_out) if cls in SQUARE_ONLY else shape


def test_the_expected_variants_are_registered():
    expected = [
        "FusedQKVAttention",
        "EinsumAttention",
        "SDPAttention",
        "TorchMHAAdapter",
        "FastMultiHeadAttention",
    ]
    assert list(VARIANTS)[:5] == expected
    flex_supported = torch.cuda.is_available()
    assert ("FlexAttention" in VARIANTS) == flex_supported
    assert all(name == cls.__name__ for name, cls in VARIANTS.items())


# ---------------------------------------------------------------------------------------
# The same function as MultiHeadAttention
# ---------------------------------------------------------------------------------------


@TRAIN_AND_EVAL
@pytest.mark.parametrize("cls", CPU_VARIANTS)
@given(shape=shapes())
@with_edge_shapes()
def test_variant_equals_multi_head_attention(cls, training, shape):
    """In eval mode with dropout (which is then off); in train mode without it."""
    shape = fit(cls, shape)
    dropout = 0.0 if training else 0.5
    book = build(MultiHeadAttention, shape, dropout=dropout).train(training)
    variant = cls.from_module(book)
    assert variant.training is training and variant.dropout_p == dropout
    x = make_input(shape)
    assert_tight(variant(x), book(x))
    with torch.no_grad():  # the inference-only fast paths (nn.MultiheadAttention has one)
        assert_tight(variant(x), book(x))


@pytest.mark.parametrize("cls", CPU_VARIANTS)
@given(shape=shapes())
@with_edge_shapes()
def test_variant_gradients_equal_multi_head_attention_gradients(cls, shape):
    shape = fit(cls, shape)
    book = build(MultiHeadAttention, shape)
    variant = cls.from_module(book)
    x = make_input(shape)
    grad_out = torch.randn(shape.batch, shape.num_tokens, shape.d_out, dtype=torch.float64)
    x_book, x_variant = x.clone().requires_grad_(), x.clone().requires_grad_()
    book(x_book).backward(grad_out)
    variant(x_variant).backward(grad_out)
    assert_tight(x_variant.grad, x_book.grad)
    # Every parameter is trained, and the output projection's gradient is the book's.
    assert all(p.grad is not None and p.grad.isfinite().all() for p in variant.parameters())
    out_proj = variant.mha.out_proj if cls is TorchMHAAdapter else variant.out_proj
    assert_tight(out_proj.weight.grad, book.out_proj.weight.grad)
    assert_tight(out_proj.bias.grad, book.out_proj.bias.grad)


@pytest.mark.parametrize("cls", CPU_VARIANTS)
def test_variant_has_exactly_the_book_parameter_count(cls):
    for qkv_bias in (False, True):
        book = MultiHeadAttention(6, 6, 4, 0.0, num_heads=2, qkv_bias=qkv_bias)
        variant = cls.from_module(book)
        count = [sum(p.numel() for p in m.parameters()) for m in (variant, book)]
        assert count[0] == count[1], qkv_bias


#: Every variant class, FlexAttention included wherever it is listed.
ALL_VARIANTS = [*VARIANTS.values(), *([] if "FlexAttention" in VARIANTS else [FlexAttention])]


def parameter_shapes(module: torch.nn.Module) -> list[tuple[int, ...]]:
    return sorted(tuple(p.shape) for p in module.parameters())


@pytest.mark.parametrize("cls", ALL_VARIANTS)
def test_variant_built_with_the_books_arguments_has_the_books_default_qkv_bias(cls):
    """``cls(...)`` without ``qkv_bias`` has the parameters of the book's default module."""
    book = MultiHeadAttention(**VARIANT_ARGUMENTS)
    assert book.W_query.bias is None  # the book's default: no bias on queries, keys, values
    expected = parameter_shapes(cls.from_module(book))
    assert parameter_shapes(cls(**VARIANT_ARGUMENTS)) == expected
    assert parameter_shapes(cls(**VARIANT_ARGUMENTS, qkv_bias=False)) == expected
    with_bias = cls.from_module(MultiHeadAttention(**VARIANT_ARGUMENTS, qkv_bias=True))
    assert parameter_shapes(cls(**VARIANT_ARGUMENTS, qkv_bias=True)) == parameter_shapes(with_bias)
    assert len(parameter_shapes(with_bias)) > len(expected)


@pytest.mark.parametrize("cls", ALL_VARIANTS)
def test_runs_on_cpu_says_whether_forward_and_backward_run_on_a_cpu(cls):
    """The flag ``variants_of`` and these tests rely on is what the class does on a CPU."""
    book = MultiHeadAttention(**VARIANT_ARGUMENTS)
    variant = cls.from_module(book)
    x = torch.rand(2, 3, VARIANT_ARGUMENTS["d_in"], requires_grad=True)
    if cls.runs_on_cpu:
        variant(x).sum().backward()
        assert x.grad is not None and x.grad.isfinite().all()
    else:
        with pytest.raises(NotImplementedError, match="on a CPU"):
            variant(x).sum().backward()
    on_cpu = [name for name in variants_of(book) if name != "MultiHeadAttention"]
    assert (cls.__name__ in on_cpu) is cls.runs_on_cpu


# ---------------------------------------------------------------------------------------
# Dropout and training mode
# ---------------------------------------------------------------------------------------

DROPOUT_SHAPE = Shape(2, 6, 6, d_in=4, num_heads=2, head_dim=2, qkv_bias=True, seed=7)


@pytest.mark.parametrize("cls", CPU_VARIANTS)
def test_dropout_changes_train_outputs_between_calls_but_not_eval_outputs(cls):
    shape = fit(cls, DROPOUT_SHAPE)
    x = make_input(shape)
    without = cls.from_module(build(MultiHeadAttention, shape).eval())
    variant = cls.from_module(build(MultiHeadAttention, shape, dropout=0.5))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        first, second = variant(x), variant(x)
    assert not torch.allclose(first, second)
    assert not torch.allclose(first, without(x))
    assert_tight(variant.eval()(x), without(x))


@TRAIN_AND_EVAL
@pytest.mark.parametrize("cls", CPU_VARIANTS)
def test_from_module_copies_mode_dtype_and_leaves_the_global_generator_alone(cls, training):
    book = build(MultiHeadAttention, fit(cls, DROPOUT_SHAPE), dropout=0.25).train(training)
    before = torch.get_rng_state()
    variant = cls.from_module(book)
    assert torch.equal(torch.get_rng_state(), before)
    assert variant.training is training
    assert variant.dropout_p == 0.25
    assert {p.dtype for p in variant.parameters()} == {torch.float64}


@pytest.mark.parametrize("cls", CPU_VARIANTS)
def test_from_module_copies_the_weights_not_shares_them(cls):
    book = build(MultiHeadAttention, fit(cls, DROPOUT_SHAPE))
    variant = cls.from_module(book)
    x = make_input(fit(cls, DROPOUT_SHAPE))
    before = variant(x).detach()
    with torch.no_grad():
        book.out_proj.weight.add_(1.0)
    assert_tight(variant(x), before)


# ---------------------------------------------------------------------------------------
# The same ValueErrors as MultiHeadAttention
# ---------------------------------------------------------------------------------------


def error(call) -> tuple[type, str]:
    """The class and message of what ``call`` raises, a TypeError or a ValueError."""
    with pytest.raises((TypeError, ValueError)) as raised:
        call()
    return type(raised.value), str(raised.value)


def same_error(cls, call_variant, call_book) -> None:
    """Both calls raise the same error, with the same message up to the class name."""
    kind, book_message = error(call_book)
    expected = book_message.replace("MultiHeadAttention", cls.__name__)
    assert error(call_variant) == (kind, expected)


@pytest.mark.parametrize(
    "bad", list(BAD_VARIANT_ARGUMENTS.values()), ids=list(BAD_VARIANT_ARGUMENTS)
)
@pytest.mark.parametrize("cls", [*VARIANTS.values(), FlexAttention])
def test_bad_constructor_arguments_raise_the_books_error(cls, bad):
    kwargs = {**VARIANT_ARGUMENTS, **bad}
    same_error(cls, lambda: cls(**kwargs), lambda: MultiHeadAttention(**kwargs))


@pytest.mark.parametrize("x", list(BAD_VARIANT_INPUTS.values()), ids=list(BAD_VARIANT_INPUTS))
@pytest.mark.parametrize("cls", [*VARIANTS.values(), FlexAttention])
def test_bad_inputs_raise_the_books_error(cls, x):
    book = MultiHeadAttention(**VARIANT_ARGUMENTS)
    variant = cls.from_module(book)
    same_error(cls, lambda: variant(x), lambda: book(x))


@pytest.mark.parametrize(
    "make",
    [
        lambda: FastMultiHeadAttention(**VARIANT_ARGUMENTS),  # a variant is not the book's module
        lambda: TorchMHAAdapter(**VARIANT_ARGUMENTS).mha,
        lambda: MultiHeadAttentionWrapper(**VARIANT_ARGUMENTS),
        lambda: SDPAttention(**VARIANT_ARGUMENTS),  # a subclass, whose forward is not the book's
    ],
    ids=[
        "FastMultiHeadAttention",
        "MultiheadAttention",
        "MultiHeadAttentionWrapper",
        "SDPAttention",
    ],
)
def test_from_module_rejects_anything_but_multi_head_attention(make):
    module = make()
    with pytest.raises(
        TypeError,
        match=f"^SDPAttention.from_module: expected a MultiHeadAttention, got "
        f"{type(module).__name__}$",
    ):
        SDPAttention.from_module(module)


@pytest.mark.parametrize("cls", CPU_VARIANTS)
def test_from_module_refuses_a_book_module_without_out_bias(cls):
    """The variants' out_proj has the book's bias: a module without one cannot be copied."""
    book = MultiHeadAttention(**VARIANT_ARGUMENTS, out_bias=False)
    with pytest.raises(
        ValueError, match=f"^{cls.__name__}.from_module: .* built with out_bias=False$"
    ):
        cls.from_module(book)


def test_einsum_attention_without_out_bias_is_the_books_module_without_it():
    torch.manual_seed(5)
    book = MultiHeadAttention(**VARIANT_ARGUMENTS, out_bias=False)
    torch.manual_seed(5)
    einsum = EinsumAttention(**VARIANT_ARGUMENTS, out_bias=False)
    x = torch.randn(2, 4, 4)
    assert einsum.out_proj.bias is None
    torch.testing.assert_close(einsum(x), book(x), rtol=1e-6, atol=1e-6)


def test_torch_mha_adapter_rejects_d_in_other_than_d_out():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "TorchMHAAdapter: torch.nn.MultiheadAttention needs d_in == d_out (its query "
            "projection maps embed_dim features to embed_dim), got d_in=3 and d_out=4; use "
            "FastMultiHeadAttention for d_in != d_out"
        ),
    ):
        TorchMHAAdapter.from_module(MultiHeadAttention(3, 4, 4, 0.0, num_heads=2))


def test_torch_mha_adapter_without_qkv_bias_has_no_input_bias():
    adapter = TorchMHAAdapter(**VARIANT_ARGUMENTS, qkv_bias=False)
    assert adapter.mha.in_proj_bias is None
    assert adapter.mha.out_proj.bias is not None  # as the book's out_proj


# ---------------------------------------------------------------------------------------
# FlexAttention: CUDA only
# ---------------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="FlexAttention trains on CUDA only (on a CPU flex_attention has no backward)",
)


def test_flex_attention_refuses_a_cpu_input_that_needs_gradients():
    flex = FlexAttention(**VARIANT_ARGUMENTS)
    with pytest.raises(
        NotImplementedError, match=r"^FlexAttention: on a CPU, flex_attention has no backward"
    ):
        flex(torch.rand(1, 3, 4))


@TRAIN_AND_EVAL
@given(shape=shapes())
@with_edge_shapes()
def test_flex_attention_forward_equals_multi_head_attention_on_cpu(shape, training):
    # On a CPU flex_attention runs forward only, uncompiled: without gradients.
    book = build(MultiHeadAttention, shape).train(training)
    flex = FlexAttention.from_module(book)
    x = make_input(shape)
    with torch.no_grad():
        assert_tight(flex(x), book(x))


def test_flex_attention_refuses_to_train_with_dropout():
    flex = FlexAttention(**{**VARIANT_ARGUMENTS, "dropout": 0.1})
    with pytest.raises(ValueError, match=r"^FlexAttention: .* cannot train with dropout=0.1"):
        flex(torch.rand(1, 3, 4))


@needs_cuda
@pytest.mark.parametrize("num_tokens", [1, 100, 256])
@pytest.mark.parametrize("qkv_bias", [False, True])
def test_flex_attention_equals_multi_head_attention_on_cuda(num_tokens, qkv_bias):
    # float32 with head_dim 16: the sizes flex_attention's GPU kernels support.
    shape = Shape(2, num_tokens, 256, d_in=24, num_heads=2, head_dim=16, qkv_bias=qkv_bias, seed=3)
    book = build(MultiHeadAttention, shape, dtype=torch.float32).cuda()
    flex = FlexAttention.from_module(book)
    x = make_input(shape, dtype=torch.float32).cuda().requires_grad_()
    x_book = x.detach().clone().requires_grad_()
    torch.testing.assert_close(flex(x), book(x_book), atol=1e-4, rtol=1e-4)
    flex(x).sum().backward()
    book(x_book).sum().backward()
    torch.testing.assert_close(x.grad, x_book.grad, atol=1e-4, rtol=1e-4)
