"""What a model costs to serve: its cache, layer by layer, its parameters, and the bill.

The cache of one sequence, from a model's facts (:class:`~attention.models.ModelFacts`):

* per token, what each layer's keys and values grow by:
  :func:`.layer_kv_cache_bytes_per_token`, their sum
  :func:`~attention.models.kv_cache_bytes_per_token`,
  and a lightning indexer's keys, :func:`.indexer_cache_bytes_per_token`;
* at a length, what the keys and values take, windows counted:
  :func:`.kv_cache_bytes`;
* the fixed-size states of linear-attention and Mamba layers: :func:`.layer_state_bytes`,
  :func:`.state_bytes`;
* everything together, layer by layer: :func:`.layer_cache_numbers` (numbers),
  :func:`.layer_cache_bytes` and their sum :func:`.cache_bytes`;
* a cross-attention context's keys and values, cached once: :func:`.cross_cache_bytes`;
* what a layer that selects its keys scores and reads per decoded token:
  :func:`.selection_cost`.

:func:`.cache_profile` splits one sequence's cache into what grows with the context,
what a window caps and what stays fixed; :func:`.parameter_count` counts the weights
on the meta device; :func:`.bill` adds weights and cache for a batch at a context.

>>> from attention.models import MODELS, cache_bytes, kv_cache_bytes_per_token
>>> kv_cache_bytes_per_token(MODELS["Llama 3 8B"])  # 2 * 32 layers * 8 heads * 128 * 2 bytes
131072
>>> cache_bytes(MODELS["Mistral 7B"], 100_000) / 2**30  # its window caps the cache
0.5

The names that end in ``kv_cache_bytes_per_token`` here take a model's facts; the
core's :func:`attention.kv_cache_bytes_per_token` takes the sizes themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import TYPE_CHECKING

from attention import _checks
from attention.cache_sizes import kv_cache_bytes_per_token as _sized_kv_bytes_per_token
from attention.models.facts import (
    CONV,
    CROSS,
    CSA,
    HCA,
    HYBRID,
    INDEXED,
    LINEAR,
    MAMBA,
    NO_MIXER,
    LinearAttention,
    ModelFacts,
    Sliding,
    _count,
)
from attention.models.readers import _whole_config

# No torch at run time: these functions run in the site's calculator, in the browser,
# where there is none. A dtype is a torch.dtype or its size in bytes; the defaults are
# sizes, 2 (bfloat16) for a cache and 4 (float32) for a recurrent state.
if TYPE_CHECKING:
    import torch

__all__ = [
    "BITS",
    "Bill",
    "SelectionCost",
    "bill",
    "cache_bytes",
    "cache_profile",
    "cross_cache_bytes",
    "indexer_cache_bytes_per_token",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "layer_cache_bytes",
    "layer_cache_numbers",
    "layer_kv_cache_bytes_per_token",
    "layer_state_bytes",
    "layer_tokens_kept",
    "parameter_count",
    "selection_cost",
    "state_bytes",
]

#: Bits of one number in each type the bill knows (weights or cache). ``"mxfp4"``, the
#: microscaling format gpt-oss ships its experts in, is 4-bit numbers sharing one 8-bit
#: scale per 32: 4 + 8 / 32 = 4.25 bits a number, its scale counted. The other types'
#: scales (fp8's one float32 per 128 x 128 block, 0.002 bits a number) are not.
BITS: dict[str, float] = {
    "fp32": 32,
    "bf16": 16,
    "fp16": 16,
    "fp8": 8,
    "int8": 8,
    "mxfp4": 4.25,
    "int4": 4,
}


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
        rows = layer_cache_numbers(facts, tokens)
        return sum(a for a, _ in rows), sum(b for _, b in rows)

    (a0, state), (a1, _) = numbers(start), numbers(start + step)
    size, state_size = BITS[dtype] / 8, BITS[state_dtype] / 8
    growing = (a1 - a0) / step * size
    conv = sum(c for c, _ in _layer_state_numbers(facts)) * size
    capped = a0 * size - growing * start - conv
    return growing, capped, conv + state * state_size


def parameter_count(config: object, only: Sequence[str] | None = None) -> int:
    """The exact number of parameters of the model a config describes (its text model,
    with its output layer), counted on the meta device: nothing is allocated.

    Parameters
    ----------
    config : dict, path or transformers config
        The model's config (see :func:`~attention.models.as_config`).
    only : sequence of str, optional
        Count only the parameters whose names (``transformers``' own,
        ``"model.layers.0.mlp.experts.gate_up_proj"``) match one of these patterns
        (``fnmatch.fnmatch``): the weights a release quantizes, the ``parameters``
        of its :class:`~attention.models.Quantization`.

    Examples
    --------
    >>> parameter_count({"model_type": "gpt2"})  # GPT-2 small, tied embeddings
    124439808
    >>> parameter_count({"model_type": "gpt2"}, only=["*.wte.weight"])  # 50,257 x 768
    38597376
    """
    # Imported here, not above: the other cost functions run without them (the site's
    # calculator runs them in the browser, where neither is).
    import torch
    import transformers

    if only is not None and (
        isinstance(only, str) or not all(isinstance(pattern, str) for pattern in only)
    ):
        raise TypeError(
            f"parameter_count: expected only to be a sequence of str patterns, got {only!r}"
        )
    whole = _whole_config(config)
    config = whole.get_text_config(decoder=True)
    if config is not whole and type(config) is type(whole):
        # A flat encoder-decoder (Whisper, BART): its text config is a copy that moved the
        # decoder's fields to generic names and left the class defaults under the old
        # ones, which its ForCausalLM reads. Built from the whole config, it counts the
        # released decoder.
        config = whole
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    # named_parameters() gives a tied weight once, under its first name.
    return sum(
        parameter.numel()
        for name, parameter in model.named_parameters()
        if only is None or any(fnmatch(name, pattern) for pattern in only)
    )


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


def _bits(owner: str, name: str, value: object) -> float:
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
    also keep (chapter 30) are not counted. ``parameters`` defaults to the count the
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
        facts.layer_types, layer_cache_numbers(facts, tokens), strict=True
    ):
        size = batch * math.ceil((cached * cache_bits + state * state_bits) / 8)
        per_kind[kind] = per_kind.get(kind, 0) + size
    if parameters is None and facts.weights is not None:
        parameters = facts.weights.parameters
    weights = None if parameters is None else math.ceil(parameters * weight_bits / 8)
    return Bill(tokens, batch, weights, sum(per_kind.values()), per_kind)


# -- the cache of one sequence ----------------------------------------------------------


def _facts(owner: str, facts: object) -> ModelFacts:
    if not isinstance(facts, ModelFacts):
        raise TypeError(f"{owner}: expected a ModelFacts, got {type(facts).__name__}")
    return facts


def _head_dim(facts: ModelFacts) -> int:
    """``head_dim``, which ``ModelFacts.__post_init__`` fills in where an entry leaves it out."""
    assert facts.head_dim is not None
    return facts.head_dim


def layer_kv_cache_bytes_per_token(
    facts: ModelFacts, dtype: torch.dtype | int = 2
) -> tuple[int, ...]:
    """Bytes each layer's cache grows by per token, in ``dtype`` numbers.

    ``2 * kv_heads * head_dim * bytes`` (the full or sliding layers' own heads and size
    where they differ; ``kv_heads * (head_dim + value_head_dim) * bytes`` where the
    values are narrower), or for latent attention ``(kv_lora_rank + qk_rope_head_dim) *
    bytes``; 0 for a layer that reuses another's keys and values and for a layer
    whose state is no key/value cache (linear attention, Mamba, a short convolution,
    an MLP-only layer);
    0 for a cross-attention layer, whose keys and values are the context's, cached
    once (:func:`.cross_cache_bytes`), and for every layer of an encoder
    (``bidirectional``), which generates nothing and keeps no cache. DeepSeek-V4's
    layers keep one vector per token, key and value alike: ``kv_heads * head_dim *
    bytes``.

    Gemma 4's ``attention_k_eq_v`` layers count keys and values both: the key
    projection feeds both, but the keys are normalised and rotated and the values
    only normalised, and ``transformers`` caches the two.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> layer_kv_cache_bytes_per_token(MODELS["gpt-oss-20b"])[:2]  # 2 * 8 heads * 64 * 2
    (2048, 2048)
    """
    facts = _facts("layer_kv_cache_bytes_per_token", facts)
    stateful = (LINEAR, MAMBA, NO_MIXER, CROSS, CONV)
    if facts.bidirectional:
        return (0,) * facts.layers
    if facts.latent is not None:
        per_layer = facts.latent.cache_bytes_per_token(dtype)
        return tuple(0 if kind in stateful else per_layer for kind in facts.layer_types)
    halve = 2 if facts.compressed is not None else 1  # one tensor: the key is the value
    size = _checks.dtype_bytes("layer_kv_cache_bytes_per_token", dtype)
    layers = []
    for kind, shared, (heads, head_dim) in zip(
        facts.layer_types, facts.kv_shared, facts.layer_kv_shapes, strict=True
    ):
        value_dim = facts.value_head_dim or head_dim
        stored = 0 if shared or kind in stateful else heads * (head_dim + value_dim) * size
        layers.append(stored // halve)
    return tuple(layers)


def kv_cache_bytes_per_token(facts: ModelFacts, dtype: torch.dtype | int = 2) -> int:
    """Bytes the cache of all layers grows by per token, in ``dtype`` numbers.

    ``2 * layers * num_kv_heads * head_dim * bytes``, or for latent attention
    ``layers * (kv_lora_rank + qk_rope_head_dim) * bytes``, counting the attention
    layers only; the sum of :func:`.layer_kv_cache_bytes_per_token` where layers differ.
    A lightning indexer's keys are not counted: :func:`.indexer_cache_bytes_per_token`.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> kv_cache_bytes_per_token(MODELS["DeepSeek-V3"])  # 61 layers * (512 + 64) * 2 bytes
    70272
    """
    return sum(layer_kv_cache_bytes_per_token(facts, dtype))


def layer_tokens_kept(facts: ModelFacts, tokens: int) -> tuple[int, ...]:
    """Of a sequence of ``tokens`` tokens, how many each layer keeps keys and values of.

    A sliding layer keeps at most its window, a chunked one its chunk, a DeepSeek-V4
    layer its window beside its compressed entries (:func:`.layer_cache_numbers`);
    every other layer keeps all ``tokens``, whether or not it caches keys and values.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> layer_tokens_kept(MODELS["gpt-oss-20b"], 1000)[:2]  # sliding (128), then full
    (128, 1000)
    """
    facts = _facts("layer_tokens_kept", facts)
    _count("layer_tokens_kept", "tokens", tokens)
    local = facts.local
    window = local.tokens_kept if local is not None else None
    if local is None or window is None:  # no window, or a linear-attention layer's state
        return (tokens,) * facts.layers
    capped = {local.kind, *((CSA, HCA) if facts.compressed is not None else ())}
    return tuple(min(tokens, window) if kind in capped else tokens for kind in facts.layer_types)


def kv_cache_bytes(facts: ModelFacts, tokens: int, dtype: torch.dtype | int = 2) -> int:
    """Bytes of keys and values for one sequence of ``tokens`` tokens.

    A sliding layer keeps at most ``sliding_window`` tokens and a chunked one at most
    ``attention_chunk_size`` (the keys of the current chunk, as the package's
    cache keeps them; ``transformers`` keeps a rolling buffer of the last
    ``attention_chunk_size - 1`` tokens for a chunked layer, as for a window:
    "from a cache point of view, sliding and chunked are the same", in its
    ``cache_utils.py``); a full one keeps all.
    A layer that reuses another's keys and values keeps none, and so does a
    linear-attention layer: its fixed-size state is not counted here.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> kv_cache_bytes(MODELS["Mistral 7B"], 100_000) / 2**30  # its window caps the cache
    0.5
    """
    _count("kv_cache_bytes", "tokens", tokens)
    return sum(
        per_token * kept
        for kept, per_token in zip(
            layer_tokens_kept(facts, tokens),
            layer_kv_cache_bytes_per_token(facts, dtype),
            strict=True,
        )
    )


def cross_cache_bytes(facts: ModelFacts, dtype: torch.dtype | int = 2) -> int | None:
    """Bytes of the cross-attention cache of one sequence, in ``dtype`` numbers: the
    context's keys and values in every layer that cross-attends,
    ``2 * kv_heads * head_dim * context_tokens * bytes`` a layer, computed once and
    the same however many tokens follow. 0 without cross-attention; ``None`` where
    the context's length depends on the input (``cross.context_tokens`` is
    ``None``). Not counted by :func:`.cache_bytes`, which counts what grows or is
    capped with the sequence's own tokens.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> whisper = MODELS["Whisper large-v3"]
    >>> cross_cache_bytes(whisper) == kv_cache_bytes_per_token(whisper) * 1500
    True
    """
    facts = _facts("cross_cache_bytes", facts)
    if facts.cross is None:
        return 0
    if facts.cross.context_tokens is None:
        return None
    layers = facts.layers if facts.cross.layers is None else len(facts.cross.layers)
    per_token = _sized_kv_bytes_per_token(layers, facts.num_kv_heads, _head_dim(facts), dtype)
    return per_token * facts.cross.context_tokens


def _layer_state_numbers(facts: ModelFacts) -> tuple[tuple[int, int], ...]:
    """Each layer's ``(convolution window, recurrent state)`` numbers."""
    linear = facts.local.state_numbers() if isinstance(facts.local, LinearAttention) else None
    mamba = facts.mamba.state_numbers() if facts.mamba is not None else None
    conv = facts.short_conv.state_numbers() if facts.short_conv is not None else None
    per_kind = {LINEAR: linear, MAMBA: mamba, HYBRID: mamba, CONV: conv}
    return tuple(per_kind.get(kind) or (0, 0) for kind in facts.layer_types)


