"""Printing as another CPU would (docs/_ext/perturb_prints.py)."""

import re

import perturb_prints
import pytest
from printed_values import matches

from attention import INPUTS, attention_weights, scores_for_all


def test_whole_numbers_lose_their_short_form_and_last_digits_may_flip(torch_formatting):
    torch = torch_formatting
    torch.set_printoptions(precision=4, sci_mode=False)
    ones, weights = torch.ones(6), attention_weights(scores_for_all(INPUTS))
    before = repr(ones), repr(weights)
    perturb_prints.install(1e-6)
    after = repr(ones), repr(weights)
    assert before[0] == "tensor([1., 1., 1., 1., 1., 1.])"
    assert after[0] == "tensor([1.0000, 1.0000, 1.0000, 1.0000, 1.0000, 1.0000])"
    assert matches(before[0], after[0])
    assert matches(before[1], after[1])


def test_a_wrong_value_still_fails_when_prints_are_perturbed(torch_formatting):
    torch = torch_formatting
    torch.set_printoptions(precision=4, sci_mode=False)
    perturb_prints.install(1e-6)
    assert not matches("tensor([0.4950, 1.0000])", repr(torch.tensor([0.4970, 1.0])))


def test_only_the_printed_text_changes(torch_formatting):
    torch = torch_formatting
    torch.manual_seed(0)
    expected_draw = torch.rand(3)
    torch.manual_seed(0)
    perturb_prints.install(1e-6)
    values = torch.ones(4)
    repr(values)
    assert torch.equal(values, torch.ones(4))  # the tensor itself is untouched
    assert torch.equal(torch.rand(3), expected_draw)  # and so is the global generator


def test_installing_twice_perturbs_once(torch_formatting):
    torch = torch_formatting
    torch.set_printoptions(precision=7, sci_mode=False)
    perturb_prints.install(1e-6)
    once = repr(torch.tensor([1.5, 2.5]))
    perturb_prints.install(1e-6)
    assert repr(torch.tensor([1.5, 2.5])) == once


def test_the_variable_switches_it_on(monkeypatch):
    monkeypatch.delenv(perturb_prints.VARIABLE, raising=False)
    assert perturb_prints.relative_from_environment() is None
    monkeypatch.setenv(perturb_prints.VARIABLE, "1e-6")
    assert perturb_prints.relative_from_environment() == 1e-6


# -- The perturbation itself: its size, its spread, its form, which tensors --------------

NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]\d+)?")


def printed_values(text: str) -> list[float]:
    return [float(number) for number in NUMBER.findall(text)]


def relative_changes(torch, values) -> list[float]:
    """How far each printed value of a float64 tensor is from the true one, relatively."""
    torch.set_printoptions(precision=12, sci_mode=True)
    perturb_prints.install(1e-6)
    printed = printed_values(repr(values))
    return [p / v - 1 for p, v in zip(printed, values.tolist(), strict=True)]


def test_every_value_moves_by_the_relative_size_asked_for(torch_formatting):
    torch = torch_formatting
    changes = relative_changes(torch, torch.linspace(0.5, 2.0, 400, dtype=torch.float64))
    assert all(abs(abs(change) - 1e-6) < 1e-9 for change in changes)


def test_the_signs_are_mixed_about_evenly(torch_formatting):
    torch = torch_formatting
    changes = relative_changes(torch, torch.linspace(0.5, 2.0, 400, dtype=torch.float64))
    up = sum(change > 0 for change in changes)
    assert 150 < up < 250, f"{up} of 400 values moved up"


def test_the_change_is_relative_whatever_the_size_of_the_value(torch_formatting):
    torch = torch_formatting
    values = torch.tensor([1e-3, -2e-3, 5.0, -7.0, 3e3, -4e3] * 10, dtype=torch.float64)
    changes = relative_changes(torch, values)
    assert all(abs(abs(change) - 1e-6) < 1e-9 for change in changes)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_every_float_dtype_is_perturbed(torch_formatting, dtype):
    torch = torch_formatting
    torch.set_printoptions(precision=4, sci_mode=False)
    values = torch.ones(8, dtype=getattr(torch, dtype))
    before = repr(values)
    perturb_prints.install(1e-2 if dtype in ("float16", "bfloat16") else 1e-6)
    assert repr(values) != before


@pytest.mark.parametrize(
    "make", [lambda t: t.arange(6), lambda t: t.ones(3, dtype=t.bool), lambda t: t.zeros(0)]
)
def test_integers_booleans_and_empty_tensors_print_as_they_are(torch_formatting, make):
    torch = torch_formatting
    values = make(torch)
    before = repr(values)
    perturb_prints.install(1e-6)
    assert repr(values) == before
