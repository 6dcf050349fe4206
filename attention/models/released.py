"""The released ``config.json`` of each model in the table, kept with the package.

:data:`.MODELS` keeps only what the attention needs from each release's config.json.
The parameter count needs more: the vocabulary, the MLP and expert sizes, whether the
embeddings are tied to the output layer. So each file is stored here whole, as read,
one JSON file per model in ``attention/models/configs/``, beside the address of the
released file (at its revision where the copy names it) and the public copy the
values were read from. No file is downloaded. Where no whole copy could be read, the
store keeps the fields a partial copy gives (``"partial"`` says which are missing):
enough to read the attention, not to count the parameters.

:func:`.released_config` gives a file's fields; :func:`.released_parameters` counts
them on the meta device (:func:`~attention.models.parameter_count`), once per model.

>>> from attention.models import released_config, released_parameters
>>> released_config("Mixtral 8x7B")["num_local_experts"]
8
>>> released_parameters("Mixtral 8x7B")  # the paper, arXiv 2401.04088: "47B parameters"
46702792704
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import torch

from attention.models.costs import parameter_count
from attention.models.readers import LOADED_AS

__all__ = [
    "released_config",
    "released_config_source",
    "released_counted_class",
    "released_names",
    "released_parameters",
]

_FOLDER = Path(__file__).resolve().parent / "configs"
# The keys of each stored file; "config" holds the released file's fields.
_KEYS = {"name", "checkpoint", "source", "read_from", "config"}


@functools.cache
def _stored() -> dict[str, dict]:
    """Every stored file, by the table's name of its model."""
    stored: dict[str, dict] = {}
    for path in sorted(_FOLDER.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if set(record) - {"note", "partial"} != _KEYS:  # a file the store cannot cite
            raise ValueError(
                f"released_config: expected {path.name} to hold {sorted(_KEYS)}, got "
                f"{sorted(record)}"
            )
        stored[record["name"]] = record
    return stored


def _record(owner: str, name: object) -> dict:
    if not isinstance(name, str):
        raise TypeError(f"{owner}: expected a model's name as a str, got {type(name).__name__}")
    stored = _stored()
    if name not in stored:
        raise ValueError(
            f"{owner}: expected the name of a model whose released config.json is stored "
            f"(one of {', '.join(stored)}), got {name!r}"
        )
    return stored[name]


def released_names() -> tuple[str, ...]:
    """The names (as :data:`.MODELS` spells them) of the models whose file is stored."""
    return tuple(_stored())


def released_config(name: str) -> dict:
    """The fields of the released ``config.json`` of the model the table calls ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`.MODELS` (or of a model the table does not hold yet) whose file
        is stored: :func:`released_names`.

    Returns
    -------
    dict
        The file's fields as it spells them, a fresh copy each call: ready for
        :func:`~attention.models.facts_from_config` and
        :func:`~attention.models.parameter_count`.

    Examples
    --------
    >>> config = released_config("Llama 2 7B")
    >>> config["model_type"], config["vocab_size"], config["intermediate_size"]
    ('llama', 32000, 11008)
    """
    return copy.deepcopy(_record("released_config", name)["config"])


def released_config_source(name: str) -> str:
    """Where the stored file comes from: the released file's address, then the public
    copy its values were read from.

    >>> print(released_config_source("Mixtral 8x7B"))  # doctest: +ELLIPSIS
    https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json (read from ...)
    """
    record = _record("released_config_source", name)
    return f"{record['source']} (read from {record['read_from']})"


def _named_class(config: dict) -> type | None:
    """The ``transformers`` class the file's ``architectures`` names, where this
    ``transformers`` has it."""
    import transformers

    names = config.get("architectures") or []
    found = getattr(transformers, names[0], None) if names else None
    return found if isinstance(found, type) else None


def released_counted_class(name: str) -> str:
    """The name of the ``transformers`` class :func:`released_parameters` builds to
    count the model the table calls ``name``.

    The class the released file's ``architectures`` names, so that what is counted is
    the released model: an encoder's (``BertForMaskedLM``), an encoder-decoder's
    (``WhisperForConditionalGeneration``), a multimodal release's with its vision
    encoder (``Qwen3_5MoeForConditionalGeneration``). Where the file names no class,
    or one this ``transformers`` lacks, ``AutoModelForCausalLM`` (the text model with
    its output layer).

    >>> released_counted_class("Mixtral 8x7B")
    'MixtralForCausalLM'
    """
    named = _named_class(_record("released_counted_class", name)["config"])
    return named.__name__ if named is not None else "AutoModelForCausalLM"


@functools.cache
def _counted(name: str) -> int:
    import transformers

    config = released_config(name)
    named = _named_class(config)
    if named is None:
        return parameter_count(config)
    model_type = config.pop("model_type")
    if model_type in LOADED_AS and model_type not in transformers.CONFIG_MAPPING:
        model_type = LOADED_AS[model_type]  # Kimi K2's kimi_k2 runs as deepseek_v3
    built = transformers.AutoConfig.for_model(model_type, **config)
    with torch.device("meta"):  # shapes only: nothing is allocated
        model = named(built)
    # parameters() yields a tied weight once: embeddings tied to the output layer count once.
    return sum(parameter.numel() for parameter in model.parameters())


def released_parameters(name: str) -> int | None:
    """The exact parameter count of the model the table calls ``name``, from its
    released config.json, or ``None`` where no whole file is stored.

    What is counted is the released model: the class its file's ``architectures``
    names (:func:`released_counted_class`), built from the whole file on the meta
    device, so an encoder, an encoder-decoder and a multimodal release (its vision or
    audio encoder and projector included) are counted whole; a multi-token-prediction
    head that the class does not build is not. Where the file names no class this
    ``transformers`` has, :func:`~attention.models.parameter_count`'s text model with
    its output layer. Counted once per model (building the largest models' modules
    takes a fraction of a second each), then remembered.

    >>> released_parameters("Llama 2 7B")  # the released weights, to the last one
    6738415616
    >>> released_parameters("a model with no file") is None
    True
    """
    if not isinstance(name, str):
        raise TypeError(
            f"released_parameters: expected a model's name as a str, got {type(name).__name__}"
        )
    if name not in _stored() or "partial" in _stored()[name]:
        return None
    return _counted(name)