def layer_state_bytes(
    facts: ModelFacts,
    dtype: torch.dtype | int = 2,
    state_dtype: torch.dtype | int = 4,
) -> tuple[int, ...]:
    """Bytes of each layer's fixed-size state for one sequence; 0 for attention layers.

    A linear-attention layer keeps two states, laid out as ``transformers``' cache
    holds them (:meth:`~attention.models.LinearAttention.state_bytes`): the
    short convolution's window in ``dtype``, the model's, and the delta rule's state
    in ``state_dtype``: ``float32`` in ``transformers``, whose Gated DeltaNet and KDA
    functions compute in float32 and hand the state back in it. A Mamba layer
    (and Falcon-H1's hybrid layers) likewise keeps a convolution window and an SSM
    state (:meth:`~attention.models.Mamba.state_numbers`).

    Neither grows with the sequence.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> layer_state_bytes(MODELS["Qwen3-Next 80B-A3B"])[:4]  # 3 Gated DeltaNet, 1 full
    (2162688, 2162688, 2162688, 0)
    """
    facts = _facts("layer_state_bytes", facts)
    size = _checks.dtype_bytes("layer_state_bytes", dtype)
    state_size = _checks.dtype_bytes("layer_state_bytes", state_dtype)
    return tuple(conv * size + state * state_size for conv, state in _layer_state_numbers(facts))


