"""The model atlas: real models' attention, from their configs, with what they cost.

A room of its own above the attention core: it imports the core's layers and never
the other way round.

* :mod:`~attention.models.facts`: :class:`ModelFacts`, one typed group per mechanism,
  and the layer kinds (``FULL``, ``SLIDING``, ...), as ``transformers`` names them.
* :mod:`~attention.models.table`: :data:`.MODELS`, every real model the site names,
  from its released ``config.json``, cited.
* :mod:`~attention.models.readers`: :func:`facts_from_config`, any model's facts from
  its ``transformers`` config, a ``config.json`` or its path.
* :mod:`~attention.models.costs`: :func:`cache_profile`, :func:`parameter_count` and
  :func:`bill`, what serving a model takes.
* :mod:`~attention.models.recipes`: :func:`layer_for`, any layer of a model assembled
  from the core's parts by its family's builder (:func:`qwen3_next_layer`, ...), at its
  sizes or smaller ones (:class:`Sizes`).
* :mod:`~attention.models.weights`: :func:`from_transformers`, the layer of a model
  ``transformers`` built, as the package's module, with its weights.
* :mod:`~attention.models.text`: :func:`recipe` and :func:`layer_strip`, a model's
  attention in words.
* :mod:`~attention.models.released`: :func:`released_config`, each model's released
  ``config.json``, stored with the package and cited, and :func:`released_parameters`,
  its exact parameter count, of the class its file names (:func:`released_counted_class`).
* ``python -m attention.models CONFIG_OR_NAME``: the recipe, the strip and the bill.

>>> from attention.models import MODELS, bill, recipe
>>> print(recipe(MODELS["Mistral 7B"]))  # doctest: +ELLIPSIS
Mistral 7B: 32 layers, all sliding (window 4,096); GQA, ...
>>> bill(MODELS["Llama 2 7B"], 4096).cache // 2**30  # GiB of 16-bit keys and values
2
"""

from attention.models.costs import (
    BITS,
    Bill,
    SelectionCost,
    bill,
    cache_bytes,
    cache_profile,
    cross_cache_bytes,
    indexer_cache_bytes_per_token,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    layer_cache_bytes,
    layer_cache_numbers,
    layer_kv_cache_bytes_per_token,
    layer_state_bytes,
    layer_tokens_kept,
    parameter_count,
    selection_cost,
    state_bytes,
)
from attention.models.facts import (
    CHUNKED,
    CONV,
    CROSS,
    CSA,
    FULL,
    HCA,
    HYBRID,
    INDEXED,
    KINDS,
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
    Quantization,
    Rope,
    Scores,
    ShortConv,
    Sliding,
    TemperatureTuning,
    Weights,
)
from attention.models.readers import (
    LOADED_AS,
    as_config,
    facts_from_config,
    facts_from_config_object,
    read_model_types,
)
from attention.models.recipes import (
    BUILDERS,
    Sizes,
    command_a_layer,
    deepseek_v3_layer,
    deepseek_v4_layer,
    deepseek_v32_layer,
    gated_deltanet_layer,
    gemma2_layer,
    gemma3_layer,
    gemma4_layer,
    gpt_oss_layer,
    layer_for,
    llama4_layer,
    llama_32_vision_layer,
    llama_layer,
    mamba2_layer,
    olmo2_layer,
    qwen3_layer,
    qwen3_next_layer,
)
from attention.models.released import (
    released_config,
    released_config_source,
    released_counted_class,
    released_names,
    released_parameters,
)
from attention.models.table import MODELS
from attention.models.text import (
    STRIP_LETTERS,
    format_bytes,
    format_number,
    kind_name,
    layer_strip,
    recipe,
)
from attention.models.weights import MAMBA2_CLASSES, TRANSFORMERS_CLASSES, from_transformers

__all__ = [
    "BITS",
    "BUILDERS",
    "CHUNKED",
    "CONV",
    "CROSS",
    "CSA",
    "FULL",
    "HCA",
    "HYBRID",
    "INDEXED",
    "KINDS",
    "LINEAR",
    "LOADED_AS",
    "MAMBA",
    "MAMBA2_CLASSES",
    "MODELS",
    "NO_MIXER",
    "SLIDING",
    "STRIP_LETTERS",
    "TRANSFORMERS_CLASSES",
    "Bill",
    "Chunked",
    "Compressed",
    "Cross",
    "GlobalLayers",
    "Indexer",
    "Latent",
    "LayerParts",
    "LinearAttention",
    "Mamba",
    "ModelFacts",
    "Quantization",
    "Rope",
    "Scores",
    "SelectionCost",
    "ShortConv",
    "Sizes",
    "Sliding",
    "TemperatureTuning",
    "Weights",
    "as_config",
    "bill",
    "cache_bytes",
    "cache_profile",
    "command_a_layer",
    "cross_cache_bytes",
    "deepseek_v3_layer",
    "deepseek_v4_layer",
    "deepseek_v32_layer",
    "facts_from_config",
    "facts_from_config_object",
    "format_bytes",
    "format_number",
    "from_transformers",
    "gated_deltanet_layer",
    "gemma2_layer",
    "gemma3_layer",
    "gemma4_layer",
    "gpt_oss_layer",
    "indexer_cache_bytes_per_token",
    "kind_name",
    "kv_cache_bytes",
    "kv_cache_bytes_per_token",
    "layer_cache_bytes",
    "layer_cache_numbers",
    "layer_for",
    "layer_kv_cache_bytes_per_token",
    "layer_state_bytes",
    "layer_strip",
    "layer_tokens_kept",
    "llama4_layer",
    "llama_32_vision_layer",
    "llama_layer",
    "mamba2_layer",
    "olmo2_layer",
    "parameter_count",
    "qwen3_layer",
    "qwen3_next_layer",
    "read_model_types",
    "recipe",
    "released_config",
    "released_config_source",
    "released_counted_class",
    "released_names",
    "released_parameters",
    "selection_cost",
    "state_bytes",
]
