"""The calculator's reader, run in the browser by Pyodide: a ``config.json`` to the
recipe, the layer strip and the bill, with the package's own functions.

The browser has no ``transformers``, so this module stands in for its config classes
and nothing else: it fills the fields a pasted ``config.json`` leaves out with the
config class's defaults (exported at build time by ``config_reader.py``, as JSON), and
computes the fields a class's ``__post_init__`` computes from others (``layer_types``
from a pattern, the RoPE parameters from the old ``rope_theta`` and ``rope_scaling``,
...), for the fields the atlas's readers read. The facts, the recipe, the strip and
the bill are then the package's: :func:`attention.models.facts_from_config_object`,
:func:`~attention.models.recipe`, :func:`~attention.models.layer_strip` and
:func:`~attention.models.bill`, shipped unchanged beside this file.

``tests/docs/test_config_reader.py`` holds what this module builds to what
``transformers`` builds, on every model type the readers read.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, ClassVar

FULL, SLIDING, CHUNKED, LINEAR = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
)
# transformers' remap_legacy_layer_types: old layer-type names a config.json may hold.
LEGACY_LAYER_TYPES = {
    "mamba": LINEAR,
    "attention": FULL,
    "deepseek_sparse_attention": "indexed_attention",
    "qwen_sparse_attention": "indexed_attention",
}
# RoPE types whose scaling needs the context the model was trained at.
SCALED_ROPE = ("llama3", "yarn", "longrope")


#: Read model types whose config class computes, in its ``__post_init__``, fields the
#: readers read that :data:`POST_INIT` does not compute yet: the browser refuses them,
#: and names the command that reads them. ``tests/docs/test_config_reader.py`` fails for
#: a type missing here whose configs come out differently, and for a type listed here
#: whose configs already come out the same. Today: two types new in transformers 5.25
#: (not the pin), Apertus 1.5's llama3 RoPE default and Ergo's layer pattern and RoPE.
NOT_FILLED: frozenset[str] = frozenset({"apertus1p5_text", "ergo"})


class ConfigError(ValueError):
    """A config.json the browser cannot read: not JSON, not an object, no model type."""


class BrowserConfig:
    """A config object with the attributes a ``transformers`` config would have.

    ``attribute_map`` is the config class's: a generic name (``num_hidden_layers``)
    read through the name the class stores (GPT-2's ``n_layer``).
    """

    attribute_map: ClassVar[dict[str, str]] = {}

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)

    def __getattr__(self, name: str) -> Any:
        # Called only for a name not set: a generic name the class maps, else missing.
        mapped = type(self).attribute_map.get(name)
        if mapped is not None and mapped in self.__dict__:
            return self.__dict__[mapped]
        raise AttributeError(name)


def parse(text: str) -> dict:
    """A pasted ``config.json``'s dict; a :class:`ConfigError` that says what is wrong."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"expected a config.json (JSON), got text that is not JSON: {error.msg} at line "
            f"{error.lineno}, column {error.colno}"
        ) from None
    if not isinstance(config, dict):
        raise ConfigError(f"expected a JSON object (a config.json), got a {type(config).__name__}")
    if not isinstance(config.get("model_type"), str):
        raise ConfigError('expected the config to name its "model_type", got none')
    return config


def text_part(config: dict, exported: dict) -> dict:
    """The text model's part of a config, as ``get_text_config(decoder=True)`` takes it:
    a multimodal file's ``text_config``, with the type its class defaults to."""
    model_type = config["model_type"]
    model_type = exported["loaded_as"].get(model_type, model_type)
    outer = exported["text_configs"].get(model_type)
    if outer is None and isinstance(config.get("text_config"), dict):
        outer = config["text_config"].get("model_type")
    if outer is None:
        return {**config, "model_type": model_type}
    inner = config.get("text_config") or {}
    if not isinstance(inner, dict):
        raise ConfigError(f"expected text_config to be a JSON object, got {type(inner).__name__}")
    return {"model_type": outer, **inner}


def build(config: dict, exported: dict, *, unfilled: bool = False) -> BrowserConfig:
    """The config object of ``config``'s text model, as its config class builds it.

    Raises ``ValueError`` for a model type with no exported class (one the atlas does
    not read), naming the types it reads, as ``facts_from_config`` does, and for a type
    of :data:`NOT_FILLED` unless ``unfilled`` (the test's check that it still differs).
    """
    from attention.models.readers import REFUSED

    named = config["model_type"]
    config = text_part(config, exported)
    model_type = config["model_type"]
    for refused in dict.fromkeys([named, model_type]):
        if refused in REFUSED:  # the package's words (readers.as_config refuses both)
            raise ValueError(
                f"facts_from_config: expected a model type whose attention the site "
                f"teaches, got model_type={refused!r}: {REFUSED[refused]}"
            )
    spec = exported["types"].get(model_type)
    if spec is None:
        raise ValueError(
            f"facts_from_config: expected one of the model types the atlas reads "
            f"({', '.join(sorted(exported['types']))}), got model_type={model_type!r}"
        )
    if model_type in NOT_FILLED and not unfilled:
        raise ValueError(
            f"expected a model type whose config the page can complete, got "
            f"model_type={model_type!r}: its config class computes fields that this page "
            f"does not yet. The package reads it: python -m attention.models config.json"
        )
    attribute_map = spec["attribute_map"]
    # A field the class maps is stored under its mapped name, as the class's setattr does.
    fields = {attribute_map.get(k, k): v for k, v in copy.deepcopy(spec["defaults"]).items()}
    kwargs: dict[str, Any] = {}
    for key, value in config.items():
        key = attribute_map.get(key, key)
        if key in fields:
            check_type(spec["config_class"], key, value, fields[key])
            fields[key] = copy.deepcopy(value)
        elif key != "model_type":
            kwargs[key] = copy.deepcopy(value)
    fields["model_type"] = model_type
    post_init = POST_INIT.get(model_type)
    if post_init is not None:
        post_init(fields, kwargs, spec)
    if "rope_parameters" in fields and model_type not in OWN_ROPE:
        convert_rope(fields, kwargs, spec)
    if "rope_scaling" in kwargs:  # left to the class's rope_scaling setter, which sets:
        fields["rope_parameters"] = kwargs.pop("rope_scaling")
    fields |= kwargs  # transformers keeps every other key of the file as an attribute
    name_rope_types(fields, model_type)
    if fields.get("layer_types") is not None and model_type not in ("jamba", "falcon_h1"):
        fields["layer_types"] = [LEGACY_LAYER_TYPES.get(k, k) for k in fields["layer_types"]]
    if model_type in ("gemma4_text", "gemma4_unified_text"):
        fields["per_layer_config"] = gemma4_layers(fields)
    if fields.get("is_encoder_decoder"):
        decoder_part(fields, spec)
    # The class's own model_type: gpt-sw3's class is GPT2Config, whose type is gpt2.
    fields["model_type"] = spec.get("model_type", model_type)
    # A dataclass declaring the class's fields, and its properties, by name (no defaults,
    # so no class attribute hides a mapped name): readers ask what a class declares.
    declared = [name for name in [*spec["defaults"], *spec["properties"]] if name != "model_type"]
    cls = dataclasses.make_dataclass(
        spec["config_class"],
        [(name, Any) for name in dict.fromkeys(declared)],
        bases=(BrowserConfig,),
        namespace={"attribute_map": attribute_map},
        init=False,
        repr=False,
        eq=False,
    )
    return cls(fields)


