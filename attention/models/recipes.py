"""Each model family's attention layer, assembled from the package's parts.

:class:`~attention.GroupedQueryAttention` is Part II's layer: heads, key/value heads,
RoPE, a window or chunks, a cache. What the models of Part III add are *parts* it
holds, empty by default: a :class:`~attention.Rotary` scaled for longer contexts,
``q_norm`` and ``k_norm`` (QK-norm), ``v_norm``, ``W_gate``, or no ``W_value``. A
*recipe* puts in the parts one model uses, at the sizes of its
:class:`~attention.models.ModelFacts`, as ``transformers`` writes one attention class per
model. :func:`~attention.models.layer_for` builds any layer of a model in
:data:`~attention.models.MODELS`:

======================  =============================================================
family                  layer
======================  =============================================================
Llama 2 and 3, Gemma    RoPE, grouped key/value heads
Mistral                 a sliding window in every layer
SmolLM3                 every fourth layer without RoPE (NoPE)
Qwen3, Gemma 3 and 4    ``q_norm``, ``k_norm`` over each head (RMSNorm)
OLMo 2                  ``q_norm``, ``k_norm`` over the whole projection
Gemma 2, 3 and 4        local (sliding) and global layers, Gemma's ``scale``;
                        Gemma 2 caps the scores (``softcap``), Gemma 3 and 4 give
                        the global layers a scaled RoPE of their own
Gemma 4                 ``v_norm``; global layers with their own heads and no
                        ``W_value``; the last layers reuse earlier keys and values
                        (:class:`~attention.SharedKVAttention`)
gpt-oss                 ``sinks``, sliding and global layers, YaRN
Qwen3-Next, Qwen3.5     ``W_gate``, QK-norm, a quarter of each head rotating;
                        Gated DeltaNet in three layers of four
Llama 4                 chunked layers with a QK-norm after RoPE and without a
                        scale (RMS, though ``transformers`` calls it ``L2Norm``);
                        global NoPE layers whose queries warm with the position
                        (:class:`~attention.NoPEWithTemperature`)
DeepSeek-V3, V3.2       :class:`~attention.MultiHeadLatentAttention`, and
                        :class:`~attention.SparseLatentAttention` with its indexer
Llama 3.2 Vision        Llama's layers, and in some :class:`~attention.CrossAttention`
                        to the image, with ``q_norm``, ``k_norm`` over each head
======================  =============================================================

An encoder's layers (BERT, ModernBERT) attend both ways, which the causal
:class:`~attention.GroupedQueryAttention` does not: :func:`~attention.models.layer_for`
refuses them, and chapter 29 builds them from :func:`~attention.attend`.

Every recipe is checked against the ``transformers`` class of its model, the
weights copied, in float64 to 1e-10 (``tests/test_recipes.py``).

>>> import torch
>>> from attention import MODELS, layer_for
>>> gemma3 = MODELS["Gemma 3 27B"]
>>> small = {"d_in": 16, "num_heads": 4, "num_kv_heads": 2, "head_dim": 4}
>>> local, glob = layer_for(gemma3, 0, **small), layer_for(gemma3, 5, **small)
>>> local.window, glob.window, local.rotary.base, glob.rotary.scaling
(1024, None, 10000.0, {'rope_type': 'linear', 'factor': 8.0})
>>> local.q_norm
RMSNorm(4, eps=1e-06)
>>> layer_for(gemma3, 5).W_query  # at the model's own sizes
Linear(in_features=5376, out_features=4096, bias=False)
"""

from __future__ import annotations

from typing import Any

from torch import nn

from attention import _checks
from attention.cross import CrossAttention
from attention.delta import GatedDeltaNet
from attention.gqa import GroupedQueryAttention
from attention.latent import MultiHeadLatentAttention
from attention.models.facts import HYBRID, MAMBA, NO_MIXER, ModelFacts
from attention.nope import NoPEWithTemperature
from attention.norms import ProjectionRMSNorm, RMSNorm
from attention.rope import Rotary
from attention.shared_kv import SharedKVAttention
from attention.sparse import SparseLatentAttention

