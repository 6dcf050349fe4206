"""ModelFacts (``attention.models.facts``): the schema's typed groups and the figures
they derive.

The cache formula recomputed for every entry whose layers all cache alike; bytes per
token, per sequence and of the fixed states written out by hand for the models the
chapters use; the layer kinds, shapes and mixes; what a group or an entry refuses; and
every entry's figures as the flat schema gave them (``tests/model_facts_snapshot.py``
records them). The entries themselves, against their released configs and
transformers, are ``tests/test_models_table.py``'s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch
from model_facts_snapshot import PATH as SNAPSHOT
from model_facts_snapshot import snapshot

from attention import MODELS, ModelFacts
from attention.models import (
    cache_bytes,
    cross_cache_bytes,
    indexer_cache_bytes_per_token,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    layer_cache_numbers,
    layer_kv_cache_bytes_per_token,
    layer_state_bytes,
    layer_strip,
    recipe,
    state_bytes,
)
from attention.models.facts import (
    CHUNKED,
    CONV,
    CROSS,
    FULL,
    INDEXED,
    LINEAR,
    SLIDING,
    Chunked,
    GlobalLayers,
    Indexer,
    Latent,
    LayerParts,
    LinearAttention,
    Rope,
    Scores,
    ShortConv,
    Sliding,
    TemperatureTuning,
    Weights,
)

# -- the table's derived figures, recomputed ------------------------------------------


UNIFORM = [  # every layer caches the same heads and head size
    facts
    for facts in MODELS.values()
    if len(set(facts.layer_kv_shapes)) == 1
    and facts.num_kv_shared_layers == 0
    and not isinstance(facts.local, LinearAttention)
    and not facts.bidirectional  # an encoder caches nothing
    and (facts.cross is None or facts.cross.layers is None)  # cross layers: nothing a token
    and facts.layer_pattern is None  # no Mamba or MLP-only layers, no compressed entries
]


@pytest.mark.parametrize("facts", UNIFORM, ids=[facts.name for facts in UNIFORM])
def test_bytes_per_token_follow_the_cache_formula(facts: ModelFacts) -> None:
    if facts.latent is not None:  # one latent and one shared rotary key
        expected = (facts.latent.kv_lora_rank + facts.latent.qk_rope_head_dim) * facts.layers * 2
    else:
        expected = 2 * facts.layers * facts.num_kv_heads * facts.head_dim * 2
    assert kv_cache_bytes_per_token(facts) == expected
    assert kv_cache_bytes_per_token(facts, torch.float32) == 2 * expected
    assert set(layer_kv_cache_bytes_per_token(facts)) == {expected // facts.layers}


@pytest.mark.parametrize("facts", UNIFORM, ids=[facts.name for facts in UNIFORM])
def test_cache_of_a_sequence_counts_what_each_layer_keeps(facts: ModelFacts) -> None:
    per_layer = kv_cache_bytes_per_token(facts) // facts.layers
    limit = {facts.local.kind: facts.local.tokens_kept} if facts.local is not None else {}
    for tokens in (1, 1000, facts.trained_context):
        kept = sum(min(tokens, limit.get(kind) or tokens) for kind in facts.layer_types)
        assert kv_cache_bytes(facts, tokens) == per_layer * kept
    if facts.local is None:
        assert kv_cache_bytes(facts, 5000) == 5000 * kv_cache_bytes_per_token(facts)


K = 1024  # a 128k context is 128 * K tokens


def test_encoders_cache_nothing_and_cross_attention_is_cached_once() -> None:
    """Part VII: an encoder generates nothing; a cross-attention layer keeps the
    context's keys and values, the same however many tokens follow."""
    for name in ("BERT base", "ModernBERT base"):
        bert = MODELS[name]
        assert bert.bidirectional and kv_cache_bytes_per_token(bert) == cache_bytes(bert, 512) == 0
    modern = MODELS["ModernBERT base"]
    assert modern.layer_types[:4] == (FULL, SLIDING, SLIDING, FULL)  # layer 0 global
    assert (modern.local.window, modern.rope.theta, modern.rope.local_theta) == (
        64,
        160_000,
        10_000,
    )
    whisper = MODELS["Whisper large-v3"]
    per_layer = 2 * 20 * 64 * 2  # keys and values, 20 heads of 64, 16-bit
    assert kv_cache_bytes_per_token(whisper) == 32 * per_layer
    assert cross_cache_bytes(whisper) == 32 * per_layer * 1500  # 1,500 encoder tokens
    assert cross_cache_bytes(whisper, torch.float32) == 2 * cross_cache_bytes(whisper)
    vision = MODELS["Llama 3.2 11B Vision"]
    assert vision.layer_types.count(CROSS) == 8 and vision.layer_types[3] == CROSS
    assert kv_cache_bytes_per_token(vision) == 32 * 2 * 8 * 128 * 2  # the 32 text layers
    assert cross_cache_bytes(vision) is None  # it depends on the images
    assert cross_cache_bytes(MODELS["Llama 3 8B"]) == 0