def decoder_part(fields: dict, spec: dict) -> None:
    """An encoder–decoder's decoder, as ``get_text_config(decoder=True)`` takes it from a
    flat config (BART's, Whisper's): each ``decoder_*`` field under the generic name
    (``decoder_layers`` as ``num_hidden_layers``, ``decoder_attention_heads`` as
    ``num_attention_heads``, ``decoder_ffn_dim`` as ``ffn_dim``), stored under the name
    the class maps it to (BART's ``num_hidden_layers`` is its ``encoder_layers``). The
    ``decoder_*`` field itself reads its class default afterwards, as transformers' does."""
    if any(fields.get(name) is not None for name in ("decoder", "generator", "text_config")):
        return
    for key in [key for key in fields if key.startswith("decoder")]:
        if key == "decoder_layers":
            new = "num_hidden_layers"
        elif key == "decoder_attention_heads":
            new = "num_attention_heads"
        else:
            new = key[len("decoder") + 1 :]
        new = spec["attribute_map"].get(new, new)
        value = fields.pop(key)
        if key in spec["defaults"]:
            fields[key] = copy.deepcopy(spec["defaults"][key])
        fields[new] = value


def sub_config(spec: dict, name: str, given: Any) -> BrowserConfig:
    """MPT's and DBRX's ``attn_config`` (and DBRX's ``ffn_config``): the sub-config's
    class defaults, and the file's dict over them, as ``MptAttentionConfig(**given)``."""
    if given is not None and not isinstance(given, dict):
        raise ConfigError(f"expected {name} to be a JSON object, got {type(given).__name__}")
    return BrowserConfig(copy.deepcopy(spec["sub_configs"][name]) | (given or {}))


def check_type(config_class: str, key: str, value: Any, default: Any) -> None:
    """Refuse a number field given as text or a bool (``"num_hidden_layers": "four"``),
    as the class's strict checks do: the field's default says it is a number. A list
    passes: some number fields take one too (``eos_token_id``)."""
    if default is None or isinstance(default, bool):
        return
    wanted = {int: (int,), float: (int, float)}.get(type(default))
    if wanted and isinstance(value, str | bool):
        raise ConfigError(
            f"{config_class}: expected {key} to be a{'n int' if wanted == (int,) else ' number'}"
            f" (its default is {default!r}), got {type(value).__name__} {value!r}"
        )


# -- RoPE: transformers' convert_rope_params_to_dict and standardize_rope_params -------


def convert_rope(fields: dict, kwargs: dict, spec: dict) -> None:
    """``rope_parameters`` from the file's ``rope_parameters``, or its old ``rope_scaling``
    and ``rope_theta``, with the class's default base."""
    rope_scaling = kwargs.pop("rope_scaling", None)
    rope = rope_scaling or fields["rope_parameters"] or {}
    theta = kwargs.pop("rope_theta", fields.get("rope_theta", spec["default_theta"]))
    partial = kwargs.pop("partial_rotary_factor", fields.get("partial_rotary_factor"))
    fields["rope_parameters"] = rope
    standardize_rope(fields, spec, theta, partial)


def standardize_rope(fields: dict, spec: dict, theta: Any, partial: Any) -> None:
    """Each RoPE dict (one, or one per layer type) with its type, base and factor."""
    rope = fields["rope_parameters"]
    layer_types = fields.get("layer_types") or ()
    nested = [key for key in rope if key in layer_types]
    if not (rope or theta):
        return
    for parameters in [rope[key] for key in nested] or [rope]:
        if parameters is None:
            continue
        parameters.setdefault("rope_type", parameters.get("type", "default"))
        parameters.setdefault("rope_theta", theta)
        if partial is not None:
            parameters.setdefault("partial_rotary_factor", partial)
        if not nested and parameters["rope_type"] == "default":
            parameters["rope_type"] = spec["default_rope_type"]  # "default" for most
        if parameters["rope_type"] in SCALED_ROPE:
            if "original_max_position_embeddings" in fields:
                parameters["original_max_position_embeddings"] = fields[
                    "original_max_position_embeddings"
                ]
            else:
                context = spec["attribute_map"].get(
                    "max_position_embeddings", "max_position_embeddings"
                )
                parameters.setdefault("original_max_position_embeddings", fields[context])


#: The keys a class nests its RoPE dicts under where they are not its layer types
#: (``_rope_type_labels`` in DeepSeek-V4's and LFM3's classes).
ROPE_LABELS = {"deepseek_v4": ("main", "compress"), "lfm3": (FULL, SLIDING)}


def name_rope_types(fields: dict, model_type: str) -> None:
    """Each RoPE dict's ``rope_type``, from its old ``type`` else ``"default"``, as the
    class's RoPE check (``validate_rope``) writes it once the config is built: also in
    a dict no conversion touched (Gemma 4's, given an old ``rope_scaling``)."""
    rope = fields.get("rope_parameters")
    if not isinstance(rope, dict) or not rope:
        return
    labels = ROPE_LABELS.get(model_type) or fields.get("layer_types") or ()
    nested = [key for key in rope if key in labels]
    for parameters in [rope[key] for key in nested] if nested else [rope]:
        if isinstance(parameters, dict):
            parameters["rope_type"] = parameters.get("rope_type", parameters.get("type", "default"))


