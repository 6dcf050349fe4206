"""Each model family's attention layer, assembled from the package's parts.

:class:`~attention.GroupedQueryAttention` is Part II's layer: heads, key/value heads,
RoPE, a window or chunks, a cache. What the models of Part III add are *parts* it
holds, empty by default: a :class:`~attention.Rotary` scaled for longer contexts,
``q_norm`` and ``k_norm`` (QK-norm), ``v_norm``, ``W_gate``, or no ``W_value``. A
*recipe* puts in the parts one family uses, at the sizes of its
:class:`~attention.models.ModelFacts`, as ``transformers`` writes one attention class per
model. Each family's recipe is a builder of its own, ``builder(facts, index, sizes)``,
and :func:`~attention.models.layer_for` builds any layer of a model in
:data:`.MODELS` with the builder :data:`.BUILDERS` names for its
config class:

================================  ===================================================
builder                           layer
================================  ===================================================
:func:`.llama_layer`              RoPE, grouped key/value heads (Llama 2 and 3,
                                  Gemma, Phi-4); a sliding window in every layer
                                  (Mistral); every fourth layer without RoPE (SmolLM3)
:func:`.qwen3_layer`              ``q_norm``, ``k_norm`` over each head (RMSNorm)
:func:`.olmo2_layer`              ``q_norm``, ``k_norm`` over the whole projection
                                  (OLMo 2 and 3, MiniMax-M2)
:func:`.gemma2_layer`             local (sliding) and global layers, Gemma's
                                  ``scale``, the scores capped (``softcap``)
:func:`.gemma3_layer`             QK-norm instead of the cap; the global layers a
                                  scaled RoPE of their own
:func:`.gemma4_layer`             ``v_norm``; global layers with their own heads and
                                  no ``W_value``; the last layers reuse earlier keys
                                  and values (:class:`~attention.SharedKVAttention`)
:func:`.gpt_oss_layer`            ``sinks``, sliding and global layers, YaRN, a bias
:func:`.qwen3_next_layer`         ``W_gate``, QK-norm, a quarter of each head
                                  rotating; :func:`.gated_deltanet_layer` in three
                                  layers of four (Qwen3-Next, Qwen3.5)
:func:`.llama4_layer`             chunked layers with a QK-norm after RoPE and
                                  without a scale (RMS, though ``transformers`` calls
                                  it ``L2Norm``); global NoPE layers whose queries
                                  warm with the position
                                  (:class:`~attention.NoPEWithTemperature`)
:func:`.command_a_layer`          sliding layers with RoPE, global ones without (NoPE)
:func:`.deepseek_v3_layer`        :class:`~attention.MultiHeadLatentAttention`
                                  (DeepSeek-V3, Kimi K2)
:func:`.deepseek_v32_layer`       :class:`~attention.SparseLatentAttention` with its
                                  indexer (DeepSeek-V3.2, GLM-5)
:func:`.deepseek_v4_layer`        :class:`~attention.CompressedAttention`: a window
                                  with sinks, and compressed entries (CSA, HCA)
:func:`.llama_32_vision_layer`    Llama's layers, and in some
                                  :class:`~attention.CrossAttention` to the image,
                                  with ``q_norm``, ``k_norm`` over each head
================================  ===================================================

A builder reads the model's facts, and :class:`Sizes` makes the same model smaller:
fewer heads, a narrower width, a shorter window, in the names the model's config
uses. What is not a size (a RoPE base or scaling, a bias, a cap) is a fact: a
different one is a different model, a ``dataclasses.replace`` of its
:class:`~attention.models.ModelFacts`.

An encoder's layers (BERT, ModernBERT) attend both ways, which the causal
:class:`~attention.GroupedQueryAttention` does not: :func:`~attention.models.layer_for`
refuses them, and chapter 35 builds them from :func:`~attention.attend`.

Every recipe is checked against the ``transformers`` class of its model, the
weights copied, in float64 to 1e-10 (``tests/test_models_recipes.py``).

>>> import torch
>>> from attention import MODELS, layer_for
>>> from attention.models import Sizes
>>> gemma3 = MODELS["Gemma 3 27B"]
>>> small = Sizes(hidden_size=16, num_heads=4, num_kv_heads=2, head_dim=4)
>>> local, glob = layer_for(gemma3, 0, sizes=small), layer_for(gemma3, 5, sizes=small)
>>> local.window, glob.window, local.rotary.base, glob.rotary.scaling
(1024, None, 10000.0, {'rope_type': 'linear', 'factor': 8.0})
>>> local.q_norm
RMSNorm(4, eps=1e-06)
>>> layer_for(gemma3, 5).W_query  # at the model's own sizes
Linear(in_features=5376, out_features=4096, bias=False)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

from torch import nn

from attention import _checks
from attention.compressed import CompressedAttention
from attention.cross import CrossAttention
from attention.delta import GatedDeltaNet
from attention.gqa import GroupedQueryAttention
from attention.latent import MultiHeadLatentAttention
from attention.models.facts import (
    CHUNKED,
    CONV,
    CROSS,
    CSA,
    FULL,
    HCA,
    HYBRID,
    LINEAR,
    MAMBA,
    NO_MIXER,
    SLIDING,
    LinearAttention,
    ModelFacts,
    Scores,
)
from attention.nope import NoPEWithTemperature
from attention.norms import ProjectionRMSNorm, RMSNorm
from attention.rope import Rotary
from attention.shared_kv import SharedKVAttention
from attention.sparse import SparseLatentAttention
from attention.ssd import Mamba2

__all__ = [
    "BUILDERS",
    "Sizes",
    "command_a_layer",
    "deepseek_v3_layer",
    "deepseek_v4_layer",
    "deepseek_v32_layer",
    "gated_deltanet_layer",
    "gemma2_layer",
    "gemma3_layer",
    "gemma4_layer",
    "gpt_oss_layer",
    "layer_for",
    "llama4_layer",
    "llama_32_vision_layer",
    "llama_layer",
    "mamba2_layer",
    "olmo2_layer",
    "qwen3_layer",
    "qwen3_next_layer",
]


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """The same model, smaller: sizes that replace the model's own in a recipe.

    Each field is named as :class:`~attention.models.ModelFacts` (and the model's
    ``config.json``) names it; ``None``, the default, keeps the model's own. A size
    given applies wherever the model uses it, in every layer (Gemma 4's global layers
    take ``num_kv_heads`` and ``head_dim`` too), and a layer kind that has no such
    size ignores it: a Gated DeltaNet layer has no ``num_heads``, a latent one no
    ``head_dim`` nor ``num_kv_heads``, a full-attention layer no ``sliding_window``.
    The output width follows ``hidden_size``.

    Attributes
    ----------
    hidden_size : int or None
        The width of the layer's input and output (``d_in`` and ``d_out``).
    num_heads, num_kv_heads, head_dim : int or None
        Query heads, key/value heads and their size.
    max_position_embeddings : int or None
        The positions the layer allows (its ``context_length``).
    sliding_window, attention_chunk_size : int or None
        The window of the sliding layers, the chunk of the chunked ones.
    q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim : int or None
        Multi-head latent attention's sizes (DeepSeek).
    index_n_heads, index_head_dim, index_topk : int or None
        The lightning indexer's heads, their size and the keys it picks (DeepSeek-V3.2).
    o_groups, o_lora_rank : int or None
        DeepSeek-V4's grouped output projection: groups of heads, and each group's size.
    linear_num_key_heads, linear_num_value_heads : int or None
        Gated DeltaNet's query/key heads and value heads (Qwen3-Next).
    linear_key_head_dim, linear_value_head_dim, linear_conv_kernel_dim : int or None
        Their sizes, and the taps of its short convolution.
    mamba_num_heads, mamba_head_dim, ssm_state_size, mamba_n_groups : int or None
        Mamba-2's heads, their size, the state per channel and the groups of ``B`` and
        ``C`` (Nemotron-H's names; the inner width is heads times their size).
    mamba_conv_kernel, mamba_chunk_size : int or None
        The taps of Mamba-2's convolution, and its SSD's chunk.

    Raises
    ------
    TypeError
        For a size that is not an integer, or a name that is not a field.
    ValueError
        For a size below 1.

    Examples
    --------
    >>> Sizes(hidden_size=32, num_heads=4)
    Sizes(hidden_size=32, num_heads=4)
    >>> Sizes(num_heads=0)
    Traceback (most recent call last):
        ...
    ValueError: Sizes: num_heads must be at least 1, got 0
    """

    hidden_size: int | None = None
    num_heads: int | None = None
    num_kv_heads: int | None = None
    head_dim: int | None = None
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    index_n_heads: int | None = None
    index_head_dim: int | None = None
    index_topk: int | None = None
    o_groups: int | None = None
    o_lora_rank: int | None = None
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None
    mamba_num_heads: int | None = None
    mamba_head_dim: int | None = None
    ssm_state_size: int | None = None
    mamba_n_groups: int | None = None
    mamba_conv_kernel: int | None = None
    mamba_chunk_size: int | None = None

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if value is not None:
                object.__setattr__(self, item.name, _checks.positive_int("Sizes", item.name, value))

    def __repr__(self) -> str:
        given = [(f.name, getattr(self, f.name)) for f in fields(self)]
        inner = ", ".join(f"{name}={value!r}" for name, value in given if value is not None)
        return f"Sizes({inner})"

    def of(self, facts: ModelFacts, name: str, own: int | None = None) -> int:
        """The size ``name``: the one given, else the model's (``own``, or its fact).

        Raises a ``ValueError`` if neither says it: the model has no such size.

        >>> from attention.models import MODELS
        >>> Sizes(num_heads=4).of(MODELS["Llama 3 8B"], "num_heads")
        4
        >>> Sizes().of(MODELS["Llama 3 8B"], "kv_lora_rank")
        Traceback (most recent call last):
            ...
        ValueError: Sizes: 'Llama 3 8B' has no kv_lora_rank, and none was given
        """
        size = self.of_optional(facts, name, own)
        if size is None:
            raise ValueError(f"Sizes: {facts.name!r} has no {name}, and none was given")
        return size

    def of_optional(self, facts: ModelFacts, name: str, own: int | None = None) -> int | None:
        """As :meth:`of`, for a size the model may lack (``None``): MLA's ``q_lora_rank``."""
        given = getattr(self, name)
        if given is not None:
            return given
        return getattr(facts, name) if own is None else own


# -- the shared plumbing: sizes, rotation ----------------------------------------------


def _eps(facts: ModelFacts) -> float:
    """The epsilon of the model's RMS norms, which a family with such norms must state."""
    if facts.rms_norm_eps is None:
        raise ValueError(f"layer_for: {facts.name!r} states no rms_norm_eps for its norms")
    return facts.rms_norm_eps


def _attention(facts: ModelFacts, index: int, sizes: Sizes) -> dict:
    """The arguments every family's :class:`GroupedQueryAttention` takes for layer
    ``index``: its sizes (the model's, or those ``sizes`` gives), its window or chunk
    (on a layer of that kind), and the bias on its four projections."""
    kind = facts.layer_types[index]
    num_kv_heads, head_dim = facts.layer_kv_shapes[index]  # Gemma 4: the global's own
    width = sizes.of(facts, "hidden_size")
    bias = facts.attention_bias
    return {
        "d_in": width,
        "d_out": width,
        "context_length": sizes.of(facts, "max_position_embeddings"),
        "num_heads": sizes.of(facts, "num_heads"),
        "num_kv_heads": sizes.of(facts, "num_kv_heads", num_kv_heads),
        "head_dim": sizes.of(facts, "head_dim", head_dim),
        "window": sizes.of(facts, "sliding_window") if kind == SLIDING else None,
        "chunk": sizes.of(facts, "attention_chunk_size") if kind == CHUNKED else None,
        "qkv_bias": bias,
        "out_bias": bias,
    }


def _rotary(facts: ModelFacts, index: int, head_dim: int) -> Rotary | None:
    """Layer ``index``'s RoPE over heads of ``head_dim``; ``None`` on a NoPE layer. The
    local layers of Gemma 3 and 4 have a plain one, of their own base."""
    rope = facts.rope
    if not facts.uses_rope[index] or rope is None:
        return None
    local_own = facts.layer_types[index] != FULL and rope.local_theta is not None
    base = rope.local_theta if local_own and rope.local_theta is not None else rope.theta
    scaling = None if local_own else rope.scaling
    return Rotary(head_dim, base, scaling, rope.partial_rotary_factor)


def _latent(facts: ModelFacts, sizes: Sizes) -> dict:
    """The arguments of DeepSeek's :class:`MultiHeadLatentAttention`: its widths, heads
    and latent sizes (the model's, or those ``sizes`` gives), and its RoPE (YaRN)."""
    width, rope_dim = sizes.of(facts, "hidden_size"), sizes.of(facts, "qk_rope_head_dim")
    latent = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")
    rope = facts.rope
    if rope is None:
        raise ValueError(f"layer_for: {facts.name!r} has a latent but no RoPE to rotate it")
    return {
        "d_in": width,
        "d_out": width,
        "context_length": sizes.of(facts, "max_position_embeddings"),
        "q_lora_rank": sizes.of_optional(facts, "q_lora_rank"),  # None: no query latent
        **{name: sizes.of(facts, name) for name in ("num_heads", *latent, "v_head_dim")},
        # DeepSeek's weights lay the rotary parts out as neighbours (rope_interleave)
        "rotary": Rotary(rope_dim, rope.theta, rope.scaling, interleaved=True),
    }


def _scores(facts: ModelFacts) -> Scores:
    """The model's :class:`~attention.models.Scores`, which its family's recipe needs."""
    assert facts.scores is not None, f"{facts.name!r}: expected the scores group"
    return facts.scores


def _scaled_by(scores: Scores) -> float:
    """Gemma 2's and 3's factor on the scores, ``query_pre_attn_scalar ** -0.5``."""
    assert scores.query_pre_attn_scalar is not None
    return scores.query_pre_attn_scalar**-0.5


# -- each family's layer ----------------------------------------------------------------


def llama_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """Llama 2 and 3: RoPE and grouped key/value heads, nothing more.

    The families whose layers differ only in their kind build theirs so too: Mistral's
    sliding window (``window``), SmolLM3's every fourth layer without RoPE (no
    ``rotary``), and Gemma's and Phi-4's plain layers.

    Parameters
    ----------
    facts : ModelFacts
        The model's facts.
    index : int
        The layer, 0-based.
    sizes : Sizes
        Sizes that replace the model's (``Sizes()``: none).

    Returns
    -------
    GroupedQueryAttention

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> llama_layer(MODELS["Mistral 7B"], 0, Sizes(sliding_window=4)).window
    4
    """
    kwargs = _attention(facts, index, sizes)
    return GroupedQueryAttention(**kwargs, rotary=_rotary(facts, index, kwargs["head_dim"]))


def qwen3_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """Qwen3: an RMSNorm over each head's queries and keys (QK-norm), before RoPE.

    Parameters and returns as :func:`.llama_layer`.

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> qwen3_layer(MODELS["Qwen3 8B"], 0, Sizes(hidden_size=8, head_dim=2)).k_norm
    RMSNorm(2, eps=1e-06)
    """
    kwargs = _attention(facts, index, sizes)
    head_dim, eps = kwargs["head_dim"], _eps(facts)
    return GroupedQueryAttention(
        **kwargs,
        rotary=_rotary(facts, index, head_dim),
        q_norm=RMSNorm(head_dim, eps),
        k_norm=RMSNorm(head_dim, eps),
    )


def olmo2_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """OLMo 2: QK-norm over the whole query and key projections (``num_heads *
    head_dim`` features), not head by head. OLMo 3 adds sliding layers, MiniMax-M2
    rotates half of each head: their facts say so.

    Parameters and returns as :func:`.llama_layer`.

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> small = Sizes(num_heads=4, num_kv_heads=4, head_dim=2)
    >>> olmo2_layer(MODELS["OLMo 2 7B"], 0, small).q_norm
    ProjectionRMSNorm(8, eps=1e-06)
    """
    kwargs = _attention(facts, index, sizes)
    head_dim, eps = kwargs["head_dim"], _eps(facts)
    return GroupedQueryAttention(
        **kwargs,
        rotary=_rotary(facts, index, head_dim),
        q_norm=ProjectionRMSNorm(kwargs["num_heads"] * head_dim, eps),
        k_norm=ProjectionRMSNorm(kwargs["num_kv_heads"] * head_dim, eps),
    )


def gemma2_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """Gemma 2: sliding and global layers in turn; the scores scaled by
    ``query_pre_attn_scalar ** -0.5`` and capped, ``softcap * tanh(s / softcap)``.

    Parameters and returns as :func:`.llama_layer`.

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> gemma2_layer(MODELS["Gemma 2 9B"], 0, Sizes(head_dim=8)).softcap
    50.0
    """
    kwargs = _attention(facts, index, sizes)
    scores = _scores(facts)
    return GroupedQueryAttention(
        **kwargs,
        rotary=_rotary(facts, index, kwargs["head_dim"]),
        scale=_scaled_by(scores),
        softcap=scores.softcap,
    )


def gemma3_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """Gemma 3: five sliding layers to a global one, Gemma 2's scale, QK-norm over
    each head instead of the cap; the global layers' RoPE has its own base and a
    linear scaling, the local layers' a base of their own (``local_rope_theta``).

    Parameters and returns as :func:`.llama_layer`.

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> gemma3_layer(MODELS["Gemma 3 27B"], 0, Sizes(head_dim=8)).rotary.base
    10000.0
    """
    kwargs = _attention(facts, index, sizes)
    head_dim, eps = kwargs["head_dim"], _eps(facts)
    return GroupedQueryAttention(
        **kwargs,
        rotary=_rotary(facts, index, head_dim),
        scale=_scaled_by(_scores(facts)),
        q_norm=RMSNorm(head_dim, eps),
        k_norm=RMSNorm(head_dim, eps),
    )


def gemma4_layer(facts: ModelFacts, index: int, sizes: Sizes) -> nn.Module:
    """Gemma 4: Gemma 3's layers with a scale of 1 and a norm over the values too
    (without a learned scale); the global layers have heads of their own, and with
    ``attention_k_eq_v`` no ``W_value``: their keys serve as values. The last
    ``num_kv_shared_layers`` layers reuse earlier keys and values.

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    GroupedQueryAttention or SharedKVAttention

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> gemma4_layer(MODELS["Gemma 4 31B"], 5, Sizes(head_dim=8)).W_value is None
    True
    """
    kwargs = _attention(facts, index, sizes)
    head_dim, eps = kwargs["head_dim"], _eps(facts)
    rotary, scale = _rotary(facts, index, head_dim), _scores(facts).scale
    if facts.kv_shared[index]:  # queries of its own, an earlier layer's keys and values
        shape = {name: kwargs[name] for name in ("d_in", "d_out", "num_heads", "head_dim")}
        return SharedKVAttention(**shape, rotary=rotary, window=kwargs["window"], scale=scale)
    layer = GroupedQueryAttention(
        **kwargs,
        rotary=rotary,
        scale=scale,
        q_norm=RMSNorm(head_dim, eps),
        k_norm=RMSNorm(head_dim, eps),
        v_norm=RMSNorm(head_dim, eps, elementwise_affine=False),
    )
    k_eq_v = facts.global_layers is not None and facts.global_layers.k_eq_v
    if k_eq_v and facts.layer_types[index] == FULL:
        layer.W_value = None  # the global layers' values are their keys
    return layer


def gpt_oss_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """gpt-oss: a learned sink logit per head joins each softmax (``sinks``); sliding
    and global layers in turn, YaRN, and a bias on the four projections.

    Parameters and returns as :func:`.llama_layer`.

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> small = Sizes(num_heads=4, num_kv_heads=2, head_dim=8)
    >>> layer = gpt_oss_layer(MODELS["gpt-oss-20b"], 0, small)
    >>> layer.window, layer.sinks.shape, layer.W_key.bias is not None
    (128, torch.Size([4]), True)
    """
    kwargs = _attention(facts, index, sizes)  # the bias: attention_bias, True
    return GroupedQueryAttention(
        **kwargs,
        rotary=_rotary(facts, index, kwargs["head_dim"]),  # YaRN, in every layer
        sinks=True,  # always in GptOssAttention
    )


def gated_deltanet_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GatedDeltaNet:
    """A Gated DeltaNet layer (Qwen3-Next's and Qwen3.5's linear-attention layers): no
    keys and values cached, a state of fixed size (chapter 30).

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    GatedDeltaNet

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> small = Sizes(hidden_size=8, linear_key_head_dim=4, linear_value_head_dim=4)
    >>> gated_deltanet_layer(MODELS["Qwen3-Next 80B-A3B"], 0, small).num_value_heads
    32
    """
    return GatedDeltaNet(
        sizes.of(facts, "hidden_size"),
        sizes.of(facts, "linear_num_key_heads"),
        sizes.of(facts, "linear_num_value_heads"),
        sizes.of(facts, "linear_key_head_dim"),
        sizes.of(facts, "linear_value_head_dim"),
        conv_size=sizes.of(facts, "linear_conv_kernel_dim"),
        eps=_eps(facts),
    )


def mamba2_layer(facts: ModelFacts, index: int, sizes: Sizes) -> Mamba2:
    """A Mamba-2 layer (Nemotron-H's, Bamba's, Granite 4.0's, Zamba2's Mamba layers and
    Mamba-2's own): no keys and values cached, two states of fixed size (chapter 23).

    Parameters as :func:`.llama_layer`; every size from ``facts.mamba``, unless
    ``sizes`` gives it.

    Returns
    -------
    Mamba2

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> small = Sizes(hidden_size=8, mamba_head_dim=2, ssm_state_size=4)
    >>> layer = mamba2_layer(MODELS["Nemotron 3 Nano 30B"], 0, small)
    >>> layer.num_heads, layer.n_groups, layer.chunk_size, layer.time_step_limit[0]
    (64, 8, 128, 0.001)
    """
    mamba = facts.mamba
    if mamba is None or mamba.mixer != "Mamba-2":
        raise ValueError(
            f"layer_for: no recipe for layer {index} of {facts.name!r}: expected a Mamba-2 "
            f"mixer, got {mamba!r}"
        )
    assert mamba.num_heads is not None and mamba.n_groups is not None  # Mamba-2's
    heads = sizes.of(facts, "mamba_num_heads", mamba.num_heads)
    return Mamba2(
        sizes.of(facts, "hidden_size"),
        heads,
        sizes.of(facts, "mamba_head_dim", mamba.inner_size // mamba.num_heads),
        sizes.of(facts, "ssm_state_size", mamba.state_size),
        n_groups=sizes.of(facts, "mamba_n_groups", mamba.n_groups),
        conv_size=sizes.of(facts, "mamba_conv_kernel", mamba.conv_kernel_dim),
        # Where the entry gives none, Mamba-2's defaults (mamba_ssm's Mamba2 module)
        eps=mamba.norm_eps or 1e-5,
        chunk_size=sizes.of(facts, "mamba_chunk_size", mamba.chunk_size or 256),
        time_step_limit=(mamba.time_step_floor or 0.0, math.inf),
        bias=bool(mamba.proj_bias),
        conv_bias=mamba.conv_bias is not False,
    )


def qwen3_next_layer(facts: ModelFacts, index: int, sizes: Sizes) -> nn.Module:
    """Qwen3-Next and Qwen3.5: Gated DeltaNet in three layers of four; in the fourth,
    full attention whose output is gated, ``sigmoid(W_gate x)`` on each head's, with
    QK-norm over each head and RoPE over a quarter of each head.

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    GroupedQueryAttention or GatedDeltaNet

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> qwen3_next_layer(MODELS["Qwen3-Next 80B-A3B"], 3, Sizes(hidden_size=8)).W_gate
    Linear(in_features=8, out_features=4096, bias=False)
    """
    if facts.layer_types[index] == LINEAR:
        return gated_deltanet_layer(facts, index, sizes)
    kwargs = _attention(facts, index, sizes)
    head_dim, eps = kwargs["head_dim"], _eps(facts)
    layer = GroupedQueryAttention(**kwargs, rotary=_rotary(facts, index, head_dim))
    # The gate's weights are drawn after the module's own
    gate = kwargs["num_heads"] * head_dim
    layer.W_gate = nn.Linear(kwargs["d_in"], gate, bias=facts.attention_bias)
    layer.q_norm, layer.k_norm = RMSNorm(head_dim, eps), RMSNorm(head_dim, eps)
    return layer


def llama4_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """Llama 4: chunked layers with RoPE and an RMS norm of each head's queries and
    keys without a learned scale (``transformers``' ``Llama4TextL2Norm``, after RoPE;
    a norm without a scale commutes with a rotation); every fourth layer global,
    without RoPE, its queries warming with the position (``NoPEWithTemperature``).

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    GroupedQueryAttention or NoPEWithTemperature

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> scout, small = MODELS["Llama 4 Scout"], Sizes(hidden_size=8, head_dim=2)
    >>> llama4_layer(scout, 0, small).chunk, llama4_layer(scout, 3, small).floor_scale
    (8192, 8192)
    """
    kwargs = _attention(facts, index, sizes)
    head_dim, eps = kwargs["head_dim"], _eps(facts)
    if not facts.uses_rope[index]:  # the global layers
        tuning = facts.temperature_tuning
        assert tuning is not None  # Llama 4 tunes its NoPE layers' temperature
        return NoPEWithTemperature(
            attn_scale=tuning.attn_scale, floor_scale=tuning.floor_scale, **kwargs
        )
    return GroupedQueryAttention(
        **kwargs,
        rotary=_rotary(facts, index, head_dim),
        q_norm=RMSNorm(head_dim, eps, elementwise_affine=False),
        k_norm=RMSNorm(head_dim, eps, elementwise_affine=False),
    )


def command_a_layer(facts: ModelFacts, index: int, sizes: Sizes) -> GroupedQueryAttention:
    """Command A (Cohere 2): three sliding layers with RoPE, then a global one without
    any position encoding (NoPE), ``Cohere2Attention`` rotating in its sliding layers
    only.

    Parameters and returns as :func:`.llama_layer`.

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> command_a = MODELS["Command A"]
    >>> [command_a_layer(command_a, i, Sizes(hidden_size=8, head_dim=2)).rotary is None
    ...  for i in range(4)]
    [False, False, False, True]
    """
    kwargs = _attention(facts, index, sizes)
    sliding = facts.layer_types[index] == SLIDING
    rotary = _rotary(facts, index, kwargs["head_dim"]) if sliding else None
    return GroupedQueryAttention(**kwargs, rotary=rotary)


def deepseek_v3_layer(facts: ModelFacts, index: int, sizes: Sizes) -> MultiHeadLatentAttention:
    """DeepSeek-V3 (and Kimi K2): multi-head latent attention, every layer caching a
    latent and a rotary key shared by the heads (chapter 13).

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    MultiHeadLatentAttention

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> deepseek_v3_layer(MODELS["DeepSeek-V3"], 0, Sizes(hidden_size=8)).kv_lora_rank
    512
    """
    return MultiHeadLatentAttention(**_latent(facts, sizes))


def deepseek_v32_layer(facts: ModelFacts, index: int, sizes: Sizes) -> SparseLatentAttention:
    """DeepSeek-V3.2 (and GLM-5): DeepSeek-V3's latent attention over the keys a
    lightning indexer picks for each query, ``index_topk`` of them (chapter 24).

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    SparseLatentAttention

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> small = Sizes(hidden_size=8, index_topk=4)
    >>> deepseek_v32_layer(MODELS["DeepSeek-V3.2"], 0, small).index_top_k
    4
    """
    indexer = {
        "index_top_k": sizes.of(facts, "index_topk"),
        "index_num_heads": sizes.of(facts, "index_n_heads"),
        "index_head_dim": sizes.of(facts, "index_head_dim"),
    }
    return SparseLatentAttention(**_latent(facts, sizes), **indexer)


def deepseek_v4_layer(facts: ModelFacts, index: int, sizes: Sizes) -> CompressedAttention:
    """DeepSeek-V4: one key/value vector per token, serving as key and value, a window
    with sinks in every layer, and in CSA and HCA layers compressed entries (chapter 25).

    The queries come through a latent (``q_lora_rank``) and are normalised per head
    without a scale; the key/value vector by an RMSNorm. RoPE turns the last
    ``qk_rope_head_dim`` numbers of each head (``head_dim * partial_rotary_factor``):
    with the model's RoPE in the sliding-only layers, with the compressed layers' own
    (``compressed.rope_theta`` and ``compressed.rope_scaling``) in the CSA and HCA ones.

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    CompressedAttention

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> flash = MODELS["DeepSeek-V4-Flash"]
    >>> [deepseek_v4_layer(flash, i, Sizes(hidden_size=8)).kind for i in (0, 2, 3)]
    ['sliding_attention', 'compressed_sparse_attention', 'heavily_compressed_attention']
    """
    compressed, rope, kind = facts.compressed, facts.rope, facts.layer_types[index]
    if compressed is None or rope is None or facts.indexer is None:
        raise ValueError(f"layer_for: {facts.name!r} is not a DeepSeek-V4 model")
    head_dim = sizes.of(facts, "head_dim")
    rope_dim = sizes.of_optional(facts, "qk_rope_head_dim")
    if rope_dim is None:
        rope_dim = int(head_dim * rope.partial_rotary_factor)
    width = sizes.of(facts, "hidden_size")
    kwargs: dict = {
        "num_heads": sizes.of(facts, "num_heads"),
        "head_dim": head_dim,
        # DeepSeek-V4's own sizes live in its Compressed group
        "q_lora_rank": sizes.of(facts, "q_lora_rank", compressed.q_lora_rank),
        "window": sizes.of(facts, "sliding_window"),
        "rope_dim": rope_dim,
        "o_groups": sizes.of(facts, "o_groups", compressed.o_groups),
        "o_lora_rank": sizes.of(facts, "o_lora_rank", compressed.o_lora_rank),
        "eps": _eps(facts),
    }
    if kind == SLIDING:
        kwargs |= {"rope_base": rope.theta, "rope_scaling": rope.scaling}
    else:  # everything a compressed layer rotates turns with its own RoPE
        theta = compressed.rope_theta if compressed.rope_theta is not None else rope.theta
        kwargs |= {"rope_base": theta, "rope_scaling": compressed.rope_scaling}
    if kind == CSA:
        kwargs |= {
            "compress_rate": compressed.csa_rate,
            "index_top_k": sizes.of(facts, "index_topk"),
            "index_num_heads": sizes.of(facts, "index_n_heads"),
            "index_head_dim": sizes.of(facts, "index_head_dim"),
        }
    elif kind == HCA:
        kwargs["compress_rate"] = compressed.hca_rate
    context = sizes.of(facts, "max_position_embeddings")
    return CompressedAttention(width, width, context, **kwargs)


def llama_32_vision_layer(facts: ModelFacts, index: int, sizes: Sizes) -> nn.Module:
    """Llama 3.2 Vision's text model: Llama's layers, and in ``cross_attention_layers``
    a cross-attention to the image, projected to the text's width
    (``MllamaTextCrossAttention``), with an RMSNorm over each head of the queries and
    the keys. Its ``head_dim`` is ``hidden_size // num_heads``.

    Parameters as :func:`.llama_layer`.

    Returns
    -------
    GroupedQueryAttention or CrossAttention

    Examples
    --------
    >>> from attention.models import MODELS, Sizes
    >>> vision = MODELS["Llama 3.2 11B Vision"]
    >>> small = Sizes(hidden_size=16, num_heads=4, num_kv_heads=2)
    >>> llama_32_vision_layer(vision, 3, small).q_norm
    RMSNorm(4, eps=1e-05)
    """
    if facts.layer_types[index] != CROSS:
        return llama_layer(facts, index, sizes)
    width, num_heads = sizes.of(facts, "hidden_size"), sizes.of(facts, "num_heads")
    head_dim = sizes.of(facts, "head_dim", width // num_heads)
    if num_heads * head_dim != width:
        raise ValueError(
            f"layer_for: a cross-attention layer's head_dim is hidden_size // num_heads, "
            f"got hidden_size={width}, num_heads={num_heads} and head_dim={head_dim}"
        )
    eps, bias = _eps(facts), facts.attention_bias
    return CrossAttention(  # the image's length is its own: no context_length
        width,
        width,
        width,
        num_heads=num_heads,
        num_kv_heads=sizes.of(facts, "num_kv_heads"),
        qkv_bias=bias,
        out_bias=bias,
        q_norm=RMSNorm(head_dim, eps),
        k_norm=RMSNorm(head_dim, eps),
    )


#: Each family's builder, by the ``transformers`` config class of its models
#: (``ModelFacts.config_class``).
BUILDERS: dict[str, Callable[[ModelFacts, int, Sizes], nn.Module]] = {
    "LlamaConfig": llama_layer,
    "MistralConfig": llama_layer,
    "MixtralConfig": llama_layer,  # Mistral's attention; the experts are the MLP's
    "GemmaConfig": llama_layer,
    "Phi3Config": llama_layer,
    "SmolLM3Config": llama_layer,
    "Qwen3Config": qwen3_layer,
    "Qwen3MoeConfig": qwen3_layer,  # Qwen3's attention; the experts are the MLP's
    "Olmo2Config": olmo2_layer,
    "Olmo3Config": olmo2_layer,
    "MiniMaxM2Config": olmo2_layer,
    "Gemma2Config": gemma2_layer,
    "Gemma3TextConfig": gemma3_layer,
    "Gemma4TextConfig": gemma4_layer,
    "GptOssConfig": gpt_oss_layer,
    "Qwen3NextConfig": qwen3_next_layer,
    "Qwen3_5MoeTextConfig": qwen3_next_layer,
    "Llama4TextConfig": llama4_layer,
    "Cohere2Config": command_a_layer,
    "DeepseekV3Config": deepseek_v3_layer,
    "DeepseekV32Config": deepseek_v32_layer,
    "GlmMoeDsaConfig": deepseek_v32_layer,
    "DeepseekV4Config": deepseek_v4_layer,
    "MllamaTextConfig": llama_32_vision_layer,
}


def layer_for(facts: ModelFacts, layer_index: int, *, sizes: Sizes | None = None) -> nn.Module:
    """Layer ``layer_index`` of the model ``facts`` describes, untrained, at its sizes or
    at ``sizes``.

    The builder of the model's family (:data:`.BUILDERS`, by ``facts.config_class``)
    builds it: :func:`.llama_layer`, :func:`.qwen3_layer`, :func:`.olmo2_layer`,
    :func:`.gemma2_layer`, :func:`.gemma3_layer`, :func:`.gemma4_layer`,
    :func:`.gpt_oss_layer`, :func:`.qwen3_next_layer` (and :func:`.gated_deltanet_layer`),
    :func:`.llama4_layer`, :func:`.command_a_layer`, :func:`.deepseek_v3_layer`,
    :func:`.deepseek_v32_layer`, :func:`.deepseek_v4_layer` or
    :func:`.llama_32_vision_layer`; a Mamba-2 layer, whatever the family, by
    :func:`.mamba2_layer`. The layer's kind
    follows ``facts.layer_types`` and ``facts.uses_rope``: full, sliding (``window``),
    chunked (``chunk``), NoPE (no ``rotary``), reusing another layer's keys and values
    (``facts.kv_shared``: a :class:`~attention.SharedKVAttention`), latent (DeepSeek),
    Gated DeltaNet (Qwen3-Next's linear-attention layers), Mamba-2 (the hybrids'
    Mamba layers: a :class:`~attention.Mamba2`), cross-attention (Llama 3.2 Vision's
    image layers: a :class:`~attention.CrossAttention`) or compressed (DeepSeek-V4's
    sliding, CSA and HCA layers: a :class:`~attention.CompressedAttention`).

    Parameters
    ----------
    facts : ModelFacts
        An entry of :data:`.MODELS`, or a ``dataclasses.replace`` of
        one (another RoPE base or scaling, a bias: another model).
    layer_index : int
        0-based, below ``facts.layers``.
    sizes : Sizes, optional
        The same model, smaller: each size given replaces the model's wherever the
        model uses it, and a layer kind without such a size ignores it (see
        :class:`Sizes`). ``None``: the model's own sizes.

    Returns
    -------
    nn.Module
        A :class:`~attention.GroupedQueryAttention` (or one of the modules above). From
        one seed, its weights are drawn in the order of the module's own layers, the
        parts (``W_gate``) after them.

    Raises
    ------
    TypeError
        If ``facts`` is not a ModelFacts or ``sizes`` not a Sizes.
    ValueError
        For a layer past the last, or a model or layer kind with no recipe yet.

    Examples
    --------
    >>> from attention import MODELS
    >>> from attention.models import Sizes
    >>> scout, small = MODELS["Llama 4 Scout"], Sizes(hidden_size=8, head_dim=2)
    >>> [type(layer_for(scout, i, sizes=small)).__name__ for i in (0, 3)]
    ['GroupedQueryAttention', 'NoPEWithTemperature']
    >>> layer_for(scout, 0, sizes=small).chunk
    8192
    """
    if not isinstance(facts, ModelFacts):
        raise TypeError(f"layer_for: facts must be a ModelFacts, got {type(facts).__name__}")
    index = _checks.whole_number("layer_for", layer_index, "layer_index must be an integer")
    if not 0 <= index < facts.layers:
        raise ValueError(
            f"layer_for: expected a layer_index from 0 to {facts.layers - 1} for "
            f"{facts.name!r}, got {layer_index}"
        )
    if sizes is None:
        sizes = Sizes()
    if not isinstance(sizes, Sizes):
        raise TypeError(
            f"layer_for: sizes must be a Sizes (Sizes(hidden_size=..., num_heads=..., "
            f"...)) or None, got {type(sizes).__name__}"
        )
    kind = facts.layer_types[index]
    kda = isinstance(facts.local, LinearAttention) and facts.local.mixer == "Kimi Delta Attention"
    if facts.positions in ("learned", "sinusoidal", "alibi") or kda:
        raise ValueError(f"layer_for: no recipe for {facts.name!r} yet")
    if kind == MAMBA and facts.mamba is not None and facts.mamba.mixer == "Mamba":
        raise ValueError(
            f"layer_for: no recipe for layer {index} of {facts.name!r}: a Mamba (Mamba-1) "
            "mixer, whose step, B and C are per channel; the package builds Mamba-2 "
            "(attention.Mamba2)"
        )
    if kind == MAMBA:
        return mamba2_layer(facts, index, sizes)
    if kind in (HYBRID, NO_MIXER, CONV):
        raise ValueError(
            f"layer_for: no recipe for layer {index} of {facts.name!r} yet, a {kind!r} layer"
        )
    if facts.bidirectional:
        raise ValueError(
            f"layer_for: no recipe for {facts.name!r}: an encoder's layers attend both ways, "
            "and GroupedQueryAttention is causal; compute them with attend (a padding mask, "
            "sliding_window_mask(..., causal=False) on local layers)"
        )
    builder = BUILDERS.get(facts.config_class)
    if builder is None:
        raise ValueError(
            f"layer_for: no recipe for {facts.name!r} yet: no builder for its config "
            f"class, {facts.config_class}"
        )
    return builder(facts, index, sizes)