def test_the_caches_of_part_iii_models_by_hand() -> None:
    """Bytes per token and at a 128k context, 16-bit, each written out layer by layer."""
    expected = {
        # 36 layers, 8 KV heads of 128
        "Qwen3 8B": (36 * 2 * 8 * 128 * 2, 36 * 2 * 8 * 128 * 2 * 128 * K),
        # 21 sliding layers keep 4096 tokens, 21 global ones all; 8 heads of 256
        "Gemma 2 9B": (42 * 2 * 8 * 256 * 2, 2 * 8 * 256 * 2 * (21 * 4096 + 21 * 128 * K)),
        # 50 sliding layers (16 heads of 256, 1024 tokens), 10 global (4 heads of 512)
        "Gemma 4 31B": (
            50 * 2 * 16 * 256 * 2 + 10 * 2 * 4 * 512 * 2,
            50 * 2 * 16 * 256 * 2 * 1024 + 10 * 2 * 4 * 512 * 2 * 128 * K,
        ),
        # layers 0-14 cache: 12 sliding (1 head of 256, 512 tokens), 3 global (1 of 512);
        # layers 15-34 reuse them and cache nothing
        "Gemma 4 E2B": (
            12 * 2 * 1 * 256 * 2 + 3 * 2 * 1 * 512 * 2,
            12 * 2 * 256 * 2 * 512 + 3 * 2 * 512 * 2 * 128 * K,
        ),
        # 18 sliding layers keep 128 tokens, 18 full ones all; 8 heads of 64
        "gpt-oss-120b": (36 * 2 * 8 * 64 * 2, 2 * 8 * 64 * 2 * (18 * 128 + 18 * 128 * K)),
        "gpt-oss-20b": (24 * 2 * 8 * 64 * 2, 2 * 8 * 64 * 2 * (12 * 128 + 12 * 128 * K)),
        # 36 chunked layers keep one chunk of 8192 tokens, 12 global ones all
        "Llama 4 Scout": (48 * 2 * 8 * 128 * 2, 2 * 8 * 128 * 2 * (36 * 8192 + 12 * 128 * K)),
        "SmolLM3 3B": (36 * 2 * 4 * 128 * 2, 36 * 2 * 4 * 128 * 2 * 128 * K),
        "OLMo 2 7B": (32 * 2 * 32 * 128 * 2, 32 * 2 * 32 * 128 * 2 * 128 * K),
        # only the 12 full-attention layers cache keys and values (2 heads of 256)
        "Qwen3-Next 80B-A3B": (12 * 2 * 2 * 256 * 2, 12 * 2 * 2 * 256 * 2 * 128 * K),
    }
    for name, (per_token, at_128k) in expected.items():
        facts = MODELS[name]
        assert (kv_cache_bytes_per_token(facts), kv_cache_bytes(facts, 128 * K)) == (
            per_token,
            at_128k,
        ), name
        assert kv_cache_bytes_per_token(facts, torch.float32) == 2 * per_token
        assert sum(layer_kv_cache_bytes_per_token(facts)) == per_token