def rope_by_layer_type(
    fields: dict, kwargs: dict, spec: dict, full_key: str, local_key: str, both: bool = False
) -> None:
    """Gemma 3, OLMo 3 and ModernBERT: a RoPE dict for the full and the sliding layers.

    ``full_key`` and ``local_key`` name the file's old keys for each base; ``both``:
    the old ``rope_scaling`` scales both kinds (ModernBERT), else the full layers only.
    """
    rope_scaling = kwargs.pop("rope_scaling", None)
    rope = fields["rope_parameters"]
    if rope is None:
        rope = {SLIDING: {"rope_type": "default"}, FULL: {"rope_type": "default"}}
    if rope_scaling is not None:
        rope[FULL].update(rope_scaling)
        if both:
            rope[SLIDING].update(rope_scaling)
    default = spec["default_theta"]
    global_default = default["global"] if isinstance(default, dict) else default
    local_default = default["local"] if isinstance(default, dict) else default
    if rope.get(FULL) is None:
        rope[FULL] = {"rope_type": "default"}
    rope[FULL].setdefault("rope_theta", kwargs.pop(full_key, global_default))
    if rope.get(SLIDING) is None:
        rope[SLIDING] = {"rope_type": "default"}
    rope[SLIDING].setdefault("rope_theta", kwargs.pop(local_key, local_default))
    fields["rope_parameters"] = rope
    standardize_rope(fields, spec, fields.get("rope_theta"), fields.get("partial_rotary_factor"))


# -- each class's __post_init__, for the fields the readers read ----------------------


def every(fields: dict, period: int, where: str, other: str, offset: int = 1) -> list[str]:
    """``where`` every ``period`` layers (the last of each period), ``other`` elsewhere."""
    layers = fields["num_hidden_layers"]
    return [other if (i + offset) % period else where for i in range(layers)]


def kv_heads(fields: dict) -> None:
    if fields.get("num_key_value_heads") is None:
        fields["num_key_value_heads"] = fields["num_attention_heads"]


def head_dim(fields: dict) -> None:
    if fields.get("head_dim") is None:
        fields["head_dim"] = fields["hidden_size"] // fields["num_attention_heads"]


def post_llama(fields: dict, kwargs: dict, spec: dict) -> None:
    head_dim(fields)
    kv_heads(fields)


def post_qwen(fields: dict, kwargs: dict, spec: dict) -> None:
    """Qwen2 and Qwen3: a window only with ``use_sliding_window``, from layer
    ``max_window_layers`` on."""
    if not fields.get("use_sliding_window"):
        fields["sliding_window"] = None
    kv_heads(fields)
    if "max_window_layers" in fields and fields.get("layer_types") is None:
        window = fields["sliding_window"] is not None
        fields["layer_types"] = [
            SLIDING if window and i >= fields["max_window_layers"] else FULL
            for i in range(fields["num_hidden_layers"])
        ]


def post_alternating(fields: dict, kwargs: dict, spec: dict) -> None:
    """Gemma 2 and gpt-oss: sliding and full layers in turn."""
    kv_heads(fields)
    if spec["config_class"] == "GptOssConfig":
        head_dim(fields)
        if fields["rope_parameters"] is None:
            fields["rope_parameters"] = {
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 4096,
            }
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, 2, FULL, SLIDING)


def post_gemma3(fields: dict, kwargs: dict, spec: dict) -> None:
    if fields.get("use_bidirectional_attention"):
        fields["sliding_window"] = fields["sliding_window"] // 2 + 1
    pattern = kwargs.get("sliding_window_pattern", 6)
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, pattern, FULL, SLIDING)
    rope_by_layer_type(fields, kwargs, spec, "rope_theta", "rope_local_base_freq")


def post_gemma4(fields: dict, kwargs: dict, spec: dict) -> None:
    if fields.get("use_bidirectional_attention") == "all":
        fields["sliding_window"] = fields["sliding_window"] // 2 + 1
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, 6, FULL, SLIDING)
    if fields["layer_types"]:
        fields["layer_types"][-1] = FULL  # Gemma4TextConfig forces its last layer full
    if fields["rope_parameters"] is None:
        fields["rope_parameters"] = {
            SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
            FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
        }
    kwargs.setdefault("global_head_dim", 512)
    kwargs.setdefault("num_global_key_value_heads", None)


def gemma4_layers(fields: dict) -> list[BrowserConfig]:
    """Gemma 4's ``per_layer_config``: each layer's head size and key/value heads, the
    full layers' from ``global_head_dim`` (and ``num_global_key_value_heads`` with
    ``attention_k_eq_v``), unless the file gives them layer by layer."""
    given = fields.get("per_layer_config")
    overrides: dict[int, dict] = {}
    if isinstance(given, dict):
        overrides = {int(index): value for index, value in given.items()}
    elif isinstance(given, list):
        overrides = dict(enumerate(given))
    else:
        full = {"head_dim": fields["global_head_dim"]}
        if fields.get("attention_k_eq_v") and fields["num_global_key_value_heads"] is not None:
            full["num_key_value_heads"] = fields["num_global_key_value_heads"]
        overrides = {i: full for i, kind in enumerate(fields["layer_types"]) if kind == FULL}
    base = {"head_dim": fields["head_dim"], "num_key_value_heads": fields["num_key_value_heads"]}
    return [
        BrowserConfig(base | (overrides.get(i) or {})) for i in range(fields["num_hidden_layers"])
    ]


def post_cohere2(fields: dict, kwargs: dict, spec: dict) -> None:
    kv_heads(fields)
    fields["head_dim"] = fields["hidden_size"] // fields["num_attention_heads"]
    if fields.get("layer_types") is None:
        pattern = kwargs.pop("sliding_window_pattern", 4)
        fields["layer_types"] = every(fields, pattern, FULL, SLIDING)


def post_olmo3(fields: dict, kwargs: dict, spec: dict) -> None:
    kv_heads(fields)
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, 4, FULL, SLIDING)
    rope_by_layer_type(fields, kwargs, spec, "rope_theta", "rope_theta")


def post_modernbert(fields: dict, kwargs: dict, spec: dict) -> None:
    period = kwargs.get("global_attn_every_n_layers", 3)
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, period, FULL, SLIDING, offset=0)
    rope_by_layer_type(fields, kwargs, spec, "global_rope_theta", "local_rope_theta", both=True)
    fields["sliding_window"] = fields["local_attention"] // 2  # ModernBertConfig's property


def post_smollm3(fields: dict, kwargs: dict, spec: dict) -> None:
    kv_heads(fields)
    if fields.get("no_rope_layers") is None:
        interval = fields["no_rope_layer_interval"]
        fields["no_rope_layers"] = [
            int((i + 1) % interval != 0) for i in range(fields["num_hidden_layers"])
        ]
    if fields.get("layer_types") is None:
        window = fields.get("use_sliding_window") and fields.get("sliding_window") is not None
        fields["layer_types"] = [
            SLIDING if window and not rope else FULL for rope in fields["no_rope_layers"]
        ]