def state_bytes(
    facts: ModelFacts,
    dtype: torch.dtype | int = 2,
    state_dtype: torch.dtype | int = 4,
) -> int:
    """Bytes of the fixed-size state of all linear-attention and Mamba layers, per
    sequence: the sum of :func:`.layer_state_bytes`, the same at any length.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> state_bytes(MODELS["Qwen3.5 397B-A17B"]) // 2**20  # MiB, at any length
    184
    """
    return sum(layer_state_bytes(facts, dtype, state_dtype))


def indexer_cache_bytes_per_token(facts: ModelFacts, dtype: torch.dtype | int = 2) -> int:
    """Bytes the lightning indexer's key cache grows by per token, in ``dtype`` numbers.

    Each indexed layer caches one key of ``index_head_dim`` numbers per token, shared
    by the indexer's heads (``transformers``' ``DynamicIndexedLayer.indexer_keys``,
    in the model's number type); 0 without an indexer. (DeepSeek-V4's indexer keeps
    compressed keys instead: :func:`.layer_cache_numbers`.)

    Examples
    --------
    >>> from attention.models import MODELS
    >>> indexer_cache_bytes_per_token(MODELS["DeepSeek-V3.2"])  # 61 layers * 128 * 2 bytes
    15616
    """
    facts = _facts("indexer_cache_bytes_per_token", facts)
    if facts.indexer is None:
        return 0
    size = _checks.dtype_bytes("indexer_cache_bytes_per_token", dtype)
    per_layer = facts.indexer.head_dim * size
    return per_layer * facts.layer_types.count(INDEXED)