def test_the_caches_and_states_of_part_iv_models_by_hand() -> None:
    """Keys and values per token, the fixed state per sequence and the indexer's keys,
    16-bit numbers with a float32 delta-rule state, each written out by hand."""
    expected = {
        # 15 full-attention layers (2 KV heads of 256); 45 Gated DeltaNet layers, each a
        # conv window of 4 over q, k (16 heads of 128) and v (64 heads of 128) and a
        # 128 x 128 float32 state per value head
        "Qwen3.5 397B-A17B": (
            15 * 2 * 2 * 256 * 2,
            45 * ((2 * 16 * 128 + 64 * 128) * 4 * 2 + 64 * 128 * 128 * 4),
            0,
        ),
        # 12 full-attention layers; 36 Gated DeltaNet layers with 32 value heads
        "Qwen3-Next 80B-A3B": (
            12 * 2 * 2 * 256 * 2,
            36 * ((2 * 16 * 128 + 32 * 128) * 4 * 2 + 32 * 128 * 128 * 4),
            0,
        ),
        # 7 MLA layers (a latent of 512 and a shared key of 64); 20 KDA layers, q, k and v
        # of 32 heads of 128 each
        "Kimi Linear": (
            7 * (512 + 64) * 2,
            20 * (3 * 32 * 128 * 4 * 2 + 32 * 128 * 128 * 4),
            0,
        ),
        # 61 MLA layers, each with one indexer key of 128 per token; no state
        "DeepSeek-V3.2": (61 * (512 + 64) * 2, 0, 61 * 128 * 2),
    }
    for name, (kv_per_token, state, indexer_per_token) in expected.items():
        facts = MODELS[name]
        assert kv_cache_bytes_per_token(facts) == kv_per_token, name
        assert state_bytes(facts) == state, name
        assert indexer_cache_bytes_per_token(facts) == indexer_per_token, name
        for tokens in (1, 128 * K):
            assert kv_cache_bytes(facts, tokens) == tokens * kv_per_token, name
            assert cache_bytes(facts, tokens) == (
                tokens * (kv_per_token + indexer_per_token) + state
            ), name
    # the state's numbers in the model's type: the conv window halves, the delta rule not
    qwen35 = MODELS["Qwen3.5 397B-A17B"]
    assert state_bytes(qwen35, torch.float32) == 45 * (
        (2 * 16 * 128 + 64 * 128) * 4 * 4 + 64 * 128 * 128 * 4
    )
    assert state_bytes(qwen35, torch.bfloat16, torch.bfloat16) == 45 * (
        (2 * 16 * 128 + 64 * 128) * 4 * 2 + 64 * 128 * 128 * 2
    )
    assert indexer_cache_bytes_per_token(MODELS["DeepSeek-V3.2"], torch.float8_e4m3fn) == 61 * 128


