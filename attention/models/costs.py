"""What a model costs to serve: its cache profile, its parameters, and the bill.

:func:`.cache_profile` splits one sequence's cache into what grows with the context,
what a window caps and what stays fixed; :func:`.parameter_count` counts the weights
on the meta device; :func:`.bill` adds weights and cache for a batch at a context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attention.models.facts import ModelFacts
from attention.models.readers import as_config

__all__ = ["BITS", "Bill", "bill", "cache_profile", "parameter_count"]

#: Bits of one number in each type the bill knows (weights or cache).
BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}


def cache_profile(
    facts: ModelFacts, dtype: str = "bf16", state_dtype: str = "fp32"
) -> tuple[float, float, float]:
    """``(growing bytes per token, capped bytes, fixed state bytes)`` of one sequence's
    cache, once every window is full: what grows with the context, what a window or
    chunk caps, and what stays the same at any length."""
    window = facts.local.tokens_kept if facts.local is not None else None
    windows = [window or 0]
    rates = [facts.compressed.csa_rate, facts.compressed.hca_rate] if facts.compressed else [1]
    step = math.lcm(*rates)
    start = step * (max(windows) // step + 1) * 4  # all windows full, no token waiting

    def numbers(tokens: int) -> tuple[int, int]:
        rows = facts.layer_cache_numbers(tokens)
        return sum(a for a, _ in rows), sum(b for _, b in rows)

    (a0, state), (a1, _) = numbers(start), numbers(start + step)
    size, state_size = BITS[dtype] / 8, BITS[state_dtype] / 8
    growing = (a1 - a0) / step * size
    conv = sum(c for c, _ in facts._layer_state_numbers()) * size
    capped = a0 * size - growing * start - conv
    return growing, capped, conv + state * state_size


def parameter_count(config: object) -> int:
    """The exact number of parameters of the model a config describes (its text model,
    with its output layer), counted on the meta device: nothing is allocated.

    Examples
    --------
    >>> parameter_count({"model_type": "gpt2"})  # GPT-2 small, tied embeddings
    124439808
    """
    # Imported here, not above: the other cost functions run without them (the site's
    # calculator runs them in the browser, where neither is).
    import torch
    import transformers

    config = as_config(config)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(parameter.numel() for parameter in model.parameters())


@dataclass(frozen=True)
class Bill:
    """Memory for serving a model: its weights and a batch's cache, in bytes.

    Attributes
    ----------
    tokens, batch : int
        The context length and the number of sequences.
    weights : int or None
        ``parameters * bits / 8`` (``None``: the parameter count is unknown).
    cache : int
        All the batch's sequences' caches at ``tokens`` tokens.
    per_kind : dict
        The cache, by layer kind (``transformers``' names).
    """

    tokens: int
    batch: int
    weights: int | None
    cache: int
    per_kind: dict

    @property
    def total(self) -> int | None:
        return None if self.weights is None else self.weights + self.cache


def _bits(owner: str, name: str, value: object) -> int:
    if not isinstance(value, str):
        raise TypeError(f"{owner}: expected {name} to be a str, got {type(value).__name__}")
    if value not in BITS:
        raise ValueError(f"{owner}: expected {name} to be one of {tuple(BITS)}, got {value!r}")
    return BITS[value]


def bill(
    facts: ModelFacts,
    tokens: int,
    *,
    batch: int = 1,
    dtype: str = "bf16",
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
    parameters: int | None = None,
) -> Bill:
    """What serving ``batch`` sequences of ``tokens`` tokens takes: weights in ``dtype``
    plus the cache in ``cache_dtype`` (its recurrent states in ``state_dtype``).

    Counts numbers times bits: the scales and zero points a quantized cache or weights
    also keep (chapter 26) are not counted. ``parameters`` defaults to the count the
    facts hold (``facts.weights.parameters``).

    Examples
    --------
    >>> from attention import MODELS
    >>> b = bill(MODELS["Llama 2 7B"], 4096, batch=8)
    >>> b.weights / 2**30, b.cache / 2**30  # 16-bit weights; 32 layers * 2 * 4096 * 2 bytes
    (12.551277160644531, 16.0)
    """
    owner = "bill"
    weight_bits = _bits(owner, "dtype", dtype)
    cache_bits = _bits(owner, "cache_dtype", cache_dtype)
    state_bits = _bits(owner, "state_dtype", state_dtype)
    for name, value in (("tokens", tokens), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{owner}: expected {name} to be an int, got {type(value).__name__}")
    if tokens < 0 or batch < 1:
        raise ValueError(f"{owner}: expected tokens >= 0 and batch >= 1, got {tokens}, {batch}")
    per_kind: dict[str, int] = {}
    for kind, (cached, state) in zip(
        facts.layer_types, facts.layer_cache_numbers(tokens), strict=True
    ):
        size = batch * math.ceil((cached * cache_bits + state * state_bits) / 8)
        per_kind[kind] = per_kind.get(kind, 0) + size
    if parameters is None and facts.weights is not None:
        parameters = facts.weights.parameters
    weights = None if parameters is None else math.ceil(parameters * weight_bits / 8)
    return Bill(tokens, batch, weights, sum(per_kind.values()), per_kind)
