"""The table of real models (``attention.models.table``): each entry against its
sources, and the lint that keeps every page taking its numbers from it.

Each entry names its checkpoint and sources; the ``transformers`` config class built
from an entry's fields reads the same attention (heads, layer kinds, RoPE, windows,
the mechanisms' sizes), and transformers' own caches and states, built from it, hold
what the table counts, to the byte; the weight counts are those of the full models.
The schema's groups and the figures they derive are ``tests/test_models_facts.py``'s.

The lint reads every chapter, the home page and every gallery script, and fails on
a number that the table holds or derives (131,072 bytes, a window of 4096, 32 layers)
typed into the text or code instead of computed: a typed number drifts when the table
is corrected, a computed one cannot. Printed output (a cell's ``expect``, a script's
``# Expected output:``) is exempt, since the build checks it against the computation.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
import transformers

from attention import MODELS, ModelFacts
from attention.models import (
    cache_bytes,
    cross_cache_bytes,
    indexer_cache_bytes_per_token,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    layer_kv_cache_bytes_per_token,
    layer_state_bytes,
    state_bytes,
)
from attention.models.facts import (
    CHUNKED,
    CROSS,
    CSA,
    FULL,
    HCA,
    INDEXED,
    INDEXER_SIZES,
    LINEAR,
    LINEAR_SIZES,
    MAMBA,
    NO_MIXER,
    SLIDING,
    LinearAttention,
)

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(
    [
        *(ROOT / "docs" / "chapters").glob("*.md"),
        ROOT / "docs" / "index.md",
        ROOT / "docs" / "which-model-uses-what.md",
    ]
)
SCRIPTS = sorted((ROOT / "gallery").glob("*.py"))


# -- each entry names its sources ----------------------------------------------------


@pytest.mark.parametrize("facts", MODELS.values(), ids=list(MODELS))
def test_every_entry_names_its_checkpoint_and_sources(facts: ModelFacts) -> None:
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", facts.checkpoint)
    assert f"huggingface.co/{facts.checkpoint}/" in facts.source
    assert facts.context_source
    limit = facts.max_position_embeddings  # None: the config sets none (ALiBi)
    assert limit is None or facts.trained_context <= limit
    # A weight count with its source, and RoPE with its base, are groups (Weights, Rope):
    # one cannot be given without the other.


# -- the table against transformers' config classes -----------------------------------

# The config fields an entry copies, read by the config's own names where ModelFacts keeps
# them as views of its groups (sliding_window is local.window), else in the group
# (global_layers.num_kv_heads).
FIELDS = {  # ModelFacts attribute, or group.field -> the config field it copies
    "layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "max_position_embeddings": "max_position_embeddings",
    "sliding_window": "sliding_window",
    "kv_lora_rank": "kv_lora_rank",
    "q_lora_rank": "q_lora_rank",
    "qk_nope_head_dim": "qk_nope_head_dim",
    "qk_rope_head_dim": "qk_rope_head_dim",
    "v_head_dim": "v_head_dim",
    "query_pre_attn_scalar": "query_pre_attn_scalar",
    "attn_logit_softcapping": "attn_logit_softcapping",
    "final_logit_softcapping": "final_logit_softcapping",
    "attention_chunk_size": "attention_chunk_size",
    "global_head_dim": "global_head_dim",
    "global_layers.num_kv_heads": "num_global_key_value_heads",
    "floor_scale": "floor_scale",
    "attn_scale": "attn_scale",
    "index_n_heads": "index_n_heads",
    "index_head_dim": "index_head_dim",
    "index_topk": "index_topk",
    **{name: name for name in LINEAR_SIZES},  # Qwen3-Next and Qwen3.5 spell them so
}
FLAGS = {  # attributes whose default means "absent": passed only when set
    "attention_k_eq_v": "attention_k_eq_v",
    "num_kv_shared_layers": "num_kv_shared_layers",
    "attn_temperature_tuning": "attn_temperature_tuning",
}
GPT2_FIELDS = {
    "layers": "n_layer",
    "hidden_size": "n_embd",
    "num_heads": "n_head",
    "max_position_embeddings": "n_positions",
}
BLOOM_FIELDS = {  # no position limit: ALiBi needs none
    "layers": "n_layer",
    "hidden_size": "hidden_size",
    "num_heads": "n_head",
}
WHISPER_FIELDS = {  # the decoder's, and the encoder's output it cross-attends to
    "layers": "decoder_layers",
    "hidden_size": "d_model",
    "num_heads": "decoder_attention_heads",
    "max_position_embeddings": "max_target_positions",
    "max_source_positions": "max_source_positions",
}


def _read(facts: ModelFacts, attribute: str):
    """An attribute, or ``group.field``: ``None`` where the model lacks the group."""
    group, _, field = attribute.rpartition(".")
    owner = getattr(facts, group) if group else facts
    return getattr(owner, field) if owner is not None else None


def released_config(facts: ModelFacts):
    """The transformers config built from what the released config.json holds.

    Attributes listed in ``class_defaults`` are left out, so that the config class
    supplies them, as it does when it reads the released file.
    """
    fields = {
        "GPT2Config": GPT2_FIELDS,
        "BloomConfig": BLOOM_FIELDS,
        "WhisperConfig": WHISPER_FIELDS,
    }.get(facts.config_class, FIELDS)
    if facts.config_class == "KimiLinearConfig":  # its file nests them: _linear_as_released
        fields = {key: name for key, name in fields.items() if key not in LINEAR_SIZES}
    kwargs = {
        name: _read(facts, attribute)
        for attribute, name in fields.items()
        if attribute not in facts.class_defaults and _read(facts, attribute) is not None
    }
    kwargs |= {
        name: getattr(facts, attribute)
        for attribute, name in FLAGS.items()
        if getattr(facts, attribute)
    }
    kwargs |= {
        name: getattr(facts, name)
        for name in LAYER_NUMBERS
        if name not in facts.class_defaults and _class_has(facts.config_class, name)
    }
    if "head_dim" in _explicit(facts):
        kwargs["head_dim"] = facts.head_dim
    if facts.sliding_window is None and _default_window(facts.config_class) is not None:
        kwargs["sliding_window"] = None  # the file's "sliding_window": null (Mistral Small)
    kwargs |= _pattern_as_released(facts)
    if "local_attention" in kwargs:  # ModernBERT's file holds the whole span instead
        del kwargs["sliding_window"]
    if facts.config_class in LEGACY_ROPE:  # "rope_theta" and "rope_scaling", as released
        kwargs["rope_theta"] = facts.rope_theta
        if facts.rope_scaling is not None:
            kwargs["rope_scaling"] = dict(facts.rope_scaling)
    elif facts.rope_theta is not None and "rope_theta" not in facts.class_defaults:
        full = {
            "rope_type": "default",
            **(facts.rope_scaling or {}),
            "rope_theta": facts.rope_theta,
        }
        if facts.local_rope_theta is not None:  # one dict per layer type (Gemma 4)
            local = {"rope_type": "default", "rope_theta": facts.local_rope_theta}
            full = {FULL: full, SLIDING: local}
        if facts.config_class in ROTARY_SHARE_PER_TYPE:
            share = {"partial_rotary_factor": facts.partial_rotary_factor}
            full = {kind: parameters | share for kind, parameters in full.items()}
        kwargs["rope_parameters"] = full
    elif facts.rope_scaling is not None:
        kwargs["rope_scaling"] = dict(facts.rope_scaling)
    return getattr(transformers, facts.config_class)(**kwargs)


# Config classes whose released files give RoPE as "rope_theta" and "rope_scaling", which
# the class spreads over its layer types (Olmo 3: YaRN on the full layers only) or its
# rotations (DeepSeek-V4: the main one and the compressed entries').
LEGACY_ROPE = ("Olmo3Config", "DeepseekV4Config")

# Config classes that read the rotary share only inside each layer type's RoPE dict:
# MiMoV2FlashConfig keeps its rope_parameters as given, with no top-level
# partial_rotary_factor folded in (its defaults hold 0.334 in both dicts).
ROTARY_SHARE_PER_TYPE = ("MiMoV2FlashConfig",)


# A bias on the projections and the RMS norms' epsilon: fields of most config classes
LAYER_NUMBERS = ("attention_bias", "rms_norm_eps")


def _class_has(config_class: str, name: str) -> bool:
    """Whether the config class has the field ``name`` (with a default of its own)."""
    return hasattr(getattr(transformers, config_class)(), name)


def _default_window(config_class: str) -> int | None:
    """The window a config class gives when the file names none."""
    return getattr(getattr(transformers, config_class)(), "sliding_window", None)


def _pattern_as_released(facts: ModelFacts) -> dict:
    """The layer pattern, NoPE layers and switches, spelled as each released file does."""
    kwargs: dict = {}
    if facts.config_class in ("Gemma4TextConfig", "GptOssConfig", "Olmo3Config"):
        kwargs["layer_types"] = list(facts.layer_types)  # a list per layer
    local = facts.local
    nope_every = facts.rope.nope_every if facts.rope is not None else None
    if facts.config_class == "Cohere2Config":  # its full layers are its NoPE layers
        kwargs["sliding_window_pattern"] = local.global_every
    elif nope_every is not None:  # Llama 4 and SmolLM3: 1 = this layer uses RoPE
        kwargs["no_rope_layers"] = [int(rope) for rope in facts.uses_rope]
    if facts.config_class == "NemotronHConfig":
        kwargs |= _mamba_as_released(facts)
    if facts.config_class == "DeepseekV4Config":
        kwargs |= _compressed_as_released(facts)
    if facts.config_class == "SmolLM3Config":
        kwargs |= {"no_rope_layer_interval": nope_every, "use_sliding_window": False}
    if isinstance(local, LinearAttention) and local.global_every is not None:  # Qwen
        kwargs["full_attention_interval"] = local.global_every
    if facts.config_class == "KimiLinearConfig":
        kwargs["linear_attn_config"] = _linear_as_released(facts)
    if facts.config_class == "MiniMaxM2Config":  # the share of each head RoPE turns
        kwargs["rotary_dim"] = int(facts.head_dim * facts.partial_rotary_factor)
    elif facts.config_class == "DeepseekV4Config":
        kwargs["qk_rope_head_dim"] = int(facts.head_dim * facts.partial_rotary_factor)
    elif facts.partial_rotary_factor != 1.0:
        kwargs["partial_rotary_factor"] = facts.partial_rotary_factor
    if facts.parts is not None and facts.parts.qk_norm == "l2":  # Llama 4
        kwargs["use_qk_norm"] = True
    if facts.cross_attention_layers is not None:  # Llama 3.2 Vision: a list in its file
        kwargs["cross_attention_layers"] = list(facts.cross_attention_layers)
    if facts.config_class == "ModernBertConfig":  # its file's fields, which it reads so
        full = local.full_attention_layers
        kwargs["global_attn_every_n_layers"] = full[1] - full[0]
        kwargs["local_attention"] = 2 * facts.sliding_window  # its half is sliding_window
    return kwargs


def _mamba_as_released(facts: ModelFacts) -> dict:
    """Nemotron-H's layers, one letter each in the file's ``hybrid_override_pattern``,
    and its Mamba-2 sizes."""
    letters = {MAMBA: "M", FULL: "*", NO_MIXER: "-"}
    mamba = facts.mamba
    return {
        "hybrid_override_pattern": "".join(letters[kind] for kind in facts.layer_types),
        "mamba_num_heads": mamba.num_heads,
        "mamba_head_dim": mamba.inner_size // mamba.num_heads,
        "ssm_state_size": mamba.state_size,
        "n_groups": mamba.n_groups,
        "conv_kernel": mamba.conv_kernel_dim,
    }


def _compressed_as_released(facts: ModelFacts) -> dict:
    """DeepSeek-V4's layers as the file's ``compress_ratios`` (tokens per compressed
    entry, 0 in a sliding layer only), the compressed layers' RoPE base and scaling (the
    file's ``rope_scaling``, without the attention factor ``DeepseekV4Config`` adds),
    and the query latent and grouped output sizes."""
    compressed = facts.compressed
    rates = {SLIDING: 0, CSA: compressed.csa_rate, HCA: compressed.hca_rate}
    fields = {
        "compress_ratios": [rates[kind] for kind in facts.layer_types],
        "compress_rope_theta": facts.compress_rope_theta,
        "q_lora_rank": compressed.q_lora_rank,
        "o_groups": compressed.o_groups,
        "o_lora_rank": compressed.o_lora_rank,
    }
    if compressed.rope_scaling is not None:
        scaling = dict(compressed.rope_scaling)
        scaling.pop("attention_factor", None)
        scaling["type"] = scaling.pop("rope_type")  # as the file spells it
        fields["rope_scaling"] = scaling
    return fields


def _linear_as_released(facts: ModelFacts) -> dict:
    """Kimi Linear's linear_attn_config: its layer lists, 1-based, and the KDA sizes, one
    head count and one head size for queries, keys and values alike."""
    assert facts.linear_num_key_heads == facts.linear_num_value_heads
    assert facts.linear_key_head_dim == facts.linear_value_head_dim
    return {
        "full_attn_layers": [i + 1 for i, kind in enumerate(facts.layer_types) if kind == FULL],
        "kda_layers": [i + 1 for i, kind in enumerate(facts.layer_types) if kind == LINEAR],
        "num_heads": facts.linear_num_key_heads,
        "head_dim": facts.linear_key_head_dim,
        "short_conv_kernel_size": facts.linear_conv_kernel_dim,
    }


def linear_sizes(config) -> dict[str, int]:
    """The linear-attention layers' sizes as transformers' config holds them."""
    if hasattr(config, "linear_num_heads"):  # Kimi Linear: one count and size for all
        heads, size = config.linear_num_heads, config.linear_head_dim
        sizes = (heads, heads, size, size, config.linear_conv_kernel_dim)
        return dict(zip(LINEAR_SIZES, sizes, strict=True))
    return {name: getattr(config, name) for name in LINEAR_SIZES}


def _explicit(facts: ModelFacts) -> set[str]:
    """Attributes given in the entry rather than derived (only head_dim can be both)."""
    derived = facts.hidden_size // facts.num_heads
    return {"head_dim"} if facts.head_dim != derived and facts.latent is None else set()


def rope_of(config, layer_type: str) -> dict:
    parameters = config.rope_parameters  # one dict, or one per layer type (Gemma 3 and 4)
    parameters = parameters.get("main", parameters)  # DeepSeek-V4: "main" and "compress"
    return parameters.get(layer_type, parameters)


def layer_shape(config, index: int) -> tuple[int, int]:
    """(key/value heads, head_dim) of one layer, as transformers' attention reads them."""
    if config.model_type == "mimo_v2_flash":  # heads no config field gives: the layer's own
        return _built_layer_shape(config, index)
    try:
        layer = config.per_layer_config[index]  # Gemma 4: the global layers differ
    except (AttributeError, KeyError, TypeError):
        layer = config
    head_dim = getattr(layer, "head_dim", None)
    return layer.num_key_value_heads, head_dim or config.hidden_size // config.num_attention_heads


