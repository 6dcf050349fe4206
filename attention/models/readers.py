"""Config readers: any model's attention facts from its ``transformers`` config.

:func:`.facts_from_config` reads a ``transformers`` config, a ``config.json`` as a
dict, or a path to one, and gives the :class:`~attention.models.ModelFacts` the
table would hold for it; nothing is downloaded. Each model type has a reader,
registered by its ``model_type``; most share ``_basics`` and the RoPE reader.

>>> from attention.models import facts_from_config, kv_cache_bytes_per_token
>>> facts = facts_from_config({"model_type": "mistral", "num_hidden_layers": 2,
...     "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
...     "sliding_window": 16})
>>> facts.layer_types, kv_cache_bytes_per_token(facts)  # 2 layers * 2 * 2 heads * 16 * 2 bytes
(('sliding_attention', 'sliding_attention'), 256)
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attention import _checks
from attention.models.facts import (
    CHUNKED,
    CONV,
    CSA,
    FULL,
    HCA,
    HYBRID,
    INDEXED,
    LINEAR,
    MAMBA,
    NO_MIXER,
    SLIDING,
    Chunked,
    Compressed,
    Cross,
    GlobalLayers,
    Indexer,
    Latent,
    LayerParts,
    LinearAttention,
    Mamba,
    ModelFacts,
    Rope,
    Scores,
    ShortConv,
    Sliding,
    TemperatureTuning,
)

if TYPE_CHECKING:
    from transformers import PreTrainedConfig

__all__ = [
    "LOADED_AS",
    "as_config",
    "facts_from_config",
    "facts_from_config_object",
    "read_model_types",
]

# Each model type's reader, by transformers' model_type. The config class of each is
# the one transformers registers for it; the attention is its modeling file's.
_READERS: dict = {}


def _reader(*model_types: str):
    def register(function):
        for model_type in model_types:
            _READERS[model_type] = function
        return function

    return register


def read_model_types() -> tuple[str, ...]:
    """The model types :func:`facts_from_config` reads, sorted: one reader each.

    >>> "llama" in read_model_types()
    True
    """
    return tuple(sorted(_READERS))


# -- reading a config ------------------------------------------------------------------


#: Model types a released file names that ``transformers`` may not know, and the type
#: whose code runs the model: Kimi K2 writes ``"model_type": "kimi_k2"`` in its
#: config.json, for inference engines to tell it apart, and its ``architectures`` is
#: ``DeepseekV3ForCausalLM`` (its README: change the type to ``deepseek_v3`` where a
#: framework does not know ``kimi_k2``).
LOADED_AS = {"kimi_k2": "deepseek_v3"}


def as_config(config: object) -> PreTrainedConfig:
    """A ``transformers`` config (its text model's) from a config object, a
    ``config.json`` dict or a path to one (or to its folder).

    >>> as_config({"model_type": "gpt2", "n_layer": 2}).num_hidden_layers
    2
    """
    return _whole_config(config).get_text_config(decoder=True)


def _whole_config(config: object) -> PreTrainedConfig:
    """The whole ``transformers`` config, multimodal or encoder-decoder, that
    :func:`as_config` takes its text model's from; refused types refused."""
    import transformers
    from huggingface_hub.errors import StrictDataclassError

    owner = "facts_from_config"
    if isinstance(config, str | Path):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise ValueError(f"{owner}: expected a config.json file, got {str(config)!r}")
        config = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(config, dict):
        if "model_type" not in config:
            raise ValueError(f"{owner}: expected the config to name its model_type, got none")
        fields = {key: value for key, value in config.items() if key != "model_type"}
        model_type = named = config["model_type"]
        _refuse_untaught(model_type)
        if model_type in LOADED_AS and model_type not in transformers.CONFIG_MAPPING:
            model_type = LOADED_AS[model_type]
        try:
            config = transformers.AutoConfig.for_model(model_type, **fields)
        except ValueError as error:
            raise ValueError(
                f"{owner}: expected a model_type this transformers knows, got {named!r} ({error})"
            ) from None
        except (KeyError, AttributeError, StrictDataclassError) as error:
            # Fields the class cannot build from: Phi-3's old rope_scaling of type
            # "yarn", which it renames longrope and then finds without its factors;
            # rope_scaling given to BLOOM, which has no RoPE and no context to scale;
            # a field of the wrong type, which the class's strict checks refuse.
            raise ValueError(
                f"{owner}: expected a {named} config that transformers can build, got "
                f"fields it fails on ({type(error).__name__}: {error})"
            ) from None
    if not isinstance(config, transformers.PretrainedConfig):
        raise TypeError(
            f"{owner}: expected a transformers config, a dict or a path, got "
            f"{type(config).__name__}"
        )
    _refuse_untaught(config.model_type)
    return config


def _refuse_untaught(model_type: str) -> None:
    """Refuse a model type whose token mixer the site does not teach (``REFUSED``), by
    the type a config names, before its text model's config is taken."""
    if model_type in REFUSED:
        raise ValueError(
            f"facts_from_config: expected a model type whose attention the site teaches, "
            f"got model_type={model_type!r}: {REFUSED[model_type]}"
        )


def _unsupported(model_type: str, field: str, value: object, why: str):
    return ValueError(
        f"facts_from_config: expected a {model_type} config the atlas can interpret, got "
        f"{field}={value!r}: {why}"
    )


def facts_from_config(
    config: object,
    *,
    name: str | None = None,
    checkpoint: str = "",
    year: int = 0,
    trained_context: int | None = None,
) -> ModelFacts:
    """The :class:`~attention.models.ModelFacts` of a model, from its config.

    Parameters
    ----------
    config : transformers.PretrainedConfig, dict, str or Path
        A config object, a ``config.json`` read as a dict (with its ``model_type``),
        or the path of one (or of the folder holding it). A multimodal config gives
        its text model's facts. Nothing is downloaded; ``transformers`` reads the
        fields, with its config class's defaults for those the file leaves out.
    name, checkpoint, year : str, str, int
        What the table would say about the model; a reader's own config needs none
        (the name defaults to the model type).
    trained_context : int, optional
        The context the model was trained with, which a config does not hold; by
        default its ``max_position_embeddings``; ``None`` where the config sets no
        position limit (BLOOM's, whose ALiBi needs none) and none is given.

    Returns
    -------
    ModelFacts
        ``source`` and ``context_source`` say the facts come from a config;
        ``trained_context`` is ``max_position_embeddings`` unless given, which a
        config cannot tell apart (``context_claim`` ``"configured"``; ``"trained"``
        when given).

    Raises
    ------
    ValueError
        For a model type the atlas does not read, or a field of it whose value it
        cannot interpret (a layer kind it does not know, say), naming both.

    Examples
    --------
    >>> from attention import MODELS
    >>> from attention.models import facts_from_config
    >>> facts = facts_from_config({"model_type": "gpt_oss", "num_hidden_layers": 4})
    >>> facts.local, facts.scores
    (Sliding(window=128, global_every=2), Scores(sinks=True))
    """
    return facts_from_config_object(
        as_config(config),
        name=name,
        checkpoint=checkpoint,
        year=year,
        trained_context=trained_context,
    )


def facts_from_config_object(
    config: Any,
    *,
    name: str | None = None,
    checkpoint: str = "",
    year: int = 0,
    trained_context: int | None = None,
) -> ModelFacts:
    """The :class:`~attention.models.ModelFacts` of a config object, read as it is.

    :func:`facts_from_config` without ``transformers``: the model type's reader reads
    the object's attributes, and nothing fills a field the object lacks. The object is
    a text model's ``transformers`` config (what :func:`as_config` returns), or any
    object with the same attributes, whose class, a dataclass as ``transformers``' are,
    declares the fields the reader asks about (the site's calculator builds one in the
    browser from a ``config.json`` and its config class's exported defaults). The
    keywords are :func:`facts_from_config`'s.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class BertConfig:  # the fields a BERT config declares that the reader reads
    ...     num_hidden_layers: int
    ...     hidden_size: int
    ...     num_attention_heads: int
    ...     max_position_embeddings: int
    ...     is_decoder: bool = False
    ...     model_type: str = "bert"
    ...     attribute_map = {}
    >>> facts = facts_from_config_object(BertConfig(2, 64, 4, 512))
    >>> facts.layers, facts.bidirectional, facts.config_class
    (2, True, 'BertConfig')
    """
    model_type = getattr(config, "model_type", None)
    if not isinstance(model_type, str):
        raise TypeError(
            f"facts_from_config: expected a config with a str model_type, got "
            f"{type(model_type).__name__}"
        )
    reader = _READERS.get(model_type)
    if reader is None:
        raise ValueError(
            f"facts_from_config: expected one of the model types the atlas reads "
            f"({', '.join(sorted(_READERS))}), got model_type={model_type!r}"
        )
    fields = reader(config)
    # A bias on the four projections and the RMS norms' epsilon, as the config gives them
    fields.setdefault("attention_bias", bool(_declared(config, "attention_bias", False)))
    fields.setdefault("rms_norm_eps", _declared(config, "rms_norm_eps"))
    if "max_position_embeddings" not in fields:
        fields["max_position_embeddings"] = config.max_position_embeddings
    context_source = "the config's max_position_embeddings"
    if trained_context is not None:
        fields["trained_context"] = _checks.positive_int(
            "facts_from_config", "trained_context", trained_context
        )
        context_source = "given"
    elif fields["max_position_embeddings"] is None:  # a bill needs none; a card does
        fields["trained_context"] = None
        context_source = "none: the config sets no position limit, and none was given"
    else:
        fields["trained_context"] = fields["max_position_embeddings"]
        fields["context_claim"] = "configured"  # the config's limit, not a length trained
    return ModelFacts(
        name=name or model_type,
        checkpoint=checkpoint,
        year=year,
        source=f"a {type(config).__name__} (model_type {model_type!r})",
        config_class=type(config).__name__,
        context_source=context_source,
        **fields,
    )


def _get(config, field: str, default=None):
    value = getattr(config, field, None)
    return default if value is None else value


def _declares(config, field: str) -> bool:
    """Whether the config's class declares ``field`` (or maps it onto one of its own).
    A field a ``config.json`` carries that its class does not declare is kept as an
    attribute, but the model's code never reads it: GPT-2's ``num_key_value_heads``."""
    names = {each.name for each in dataclasses.fields(type(config))}
    computed = isinstance(getattr(type(config), field, None), property)  # Jamba's layer_types
    return field in names or field in type(config).attribute_map or computed


def _declared(config, field: str, default=None):
    """``field`` where the config's class declares it and it is set, else ``default``."""
    return _get(config, field, default) if _declares(config, field) else default


#: Model types whose config class does not declare ``head_dim`` but whose attention
#: reads it from the file all the same (``getattr(config, "head_dim", hidden_size //
#: num_attention_heads)`` in Qwen3MoeAttention, Glm4MoeAttention, Exaone4Attention,
#: Apertus1p5TextAttention):
#: Qwen3-30B-A3B's heads are 128 wide, not 2,048 / 32, and GLM-4.6's 5,120 does not
#: divide into its 96 heads at all.
_HEAD_DIM_UNDECLARED = frozenset({"qwen3_moe", "glm4_moe", "exaone4", "apertus1p5_text"})


def _basics(config) -> dict:
    heads = config.num_attention_heads
    fields = {
        "layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "num_heads": heads,
        "num_kv_heads": _declared(config, "num_key_value_heads", heads),
    }
    head_dim = _declared(config, "head_dim")
    if config.model_type in _HEAD_DIM_UNDECLARED:
        head_dim = _get(config, "head_dim", None)
    if head_dim is not None and head_dim != config.hidden_size // heads:
        fields["head_dim"] = head_dim
    return fields


def _with_mamba(config, mamba: Mamba, kinds, **more) -> dict:
    """A model with Mamba mixers: its ``_basics``, ``more``, ``mamba`` and the layers' kinds."""
    return _basics(config) | more | {"mamba": mamba, "layer_pattern": tuple(kinds)}


ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional")


def _rope_from(parameters: dict, model_type: str) -> tuple[float, dict | None, float]:
    """(theta, scaling, partial_rotary_factor) from one ``rope_parameters`` dict."""
    rope_type = parameters.get("rope_type", "default")
    if rope_type not in ROPE_TYPES:
        raise _unsupported(
            model_type,
            "rope_parameters.rope_type",
            rope_type,
            f"not a RoPE the chapters teach ({', '.join(ROPE_TYPES)})",
        )
    if "rope_theta" not in parameters:
        # Gemma 4, Mellum and MiMo-V2-Flash convert no old rope_scaling: their class
        # stores it as rope_parameters as it is, with no base, which their RoPE needs.
        raise _unsupported(
            model_type,
            "rope_parameters",
            parameters,
            "no rope_theta, RoPE's base (this config class takes rope_parameters with a "
            "rope_theta, and does not convert an old rope_scaling into them)",
        )
    partial = float(parameters.get("partial_rotary_factor") or 1.0)
    if rope_type == "default":
        return parameters["rope_theta"], None, partial
    scaling = {key: value for key, value in parameters.items() if key != "rope_theta"}
    if scaling.get("type") == rope_type:  # the old name transformers keeps beside rope_type
        del scaling["type"]
    if rope_type == "proportional":  # Gemma 4 keeps its own partial factor in the scaling
        return parameters["rope_theta"], scaling, 1.0
    scaling.pop("partial_rotary_factor", None)
    return parameters["rope_theta"], scaling, partial


def _rope(config, nope_every: int | None = None) -> Rope:
    """The config's RoPE: one ``rope_parameters`` dict, or one per layer type."""
    parameters = config.rope_parameters
    local_theta = None
    if FULL in parameters or SLIDING in parameters:  # one dict per layer type
        full = parameters.get(FULL) or parameters[SLIDING]
        local = parameters.get(SLIDING)
        # The sliding layers' own RoPE: another base (Gemma 3), or the same base left
        # unscaled where the full layers scale it (OLMo 3: Olmo3Config puts the
        # released rope_scaling into the full layers' parameters only).
        plain = local is not None and local.get("rope_type", "default") == "default"
        scaled = full.get("rope_type", "default") != "default"
        if local is not None and (local["rope_theta"] != full["rope_theta"] or (plain and scaled)):
            local_theta = local["rope_theta"]
        parameters = full
    theta, scaling, partial = _rope_from(parameters, config.model_type)
    return Rope(
        theta=theta,
        scaling=scaling,
        local_theta=local_theta,
        partial_rotary_factor=partial,
        nope_every=nope_every,
    )


def _layer_types(config) -> list[str]:
    """Each layer's kind as transformers' cache reads it (``get_layer_types_and_kwargs``):
    ``layer_types``, else a window or a chunk size for every layer, else full."""
    kinds = _declared(config, "layer_types")
    if kinds is not None:
        return list(kinds)
    if _declared(config, "sliding_window") is not None:
        return [SLIDING] * config.num_hidden_layers
    if _declared(config, "attention_chunk_size") is not None:
        return [CHUNKED] * config.num_hidden_layers
    return [FULL] * config.num_hidden_layers


def _where_full(kinds: list[str], full: str = FULL) -> dict:
    """``global_every`` where the full layers recur every so many layers, else the list
    of them (``full_attention_layers``); neither if there are none."""
    where = tuple(i for i, kind in enumerate(kinds) if kind == full)
    if not where:
        return {}
    every = where[0] + 1
    if where == tuple(range(every - 1, len(kinds), every)):
        return {"global_every": every}
    return {"full_attention_layers": where}


def _only(model_type: str, kinds: list[str], allowed: Iterable[str], why: str) -> None:
    """Refuse a model with a layer kind not ``allowed`` (its reader's ``why``)."""
    unknown = sorted(set(kinds) - set(allowed))
    if unknown:
        raise _unsupported(model_type, "layer_types", unknown[0], why)


def _no_window(config, model_type: str, why: str) -> None:
    """Refuse a ``sliding_window`` that the reader does not read (its ``why``)."""
    if _declared(config, "sliding_window") is not None:
        raise _unsupported(model_type, "sliding_window", config.sliding_window, why)


def _local(config, kinds: list[str], allowed: tuple[str, ...] = (FULL, SLIDING)) -> dict:
    """The ``local`` group of a model of full and sliding (or chunked) layers."""
    why = f"a layer kind the atlas does not read for this model type ({', '.join(allowed)})"
    _only(config.model_type, kinds, allowed, why)
    if SLIDING in kinds:
        return {"local": Sliding(window=config.sliding_window, **_where_full(kinds))}
    if CHUNKED in kinds:
        return {"local": Chunked(size=config.attention_chunk_size, **_where_full(kinds))}
    return {}


def _nope_every(config) -> int | None:
    """Llama 4 and SmolLM3's NoPE layers, from ``no_rope_layers`` (1: RoPE, 0: none)."""
    flags = _declared(config, "no_rope_layers")
    if flags is None or all(flags):
        return None
    every = list(flags).index(0) + 1
    if [bool(f) for f in flags] != [(i + 1) % every != 0 for i in range(len(flags))]:
        raise _unsupported(
            config.model_type,
            "no_rope_layers",
            list(flags),
            "NoPE layers that do not recur every so many layers",
        )
    return every


@_reader(
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "olmo2",
    "olmo3",
    "smollm3",
    "cohere2",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gpt_oss",
    "minimax",
    "minimax_m2",
    "phi3",
)
def _read_attention(config) -> dict:
    """Models of full and sliding layers, with their score and layer parts."""
    model_type = config.model_type
    kinds = _layer_types(config)
    fields = _basics(config)
    if model_type == "minimax":
        fields |= _read_minimax(config, kinds)
    else:
        fields |= _local(config, kinds)
    nope_every = _cohere2_nope_every(kinds) if model_type == "cohere2" else _nope_every(config)
    if nope_every != 1:
        fields["rope"] = _rope(config, nope_every)
    scores = {}
    if model_type in ("gemma2", "gemma3_text"):
        scores["query_pre_attn_scalar"] = config.query_pre_attn_scalar
    if _declared(config, "attn_logit_softcapping") is not None:
        scores["softcap"] = config.attn_logit_softcapping
    if model_type == "gpt_oss":  # GptOssAttention always holds its sinks
        scores["sinks"] = True
    if scores:
        fields["scores"] = Scores(**scores)
    qk_norm = {
        "qwen3": "head",
        "qwen3_moe": "head",
        "gemma3_text": "head",
        "olmo2": "projection",
        "olmo3": "projection",
        "minimax_m2": "projection",  # MiniMaxM2Attention: q_norm over heads * head_dim
    }.get(model_type)
    if qk_norm:
        fields["parts"] = LayerParts(qk_norm=qk_norm)
    if _declared(config, "final_logit_softcapping") is not None:
        fields["final_logit_softcapping"] = config.final_logit_softcapping
    return fields


def _cohere2_nope_every(kinds: list[str], model_type: str = "cohere2") -> int | None:
    """Cohere 2 (Command R7B, Command A) rotates queries and keys in its sliding layers
    only (``Cohere2Attention``: ``if self.sliding_window is not None``): its full layers
    are NoPE layers; so does Kolibri 1 when it has a window. ``None``: none is full; 1:
    all are (no RoPE anywhere)."""
    where = _where_full(kinds)
    if not where:
        return None
    if "global_every" not in where:
        raise _unsupported(
            model_type,
            "layer_types",
            kinds,
            "full (NoPE) layers that do not recur every so many layers",
        )
    return where["global_every"]


def _read_minimax(config, kinds: list[str]) -> dict:
    """MiniMax-01: lightning attention (linear, a state of heads * head_dim**2 numbers
    per layer, no convolution) and full softmax attention. ``MiniMaxCache`` keeps
    every token of the full layers, whatever ``sliding_window`` says."""
    _no_window(config, "minimax", "MiniMaxCache ignores it, so its bill is unclear")
    _only("minimax", kinds, (FULL, LINEAR), "not linear or full")
    head_dim = _get(config, "head_dim", config.hidden_size // config.num_attention_heads)
    heads = config.num_attention_heads
    mixer = LinearAttention(
        mixer="Lightning Attention",
        num_key_heads=heads,
        num_value_heads=heads,
        key_head_dim=head_dim,
        value_head_dim=head_dim,
        conv_kernel_dim=None,
        **_where_full(kinds),
    )
    return {"local": mixer}


@_reader("gemma4_text", "gemma4_unified_text")
def _read_gemma4(config) -> dict:
    """Gemma 4: sliding and full layers; the full ones with their own head size (and,
    with ``attention_k_eq_v``, their own key/value heads); shared key/value layers."""
    kinds = _layer_types(config)
    layers = config.per_layer_config  # head_dim may differ layer by layer
    local_layer = layers[kinds.index(SLIDING)] if SLIDING in kinds else layers[0]
    fields = {
        "layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "num_heads": config.num_attention_heads,
        "num_kv_heads": local_layer.num_key_value_heads,
        "head_dim": local_layer.head_dim,
    }
    fields |= _local(config, kinds)
    fields["rope"] = _rope(config)
    full = [i for i, kind in enumerate(kinds) if kind == FULL]
    if full:
        layer = layers[full[0]]
        head_dim = layer.head_dim if layer.head_dim != local_layer.head_dim else None
        k_eq_v = bool(config.attention_k_eq_v)
        kv_heads = layer.num_key_value_heads if k_eq_v else None
        if head_dim or k_eq_v:
            fields["global_layers"] = GlobalLayers(
                head_dim=head_dim, num_kv_heads=kv_heads, k_eq_v=k_eq_v
            )
    fields["num_kv_shared_layers"] = config.num_kv_shared_layers or 0
    fields["parts"] = LayerParts(qk_norm="head", value_norm=True)
    fields["scores"] = Scores(scale=1.0)  # Gemma4TextAttention: self.scaling = 1.0
    if config.final_logit_softcapping is not None:
        fields["final_logit_softcapping"] = config.final_logit_softcapping
    return fields


@_reader("gemma3n_text")
def _read_gemma3n(config) -> dict:
    """Gemma 3n: sliding and full layers, QK-norm per head and a value norm, scores
    left unscaled (``Gemma3nTextAttention``: ``self.scaling = 1.0``), and the last
    ``num_kv_shared_layers`` reusing earlier layers' keys and values."""
    kinds = _layer_types(config)
    fields = _basics(config) | _local(config, kinds) | {"rope": _rope(config)}
    fields["num_kv_shared_layers"] = config.num_kv_shared_layers or 0
    fields["parts"] = LayerParts(qk_norm="head", value_norm=True)
    fields["scores"] = Scores(scale=1.0)
    if config.final_logit_softcapping is not None:
        fields["final_logit_softcapping"] = config.final_logit_softcapping
    return fields


@_reader("llama4_text")
def _read_llama4(config) -> dict:
    kinds = _layer_types(config)
    fields = _basics(config) | _local(config, kinds, (FULL, CHUNKED))
    fields["rope"] = _rope(config, _nope_every(config))
    if config.use_qk_norm:
        fields["parts"] = LayerParts(qk_norm="l2")
    if config.attn_temperature_tuning:
        fields["temperature_tuning"] = TemperatureTuning(
            floor_scale=config.floor_scale, attn_scale=config.attn_scale
        )
    return fields


@_reader("modernbert")
def _read_modernbert(config) -> dict:
    """ModernBERT: an encoder, global layers among local ones that see ``sliding_window``
    positions on each side (``local_attention // 2``), RoPE of one base in each kind."""
    kinds = _layer_types(config)
    return _basics(config) | _local(config, kinds) | {"rope": _rope(config), "bidirectional": True}


@_reader("whisper")
def _read_whisper(config) -> dict:
    """Whisper: the decoder, which cross-attends in every layer to the encoder's output.

    ``get_text_config(decoder=True)`` moved the decoder's layers and heads under the
    generic names (``num_hidden_layers``, ``num_attention_heads``)."""
    heads = config.num_attention_heads
    return {
        "layers": config.num_hidden_layers,
        "hidden_size": config.d_model,
        "num_heads": heads,
        "num_kv_heads": heads,
        "max_position_embeddings": config.max_target_positions,
        "learned_positions": True,
        "cross": Cross(context_tokens=config.max_source_positions),
    }


@_reader("mllama_text_model")
def _read_mllama(config) -> dict:
    """Llama 3.2 Vision's text model: Llama's layers, some replaced by cross-attention
    to the image (``cross_attention_layers``)."""
    layers = tuple(config.cross_attention_layers)  # MllamaTextCrossAttention: QK-norm
    cross = Cross(layers=layers, qk_norm="head")
    return _basics(config) | {"rope": _rope(config), "cross": cross}


def _latent(config) -> Latent:
    return Latent(
        kv_lora_rank=config.kv_lora_rank,
        q_lora_rank=_declared(config, "q_lora_rank"),  # BailingHybrid has none: a full q_proj
        qk_nope_head_dim=config.qk_nope_head_dim,
        qk_rope_head_dim=config.qk_rope_head_dim,
        v_head_dim=config.v_head_dim,
    )


@_reader("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "axk1", "axk2")
def _read_mla(config) -> dict:
    """DeepSeek's multi-head latent attention (A.X K1's too); V3.2, GLM-5 and A.X K2 add
    the indexer, and A.X K2 a sigmoid gate on the output (``AXK2Attention``:
    ``attn_output * torch.sigmoid(gate_states)``)."""
    fields = _basics(config)
    fields.pop("head_dim", None)  # the config's head_dim is the rotary part's
    fields |= {"rope": _rope(config), "latent": _latent(config)}
    # GLM-5.2's indexer_types mark "shared" layers, which run no indexer and reuse an
    # earlier layer's top-k (GlmMoeDsaAttention.skip_topk): hy_v4's mechanism, refused.
    shared = [kind for kind in _declared(config, "indexer_types", []) if kind != "full"]
    if shared:
        raise _unsupported(
            config.model_type,
            "indexer_types",
            shared[0],
            "a layer that reuses an earlier layer's top-k selection (cross-layer top-k "
            "sharing), which the atlas does not read",
        )
    if config.model_type not in ("deepseek_v3", "axk1"):
        fields["indexer"] = Indexer(
            num_heads=config.index_n_heads, head_dim=config.index_head_dim, top_k=config.index_topk
        )
    if config.model_type == "axk2":
        fields["parts"] = LayerParts(output_gate=True)
    return fields


def _linear_layers(
    config, mixer: str, heads: tuple[int, int], head_dims: tuple[int, int]
) -> LinearAttention:
    """The ``local`` group of a model of linear-attention and full layers (Part IV).

    ``heads`` and ``head_dims`` are the (query/)key heads' and the value heads'.
    """
    kinds = _layer_types(config)
    _only(config.model_type, kinds, (FULL, LINEAR), "not linear or full")
    return LinearAttention(
        mixer=mixer,
        num_key_heads=heads[0],
        num_value_heads=heads[1],
        key_head_dim=head_dims[0],
        value_head_dim=head_dims[1],
        conv_kernel_dim=config.linear_conv_kernel_dim,
        **_where_full(kinds),
    )


@_reader("kimi_linear")
def _read_kimi(config) -> dict:
    """Kimi Linear: Kimi Delta Attention layers and NoPE latent-attention layers."""
    heads, head_dim = config.linear_num_heads, config.linear_head_dim  # keys' and values'
    local = _linear_layers(config, "Kimi Delta Attention", (heads, heads), (head_dim, head_dim))
    fields = _basics(config)
    fields.pop("head_dim", None)
    return fields | {"latent": _latent(config), "local": local}


@_reader("bailing_hybrid")
def _read_bailing_hybrid(config) -> dict:
    """Ling 3.0 (BailingHybrid): Kimi Delta Attention layers, and latent-attention layers
    with RoPE and an output gate per head (``BailingHybridAttention``: ``attn_output *
    sigmoid(g_proj(x)).unsqueeze(-1)``)."""
    heads, head_dim = config.linear_num_heads, config.linear_head_dim  # keys' and values'
    local = _linear_layers(config, "Kimi Delta Attention", (heads, heads), (head_dim, head_dim))
    fields = _basics(config)
    fields.pop("head_dim", None)  # the config's head_dim is the rotary part's
    fields |= {"rope": _rope(config), "latent": _latent(config), "local": local}
    return fields | {"parts": LayerParts(head_gate=True)}


@_reader("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
def _read_gated_deltanet(config) -> dict:
    """Qwen3-Next and Qwen3.5: Gated DeltaNet layers and gated full-attention layers."""
    heads = config.linear_num_key_heads, config.linear_num_value_heads
    head_dims = config.linear_key_head_dim, config.linear_value_head_dim
    local = _linear_layers(config, "Gated DeltaNet", heads, head_dims)
    fields = _basics(config) | {"rope": _rope(config), "local": local}
    return fields | {"parts": LayerParts(qk_norm="head", output_gate=True)}


@_reader("jamba")
def _read_jamba(config) -> dict:
    """Jamba: Mamba layers with an attention layer every ``attn_layer_period``; no
    position encoding at all (``JambaAttention`` applies no RoPE)."""
    kinds = [MAMBA if kind == LINEAR else kind for kind in _layer_types(config)]
    mamba = Mamba(
        mixer="Mamba",
        inner_size=config.mamba_expand * config.hidden_size,
        state_size=config.mamba_d_state,
        conv_kernel_dim=config.mamba_d_conv,
    )
    return _with_mamba(config, mamba, kinds)


@_reader("nemotron_h")
def _read_nemotron_h(config) -> dict:
    """Nemotron-H: Mamba-2 layers, a few attention layers (no position encoding:
    ``NemotronHAttention`` applies no RoPE), and MLP or MoE layers with no mixer."""
    mixers = {
        LINEAR: MAMBA,
        "mamba": MAMBA,
        FULL: FULL,
        "attention": FULL,
        "mlp": NO_MIXER,
        "moe": NO_MIXER,
    }
    kinds = []
    for kind in config.layer_types:
        if kind not in mixers:
            raise _unsupported(
                "nemotron_h", "layers_block_type", kind, "not mamba, attention, mlp or moe"
            )
        kinds.append(mixers[kind])
    _no_window(config, "nemotron_h", "a window on its attention layers is not read")
    mamba = Mamba(
        mixer="Mamba-2",
        inner_size=config.mamba_num_heads * config.mamba_head_dim,
        state_size=config.ssm_state_size,
        conv_kernel_dim=config.conv_kernel,
        num_heads=config.mamba_num_heads,
        n_groups=config.n_groups,
        # NemotronHMamba2Mixer: time_step_limit = (config.time_step_min, inf)
        **_mamba2_layer(config, "chunk_size", (config.time_step_min, math.inf)),
        norm_eps=config.layer_norm_epsilon,
        proj_bias=config.use_bias,
        conv_bias=config.use_conv_bias,
    )
    return _with_mamba(config, mamba, kinds)


@_reader("falcon_h1")
def _read_falcon_h1(config) -> dict:
    """Falcon-H1: every layer runs attention and a Mamba-2 mixer side by side."""
    inner = config.mamba_d_ssm or int(config.mamba_expand * config.hidden_size)
    if inner != config.mamba_n_heads * config.mamba_d_head:
        raise _unsupported(
            "falcon_h1",
            "mamba_d_ssm",
            inner,
            "not mamba_n_heads * mamba_d_head, so its SSM state's size is unclear",
        )
    mamba = Mamba(
        mixer="Mamba-2",
        inner_size=inner,
        state_size=config.mamba_d_state,
        conv_kernel_dim=config.mamba_d_conv,
        num_heads=config.mamba_n_heads,
        n_groups=config.mamba_n_groups,
    )
    return _with_mamba(config, mamba, [HYBRID] * config.num_hidden_layers, rope=_rope(config))


def _mamba2_layer(config, chunk: str, limit) -> dict:
    """The SSD's chunk (the config's field ``chunk``) and the floor of its step, from the
    mixer's ``time_step_limit`` (``limit``); a finite upper limit is refused: no mixer
    the atlas reads has one, and the layer's docs promise none."""
    low, high = limit
    if high != math.inf:
        why = "an upper limit on the step dt, which the atlas does not keep"
        raise _unsupported(config.model_type, "time_step_limit", tuple(limit), why)
    return {"chunk_size": getattr(config, chunk), "time_step_floor": low or None}


def _mamba2(config, *, heads: str, groups: str) -> Mamba:
    """The Mamba-2 mixer of Bamba, GraniteMoeHybrid and Zamba2, which name its heads and
    groups each their own way: ``mamba_expand * hidden_size`` channels in ``heads``
    heads (``self.intermediate_size = int(config.mamba_expand * self.hidden_size)``).
    Zamba2's mixer clamps its step at ``time_step_min``, its norm's epsilon is 1e-5 and
    its convolution always has a bias (``Zamba2MambaMixer``); Bamba's and Granite's take
    ``time_step_limit``, ``rms_norm_eps`` and ``mamba_conv_bias``."""
    if config.model_type == "zamba2":
        layer = _mamba2_layer(config, "chunk_size", (config.time_step_min, math.inf))
        layer |= {"norm_eps": 1e-5, "proj_bias": config.add_bias_linear, "conv_bias": True}
    else:
        layer = _mamba2_layer(config, "mamba_chunk_size", config.time_step_limit)
        layer |= {
            "norm_eps": config.rms_norm_eps,
            "proj_bias": config.mamba_proj_bias,
            "conv_bias": config.mamba_conv_bias,
        }
    return Mamba(
        mixer="Mamba-2",
        inner_size=int(config.mamba_expand * config.hidden_size),
        state_size=config.mamba_d_state,
        conv_kernel_dim=config.mamba_d_conv,
        num_heads=getattr(config, heads),
        n_groups=getattr(config, groups),
        **layer,
    )


@_reader("mamba2")
def _read_mamba2(config) -> dict:
    """Mamba-2 on its own: a Mamba-2 mixer in every layer, no attention at all
    (``Mamba2Mixer``, ``expand * hidden_size`` channels in ``num_heads`` heads). Its
    ``num_heads`` and ``head_dim`` are the SSD's: queries ``C`` and keys ``B`` shared by
    groups of heads, no key or value cached (chapter 23); no position encoding, no
    position limit."""
    inner = int(config.expand * config.hidden_size)
    if inner != config.num_heads * config.head_dim:
        raise _unsupported(
            "mamba2", "head_dim", config.head_dim,
            f"not expand * hidden_size / num_heads = {inner} / {config.num_heads}",
        )  # fmt: skip
    mamba = Mamba(
        mixer="Mamba-2",
        inner_size=inner,
        state_size=config.state_size,
        conv_kernel_dim=config.conv_kernel,
        num_heads=config.num_heads,
        n_groups=config.n_groups,
        **_mamba2_layer(config, "chunk_size", config.time_step_limit),
        norm_eps=config.layer_norm_epsilon,
        proj_bias=config.use_bias,
        conv_bias=config.use_conv_bias,
    )
    return {
        "layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "num_heads": config.num_heads,
        "num_kv_heads": config.num_heads,
        "head_dim": config.head_dim,
        "max_position_embeddings": None,
        "rms_norm_eps": config.layer_norm_epsilon,
        "mamba": mamba,
        "layer_pattern": (MAMBA,) * config.num_hidden_layers,
    }


def _mamba_kinds(config, field: str, kinds: dict[str, str]) -> list[str]:
    """Each layer's kind from the config's ``field``, whose names ``kinds`` maps."""
    names = list(getattr(config, field))
    unknown = sorted(set(names) - set(kinds))
    if unknown:
        raise _unsupported(config.model_type, field, unknown[0], f"not one of {sorted(kinds)}")
    return [kinds[name] for name in names]


@_reader("bamba", "granitemoehybrid")
def _read_bamba(config) -> dict:
    """Bamba and Granite 4.0 (GraniteMoeHybrid): Mamba-2 layers and a few attention
    layers. Bamba's RoPE turns half of each head (``BambaConfig``:
    ``kwargs["partial_rotary_factor"] = 0.5``); GraniteMoeHybrid rotates only with
    ``position_embedding_type="rope"`` (``GraniteMoeHybridModel.rotary_emb``)."""
    kinds = _mamba_kinds(config, "layers_block_type", {LINEAR: MAMBA, FULL: FULL})
    _no_window(config, config.model_type, "a window on its attention layers is not read")
    mamba = _mamba2(config, heads="mamba_n_heads", groups="mamba_n_groups")
    rope = config.model_type == "bamba" or config.position_embedding_type == "rope"
    return _with_mamba(config, mamba, kinds, **({"rope": _rope(config)} if rope else {}))


def _zamba_scores(config) -> Scores:
    """Zamba's scores, scaled by ``(head_dim / 2) ** -0.5`` (``ZambaAttention``: its
    ``head_dim`` is ``2 * hidden_size / heads``, as its input is the hidden state and
    the embeddings side by side, ``attention_hidden_size = 2 * hidden_size``)."""
    head_dim = config.attention_head_dim
    if head_dim % 2:
        return Scores(scale=(head_dim / 2) ** -0.5)
    return Scores(query_pre_attn_scalar=head_dim // 2)


@_reader("zamba", "zamba2")
def _read_zamba(config) -> dict:
    """Zamba and Zamba2: Mamba (Zamba) or Mamba-2 (Zamba2) layers, and ``"hybrid"``
    layers where one attention block, its weights shared, runs before the mixer, each
    hybrid layer caching its own keys and values. No RoPE in Zamba; in Zamba2 with
    ``use_mem_rope`` only (``Zamba2Model``: ``if config.use_mem_rope``)."""
    kinds = _mamba_kinds(config, "layers_block_type", {LINEAR: MAMBA, HYBRID: HYBRID})
    if config.model_type == "zamba2":
        mamba = _mamba2(config, heads="n_mamba_heads", groups="mamba_ngroups")
    else:  # ZambaMambaMixer: Mamba's, cut into n_mamba_heads heads whose state is the same
        mamba = Mamba(
            mixer="Mamba",
            inner_size=config.mamba_expand * config.hidden_size,
            state_size=config.mamba_d_state,
            conv_kernel_dim=config.mamba_d_conv,
        )
    more: dict[str, object] = {"scores": _zamba_scores(config)}
    if config.model_type == "zamba2" and config.use_mem_rope:
        more["rope"] = _rope(config)
    return _with_mamba(config, mamba, kinds, **more)


@_reader("olmo_hybrid")
def _read_olmo_hybrid(config) -> dict:
    """OLMo Hybrid: Gated DeltaNet layers and full layers with OLMo's QK-norm over the
    whole projection; RoPE only where ``rope_parameters`` gives a base
    (``OlmoHybridModel.rotary_emb``: the released checkpoints rotate nothing)."""
    heads = config.linear_num_key_heads, config.linear_num_value_heads
    head_dims = config.linear_key_head_dim, config.linear_value_head_dim
    local = _linear_layers(config, "Gated DeltaNet", heads, head_dims)
    fields = _basics(config) | {"local": local, "parts": LayerParts(qk_norm="projection")}
    parameters = config.rope_parameters
    if parameters is not None and parameters.get("rope_theta") is not None:
        fields["rope"] = _rope(config)
    return fields


@_reader("lfm2", "lfm2_moe", "lfm3")
def _read_lfm2(config) -> dict:
    """LFM2 and LFM3: gated short-convolution layers (``"conv"``) among attention layers
    with QK-norm per head; LFM3's sliding and full layers have their own RoPE and an
    output gate, one per head (``use_attention_gate``)."""
    if config.layer_types is None:  # Lfm2MoeConfig sets none, and its model reads them
        raise _unsupported(
            config.model_type,
            "layer_types",
            None,
            "each layer's kind, which the class does not set",
        )
    kinds = list(config.layer_types)
    fields = _basics(config) | _local(config, [k for k in kinds if k != CONV])
    if isinstance(fields.get("local"), Sliding):  # the full layers fall among the conv ones
        fields["local"] = Sliding(window=config.sliding_window)
    fields["short_conv"] = ShortConv(
        channels=config.hidden_size, conv_kernel_dim=config.conv_L_cache
    )
    fields["layer_pattern"] = tuple(kinds)
    fields["rope"] = _rope(config)
    gate = bool(_declared(config, "use_attention_gate", False))
    fields["parts"] = LayerParts(qk_norm="head", head_gate=gate)
    return fields


@_reader("mimo_v2_flash")
def _read_mimo_v2_flash(config) -> dict:
    """MiMo-V2-Flash: keys of ``head_dim``, values of ``v_head_dim``, scaled by
    ``attention_value_scale``; its sliding layers have twice the key/value heads and
    sinks (``MiMoV2FlashAttention``: ``num_key_value_heads * 2 if is_swa``, ``self.sinks
    = ... if is_swa``)."""
    kinds = _layer_types(config)
    fields = _basics(config) | _local(config, kinds)
    local = fields.get("local")
    if isinstance(local, Sliding):
        fields["local"] = dataclasses.replace(
            local, num_kv_heads=2 * config.num_key_value_heads, sinks=True
        )
    per_kind = [config.rope_parameters.get(kind) or {} for kind in (FULL, SLIDING)]
    if len({each.get("partial_rotary_factor") for each in per_kind if each}) > 1:
        raise _unsupported(
            "mimo_v2_flash", "rope_parameters", per_kind, "a rotary share per layer type"
        )
    fields["rope"] = _rope(config)
    head_dim = fields.get("head_dim", config.hidden_size // config.num_attention_heads)
    if config.v_head_dim != head_dim:
        fields["value_head_dim"] = config.v_head_dim
    if config.attention_value_scale is not None:
        fields["parts"] = LayerParts(value_scale=config.attention_value_scale)
    return fields


@_reader("deepseek_v4")
def _read_deepseek_v4(config) -> dict:
    """DeepSeek-V4: one key/value head whose key is its value, a sliding window in
    every layer, and compressed entries in its CSA and HCA layers."""
    kinds = list(config.layer_types)
    _only("deepseek_v4", kinds, (SLIDING, CSA, HCA), "not sliding, CSA or HCA")
    # One key/value head whatever num_key_value_heads says: DeepseekV4Attention's kv_proj
    # is nn.Linear(hidden_size, head_dim), one head_dim wide.
    fields = _basics(config) | {"num_kv_heads": 1}
    rates = config.compress_rates
    main = config.rope_parameters.get("main", config.rope_parameters)
    theta, scaling, partial = _rope_from(main, "deepseek_v4")
    fields["rope"] = Rope(theta=theta, scaling=scaling, partial_rotary_factor=partial)
    fields["local"] = Sliding(window=config.sliding_window)
    # The CSA and HCA layers rotate with the "compress" RoPE (base compress_rope_theta,
    # the config's YaRN), the sliding-only ones with the "main" one (the fields' rope).
    compress = config.rope_parameters.get("compress", main)
    compress_theta, compress_scaling, _ = _rope_from(compress, "deepseek_v4")
    fields["compressed"] = Compressed(
        csa_rate=rates[CSA],
        hca_rate=rates[HCA],
        rope_theta=compress_theta,
        rope_scaling=compress_scaling,
        q_lora_rank=config.q_lora_rank,
        o_groups=config.o_groups,
        o_lora_rank=config.o_lora_rank,
    )
    fields["indexer"] = Indexer(
        num_heads=config.index_n_heads, head_dim=config.index_head_dim, top_k=config.index_topk
    )
    fields["scores"] = Scores(sinks=True)  # DeepseekV4Attention holds sinks
    # q_b_norm: each query head's RMS, no scale; kv_norm: an RMSNorm on the one head
    fields["parts"] = LayerParts(qk_norm="unscaled_query_head")
    fields["layer_pattern"] = tuple(kinds)
    return fields


#: MiniMax-M3's sparse layers, as its config's ``layer_types`` names them:
#: ``MiniMaxM3VLAttention`` builds a ``MiniMaxM3VLIndexer`` on those layers only.
MINIMAX_M3_SPARSE = "minimax_m3_sparse"


@_reader("minimax_m3_vl_text")
def _read_minimax_m3(config) -> dict:
    """MiniMax-M3: grouped-query attention with QK-norm per head (zero-centred, ``1 +
    weight``, the function of a plain RMSNorm) and partial RoPE, and on its
    ``"minimax_m3_sparse"`` layers a block indexer (chapter 26): one indexer key per
    token, cached beside the keys and values (``MiniMaxM3VLSparseCacheLayer.idx_keys``),
    the scores max-pooled into blocks of ``index_block_size`` keys, and each query
    reading ``index_topk_blocks`` blocks, its ``index_local_blocks`` nearest among them."""
    kinds = _layer_types(config)
    _only(config.model_type, kinds, (FULL, MINIMAX_M3_SPARSE), "not full or minimax_m3_sparse")
    fields = _basics(config) | {"rope": _rope(config), "parts": LayerParts(qk_norm="head")}
    if MINIMAX_M3_SPARSE not in kinds:
        return fields
    fields["indexer"] = Indexer(
        num_heads=config.index_n_heads,
        head_dim=config.index_head_dim,
        top_k=config.index_topk_blocks,
        block_size=config.index_block_size,
        local_blocks=config.index_local_blocks or None,
    )
    if FULL in kinds:  # dense layers among the sparse ones: say each layer's kind
        fields["layer_pattern"] = tuple(INDEXED if k == MINIMAX_M3_SPARSE else FULL for k in kinds)
    return fields


@_reader("qwen4_exp_text")
def _read_qwen4_exp(config) -> dict:
    """Qwen4-Exp: Gated DeltaNet layers, and gated attention layers with QK-norm per head
    whose keys QSA picks (chapter 26): a token budget (``indexer_budget``) spent on
    blocks of ``indexer_compress_ratio`` keys, each scored through the mean of its
    indexer keys; one raw indexer key per token is cached beside the keys and values
    (``DynamicIndexedLayer.indexer_keys``). Its multimodal RoPE gives a text token the
    same position on its three axes (``mrope_section``): plain RoPE for text."""
    model_type = config.model_type
    sizes = ("indexer_n_heads", "indexer_head_dim", "indexer_budget", "indexer_compress_ratio")
    if any(getattr(config, size, None) is None for size in sizes):  # no defaults: read first
        raise _unsupported(
            model_type, "indexer_n_heads", config.indexer_n_heads, "no QSA sizes to read"
        )
    kinds = _layer_types(config)
    _only(model_type, kinds, (LINEAR, INDEXED), "not linear or indexed attention")
    if config.ple_layer_ids:
        raise _unsupported(
            model_type,
            "ple_layer_ids",
            config.ple_layer_ids,
            "per-layer n-gram embeddings, whose convolution and n-gram context the cache "
            "keeps beside the Gated DeltaNet's state (number_of_conv_states = 3): a bill "
            "the atlas does not count yet",
        )
    local = LinearAttention(
        mixer="Gated DeltaNet",
        num_key_heads=config.linear_num_key_heads,
        num_value_heads=config.linear_num_value_heads,
        key_head_dim=config.linear_key_head_dim,
        value_head_dim=config.linear_value_head_dim,
        conv_kernel_dim=config.linear_conv_kernel_dim,
        **_where_full(kinds, INDEXED),
    )
    fields = _basics(config) | {"rope": _rope(config), "local": local}
    fields["indexer"] = Indexer(
        num_heads=config.indexer_n_heads,
        head_dim=config.indexer_head_dim,
        top_k=config.indexer_budget,
        compress_ratio=config.indexer_compress_ratio,
    )
    return fields | {"parts": LayerParts(qk_norm="head", output_gate=True)}


# -- the general reader ------------------------------------------------------------------

#: Model types whose config the general reader reads: their attention reads the fields of
#: ``_basics``, ``layer_types`` or a window, and ``rope_parameters`` (its partial rotary
#: factor among them) as Llama's does; their MoE fields change no attention fact.
GENERAL = (
    "afmoe",
    "apertus",
    "arcee",
    "aria_text",
    "bitnet",
    "cohere",
    "cwm",
    "ernie4_5",
    "ernie4_5_moe",
    "exaone4",
    "exaone_moe",
    "flex_olmo",
    "glm",
    "glm4",
    "glm4_moe",
    "gpt_neox",
    "gpt_neox_japanese",
    "granite",
    "granitemoe",
    "granitemoeshared",
    "helium",
    "hunyuan_v1_dense",
    "hunyuan_v1_moe",
    "hy_v3",
    "hyperclovax",
    "internlm3",
    "iquestcoder",
    "jais2",
    "jetmoe",
    "kolibri1",
    "mellum",
    "ministral",
    "ministral3",
    "mixtral",
    "moshi",
    "nanochat",
    "nemotron",
    "olmo",
    "olmoe",
    "persimmon",
    "phi",
    "phimoe",
    "qwen2_moe",
    "seed_oss",
    "solar_open",
    "stablelm",
    "starcoder2",
    "vaultgemma",
    "dots1",
    "granite_swa",
    "granitemoe_swa",
    "modernbert-decoder",
    "cohere2_moe",
    "hrm_text",
    "emu3_text_model",
    "phi4_multimodal",
    "dbrx",
)


#: The parts that general types' attention layers always hold, read from their code:
#: ``q_norm = XRMSNorm(self.head_dim)`` on each head before RoPE (Mellum, dots.llm1,
#: Kolibri 1, Apertus, Hunyuan 3, EXAONE 4 and EXAONE MoE); over the whole projection,
#: ``FlexOlmoRMSNorm(num_attention_heads * head_dim)`` (FlexOlmo, OLMoE); NanoChat's
#: ``NanoChatRMSNorm(eps=...)``, no weight, after ``apply_rotary_pos_emb``; HunYuan's
#: ``query_layernorm(head_dim)``, after RoPE too; an output gate, ``attn_output *
#: torch.sigmoid(gate_states)`` with ``gate_proj`` heads * head_dim wide (HRM, AFMoE).
_GENERAL_PARTS: dict[str, dict] = {
    "mellum": {"qk_norm": "head"},
    "dots1": {"qk_norm": "head"},
    "kolibri1": {"qk_norm": "head"},
    "apertus": {"qk_norm": "head"},
    "hy_v3": {"qk_norm": "head"},
    "exaone4": {"qk_norm": "head"},
    "exaone_moe": {"qk_norm": "head"},
    "afmoe": {"qk_norm": "head", "output_gate": True},
    "flex_olmo": {"qk_norm": "projection"},
    "olmoe": {"qk_norm": "projection"},
    "nanochat": {"qk_norm": "l2"},
    "hunyuan_v1_dense": {"qk_norm": "head_after_rope"},
    "hunyuan_v1_moe": {"qk_norm": "head_after_rope"},
    "hrm_text": {"output_gate": True},
}
#: QK-norm behind a flag of the config: (the flag, the norm it turns on). Cohere's
#: ``CohereLayerNorm(hidden_size=(num_attention_heads, head_dim))`` and GLM-4.5's
#: ``Glm4MoeRMSNorm(self.head_dim)`` with ``use_qk_norm``; Persimmon's and Phi's
#: ``nn.LayerNorm(hidden_size // num_heads)`` and StableLM's ``StableLmLayerNormPerHead``
#: with ``qk_layernorm``.
_QK_NORM_FLAGS = {
    "cohere": ("use_qk_norm", "layer_norm"),
    "glm4_moe": ("use_qk_norm", "head"),
    "persimmon": ("qk_layernorm", "layer_norm"),
    "phi": ("qk_layernorm", "layer_norm"),
    "stablelm": ("qk_layernorm", "layer_norm"),
}
#: Types whose attention rotates its sliding layers only once the config sets a window
#: (``if self.sliding_window is None or self.is_sliding`` in Kolibri1Attention,
#: Exaone4Attention and ExaoneMoeAttention), or always (AfmoeAttention: ``if
#: self.is_local_attention``), as Cohere 2 does: their full layers are NoPE layers.
_NOPE_WHEN_WINDOWED = ("kolibri1", "exaone4", "exaone_moe")


def _general_parts(config) -> LayerParts | None:
    """The parts a general type's attention holds (``_GENERAL_PARTS``, ``_QK_NORM_FLAGS``),
    and OLMo's, OLMoE's and DBRX's clamp, ``qkv_states.clamp(min=-clip_qkv,
    max=clip_qkv)``, DBRX's read from ``attn_config`` as ``DbrxAttention`` reads it."""
    model_type = config.model_type
    parts = dict(_GENERAL_PARTS.get(model_type, {}))
    if model_type in _QK_NORM_FLAGS:
        flag, norm = _QK_NORM_FLAGS[model_type]
        if _declared(config, flag, False):
            parts["qk_norm"] = norm
    clip = None
    if model_type == "dbrx":  # DbrxAttention: self.clip_qkv = attn_config.clip_qkv
        clip = config.attn_config.clip_qkv
    elif model_type in ("olmo", "olmoe"):  # OlmoAttention: if self.config.clip_qkv is not None
        clip = config.clip_qkv
    if clip is not None:
        parts["clip_qkv"] = float(clip)
    return LayerParts(**parts) if parts else None


def _general_scores(config) -> Scores | None:
    """What a general type does to its scores: Granite's and HyperCLOVA X's ``scaling =
    config.attention_multiplier`` in place of ``head_dim ** -0.5``; GraniteSWA's
    ``self.sinks``, in every layer; VaultGemma's ``query_pre_attn_scalar`` and
    ``attn_logit_softcapping``, as Gemma 2's."""
    model_type = config.model_type
    scores: dict = {}
    multiplier = _declared(config, "attention_multiplier")
    head_dim = _get(config, "head_dim", config.hidden_size // config.num_attention_heads)
    if multiplier is not None and multiplier != head_dim**-0.5:
        scores["scale"] = float(multiplier)
    if model_type in ("granite_swa", "granitemoe_swa"):
        scores["sinks"] = True  # GraniteSWAAttention: nn.Parameter(zeros(num_attention_heads))
    if model_type == "vaultgemma":
        scores["query_pre_attn_scalar"] = config.query_pre_attn_scalar
        scores["softcap"] = _declared(config, "attn_logit_softcapping")
    scores = {name: value for name, value in scores.items() if value is not None}
    return Scores(**scores) if scores else None


def _nope_every_of(flags: list[bool], model_type: str, field: str, value: object) -> int | None:
    """``Rope.nope_every`` from each layer's flag (``True``: it rotates): ``None`` where
    every layer rotates, 1 where none does; a refusal where the NoPE layers do not recur
    every so many layers."""
    if all(flags):
        return None
    every = flags.index(False) + 1
    if flags != [(i + 1) % every != 0 for i in range(len(flags))]:
        raise _unsupported(
            model_type, field, value, "NoPE layers that do not recur every so many layers"
        )
    return every


def _granite_swa_rope(config, kinds: list[str]) -> Rope | None:
    """GraniteSWA's RoPE: one base per layer, ``layer_rope_theta``, 0 for a NoPE layer
    (``GraniteSWAModel``: ``layer_position_embeddings = ... if theta else None``), each
    with the config's scaling. Read as one base for the full layers and one for the
    sliding ones; refused where the bases change among layers of one kind, or where the
    sliding layers' own base would be scaled, which ``Rope.local_theta`` never is."""
    thetas = list(config.layer_rope_theta)
    why = "RoPE bases the facts cannot hold: "
    nope_every = _nope_every_of(
        [bool(t) for t in thetas], config.model_type, "layer_rope_theta", thetas
    )
    if nope_every == 1:
        return None
    bases = {
        kind: {t for t, each in zip(thetas, kinds, strict=True) if t and each == kind}
        for kind in (FULL, SLIDING)
    }
    if len(bases[FULL]) > 1 or len(bases[SLIDING]) > 1:
        raise _unsupported(
            config.model_type, "layer_rope_theta", thetas, why + "several among layers of one kind"
        )
    theta = next(iter(bases[FULL] or bases[SLIDING]))
    local = next(iter(bases[SLIDING]), theta)
    rope = _rope(config, nope_every)
    if local != theta and rope.scaling is not None:
        raise _unsupported(
            config.model_type,
            "layer_rope_theta",
            thetas,
            why + "a scaled base of the sliding layers' own",
        )
    return dataclasses.replace(rope, theta=theta, local_theta=local if local != theta else None)


def _general_rope(config, kinds: list[str]) -> Rope | None:
    """The RoPE of a general type, on the layers its attention rotates."""
    model_type = config.model_type
    if model_type in ("granite_swa", "granitemoe_swa"):
        return _granite_swa_rope(config, kinds)
    nope_every = None
    if model_type == "afmoe" or (
        model_type in _NOPE_WHEN_WINDOWED and config.sliding_window is not None
    ):
        nope_every = _cohere2_nope_every(kinds, model_type)
    if model_type == "cohere2_moe":
        # Cohere2MoeAttention rotates its sliding layers, and its dense layers where
        # prefix_dense_sliding_window_pattern is 1 (force_rope); its class keeps the
        # RoPE it standardizes from rope_theta and rope_scaling in rope_parameters.
        prefix = config.prefix_dense_sliding_window_pattern == 1
        flags = [
            kind == SLIDING or (prefix and mlp == "dense")
            for kind, mlp in zip(kinds, config.mlp_layer_types, strict=True)
        ]
        nope_every = _nope_every_of(flags, model_type, "layer_types", kinds)
        return _rope(config, nope_every) if nope_every != 1 else None
    if _declared(config, "rope_parameters") is not None and nope_every != 1:
        return _rope(config, nope_every)
    return None


@_reader(*GENERAL)
def _read_general(config) -> dict:
    """A decoder of full and sliding (or chunked) layers, with RoPE where the config
    class declares ``rope_parameters`` (``_general_rope``: some rotate their sliding
    layers only), the parts each attention holds (``_general_parts``) and what it does
    to its scores (``_general_scores``). DBRX's key/value heads are its
    ``attn_config.kv_n_heads``, a field of a sub-config."""
    kinds = _layer_types(config)
    fields = _basics(config) | _local(config, kinds)
    if config.model_type == "dbrx":  # DbrxAttention: attn_config.kv_n_heads, not declared
        fields["num_kv_heads"] = config.attn_config.kv_n_heads
    rope = _general_rope(config, kinds)
    if rope is not None:
        fields["rope"] = rope
    parts = _general_parts(config)
    if parts is not None:
        fields["parts"] = parts
    scores = _general_scores(config)
    if scores is not None:
        fields["scores"] = scores
    if _declared(config, "final_logit_softcapping") is not None:  # VaultGemma's
        fields["final_logit_softcapping"] = config.final_logit_softcapping
    return fields


#: Encoders whose LM head model (``BertLMHeadModel`` ...) is a causal decoder with
#: ``is_decoder``: a learned position table, a bias on every projection.
BERT_LIKE = (
    "bert",
    "bert-generation",
    "big_bird",
    "camembert",
    "data2vec-text",
    "electra",
    "ernie",
    "megatron-bert",
    "rembert",
    "roberta",
    "roberta-prelayernorm",
    "roc_bert",
    "xlm-roberta",
    "xlm-roberta-xl",
    "xmod",
)


@_reader(*BERT_LIKE)
def _read_bert(config) -> dict:
    """BERT and its kin: full layers of a learned position table; they attend both ways
    (an encoder, which caches nothing) unless ``is_decoder`` makes them causal
    (``BertSelfAttention``: ``self.is_causal = config.is_decoder``)."""
    flags = {"learned_positions": True, "bidirectional": not config.is_decoder}
    return _basics(config) | flags | {"attention_bias": True}  # BertSelfAttention's


@_reader("gpt2", "gpt-sw3", "openai-gpt", "opt", "biogpt", "git")
def _read_learned(config) -> dict:
    """Decoders of full multi-head layers with a learned position table and a bias on
    the projections (GPT-2's ``c_attn`` and ``c_proj``, OPT's ``enable_bias``)."""
    # GPT2Config maps the usual names (num_hidden_layers, ...) onto n_layer, n_embd, ...
    bias = bool(_declared(config, "enable_bias", True))
    return _basics(config) | {"learned_positions": True, "attention_bias": bias}


@_reader("gpt_bigcode")
def _read_gpt_bigcode(config) -> dict:
    """StarCoder's GPT-BigCode: one key/value head with ``multi_query``
    (``GPTBigCodeAttention``: ``self.kv_heads = 1 if self.multi_query else self.num_heads``)."""
    heads = config.num_attention_heads
    fields = _basics(config) | {"learned_positions": True, "attention_bias": True}
    return fields | {"num_kv_heads": 1 if config.multi_query else heads}


@_reader("gpt_neo")
def _read_gpt_neo(config) -> dict:
    """GPT-Neo: global and local layers (``attention_layers``); a local one sees
    ``window_size`` positions (``GPTNeoSelfAttention``'s ``bias`` mask)."""
    kinds = [FULL if kind == "global" else SLIDING for kind in config.attention_layers]
    fields = _basics(config) | {"learned_positions": True}
    if SLIDING in kinds:
        fields["local"] = Sliding(window=config.window_size, **_where_full(kinds))
    return fields


@_reader("codegen", "gptj")
def _read_rotary_dim(config) -> dict:
    """CodeGen and GPT-J: multi-head layers that rotate the first ``rotary_dim``
    features of each head (``apply_rotary_pos_emb`` on ``k_rot = key[..., :rotary_dim]``),
    base 10,000 (``create_sinusoidal_positions(..., self.rotary_dim)``)."""
    fields = _basics(config)
    head_dim = config.hidden_size // config.num_attention_heads
    partial = (config.rotary_dim or head_dim) / head_dim
    return fields | {"rope": Rope(theta=10000.0, partial_rotary_factor=partial)}


@_reader("falcon")
def _read_falcon(config) -> dict:
    """Falcon: ``num_kv_heads`` key/value heads in its new decoder architecture, else one
    with ``multi_query`` (``FalconAttention``); ALiBi or RoPE by ``config.alibi``."""
    heads = config.num_attention_heads
    if config.new_decoder_architecture:
        kv_heads = config.num_kv_heads
    else:
        kv_heads = 1 if config.multi_query else heads
    fields = _basics(config) | {"num_kv_heads": kv_heads, "attention_bias": bool(config.bias)}
    if config.alibi:
        return fields | {"alibi": True}
    return fields | {"rope": _rope(config)}


@_reader("mpt")
def _read_mpt(config) -> dict:
    """MPT: multi-head layers with ALiBi where ``attn_config.alibi``; no position
    encoding otherwise (``MptModel`` has no position table)."""
    fields = _basics(config) | {"attention_bias": not config.no_bias}
    fields["max_position_embeddings"] = config.max_seq_len
    return fields | {"alibi": bool(config.attn_config.alibi)}


@_reader("bloom")
def _read_bloom(config) -> dict:
    # BLOOM's config sets no position limit: ALiBi's bias is defined at any distance.
    fields = {"max_position_embeddings": None, "alibi": True, "attention_bias": True}
    return _basics(config) | fields  # query_key_value and dense have a bias


@_reader("xglm", "ctrl")
def _read_sinusoidal(config) -> dict:
    """XGLM and CTRL: decoders of multi-head layers with a fixed sinusoidal table."""
    return _basics(config) | {"sinusoidal_positions": True, "attention_bias": True}


@_reader("musicgen_decoder", "musicgen_melody_decoder")
def _read_musicgen(config) -> dict:
    """MusicGen's decoder: multi-head layers with a sinusoidal table, no bias
    (``MusicgenAttention(..., bias=False)``), cross-attending to the text's encoding
    (MusicGen Melody prepends it instead: ``MusicgenMelodyDecoderLayer`` has no
    ``encoder_attn``)."""
    fields = _basics(config) | {"sinusoidal_positions": True}
    return fields | ({"cross": Cross()} if config.model_type == "musicgen_decoder" else {})


@_reader("roformer")
def _read_roformer(config) -> dict:
    """RoFormer: BERT with RoPE of base 10,000 in place of a position table
    (``RoFormerSinusoidalPositionalEmbedding``), causal with ``is_decoder``."""
    flags = {"bidirectional": not config.is_decoder, "attention_bias": True}
    return _basics(config) | flags | {"rope": Rope(theta=10000.0)}


#: Encoder–decoder models whose decoder alone is a causal LM (``BartForCausalLM``):
#: the decoder's own fields, and a cross-attention after each self-attention, to an
#: encoding whose length the input sets.
SEQ2SEQ = (
    "bart",
    "mbart",
    "blenderbot",
    "blenderbot-small",
    "plbart",
    "mvp",
    "bigbird_pegasus",
    "marian",
    "pegasus",
    "trocr",
)
_SINUSOIDAL_SEQ2SEQ = ("marian", "pegasus")  # MarianSinusoidalPositionalEmbedding


@_reader(*SEQ2SEQ)
def _read_seq2seq_decoder(config) -> dict:
    """The decoder of an encoder–decoder model: multi-head layers. ``get_text_config(
    decoder=True)`` moved the decoder's layers and heads under the generic names."""
    heads = config.num_attention_heads
    learned = _declared(config, "use_learned_position_embeddings", True)
    sinusoidal = config.model_type in _SINUSOIDAL_SEQ2SEQ or not learned
    return {
        "layers": config.num_hidden_layers,
        "hidden_size": config.hidden_size,
        "num_heads": heads,
        "num_kv_heads": heads,
        "learned_positions": not sinusoidal,
        "sinusoidal_positions": sinusoidal,
        "attention_bias": True,
        "cross": Cross(),
    }


@_reader("deepseek_v2", "glm4_moe_lite", "minicpm3", "youtu", "longcat_flash")
def _read_mla_only(config) -> dict:
    """Multi-head latent attention in every layer, as DeepSeek-V2's."""
    fields = _basics(config)
    fields.pop("head_dim", None)  # the config's head_dim is the rotary part's
    return fields | {"rope": _rope(config), "latent": _latent(config)}


# -- types new in transformers 5.25 ----------------------------------------------------
# A type the installed transformers lacks (the pin's) is harmless here: nothing reads
# its class until a config of that type comes, which transformers refuses first.

# Types that AutoModelForCausalLM runs with another type's code: EXAONE 3.0 with
# LlamaForCausalLM, Sarvam-105B with DeepseekV3ForCausalLM (no indexer).
_reader("exaone")(_read_general)
_reader("sarvam_mla")(_read_mla_only)


@_reader("apertus1p5_text", "minicpm5_moe", "param2moe", "sarvam_moe")
def _read_general_with_parts(config) -> dict:
    """A decoder the general reader reads, whose attention adds a part: QK-norm per
    head in Apertus 1.5 (``Apertus1p5TextAttention``'s ``q_norm`` and ``k_norm`` over
    ``head_dim``, before RoPE) and in the types run as GLM-4.5 with ``use_qk_norm``
    (Param2, Sarvam-30B: ``Glm4MoeAttention``); an output gate in MiniCPM 5
    (``MiniCPM5MoeAttention``: ``attn_output * gate_states.sigmoid()``, one gate a
    feature, from ``q_gate_proj``)."""
    fields = _read_general(config)
    model_type = config.model_type
    if model_type == "apertus1p5_text" or (
        model_type in ("param2moe", "sarvam_moe") and config.use_qk_norm
    ):
        fields["parts"] = LayerParts(qk_norm="head")
    elif model_type == "minicpm5_moe":
        fields["parts"] = LayerParts(output_gate=True)
    return fields


@_reader("ergo")
def _read_ergo(config) -> dict:
    """Ergo: sliding layers that rotate and full layers that do not (``ErgoConfig`` gives
    the full layers no ``rope_parameters``: NoPE), QK-norm per head before RoPE
    (``ErgoAttention``'s ``q_norm`` and ``k_norm``), heads of ``hidden_size //
    num_attention_heads`` whatever the file says."""
    scale = _declared(config, "global_attention_scale")
    if scale is not None:
        raise _unsupported(
            "ergo",
            "global_attention_scale",
            scale,
            "a factor on the full layers' scores only (ErgoAttention.qk_scale), where the "
            "facts scale every layer's alike",
        )
    kinds = _layer_types(config)
    fields = _basics(config) | _local(config, kinds)  # ErgoConfig declares no head_dim
    nope_every = _cohere2_nope_every(kinds, "ergo")
    if nope_every != 1:
        fields["rope"] = _rope(config, nope_every)
    return fields | {"parts": LayerParts(qk_norm="head")}


#: Model types refused by name: the mechanism that mixes their tokens, which the site
#: does not teach yet.
REFUSED = {
    "mamba": "a Mamba state-space model with no attention",
    "falcon_mamba": "a Mamba state-space model with no attention",
    "rwkv": "RWKV's recurrence",
    "xlstm": "xLSTM's recurrence",
    "recurrent_gemma": "Griffin's RG-LRU recurrence",
    "reformer": "Reformer's LSH attention",
    "xlnet": "XLNet's two-stream relative attention",
    "xlm": "XLM's masked LM, which keeps no cache",
    "diffllama": "differential attention",
    "doge": "Doge's dynamic mask attention",
    "cpmant": "CPM-Ant's segment relative position bias",
    "prophetnet": "ProphetNet's n-gram self-attention",
    "blt": "BLT's byte patches and their cross-attention",
    "zaya": "ZAYA's compressed convolutional attention (CCA)",
    "gemma4_assistant": "a drafter that attends to its target model's cache, keeping none",
    "gemma4_unified_assistant": "a drafter that attends to its target model's cache, keeping none",
    "beam": "NoPE full layers whose queries a position scales, (1 + (p + 1) / 2048) ** 0.1 "
    "(BeamModel's compute_attention_scaling), not Llama 4's temperature tuning",
    "laguna": "a softplus gate on each head's output and a number of query heads that "
    "changes layer by layer (LagunaAttention's g_proj and num_attention_heads_per_layer)",
    "flint": "RoPE on its sliding layers only, its full (NoPE) layers the first two, every "
    "fourth and the last (FlintAttention: rotate if self.sliding_window is not None), "
    "not every so many layers",
    "hy_v4": "DeepSeek Sparse Attention whose top-k selection later layers reuse "
    "(HYV4Attention's indexer_types: cross-layer top-k sharing)",
    "inkling_text": "a relative position bias that each token's hidden state mixes from a "
    "learned bank (InklingRelativeLogits)",
    "inkling2_text": "a relative position bias that each token's hidden state mixes from a "
    "learned bank (Inkling2RelativeLogits)",
    "inkling2_loop_text": "a relative position bias that each token's hidden state mixes "
    "from a learned bank (Inkling2LoopRelativePositionBias), in layers run loop_num_passes "
    "times over",
    "dory": "recurrent-depth loops over its middle layers, each loop caching its own keys "
    "and values (DoryModel.forward's cache_offset), in nGPT's unit-norm attention",
    "kolibri1_1": "a weightless indexer whose candidate pool later layers reuse "
    "(Kolibri1_1Indexer's index_pool), on NoPE layers that read other layers' keys and "
    "values (kv_source_layers)",
    "lara_mini": "Gated DeltaNet layers beside sliding and NoPE full ones (LaraMiniModel "
    "rotates in its sliding layers only): two kinds of local layer, where the facts hold one",
}
