"""A ``transformers`` model's own attention layer, as the package's module, with its weights.

:func:`~attention.models.layer_for` builds a model's layer from its facts, untrained.
:func:`~attention.models.from_transformers` builds the same layer for one attention
module of a model that ``transformers`` built (from a config, or with a checkpoint's
weights), and copies that module's weights into it: the step-by-step module then
computes what the model's layer computes, and shows its attention weights on any
sentence.

Each family stores its weights in its own layout, which :data:`.TRANSFORMERS_CLASSES`
and the copy below read by name:

* the four projections ``q_proj``, ``k_proj``, ``v_proj``, ``o_proj`` are ``W_query``,
  ``W_key``, ``W_value`` and ``out_proj`` (Phi-3 fuses the first three in ``qkv_proj``);
* Qwen3-Next's and Qwen3.5's ``q_proj`` holds, head by head, the queries then the gate
  (``W_gate``);
* Gemma 3's, Qwen3-Next's and Qwen3.5's QK-norms store their weight around zero,
  applied as ``1 + weight``: the package's ``RMSNorm`` takes ``1 + weight``;
* Llama 4 and Command A (Cohere 2) rotate neighbouring pairs (dimensions ``2i`` and
  ``2i + 1``), the package the two halves of a head (``i`` and ``i + head_dim / 2``):
  their query and key rows are reordered within each head, which gives the same scores;
* DeepSeek's ``kv_a_proj_with_mqa`` stacks ``W_dkv`` on ``W_kr``, and ``kv_b_proj``
  holds, head by head, ``W_uk``'s rows then ``W_uv``'s;
* Qwen3-Next's Gated DeltaNet fuses its projections key head by key head
  (``in_proj_qkvz``, ``in_proj_ba``); Qwen3.5's keeps them apart.
* DeepSeek-V4's attention maps name for name onto :class:`~attention.CompressedAttention`
  (``q_a_proj`` is ``W_dq``, ``o_a_proj`` ``W_out_groups``, ...); its compressor's
  indexer is the package layer's ``indexer``, beside its ``compressor``.

Every parameter on both sides is copied exactly once, or the copy refuses: a weight
left over would be a part of the model's layer that the package's layer lacks.

>>> import torch
>>> from transformers import AutoModelForCausalLM, Qwen3Config
>>> from attention.models import from_transformers
>>> config = Qwen3Config(hidden_size=16, num_attention_heads=4, num_key_value_heads=2,
...                      head_dim=4, num_hidden_layers=1, intermediate_size=32,
...                      vocab_size=32)
>>> model = AutoModelForCausalLM.from_config(config)
>>> layer = from_transformers(model.model.layers[0].self_attn)
>>> type(layer).__name__, layer.num_heads, layer.q_norm
('GroupedQueryAttention', 4, RMSNorm(4, eps=1e-06))
>>> torch.equal(layer.W_key.weight, model.model.layers[0].self_attn.k_proj.weight)
True
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.compressed import CompressedAttention
from attention.cross import CrossAttention
from attention.delta import GatedDeltaNet
from attention.gqa import GroupedQueryAttention
from attention.latent import MultiHeadLatentAttention
from attention.models.facts import HYBRID, MAMBA, ModelFacts
from attention.models.readers import facts_from_config
from attention.models.recipes import Sizes, layer_for, mamba2_layer
from attention.shared_kv import SharedKVAttention
from attention.sparse import SparseLatentAttention
from attention.ssd import Mamba2

__all__ = ["TRANSFORMERS_CLASSES", "from_transformers"]

#: The ``transformers`` attention classes :func:`~attention.models.from_transformers`
#: reads, by the config class of their model (the keys of :data:`.BUILDERS`): the
#: attention of every layer kind :func:`~attention.models.layer_for` builds for it.
TRANSFORMERS_CLASSES: dict[str, tuple[str, ...]] = {
    "LlamaConfig": ("LlamaAttention",),
    "MistralConfig": ("MistralAttention",),
    "MixtralConfig": ("MixtralAttention",),
    "GemmaConfig": ("GemmaAttention",),
    "Phi3Config": ("Phi3Attention",),
    "SmolLM3Config": ("SmolLM3Attention",),
    "Qwen3Config": ("Qwen3Attention",),
    "Qwen3MoeConfig": ("Qwen3MoeAttention",),
    "Olmo2Config": ("Olmo2Attention",),
    "Olmo3Config": ("Olmo3Attention",),
    "MiniMaxM2Config": ("MiniMaxM2Attention",),
    "Gemma2Config": ("Gemma2Attention",),
    "Gemma3TextConfig": ("Gemma3Attention",),
    "Gemma4TextConfig": ("Gemma4TextAttention",),
    "GptOssConfig": ("GptOssAttention",),
    "Qwen3NextConfig": ("Qwen3NextAttention", "Qwen3NextGatedDeltaNet"),
    "Qwen3_5MoeTextConfig": ("Qwen3_5MoeAttention", "Qwen3_5MoeGatedDeltaNet"),
    "Llama4TextConfig": ("Llama4TextAttention",),
    "Cohere2Config": ("Cohere2Attention",),
    "DeepseekV3Config": ("DeepseekV3Attention",),
    "DeepseekV32Config": ("DeepseekV32Attention",),
    "GlmMoeDsaConfig": ("GlmMoeDsaAttention",),
    "DeepseekV4Config": ("DeepseekV4Attention",),
    "MllamaTextConfig": ("MllamaTextSelfAttention", "MllamaTextCrossAttention"),
}

#: The Mamba-2 mixers :func:`~attention.models.from_transformers` reads, by the config
#: class of their model: :func:`~attention.models.layer_for` builds a Mamba-2 layer
#: (:class:`~attention.Mamba2`) whatever the model's family, so these need no builder.
#: Their weights have the package's names; their forward passes are one, but for the
#: clamp of the step (Nemotron-H's and Zamba2's ``time_step_min``).
MAMBA2_CLASSES: dict[str, str] = {
    "Mamba2Config": "Mamba2Mixer",
    "NemotronHConfig": "NemotronHMamba2Mixer",
    "BambaConfig": "BambaMixer",
    "GraniteMoeHybridConfig": "GraniteMoeHybridMambaLayer",
    "Zamba2Config": "Zamba2MambaMixer",
}

# QK-norms applied as ``1 + weight`` (their RMSNorm's weight starts at zeros)
_ZERO_CENTRED_NORMS = frozenset({"Gemma3Attention", "Qwen3NextAttention", "Qwen3_5MoeAttention"})
# Attention that rotates neighbouring pairs (2i, 2i + 1) where the package rotates halves
_NEIGHBOUR_PAIRS = frozenset({"Llama4TextAttention", "Cohere2Attention"})
# Attention whose q_proj gives each head's queries, then that head's output gate
_QUERY_AND_GATE = frozenset({"Qwen3NextAttention", "Qwen3_5MoeAttention"})


class _Weights:
    """The parameters of a ``transformers`` module, each taken once by name; what is
    left at the end was not copied."""

    def __init__(self, module: nn.Module) -> None:
        self.owner = type(module).__name__
        self.left = {name: p.detach() for name, p in module.named_parameters()}

    def take(self, name: str) -> torch.Tensor:
        if name not in self.left:
            raise ValueError(
                f"from_transformers: expected {self.owner} to hold a parameter {name!r}, "
                f"as the package's layer for it needs; its parameters left are "
                f"{sorted(self.left)}"
            )
        return self.left.pop(name)

    def take_optional(self, name: str) -> torch.Tensor | None:
        return self.left.pop(name, None)

    def linear(self, state: dict, theirs: str, ours: str) -> None:
        """``theirs``' weight (and bias, if it has one) as ``ours``'."""
        state[f"{ours}.weight"] = self.take(f"{theirs}.weight")
        bias = self.take_optional(f"{theirs}.bias")
        if bias is not None:
            state[f"{ours}.bias"] = bias


def _per_head(weight: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``weight`` (rows: heads of ``head_dim`` side by side) as ``(heads, head_dim, ...)``."""
    return weight.view(-1, head_dim, *weight.shape[1:])