def _built_layer_shape(config, index: int) -> tuple[int, int]:
    """(key/value heads, head_dim) of one layer, read from its attention module built on
    the meta device: MiMoV2FlashAttention gives its sliding layers twice the config's
    num_key_value_heads, which no config field says."""
    from transformers.models.mimo_v2_flash.modeling_mimo_v2_flash import MiMoV2FlashAttention

    with torch.device("meta"):  # shapes only: nothing is allocated
        attention = MiMoV2FlashAttention(config, index)
    return attention.k_proj.out_features // attention.head_dim, attention.head_dim


MECHANISMS = (  # checked wherever the config class has the field
    "sliding_window",
    "query_pre_attn_scalar",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "attention_chunk_size",
    "attention_k_eq_v",
    "num_kv_shared_layers",
    "attn_temperature_tuning",
    "floor_scale",
    "attn_scale",
)


@pytest.mark.parametrize("facts", MODELS.values(), ids=list(MODELS))
def test_transformers_reads_the_same_attention_from_the_released_config(facts) -> None:
    config = released_config(facts)
    if facts.config_class == "GPT2Config":
        assert (config.n_layer, config.n_head, config.n_embd // config.n_head) == (
            facts.layers,
            facts.num_heads,
            facts.head_dim,
        )
        return
    if facts.config_class == "BloomConfig":  # ALiBi: no RoPE and no position limit
        assert (config.n_layer, config.n_head, config.hidden_size // config.n_head) == (
            facts.layers,
            facts.num_heads,
            facts.head_dim,
        )
        assert facts.max_position_embeddings is None
        assert getattr(config, "max_position_embeddings", None) is None
        return
    if facts.config_class == "WhisperConfig":  # the decoder's, as WhisperDecoder reads them
        heads = config.decoder_attention_heads
        read = (config.decoder_layers, heads, config.d_model // heads, config.max_target_positions)
        assert read == (
            facts.layers,
            facts.num_heads,
            facts.head_dim,
            facts.max_position_embeddings,
        )
        assert config.max_source_positions == facts.max_source_positions
        return
    assert config.num_hidden_layers == facts.layers
    assert config.max_position_embeddings == facts.max_position_embeddings
    if facts.latent is None:
        shapes = tuple(layer_shape(config, i) for i in range(facts.layers))
        assert shapes == facts.layer_kv_shapes
    else:
        assert config.num_key_value_heads == facts.num_kv_heads
    layer_types = getattr(config, "layer_types", None)
    if layer_types is not None:  # Nemotron-H's Mamba layers are linear_attention there
        mixers = {LINEAR: MAMBA, "moe": NO_MIXER} if facts.mamba is not None else {}
        assert tuple(mixers.get(kind, kind) for kind in layer_types) == facts.layer_types
    if getattr(config, "no_rope_layers", None) is not None:
        assert tuple(bool(rope) for rope in config.no_rope_layers) == facts.uses_rope
    if hasattr(config, "kv_sharing_modes"):
        assert tuple(mode == "reuse" for mode in config.kv_sharing_modes) == facts.kv_shared
    if hasattr(config, "use_qk_norm"):
        assert config.use_qk_norm == (facts.parts is not None and facts.parts.qk_norm == "l2")
    for name in MECHANISMS:
        if hasattr(config, name):
            assert getattr(config, name) == getattr(facts, name), name
    for name in LAYER_NUMBERS:  # the class's default where the file leaves it out
        if _class_has(facts.config_class, name):
            assert getattr(config, name) == getattr(facts, name), name
    if not _class_has(facts.config_class, "rms_norm_eps"):  # LayerNorms, or another name
        assert facts.rms_norm_eps is None
    if isinstance(facts.local, LinearAttention):
        assert linear_sizes(config) == {name: getattr(facts, name) for name in LINEAR_SIZES}
    for name in INDEXER_SIZES:
        assert getattr(config, name, None) == getattr(facts, name), name
    if facts.cross_attention_layers is not None:
        assert tuple(config.cross_attention_layers) == facts.cross_attention_layers
    if facts.positions != "rope":  # Kimi Linear's NoPE, BERT's table: no RoPE to compare
        return
    full = rope_of(config, FULL)
    assert full["rope_theta"] == facts.rope_theta
    scaling = {k: v for k, v in full.items() if k not in ("rope_theta", "rope_type")}
    if scaling.get("partial_rotary_factor") == 1.0:  # Phi3Config writes the whole head
        del scaling["partial_rotary_factor"]
    expected = {k: v for k, v in (facts.rope_scaling or {}).items() if k != "rope_type"}
    if facts.partial_rotary_factor != 1.0:
        expected["partial_rotary_factor"] = facts.partial_rotary_factor
    assert scaling == pytest.approx(expected)
    assert full["rope_type"] == (facts.rope_scaling or {"rope_type": "default"})["rope_type"]
    if facts.local_rope_theta is not None:
        assert rope_of(config, SLIDING)["rope_theta"] == facts.local_rope_theta


# An encoder generates nothing and keeps no cache; Whisper's EncoderDecoderCache is the
# model's, layer by decoder layer (the config's layer count is the encoder's): its own test.
DECODERS = [f for f in MODELS.values() if not f.bidirectional and f.name != "Whisper large-v3"]


@pytest.mark.parametrize("facts", DECODERS, ids=[facts.name for facts in DECODERS])
def test_transformers_caches_what_the_table_counts(facts: ModelFacts) -> None:
    """Layer by layer, transformers' cache for the released config stores keys and values
    where the table counts bytes, and caps the same layers at the same number of tokens:
    sliding layers at the window, chunked layers at the chunk; shared layers are
    "dummy" layers that store nothing; linear-attention layers keep a state instead;
    cross-attention layers keep the image's keys and values, which the table counts
    apart (``cross_cache_bytes``), not per token."""
    cache_utils = pytest.importorskip("transformers.cache_utils")
    layout = getattr(cache_utils, "get_layer_types_and_kwargs", None)
    if layout is None:
        pytest.skip("this transformers has no get_layer_types_and_kwargs")
    kinds, kwargs = layout(released_config(facts))
    stores = [kind not in ("dummy", LINEAR) for kind in kinds]
    counted = zip(layer_kv_cache_bytes_per_token(facts), facts.layer_types, strict=True)
    assert stores == [size > 0 or kind == CROSS for size, kind in counted]
    limits = {facts.local.kind: facts.local.tokens_kept} if facts.local is not None else {}
    assert [kw.get("sliding_window") for kw in kwargs] == [
        limits.get(kind) if store else None
        for kind, store in zip(facts.layer_types, stores, strict=True)
    ]


def test_transformers_caches_whisper_s_self_and_cross_attention_as_the_table_counts() -> None:
    """WhisperAttention at the released sizes (on the meta device: no weights in memory)
    with an EncoderDecoderCache: its self-attention layer grows by the table's bytes per
    token and layer, its cross-attention layer holds the table's cross cache, once."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache
    from transformers.models.whisper.modeling_whisper import WhisperAttention

    facts = MODELS["Whisper large-v3"]
    config = released_config(facts)
    dims = (config.d_model, config.decoder_attention_heads)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    with torch.device("meta"):
        self_attn = WhisperAttention(*dims, is_decoder=True, layer_idx=0, config=config)
        cross_attn = WhisperAttention(*dims, is_decoder=True, layer_idx=0, config=config)
        encoded = torch.empty(1, config.max_source_positions, config.d_model)
        for tokens in (3, 1, 1):  # a prompt, then two steps
            x = torch.empty(1, tokens, config.d_model)
            # The cache goes 3rd, by position: `past_key_values` before transformers 5.24, `cache`
            # after, and the old keyword warns (FutureWarning) from 5.24 on.
            self_attn(x, None, cache)
            cross_attn(x, encoded, cache)
    held = cache.self_attention_cache.layers[0]
    cross = cache.cross_attention_cache.layers[0]
    per_token = kv_cache_bytes_per_token(facts, torch.float32) // facts.layers
    assert held.keys.nbytes + held.values.nbytes == 5 * per_token
    cross_bytes = cross.keys.nbytes + cross.values.nbytes
    assert cross_bytes * facts.layers == cross_cache_bytes(facts, torch.float32)


LINEAR_MODULES = {  # the config class -> transformers' linear-attention layer
    "Qwen3NextConfig": ("qwen3_next", "Qwen3NextGatedDeltaNet"),
    "Qwen3_5MoeTextConfig": ("qwen3_5_moe", "Qwen3_5MoeGatedDeltaNet"),
    "KimiLinearConfig": ("kimi_linear", "KimiLinearDeltaAttention"),
}
HYBRIDS = [facts for facts in MODELS.values() if isinstance(facts.local, LinearAttention)]


SMALL_HIDDEN = 16  # the layers' input size in these checks: no cache holds it


def _run_in_cache(layer, lengths, call) -> None:
    """Prefill, then decode one token at a time, in 16-bit numbers, as generation does;
    ``call(layer, hidden_states, tokens_seen)`` runs one step."""
    layer = layer.to(torch.bfloat16).eval()
    seen = 0
    for length in lengths:
        hidden = torch.randn(1, length, SMALL_HIDDEN, dtype=torch.bfloat16)
        with torch.no_grad():
            call(layer, hidden, seen)
        seen += length


def _stored_bytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize("facts", HYBRIDS, ids=[facts.name for facts in HYBRIDS])
def test_transformers_keeps_the_state_the_table_counts(facts: ModelFacts) -> None:
    """The linear-attention layer of transformers, built from the released config, keeps
    a convolution window in the model's numbers and a float32 delta-rule state, of the
    bytes layer_state_bytes gives, and they do not grow as tokens are decoded.

    Only ``hidden_size`` is made small: the projections' input size, which the state does
    not hold, so that the layer's weights stay small."""
    from transformers.cache_utils import DynamicCache, LinearAttentionLayer

    module, name = LINEAR_MODULES[facts.config_class]
    layer_class = getattr(
        __import__(f"transformers.models.{module}.modeling_{module}", fromlist=[name]), name
    )
    config = released_config(facts)
    config.hidden_size = SMALL_HIDDEN
    cache = DynamicCache(config=config)
    kinds = [isinstance(layer, LinearAttentionLayer) for layer in cache.layers]
    assert kinds == [kind == LINEAR for kind in facts.layer_types]
    index = facts.layer_types.index(LINEAR)
    torch.manual_seed(0)
    layer = layer_class(config, index)
    expected = layer_state_bytes(facts)[index]
    for length in (5, 1, 1):  # a prefill, then two decoding steps
        # The cache goes second positionally: 5.24 renamed cache_params to cache.
        _run_in_cache(layer, [length], lambda lay, x, _: lay(x, cache))
        kept = cache.layers[index]
        conv, state = kept.conv_states[0], kept.recurrent_states[0]
        assert (conv.dtype, state.dtype) == (torch.bfloat16, torch.float32)
        assert conv.shape[-1] == facts.local.conv_kernel_dim
        assert _stored_bytes(conv, state) == expected
    assert layer_state_bytes(facts, torch.float32)[index] - expected == conv.numel() * 2


def test_transformers_caches_the_latent_and_the_indexer_keys_of_deepseek_v32() -> None:
    """DeepseekV32Attention, from the released config, caches per token the latent and
    the shared rotary key (kv_cache_bytes_per_token) and one indexer key
    (indexer_cache_bytes_per_token) in every layer. Query and key/value heads and
    ``hidden_size`` are made small: latent attention caches none of them."""
    from transformers.cache_utils import DynamicCache, DynamicIndexedLayer
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import (
        DeepseekV32Attention,
        DeepseekV32RotaryEmbedding,
    )

    facts = MODELS["DeepSeek-V3.2"]
    config = released_config(facts)
    config.hidden_size = SMALL_HIDDEN
    config.num_attention_heads = config.num_key_value_heads = 2
    config._attn_implementation = "eager"
    cache = DynamicCache(config=config)
    assert all(isinstance(layer, DynamicIndexedLayer) for layer in cache.layers)
    torch.manual_seed(0)
    rope = DeepseekV32RotaryEmbedding(config)

    def call(attention, hidden, seen):
        positions = torch.arange(seen, seen + hidden.shape[1])[None]
        mask = torch.arange(seen + hidden.shape[1]) <= positions[0, :, None]
        attention(hidden, rope(hidden, positions), mask[None, None], cache, position_ids=positions)

    _run_in_cache(DeepseekV32Attention(config, 0), [5, 1], call)
    kept, tokens = cache.layers[0], 6
    assert (
        _stored_bytes(kept.keys, kept.values) == tokens * layer_kv_cache_bytes_per_token(facts)[0]
    )
    indexer_per_layer = indexer_cache_bytes_per_token(facts) // facts.layers
    assert _stored_bytes(kept.indexer_keys) == tokens * indexer_per_layer


def test_transformers_caches_the_latent_of_kimi_linear_s_mla_layers() -> None:
    """KimiLinearAttention rotates nothing (NoPE), yet caches the shared key of
    qk_rope_head_dim numbers beside the latent, as the table counts."""
    from transformers.cache_utils import DynamicCache
    from transformers.models.kimi_linear.modeling_kimi_linear import KimiLinearAttention

    facts = MODELS["Kimi Linear"]
    config = released_config(facts)
    config.hidden_size = SMALL_HIDDEN
    config.num_attention_heads = config.num_key_value_heads = 2
    config._attn_implementation = "eager"
    cache = DynamicCache(config=config)
    index = facts.layer_types.index(FULL)
    torch.manual_seed(0)

    def call(attention, hidden, seen):
        mask = torch.ones(hidden.shape[1], seen + hidden.shape[1], dtype=torch.bool).tril(seen)
        attention(hidden, mask[None, None], cache)

    _run_in_cache(KimiLinearAttention(config, index), [5, 1], call)
    kept = cache.layers[index]
    assert _stored_bytes(kept.keys, kept.values) == 6 * layer_kv_cache_bytes_per_token(facts)[index]


def test_llama4_scout_temperature_tuning_is_on_though_the_file_writes_4() -> None:
    """The released text_config has "attn_temperature_tuning": 4; the attention only
    asks whether it is true (``if self.attn_temperature_tuning``), so the table keeps
    True, which is what transformers 5's Llama4TextConfig accepts."""
    scout = MODELS["Llama 4 Scout"]
    assert scout.attn_temperature_tuning is True and bool(4) is scout.attn_temperature_tuning
    assert "attn_temperature_tuning" in scout.source and "4" in scout.source


def test_gemma2_takes_its_one_to_one_pattern_from_the_class_default() -> None:
    """The released config of Gemma 2 9B has no layer_types: Gemma2Config alternates."""
    gemma2 = MODELS["Gemma 2 9B"]
    assert gemma2.class_defaults == ("global_every",)
    config = transformers.Gemma2Config(num_hidden_layers=gemma2.layers)
    assert tuple(config.layer_types) == gemma2.layer_types
    assert gemma2.layer_types[:2] == (SLIDING, FULL)


def test_gemma3_takes_its_bases_pattern_and_positions_from_the_class_defaults() -> None:
    """The released config of Gemma 3 27B leaves them out: the table says so."""
    gemma3 = MODELS["Gemma 3 27B"]
    assert set(gemma3.class_defaults) == {
        "rope_theta",
        "local_rope_theta",
        "global_every",
        "max_position_embeddings",
        "attention_bias",
        "rms_norm_eps",
    }
    defaults = transformers.Gemma3TextConfig()
    assert (defaults.attention_bias, defaults.rms_norm_eps) == (False, gemma3.rms_norm_eps)
    assert defaults.rope_parameters[FULL]["rope_theta"] == gemma3.rope_theta
    assert defaults.rope_parameters[SLIDING]["rope_theta"] == gemma3.local_rope_theta
    assert defaults.max_position_embeddings == gemma3.max_position_embeddings
    # ... but not its window: the class's default is not the released 1024.
    assert defaults.sliding_window != gemma3.sliding_window


@pytest.mark.parametrize("name", ["GPT-2", "GPT-2 medium", "Llama 2 7B"])
def test_parameter_counts_are_those_of_the_full_model(name: str) -> None:
    facts = MODELS[name]
    if name.startswith("GPT-2"):
        config = released_config(facts)
        model_class = transformers.GPT2LMHeadModel
    else:  # Llama 2 7B: the MLP and vocabulary of its config.json
        config = transformers.LlamaConfig(
            hidden_size=4096,
            intermediate_size=11008,
            num_hidden_layers=32,
            num_attention_heads=32,
            vocab_size=32000,
        )
        model_class = transformers.LlamaForCausalLM
    with torch.device("meta"):
        model = model_class(config)
    assert sum(p.numel() for p in model.parameters()) == facts.weights.parameters


# -- the lint: no model fact typed into a page -----------------------------------------

# Numbers that equal a model fact by coincidence, page by page, with the reason.
NOT_MODEL_FACTS: dict[tuple[str, int], str] = {
    ("docs/chapters/13-latent-attention.md", 128): "the Part II capstone's toy Llama "
    "layer, 128 features wide so that it runs at once; no model's head size",
    ("docs/chapters/19-shared-keys-and-values.md", 256): "the Part III capstone's toy "
    "width, smaller than gpt-oss-20b's for a quick run; no model's head size",
    ("docs/chapters/27-what-each-layer-costs.md", 20): "the Part IV capstone runs 10 "
    "tokens, then 20, to show the state keeps its size; no model's shared layers",
    ("docs/chapters/14-longer-contexts.md", 16): "the toy head of 16 features the pairing "
    "figure draws, small enough to label every feature; no model's head count",
    ("docs/chapters/14-longer-contexts.md", 4): "a quarter of the toy head's 16 features, "
    "the ones partial rotary turns in the figure; no model's group size",
    ("docs/chapters/07-efficient-attention.md", 8): "the batch of 8 sequences the page "
    "chooses for GPT-2 small's shapes; a batch size is no fact of a model",
    ("docs/chapters/measuring-attention.md", 8): "the batch of 8 sequences the page "
    "chooses for GPT-2 small's shapes; a batch size is no fact of a model",
    ("docs/chapters/measuring-attention.md", 2048): "the benchmark's reference matrix "
    "product, 2048 by 2048, sets the roofline; no model's hidden size",
    ("docs/chapters/08-kv-cache.md", 192): "the decode race writes 192 tokens with a toy "
    "model; not DeepSeek-V3's key size",
    ("docs/chapters/28-paged-kv-cache.md", 4096): "the serving batch's reservation per "
    "request, benchmarks/workload.py's MAX_LENGTH; no model's number",
    ("docs/chapters/24-sparse-attention.md", 448): "float8_e4m3's largest finite number; "
    "not Whisper's decoder positions",
}


def held(record, prefix: str = "") -> list[tuple[str, object]]:
    """Every value an entry holds, by its path (``latent.kv_lora_rank``), its groups'
    fields included."""
    found = []
    for item in dataclasses.fields(record):
        value = getattr(record, item.name)
        if dataclasses.is_dataclass(value):
            found += held(value, f"{prefix}{item.name}.")
        else:
            found.append((prefix + item.name, value))
    return found


def fact_numbers() -> dict[int, str]:
    """Every whole number the table holds or derives, and where it comes from."""
    found: dict[int, str] = {}

    def add(value, what: str) -> None:
        if isinstance(value, bool) or value is None:
            return
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and value > 1:
            found.setdefault(value, what)

    for facts in MODELS.values():
        for attribute, value in held(facts):
            if isinstance(value, dict):
                for key, item in value.items():
                    add(item, f"{facts.name} {attribute}[{key}]")
            elif attribute != "year":
                add(value, f"{facts.name} {attribute}")
        add(facts.group_size, f"{facts.name} group size")
        add(facts.receptive_field, f"{facts.name} receptive field")
        if facts.receptive_field is not None:
            add(facts.receptive_field + 1, f"{facts.name} receptive field, in tokens")
        for dtype in (torch.bfloat16, torch.float32):
            per_token = kv_cache_bytes_per_token(facts, dtype)
            add(per_token, f"{facts.name} cache bytes per token")
            add(per_token // facts.layers, f"{facts.name} cache bytes per token and layer")
        for tokens in (facts.trained_context, facts.max_position_embeddings):
            if tokens is not None:
                add(kv_cache_bytes(facts, tokens), f"{facts.name} cache bytes of a sequence")
        for kind in (SLIDING, CHUNKED, LINEAR, FULL, INDEXED):
            add(facts.layer_types.count(kind), f"{facts.name} {kind} layers")
        for dtype in (torch.bfloat16, torch.float32):  # Part IV: state and indexer
            add(state_bytes(facts, dtype), f"{facts.name} state bytes per sequence")
            add(max(layer_state_bytes(facts, dtype)), f"{facts.name} state bytes per layer")
            indexer = indexer_cache_bytes_per_token(facts, dtype)
            add(indexer, f"{facts.name} indexer bytes per token")
        if isinstance(facts.local, LinearAttention):  # the figures Part IV's tables give
            add(cache_bytes(facts, 128 * 1024), f"{facts.name} cache and state at 128k tokens")
        add(facts.uses_rope.count(False), f"{facts.name} layers without RoPE")
        add(sum(facts.kv_shared), f"{facts.name} layers sharing keys and values")
        if facts.trained_context >= 128 * 1024:  # the home page gives it for these
            add(kv_cache_bytes(facts, 128 * 1024), f"{facts.name} cache bytes at 128k tokens")
    return found


def model_names() -> list[str]:
    """The names a page may call a model by, longest first (they hold digits)."""
    names = set(MODELS)
    for name in MODELS:
        names.add(name.rsplit(" ", 1)[0])  # "Llama 3 8B" -> "Llama 3"
    names |= {"DeepSeek-V2", "GPT-2 small", "Llama 3.1", "Llama 2 70B", "Gemma 3n", "Qwen3"}
    names |= {"DeepSeek-V3.2-Exp", "DeepSeek-V3.1", "Kimi Linear 48B-A3B", "Qwen3.5"}
    return sorted(names, key=len, reverse=True)


NAMES = re.compile("|".join(re.escape(name) for name in model_names()))
# A model's name, not a transformers class named after it (``LlamaConfig(...)`` builds
# a toy).
MODEL_WORDS = re.compile(
    r"(?<![\w.])(?:Llama|Mistral|Gemma|DeepSeek|GPT-2|Qwen|gpt-oss|SmolLM|OLMo|Kimi|BLOOM"
    r"|BERT|Whisper|GLM|MiniMax|Phi-|Command A|Nemotron)"
    r"(?!\w*(?:Config|Attention|Model|ForCausalLM)\b)"
)
# Whole numbers, with or without thousands separators (131,072 131072 131{,}072 131_072),
# not part of a decimal, a word, an identifier or a tolerance's exponent (1e-5).
NUMBER = re.compile(r"(?<![\w.])(?<!\de-)(\d{1,3}(?:(?:,|\{,\}|_)\d{3})+|\d+)(?:\.0)?(?![\w]|\.\d)")
ROLES = re.compile(r"\{(?:doc|ref|class|func|meth|mod|attr)\}`[^`]*`|\]\([^)]*\)|https?://\S+")
# A chapter's own number, in its title or its card on the home page ("# 21. Qwen3-Next's
# layer ..."), is no model's number even where the title names a model.
# A chapter's number in its title or card, and an exercise's or a step's number.
CHAPTER_NUMBER = re.compile(r"^\s*(?:# |:::\{grid-item-card\} |\*\*)?\d+\. ")
YEARS = range(1990, 2031)
# Importing a model's class from transformers does not make a code block about that model.
IMPORT = re.compile(r"\s*(from|import)\s")
# Sizes that pages use for their own toy examples, and RoPE's original base: facts only
# where the text around them names a model.
GENERIC = {2**p for p in range(11)} | {10000}


def typed_facts(line: str, facts: dict[int, str], about_a_model: bool) -> list[tuple[int, str]]:
    """The model-fact numbers written in one line of a page or script.

    A fact from 100 up counts when the paragraph or code block (``about_a_model``)
    names a model, or anywhere if it is no toy size (``GENERIC``). A smaller one counts
    only on a line that names a model, and from 4 up: 2 and 3 are too common even
    there (keys and values, 2 bytes), and toy examples are full of small numbers.
    """
    named = bool(MODEL_WORDS.search(line))
    line = NAMES.sub(" ", ROLES.sub(" ", CHAPTER_NUMBER.sub(" ", line)))
    found = []
    for match in NUMBER.finditer(line):
        value = int(re.sub(r"\D", "", match.group(1)))
        if value not in facts or value in YEARS:
            continue
        large = value >= 100 and (about_a_model or value not in GENERIC)
        if large or (value < 100 and named and value >= 4):
            found.append((value, facts[value]))
    return found


def blocks(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Paragraphs and code blocks: runs of lines between blank lines or fences."""
    result, current = [], []
    for number, line in lines:
        boundary = not line.strip() or line.startswith(("```", "# %%"))
        if boundary:
            if current:
                result.append(current)
            current = []
        else:
            current.append((number, line))
    if current:
        result.append(current)
    return result


def page_lines(path: Path) -> list[tuple[int, str]]:
    """A MyST page's lines a reader reads: text, code and alt text, not expected output.

    The alt text of a figure cell marked ``alt_drawn: true`` is left out: every number
    in it must be one its figure draws from ``MODELS``, which
    ``tests/docs/test_alt_text.py`` checks by drawing the figure.
    """
    lines, result = path.read_text(encoding="utf-8").splitlines(), []
    in_cell = front = expect = False
    expect_indent = 0
    drawn = drawn_alt_cells(path)
    for number, line in enumerate(lines, start=1):
        if any(first <= number <= last for first, last in drawn):
            continue
        if line.startswith("```{code-cell}"):
            in_cell, front = True, False
            result.append((number, "```"))
            continue
        if in_cell and line.startswith("```"):
            in_cell = False
            result.append((number, "```"))
            continue
        if in_cell and line.strip() == "---":
            front = not front
            expect = False
            continue
        if in_cell and front:
            indent = len(line) - len(line.lstrip())
            if expect and (indent > expect_indent or not line.strip()):
                continue
            expect = line.strip().startswith("expect:")
            expect_indent = indent
            if expect:
                continue
        if in_cell and not front and not line.strip():
            line = "#"  # a blank line inside a cell does not end its block
        result.append((number, line))
    return result


def drawn_alt_cells(path: Path) -> list[tuple[int, int]]:
    """The (first, last) line numbers of the alt text of each ``alt_drawn: true`` cell."""
    lines, spans = path.read_text(encoding="utf-8").splitlines(), []
    start = None
    for number, line in enumerate(lines, start=1):
        if line.startswith("```{code-cell}"):
            start, alt, marked = number, None, False
        elif start is not None and line.strip() == "---" and number > start + 1:
            if marked and alt is not None:
                spans.append(alt)
            start = None
        elif start is not None:
            if line.strip().startswith("alt:"):
                indent = len(line) - len(line.lstrip())
                alt = (number, number)
            elif (
                alt is not None
                and alt[1] == number - 1
                and (len(line) - len(line.lstrip()) > indent)
            ):
                alt = (alt[0], number)
            if line.strip() == "alt_drawn: true":
                marked = True
    return spans


def script_lines(path: Path) -> list[tuple[int, str]]:
    """A gallery script's lines, without its ``# Expected output:`` blocks."""
    result, expected = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip() == "# Expected output:":
            expected = True
            continue
        if expected and line.startswith("#"):
            continue
        expected = False
        result.append((number, line))
    return result


def typed_facts_in(lines: list[tuple[int, str]]) -> list[tuple[int, int, str, str]]:
    """(line number, value, what it is, line) for every typed fact."""
    facts, found = fact_numbers(), []
    for block in blocks(lines):
        about_a_model = any(
            MODEL_WORDS.search(line) and not IMPORT.match(line) for _, line in block
        )
        for number, line in block:
            for value, what in typed_facts(line, facts, about_a_model):
                found.append((number, value, what, line))
    return found


def typed_fact_report(paths: list[Path]) -> list[str]:
    problems = []
    for path in paths:
        lines = page_lines(path) if path.suffix == ".md" else script_lines(path)
        relative = path.relative_to(ROOT).as_posix()
        for number, value, what, line in typed_facts_in(lines):
            if (relative, value) not in NOT_MODEL_FACTS:
                problems.append(f"{relative}:{number}: {value} ({what}): {line.strip()}")
    return problems


def test_every_exception_to_the_lint_is_still_needed() -> None:
    facts = fact_numbers()
    for (relative, value), reason in NOT_MODEL_FACTS.items():
        path = ROOT / relative
        lines = page_lines(path) if path.suffix == ".md" else script_lines(path)
        found = {found for _, found, _, _ in typed_facts_in(lines)}
        assert value in facts and value in found, f"{relative}: {value} ({reason}) is not flagged"
        assert reason


def test_no_model_fact_is_typed_into_a_page_or_a_gallery_script() -> None:
    problems = typed_fact_report([*PAGES, *SCRIPTS])
    assert not problems, (
        "numbers about real models typed by hand; compute them from attention.MODELS "
        "and print them (or add the number to NOT_MODEL_FACTS with the reason it is "
        "not a model fact):\n" + "\n".join(problems)
    )


def test_the_lint_reads_a_tolerance_as_no_model_fact() -> None:
    """``1e-5`` beside a model's name is a tolerance, not Gemma 4 E2B's 5; a bare 5
    on the same line still counts."""
    facts = fact_numbers()
    assert 5 in facts
    assert typed_facts("Qwen3-Next's layer, to 1e-5", facts, True) == []
    assert [v for v, _ in typed_facts("Gemma 4 E2B: 5 to 1", facts, True)] == [5]


def test_the_lint_reads_a_transformers_class_as_no_model_name() -> None:
    """``LlamaConfig(hidden_size=32)`` builds a toy; "Llama 2 7B: 32 layers" is a fact."""
    facts = fact_numbers()
    assert 32 in facts
    assert typed_facts("config = LlamaConfig(hidden_size=32)", facts, False) == []
    assert [v for v, _ in typed_facts("Llama 2 7B has 32 layers", facts, False)] == [32]


def test_the_lint_reads_an_exercise_number_as_no_model_fact() -> None:
    facts = fact_numbers()
    assert typed_facts("**4. Capstone: gpt-oss-20b's layer.**", facts, True) == []
    assert typed_facts("4. Compare with Llama's output.", facts, True) == []


def test_the_lint_reads_a_chapter_number_in_a_title_as_no_model_fact() -> None:
    """A chapter's title or home-page card that names a model keeps its number; the
    same number later in the line still counts."""
    facts = fact_numbers()
    assert 21 in facts  # Gemma 2 9B's sliding layers
    title = "# 21. Qwen3-Next's layer and Kimi's variant"
    assert typed_facts(title, facts, True) == []
    card = ":::{grid-item-card} 21. Qwen3-Next's layer and Kimi's variant"
    assert typed_facts(card, facts, True) == []
    assert [v for v, _ in typed_facts("# 21. Gemma 2 9B: 21 layers", facts, True)] == [21]


def test_the_lint_finds_a_typed_fact_in_prose_code_and_alt_text(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Llama 3 8B keeps 131,072 bytes per token,\n"
        "and 128 KiB is a lot.\n"
        "\n"
        "A toy head of 128 features, and 131,072 anywhere.\n"
        "```{code-cell} ipython3\n"
        "---\n"
        "mystnb:\n"
        "  image:\n"
        "    alt: a line that ends at 163,840 tokens\n"
        "expect: |\n"
        "  131,072 bytes per token\n"
        "---\n"
        "window = 4096\n"
        "```\n"
        "The sentence has six tokens and 2 heads; GPT-2 has 12 layers.\n"
        "\n"
        "GPT-2's heads are larger than this toy's\n"
        "8 features, but 1024 is its context.\n"
        "```{code-cell} ipython3\n"
        "from transformers.models.llama.modeling_llama import LlamaAttention\n"
        "KiB = 1024\n"
        "```\n",
        encoding="utf-8",
    )
    found = [(number, value) for number, value, _, _ in typed_facts_in(page_lines(page))]
    assert found == [
        (1, 131072),
        (2, 128),
        (4, 131072),
        (9, 163840),
        (13, 4096),
        (15, 12),
        (18, 1024),
    ]


def test_the_lint_skips_a_scripts_expected_output(tmp_path: Path) -> None:
    script = tmp_path / "plot_x.py"
    script.write_text(
        "print(size)\n# Expected output:\n# 131,072\n\n# %%\n# Mistral's window, 4096.\n",
        encoding="utf-8",
    )
    lines = script_lines(script)
    assert [number for number, _ in lines] == [1, 4, 5, 6]
    assert [(number, value) for number, value, _, _ in typed_facts_in(lines)] == [(6, 4096)]


#: The tiny config of each quantized release's type.
QUANTIZED_TYPES = {
    "GptOssConfig": "gpt_oss",
    "DeepseekV3Config": "deepseek_v3",
    "DeepseekV32Config": "deepseek_v32",
    "MiniMaxM2Config": "minimax_m2",
}
#: What a release never quantizes: the embeddings, the output layer, the router, the
#: norms, the biases (and, counted in bf16 by the table, DeepSeek-V3.2's indexer).
NEVER_QUANTIZED = re.compile(
    r"embed_tokens|lm_head|\.router\.|\.mlp\.gate\.|norm|bias|sinks|\.indexer\."
)


@pytest.mark.parametrize(
    "facts", [m for m in MODELS.values() if m.quantization], ids=lambda m: m.name
)
def test_the_quantized_weights_are_the_matrices_the_release_names(facts: ModelFacts) -> None:
    """Each pattern of a release's quantized weights matches parameters of its type
    (none is misspelled), and together they match every weight matrix of the layers
    (two dimensions or more) that its quantization_config converts, and nothing else."""
    from fnmatch import fnmatch

    from tiny_configs import tiny_config

    config = tiny_config(QUANTIZED_TYPES[facts.config_class])
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    shapes = {name: p.shape for name, p in model.named_parameters()}
    patterns = facts.quantization.parameters
    for pattern in patterns:
        assert any(fnmatch(name, pattern) for name in shapes), pattern
    matched = {n for n in shapes if any(fnmatch(n, p) for p in patterns)}
    matrices = {n for n, shape in shapes.items() if len(shape) >= 2}
    if facts.quantization.dtype == "mxfp4":  # gpt-oss: the experts' weights, not biases
        expected = {n for n in matrices if ".mlp.experts." in n and not n.endswith("_bias")}
    else:
        expected = {n for n in matrices if not NEVER_QUANTIZED.search(n)}
    assert matched == expected
