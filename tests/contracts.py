"""The tests every module of Part I must pass, run from each subject's test file.

A subject's file subclasses a contract and names its classes, as ``test_causal.py``
does::

    class TestCausalAttentionAndHead(CausalContract):
        classes = (CausalAttention, Head)

and pytest runs every test below once per class (``pytest_generate_tests``), beside
the tests the subclass adds for those classes alone. The error tests' ``match=``
patterns check the module's name, what it expected and what it got, so a message
that loses one of them fails.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import (
    MASK_BUFFER,
    Shape,
    build,
    expect,
    ids,
    make,
    make_input,
    shapes,
    size_arguments,
    size_names,
    with_edge_shapes,
)
from hypothesis import given
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

#: Both ways into a module, which must check their input alike.
ENTRY_POINTS = pytest.mark.parametrize("entry", ["forward", "attention_weights"])


def entry_point(module: nn.Module, entry: str):
    """``module`` itself (its forward pass) or its ``attention_weights``."""
    return module if entry == "forward" else getattr(module, entry)


# ---------------------------------------------------------------------------------------
# The random-generator contract: each module draws exactly what the book's code draws
# ---------------------------------------------------------------------------------------


def _linears(*sizes: tuple[int, int, bool]) -> list[nn.Linear]:
    return [nn.Linear(d_in, d_out, bias=bias) for d_in, d_out, bias in sizes]


def _params(*linears: nn.Linear) -> list[torch.Tensor]:
    return [p for linear in linears for p in linear.parameters()]


def books_draws(cls: type, d_in: int, d_out: int, bias: bool) -> list[torch.Tensor]:
    """The parameters the book's code (or Karpathy's) creates for ``cls``, in its order."""
    if cls is SelfAttentionV1:
        return [torch.rand(d_in, d_out) for _ in ("W_query", "W_key", "W_value")]
    qkv = [(d_in, d_out, bias)] * 3
    layers = {
        SelfAttentionV2: qkv,
        # nn.Dropout and the mask draw nothing
        CausalAttention: qkv,
        # two CausalAttention heads, each with its own W_query, W_key, W_value
        MultiHeadAttentionWrapper: qkv * 2,
        # W_query, W_key, W_value, then out_proj, which always has a bias
        MultiHeadAttention: [*qkv, (d_out, d_out, True)],
        # Karpathy's order: key, query, value, none with a bias
        Head: [(d_in, d_out, False)] * 3,
    }[cls]
    return _params(*_linears(*layers))


#: How the random-generator contract builds each module: context 5, dropout 0.1, 2 heads.
CONSTRUCTIONS = {
    SelfAttentionV1: lambda d_in, d_out, bias: SelfAttentionV1(d_in, d_out),
    SelfAttentionV2: lambda d_in, d_out, bias: SelfAttentionV2(d_in, d_out, qkv_bias=bias),
    CausalAttention: lambda d_in, d_out, bias: CausalAttention(d_in, d_out, 5, 0.1, qkv_bias=bias),
    MultiHeadAttentionWrapper: lambda d_in, d_out, bias: MultiHeadAttentionWrapper(
        d_in, d_out, 5, 0.1, 2, bias
    ),
    MultiHeadAttention: lambda d_in, d_out, bias: MultiHeadAttention(
        d_in, d_out, 5, 0.1, 2, qkv_bias=bias
    ),
    Head: lambda d_in, d_out, bias: Head(d_in, d_out, 5, 0.1),
}

#: A shape for the tests that convert a module's dtype or move it.
DTYPE_SHAPE = Shape(2, 5, 6, d_in=4, num_heads=2, head_dim=3, qkv_bias=True, seed=11)


class ModuleContract:
    """What every module of Part I does: weights, gradients, dtypes, seeds and errors."""

    #: The classes under test, named by each subject's subclass.
    classes: tuple[type, ...] = ()

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run each test once per class: per size argument or bad input where it takes one."""
        if "argument" in metafunc.fixturenames:
            cases = [(cls, name) for cls in self.classes for name in size_arguments(cls)]
            metafunc.parametrize(("cls", "argument"), cases)
        elif "bad_input" in metafunc.fixturenames:
            cases = [
                pytest.param(cls, x, message, id=f"{cls.__name__}-{what}")
                for cls in self.classes
                for what, (x, message) in self.bad_inputs(cls).items()
            ]
            metafunc.parametrize(("cls", "bad_input", "message"), cases)
        elif "cls" in metafunc.fixturenames:
            metafunc.parametrize("cls", self.classes)

    # --- attention weights, gradients and dtypes ----------------------------------------

    @given(shape=shapes())
    def test_attention_weight_rows_are_non_negative_and_sum_to_one_without_dropout(
        self, cls, shape
    ):
        weights = build(cls, shape).attention_weights(make_input(shape))
        assert torch.all(weights >= 0)
        torch.testing.assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]).double())

    def test_gradcheck_passes_for_the_forward_pass(self, cls):
        shape = Shape(2, 3, 4, d_in=3, num_heads=2, head_dim=2, qkv_bias=True, seed=7)
        module = build(cls, shape)
        x = make_input(shape).requires_grad_()
        assert torch.autograd.gradcheck(module, (x,))

    @pytest.mark.parametrize(
        ("dtype", "tolerance"),
        [(torch.float64, 1e-5), (torch.bfloat16, 5e-2)],
        ids=["float64", "bfloat16"],
    )
    def test_module_converted_to_another_dtype_runs_and_agrees_with_float32(
        self, cls, dtype, tolerance
    ):
        module = build(cls, DTYPE_SHAPE, dtype=torch.float32)
        x = make_input(DTYPE_SHAPE, dtype=torch.float32) * 0.5
        expected = module(x)
        out = module.to(dtype)(x.to(dtype))
        assert out.dtype == dtype
        torch.testing.assert_close(out.float(), expected, atol=tolerance, rtol=tolerance)

    @pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "qkv_bias"])
    def test_construction_draws_the_same_random_numbers_as_the_books_code(self, seeded, cls, bias):
        d_in, d_out = 3, 4
        seeded(2024)
        expected = books_draws(cls, d_in, d_out, bias)
        state_after_reference = torch.get_rng_state()
        seeded(2024)
        module = CONSTRUCTIONS[cls](d_in, d_out, bias)
        parameters = list(module.parameters())
        assert len(parameters) == len(expected)
        for actual, wanted in zip(parameters, expected, strict=True):
            assert torch.equal(actual, wanted)
        assert torch.equal(torch.get_rng_state(), state_after_reference)

    # --- bad constructor arguments -------------------------------------------------------

    @pytest.mark.parametrize("value", [0, -1])
    def test_size_below_one_is_rejected(self, cls, argument, value):
        with expect(f"{cls.__name__}: {argument} must be at least 1, got {value}"):
            make(cls, **{argument: value})

    @pytest.mark.parametrize(
        ("value", "shown"),
        [(2.5, "2.5 of type float"), ("3", "'3' of type str"), (None, "None of type NoneType")],
        ids=["float", "str", "None"],
    )
    def test_non_integer_size_is_rejected(self, cls, argument, value, shown):
        message = f"{cls.__name__}: {argument} must be a positive integer, got {shown}"
        with expect(message, TypeError):
            make(cls, **{argument: value})

    def test_boolean_size_is_rejected(self, cls, argument):
        message = f"{cls.__name__}: {argument} must be a positive integer, got the boolean True"
        with expect(message, TypeError):
            make(cls, **{argument: True})

    # --- bad inputs ------------------------------------------------------------------------

    def bad_inputs(self, cls: type) -> dict[str, tuple[object, str]]:
        """Inputs ``make(cls)`` must reject, by what is wrong: the input, the message's start."""
        name, (d_in, _) = cls.__name__, size_names(cls)
        cases = {
            "last_dimension_other_than_d_in": (
                torch.rand(2, 4, 5),
                f"{name}: expected the last dimension of the input to be {d_in}=3, "
                f"got 5 (input shape (2, 4, 5))",
            ),
            "not_a_tensor": (
                [[0.1, 0.2, 0.3]],
                f"{name}: the input must be a torch.Tensor, got list",
            ),
        }
        for dtype in (torch.int64, torch.int32, torch.bool):
            cases[f"{ids(dtype)}_input"] = (
                torch.ones(2, 4, 3, dtype=dtype),
                f"{name}: the input must be a floating-point tensor (embeddings are real "
                f"numbers), got dtype {dtype}; convert it with .float()",
            )
        return cases

    @ENTRY_POINTS
    def test_bad_input_is_rejected(self, cls, bad_input, message, entry):
        # Something other than a tensor is the wrong type; a tensor, the wrong value.
        error = ValueError if isinstance(bad_input, torch.Tensor) else TypeError
        with expect(message, error):
            entry_point(make(cls), entry)(bad_input)

    @ENTRY_POINTS
    @pytest.mark.parametrize(
        ("module_dtype", "input_dtype"),
        [(torch.float32, torch.float64), (torch.bfloat16, torch.float32)],
        ids=["float64_into_float32", "float32_into_bfloat16"],
    )
    def test_input_of_another_dtype_than_the_weights_is_rejected(
        self, cls, module_dtype, input_dtype, entry
    ):
        module = make(cls).to(module_dtype)
        x = torch.rand(2, 4, 3, dtype=input_dtype)
        with expect(
            f"{cls.__name__}: the module's weights are {module_dtype} but the input is "
            f"{input_dtype}; convert one to match, e.g. module.to({input_dtype}) "
            f"or x.to({module_dtype})"
        ):
            entry_point(module, entry)(x)