def test_the_state_does_not_grow_and_the_cache_does() -> None:
    """Past some length, the hybrids' keys and values outweigh their fixed state."""
    for name in ("Qwen3.5 397B-A17B", "Qwen3-Next 80B-A3B", "Kimi Linear"):
        facts = MODELS[name]
        state, per_token = state_bytes(facts), kv_cache_bytes_per_token(facts)
        assert cache_bytes(facts, 0) == state > 0
        crossing = -(-state // per_token)  # the first length whose keys weigh as much
        assert kv_cache_bytes(facts, crossing - 1) < state <= kv_cache_bytes(facts, crossing)


def test_the_layer_mix_of_the_hybrids() -> None:
    for name, (linear, full) in {
        "Qwen3.5 397B-A17B": (45, 15),
        "Qwen3-Next 80B-A3B": (36, 12),
        "Kimi Linear": (20, 7),  # 3:1 blocks, and the last layer is MLA as well
    }.items():
        facts = MODELS[name]
        assert (facts.layer_types.count(LINEAR), facts.layer_types.count(FULL)) == (
            linear,
            full,
        ), name
        sizes, states = layer_kv_cache_bytes_per_token(facts), layer_state_bytes(facts)
        for kind, size, state in zip(facts.layer_types, sizes, states, strict=True):
            assert (size > 0, state > 0) == (kind == FULL, kind == LINEAR), name
    kimi = MODELS["Kimi Linear"]
    assert kimi.layer_types[:4] == (LINEAR,) * 3 + (FULL,)
    assert kimi.layer_types[-3:] == (LINEAR, LINEAR, FULL)  # layers 25, 26, 27 (1-based)
    assert kimi.uses_rope == (False,) * 27  # NoPE MLA, no RoPE anywhere
    assert MODELS["DeepSeek-V3.2"].layer_types == (INDEXED,) * 61


def test_shared_and_linear_layers_cache_nothing() -> None:
    e2b = layer_kv_cache_bytes_per_token(MODELS["Gemma 4 E2B"])
    assert e2b[15:] == (0,) * 20 and 0 not in e2b[:15]
    assert MODELS["Gemma 4 E2B"].kv_shared == (False,) * 15 + (True,) * 20
    qwen3_next = MODELS["Qwen3-Next 80B-A3B"]
    assert qwen3_next.layer_types[:4] == (LINEAR, LINEAR, LINEAR, FULL)
    sizes = layer_kv_cache_bytes_per_token(qwen3_next)
    assert [size > 0 for size in sizes] == [kind == FULL for kind in qwen3_next.layer_types]


def test_gemma4_global_layers_have_their_own_heads_and_size() -> None:
    gemma4 = MODELS["Gemma 4 31B"]
    shapes = dict(zip(gemma4.layer_types, gemma4.layer_kv_shapes, strict=True))
    assert shapes == {SLIDING: (16, 256), FULL: (4, 512)}
    assert gemma4.layer_types[:6] == (SLIDING,) * 5 + (FULL,)
    e2b = MODELS["Gemma 4 E2B"]
    assert e2b.layer_types[:5] == (SLIDING,) * 4 + (FULL,)
    assert dict(zip(e2b.layer_types, e2b.layer_kv_shapes, strict=True)) == {
        SLIDING: (1, 256),
        FULL: (1, 512),  # no attention_k_eq_v: the global layers keep num_kv_heads
    }


def test_nope_and_chunked_layers() -> None:
    scout = MODELS["Llama 4 Scout"]
    assert scout.layer_types[:4] == (CHUNKED, CHUNKED, CHUNKED, FULL)
    assert scout.uses_rope[:4] == (True, True, True, False)
    # iRoPE: the global layers are exactly the layers without RoPE
    assert [kind == FULL for kind in scout.layer_types] == [not r for r in scout.uses_rope]
    smol = MODELS["SmolLM3 3B"]
    assert set(smol.layer_types) == {FULL}
    assert [i for i, rope in enumerate(smol.uses_rope) if not rope] == list(range(3, 36, 4))
    assert MODELS["GPT-2"].uses_rope == (False,) * 12
    assert MODELS["Llama 3 8B"].uses_rope == (True,) * 32


TOY = dict(
    name="toy",
    checkpoint="a/b",
    year=2025,
    source="",
    config_class="LlamaConfig",
    layers=4,
    hidden_size=64,
    num_heads=4,
    num_kv_heads=2,
    max_position_embeddings=128,
    trained_context=128,
    context_source="",
    attention_bias=False,
    rms_norm_eps=1e-6,
)


TOY_LINEAR = dict(
    mixer="Gated DeltaNet",
    num_key_heads=2,
    num_value_heads=4,
    key_head_dim=8,
    value_head_dim=8,
    conv_kernel_dim=4,
)


TOY_LATENT = Latent(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (
            lambda: LayerParts(qk_norm="yes"),
            ValueError,
            r"qk_norm to be None or one of .*got 'yes'",
        ),
        (lambda: LayerParts(), ValueError, "LayerParts: expected at least one of qk_norm"),
        (lambda: Scores(sinks=False), ValueError, "leaves the group out"),
        (lambda: Scores(scale=1.0, query_pre_attn_scalar=256), ValueError, "not both"),
        (lambda: Scores(softcap=0.0), ValueError, r"Scores: expected softcap > 0, got 0.0"),
        (lambda: GlobalLayers(num_kv_heads=1), ValueError, "k_eq_v=True with num_kv_heads"),
        (lambda: Sliding(window=0), ValueError, "Sliding: expected window > 0, got 0"),
        (
            lambda: ModelFacts(**TOY, context_claim="native"),
            ValueError,
            "ModelFacts 'toy': expected context_claim to be one of trained, supported, "
            "configured, got 'native'",
        ),
        (lambda: Chunked(size=8, global_every=0), ValueError, "Chunked: expected global_every > 0"),
        (
            lambda: Sliding(window=8, global_every=2, full_attention_layers=(1,)),
            ValueError,
            "global_every or full_attention_layers, not both",
        ),
        (
            lambda: LinearAttention(**TOY_LINEAR, full_attention_layers=(3, 1)),
            ValueError,
            r"increasing layer indices from 0, got \(3, 1\)",
        ),
        (
            lambda: LinearAttention(**TOY_LINEAR, full_attention_layers=[1, 3]),
            TypeError,
            "a tuple of layer indices, got list",
        ),
        (
            lambda: LinearAttention(**{**TOY_LINEAR, "num_key_heads": 3}),
            ValueError,
            r"num_value_heads to be a multiple of num_key_heads, got 4 and 3",
        ),
        (lambda: Rope(theta="big"), TypeError, "Rope: expected theta to be float, got 'big' of"),
        (lambda: Rope(theta=1e4, partial_rotary_factor=2.0), ValueError, r"in \(0, 1\], got 2.0"),
        (lambda: Rope(theta=1e4, scaling={"factor": 8.0}), ValueError, "to name its rope_type"),
        (lambda: Weights(parameters=10, source=""), ValueError, "a source for the count"),
        (
            lambda: Weights(parameters=1e9, source=""),
            TypeError,
            "parameters to be int, got 1000000000.0 of",
        ),
        (lambda: Scores(sinks=1), TypeError, "sinks to be bool, got 1 of type int"),
        (lambda: Indexer(num_heads=True, head_dim=8, top_k=16), TypeError, "to be int, got True"),
        (lambda: LayerParts(qk_norm=1), TypeError, r"qk_norm to be str \| None, got 1"),
        (lambda: ModelFacts(**TOY, rope={"theta": 1e4}), TypeError, "rope to be Rope or None"),
        (
            lambda: ModelFacts(**TOY, local=Latent),
            TypeError,
            "local to be Sliding or Chunked or LinearAttention or None, got type",
        ),
        (
            lambda: ModelFacts(**TOY, num_kv_shared_layers=4),
            ValueError,
            r"num_kv_shared_layers < layers, got 4 of 4",
        ),
        (
            lambda: ModelFacts(**TOY, rope=Rope(theta=1e4), learned_positions=True),
            ValueError,
            "one of RoPE, learned or sinusoidal positions or ALiBi, got RoPE and learned positions",
        ),
        (
            lambda: ModelFacts(**TOY, learned_positions=True, alibi=True),
            ValueError,
            "learned or sinusoidal positions or ALiBi, got learned positions and ALiBi",
        ),
        (
            lambda: ModelFacts(**{**TOY, "max_position_embeddings": None}),
            ValueError,
            r"expected max_position_embeddings, .*\(only ALiBi, or a model without attention, "
            r"needs no limit\), got None",
        ),
        (
            lambda: ModelFacts(
                **TOY, local=LinearAttention(**TOY_LINEAR, full_attention_layers=(4,))
            ),
            ValueError,
            r"full_attention_layers from 0 to 3, got \(4,\)",
        ),
        (
            lambda: ModelFacts(**TOY, indexer=Indexer(num_heads=4, head_dim=8, top_k=16)),
            ValueError,
            "selects keys for latent attention",
        ),
        (
            lambda: ModelFacts(
                **TOY, temperature_tuning=TemperatureTuning(floor_scale=8, attn_scale=0.1)
            ),
            ValueError,
            "NoPE layers .* with temperature_tuning",
        ),
        (
            lambda: ModelFacts(**TOY, value_head_dim=8, latent=TOY_LATENT),
            ValueError,
            "value_head_dim without a latent",
        ),
        (
            lambda: ModelFacts(**TOY, layer_pattern=(CONV, FULL, CONV, FULL)),
            ValueError,
            "short_conv group for 'conv' layers",
        ),
        (
            lambda: ModelFacts(**TOY, class_defaults=("sliding_windw",)),
            ValueError,
            r"the fields of its groups, got \['sliding_windw'\]",
        ),
    ],
)
def test_a_group_or_an_entry_rejects_what_it_cannot_mean(make, error, message) -> None:
    with pytest.raises(error, match=message):
        make()


