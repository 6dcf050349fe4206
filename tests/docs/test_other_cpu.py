"""Checking printed output as another CPU may print it (``nox -s docs-other-cpu``).

Another CPU computes the same results to within about 1e-7 of their size; printed
with a few digits, that moves a last digit by one where a value sits on a rounding
boundary, and turns ``tensor([1., 1.])`` into ``tensor([1.0000, 1.0000])``. The build
cannot run on another CPU, so the verifier shifts what this one printed
(:func:`printed_values.shifted`) and compares again. The pairs below are real torch
output.
"""

import re

import pytest
import torch
import verify_outputs
from hypothesis import given
from hypothesis import strategies as st
from printed_values import last_digit, matches, numbers, shifted
from verify_outputs import OTHER_CPU, Tally, check_output, check_prose

from attention import INPUTS, attention_weights, scores_for_all


def printed(values, **kwargs) -> str:
    """``repr`` of a float tensor as the pages print it: 4 decimals."""
    with torch._tensor_str.printoptions(precision=4, sci_mode=False):
        return repr(torch.tensor(values, **kwargs))


ONE_ULP_UP = 1.0000001  # the nearest float32 above 1: a row sum on another CPU


# -- The shift itself ---------------------------------------------------------------


def test_every_float_moves_one_unit_of_its_own_last_digit():
    text = "tensor([0.4858, -1.2346e-07, 152.0002]) and 0.5"
    assert shifted(text, 1) == "tensor([0.4859, -1.2345e-07, 152.0003]) and 0.6"
    assert shifted(text, -1) == "tensor([0.4857, -1.2347e-07, 152.0001]) and 0.4"


def test_a_whole_number_gets_torchs_four_decimals_as_when_one_value_is_not_whole():
    whole = printed([1.0, 1.0])
    other = printed([1.0, ONE_ULP_UP])  # what another CPU prints
    assert (whole, other) == ("tensor([1., 1.])", "tensor([1.0000, 1.0000])")
    assert shifted(whole, 1) == "tensor([1.0001, 1.0001])"
    assert shifted(whole, -1) == "tensor([0.9999, 0.9999])"
    # The comparison accepts the shifted form exactly when it accepts torch's own.
    assert matches(whole, other) and matches(whole, shifted(whole, -1))


def test_integers_words_nan_inf_and_the_ends_of_the_float_range_stay_as_they_are():
    text = "torch.Size([6, 3]): 1,024 bytes, nan, inf, step 12, -1.8e+308 (finfo.min)"
    assert shifted(text, 1) == shifted(text, -1) == text
    # finfo.min printed with 3 digits reads as -inf: one unit less would be a number.
    assert float("-1.8e+308") == float("-inf")


def test_the_text_around_the_numbers_stays_as_it_is():
    text = printed([[0.25, 0.5], [0.125, 1.0]], requires_grad=True) + " (at 1.5x)"
    for units in (1, -1):
        assert re.sub(r"[-\d.]+", "#", shifted(text, units)) == re.sub(r"[-\d.]+", "#", text)


@given(
    values=st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=1, max_size=8),
    units=st.sampled_from([1, -1]),
)
def test_a_tensor_matches_itself_shifted_and_each_number_moved_one_unit(values, units):
    text = printed(values)
    moved = shifted(text, units)
    assert matches(text, moved)
    for before, after in zip(numbers(text), numbers(moved), strict=True):
        step = float(after.text) - float(before.text)
        assert step == pytest.approx(units * last_digit(before.text), abs=1e-12)


# -- What the verifier does with it ------------------------------------------------


def check(expected: str, printed_text: str) -> list[str]:
    tally = Tally()
    check_output(tally, "cell 1", printed_text, expected, None, tally.problems.append)
    return tally.problems


@pytest.fixture
def other_cpu(monkeypatch):
    monkeypatch.setenv(OTHER_CPU, "1")


def test_only_the_variable_switches_it_on(monkeypatch):
    monkeypatch.delenv(OTHER_CPU, raising=False)
    assert verify_outputs.other_cpus() == ()
    monkeypatch.setenv(OTHER_CPU, "")
    assert verify_outputs.other_cpus() == ()
    monkeypatch.setenv(OTHER_CPU, "1")
    assert verify_outputs.other_cpus() == (1, -1)


def test_expectations_written_as_this_machine_prints_pass_on_another(other_cpu):
    weights = repr(attention_weights(scores_for_all(INPUTS)))
    sums = repr(attention_weights(scores_for_all(INPUTS)).sum(dim=-1))
    assert check(weights, weights) == []
    assert check("tensor([1., 1., 1., 1., 1., 1.])", sums) == []
    assert check(f"{0.2379:.4f} of 6 tokens", f"{0.23791:.4f} of 6 tokens") == []


def test_an_expectation_one_unit_off_passes_here_but_not_on_another_cpu(monkeypatch):
    expected, printed_text = "tensor([0.4950, 0.5049])", "tensor([0.4950, 0.5050])"
    monkeypatch.delenv(OTHER_CPU, raising=False)
    assert check(expected, printed_text) == []  # 1 unit: within 1.5
    monkeypatch.setenv(OTHER_CPU, "1")
    (problem,) = check(expected, printed_text)  # 0.5051 is 2 units from 0.5049
    assert problem.startswith("cell 1 would print something other than its expected output")
    assert "on another CPU" in problem
    assert "expected 0.5049, printed 0.5051" in problem


def test_a_wrong_value_is_reported_once_as_on_this_machine(other_cpu):
    (problem,) = check("tensor([0.4950, 1.0000])", "tensor([0.4970, 1.0000])")
    assert problem.startswith("cell 1 printed something other than its expected output")
    assert "expected 0.4950, printed 0.4970" in problem


def test_the_prose_is_checked_as_on_this_machine(other_cpu):
    tally = Tally()
    lines = [(3, "The largest is 0.4950, about 0.50."), (7, "The sum is 1.0001.")]
    check_prose(tally, lines, ["tensor([0.4950, 1.])"], lambda line: ("page", line))
    assert (tally.prose, tally.problems) == (3, [])
