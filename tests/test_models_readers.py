"""facts_from_config (``attention.models.readers``): any model's facts, read from its
config, checked against what transformers' own cache keeps, to the byte.

A tiny config of each model type the readers know (``tests/tiny_configs.py``), built
and run by transformers with its cache: after a prefill and each decoding step, every
layer's bytes are those the facts count (``layer_cache_bytes``, the bill's cache). A
dict, a path and a config read alike; what the readers cannot read is refused by name;
each ``MODELS`` entry, through the transformers config built from it, reads back as the
entry, and each released ``config.json`` (``tests/released_configs.py``) as the entry
typed by hand.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
import torch
import transformers
from released_configs import RELEASED
from tiny_configs import BASE, TINY, WINDOW, tiny_config

from attention import MODELS, ModelFacts
from attention.models import (
    CHUNKED,
    CSA,
    HCA,
    SLIDING,
    facts_from_config,
    recipe,
)

pytestmark = pytest.mark.usefixtures("single_thread")

# The type transformers keeps each model's recurrent states in, beside the model's own:
# float32 for Gated DeltaNet, KDA and Mamba (their kernels hand the state back in it;
# Nemotron-H's mamba_ssm_cache_dtype), the model's type for MiniMax's lightning
# attention (MiniMaxLightningAttention keeps attn_weights_inter as computed).
STATE_DTYPE = {"minimax": torch.bfloat16}
PREFILL, STEPS = 5, 3  # 5, 6, 7 and 8 tokens: below, at and past the window of 7


def _floating_tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [t for item in value for t in _floating_tensors(item)]
    return []


def held_bytes(cache, index: int) -> int:
    """Bytes of every floating-point tensor one layer of transformers' cache keeps, each
    view once (DeepSeek-V4's values are its keys: ``self.values = self.keys``).
    Integer tensors are the cache's bookkeeping (the window's size), not the model's
    numbers."""
    tensors = _floating_tensors(vars(cache.layers[index]))
    linear = getattr(cache, "linear_cache", None)  # MiniMaxCache keeps its states apart
    if linear is not None and index < len(linear):
        tensors += _floating_tensors(linear[index])
    held = {(t.data_ptr(), t.shape, t.stride()): t.numel() * t.element_size() for t in tensors}
    return sum(held.values())


def key_value_memory(cache, index: int) -> int:
    """Bytes of the memory under one layer's keys and values. A sliding layer's keys
    are a view of the last ``window - 1`` tokens of the step's concatenation, which
    stays in memory whole: ``window`` tokens once decoding has filled the window.
    (DeepSeek-V4's buffers are views too, of the whole call's projections.)"""
    layer = cache.layers[index]
    tensors = _floating_tensors([getattr(layer, "keys", None), getattr(layer, "values", None)])
    held = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(held.values())


def rolling_token(facts: ModelFacts, tokens: int) -> tuple[int, ...]:
    """The one token each full window holds in the site's convention and not in
    transformers', which keeps ``window - 1`` tokens between steps
    (``DynamicSlidingWindowLayer.update``: ``full_key_states[:, :, -self.sliding_window
    + 1 :, :]``, and so ``DeepseekV4HCACache.update``)."""
    rolling = {SLIDING, CHUNKED, CSA, HCA}
    window = facts.local.tokens_kept if facts.local is not None else None
    return tuple(
        per_token if kind in rolling and tokens >= window else 0
        for kind, per_token in zip(
            facts.layer_types, facts.layer_kv_cache_bytes_per_token(torch.bfloat16), strict=True
        )
    )


def value_copies(facts: ModelFacts) -> tuple[int, ...]:
    """Copies of each layer's cache transformers keeps. 2 in DeepSeek-V4's sliding
    layers, where the model needs one: ``DeepseekV4Attention.forward`` calls
    ``past_key_values.update(kv, kv, self.layer_idx)``, and a ``"sliding_attention"``
    layer's cache is a plain ``DynamicSlidingWindowLayer``, which stores the keys and
    the values apart, where ``DeepseekV4HCACache.update`` stores one tensor for both
    (``self.values = self.keys``)."""
    twice = facts.compressed is not None
    return tuple(2 if twice and kind == SLIDING else 1 for kind in facts.layer_types)


def cache_after(model, chunk: torch.Tensor, cache):
    """Run ``chunk`` through the model with its cache; return the cache.

    transformers 5.24 renamed the model's ``past_key_values`` argument and output
    ``cache`` (the old name warns until 5.40); the pinned release knows only the old.
    """
    if "cache" in inspect.signature(model.forward).parameters:
        return model(chunk, cache=cache, use_cache=True).cache
    return model(chunk, past_key_values=cache, use_cache=True).past_key_values


@pytest.mark.parametrize("model_type", list(TINY))
def test_the_bill_is_what_transformers_caches_after_prefill_and_decoding(model_type) -> None:
    """Layer by layer, after a prefill and after each decoding step, the bytes the
    facts count equal those of the tensors transformers' cache keeps, but for the token
    a full window holds in the site's convention (``rolling_token``); the keys and
    values the facts count equal the memory under transformers' (the prefill fits in
    the window; a longer one stays in memory whole until the next step)."""
    config = tiny_config(model_type)
    facts = facts_from_config(config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16).eval()
    state_dtype = STATE_DTYPE.get(model_type, torch.float32)
    ids = torch.randint(0, 64, (1, PREFILL))
    cache = None
    with torch.no_grad():
        for step in range(STEPS + 1):
            chunk = ids if step == 0 else ids[:, :1]
            cache = cache_after(model, chunk, cache)
            tokens = PREFILL + step
            expected = facts.layer_cache_bytes(tokens, torch.bfloat16, state_dtype)
            window = rolling_token(facts, tokens)
            copies = value_copies(facts)
            held = tuple(held_bytes(cache, i) for i in range(facts.layers))
            assert held == tuple(
                c * (e - w) for c, e, w in zip(copies, expected, window, strict=True)
            ), tokens
            # In memory, the step's whole concatenation: the window the site counts.
            memory = tuple(key_value_memory(cache, i) for i in range(facts.layers))
            assert memory == tuple(
                c * per_token * facts._tokens_kept(kind, tokens)
                for c, kind, per_token in zip(
                    copies, facts.layer_types, facts.layer_kv_cache_bytes_per_token(), strict=True
                )
            ), tokens
    assert len(cache.layers) == facts.layers


def test_the_tiny_configs_cross_their_windows() -> None:
    """The checks above see a window both filling and full."""
    assert PREFILL < WINDOW <= PREFILL + STEPS


# -- from_config -------------------------------------------------------------------------


@pytest.mark.parametrize("model_type", ["mistral", "deepseek_v4"])
def test_a_dict_a_path_and_a_config_give_the_same_facts(model_type, tmp_path) -> None:
    config = tiny_config(model_type)
    as_dict = config.to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(as_dict), encoding="utf-8")
    facts = facts_from_config(config)
    assert facts_from_config(as_dict) == facts
    assert facts_from_config(path) == facts == facts_from_config(tmp_path)
    assert facts.name == model_type and facts.config_class == type(config).__name__


def test_cohere2_rotates_in_its_sliding_layers_only() -> None:
    """Command A's full layers are NoPE layers: each layer of the tiny Cohere 2 model
    gives the same output whatever rotation it is handed exactly where the facts say
    it applies no RoPE (``uses_rope``)."""
    config = tiny_config("cohere2")
    config._attn_implementation = "eager"
    facts = facts_from_config(config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    hidden = torch.randn(1, 3, config.hidden_size)
    mask = torch.full((3, 3), float("-inf")).triu(1)[None, None]
    angles = torch.randn(1, 3, config.head_dim)
    rotations = [(angles.cos(), angles.sin()), (torch.ones_like(angles), torch.zeros_like(angles))]
    rotates = []
    with torch.no_grad():
        for layer in model.model.layers:
            out = [layer.self_attn(hidden, rotation, mask)[0] for rotation in rotations]
            rotates.append(not torch.equal(*out))
    assert tuple(rotates) == facts.uses_rope == (True, True, True, False)


def test_a_multimodal_config_gives_its_text_model() -> None:
    config = transformers.Gemma3Config(text_config=BASE | TINY["gemma3_text"])
    assert (
        facts_from_config(config).layer_types
        == facts_from_config(tiny_config("gemma3_text")).layer_types
    )


@pytest.mark.parametrize(
    "config, error, message",
    [
        ({"model_type": "roberta"}, ValueError, "model_type='roberta'"),
        ({"model_type": "no such type"}, ValueError, "model_type this transformers knows"),
        ({"hidden_size": 8}, ValueError, "name its model_type"),
        ("/no/such/config.json", ValueError, "expected a config.json file"),
        (42, TypeError, "got int"),
        (
            {"model_type": "smollm3", "num_hidden_layers": 4, "no_rope_layers": [1, 0, 0, 1]},
            ValueError,
            "no_rope_layers=[1, 0, 0, 1]",
        ),
        (
            {
                "model_type": "gpt_oss",
                "num_hidden_layers": 2,
                "layer_types": ["sliding_attention", "chunked_attention"],
            },
            ValueError,
            "layer_types='chunked_attention'",
        ),
        (
            {"model_type": "llama", "rope_parameters": {"rope_type": "made_up", "rope_theta": 1.0}},
            ValueError,
            None,
        ),
        ({"model_type": "bloom"}, ValueError, "trained_context= for a bloom config"),
    ],
)
def test_what_the_atlas_cannot_read_is_refused_by_name(config, error, message) -> None:
    with pytest.raises(error) as caught:
        facts_from_config(config)
    assert str(caught.value).startswith("facts_from_config: expected")
    if message is not None:
        assert message in str(caught.value)


def test_a_bloom_config_reads_as_alibi_with_the_context_it_is_given() -> None:
    config = {"model_type": "bloom", "n_layer": 2, "n_head": 3, "hidden_size": 12}
    facts = facts_from_config(config, trained_context=64)
    assert (facts.positions, facts.max_position_embeddings, facts.trained_context) == (
        "alibi",
        None,
        64,
    )
    assert (facts.layers, facts.num_heads, facts.num_kv_heads, facts.head_dim) == (2, 3, 3, 4)
    assert "ALiBi" in recipe(facts) and "RoPE" not in recipe(facts)
    assert facts.context_source == "given"


# -- item 10: each MODELS entry, through the transformers config built from it ------------

COMPARED = [  # every attribute a config determines (not the names and sources)
    "layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "max_position_embeddings",
    "positions",
    "layer_types",
    "uses_rope",
    "kv_shared",
    "layer_kv_shapes",
    "rope.theta",  # not its scaling, to which transformers may add defaults: below
    "rope.local_theta",
    "rope.partial_rotary_factor",
    "rope.nope_every",
    "local",
    "latent",
    "indexer",
    "global_layers",
    "mamba",
    "compressed",
    "num_kv_shared_layers",
    "scores",
    "parts",
    "temperature_tuning",
    "final_logit_softcapping",
    "bidirectional",
    "cross",
    "attention_bias",
    "rms_norm_eps",
]


def _read(facts: ModelFacts, name: str):
    """An attribute, or ``group.field``: ``None`` where the model lacks the group."""
    group, _, field = name.rpartition(".")
    owner = getattr(facts, group) if group else facts
    return getattr(owner, field) if owner is not None else None


@pytest.mark.parametrize("facts", MODELS.values(), ids=list(MODELS))
def test_from_config_gives_back_each_entry(facts) -> None:
    """The config transformers builds from an entry's released fields reads back as the
    entry: every mechanism, and every byte of its cache."""
    from test_models_table import released_config

    # A config that sets no position limit (BLOOM's) cannot say the context: the entry's.
    given = facts.trained_context if facts.max_position_embeddings is None else None
    read = facts_from_config(released_config(facts), name=facts.name, trained_context=given)
    for name in COMPARED:
        assert _read(read, name) == _read(facts, name), name
    scaling = facts.rope.scaling if facts.rope is not None else None
    if scaling is not None:  # transformers may add defaults to the dict
        assert scaling.items() <= read.rope.scaling.items()
    else:
        assert read.rope is None or read.rope.scaling is None
    for tokens in (1, 4096, facts.trained_context):
        assert read.cache_bytes(tokens) == facts.cache_bytes(tokens)


@pytest.mark.parametrize("name", list(RELEASED))
def test_the_released_file_reads_as_the_entry_typed_by_hand(name) -> None:
    """A second implementation of each entry added with the atlas: the fields of its
    released config.json, through ``facts_from_config``, give the entry the table types
    by hand, every fact of it; only what a config cannot tell (the sources, the weights'
    count, the trained context, which weights the release quantizes: a
    ``quantization_config`` names the modules it leaves out, not those it converts)
    comes from the entry."""
    facts = MODELS[name]
    released = RELEASED[name]  # Kimi K2's "kimi_k2" reads as deepseek_v3: LOADED_AS
    read = facts_from_config(released, name=name, checkpoint=facts.checkpoint, year=facts.year)
    given = ("source", "context_source", "trained_context", "weights", "quantization")
    assert dataclasses.replace(read, **{f: getattr(facts, f) for f in given}) == facts
    assert read.trained_context == read.max_position_embeddings >= facts.trained_context


def test_every_released_file_has_its_entry() -> None:
    assert set(RELEASED) <= set(MODELS)


def test_facts_from_config_takes_the_names_the_table_gives() -> None:
    facts = facts_from_config(tiny_config("llama"), name="Tiny", checkpoint="me/tiny", year=2026)
    assert (facts.name, facts.checkpoint, facts.year) == ("Tiny", "me/tiny", 2026)
    plain = dataclasses.replace(facts, name="llama", checkpoint="", year=0)
    assert plain == facts_from_config(tiny_config("llama"))