def _compressed_numbers(facts: ModelFacts, kind: str, tokens: int) -> int:
    """Numbers a DeepSeek-V4 layer keeps beside its window, after ``tokens`` tokens,
    as ``DeepseekV4HCACache`` and ``DeepseekV4CSACache`` hold them: the compressed
    entries (``compressed_kv``), the tokens waiting for their window to fill, with
    their gates (``buffer_kv``, ``buffer_gate``: ``tokens % rate`` of them, of twice
    the width in a CSA layer, whose windows overlap), and in a CSA layer the last
    full window's first half, with its gates (``overlap_kv``, ``overlap_gate``),
    for the compressor and for the indexer alike."""
    if kind not in (CSA, HCA):
        return 0
    assert facts.compressed is not None  # only a compressed model has these kinds
    widths: tuple[int, ...]
    if kind == HCA:
        rate, widths = facts.compressed.hca_rate, (_head_dim(facts),)
    else:
        assert facts.indexer is not None  # a CSA layer's indexer (ModelFacts checks it)
        rate = facts.compressed.csa_rate
        widths = (_head_dim(facts), facts.indexer.head_dim)
    entries, waiting = divmod(tokens, rate)
    overlap = 2 * rate if kind == CSA and entries else 0
    wide = 2 if kind == CSA else 1
    return sum(entries * width + waiting * 2 * wide * width + overlap * width for width in widths)