def post_llama4(fields: dict, kwargs: dict, spec: dict) -> None:
    kv_heads(fields)
    if not fields.get("no_rope_layers"):
        interval = fields["no_rope_layer_interval"]
        fields["no_rope_layers"] = [
            int((i + 1) % interval != 0) for i in range(fields["num_hidden_layers"])
        ]
    head_dim(fields)
    if fields.get("layer_types") is None:
        fields["layer_types"] = [CHUNKED if rope else FULL for rope in fields["no_rope_layers"]]


def post_minimax(fields: dict, kwargs: dict, spec: dict) -> None:
    kv_heads(fields)
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, 2, LINEAR, FULL)


def post_minimax_m2(fields: dict, kwargs: dict, spec: dict) -> None:
    rotary_dim = kwargs.get("rotary_dim", fields.get("rotary_dim"))
    if rotary_dim is not None:
        kwargs.setdefault("partial_rotary_factor", rotary_dim / fields["head_dim"])


def post_phi3(fields: dict, kwargs: dict, spec: dict) -> None:
    """Phi-3's own RoPE conversion: a base of 10,000 and a factor of 1 by default, and
    the old names ``su`` and ``yarn`` read as ``longrope``."""
    kv_heads(fields)
    rope_scaling = kwargs.pop("rope_scaling", None)
    rope = rope_scaling or fields["rope_parameters"] or {}
    rope.setdefault("rope_theta", kwargs.pop("rope_theta", 10_000.0))
    rope.setdefault("partial_rotary_factor", kwargs.get("partial_rotary_factor", 1.0))
    fields["rope_parameters"] = rope
    standardize_rope(fields, spec, fields.get("rope_theta"), fields.get("partial_rotary_factor"))
    if rope.get("rope_type") in ("su", "yarn"):
        rope["rope_type"] = "longrope"


def post_mllama(fields: dict, kwargs: dict, spec: dict) -> None:
    if fields.get("cross_attention_layers") is None:
        fields["cross_attention_layers"] = [3, 8, 13, 18, 23, 28, 33, 38]


def post_mla(fields: dict, kwargs: dict, spec: dict) -> None:
    """DeepSeek-V3, V3.2 and GLM-5: the config's head_dim is the rotary part's."""
    kv_heads(fields)
    fields["head_dim"] = fields["qk_rope_head_dim"]
    if "layer_types" in fields and fields["layer_types"] is None:
        fields["layer_types"] = ["indexed_attention"] * fields["num_hidden_layers"]


def post_kimi(fields: dict, kwargs: dict, spec: dict) -> None:
    """Kimi Linear: its linear layers' sizes and places from ``linear_attn_config``
    (layers numbered from 1), else a full layer every fourth from the fifth."""
    kv_heads(fields)
    fields["head_dim"] = fields["qk_rope_head_dim"]
    linear = kwargs.get("linear_attn_config") or {}
    fields["linear_head_dim"] = linear.get("head_dim", fields["linear_head_dim"])
    fields["linear_num_heads"] = linear.get("num_heads", fields["linear_num_heads"])
    fields["linear_conv_kernel_dim"] = linear.get(
        "short_conv_kernel_size", fields["linear_conv_kernel_dim"]
    )
    if fields.get("layer_types") is None:
        layers = fields["num_hidden_layers"]
        if "full_attn_layers" in linear and "kda_layers" in linear:
            kinds: list = [None] * layers
            for layer in linear["full_attn_layers"]:
                kinds[layer - 1] = FULL
            for layer in linear["kda_layers"]:
                kinds[layer - 1] = LINEAR
            fields["layer_types"] = kinds
        else:
            fields["layer_types"] = [FULL if i and i % 4 == 0 else LINEAR for i in range(layers)]


def post_gated_deltanet(fields: dict, kwargs: dict, spec: dict) -> None:
    """Qwen3-Next and Qwen3.5: a full layer every ``full_attention_interval`` (4), and a
    quarter of each head rotated unless the file says otherwise."""
    kwargs.setdefault("partial_rotary_factor", 0.25)
    if fields.get("layer_types") is None:
        interval = kwargs.pop("full_attention_interval", 4)
        fields["layer_types"] = every(fields, interval, FULL, LINEAR)


def post_jamba(fields: dict, kwargs: dict, spec: dict) -> None:
    """Jamba's layer kinds, a property of its class: attention where the layer's index
    is ``attn_layer_offset`` modulo ``attn_layer_period``."""
    kv_heads(fields)
    period, offset = fields["attn_layer_period"], fields["attn_layer_offset"]
    fields["layer_types"] = [
        FULL if i % period == offset else LINEAR for i in range(fields["num_hidden_layers"])
    ]


def post_nemotron_h(fields: dict, kwargs: dict, spec: dict) -> None:
    """Nemotron-H: its layers from ``hybrid_override_pattern`` (M: Mamba-2, *: attention,
    -: MLP, E: MoE) unless the file lists them; the Mamba sizes' old names."""
    for old, new in (("mamba_n_groups", "n_groups"), ("mamba_d_conv", "conv_kernel")):
        if old in kwargs:
            fields[new] = kwargs.pop(old)
    letters = {"M": LINEAR, "E": "moe", "*": FULL, "-": "mlp"}
    if "hybrid_override_pattern" in kwargs:
        pattern = kwargs.pop("hybrid_override_pattern")
        if fields.get("layers_block_type") is None:
            fields["layers_block_type"] = [letters[letter] for letter in pattern]
    elif fields.get("layers_block_type") is None:
        fields["layers_block_type"] = [LINEAR, "moe", FULL, "mlp"]
    fields["layers_block_type"] = [
        LEGACY_LAYER_TYPES.get(k, k) for k in fields["layers_block_type"]
    ]
    # A property of the class, the number of layers listed: a file's own is not kept.
    fields["num_hidden_layers"] = len(fields["layers_block_type"])
    kwargs.pop("num_hidden_layers", None)
    kv_heads(fields)


def post_falcon_h1(fields: dict, kwargs: dict, spec: dict) -> None:
    kv_heads(fields)
    inner = fields["mamba_d_ssm"]
    if inner is None:
        inner = fields["mamba_expand"] * fields["hidden_size"]
    if fields["mamba_d_head"] == "auto":
        fields["mamba_d_head"] = inner // fields["mamba_n_heads"]


