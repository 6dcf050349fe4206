"""The number-aware comparison of printed output (docs/_ext/printed_values.py).

The pairs are real torch output: the same tensors printed as two CPUs may print
them, and tensors that really differ.
"""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from printed_values import (
    explain,
    last_digit,
    matches,
    numbers,
    printed_text,
    tolerance,
    unprinted,
)

from attention import INPUTS, SelfAttentionV2


def printed(values, sci_mode: bool | None = False, **kwargs) -> str:
    """``repr`` of a float tensor as the pages print it: 4 decimals."""
    with torch._tensor_str.printoptions(precision=4, sci_mode=sci_mode):
        return repr(torch.tensor(values, **kwargs))


ONE_ULP_UP = 1.0000001  # the nearest float32 above 1: a row sum on another CPU


def weights(scale: bool) -> str:
    torch.manual_seed(789)
    sa_v2 = SelfAttentionV2(d_in=3, d_out=2)
    with torch.no_grad():
        queries, keys = sa_v2.W_query(INPUTS), sa_v2.W_key(INPUTS)
    scores = queries @ keys.T
    return printed(torch.softmax(scores / (2**0.5 if scale else 1), dim=-1).tolist())


PASS = {
    "whole numbers printed as 1. or 1.0000": (
        printed([1.0] * 6),
        printed([1.0] * 5 + [ONE_ULP_UP]),
    ),
    "a scalar 1. and 1.0000": (printed(1.0), printed(ONE_ULP_UP)),
    "a 0/1 mask, columns realigned": (
        printed([[0.0, 1.0], [1.0, 0.0]]),
        printed([[0.0, 1.0], [ONE_ULP_UP, 0.0]]),
    ),
    "0. and -0.0000": (printed([0.0, 2.0]), printed([-1e-9, 2.0])),
    "a last-digit flip": (printed([0.485751]), printed([0.485749])),
    "fixed and scientific notation of the same values": (
        printed([0.5, 1e-9], sci_mode=False),
        printed([0.5, 1e-9], sci_mode=True),
    ),
    "0.0000 and a tiny value in scientific notation": (
        printed([0.0, 1.0]),
        printed([1e-8, 1.0], sci_mode=None),
    ),
    "1.8424 and 1.8423": (printed([[2.2150, 1.842351]]), printed([[2.2150, 1.842349]])),
    "the same grad_fn": (
        repr(torch.tensor([0.3190, 0.485751], requires_grad=True) * 1),
        repr(torch.tensor([0.3190, 0.485749], requires_grad=True) * 1),
    ),
    "a sentence ending in a number": ("the top weight is 0.2379.", "the top weight is 0.2380."),
}

FAIL = {
    "a number off by 20 units in the last digit": (printed([1.4950]), printed([1.4970])),
    "a missing sqrt(d_k) scaling": (weights(scale=True), weights(scale=False)),
    "a changed integer": (repr(torch.zeros(6, 3).shape), repr(torch.zeros(6, 2).shape)),
    "1. and 2.": (printed([1.0, 1.0]), printed([1.0, 2.0])),
    "1. and 1.4": ("tensor(1.)", "tensor(1.4)"),
    "a changed word": ("row sums of one draw: tensor(1.)", "row sums of one drew: tensor(1.)"),
    "an extra value": (printed([0.1, 0.2]), printed([0.1, 0.2, 0.3])),
    "a missing row": (printed([[0.1, 0.2], [0.3, 0.4]]), printed([[0.1, 0.2]])),
    "another grad_fn": (
        repr(torch.tensor([0.5], requires_grad=True) * 1),
        repr(torch.tensor([0.5], requires_grad=True) + 0),
    ),
    "another dtype": (
        printed([0.5], dtype=torch.float64),
        printed([0.5], dtype=torch.float16),
    ),
    "a version number": ("torch 2.13.0", "torch 2.14.0"),
}


@pytest.mark.parametrize(("expected", "printed_text"), PASS.values(), ids=PASS.keys())
def test_outputs_that_differ_only_as_cpus_differ_match(expected, printed_text):
    assert expected != printed_text  # the test would be empty otherwise
    assert matches(expected, printed_text), explain(expected, printed_text)
    assert explain(expected, printed_text) is None


@pytest.mark.parametrize(("expected", "printed_text"), FAIL.values(), ids=FAIL.keys())
def test_outputs_that_really_differ_do_not_match(expected, printed_text):
    assert not matches(expected, printed_text)
    assert explain(expected, printed_text)