def test_a_group_is_all_or_nothing_by_construction() -> None:
    """What the flat schema checked by hand (all of a group's sizes or none) is now a
    signature: a group without one of its sizes cannot be built."""
    for group, sizes in [
        (LinearAttention, TOY_LINEAR),
        (Indexer, dict(num_heads=4, head_dim=8, top_k=16)),
        (Latent, dict(kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)),
    ]:
        for name in sizes:
            with pytest.raises(
                TypeError, match=f"missing 1 required keyword-only argument: '{name}'"
            ):
                group(**{k: v for k, v in sizes.items() if k != name})


def test_a_toy_entry_reads_its_groups_by_their_config_names() -> None:
    hybrid = ModelFacts(**TOY, local=LinearAttention(**TOY_LINEAR, full_attention_layers=(1, 3)))
    assert hybrid.layer_types == (LINEAR, FULL, LINEAR, FULL)
    assert (hybrid.local.mixer, hybrid.linear_num_value_heads) == ("Gated DeltaNet", 4)
    assert (hybrid.sliding_window, hybrid.attention_chunk_size) == (None, None)
    sparse = ModelFacts(
        **TOY, latent=TOY_LATENT, indexer=Indexer(num_heads=4, head_dim=8, top_k=16)
    )
    assert sparse.layer_types == (INDEXED,) * 4
    assert (sparse.index_n_heads, sparse.index_head_dim, sparse.index_topk) == (4, 8, 16)
    assert sparse.head_dim == 8 + 4  # a query's size: no RoPE part and RoPE part
    assert sparse.positions == "none" and sparse.rope_theta is None
    plain = ModelFacts(**TOY, learned_positions=True)
    assert (plain.positions, plain.scores, plain.partial_rotary_factor) == ("learned", None, 1.0)
    alibi = ModelFacts(**{**TOY, "max_position_embeddings": None}, alibi=True)
    assert (alibi.positions, alibi.rope_theta, alibi.uses_rope) == ("alibi", None, (False,) * 4)
    assert plain.weights is None and plain.attention_k_eq_v is False
    with pytest.raises(AttributeError):
        plain.sliding_window = 16  # the config's names only read