def post_deepseek_v4(fields: dict, kwargs: dict, spec: dict) -> None:
    """DeepSeek-V4: its compression rates, its layers (from the old ``compress_ratios``,
    else two HCA layers then CSA and HCA in turn), and its two RoPE dicts."""
    ratios = kwargs.pop("compress_ratios", None)
    csa, hca = "compressed_sparse_attention", "heavily_compressed_attention"
    csa_rate = kwargs.pop("compress_rate_csa", None)
    hca_rate = kwargs.pop("compress_rate_hca", None)
    kwargs.pop("num_hash_layers", None)
    rope_head_dim = kwargs.pop("qk_rope_head_dim", None)
    layers = fields["num_hidden_layers"]
    if fields.get("compress_rates") is None:
        fields["compress_rates"] = dict(spec["extra"]["default_compress_rates"])
    if csa_rate is not None:
        fields["compress_rates"][csa] = csa_rate
    if hca_rate is not None:
        fields["compress_rates"][hca] = hca_rate
    by_ratio = spec["extra"]["compress_ratio_to_layer_type"]
    if fields.get("layer_types") is None and ratios is not None:
        fields["layer_types"] = [by_ratio[str(ratio)] for ratio in ratios]
    if fields.get("layer_types") is None:
        turns = [csa if i % 2 else hca for i in range(max(layers - 2, 0))]
        fields["layer_types"] = [hca] * min(layers, 2) + turns
    fields["layer_types"] = list(fields["layer_types"][:layers])
    if fields.get("partial_rotary_factor") is None:
        fields["partial_rotary_factor"] = (
            rope_head_dim / fields["head_dim"]
            if rope_head_dim is not None
            else spec["extra"]["default_partial_rotary_factor"]
        )
    rope = fields.get("rope_parameters") or {}
    if not (isinstance(rope.get("main"), dict) and isinstance(rope.get("compress"), dict)):
        yarn = {key: value for key, value in rope.items() if key not in ("main", "compress")}
        yarn |= kwargs.pop("rope_scaling", None) or {}
        main = {
            "rope_type": "default",
            "rope_theta": kwargs.pop("rope_theta", fields.get("rope_theta")),
            "partial_rotary_factor": fields["partial_rotary_factor"],
        }
        # The compressed layers' RoPE: their own base, the rotary share, the scaling
        # (YaRN with an attention factor of 1), as DeepseekV4Config builds it and its
        # validation names the type.
        compress = {
            **yarn,
            "rope_theta": fields.get("compress_rope_theta"),
            "partial_rotary_factor": fields["partial_rotary_factor"],
        }
        compress["rope_type"] = compress.get("rope_type", compress.get("type", "default"))
        if compress["rope_type"] == "yarn":
            compress.setdefault("attention_factor", 1.0)
        rope = {"main": main, "compress": compress}
    fields["rope_parameters"] = {"main": rope["main"], "compress": rope["compress"]}


# -- the classes that set a default or a layer pattern, each its own way ---------------


def rotary_share(share: float, *steps):
    """GLM, Persimmon, Phi, StableLM and Nemotron: ``kwargs.setdefault(
    "partial_rotary_factor", share)``, a rotary share the file may override, after the
    class's ``steps`` (Phi's key/value heads, Nemotron's head size)."""

    def post(fields: dict, kwargs: dict, spec: dict) -> None:
        for step in steps:
            step(fields)
        kwargs.setdefault("partial_rotary_factor", share)

    return post


def pattern(rule, *, default_rope: dict | None = None, heads: bool = True):
    """A class whose ``__post_init__`` sets ``layer_types`` by ``rule(fields, kwargs, i)``
    when the file gives none, fills ``num_key_value_heads``, and sets its own RoPE dict
    when the file gives none (``default_rope``)."""

    def post(fields: dict, kwargs: dict, spec: dict) -> None:
        if heads and "num_key_value_heads" in fields:
            kv_heads(fields)
        if fields.get("layer_types") is None:
            fields["layer_types"] = [
                rule(fields, kwargs, i) for i in range(fields["num_hidden_layers"])
            ]
        if default_rope is not None and fields.get("rope_parameters") is None:
            fields["rope_parameters"] = copy.deepcopy(default_rope)

    return post


def sliding_unless(test):
    """A ``pattern`` rule: a full layer where ``test(fields, i)``, a sliding one elsewhere."""
    return lambda fields, kwargs, i: FULL if test(fields, i) else SLIDING


LLAMA3_ROPE = {  # Apertus's and CWM's defaults, as each class writes them
    "rope_type": "llama3",
    "factor": 8.0,
    "original_max_position_embeddings": 8192,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}


def post_apertus(fields: dict, kwargs: dict, spec: dict) -> None:
    kv_heads(fields)
    if fields.get("rope_parameters") is None:
        fields["rope_parameters"] = {"rope_theta": 12_000_000.0, **LLAMA3_ROPE}


def post_cwm(fields: dict, kwargs: dict, spec: dict) -> None:
    """CWM: a full layer every fourth from the first; Llama 3's RoPE scaling by default."""
    if fields.get("rope_parameters") is None:
        scaling = LLAMA3_ROPE | {"factor": 16.0}
        fields["rope_parameters"] = {"rope_theta": 1_000_000.0, **scaling}
    pattern(sliding_unless(lambda fields, i: i % 4 == 0))(fields, kwargs, spec)
    fields["sliding_window"] = int(fields["sliding_window"]) if fields["sliding_window"] else None
    head_dim(fields)


def post_exaone4(fields: dict, kwargs: dict, spec: dict) -> None:
    """EXAONE 4.0 and K-EXAONE: a full layer every ``sliding_window_pattern``; with no
    window, a pattern of 0 (which the class divides by, as here, if it lists no layers)."""
    if fields.get("sliding_window") is None:
        fields["sliding_window_pattern"] = 0
    period = fields["sliding_window_pattern"]
    pattern(sliding_unless(lambda fields, i: (i + 1) % period == 0), heads=False)(
        fields, kwargs, spec
    )


def post_cohere2_moe(fields: dict, kwargs: dict, spec: dict) -> None:
    """Command A MoE: the first ``first_k_dense_replace`` layers (a key of the file, not
    a field) with their own window pattern, the rest with ``sliding_window_pattern``.
    The class standardizes its RoPE dict once before its layers are known, then again."""
    kv_heads(fields)
    rope, theta = fields.get("rope_parameters") or {}, fields.get("rope_theta")
    if rope or theta:
        fields["rope_parameters"] = rope
        standardize_rope(fields, spec, theta, fields.get("partial_rotary_factor"))
    dense = kwargs.pop("first_k_dense_replace", 0)
    if fields.get("layer_types") is None:
        prefix = fields["prefix_dense_sliding_window_pattern"]
        rest = fields["sliding_window_pattern"]
        fields["layer_types"] = [SLIDING if (i + 1) % prefix else FULL for i in range(dense)] + [
            SLIDING if (i + 1) % rest else FULL for i in range(fields["num_hidden_layers"] - dense)
        ]
    if fields.get("mlp_layer_types") is None:  # its attention rotates the dense ones
        layers = fields["num_hidden_layers"]
        fields["mlp_layer_types"] = ["dense" if i < dense else "sparse" for i in range(layers)]