def test_a_mismatch_names_the_line_the_number_and_how_far_off_it_is():
    expected = "scores:\ntensor([0.9544, 1.4950, 1.4754])"
    message = explain(expected, expected.replace("1.4950", "1.4970"))
    assert "line 2: expected 1.4950, printed 1.4970 (off by 0.002; tolerance 0.00015)" in message
    assert "-tensor([0.9544, 1.4950, 1.4754])" in message  # and a diff
    assert "+tensor([0.9544, 1.4970, 1.4754])" in message


def test_a_mismatch_in_the_text_says_so_with_a_diff():
    message = explain("head 1: tensor(0.5000)", "head 2: tensor(0.5000)")
    assert message.startswith("the text around the numbers differs")
    assert "-head 1: tensor(0.5000)" in message


@pytest.mark.parametrize(
    ("number", "unit"),
    [("0.4858", 1e-4), ("1.0000", 1e-4), ("12.5", 0.1), ("1.2345e-07", 1e-11), ("5e-05", 1e-5)],
)
def test_the_unit_is_the_last_printed_digit(number, unit):
    assert last_digit(number) == pytest.approx(unit)


def test_a_whole_number_printed_without_decimals_counts_as_four_decimals():
    assert last_digit("1.") == last_digit("-0.") == pytest.approx(1e-4)
    assert tolerance("1.", "1.0000") == tolerance("1.", "2.") == pytest.approx(1.5e-4)


def test_large_numbers_get_a_tolerance_relative_to_their_size():
    assert tolerance("152.", "152.0002") == pytest.approx(152.0002e-5)
    assert tolerance("1057.8", "1057.9") == pytest.approx(0.15)


def test_numbers_are_found_with_their_lines():
    found = numbers("tensor([[ 0.2899,  -inf],\n        [1e-05, nan]])")
    expected = [("0.2899", 1), ("-inf", 1), ("1e-05", 2), ("nan", 2)]
    assert [(n.text, n.line) for n in found] == expected


def test_integers_are_text_and_must_be_equal():
    assert numbers("torch.Size([6, 3]) and 1,024 bytes") == []
    assert not matches("1,024 bytes", "1,025 bytes")


finite = st.floats(-1e3, 1e3, allow_nan=False, width=32).filter(lambda v: abs(v) > 1e-3 or v == 0)


@given(values=st.lists(finite, min_size=1, max_size=12), sci_mode=st.sampled_from([False, None]))
def test_a_tensor_matches_itself_off_by_one_part_in_a_million(values, sci_mode):
    tensor = torch.tensor(values)
    signs = torch.tensor([(-1) ** i for i in range(len(values))])
    other = tensor * (1 + 1e-6 * signs)
    assert matches(printed(tensor.tolist(), sci_mode), printed(other.tolist(), sci_mode))


@given(values=st.lists(finite, min_size=1, max_size=12), index=st.integers(0, 11))
def test_a_tensor_does_not_match_one_value_changed_by_three_units(values, index):
    index %= len(values)
    changed = list(values)
    changed[index] += 3e-4 * max(1.0, abs(values[index]))
    expected, other = printed(values), printed(changed)
    if expected != other:
        assert not matches(expected, other)


def test_restated_numbers_must_be_printed_values_or_roundings_of_them():
    printed_values = ["1.4950", "0.2379", "1.2227"]
    prose = "The highest score, 1.4950, gets about 0.24; journey is longest (1.2227)."
    assert unprinted(prose, printed_values) == (3, [])
    assert unprinted(prose.replace("1.4950", "1.4970"), printed_values) == (3, ["1.4970"])


def test_prose_numbers_with_fewer_than_two_decimals_or_inside_versions_are_not_restatements():
    assert unprinted("p = 0.1 on torch 2.13.0, exercise 3.2, 1e-6", []) == (0, [])
    assert unprinted("a score of −0.25", []) == (1, ["-0.25"])


def test_a_cell_that_displays_markdown_is_read_as_that_markdown():
    table = "| model | heads |\n| --- | --- |\n| GPT-2 | 12 |"
    cell = {
        "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "before\n"},
            {
                "output_type": "execute_result",
                "data": {
                    "text/plain": "<IPython.core.display.Markdown object>",
                    "text/markdown": table,
                },
            },
            {"output_type": "display_data", "data": {"image/png": "...", "text/plain": "<Figure>"}},
        ]
    }
    assert printed_text(cell) == "before\n" + table
    cell["outputs"][1]["data"].pop("text/markdown")
    assert printed_text(cell) == "before\n<IPython.core.display.Markdown object>"