def test_the_package_own_names_are_read_in_their_groups_only() -> None:
    """A name that is not a config.json field has no flat view: one way to read it."""
    plain = ModelFacts(**TOY, scores=Scores(sinks=True), parts=LayerParts(qk_norm="head"))
    assert (plain.scores.sinks, plain.parts.qk_norm) == (True, "head")
    for name in ("sinks", "qk_norm", "scale", "nope_every", "global_every", "parameters"):
        assert not hasattr(plain, name), name


def test_the_published_sizes_of_the_caches() -> None:
    """Figures that papers and model cards give, from the table."""
    assert kv_cache_bytes_per_token(MODELS["Llama 3 8B"]) == 128 * 1024  # 128 KiB
    assert kv_cache_bytes(MODELS["Llama 2 7B"], 4096) == 2 * 2**30  # 2 GiB at 4k
    assert kv_cache_bytes(MODELS["Mistral 7B"], 10**6) == 2**29  # capped at 4096 tokens
    assert kv_cache_bytes_per_token(MODELS["DeepSeek-V3"]) // MODELS["DeepSeek-V3"].layers == 1152
    # Kimi Linear's model card: its hybrid cuts the key/value cache "by up to 75%"
    kimi = MODELS["Kimi Linear"]
    all_mla = kimi.layers * max(layer_kv_cache_bytes_per_token(kimi))
    assert 0.7 < 1 - kv_cache_bytes_per_token(kimi) / all_mla <= 0.75
    # Raschka's LLM architecture gallery: Qwen3.5 397B-A17B keeps 30 KiB per token
    assert kv_cache_bytes_per_token(MODELS["Qwen3.5 397B-A17B"]) == 30 * 1024


