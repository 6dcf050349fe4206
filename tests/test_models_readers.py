"""facts_from_config (``attention.models.readers``): any model's facts, read from its
config, checked against what transformers' own cache keeps, to the byte.

A tiny config of each model type the readers know (``tests/tiny_configs.py``), built
and run by transformers with its cache: after a prefill and each decoding step, every
layer's bytes are those the facts count (``layer_cache_bytes``, the bill's cache). A
dict, a path and a config read alike; what the readers cannot read is refused by name;
each ``MODELS`` entry, through the transformers config built from it, reads back as the
entry, and each released ``config.json`` the package stores (``released_config``) as the
entry typed by hand.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
import torch
import transformers
from tiny_configs import BASE, TINY, WINDOW, tiny_config, tiny_fields
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from attention import MODELS, ModelFacts
from attention.models import (
    CHUNKED,
    CSA,
    HCA,
    SLIDING,
    bill,
    cache_bytes,
    facts_from_config,
    layer_cache_bytes,
    layer_kv_cache_bytes_per_token,
    layer_strip,
    layer_tokens_kept,
    recipe,
    released_config,
    released_names,
)
from attention.models.facts import LayerParts, Scores, Sliding
from attention.models.readers import GENERAL, REFUSED

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
    numbers. A decoder that could cross-attend (BERT's, with ``is_decoder``) keeps its
    own keys and values in an ``EncoderDecoderCache``'s ``self_attention_cache``."""
    cache = getattr(cache, "self_attention_cache", cache)
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
    layer = getattr(cache, "self_attention_cache", cache).layers[index]
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
            facts.layer_types, layer_kv_cache_bytes_per_token(facts, torch.bfloat16), strict=True
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
    Mamba-2 alone names them ``cache_params``.
    """
    if "cache" in inspect.signature(model.forward).parameters:
        return model(chunk, cache=cache, use_cache=True).cache
    if "cache_params" in inspect.signature(model.forward).parameters:  # Mamba2ForCausalLM's
        return model(chunk, cache_params=cache, use_cache=True).cache_params
    return model(chunk, past_key_values=cache, use_cache=True).past_key_values


#: Types read whose tiny model transformers cannot run on a CPU, and why; the test
#: checks that it still cannot, so that a release that mends it puts the type back.
NOT_RUNNABLE = {
    "openai-gpt": "OpenAIGPTLMHeadModel keeps no cache",
    "musicgen": "AutoModelForCausalLM cannot build MusicgenForCausalLM from MusicgenConfig",
    "musicgen_melody": "nor MusicgenMelodyForCausalLM from MusicgenMelodyConfig",
    "dbrx": "DbrxAttention reads attn_config.rope_theta, which DbrxConfig moved away",
    "gemma3n": "Gemma3nForConditionalGeneration's vision tower needs timm, which the tests "
    "do not install; its text model is gemma3n_text's, whose own case runs it",
}
#: The error each of them stops with: a name its code lacks, or a library it needs.
NOT_RUNNABLE_ERROR = {"gemma3n": ImportError}
#: Types whose local layers transformers' cache does not cap: it keeps every token, as
#: for full layers, where the layer reads the last ``window`` only. Their bill is
#: checked against the same facts with every layer full.
KEEPS_EVERY_TOKEN = {"gpt_neo": "GPTNeoModel's DynamicCache is given no window"}
#: Types still to be read or refused, each an expected failure until its reader lands.
NOT_YET: dict[str, str] = {
    "cohere_compass_text": "multimodal RoPE per layer kind (CohereCompassRotaryEmbedding's "
    "mrope_section), None on the full layers: a reader to come",
    "dots3_note": "latent sizes layer by layer (Dots3NoteTextAttention reads "
    "config.per_layer_config[layer_idx]), with an indexer: a reader to come",
    "dots3_note_text": "latent sizes layer by layer (Dots3NoteTextAttention reads "
    "config.per_layer_config[layer_idx]), with an indexer: a reader to come",
}
#: Types whose model needs a call before it runs: X-MOD's language adapters.
PREPARE = {"xmod": lambda model: model.roberta.set_default_language("en_XX")}
CAUSAL_LM_TYPES = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _breadth_case(model_type: str):
    """A type still to come is an expected failure, strictly: once it passes, the test
    fails until it leaves ``NOT_YET``."""
    if model_type in NOT_YET:
        mark = pytest.mark.xfail(reason=NOT_YET[model_type], strict=True)
        return pytest.param(model_type, marks=mark)
    return model_type


def tiny_model(model_type: str, config):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16).eval()
    PREPARE.get(model_type, lambda model: None)(model)
    return model


def assert_the_bill_is_what_transformers_caches(model_type: str) -> None:
    """Layer by layer, after a prefill and after each decoding step, the bytes the
    facts count equal those of the tensors transformers' cache keeps, but for the token
    a full window holds in the site's convention (``rolling_token``); the keys and
    values the facts count equal the memory under transformers' (the prefill fits in
    the window; a longer one stays in memory whole until the next step)."""
    config = tiny_config(model_type)
    facts = facts_from_config(config)
    if model_type in KEEPS_EVERY_TOKEN:
        facts = dataclasses.replace(facts, local=None)
    model = tiny_model(model_type, config)
    state_dtype = STATE_DTYPE.get(model_type, torch.float32)
    ids = torch.randint(1, 64, (1, PREFILL))
    cache = None
    with torch.no_grad():
        for step in range(STEPS + 1):
            chunk = ids if step == 0 else ids[:, :1]
            cache = cache_after(model, chunk, cache)
            tokens = PREFILL + step
            expected = layer_cache_bytes(facts, tokens, torch.bfloat16, state_dtype)
            window = rolling_token(facts, tokens)
            copies = value_copies(facts)
            held = tuple(held_bytes(cache, i) for i in range(facts.layers))
            assert held == tuple(
                c * (e - w) for c, e, w in zip(copies, expected, window, strict=True)
            ), tokens
            # In memory, the step's whole concatenation: the window the site counts.
            memory = tuple(key_value_memory(cache, i) for i in range(facts.layers))
            assert memory == tuple(
                c * per_token * kept
                for c, kept, per_token in zip(
                    copies,
                    layer_tokens_kept(facts, tokens),
                    layer_kv_cache_bytes_per_token(facts),
                    strict=True,
                )
            ), tokens
    state = "bf16" if state_dtype == torch.bfloat16 else "fp32"
    assert bill(facts, tokens, state_dtype=state).cache == sum(expected)
    assert len(getattr(cache, "self_attention_cache", cache).layers) == facts.layers


@pytest.mark.parametrize("model_type", [_breadth_case(t) for t in CAUSAL_LM_TYPES])
def test_every_causal_lm_type_is_read_with_its_bill_or_refused_by_name(model_type) -> None:
    """Every type of transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``: refused with
    the type and the mechanism named, or read, with its facts' recipe and strip, and its
    bill held to what transformers' cache keeps (``assert_the_bill_is_...``). A type
    that is neither, as a new release may bring, fails here."""
    if model_type in REFUSED:
        with pytest.raises(ValueError) as caught:
            facts_from_config({"model_type": model_type})
        assert f"model_type={model_type!r}: {REFUSED[model_type]}" in str(caught.value)
        return
    facts = facts_from_config(tiny_config(model_type))
    assert recipe(facts) and layer_strip(facts)
    assert bill(facts, 100).cache == cache_bytes(facts, 100)
    if model_type in NOT_RUNNABLE:
        with pytest.raises(NOT_RUNNABLE_ERROR.get(model_type, AttributeError)):
            assert_the_bill_is_what_transformers_caches(model_type)
        return
    assert_the_bill_is_what_transformers_caches(model_type)


def test_every_hand_written_tiny_config_is_a_causal_lm_type() -> None:
    """So the breadth test above checks each of them."""
    assert set(TINY) <= set(CAUSAL_LM_TYPES)


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


@pytest.mark.parametrize(
    "model_type", ["cohere2", "kolibri1", "exaone4", "exaone_moe", "afmoe", "cohere2_moe"]
)
def test_cohere2_rotates_in_its_sliding_layers_only(model_type) -> None:
    """Command A's full layers are NoPE layers, and Command A MoE's, AFMoE's, and
    Kolibri 1's and EXAONE 4's (and EXAONE MoE's) with a window: each
    layer of the tiny model gives the same output whatever rotation it is handed
    exactly where the facts say it applies no RoPE (``uses_rope``)."""
    config = tiny_config(model_type)
    config._attn_implementation = "eager"
    facts = facts_from_config(config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    hidden = torch.randn(1, 3, config.hidden_size)
    mask = torch.full((3, 3), float("-inf")).triu(1)[None, None]
    angles = torch.randn(1, 3, facts.head_dim)
    rotations = [(angles.cos(), angles.sin()), (torch.ones_like(angles), torch.zeros_like(angles))]
    rotates = []
    with torch.no_grad():
        for layer in model.model.layers:
            out = [layer.self_attn(hidden, rotation, mask)[0] for rotation in rotations]
            rotates.append(not torch.equal(*out))
    assert tuple(rotates) == facts.uses_rope == (True, True, True, False)


#: Fields that turn a part on (or off) in a general type's config, each a case of its
#: own beside the type's tiny config: QK-norm behind a flag, OLMo's and DBRX's clamp.
PART_FLAGS = {
    "cohere": {"use_qk_norm": True},
    "glm4_moe": {"use_qk_norm": True},
    "persimmon": {"qk_layernorm": False},  # on in PersimmonConfig's defaults
    "phi": {"qk_layernorm": True},
    "stablelm": {"qk_layernorm": True},
    "olmo": {"clip_qkv": 8.0},
    "olmoe": {"clip_qkv": 8.0},
    "dbrx": {"attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0}},
}
#: The models AutoModelForCausalLM does not build from a text config: Emu3's text model.
CAUSAL_LM_CLASS = {"emu3_text_model": "Emu3ForCausalLM"}
_GENERAL_CASES = [(t, None) for t in GENERAL] + [(t, t + "+flag") for t in PART_FLAGS]


def _general_config(model_type: str, variant: str | None):
    if variant is None:
        return tiny_config(model_type)
    fields = tiny_fields(model_type) | PART_FLAGS[model_type]
    return transformers.CONFIG_MAPPING[model_type](**fields)


def _norm_kind(norm, inputs: list[torch.Tensor], head_dim: int) -> str:
    """A query norm's kind as ``LayerParts.qk_norm`` names it, from what it does to the
    inputs it was given at two runs whose positions differ (``inputs``): a LayerNorm
    ignores a shift of its input; a norm over the projection reads more than
    ``head_dim`` features; one whose input moved with the positions follows RoPE."""
    x = inputs[0]
    with torch.no_grad():
        if torch.allclose(norm(x + 3.0), norm(x), atol=1e-4):
            return "layer_norm"
    if x.shape[-1] != head_dim:
        return "projection"
    after_rope = not torch.equal(*inputs)
    scaled = any(True for _ in norm.parameters())
    if after_rope:
        return "head_after_rope" if scaled else "l2"
    return "head" if scaled else "unscaled before RoPE, which no qk_norm names"


@pytest.mark.parametrize(
    "model_type, variant", _GENERAL_CASES, ids=[v or t for t, v in _GENERAL_CASES]
)
def test_the_general_reader_keeps_the_parts_each_attention_holds(model_type, variant) -> None:
    """Every type of the general reader, built by transformers, each attention layer of
    it: a query and key norm where the facts name one, of the kind they name (each
    head's, the projection's, a LayerNorm, before or after RoPE); an output gate where
    a gate projection gives one number per output feature, a head gate where it gives
    one per head; sinks in the layers the facts say; the clamp its code reads. A part
    the reader drops, or one it names that the code lacks, fails here."""
    config = _general_config(model_type, variant)
    facts = facts_from_config(config)
    if model_type == "dbrx":  # DbrxAttention stores attn_config.rope_theta, which it lacks
        config.attn_config.rope_theta = facts.rope.theta
    torch.manual_seed(0)
    name = CAUSAL_LM_CLASS.get(model_type)
    model = (
        getattr(transformers, name)(config)
        if name
        else transformers.AutoModelForCausalLM.from_config(config)
    ).eval()
    attentions = [
        m
        for m in model.modules()
        if type(m).__name__.endswith("Attention") and hasattr(m, "layer_idx")
    ]
    assert attentions
    parts = facts.parts or LayerParts(value_norm=True)  # a stand-in with nothing checked here
    scores = facts.scores or Scores(scale=1.0)
    norm_names = ("q_norm", "query_layernorm", "q_layernorm")
    first = attentions[0]
    norm = next((getattr(first, n) for n in norm_names if hasattr(first, n)), None)
    if norm is None:
        assert parts.qk_norm is None
    else:  # its inputs at positions 0.. and at 3..: the same before RoPE
        inputs = []
        hook = norm.register_forward_hook(lambda module, args, out: inputs.append(args[0]))
        ids = torch.randint(1, 60, (1, 5))
        with torch.no_grad():
            for shift in (0, 3):
                model(ids, position_ids=torch.arange(5)[None] + shift)
        hook.remove()
        assert _norm_kind(norm, inputs, facts.head_dim) == parts.qk_norm
    for attention in attentions:
        assert any(hasattr(attention, n) for n in norm_names) == (parts.qk_norm is not None)
        gates = [
            m.out_features
            for n, m in attention.named_children()
            if "gate" in n and isinstance(m, torch.nn.Linear)
        ]
        assert (facts.num_heads * facts.head_dim in gates) == parts.output_gate
        assert (facts.num_heads in gates) == parts.head_gate
        sliding = facts.layer_types[attention.layer_idx] == SLIDING
        local_sinks = isinstance(facts.local, Sliding) and facts.local.sinks and sliding
        assert hasattr(attention, "sinks") == (scores.sinks or local_sinks)
        # DbrxAttention keeps its own clip_qkv; OlmoAttention reads self.config.clip_qkv
        clip = getattr(attention, "clip_qkv", None)
        if clip is None:
            clip = getattr(getattr(attention, "config", None), "clip_qkv", None)
        assert clip == parts.clip_qkv


@pytest.mark.parametrize(
    "thetas, expected",
    [
        ([1e4, 1e4, 1e4, 5e5], dict(theta=5e5, local_theta=1e4, nope_every=None)),
        ([1e4, 1e4, 1e4, 0.0], dict(theta=1e4, local_theta=None, nope_every=4)),
    ],
)
def test_granite_swa_reads_a_rope_base_per_layer(thetas, expected) -> None:
    """GraniteSWA's ``layer_rope_theta``: each layer's base, 0 for none. The rotation
    each attention layer of the tiny model is handed has the base the facts give its
    layer (its frequency ``base ** (-2 / head_dim)`` at position 1), or none at all
    where the facts say the layer rotates nothing."""
    fields = tiny_fields("granite_swa") | {
        "layer_types": [SLIDING] * 3 + ["full_attention"],
        "layer_rope_theta": thetas,
    }
    config = transformers.GraniteSWAConfig(**fields)
    facts = facts_from_config(config)
    rope = facts.rope
    assert (rope.theta, rope.local_theta, rope.nope_every) == tuple(expected.values())
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    handed = []
    for layer in model.model.layers:
        layer.self_attn.register_forward_pre_hook(
            lambda module, args, kwargs: handed.append(kwargs["position_embeddings"]),
            with_kwargs=True,
        )
    with torch.no_grad():
        model(torch.randint(1, 60, (1, 3)))
    for i, (rotation, rotates) in enumerate(zip(handed, facts.uses_rope, strict=True)):
        assert (rotation is not None) == rotates
        if rotates:
            base = rope.local_theta if facts.layer_types[i] == SLIDING else None
            frequency = float(rotation[0][0, 1, 1].double().arccos())
            assert frequency == pytest.approx((base or rope.theta) ** (-2 / 8), rel=1e-3)


def test_dbrx_reads_its_key_value_heads_from_its_attention_config() -> None:
    """DbrxAttention's key/value heads are ``attn_config.kv_n_heads``, which DbrxConfig
    copies into ``num_key_value_heads`` without declaring that field."""
    config = transformers.DbrxConfig(n_heads=8, attn_config={"kv_n_heads": 2})
    facts = facts_from_config(config)
    assert facts.num_kv_heads == config.num_key_value_heads == 2
    assert facts.num_heads == 8


def test_a_multimodal_config_gives_its_text_model() -> None:
    config = transformers.Gemma3Config(text_config=BASE | TINY["gemma3_text"])
    assert (
        facts_from_config(config).layer_types
        == facts_from_config(tiny_config("gemma3_text")).layer_types
    )


@pytest.mark.parametrize(
    "config, error, message",
    [
        ({"model_type": "t5"}, ValueError, "model_type='t5'"),
        ({"model_type": "no such type"}, ValueError, "model_type this transformers knows"),
        ({"hidden_size": 8}, ValueError, "name its model_type"),
        ("/no/such/config.json", ValueError, "expected a config.json file"),
        (42, TypeError, "got int"),
        (  # GLM-5.2's: a "shared" layer reuses an earlier layer's top-k, as hy_v4's do
            {
                "model_type": "glm_moe_dsa",
                "num_hidden_layers": 4,
                "indexer_types": ["full", "shared", "full", "shared"],
            },
            ValueError,
            "indexer_types='shared'",
        ),
        # Old RoPE fields a class does not convert: Gemma 4, Mellum and MiMo-V2-Flash keep
        # an old rope_scaling as their rope_parameters, with no base.
        *[
            (
                {"model_type": model_type, "rope_scaling": {"type": "linear", "factor": 2.0}},
                ValueError,
                "no rope_theta, RoPE's base",
            )
            for model_type in ("gemma4_text", "gemma4_unified_text", "mellum", "mimo_v2_flash")
        ],
        (  # Phi-3 renames an old "yarn" longrope, then misses longrope's factors
            {"model_type": "phi3", "rope_scaling": {"type": "yarn", "factor": 2.0}},
            ValueError,
            "expected a phi3 config that transformers can build",
        ),
        (  # BLOOM has no RoPE, and no context for a yarn scaling to start from
            {
                "model_type": "bloom",
                "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
            },
            ValueError,
            "expected a bloom config that transformers can build",
        ),
        (
            {"model_type": "phimoe", "rope_scaling": {"type": "linear", "factor": 2.0}},
            ValueError,
            "expected a phimoe config that transformers can build",
        ),
        (
            {"model_type": "llama", "num_hidden_layers": "four"},
            ValueError,
            "expected a llama config that transformers can build",
        ),
        ({"model_type": "lfm2_moe"}, ValueError, "got layer_types=None"),
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
    ],
)
# transformers warns that rope_scaling is an old name: the cases give it on purpose.
@pytest.mark.filterwarnings("ignore:`rope_scaling` is deprecated:FutureWarning")
def test_what_the_atlas_cannot_read_is_refused_by_name(config, error, message) -> None:
    with pytest.raises(error) as caught:
        facts_from_config(config)
    assert str(caught.value).startswith("facts_from_config: expected")
    if message is not None:
        assert message in str(caught.value)


def test_a_field_the_model_code_ignores_changes_no_fact() -> None:
    """Item 2: ``GPT2Attention`` is multi-head whatever a config carries; GPT2Config
    declares no ``num_key_value_heads``, so the reader does not read it."""
    fields = {"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 32}
    plain = facts_from_config(fields)
    carrying = facts_from_config(fields | {"num_key_value_heads": 1, "sliding_window": 4})
    assert carrying.num_kv_heads == carrying.num_heads == 4 and carrying.local is None
    assert bill(carrying, 100).cache == bill(plain, 100).cache


def test_a_bloom_config_gets_a_bill_without_a_trained_context() -> None:
    """Item 2: only the facts that need the limit ask for it; the bill does not."""
    facts = facts_from_config({"model_type": "bloom", "n_layer": 2, "n_head": 3, "hidden_size": 12})
    assert facts.trained_context is None and facts.max_position_embeddings is None
    assert bill(facts, 10).cache == 2 * 2 * 12 * 10 * 2  # layers * K,V * 12 numbers * 2 bytes


def test_deepseek_v4_keeps_one_key_value_head_whatever_the_config_says() -> None:
    """Item 2: ``DeepseekV4Attention``'s ``kv_proj`` projects to one ``head_dim``; a V4
    config that sets ``num_key_value_heads=2``, read as two heads, would be billed one
    more head's window in every layer at 20 tokens (window 8, 4 layers, head_dim 16:
    8 * 16 * 2 bytes). Its bill is what the cache keeps."""
    fields = BASE | TINY["deepseek_v4"] | {"num_key_value_heads": 2, "sliding_window": 8}
    config = transformers.CONFIG_MAPPING["deepseek_v4"](**fields)
    facts = facts_from_config(config)
    assert (facts.num_kv_heads, facts.layers, facts.head_dim) == (1, 4, 16)
    model = tiny_model("deepseek_v4", config)
    with torch.no_grad():
        cache = cache_after(model, torch.randint(1, 64, (1, 20)), None)
    expected = layer_cache_bytes(facts, 20)
    held = tuple(held_bytes(cache, i) for i in range(4))
    assert held == tuple(
        c * (e - w)
        for c, e, w in zip(value_copies(facts), expected, rolling_token(facts, 20), strict=True)
    )
    twice = dataclasses.replace(facts, num_kv_heads=2)  # the config's count, read as given
    extra = tuple(t - e for t, e in zip(layer_cache_bytes(twice, 20), expected, strict=True))
    assert extra == (8 * 16 * 2,) * 4


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
    assert (facts.context_source, facts.context_claim) == ("given", "trained")


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


# Stored files of types whose reader has not landed yet: each case fails today and must
# pass once it lands (strict), so that the lead sees it turn.
AWAITING_A_READER: dict[str, str] = {}


def _entry_case(facts: ModelFacts):
    model_type = getattr(transformers, facts.config_class).model_type
    if model_type in AWAITING_A_READER:
        reason = AWAITING_A_READER[model_type]
        return pytest.param(facts, marks=pytest.mark.xfail(reason=reason, strict=True))
    return facts


@pytest.mark.parametrize(
    "facts", [_entry_case(facts) for facts in MODELS.values()], ids=list(MODELS)
)
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
        assert cache_bytes(read, tokens) == cache_bytes(facts, tokens)


def _released_case(name: str):
    model_type = released_config(name)["model_type"]
    if model_type in AWAITING_A_READER:
        return pytest.param(
            name, marks=pytest.mark.xfail(reason=AWAITING_A_READER[model_type], strict=True)
        )
    return name


@pytest.mark.parametrize("name", [_released_case(name) for name in released_names()])
def test_the_released_file_reads_as_the_entry_typed_by_hand(name) -> None:
    """A second implementation of each entry: the fields of its released config.json,
    through ``facts_from_config``, give the entry the table types by hand, every fact of
    it; only what a config cannot tell (the sources, the weights' count, the trained
    context, which fields the file leaves to the class's defaults, which weights the
    release quantizes: a ``quantization_config`` names the modules it leaves out, not
    those it converts) comes from the entry."""
    facts = MODELS[name]
    released = released_config(name)  # Kimi K2's "kimi_k2" reads as deepseek_v3: LOADED_AS
    read = facts_from_config(released, name=name, checkpoint=facts.checkpoint, year=facts.year)
    given = (
        "source",
        "context_source",
        "trained_context",
        "context_claim",
        "weights",
        "class_defaults",
        "quantization",
    )
    assert dataclasses.replace(read, **{f: getattr(facts, f) for f in given}) == facts
    assert read.trained_context == read.max_position_embeddings >= facts.trained_context
    assert read.context_claim == "configured"  # a config holds a limit, not a length trained
    fields = released.get("text_config", released)
    assert not fields.keys() & set(facts.class_defaults)  # what the class supplies


def test_every_released_file_has_its_entry() -> None:
    assert set(released_names()) <= set(MODELS)


def test_facts_from_config_takes_the_names_the_table_gives() -> None:
    facts = facts_from_config(tiny_config("llama"), name="Tiny", checkpoint="me/tiny", year=2026)
    assert (facts.name, facts.checkpoint, facts.year) == ("Tiny", "me/tiny", 2026)
    plain = dataclasses.replace(facts, name="llama", checkpoint="", year=0)
    assert plain == facts_from_config(tiny_config("llama"))


# -- types new in transformers 5.25 ------------------------------------------------------


def needs_type(model_type: str) -> None:
    """Skip a check of a type that the installed transformers does not have (one newer
    than the pin, which ``nox -s tests-latest`` checks)."""
    if model_type not in transformers.CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type!r}")


def first_query_head_scaled_changes_the_output(model_type: str) -> bool:
    """Whether the first layer's attention output changes when query head 0's rows of its
    query projection (the first ``head_dim`` rows of ``q_proj``, of a fused
    ``qkv_proj`` or of ``q_gate_proj``, whose gate follows each head's query) are
    multiplied by 3, in float64, with an epsilon too small to matter in the norms."""
    config = tiny_config(model_type)
    config.rms_norm_eps = 1e-30
    facts = facts_from_config(config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    attention = model.to(torch.float64).eval().model.layers[0].self_attn
    hidden = torch.randn(1, 3, config.hidden_size, dtype=torch.float64)
    mask = torch.full((3, 3), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    angles = torch.randn(1, 3, facts.head_dim, dtype=torch.float64)
    rotation = (angles.cos(), angles.sin())
    names = ("q_proj", "qkv_proj", "q_gate_proj")
    projection = next(getattr(attention, n) for n in names if hasattr(attention, n))
    with torch.no_grad():
        before = attention(hidden, rotation, mask)[0]
        projection.weight[: facts.head_dim] *= 3
        after = attention(hidden, rotation, mask)[0]
    # The norms compute in float32: a scale they divide out leaves ~1e-9 of the output.
    return not torch.allclose(before, after, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "model_type",
    [
        "llama",
        "olmo2",  # QK-norm over the whole projection: one head's scale reaches the others
        "qwen3",
        "apertus1p5_text",
        "ergo",
        "exaone",
        "minicpm5_moe",
        "param2moe",
        "sarvam_moe",
    ],
)
def test_a_qk_norm_per_head_is_read_where_a_heads_query_scale_changes_nothing(model_type):
    """An RMSNorm over each head divides a head's scale out of its queries, and nothing
    else does: the facts say ``qk_norm="head"`` exactly where scaling one query head
    leaves the layer's output as it was."""
    needs_type(model_type)
    parts = facts_from_config(tiny_config(model_type)).parts
    per_head = parts is not None and parts.qk_norm == "head"
    assert first_query_head_scaled_changes_the_output(model_type) is not per_head


def test_minicpm5_gates_each_output_feature() -> None:
    """MiniCPM 5's gate, read as ``output_gate``: each feature of the attention's output
    is multiplied by ``sigmoid`` of its own gate, the second half of each head's rows of
    ``q_gate_proj``; zeroing those rows leaves half of the ungated output."""
    needs_type("minicpm5_moe")
    config = tiny_config("minicpm5_moe")
    facts = facts_from_config(config)
    assert facts.parts.output_gate
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    attention = model.to(torch.float64).eval().model.layers[0].self_attn
    hidden = torch.randn(1, 3, config.hidden_size, dtype=torch.float64)
    mask = torch.full((3, 3), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    angles = torch.randn(1, 3, facts.head_dim, dtype=torch.float64)
    rotation = (angles.cos(), angles.sin())
    # Each head's 2 * head_dim rows: its query's, then its gate's.
    rows = attention.q_gate_proj.weight.view(-1, 2, facts.head_dim, config.hidden_size)
    with torch.no_grad():
        attention.o_proj.weight.copy_(torch.eye(config.hidden_size, dtype=torch.float64))
        gates = hidden @ rows[:, 1].reshape(-1, config.hidden_size).T
        gated = attention(hidden, rotation, mask)[0]
        rows[:, 1].zero_()
        halved = attention(hidden, rotation, mask)[0]
    torch.testing.assert_close(gated, 2 * halved * torch.sigmoid(gates), rtol=1e-12, atol=1e-14)


def test_ergo_rotates_in_its_sliding_layers_only() -> None:
    """Ergo's full layers are NoPE layers, as Command A's, but decided by the model: a
    layer rotates where the model hands it a rotation (ErgoModel hands its full layers
    ``None``) and its output depends on the rotation it is handed, exactly where the
    facts say it applies RoPE (``uses_rope``)."""
    needs_type("ergo")
    config = tiny_config("ergo")
    facts = facts_from_config(config)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.eval()
    handed = []

    def record(module, args, kwargs):
        handed.append(kwargs["position_embeddings"] is not None)

    hooks = [
        layer.self_attn.register_forward_pre_hook(record, with_kwargs=True)
        for layer in model.model.layers
    ]
    with torch.no_grad():
        model(torch.randint(1, 64, (1, 3)))
    for hook in hooks:
        hook.remove()
    hidden = torch.randn(1, 3, config.hidden_size)
    mask = torch.full((3, 3), float("-inf")).triu(1)[None, None]
    angles = torch.randn(1, 3, facts.head_dim)
    rotations = [(angles.cos(), angles.sin()), (torch.ones_like(angles), torch.zeros_like(angles))]
    rotates = []
    with torch.no_grad():
        for layer, given in zip(model.model.layers, handed, strict=True):
            out = [layer.self_attn(hidden, rotation, mask)[0] for rotation in rotations]
            rotates.append(given and not torch.equal(*out))
    assert tuple(rotates) == facts.uses_rope == (True, True, True, False)


def test_the_mamba2_layers_recipe_is_read_from_the_released_file() -> None:
    """The Mamba group's recipe values (left out of its comparisons, so not checked by
    the entry's equality above) are the released file's: Nemotron 3 Nano 30B's."""
    entry = MODELS["Nemotron 3 Nano 30B"].mamba
    read = facts_from_config(released_config("Nemotron 3 Nano 30B")).mamba
    recipe_fields = ("chunk_size", "time_step_floor", "norm_eps", "proj_bias", "conv_bias")
    assert [getattr(read, f) for f in recipe_fields] == [128, 0.001, 1e-5, False, True]
    assert [getattr(entry, f) for f in recipe_fields] == [getattr(read, f) for f in recipe_fields]
