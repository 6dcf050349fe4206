"""Bad arguments and bad inputs raise a ValueError that names the mistake and its numbers.

Each ``match=`` pattern checks the module's name, what it expected and what it got,
so a message that loses one of them fails here.
"""

from __future__ import annotations

import re

import pytest
import torch

from attention import (
    CausalAttention,
    Head,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV1,
    SelfAttentionV2,
    attention_weights,
    context_vectors,
    scaled_dot_product_weights,
    scores_for_all,
    scores_for_query,
    simple_self_attention,
    softmax_naive,
    softmax_stable,
)

pytestmark = pytest.mark.usefixtures("single_thread")

#: Each module with valid arguments: 3 input features, at most 4 tokens.
VALID = {
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
}
MODULES = list(VALID)
CAUSAL = [CausalAttention, Head, MultiHeadAttentionWrapper, MultiHeadAttention]
BATCHED_ONLY = CAUSAL  # these take (batch, num_tokens, d_in) only
UNBATCHED_OK = [SelfAttentionV1, SelfAttentionV2]  # these also take (num_tokens, d_in)
SIZE_ARGUMENTS = [
    (cls, name) for cls, kwargs in VALID.items() for name in kwargs if name != "dropout"
]


def ids(value):
    """Test ids that show class names instead of ``cls0``, ``cls1``..."""
    return value.__name__ if isinstance(value, type) else None


def make(cls, **overrides):
    return cls(**{**VALID[cls], **overrides})


def forward_and_weights(module):
    """Both entry points of a module, which must check their input alike."""
    return [module, module.attention_weights]


def expect(message: str):
    """``pytest.raises`` for a ValueError whose message starts with ``message``."""
    return pytest.raises(ValueError, match="^" + re.escape(message))


# ---------------------------------------------------------------------------------------
# Constructor arguments
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1])
@pytest.mark.parametrize(("cls", "argument"), SIZE_ARGUMENTS, ids=ids)
def test_size_below_one_is_rejected(cls, argument, value):
    with expect(f"{cls.__name__}: {argument} must be at least 1, got {value}"):
        make(cls, **{argument: value})


@pytest.mark.parametrize(
    ("value", "shown"),
    [(2.5, "2.5 of type float"), ("3", "'3' of type str"), (None, "None of type NoneType")],
    ids=["float", "str", "None"],
)
@pytest.mark.parametrize(("cls", "argument"), SIZE_ARGUMENTS, ids=ids)
def test_non_integer_size_is_rejected(cls, argument, value, shown):
    with expect(f"{cls.__name__}: {argument} must be a positive integer, got {shown}"):
        make(cls, **{argument: value})


@pytest.mark.parametrize(("cls", "argument"), SIZE_ARGUMENTS, ids=ids)
def test_boolean_size_is_rejected(cls, argument):
    with expect(f"{cls.__name__}: {argument} must be a positive integer, got the boolean True"):
        make(cls, **{argument: True})


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, float("nan")])
@pytest.mark.parametrize("cls", CAUSAL, ids=ids)
def test_dropout_outside_zero_to_one_is_rejected(cls, value):
    message = (
        f"{cls.__name__}: dropout must be in [0, 1) (the probability of dropping a weight), "
        f"got {value}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        make(cls, dropout=value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [("0.1", "'0.1' of type str"), (True, "True of type bool"), (None, "None of type NoneType")],
    ids=["str", "bool", "None"],
)
@pytest.mark.parametrize("cls", CAUSAL, ids=ids)
def test_dropout_that_is_not_a_number_is_rejected(cls, value, shown):
    with expect(f"{cls.__name__}: dropout must be a number in [0, 1), got {shown}"):
        make(cls, dropout=value)


@pytest.mark.parametrize(
    ("d_out", "num_heads", "division"), [(5, 2, "5 / 2 = 2.5"), (2, 4, "2 / 4 = 0.5")]
)
def test_d_out_not_divisible_by_num_heads_is_rejected(d_out, num_heads, division):
    message = (
        f"MultiHeadAttention: d_out must be divisible by num_heads so each head gets "
        f"d_out // num_heads dimensions, got d_out={d_out} and num_heads={num_heads} "
        f"({division})"
    )
    with expect(message):
        make(MultiHeadAttention, d_out=d_out, num_heads=num_heads)