def test_the_kind_of_attention_and_the_group_size() -> None:
    kinds = {name: (m.attention, m.group_size) for name, m in MODELS.items()}
    assert kinds["GPT-2"] == ("MHA", 1)
    assert kinds["Llama 3 8B"] == ("GQA", 4)
    assert kinds["Gemma 2B"] == ("MQA", 8)
    assert kinds["Gemma 3 27B"] == ("GQA", 2)
    assert kinds["DeepSeek-V3"][0] == "MLA"
    assert kinds["gpt-oss-120b"] == ("GQA", 8)
    assert kinds["Qwen3-Next 80B-A3B"] == ("GQA", 8)
    assert kinds["OLMo 2 7B"] == ("MHA", 1)


def test_gemma3_has_five_local_layers_to_each_global_one() -> None:
    types = MODELS["Gemma 3 27B"].layer_types
    assert types[:6] == (SLIDING,) * 5 + (FULL,)
    assert (types.count(SLIDING), types.count(FULL)) == (52, 10)


def test_a_sliding_model_reaches_layers_times_window_minus_one_back() -> None:
    mistral = MODELS["Mistral 7B"]
    assert mistral.receptive_field == 32 * 4095
    assert MODELS["Gemma 3 27B"].receptive_field is None  # its global layers see everything
    assert MODELS["Llama 3 8B"].receptive_field is None


# -- the move to typed groups changed no figure ----------------------------------------

RECORDED = json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def _changed(facts: ModelFacts) -> list[str]:
    """The figures of ``facts`` that differ from those recorded for its name."""
    now, then = json.loads(json.dumps(snapshot(facts))), RECORDED[facts.name]
    return sorted(key for key in then.keys() | now.keys() if now.get(key) != then.get(key))


def test_the_recorded_snapshot_covers_every_entry() -> None:
    assert list(RECORDED) == list(MODELS)


@pytest.mark.parametrize("facts", MODELS.values(), ids=list(MODELS))
def test_every_entry_gives_the_figures_of_the_flat_schema(facts: ModelFacts) -> None:
    """Every attribute and every method's result (bytes at many lengths and in several
    number types, layer kinds, shapes), as the flat ModelFacts of 5a74127 gave them."""
    assert _changed(facts) == []


def _without_one_value(facts: ModelFacts):
    """Copies of ``facts``, each with one group removed or one of a group's optional
    values set back to its default (where the group still stands without it)."""
    for group in ModelFacts.GROUPS:
        value = getattr(facts, group)
        if value is None:
            continue
        changes = {f"{group}=None": None}
        for item in dataclasses.fields(value):
            if item.default is dataclasses.MISSING or getattr(value, item.name) == item.default:
                continue
            if not item.compare:  # a layer's recipe, no figure: Mamba's chunk_size, ...
                continue
            with contextlib.suppress(ValueError):  # an _Options group left empty
                changes[f"{group}.{item.name}"] = dataclasses.replace(
                    value, **{item.name: item.default}
                )
        for lost, smaller in changes.items():
            with contextlib.suppress(ValueError):  # the entry refuses it: not silent
                yield lost, dataclasses.replace(facts, **{group: smaller})