def layer_cache_numbers(facts: ModelFacts, tokens: int) -> tuple[tuple[int, int], ...]:
    """Numbers each layer's cache holds for one sequence of ``tokens`` tokens, as
    ``(in the cache's number type, in the state's)``: keys and values (a window's
    worth at most in a sliding or chunked layer, see :func:`.kv_cache_bytes`), the
    indexer's keys, the convolution windows and DeepSeek-V4's compressed entries in
    the first; the recurrent states of linear-attention and Mamba layers in the
    second (:func:`.layer_state_bytes`).

    A sliding layer counts ``sliding_window`` tokens, the keys a query at the end
    of the sequence attends to, as the package's :class:`~attention.KVCache` keeps
    them; between two steps ``transformers`` keeps one fewer (``sliding_window - 1``,
    ``DynamicSlidingWindowLayer.update``), to which it adds the new token's.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> layer_cache_numbers(MODELS["gpt-oss-20b"], 1000)[:2]  # 8 heads of 64, K and V
    ((131072, 0), (1024000, 0))
    """
    facts = _facts("layer_cache_numbers", facts)
    _count("layer_cache_numbers", "tokens", tokens)
    index = facts.indexer.head_dim if facts.indexer is not None else 0
    rows = []
    for kind, kept, per_token, (conv, state) in zip(
        facts.layer_types,
        layer_tokens_kept(facts, tokens),
        layer_kv_cache_bytes_per_token(facts, 1),  # one byte a number: numbers
        _layer_state_numbers(facts),
        strict=True,
    ):
        cached = per_token * kept + conv
        cached += tokens * index if kind == INDEXED else 0
        cached += _compressed_numbers(facts, kind, tokens)
        rows.append((cached, state))
    return tuple(rows)


def layer_cache_bytes(
    facts: ModelFacts,
    tokens: int,
    dtype: torch.dtype | int = 2,
    state_dtype: torch.dtype | int = 4,
) -> tuple[int, ...]:
    """Bytes each layer's cache holds for one sequence of ``tokens`` tokens: the
    numbers of :func:`.layer_cache_numbers`, in ``dtype`` and ``state_dtype``.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> layer_cache_bytes(MODELS["Qwen3-Next 80B-A3B"], 10)[:4]  # 3 Gated DeltaNet, 1 full
    (2162688, 2162688, 2162688, 20480)
    """
    size = _checks.dtype_bytes("layer_cache_bytes", dtype)
    state_size = _checks.dtype_bytes("layer_cache_bytes", state_dtype)
    return tuple(a * size + b * state_size for a, b in layer_cache_numbers(facts, tokens))


def cache_bytes(
    facts: ModelFacts,
    tokens: int,
    dtype: torch.dtype | int = 2,
    state_dtype: torch.dtype | int = 4,
) -> int:
    """Everything the cache holds for one sequence of ``tokens`` tokens: the keys and
    values (:func:`.kv_cache_bytes`), the indexer's keys, the linear-attention and
    Mamba layers' states and DeepSeek-V4's compressed entries; the sum of
    :func:`.layer_cache_bytes`, which says how sliding layers are counted.

    Examples
    --------
    >>> from attention.models import MODELS
    >>> cache_bytes(MODELS["Llama 2 7B"], 4096) / 2**30  # 32 layers * 2 * 4096 * 4096 * 2
    2.0
    """
    return sum(layer_cache_bytes(facts, tokens, dtype, state_dtype))


# -- what a selecting layer reads per decoded token ------------------------------------