def test_wrapper_accepts_any_d_out_because_it_is_per_head():
    wrapper = make(MultiHeadAttentionWrapper, d_out=5, num_heads=2)
    assert wrapper(torch.rand(1, 4, 3)).shape == (1, 4, 10)


# ---------------------------------------------------------------------------------------
# Forward inputs
# ---------------------------------------------------------------------------------------


def size_names(cls) -> tuple[str, str]:
    """What a module calls d_in and context_length: Karpathy's Head has its own names."""
    return ("n_embd", "block_size") if cls is Head else ("d_in", "context_length")


@pytest.mark.parametrize("cls", CAUSAL, ids=ids)
def test_more_tokens_than_context_length_is_rejected(cls):
    x = torch.rand(2, 5, 3)
    _, length = size_names(cls)
    for call in forward_and_weights(make(cls)):
        with expect(
            f"{cls.__name__}: got 5 tokens but the module was built with {length}=4, "
            f"so its causal mask covers at most 4 tokens (input shape (2, 5, 3))"
        ):
            call(x)


@pytest.mark.parametrize("cls", CAUSAL, ids=ids)
def test_exactly_context_length_tokens_is_accepted(cls):
    module = make(cls)
    assert module(torch.rand(2, 4, 3)).shape[:2] == (2, 4)


@pytest.mark.parametrize("cls", MODULES, ids=ids)
def test_last_dimension_other_than_d_in_is_rejected(cls):
    x = torch.rand(2, 4, 5)
    d_in, _ = size_names(cls)
    for call in forward_and_weights(make(cls)):
        with expect(
            f"{cls.__name__}: expected the last dimension of the input to be {d_in}=3, "
            f"got 5 (input shape (2, 4, 5))"
        ):
            call(x)


@pytest.mark.parametrize("cls", BATCHED_ONLY, ids=ids)
def test_unbatched_input_to_a_batched_only_module_is_rejected_with_a_hint(cls):
    x = torch.rand(4, 3)
    d_in, _ = size_names(cls)
    for call in forward_and_weights(make(cls)):
        with expect(
            f"{cls.__name__}: expected a 3-D (batch, num_tokens, {d_in}) input with {d_in}=3, "
            f"got a 2-D tensor of shape (4, 3). Add a batch dimension with x.unsqueeze(0)."
        ):
            call(x)


@pytest.mark.parametrize("shape", [(1, 2, 4, 3), (3,)], ids=["4d", "1d"])
@pytest.mark.parametrize("cls", UNBATCHED_OK, ids=ids)
def test_input_neither_2d_nor_3d_to_self_attention_is_rejected(cls, shape):
    x = torch.rand(shape)
    for call in forward_and_weights(make(cls)):
        with expect(
            f"{cls.__name__}: expected a 2-D (num_tokens, d_in) or 3-D "
            f"(batch, num_tokens, d_in) input with d_in=3, "
            f"got a {len(shape)}-D tensor of shape {shape}."
        ):
            call(x)


@pytest.mark.parametrize("cls", BATCHED_ONLY, ids=ids)
def test_4d_input_to_a_batched_module_is_rejected_without_the_unsqueeze_hint(cls):
    with pytest.raises(ValueError, match=r"got a 4-D tensor of shape \(1, 2, 4, 3\)\.$"):
        make(cls)(torch.rand(1, 2, 4, 3))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("cls", MODULES, ids=ids)
def test_integer_or_boolean_input_is_rejected(cls, dtype):
    x = torch.ones(2, 4, 3, dtype=dtype)
    for call in forward_and_weights(make(cls)):
        with expect(
            f"{cls.__name__}: the input must be a floating-point tensor (embeddings are real "
            f"numbers), got dtype {dtype}; convert it with .float()"
        ):
            call(x)


@pytest.mark.parametrize("cls", MODULES, ids=ids)
def test_input_that_is_not_a_tensor_is_rejected(cls):
    for call in forward_and_weights(make(cls)):
        with expect(f"{cls.__name__}: the input must be a torch.Tensor, got list"):
            call([[0.1, 0.2, 0.3]])