@pytest.mark.parametrize("facts", MODELS.values(), ids=list(MODELS))
def test_the_snapshot_notices_a_group_that_loses_a_value(facts: ModelFacts) -> None:
    """The comparison above can fail: without any one of its values, an entry's
    figures differ from those recorded."""
    for lost, variant in _without_one_value(facts):
        assert _changed(variant), f"{facts.name} without {lost} gives the same figures"


# -- what a length must be ------------------------------------------------------------


def test_layer_cache_numbers_refuses_a_negative_or_a_float_length() -> None:
    with pytest.raises(ValueError, match="expected tokens >= 0"):
        layer_cache_numbers(MODELS["GPT-2"], -1)
    with pytest.raises(TypeError, match="expected tokens to be an int"):
        layer_cache_numbers(MODELS["GPT-2"], 1.0)


def _glossary_views() -> list[tuple[str, str]]:
    """``(config field, group.field)`` from the glossary's table of the views."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "glossary.md").read_text()
    pairs = []
    for row in text.split("## In the package")[1].splitlines():
        cells = row.split("|")[1:-1]
        if len(cells) != 2 or cells[0].strip() in ("config field", "---"):
            continue
        fields = re.findall(r"`(\w+)`", cells[0].split("(")[0])
        paths = re.findall(r"`(\w+\.\w+)`", cells[1])
        pairs += list(zip(fields, paths, strict=True))
    return pairs


def test_the_glossary_lists_every_config_view_and_where_it_lives() -> None:
    """Each view the glossary names reads its group's field (None, or the field's
    default, without the group), and the glossary names every view ModelFacts has."""
    views = dict(_glossary_views())
    defaults = {"partial_rotary_factor": 1.0, "attention_k_eq_v": False}
    for facts in MODELS.values():
        for name, path in views.items():
            group, field = path.split(".")
            owner = getattr(facts, group)
            expected = getattr(owner, field, None) if owner is not None else None
            assert getattr(facts, name) == (defaults.get(name) if owner is None else expected)
    # A view's docstring opens with its config name: "``sliding_window``: ...".
    documented = {
        name
        for name, value in vars(ModelFacts).items()
        if isinstance(value, property) and (value.__doc__ or "").startswith(f"``{name}``")
    }
    assert documented == set(views)


def test_narrower_values_and_the_sliding_layers_own_heads_are_counted() -> None:
    """MiMo-V2-Flash's shape: values of 128 beside keys of 192, and twice the key/value
    heads in the sliding layers: each layer's bytes per token follow its own heads."""
    sliding = Sliding(window=128, global_every=2, num_kv_heads=4, sinks=True)
    facts = ModelFacts(**TOY, head_dim=192, value_head_dim=128, local=sliding)
    assert facts.layer_kv_shapes == ((4, 192), (2, 192)) * 2
    assert layer_kv_cache_bytes_per_token(facts, 1) == (4 * 320, 2 * 320) * 2
    assert kv_cache_bytes(facts, 1000, 1) == 2 * (4 * 320 * 128 + 2 * 320 * 1000)
    assert "values of 128" in recipe(facts) and "sinks on sliding layers" in recipe(facts)


def test_a_short_convolution_keeps_its_window_only() -> None:
    """LFM2's conv layers keep ``hidden_size * conv_kernel_dim`` numbers whatever the
    length, no key, no value and no recurrent state."""
    conv = ShortConv(channels=64, conv_kernel_dim=3)
    facts = ModelFacts(**TOY, short_conv=conv, layer_pattern=(CONV, FULL, CONV, FULL))
    assert layer_kv_cache_bytes_per_token(facts, 1) == (0, 2 * 2 * 16, 0, 2 * 2 * 16)
    for tokens in (1, 100):
        numbers = layer_cache_numbers(facts, tokens)
        assert [numbers[0], numbers[2]] == [(64 * 3, 0)] * 2
    assert layer_state_bytes(facts, 2, 4) == (64 * 3 * 2, 0, 64 * 3 * 2, 0)
    assert layer_strip(facts).startswith("VFVF")