def post_qwen2_moe(fields: dict, kwargs: dict, spec: dict) -> None:
    """Qwen2-MoE: odd layers (counted from 1) below ``max_window_layers`` slide, with
    ``use_sliding_window`` only; else the window is 0."""
    window = fields.get("use_sliding_window")
    if not window:
        fields["sliding_window"] = 0
    pattern(
        lambda fields, kwargs, i: (
            SLIDING if (i + 1) % 2 and i < fields["max_window_layers"] and window else FULL
        ),
        heads=False,
    )(fields, kwargs, spec)


def post_dots1(fields: dict, kwargs: dict, spec: dict) -> None:
    def rule(fields: dict, kwargs: dict, i: int) -> str:
        window = fields["sliding_window"] is not None
        return SLIDING if window and i >= fields["max_window_layers"] else FULL

    pattern(rule)(fields, kwargs, spec)


def post_granite_swa(fields: dict, kwargs: dict, spec: dict) -> None:
    """Granite SWA: a full layer every fourth from the first; each layer's RoPE base
    (``layer_rope_theta``) the model's own unless the file lists them."""
    pattern(sliding_unless(lambda fields, i: i % 4 == 0))(fields, kwargs, spec)
    convert_rope(fields, kwargs, spec)  # the class sets layer_rope_theta after RoPE
    if fields.get("layer_rope_theta") is None:
        theta = fields["rope_parameters"]["rope_theta"]
        fields["layer_rope_theta"] = [theta] * fields["num_hidden_layers"]


def post_modernbert_decoder(fields: dict, kwargs: dict, spec: dict) -> None:
    period = kwargs.get("global_attn_every_n_layers", 3)
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, period, FULL, SLIDING, offset=0)
    local = fields["local_attention"]
    fields["sliding_window"] = local // 2 if local else -1
    rope_by_layer_type(fields, kwargs, spec, "global_rope_theta", "local_rope_theta", both=True)


def post_gemma3n(fields: dict, kwargs: dict, spec: dict) -> None:
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, 5, FULL, SLIDING)
    rope_by_layer_type(fields, kwargs, spec, "rope_theta", "rope_local_base_freq")


def post_olmo_hybrid(fields: dict, kwargs: dict, spec: dict) -> None:
    """OLMo Hybrid: a full layer every fourth (the last, if that leaves none), and its
    Gated DeltaNet sizes from the attention's."""
    if fields.get("layer_types") is None:
        kinds = every(fields, 4, FULL, LINEAR)
        if kinds and FULL not in kinds:
            kinds[-1] = FULL
        fields["layer_types"] = kinds
    heads = fields["num_attention_heads"]
    for name in ("linear_num_key_heads", "linear_num_value_heads"):
        if fields.get(name) is None:
            fields[name] = heads
    if fields.get("linear_key_head_dim") is None:
        fields["linear_key_head_dim"] = int(
            0.75 * fields["hidden_size"] / fields["linear_num_key_heads"]
        )
    if fields.get("linear_value_head_dim") is None:
        fields["linear_value_head_dim"] = 2 * fields["linear_key_head_dim"]
    kv_heads(fields)


def post_lfm2(fields: dict, kwargs: dict, spec: dict) -> None:
    """LFM2: attention at ``full_attn_idxs`` (every layer if none), convolutions elsewhere;
    the old names ``tie_embedding`` and ``block_ff_dim``."""
    if fields.get("layer_types") is None:
        layers = fields["num_hidden_layers"]
        if fields.get("full_attn_idxs") is None:
            fields["full_attn_idxs"] = list(range(layers))
        attention = fields["full_attn_idxs"]
        fields["layer_types"] = [FULL if i in attention else "conv" for i in range(layers)]
    fields["tie_word_embeddings"] = kwargs.pop("tie_embedding", fields["tie_word_embeddings"])
    fields["intermediate_size"] = kwargs.pop("block_ff_dim", fields["intermediate_size"])


def post_lfm3(fields: dict, kwargs: dict, spec: dict) -> None:
    """LFM3: attention on the third layer of each four, full, and on the first of each
    four after the first, sliding; convolutions elsewhere; a RoPE dict per kind."""
    if fields.get("rope_parameters") is None:
        fields["rope_parameters"] = {
            SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
            FULL: {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.5},
        }
    if fields.get("layer_types") is None:
        fields["layer_types"] = [
            FULL if i % 4 == 2 else SLIDING if i % 4 == 0 and i > 0 else "conv"
            for i in range(fields["num_hidden_layers"])
        ]


def post_bailing_hybrid(fields: dict, kwargs: dict, spec: dict) -> None:
    """Ling 3.0: its linear layers' sizes are the attention's; a full layer closes each
    group of ``layer_group_size``; the config's head_dim is the rotary part's."""
    fields["linear_head_dim"] = fields["head_dim"]
    fields["linear_num_heads"] = fields["num_attention_heads"]
    fields["linear_conv_kernel_dim"] = fields["short_conv_kernel_size"]
    group = fields["layer_group_size"]
    if fields.get("layer_types") is None:
        fields["layer_types"] = every(fields, group, FULL, LINEAR)
    if fields.get("rope_parameters") is None:
        fields["rope_parameters"] = {"rope_type": "default", "rope_theta": fields["rope_theta"]}
    kv_heads(fields)
    fields["qk_head_dim"] = fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    fields["head_dim"] = fields["qk_rope_head_dim"]


def post_mamba2_hybrid(fields: dict, kwargs: dict, spec: dict) -> None:
    """Bamba and Granite 4.0: the Mamba-2 head size from its width; Bamba's attention
    layers at ``attn_layer_indices`` (a property) and half of each head rotated
    (``kwargs["partial_rotary_factor"] = 0.5``, over the file's own); Granite's layers
    all Mamba-2 unless the file lists them."""
    kv_heads(fields)
    if fields["mamba_d_head"] == "auto":
        fields["mamba_d_head"] = (
            fields["mamba_expand"] * fields["hidden_size"] // fields["mamba_n_heads"]
        )
    layers = fields["num_hidden_layers"]
    if spec["config_class"] == "BambaConfig":
        kwargs["partial_rotary_factor"] = 0.5
        where = fields.get("attn_layer_indices") or ()
        fields["layers_block_type"] = [FULL if i in where else LINEAR for i in range(layers)]
    elif fields.get("layer_types") is None:
        fields["layer_types"] = [LINEAR] * layers