@pytest.mark.parametrize(
    ("module_dtype", "input_dtype"),
    [(torch.float32, torch.float64), (torch.bfloat16, torch.float32)],
    ids=["float64_into_float32", "float32_into_bfloat16"],
)
@pytest.mark.parametrize("cls", MODULES, ids=ids)
def test_input_of_another_dtype_than_the_weights_is_rejected(cls, module_dtype, input_dtype):
    module = make(cls).to(module_dtype)
    x = torch.rand(2, 4, 3, dtype=input_dtype)
    for call in forward_and_weights(module):
        with expect(
            f"{cls.__name__}: the module's weights are {module_dtype} but the input is "
            f"{input_dtype}; convert one to match, e.g. module.to({input_dtype}) "
            f"or x.to({module_dtype})"
        ):
            call(x)


# ---------------------------------------------------------------------------------------
# The weightless functions of section 3.3
# ---------------------------------------------------------------------------------------

INPUTS = torch.rand(6, 3)


@pytest.mark.parametrize("query_shape", [(2,), (4,), (1, 3)])
def test_scores_for_query_with_a_query_of_the_wrong_shape_is_rejected(query_shape):
    with expect(
        f"scores_for_query: expected a query of shape (3,) to match inputs of shape (6, 3), "
        f"got shape {query_shape}; pass one row of the inputs"
    ):
        scores_for_query(torch.rand(query_shape), INPUTS)


@pytest.mark.parametrize(
    "function",
    [scores_for_all, simple_self_attention, lambda x: scores_for_query(x[0], x)],
    ids=["scores_for_all", "simple_self_attention", "scores_for_query"],
)
@pytest.mark.parametrize("shape", [(3,), (2, 6, 3)], ids=["1d", "3d"])
def test_inputs_that_are_not_a_matrix_are_rejected(function, shape):
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"expected inputs of shape (num_tokens, d), got a {len(shape)}-D tensor "
            f"of shape {shape}"
        ),
    ):
        function(torch.rand(shape))


@pytest.mark.parametrize("weights_shape", [(5,), (7,), (2, 5), (1, 6, 6)])
def test_context_vectors_with_weights_not_matching_the_tokens_are_rejected(weights_shape):
    with expect(
        f"context_vectors: expected weights of shape (6,) or (num_queries, 6), one weight "
        f"per input token, got shape {weights_shape}"
    ):
        context_vectors(torch.rand(weights_shape), INPUTS)


@pytest.mark.parametrize(
    ("function", "owner"),
    [
        (softmax_naive, "softmax_naive"),
        (softmax_stable, "softmax_stable"),
        (attention_weights, "attention_weights"),
    ],
    ids=["softmax_naive", "softmax_stable", "attention_weights"],
)
def test_softmax_of_integer_scores_is_rejected(function, owner):
    with expect(f"{owner}: scores must be a floating-point tensor"):
        function(torch.tensor([1, 2, 3]))


def test_scaled_dot_product_weights_with_different_d_k_is_rejected():
    with expect(
        "scaled_dot_product_weights: queries and keys must have the same last dimension d_k, "
        "got queries of shape (4, 2) and keys of shape (4, 3)"
    ):
        scaled_dot_product_weights(torch.rand(4, 2), torch.rand(4, 3))


# ---------------------------------------------------------------------------------------
# Conversions between modules
# ---------------------------------------------------------------------------------------


def test_from_v2_with_qkv_bias_is_rejected():
    with expect(
        "SelfAttentionV1.from_v2: SelfAttentionV1 has no bias terms, so it can only copy a "
        "SelfAttentionV2 built with qkv_bias=False; this one has qkv_bias=True"
    ):
        SelfAttentionV1.from_v2(SelfAttentionV2(3, 2, qkv_bias=True))


@pytest.mark.parametrize("cls", [SelfAttentionV1, CausalAttention], ids=ids)
def test_from_v2_with_another_module_is_rejected(cls):
    with expect(f"SelfAttentionV1.from_v2: expected a SelfAttentionV2, got {cls.__name__}"):
        SelfAttentionV1.from_v2(make(cls))


@pytest.mark.parametrize("cls", [MultiHeadAttention, CausalAttention], ids=ids)
def test_from_wrapper_with_another_module_is_rejected(cls):
    with expect(
        f"MultiHeadAttention.from_wrapper: expected a MultiHeadAttentionWrapper, got {cls.__name__}"
    ):
        MultiHeadAttention.from_wrapper(make(cls))