@dataclass(frozen=True)
class SelectionCost:
    """What one selecting layer does for one decoded token, after ``tokens`` tokens.

    Attributes
    ----------
    selects : str
        What the indexer picks: ``"tokens"`` (DeepSeek-V3.2, GLM-5), ``"blocks"``
        (MiniMax-M3), ``"compressed blocks"`` (Qwen4-Exp's QSA) or ``"compressed
        entries"`` (DeepSeek-V4's CSA layers).
    scored : int
        Keys the indexer scores: every token; one mean key per complete block (QSA);
        one compressed entry per ``csa_rate`` tokens (CSA). MiniMax-M3 scores every
        token and pools the scores into ``ceil(tokens / block_size)`` blocks.
    kept : int
        Vectors the attention reads: the top-k keys, the chosen blocks' keys, the
        budget and the last, incomplete block (QSA), or the top-k compressed entries
        and the window (CSA); all of them while there are fewer.
    index_multiply_adds : int
        The indexer's dot products, ``num_heads * head_dim`` multiply-adds per key
        scored (its projections left out: they do not grow with the context).
    bytes_read : int
        Bytes the layer reads from its cache: the indexer keys it scores and the
        keys and values it attends to.
    """

    selects: str
    scored: int
    kept: int
    index_multiply_adds: int
    bytes_read: int


def selection_cost(facts: ModelFacts, tokens: int, dtype: torch.dtype | int = 2) -> SelectionCost:
    """What one of the model's selecting layers costs one decoded token at ``tokens``.

    Counted from the facts as the model's cache holds them, in ``dtype`` numbers (2:
    bfloat16): an indexer key of ``indexer.head_dim`` numbers per key scored, and the
    layer's per-token keys and values (a latent and a rotary key in DeepSeek's MLA; one
    vector of ``head_dim`` in DeepSeek-V4) per key read. QSA is counted with one cached
    mean key per complete block, as a kernel keeps it; ``transformers``' reference
    keeps the raw keys and pools every block again each step, reading every token's.

    Parameters
    ----------
    facts : ModelFacts
        A model with an indexer: ``"indexed_attention"`` layers, or DeepSeek-V4's CSA.
    tokens : int
        Tokens in the context, the new one included, at least 1.
    dtype : torch.dtype or int
        The cache's number type, or its size in bytes.

    Returns
    -------
    SelectionCost

    Examples
    --------
    >>> from attention.models import MODELS
    >>> cost = selection_cost(MODELS["DeepSeek-V3.2"], 131_072)
    >>> cost.scored, cost.kept  # every key scored, 2,048 read
    (131072, 2048)
    >>> cost.bytes_read == 131_072 * 128 * 2 + 2048 * (512 + 64) * 2
    True
    """
    owner = "selection_cost"
    facts = _facts(owner, facts)
    tokens = _checks.positive_int(owner, "tokens", tokens)
    size = _checks.dtype_bytes(owner, dtype)
    indexer = facts.indexer
    kinds = facts.layer_types
    if indexer is None or not (INDEXED in kinds or CSA in kinds):
        raise ValueError(
            f"{owner}: expected a model whose layers select keys with an indexer, got "
            f"{facts.name!r} with layer kinds {sorted(set(kinds))}"
        )
    kind = INDEXED if INDEXED in kinds else CSA
    per_key = layer_kv_cache_bytes_per_token(facts, size)[kinds.index(kind)]
    if kind == CSA:
        assert isinstance(facts.local, Sliding) and facts.compressed is not None  # CSA's
        selects, scored = "compressed entries", tokens // facts.compressed.csa_rate
        window = min(tokens, facts.local.tokens_kept)
        kept = min(scored, indexer.top_k) + window
    elif indexer.selects == "blocks":
        assert indexer.block_size is not None  # "blocks" says it is set
        selects, scored = "blocks", tokens
        kept = min(tokens, indexer.top_k * indexer.block_size)
    elif indexer.selects == "compressed blocks":
        assert indexer.compress_ratio is not None
        blocks, tail = divmod(tokens, indexer.compress_ratio)
        selects, scored = "compressed blocks", blocks
        kept = min(blocks * indexer.compress_ratio, indexer.top_k) + tail
    else:
        selects, scored, kept = "tokens", tokens, min(tokens, indexer.top_k)
    index_bytes = scored * indexer.head_dim * size
    return SelectionCost(
        selects=selects,
        scored=scored,
        kept=kept,
        index_multiply_adds=scored * indexer.num_heads * indexer.head_dim,
        bytes_read=index_bytes + kept * per_key,
    )