def post_zamba(fields: dict, kwargs: dict, spec: dict) -> None:
    """Zamba: its attention twice the hidden size wide (the hidden state and the
    embeddings side by side); a hybrid layer where the layer's index, less 3, is
    ``attn_layer_offset`` modulo ``attn_layer_period``, after two Mamba layers and one
    hybrid."""
    hidden, heads = fields["hidden_size"], fields["num_attention_heads"]
    fields["attention_hidden_size"] = fields.get("attention_hidden_size") or 2 * hidden
    fields["attention_head_dim"] = fields.get("attention_head_dim") or 2 * hidden // heads
    if fields.get("layers_block_type") is None:
        period, offset = fields["attn_layer_period"], fields["attn_layer_offset"]
        fields["layers_block_type"] = [LINEAR, LINEAR, "hybrid"] + [
            "hybrid" if i % period == offset else LINEAR
            for i in range(fields["num_hidden_layers"] - 3)
        ]
    else:
        fields["layers_block_type"] = [
            LEGACY_LAYER_TYPES.get(k, k) for k in fields["layers_block_type"]
        ]


def post_zamba2(fields: dict, kwargs: dict, spec: dict) -> None:
    """Zamba2: as Zamba, its attention twice the hidden size wide; its released
    54-layer pattern of Mamba-2 and hybrid layers unless the file lists them."""
    hidden, heads = fields["hidden_size"], fields["num_attention_heads"]
    fields["attention_hidden_size"] = 2 * hidden
    fields["attention_head_dim"] = 2 * hidden // heads
    fields["mamba_headdim"] = int(fields["mamba_expand"] * hidden) // fields["n_mamba_heads"]
    if fields.get("use_long_context"):
        fields["max_position_embeddings"] = 16384
    kv_heads(fields)
    if fields.get("layers_block_type") is None:
        block = [LINEAR] * 5 + ["hybrid"]
        fields["layers_block_type"] = (
            [LINEAR] + block * 7 + [LINEAR] * 4 + ["hybrid"] + [LINEAR] * 3 + ["hybrid"]
        ) + [LINEAR] * 2
    else:
        fields["layers_block_type"] = [
            LEGACY_LAYER_TYPES.get(k, k) for k in fields["layers_block_type"]
        ]


def post_minicpm3(fields: dict, kwargs: dict, spec: dict) -> None:
    """MiniCPM3: latent attention, whose head_dim is the rotary part's; values of
    ``hidden_size / heads`` when the file sets ``v_head_dim`` to null."""
    fields["head_dim"] = fields["qk_rope_head_dim"]
    fields["qk_head_dim"] = fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    if fields.get("v_head_dim") is None:
        fields["v_head_dim"] = fields["hidden_size"] // fields["num_attention_heads"]
    kv_heads(fields)


def post_longcat_flash(fields: dict, kwargs: dict, spec: dict) -> None:
    """LongCat-Flash: two attention layers in each of its ``num_layers`` blocks (the
    class's ``num_hidden_layers`` is a property, ``2 * num_layers``, whose setter keeps
    half of a file's ``num_hidden_layers``: 7 gives 3 blocks)."""
    if "num_hidden_layers" in kwargs:
        fields["num_layers"] = kwargs.pop("num_hidden_layers") // 2
    kv_heads(fields)
    if fields.get("qk_head_dim") is None:
        fields["qk_head_dim"] = fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    fields["num_hidden_layers"] = 2 * fields["num_layers"]


def post_ministral3(fields: dict, kwargs: dict, spec: dict) -> None:
    if fields.get("rope_parameters") is None:
        fields["rope_parameters"] = {
            "type": "yarn",
            "rope_theta": 1_000_000.0,
            "factor": 16.0,
            "original_max_position_embeddings": 16384,
            "max_position_embeddings": fields["max_position_embeddings"],
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale_all_dim": 1.0,
            "mscale": 1.0,
            "llama_4_scaling_beta": 0.1,
        }
    head_dim(fields)
    kv_heads(fields)


def post_mpt(fields: dict, kwargs: dict, spec: dict) -> None:
    fields["attn_config"] = sub_config(spec, "attn_config", fields.get("attn_config"))


def post_dbrx(fields: dict, kwargs: dict, spec: dict) -> None:
    """DBRX: its key/value heads from ``attn_config.kv_n_heads``."""
    fields["attn_config"] = sub_config(spec, "attn_config", fields.get("attn_config"))
    fields["ffn_config"] = sub_config(spec, "ffn_config", fields.get("ffn_config"))
    fields["ffn_config"].hidden_size = fields["d_model"]
    fields["num_key_value_heads"] = fields["attn_config"].kv_n_heads


def post_jetmoe(fields: dict, kwargs: dict, spec: dict) -> None:
    """JetMoE: its query heads, one per expert of each key/value head (mixture of
    attention heads): ``num_key_value_heads * num_experts_per_tok``."""
    fields["num_attention_heads"] = fields["num_key_value_heads"] * fields["num_experts_per_tok"]


def post_gpt_neo(fields: dict, kwargs: dict, spec: dict) -> None:
    """GPT-Neo: ``attention_layers`` from ``attention_types``, [[kinds, repeats], ...]."""
    if fields.get("attention_types") is None:
        fields["attention_types"] = [[["global", "local"], 12]]
    fields["attention_layers"] = [
        kind
        for kinds, repeats in fields["attention_types"]
        for _ in range(repeats)
        for kind in kinds
    ]


def post_gpt_neox(fields: dict, kwargs: dict, spec: dict) -> None:
    """GPT-NeoX and GPT-NeoX-Japanese: RoPE's base and share under their old names,
    ``rotary_emb_base`` and ``rotary_pct`` (a quarter for GPT-NeoX, all for the
    Japanese), never ``rope_theta``."""
    share = 0.25 if spec["config_class"] == "GPTNeoXConfig" else 1.0
    rope = kwargs.pop("rope_scaling", None) or fields["rope_parameters"] or {}
    rope.setdefault("rope_theta", kwargs.pop("rotary_emb_base", spec["default_theta"]))
    rope.setdefault("partial_rotary_factor", kwargs.pop("rotary_pct", share))
    fields["rope_parameters"] = rope
    standardize_rope(fields, spec, fields.get("rope_theta"), fields.get("partial_rotary_factor"))


def post_mellum(fields: dict, kwargs: dict, spec: dict) -> None:
    """Mellum: full layers, a RoPE dict per kind; the file's RoPE kept as given."""
    if fields.get("layer_types") is None:
        fields["layer_types"] = [FULL] * fields["num_hidden_layers"]
    if fields.get("rope_parameters") is None:
        fields["rope_parameters"] = {
            FULL: {"rope_type": "default", "rope_theta": 500_000.0},
            SLIDING: {"rope_type": "default", "rope_theta": 10_000.0},
        }


