"""The weightless attention of section 3.3: scores, softmax, context vectors.

The book's published numbers, the properties of softmax and of the scores (hypothesis),
gradients, and the ValueErrors that name the mistake and its numbers.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import assert_book, expect
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention import (
    INPUTS,
    SWITCH_INPUTS,
    SWITCH_TOKENS,
    attention_weights,
    context_vectors,
    scores_for_all,
    scores_for_query,
    simple_self_attention,
    softmax_naive,
    softmax_stable,
)

pytestmark = pytest.mark.usefixtures("single_thread")

# ---------------------------------------------------------------------------------------
# The book's numbers
# ---------------------------------------------------------------------------------------

JOURNEY_SCORES = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]
JOURNEY_SOFTMAX = [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]
BOOK_CONTEXT = [
    [0.4421, 0.5931, 0.5790],
    [0.4419, 0.6515, 0.5683],
    [0.4431, 0.6496, 0.5671],
    [0.4304, 0.6298, 0.5510],
    [0.4671, 0.5910, 0.5266],
    [0.4177, 0.6503, 0.5645],
]


def test_scores_of_journey_from_scores_for_query():
    assert_book(scores_for_query(INPUTS[1], INPUTS), JOURNEY_SCORES)


def test_scores_of_journey_are_row_1_of_scores_for_all():
    assert_book(scores_for_all(INPUTS)[1], JOURNEY_SCORES)


def test_full_score_matrix_row_0():
    assert_book(scores_for_all(INPUTS)[0], [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310])


def test_sum_normalised_weights_of_journey():
    scores = scores_for_query(INPUTS[1], INPUTS)
    assert_book(scores / scores.sum(), [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])


@pytest.mark.parametrize("softmax", [softmax_naive, softmax_stable, attention_weights])
def test_softmax_weights_of_journey(softmax):
    assert_book(softmax(scores_for_query(INPUTS[1], INPUTS)), JOURNEY_SOFTMAX)


def test_context_vector_of_journey():
    weights = attention_weights(scores_for_query(INPUTS[1], INPUTS))
    assert_book(context_vectors(weights, INPUTS), BOOK_CONTEXT[1])


def test_all_context_vectors_from_simple_self_attention():
    assert_book(simple_self_attention(INPUTS), BOOK_CONTEXT)


def test_all_context_vectors_step_by_step():
    weights = attention_weights(scores_for_all(INPUTS))
    assert_book(context_vectors(weights, INPUTS), BOOK_CONTEXT)


def test_scores_of_light_in_the_switch_sentence():
    light = SWITCH_TOKENS.index("light")
    expected = [0.9046, 0.5701, 0.6006, 0.7121, 0.7818, 0.5065]
    assert_book(scores_for_query(SWITCH_INPUTS[light], SWITCH_INPUTS), expected)
    assert_book(scores_for_all(SWITCH_INPUTS)[light], expected)


def test_context_vector_of_light_in_the_switch_sentence():
    light = SWITCH_TOKENS.index("light")
    assert_book(simple_self_attention(SWITCH_INPUTS)[light], [0.3039, 0.5600, 0.5155])


# ---------------------------------------------------------------------------------------
# Properties of softmax and of the scores
# ---------------------------------------------------------------------------------------


def matrices(elements: st.SearchStrategy[float]) -> st.SearchStrategy:
    """float64 arrays of 1 to 6 rows and 1 to 4 columns."""
    return arrays("float64", st.tuples(st.integers(1, 6), st.integers(1, 4)), elements=elements)


@given(
    scores=matrices(st.floats(allow_nan=False, allow_infinity=False)),
    dim=st.sampled_from([0, 1, -1]),
)
def test_softmax_stable_matches_torch_softmax_for_any_finite_scores(scores, dim):
    scores = torch.from_numpy(scores)
    torch.testing.assert_close(softmax_stable(scores, dim=dim), torch.softmax(scores, dim=dim))


@given(
    scores=arrays("float64", st.integers(1, 6), elements=st.floats(-5, 5)),
    shift=st.floats(1e3, 1e6),
)
def test_softmax_naive_overflows_to_nan_where_softmax_stable_does_not(scores, shift):
    scores = torch.from_numpy(scores)
    assert torch.isnan(softmax_naive(scores + shift)).any()
    torch.testing.assert_close(softmax_stable(scores + shift), softmax_naive(scores))


@given(inputs=matrices(st.floats(-10, 10)))
def test_scores_for_all_is_symmetric_and_row_i_is_scores_for_query_i(inputs):
    inputs = torch.from_numpy(inputs)
    scores = scores_for_all(inputs)
    torch.testing.assert_close(scores, scores.T)
    for i in range(inputs.shape[0]):
        torch.testing.assert_close(scores_for_query(inputs[i], inputs), scores[i])


@given(inputs=matrices(st.floats(-10, 10)))
def test_simple_self_attention_context_vectors_lie_within_the_inputs_range(inputs):
    inputs = torch.from_numpy(inputs)
    context = simple_self_attention(inputs)
    low, high = inputs.min(dim=0).values, inputs.max(dim=0).values
    assert torch.all(context >= low - 1e-9) and torch.all(context <= high + 1e-9)


@pytest.mark.parametrize("function", [softmax_stable, simple_self_attention])
def test_gradcheck_passes_for_the_weightless_functions(function):
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    assert torch.autograd.gradcheck(function, (x.requires_grad_(),))


# ---------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("query_shape", [(2,), (4,), (1, 3)], ids=str)
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
            f"inputs must have shape (num_tokens, d), got a {len(shape)}-D tensor of shape {shape}"
        ),
    ):
        function(torch.rand(shape))


@pytest.mark.parametrize("weights_shape", [(5,), (7,), (2, 5), (1, 6, 6)], ids=str)
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
