"""The released config.json files the package stores (``attention.models.released``).

Each stored file is cited: the address of the released file of its entry's checkpoint
and the public copy it was read from. Its parameter count, on the meta device, agrees
with every count the table cites, to the cited figure's last digit; that each file
reads back as its entry is ``test_models_readers.py``'s check.
"""

from __future__ import annotations

import pytest

# transformers: the import marks this file for `nox -s tests-latest` (noxfile.py).
import transformers  # noqa: F401

from attention import MODELS
from attention.models import (
    parameter_count,
    released_config,
    released_config_source,
    released_names,
    released_parameters,
)
from attention.models.released import _stored

pytestmark = pytest.mark.usefixtures("single_thread")

WHOLE = [name for name in released_names() if "partial" not in _stored()[name]]
PARTIAL = [name for name in released_names() if "partial" in _stored()[name]]
CITED = [name for name in WHOLE if MODELS[name].weights is not None]


@pytest.mark.parametrize("name", released_names())
def test_each_file_cites_the_released_file_of_its_entrys_checkpoint(name) -> None:
    record = _stored()[name]
    checkpoint = MODELS[name].checkpoint
    assert record["checkpoint"] == checkpoint
    assert record["source"].startswith(f"https://huggingface.co/{checkpoint}/blob/")
    assert record["source"].endswith("/config.json")
    assert released_config_source(name) == f"{record['source']} (read from {record['read_from']})"
    assert record["read_from"]  # where the values were read: no file is downloaded


def _unit(cited: int) -> int:
    """The place of a cited figure's last significant digit: 10**8 for 46.7B."""
    return 10 ** (len(str(cited)) - len(str(cited).rstrip("0")))


@pytest.mark.parametrize("name", CITED)
def test_the_count_agrees_with_the_cited_one_to_its_last_digit(name) -> None:
    """A model card's "46.7B" is the count to its last digit (rounded or cut: Phi-4's
    "14B" is 14.7 billion); an exact count is met exactly (Llama 2 7B)."""
    cited = MODELS[name].weights.parameters
    assert abs(released_parameters(name) - cited) < _unit(cited)


def test_the_unit_of_a_cited_figure_is_its_last_digits() -> None:
    assert (_unit(46_700_000_000), _unit(1_000_000_000_000), _unit(6_738_415_616)) == (
        10**8,
        10**12,
        1,
    )


def test_the_count_meets_the_check_only_near_the_cited_figure() -> None:
    """The check can fail: a count off by one unit of the cited figure is refused."""
    cited = MODELS["Mixtral 8x7B"].weights.parameters
    assert abs(released_parameters("Mixtral 8x7B") + _unit(cited) - cited) >= _unit(cited)


@pytest.mark.parametrize("name", WHOLE)
def test_the_count_is_that_of_the_file_on_the_meta_device(name) -> None:
    count = released_parameters(name)
    assert count == parameter_count(released_config(name)) > 0


@pytest.mark.parametrize("name", PARTIAL)
def test_a_partial_copy_counts_nothing(name) -> None:
    """A copy that kept the attention fields only cannot say the vocabulary or the MLP:
    no count rather than a count of the class's defaults."""
    assert released_parameters(name) is None
    assert "vocab_size" not in released_config(name)


def test_a_copy_is_fresh_each_call() -> None:
    config = released_config("Mixtral 8x7B")
    config["num_local_experts"] = 1
    assert released_config("Mixtral 8x7B")["num_local_experts"] == 8


def test_a_model_without_a_file_has_no_count() -> None:
    assert "BERT base" not in released_names()
    assert released_parameters("BERT base") is None


@pytest.mark.parametrize("function", [released_config, released_config_source, released_parameters])
def test_a_name_must_be_a_str(function) -> None:
    with pytest.raises(TypeError, match=r"expected a model's name as a str, got int"):
        function(7)


@pytest.mark.parametrize("function", [released_config, released_config_source])
def test_an_unknown_name_is_refused_with_the_known_ones(function) -> None:
    with pytest.raises(ValueError, match=r"stored \(one of .*Mixtral 8x7B.*\), got 'Mixtral'"):
        function("Mixtral")