__all__ = ["layer_for"]

#: Family facts that ``ModelFacts`` does not hold, by config class (their defaults
#: there, and the released config.json's): a bias on the four projections
#: (``attention_bias``) and the RMS norms' epsilon (``rms_norm_eps``).
_BIAS = {"GptOssConfig": True}
_NORM_EPS = {"Llama4TextConfig": 1e-5, "MllamaTextConfig": 1e-5}
#: The overrides that shape the rotation rather than the module.
_ROPE_OVERRIDES = ("rope_base", "rope_scaling", "partial_rotary_factor")


def layer_for(facts: ModelFacts, layer_index: int, **overrides: object) -> nn.Module:
    """Layer ``layer_index`` of the model ``facts`` describes, at its sizes, untrained.

    The kind follows ``facts.layer_types`` and ``facts.uses_rope``: full, sliding
    (``window``), chunked (``chunk``), NoPE (no ``rotary``), reusing another layer's
    keys and values (``facts.kv_shared``: a :class:`SharedKVAttention`), latent
    (DeepSeek), Gated DeltaNet (Qwen3-Next's linear-attention layers) or
    cross-attention (Llama 3.2 Vision's image layers: a :class:`~attention.CrossAttention`).

    Parameters
    ----------
    facts : ModelFacts
        An entry of :data:`~attention.models.MODELS`.
    layer_index : int
        0-based, below ``facts.layers``.
    **overrides
        Arguments of the module's constructor that replace the model's (``d_in``,
        ``num_heads``, ``num_kv_heads``, ``head_dim``, ``context_length``, ``out_bias``,
        ..., for a small layer; ``d_out`` follows ``d_in``), and for RoPE ``rope_base``,
        ``rope_scaling`` and ``partial_rotary_factor``. ``window`` and ``chunk`` replace
        the model's sliding window and chunk size, on the layers of that kind only. A Gated DeltaNet
        layer takes ``d_in`` and its own sizes, and leaves the attention sizes out.

    Returns
    -------
    nn.Module
        A :class:`~attention.GroupedQueryAttention` (or one of the modules above). From
        one seed, its weights are drawn in the order of the module's own layers, the
        parts (``W_gate``) after them.

    Examples
    --------
    >>> from attention import MODELS
    >>> scout = MODELS["Llama 4 Scout"]
    >>> [type(layer_for(scout, i, d_in=8, head_dim=2)).__name__ for i in (0, 3)]
    ['GroupedQueryAttention', 'NoPEWithTemperature']
    >>> layer_for(scout, 0, d_in=8, head_dim=2).chunk
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
    kind = facts.layer_types[index]
    no_recipe = facts.linear_attention == "Kimi Delta Attention" or facts.compressed is not None
    if facts.positions in ("learned", "alibi") or no_recipe:  # nor DeepSeek-V4's compressed
        raise ValueError(f"layer_for: no recipe for {facts.name!r} yet")
    if kind in (MAMBA, HYBRID, NO_MIXER):
        raise ValueError(
            f"layer_for: no recipe for layer {index} of {facts.name!r} yet, a {kind!r} layer"
        )
    if facts.bidirectional:
        raise ValueError(
            f"layer_for: no recipe for {facts.name!r}: an encoder's layers attend both ways, "
            "and GroupedQueryAttention is causal; compute them with attend (a padding mask, "
            "sliding_window_mask(..., causal=False) on local layers)"
        )
    if kind == "cross_attention":
        return _cross(facts, overrides)
    if kind == "linear_attention":
        return _gated_deltanet(facts, overrides)
    if facts.kv_lora_rank is not None:
        return _latent(facts, overrides)
    return _grouped(facts, index, kind, overrides)


def _gated_deltanet(facts: ModelFacts, overrides: dict) -> GatedDeltaNet:
    sizes = {
        "d_in": facts.hidden_size,
        "num_key_heads": facts.linear_num_key_heads,
        "num_value_heads": facts.linear_num_value_heads,
        "key_head_dim": facts.linear_key_head_dim,
        "value_head_dim": facts.linear_value_head_dim,
        "conv_size": facts.linear_conv_kernel_dim,
    }
    # A hybrid's attention sizes given for all its layers do not apply here
    attention_only = {"num_heads", "num_kv_heads", "head_dim", "context_length", "window"}
    attention_only |= {"chunk", "qkv_bias", "out_bias", "d_out", *_ROPE_OVERRIDES}
    own = {name: value for name, value in overrides.items() if name not in attention_only}
    return GatedDeltaNet(**(sizes | own))


def _attention_sizes(facts: ModelFacts, overrides: dict) -> dict:
    """The sizes every attention layer takes: width (``d_in`` may be overridden), length, heads."""
    d_in = overrides.pop("d_in", facts.hidden_size)
    return {
        "d_in": d_in,
        "d_out": d_in,
        "context_length": facts.max_position_embeddings,
        "num_heads": facts.num_heads,
    }


def _cross(facts: ModelFacts, overrides: dict) -> CrossAttention:
    """Llama 3.2 Vision's cross-attention layer (``MllamaTextCrossAttention``): the image
    (projected to the text's width) as the context, no bias, an RMSNorm per head on the
    queries and the keys (``cross.qk_norm``). Its ``head_dim`` is ``d_in // num_heads``."""
    d_in = overrides.pop("d_in", facts.hidden_size)
    num_heads = overrides.pop("num_heads", facts.num_heads)
    head_dim = overrides.pop("head_dim", d_in // num_heads)
    overrides.pop("context_length", None)  # the context is the image's, of any length
    if num_heads * head_dim != d_in:
        raise ValueError(
            f"layer_for: a cross-attention layer's head_dim is d_in // num_heads, got "
            f"d_in={d_in}, num_heads={num_heads} and head_dim={head_dim}"
        )
    eps = _NORM_EPS.get(facts.config_class, 1e-6)
    norms: dict[str, Any] = {}
    if facts.cross_qk_norm == "head":
        norms = {"q_norm": RMSNorm(head_dim, eps), "k_norm": RMSNorm(head_dim, eps)}
    kwargs: dict[str, Any] = {"num_kv_heads": facts.num_kv_heads, "out_bias": False} | overrides
    return CrossAttention(d_in, d_in, d_in, num_heads=num_heads, **kwargs, **norms)


def _latent(facts: ModelFacts, overrides: dict) -> MultiHeadLatentAttention:
    kwargs = _attention_sizes(facts, overrides) | {
        "q_lora_rank": facts.q_lora_rank,
        "kv_lora_rank": facts.kv_lora_rank,
        "qk_nope_head_dim": facts.qk_nope_head_dim,
        "qk_rope_head_dim": facts.qk_rope_head_dim,
        "v_head_dim": facts.v_head_dim,
        "rope_base": facts.rope_theta,
        "rope_scaling": facts.rope_scaling,
    }
    if facts.indexer is None:
        return MultiHeadLatentAttention(**(kwargs | overrides))
    indexer = {
        "index_top_k": facts.indexer.top_k,
        "index_num_heads": facts.indexer.num_heads,
        "index_head_dim": facts.indexer.head_dim,
    }
    return SparseLatentAttention(**(kwargs | indexer | overrides))


def _grouped(facts: ModelFacts, index: int, kind: str, overrides: dict) -> nn.Module:
    """A GroupedQueryAttention (or a kin of it) with the parts of the model's layer."""
    full = kind == "full_attention"
    num_kv_heads, head_dim = facts.layer_kv_shapes[index]  # Gemma 4: the global's own
    bias = _BIAS.get(facts.config_class, False)
    kwargs = _attention_sizes(facts, overrides) | {
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "qkv_bias": bias,
        "out_bias": bias,
        "scale": facts.scale,
        "softcap": facts.attn_logit_softcapping,
        "sinks": facts.sinks,
    }
    if facts.scale is None and facts.query_pre_attn_scalar is not None:  # Gemma 2 and 3
        kwargs["scale"] = facts.query_pre_attn_scalar**-0.5
    # A window or chunk given is the model's, for the layers of that kind
    window = overrides.pop("window", facts.sliding_window)
    chunk = overrides.pop("chunk", facts.attention_chunk_size)
    kwargs["window"] = window if kind == "sliding_attention" else None
    kwargs["chunk"] = chunk if kind == "chunked_attention" else None
    rope = {name: overrides.pop(name) for name in _ROPE_OVERRIDES if name in overrides}
    kwargs |= overrides
    uses_rope = facts.uses_rope[index]
    eps = _NORM_EPS.get(facts.config_class, 1e-6)
    if facts.kv_shared[index]:
        return _shared(kwargs, _rotary(facts, full, kwargs, rope))
    if uses_rope:
        kwargs["rotary"] = _rotary(facts, full, kwargs, rope)
    layer: GroupedQueryAttention
    if not uses_rope and facts.attn_temperature_tuning:  # Llama 4's NoPE layers
        temperature = {"attn_scale": facts.attn_scale, "floor_scale": facts.floor_scale}
        layer = NoPEWithTemperature(**(temperature | kwargs))
    else:
        layer = GroupedQueryAttention(**kwargs)
    _add_parts(layer, facts, full, uses_rope, eps)
    return layer


def _rotary(facts: ModelFacts, full: bool, kwargs: dict, rope: dict) -> Rotary:
    """The layer's RoPE: Gemma 3 and 4's local layers have a plain one of their own."""
    local_own = not full and facts.local_rope_theta is not None
    base = facts.local_rope_theta if local_own else facts.rope_theta
    scaling = None if local_own else facts.rope_scaling
    return Rotary(
        kwargs["head_dim"],
        rope.get("rope_base", base),
        rope.get("rope_scaling", scaling),
        rope.get("partial_rotary_factor", facts.partial_rotary_factor),
    )


def _add_parts(
    layer: GroupedQueryAttention, facts: ModelFacts, full: bool, uses_rope: bool, eps: float
) -> None:
    """The parts, after the module's own layers, in the order W_gate, the norms."""
    heads, kv_heads, head_dim = layer.num_heads, layer.num_kv_heads, layer.head_dim
    if facts.output_gate:  # Qwen3-Next: sigmoid(W_gate(x)) on the heads' outputs
        bias = layer.W_query.bias is not None
        layer.W_gate = nn.Linear(layer.d_in, heads * head_dim, bias=bias)
    if facts.qk_norm == "head":  # Qwen3, Gemma 3 and 4, Qwen3-Next
        layer.q_norm, layer.k_norm = RMSNorm(head_dim, eps), RMSNorm(head_dim, eps)
    elif facts.qk_norm == "projection":  # OLMo 2
        layer.q_norm = ProjectionRMSNorm(heads * head_dim, eps)
        layer.k_norm = ProjectionRMSNorm(kv_heads * head_dim, eps)
    elif facts.qk_norm == "l2" and uses_rope:  # Llama 4, on its RoPE layers
        # Llama 4 normalises after RoPE; a norm without a scale commutes with a rotation.
        layer.q_norm = RMSNorm(head_dim, eps, elementwise_affine=False)
        layer.k_norm = RMSNorm(head_dim, eps, elementwise_affine=False)
    if facts.value_norm:  # Gemma 4
        layer.v_norm = RMSNorm(head_dim, eps, elementwise_affine=False)
    if facts.attention_k_eq_v and full:  # Gemma 4's global layers: values are keys
        layer.W_value = None


def _shared(kwargs: dict, rotary: Rotary) -> SharedKVAttention:
    """A layer that reuses the keys and values of the last earlier layer of its kind."""
    sizes = {name: kwargs[name] for name in ("d_in", "d_out", "num_heads", "head_dim")}
    window, scale = kwargs["window"], kwargs["scale"]
    return SharedKVAttention(**sizes, rotary=rotary, window=window, scale=scale)