class CausalContract(ModuleContract):
    """What every causal module does besides: the mask, dropout, and batched input only."""

    # --- causality ---------------------------------------------------------------------------

    @given(shape=shapes())
    def test_causal_attention_weights_on_future_tokens_are_exactly_zero(self, cls, shape):
        weights = build(cls, shape).attention_weights(make_input(shape))
        assert torch.all(weights.triu(diagonal=1) == 0)

    @given(shape=shapes())
    def test_causal_output_at_t_does_not_change_when_later_tokens_change(self, cls, shape):
        module = build(cls, shape)
        x = make_input(shape)
        out = module(x)
        noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(shape.seed + 2))
        for t in range(shape.num_tokens):
            changed = x.clone()
            changed[:, t + 1 :] = noise[:, t + 1 :].double() * 10
            torch.testing.assert_close(module(changed)[:, : t + 1], out[:, : t + 1])

    @given(shape=shapes())
    def test_causal_output_on_a_prefix_is_the_prefix_of_the_output(self, cls, shape):
        module = build(cls, shape)
        x = make_input(shape)
        out = module(x)
        for t in range(1, shape.num_tokens + 1):
            torch.testing.assert_close(module(x[:, :t]), out[:, :t])

    @pytest.mark.parametrize("target", [torch.float64, torch.bfloat16, "meta"], ids=ids)
    def test_mask_buffer_stays_a_bool_buffer_and_moves_with_the_module(self, cls, target):
        module = build(cls, DTYPE_SHAPE, dtype=torch.float32)
        buffer = MASK_BUFFER[cls]
        expected = dict(module.named_buffers())[buffer].clone()
        module.to(target)
        mask = dict(module.named_buffers())[buffer]
        assert mask.dtype == torch.bool
        assert buffer in module.state_dict()
        assert buffer not in dict(module.named_parameters())
        if target == "meta":
            assert mask.device.type == "meta"
            assert all(p.device.type == "meta" for p in module.parameters())
        else:
            assert torch.equal(mask, expected)

    # --- dropout -------------------------------------------------------------------------------

    @given(shape=shapes(), p=st.floats(0.05, 0.95))
    @with_edge_shapes(p=0.5)
    def test_eval_mode_with_dropout_equals_the_same_module_without_dropout(self, cls, shape, p):
        module = build(cls, shape, dropout=p).eval()
        without = build(cls, shape, dropout=0.0)
        x = make_input(shape)
        first = module.attention_weights(x)
        assert torch.equal(module.attention_weights(x), first)  # the same at every call
        assert torch.equal(first, without.attention_weights(x))
        assert torch.equal(module(x), without(x))

    @given(shape=shapes(), p=st.floats(0.05, 0.95))
    def test_training_dropout_keeps_weights_scaled_by_one_over_one_minus_p(self, cls, shape, p):
        module = build(cls, shape, dropout=p)
        x = make_input(shape)
        clean = module.eval().attention_weights(x)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(shape.seed)
            dropped = module.train().attention_weights(x)
        kept = dropped != 0
        torch.testing.assert_close(dropped[kept], clean[kept] / (1 - p), atol=0, rtol=1e-12)

    def test_training_dropout_zeroes_about_a_fraction_p_of_the_weights(self, cls):
        p = 0.5
        shape = Shape(4, 16, 16, d_in=4, num_heads=2, head_dim=2, qkv_bias=False, seed=0)
        module = build(cls, shape, dropout=p)
        x = make_input(shape)
        clean = module.eval().attention_weights(x)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            dropped = module.train().attention_weights(x)
        visible = clean > 0  # the weights dropout can act on
        fraction = (dropped[visible] == 0).double().mean().item()
        assert 0.4 < fraction < 0.6  # ~ 500 to 1000 weights, so far inside these bounds

    @pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, float("nan")])
    def test_dropout_outside_zero_to_one_is_rejected(self, cls, value):
        message = (
            f"{cls.__name__}: dropout must be in [0, 1) (the probability of dropping a "
            f"weight), got {value}"
        )
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            make(cls, dropout=value)

    @pytest.mark.parametrize(
        ("value", "shown"),
        [
            ("0.1", "'0.1' of type str"),
            (True, "True of type bool"),
            (None, "None of type NoneType"),
        ],
        ids=["str", "bool", "None"],
    )
    def test_dropout_that_is_not_a_number_is_rejected(self, cls, value, shown):
        with expect(f"{cls.__name__}: dropout must be a number in [0, 1), got {shown}", TypeError):
            make(cls, dropout=value)

    # --- inputs: batched, and no longer than the mask ------------------------------------

    def bad_inputs(self, cls: type) -> dict[str, tuple[object, str]]:
        """Besides, more tokens than the mask covers, and an input without a batch."""
        name, (d_in, length) = cls.__name__, size_names(cls)
        return {
            **super().bad_inputs(cls),
            "more_tokens_than_context_length": (
                torch.rand(2, 5, 3),
                f"{name}: got 5 tokens but the module was built with {length}=4, "
                f"so its causal mask covers at most 4 tokens (input shape (2, 5, 3))",
            ),
            "unbatched_with_a_hint": (
                torch.rand(4, 3),
                f"{name}: expected a 3-D (batch, num_tokens, {d_in}) input with {d_in}=3, "
                f"got a 2-D tensor of shape (4, 3). Add a batch dimension with x.unsqueeze(0).",
            ),
        }

    def test_exactly_context_length_tokens_is_accepted(self, cls):
        module = make(cls)
        assert module(torch.rand(2, 4, 3)).shape[:2] == (2, 4)

    def test_4d_input_to_a_batched_module_is_rejected_without_the_unsqueeze_hint(self, cls):
        with pytest.raises(ValueError, match=r"got a 4-D tensor of shape \(1, 2, 4, 3\)\.$"):
            make(cls)(torch.rand(1, 2, 4, 3))