def post_mimo_v2_flash(fields: dict, kwargs: dict, spec: dict) -> None:
    """MiMo-V2-Flash: full on the first layer and every sixth, a RoPE dict per kind, the
    file's RoPE kept as given; ``sliding_window_size`` previous tokens and the query."""
    pattern(
        sliding_unless(lambda fields, i: i == 0 or not (i + 1) % 6),
        default_rope={
            FULL: {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.334},
            SLIDING: {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.334},
        },
        heads=False,
    )(fields, kwargs, spec)
    if kwargs.get("sliding_window_size") is not None:
        fields["sliding_window"] = kwargs["sliding_window_size"] + 1


def post_hrm_text(fields: dict, kwargs: dict, spec: dict) -> None:
    """HRM: a stack of layers run ``H_cycles * (L_cycles + 1)`` times, each run caching its
    own keys and values: ``num_hidden_layers`` becomes the runs' count."""
    if fields.get("num_layers_per_stack") is None:
        fields["num_layers_per_stack"] = fields["num_hidden_layers"]
        runs = fields["H_cycles"] * (fields["L_cycles"] + 1)
        fields["num_hidden_layers"] = fields["num_layers_per_stack"] * runs


#: Each model type's stand-in for its class's ``__post_init__``.
POST_INIT = {
    "llama": post_llama,
    "mistral": post_llama,
    "qwen2": post_qwen,
    "qwen3": post_qwen,
    "qwen3_moe": post_qwen,
    "olmo2": lambda fields, kwargs, spec: kv_heads(fields),
    "olmo3": post_olmo3,
    "smollm3": post_smollm3,
    "cohere2": post_cohere2,
    "gemma2": post_alternating,
    "gpt_oss": post_alternating,
    "gemma3_text": post_gemma3,
    "gemma3n_text": post_gemma3n,
    "gemma4_text": post_gemma4,
    "gemma4_unified_text": post_gemma4,
    "minimax": post_minimax,
    "minimax_m2": post_minimax_m2,
    "phi3": post_phi3,
    "llama4_text": post_llama4,
    "modernbert": post_modernbert,
    "modernbert-decoder": post_modernbert_decoder,
    "mllama_text_model": post_mllama,
    "deepseek_v3": post_mla,
    "deepseek_v32": post_mla,
    "glm_moe_dsa": post_mla,
    "kimi_linear": post_kimi,
    "qwen3_next": post_gated_deltanet,
    "qwen3_5_text": post_gated_deltanet,
    "qwen3_5_moe_text": post_gated_deltanet,
    "jamba": post_jamba,
    "nemotron_h": post_nemotron_h,
    "falcon_h1": post_falcon_h1,
    "deepseek_v4": post_deepseek_v4,
    "glm": rotary_share(0.5),
    "glm4": rotary_share(0.5),
    "glm4_moe": rotary_share(0.5),
    "persimmon": rotary_share(0.5),
    "phi": rotary_share(0.5, kv_heads),
    "nemotron": rotary_share(0.5, head_dim),
    "stablelm": rotary_share(0.25),
    "gpt_neox": post_gpt_neox,
    "gpt_neox_japanese": post_gpt_neox,
    "afmoe": pattern(
        sliding_unless(lambda fields, i: (i + 1) % fields["global_attn_every_n_layers"] == 0)
    ),
    "vaultgemma": pattern(sliding_unless(lambda fields, i: (i + 1) % 2 == 0), heads=False),
    "kolibri1": pattern(sliding_unless(lambda fields, i: (i + 1) % 5 == 0), heads=False),
    "granite_swa": post_granite_swa,
    "granitemoe_swa": post_granite_swa,
    "exaone4": post_exaone4,
    "exaone_moe": post_exaone4,
    "cohere2_moe": post_cohere2_moe,
    "qwen2_moe": post_qwen2_moe,
    "dots1": post_dots1,
    "apertus": post_apertus,
    "cwm": post_cwm,
    "olmo_hybrid": post_olmo_hybrid,
    "lfm2": post_lfm2,
    "lfm3": post_lfm3,
    "bailing_hybrid": post_bailing_hybrid,
    "bamba": post_mamba2_hybrid,
    "granitemoehybrid": post_mamba2_hybrid,
    "zamba": post_zamba,
    "zamba2": post_zamba2,
    "minicpm3": post_minicpm3,
    "longcat_flash": post_longcat_flash,
    "ministral3": post_ministral3,
    "jetmoe": post_jetmoe,
    "gpt_neo": post_gpt_neo,
    "mellum": post_mellum,
    "mimo_v2_flash": post_mimo_v2_flash,
    "hrm_text": post_hrm_text,
    "mpt": post_mpt,
    "dbrx": post_dbrx,
}
# Types whose post-init sets the RoPE dicts itself, or whose class keeps them as given
# (``convert_rope_params_to_dict`` returns the file's keys untouched).
OWN_ROPE = (
    "gemma3_text",
    "gemma3n_text",
    "olmo3",
    "modernbert",
    "modernbert-decoder",
    "phi3",
    "gemma4_text",
    "gemma4_unified_text",
    "deepseek_v4",
    "granite_swa",
    "granitemoe_swa",
    "gpt_neox",
    "gpt_neox_japanese",
    "mellum",
    "mimo_v2_flash",
)


# -- the page's call ------------------------------------------------------------------


def read(
    text: str,
    exported: dict,
    *,
    tokens: int,
    batch: int = 1,
    cache_dtype: str = "bf16",
    state_dtype: str = "fp32",
) -> dict:
    """What the page shows for a pasted ``config.json``: the recipe, the strip and the
    bill per layer kind, or the error a reader should see, as ``{"error": message}``."""
    from attention.models.costs import bill
    from attention.models.readers import facts_from_config_object
    from attention.models.text import format_bytes, kind_name, layer_strip, recipe

    try:
        config = build(parse(text), exported)
        facts = facts_from_config_object(config)
        cost = bill(facts, tokens, batch=batch, cache_dtype=cache_dtype, state_dtype=state_dtype)
    except (ValueError, TypeError, KeyError) as error:
        message = str(error)
        if isinstance(error, KeyError):
            message = f"expected the config to hold the field {message}, got none"
        return {"error": message}
    return {
        "model_type": facts.name,
        "recipe": recipe(facts),
        "strip": layer_strip(facts),
        "cache": cost.cache,
        "cache_text": format_bytes(cost.cache),
        "per_kind": [
            {"kind": k, "name": kind_name(facts, k), "bytes": size, "text": format_bytes(size)}
            for k, size in cost.per_kind.items()
        ],
    }