def _halves_from_neighbours(weight: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Rows of each head reordered from pairs (2i, 2i + 1) to pairs (i, i + head_dim / 2).

    Their row ``2i`` becomes our row ``i`` and their row ``2i + 1`` our row
    ``i + head_dim / 2``: the numbers they rotate together, we rotate together, by the
    same angle, so each head's rotated queries and keys are theirs reordered alike, and
    their dot products, the scores, the same.
    """
    order = torch.arange(head_dim).view(head_dim // 2, 2).t().flatten()  # 0, 2, ..., 1, 3, ...
    return _per_head(weight, head_dim)[:, order].flatten(0, 1)


def _grouped(
    module: nn.Module,
    layer: GroupedQueryAttention | SharedKVAttention | CrossAttention,
    weights: _Weights,
) -> dict:
    """The weights of a layer with query, key and value projections: a
    :class:`GroupedQueryAttention` (and its kinds), a :class:`SharedKVAttention`, a
    :class:`CrossAttention`."""
    state: dict = {}
    cls, head_dim = weights.owner, layer.head_dim
    if cls == "Phi3Attention":  # q, k and v stacked in one projection, no bias
        stacked = weights.take("qkv_proj.weight")
        assert isinstance(layer, GroupedQueryAttention) and layer.W_value is not None
        projections = (layer.W_query, layer.W_key, layer.W_value)
        query, key, value = stacked.split([p.out_features for p in projections])
        state |= {"W_query.weight": query, "W_key.weight": key, "W_value.weight": value}
    elif cls in _QUERY_AND_GATE:
        for part in ("weight", "bias"):
            fused = weights.take_optional(f"q_proj.{part}")
            if fused is not None:
                query, gate = _per_head(fused, 2 * head_dim).chunk(2, dim=1)
                state[f"W_query.{part}"] = query.flatten(0, 1)
                state[f"W_gate.{part}"] = gate.flatten(0, 1)
    else:
        weights.linear(state, "q_proj", "W_query")
    if cls != "Phi3Attention":
        for theirs, ours in (("k_proj", "W_key"), ("v_proj", "W_value")):
            if getattr(layer, ours, None) is not None:  # Gemma 4: none, or no W_value
                weights.linear(state, theirs, ours)
    weights.linear(state, "o_proj", "out_proj")
    for name in ("q_norm", "k_norm"):
        norm = getattr(layer, name, None)
        if norm is not None and getattr(norm, "weight", None) is not None:
            weight = weights.take(f"{name}.weight")
            state[f"{name}.weight"] = 1.0 + weight if cls in _ZERO_CENTRED_NORMS else weight
    if getattr(layer, "sinks", None) is not None:
        state["sinks"] = weights.take("sinks")
    if cls in _NEIGHBOUR_PAIRS and layer.rotary is not None:
        for name in ("W_query.weight", "W_query.bias", "W_key.weight", "W_key.bias"):
            if name in state:
                state[name] = _halves_from_neighbours(state[name], head_dim)
    return state


def _latent(module: nn.Module, layer: MultiHeadLatentAttention, weights: _Weights) -> dict:
    """The weights of DeepSeek's multi-head latent attention (and its lightning indexer)."""
    state: dict = {}
    if layer.q_lora_rank is None:
        weights.linear(state, "q_proj", "W_query")
    else:
        weights.linear(state, "q_a_proj", "W_dq")
        state["q_norm.weight"] = weights.take("q_a_layernorm.weight")
        weights.linear(state, "q_b_proj", "W_uq")
    rank, rope = layer.kv_lora_rank, layer.qk_rope_head_dim
    for part in ("weight", "bias"):  # W_dkv's rows, then W_kr's
        stacked = weights.take_optional(f"kv_a_proj_with_mqa.{part}")
        if stacked is not None:
            state[f"W_dkv.{part}"], state[f"W_kr.{part}"] = stacked.split([rank, rope])
    state["kv_norm.weight"] = weights.take("kv_a_layernorm.weight")
    per_head = weights.take("kv_b_proj.weight").view(layer.num_heads, -1, rank)
    keys, values = per_head.split([layer.qk_nope_head_dim, layer.v_head_dim], dim=1)
    state["W_uk.weight"], state["W_uv.weight"] = keys.flatten(0, 1), values.flatten(0, 1)
    weights.linear(state, "o_proj", "out_proj")
    if isinstance(layer, SparseLatentAttention):
        if getattr(module, "indexer", True) is None:
            raise ValueError(
                f"from_transformers: expected a layer that runs its own indexer, got a "
                f"{weights.owner} that reuses the previous layer's top-k (indexer_types "
                f"'shared'), a kind layer_for does not build"
            )
        pairs = (("wq_b", "W_query"), ("wk", "W_key"), ("weights_proj", "W_weights"))
        for theirs, ours in (*pairs, ("k_norm", "k_norm")):
            weights.linear(state, f"indexer.{theirs}", f"indexer.{ours}")
        if weights.owner == "GlmMoeDsaAttention":  # its indexer rotates neighbouring pairs
            indexer = layer.indexer
            names = ("W_query.weight", "W_key.weight", "k_norm.weight", "k_norm.bias")
            for name in (f"indexer.{name}" for name in names):
                state[name] = _rotary_part_in_halves(
                    state[name], indexer.head_dim, indexer.qk_rope_head_dim
                )
    return state


def _rotary_part_in_halves(weight: torch.Tensor, head_dim: int, rotary_dim: int) -> torch.Tensor:
    """Each head's first ``rotary_dim`` rows (the ones RoPE turns) reordered from
    neighbouring pairs to halves (:func:`_halves_from_neighbours`), the rest kept."""
    heads = _per_head(weight, head_dim)
    rotated, kept = heads.split([rotary_dim, head_dim - rotary_dim], dim=1)
    rotated = _per_head(_halves_from_neighbours(rotated.flatten(0, 1), rotary_dim), rotary_dim)
    return torch.cat((rotated, kept), dim=1).flatten(0, 1)


def _deltanet(module: nn.Module, layer: GatedDeltaNet, weights: _Weights) -> dict:
    """The weights of a Gated DeltaNet layer (Qwen3-Next's fused, or Qwen3.5's apart)."""
    state: dict = {}
    if weights.owner == "Qwen3NextGatedDeltaNet":
        # Key head by key head: its query, its key, then its value heads' values and
        # gates (in_proj_qkvz); its value heads' beta, then their decay (in_proj_ba)
        key_heads, dk = layer.num_key_heads, layer.key_head_dim
        group_width = layer.num_value_heads // key_heads * layer.value_head_dim
        qkvz = weights.take("in_proj_qkvz.weight").view(key_heads, -1, layer.d_in)
        parts = qkvz.split([dk, dk, group_width, group_width], dim=1)
        for name, part in zip(("W_query", "W_key", "W_value", "W_gate"), parts, strict=True):
            state[f"{name}.weight"] = part.flatten(0, 1)
        ba = weights.take("in_proj_ba.weight").view(key_heads, 2, -1, layer.d_in)
        state["W_beta.weight"], state["W_decay.weight"] = (
            ba[:, 0].flatten(0, 1),
            ba[:, 1].flatten(0, 1),
        )
    else:  # every query head, then every key head, then every value head
        key_width = layer.num_key_heads * layer.key_head_dim
        qkv = weights.take("in_proj_qkv.weight")
        value_width = qkv.shape[0] - 2 * key_width
        parts = qkv.split([key_width, key_width, value_width])
        for name, part in zip(("W_query", "W_key", "W_value"), parts, strict=True):
            state[f"{name}.weight"] = part
        for theirs, ours in (
            ("in_proj_z", "W_gate"),
            ("in_proj_b", "W_beta"),
            ("in_proj_a", "W_decay"),
        ):
            weights.linear(state, theirs, ours)
    state["conv.weight"] = weights.take("conv1d.weight")
    for name in ("dt_bias", "A_log", "norm.weight"):
        state[name] = weights.take(name)
    weights.linear(state, "out_proj", "out_proj")
    return state


def _mamba2(layer: Mamba2, weights: _Weights) -> dict:
    """The weights of a Mamba-2 mixer: the same names, the biases where it has them."""
    state: dict = {}
    for name in ("in_proj", "conv1d", "out_proj"):
        weights.linear(state, name, name)
    for name in ("dt_bias", "A_log", "D", "norm.weight"):
        state[name] = weights.take(name)
    return state


def _mamba2_layer_at(facts: ModelFacts, index: int, cls: str) -> Mamba2:
    """The Mamba-2 layer of layer ``index``: a Mamba layer's, or the mixer a Zamba2
    ``"hybrid"`` layer runs after its shared attention block (which layer_for does not
    build whole)."""
    kinds = facts.layer_types
    if not 0 <= index < len(kinds) or kinds[index] not in (MAMBA, HYBRID):
        kind = kinds[index] if 0 <= index < len(kinds) else "missing"
        raise ValueError(
            f"from_transformers: layer {index} of this {facts.config_class} model is a "
            f"{kind!r} layer, not one with a Mamba-2 mixer, but the module is a {cls}"
        )
    return mamba2_layer(facts, index, Sizes())


#: DeepseekV4Attention's names -> CompressedAttention's: the layer's own, then its
#: compressor's (``compressor.``), then the indexer's inside that compressor.
_DEEPSEEK_V4_LAYER = {
    "q_a_proj": "W_dq",
    "q_a_norm": "q_norm",
    "q_b_proj": "W_uq",
    "kv_proj": "W_kv",
    "kv_norm": "kv_norm",
    "o_a_proj": "W_out_groups",
    "o_b_proj": "W_out",
}
_DEEPSEEK_V4_COMPRESSOR = {"kv_proj": "W_kv", "gate_proj": "W_gate", "kv_norm": "kv_norm"}
_DEEPSEEK_V4_INDEXER = {"q_b_proj": "W_query", "scorer.weights_proj": "W_weights"}


def _compressed(layer: CompressedAttention, weights: _Weights) -> dict:
    """The weights of DeepSeek-V4's attention: the layer's, its compressor's and indexer's."""
    state: dict = {"sinks": weights.take("sinks")}
    places = [("", "", _DEEPSEEK_V4_LAYER)]
    if layer.compressor is not None:
        places.append(("compressor.", "compressor.", _DEEPSEEK_V4_COMPRESSOR))
        state["compressor.position_bias"] = weights.take("compressor.position_bias")
    if layer.indexer is not None:
        places.append(("compressor.indexer.", "indexer.compressor.", _DEEPSEEK_V4_COMPRESSOR))
        places.append(("compressor.indexer.", "indexer.", _DEEPSEEK_V4_INDEXER))
        bias = weights.take("compressor.indexer.position_bias")
        state["indexer.compressor.position_bias"] = bias
    for theirs, ours, names in places:
        for their_name, our_name in names.items():
            weights.linear(state, theirs + their_name, ours + our_name)
    return state


def _copied(module: nn.Module, layer: nn.Module, weights: _Weights) -> dict:
    """The state of ``layer`` from ``module``'s weights, by the layer's kind."""
    if isinstance(layer, CompressedAttention):
        return _compressed(layer, weights)
    if isinstance(layer, GroupedQueryAttention | SharedKVAttention | CrossAttention):
        return _grouped(module, layer, weights)
    if isinstance(layer, MultiHeadLatentAttention):  # SparseLatentAttention included
        return _latent(module, layer, weights)
    if isinstance(layer, Mamba2):
        return _mamba2(layer, weights)
    assert isinstance(layer, GatedDeltaNet), f"from_transformers: no copy for {layer!r}"
    return _deltanet(module, layer, weights)


def _expected_layer(cls: str) -> tuple[type, ...]:
    """The package's layer (classes) for the ``transformers`` attention class ``cls``."""
    if cls.endswith("GatedDeltaNet"):
        return (GatedDeltaNet,)
    if cls in MAMBA2_CLASSES.values():
        return (Mamba2,)
    if cls == "MllamaTextCrossAttention":
        return (CrossAttention,)
    if cls == "DeepseekV3Attention":
        return (MultiHeadLatentAttention,)
    if cls in ("DeepseekV32Attention", "GlmMoeDsaAttention"):
        return (SparseLatentAttention,)
    if cls == "DeepseekV4Attention":
        return (CompressedAttention,)
    return (GroupedQueryAttention, SharedKVAttention)


def from_transformers(module: nn.Module, *, config: object = None) -> nn.Module:
    """The package's layer for a ``transformers`` attention module, holding its weights.

    The layer is the one :func:`~attention.models.layer_for` builds from the facts of
    the module's config (:func:`~attention.models.facts_from_config`) at the module's
    layer index, at the model's own sizes; the module's weights are copied into it,
    in the module's dtype and on its device. Given the same hidden states and
    positions, the two compute the same output (``tests/test_models_weights.py``
    checks every layer kind in float64 to 1e-10).

    Parameters
    ----------
    module : torch.nn.Module
        The attention of one layer of a model ``transformers`` built, from a config or
        a checkpoint: ``model.model.layers[i].self_attn`` (or ``.linear_attn``,
        Qwen3-Next's Gated DeltaNet layers; ``.cross_attn``, Llama 3.2 Vision's image
        layers; ``.mixer``, the Mamba-2 layers of Mamba-2 and the hybrids). One of
        :data:`.TRANSFORMERS_CLASSES` or :data:`.MAMBA2_CLASSES`.
    config : transformers.PretrainedConfig, optional
        The model's config, for a module that keeps none (Qwen3-Next's
        ``Qwen3NextGatedDeltaNet``, ``Mamba2Mixer``): ``model.config``. By default
        ``module.config``.

    Returns
    -------
    torch.nn.Module
        A :class:`~attention.GroupedQueryAttention` (or the layer ``layer_for`` builds
        for that kind: a :class:`~attention.NoPEWithTemperature`,
        :class:`~attention.SharedKVAttention`, :class:`~attention.CrossAttention`,
        :class:`~attention.MultiHeadLatentAttention`,
        :class:`~attention.SparseLatentAttention`, :class:`~attention.CompressedAttention`,
        :class:`~attention.GatedDeltaNet` or :class:`~attention.Mamba2`),
        in the module's training mode. It maps hidden states
        ``(batch, tokens, hidden_size)`` to ``(batch, tokens, hidden_size)``, as the
        module does.

    Raises
    ------
    TypeError
        If ``module`` is not a ``torch.nn.Module``.
    ValueError
        If ``module`` is not the attention of a model ``layer_for`` builds, or has no
        config (and none is given) or no layer index; if a weight of the module has no
        place in the package's layer, or a place in it finds no weight.

    Examples
    --------
    >>> import torch
    >>> from transformers import AutoModelForCausalLM, MistralConfig
    >>> config = MistralConfig(hidden_size=16, num_attention_heads=4,
    ...                        num_key_value_heads=2, head_dim=4, num_hidden_layers=2,
    ...                        intermediate_size=32, vocab_size=32, sliding_window=3)
    >>> model = AutoModelForCausalLM.from_config(config)
    >>> layer = from_transformers(model.model.layers[1].self_attn)
    >>> layer.window, layer.num_kv_heads, layer.rotary.base
    (3, 2, 10000.0)
    >>> from_transformers(model.model.layers[1].mlp)
    Traceback (most recent call last):
        ...
    ValueError: from_transformers: expected the attention module of a model layer_for
    builds (model.model.layers[i].self_attn: LlamaAttention, MistralAttention, ...), got a
    MistralMLP
    """
    owner = "from_transformers"
    if not isinstance(module, nn.Module):
        raise TypeError(
            f"{owner}: module must be a torch.nn.Module, a transformers attention module, "
            f"got {type(module).__name__}"
        )
    cls = type(module).__name__
    families = [name for name, classes in TRANSFORMERS_CLASSES.items() if cls in classes]
    families += [name for name, mixer in MAMBA2_CLASSES.items() if cls == mixer]
    if not families:
        known = [c for classes in TRANSFORMERS_CLASSES.values() for c in classes]
        raise ValueError(
            f"{owner}: expected the attention module of a model layer_for builds "
            f"(model.model.layers[i].self_attn: {', '.join(known[:2])}, ...), got a {cls}"
        )
    config = getattr(module, "config", None) if config is None else config
    if config is None:
        raise ValueError(
            f"{owner}: expected a module that keeps its model's config, or config=; "
            f"{cls} keeps none: give config=model.config"
        )
    layer_index = getattr(module, "layer_idx", None)
    if layer_index is None:
        raise ValueError(
            f"{owner}: expected a module that knows its layer index (layer_idx), "
            f"got a {cls} with layer_idx=None"
        )
    facts = facts_from_config(config)
    if facts.config_class not in families:
        raise ValueError(
            f"{owner}: a {cls} is the attention of a model with a {families[0]}, "
            f"got a config of class {facts.config_class}"
        )
    index = _checks.whole_number(owner, layer_index, "layer_idx must be an integer")
    layer: nn.Module
    if cls in MAMBA2_CLASSES.values():
        layer = _mamba2_layer_at(facts, index, cls)
        # The clamp of the step is the module's own: Nemotron-H's mixer took it from
        # time_step_min up to transformers 5.23, and from time_step_limit since 5.24.
        low, high = getattr(module, "time_step_limit", layer.time_step_limit)
        layer.time_step_limit = (float(low), float(high))
    else:
        layer = layer_for(facts, index)
    expected = _expected_layer(cls)
    if not isinstance(layer, expected):
        raise ValueError(
            f"{owner}: layer {index} of this {facts.config_class} model is a "
            f"{facts.layer_types[index]!r} layer, which layer_for builds as a "
            f"{type(layer).__name__}, but the module is a {cls}"
        )
    weights = _Weights(module)
    state = _copied(module, layer, weights)
    if weights.left:
        raise ValueError(
            f"{owner}: expected every weight of the {cls} to have a place in the "
            f"package's {type(layer).__name__}, got {sorted(weights.left)} left over"
        )
    ours = layer.state_dict()
    missing = sorted(set(ours) - set(state))
    if missing:
        raise ValueError(
            f"{owner}: expected the {cls} to give every weight of the package's "
            f"{type(layer).__name__}, got none for {missing}"
        )
    for name, tensor in state.items():
        if tensor.shape != ours[name].shape:
            raise ValueError(
                f"{owner}: expected {name} of shape {tuple(ours[name].shape)} for "
                f"layer {index} as its config describes it, got {tuple(tensor.shape)} "
                f"from the {cls}"
            )
    reference = next(iter(state.values()))
    layer = layer.to(device=reference.device, dtype=reference.dtype)
    layer.load_state_dict(state, strict=True)
    return layer.train(module.training)
