"""Printing as another CPU would (docs/_ext/perturb_prints.py)."""

import perturb_prints
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
