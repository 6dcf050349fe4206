"""``attention.models.from_transformers``: a model's own layer, with its weights.

Each model type whose layers ``layer_for`` builds is built tiny by ``transformers``
(``AutoModelForCausalLM.from_config``, the configs of ``tests/tiny_configs.py``), its
attention weights drawn at random (norms, biases and sinks away from their ones and
zeros, so that a mix-up shows), and run on a batch of token ids. A hook on every
layer's attention module records what the model hands it (the hidden states, and what
the layer's kind needs besides: Gemma 4's shared keys and values, Llama 3.2 Vision's
image states) and what it returns; the package's layer from ``from_transformers``,
given the same hidden states, must return the same, for every layer of every model:
full, sliding, chunked, NoPE, shared, latent, sparse, Gated DeltaNet, cross-attention
and DeepSeek-V4's sliding, CSA and HCA layers alike. The model builds its own positions,
RoPE tables and masks.

Tolerance: ``hf_models.EXACT`` (rtol 1e-10) in float64. ``transformers`` computes some
steps in float32 whatever the model's dtype (its RoPE tables, RMS norms, eager
softmax, Gated DeltaNet's delta rule); :func:`float64_throughout` runs those in
float64, the model built and run within it, and the package's layers outside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest
import torch
from helpers import F64
from hf_models import EXACT
from tiny_configs import BASE, TINY, WINDOW
from transformers import AutoModelForCausalLM, LlamaConfig, MllamaForCausalLM
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from attention import (
    CrossAttention,
    GatedDeltaNet,
    GroupedQueryAttention,
    Mamba2,
    MultiHeadLatentAttention,
    SharedKVAttention,
)
from attention.models import (
    BUILDERS,
    MAMBA2_CLASSES,
    TRANSFORMERS_CLASSES,
    facts_from_config,
    from_transformers,
)

pytestmark = pytest.mark.usefixtures("single_thread")

#: The tiny configs of the model types layer_for builds, beyond tests/tiny_configs.py's.
MORE = {
    "gemma": {},
    "qwen3_5_moe_text": TINY["qwen3_next"],
    "mllama_text_model": {"cross_attention_layers": [1, 3]},
}
#: Each model type whose config class has a builder: one of each family, and each kind.
MODEL_TYPES = [
    "llama",
    "mistral",
    "mixtral",
    "gemma",
    "phi3",
    "smollm3",
    "qwen3",
    "qwen3_moe",
    "olmo2",
    "olmo3",
    "minimax_m2",
    "gemma2",
    "gemma3_text",
    "gemma4_text",
    "gpt_oss",
    "qwen3_next",
    "qwen3_5_moe_text",
    "llama4_text",
    "cohere2",
    "deepseek_v3",
    "deepseek_v32",
    "glm_moe_dsa",
    "deepseek_v4",
    "mllama_text_model",
]
TOKENS = 2 * WINDOW  # past the window, the chunk and DeepSeek-V3.2's index_topk
IMAGE_TOKENS = 5


def tiny(model_type: str, **more):
    """The tiny config of ``model_type``, with the fields ``more``."""
    fields = BASE | TINY.get(model_type, {}) | MORE.get(model_type, {}) | more
    return CONFIG_MAPPING[model_type](**fields)


def tiny_model(model_type: str) -> torch.nn.Module:
    """The tiny model in float64, with the eager kernels (of attention, of the experts)."""
    implementations = {"attn_implementation": "eager", "experts_implementation": "eager"}
    if model_type == "mllama_text_model":  # its text model alone: no Auto class names it
        config = tiny(model_type, attn_implementation="eager")
        return MllamaForCausalLM(config).to(F64).eval()
    return AutoModelForCausalLM.from_config(tiny(model_type), dtype=F64, **implementations).eval()


@contextlib.contextmanager
def float64_throughout() -> Iterator[None]:
    """Within the block, ``transformers``' float32 steps keep float64.

    Its RoPE tables are built with ``dtype=torch.float`` and run through
    ``Tensor.float()``; its RMS norms cast with ``.to(torch.float32)``; its eager
    softmax takes ``dtype=torch.float32``; Gated DeltaNet's delta rule casts to
    float32. Here ``torch.float`` and ``torch.float32`` name float64, and
    ``Tensor.float()`` leaves a float64 tensor float64, so each of those steps runs
    line for line in float64. The package's code runs outside the block.
    """
    original = torch.Tensor.float

    def keep_float64(self, *args, **kwargs):
        return self if self.dtype == F64 else original(self, *args, **kwargs)

    with (
        mock.patch.object(torch, "float", F64),
        mock.patch.object(torch, "float32", F64),
        mock.patch.object(torch.Tensor, "float", keep_float64),
    ):
        yield


def attention_modules(model) -> list[torch.nn.Module]:
    """The attention module of each decoder layer (its mixer: self-, linear or cross-)."""
    modules = []
    for layer in model.model.layers:
        (module,) = [
            getattr(layer, name)
            for name in ("self_attn", "linear_attn", "cross_attn")
            if hasattr(layer, name)
        ]
        modules.append(module)
    return modules


def randomize(module: torch.nn.Module, seed: int) -> None:
    """Every weight of ``module`` drawn: vectors (norms, biases, sinks, decay) around 1,
    matrices with entries of size 0.5, for scores far from a uniform softmax."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            if parameter.dim() == 1:
                noise = torch.rand(parameter.shape, generator=generator, dtype=F64)
                parameter.copy_(0.5 + noise)
            else:
                noise = torch.randn(parameter.shape, generator=generator, dtype=F64)
                parameter.copy_(0.5 * noise)


def run_recorded(model_type: str, seed: int = 0):
    """The tiny model of ``model_type`` in float64 with random attention weights, run
    once: ``(model, [(module, hidden_states, kwargs, output), ...])``, layer by layer."""
    with float64_throughout():
        torch.manual_seed(seed)
        model = tiny_model(model_type)
        modules = attention_modules(model)
        for i, module in enumerate(modules):
            randomize(module, seed + i)
        records = []

        def record(module, args, kwargs, output):
            hidden = args[0] if args else kwargs["hidden_states"]
            shared = kwargs.get("shared_kv_states")
            kwargs = dict(kwargs, shared_kv_states=dict(shared) if shared else None)
            output = output[0] if isinstance(output, tuple) else output
            records.append((module, hidden.clone(), kwargs, output.clone()))

        hooks = [m.register_forward_hook(record, with_kwargs=True) for m in modules]
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(1, BASE["vocab_size"], (2, TOKENS), generator=generator)
        more = {}
        if model_type == "mllama_text_model":  # the image, at the text's width
            image = torch.randn(2, IMAGE_TOKENS, BASE["hidden_size"], generator=generator)
            more["cross_attention_states"] = image.to(F64)
        with torch.no_grad():
            model(input_ids=ids, use_cache=False, **more)
        for hook in hooks:
            hook.remove()
    assert len(records) == len(modules)
    return model, records


def our_output(ours: torch.nn.Module, module, hidden, kwargs) -> torch.Tensor:
    """``ours`` on the hidden states the model gave ``module``, with what its kind needs."""
    with torch.no_grad():
        if isinstance(ours, CrossAttention):
            return ours(hidden, kwargs["cross_attention_states"])
        if isinstance(ours, SharedKVAttention):  # the keys and values of the layer it reuses
            keys, values = kwargs["shared_kv_states"][module.layer_type]
            return ours(hidden, keys, values)
        return ours(hidden)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_every_layer_computes_what_the_models_own_layer_computes(model_type):
    model, records = run_recorded(model_type)
    kinds = set()
    for index, (module, hidden, kwargs, expected) in enumerate(records):
        ours = from_transformers(module, config=model.config)
        assert ours.training is False and next(ours.parameters()).dtype == F64
        kinds.add(type(ours).__name__)
        actual = our_output(ours, module, hidden, kwargs)
        torch.testing.assert_close(
            actual, expected, **EXACT, msg=lambda m, index=index: f"layer {index}: {m}"
        )
    facts = facts_from_config(model.config)
    assert len(records) == facts.layers  # every layer, each kind the model has
    assert kinds == EXPECTED_KINDS.get(model_type, {"GroupedQueryAttention"})


#: The package's layers each tiny model is made of (GroupedQueryAttention alone if unlisted).
EXPECTED_KINDS = {
    "llama4_text": {"GroupedQueryAttention", "NoPEWithTemperature"},
    "gemma4_text": {"GroupedQueryAttention", "SharedKVAttention"},
    "qwen3_next": {"GroupedQueryAttention", "GatedDeltaNet"},
    "qwen3_5_moe_text": {"GroupedQueryAttention", "GatedDeltaNet"},
    "deepseek_v3": {"MultiHeadLatentAttention"},
    "deepseek_v32": {"SparseLatentAttention"},
    "glm_moe_dsa": {"SparseLatentAttention"},
    "deepseek_v4": {"CompressedAttention"},
    "mllama_text_model": {"GroupedQueryAttention", "CrossAttention"},
}


def test_every_builder_has_its_transformers_classes_and_every_one_is_run():
    assert set(TRANSFORMERS_CLASSES) == set(BUILDERS)
    run = {facts_from_config(tiny(model_type)).config_class for model_type in MODEL_TYPES}
    assert run == set(BUILDERS)


# --- Mamba-2 mixers ----------------------------------------------------------------------

#: Mamba-2 alone and each hybrid whose Mamba-2 layers layer_for builds.
MAMBA2_TYPES = ["mamba2", "nemotron_h", "bamba", "granitemoehybrid", "zamba2"]


def mamba2_mixers(model) -> list[torch.nn.Module]:
    mixers = set(MAMBA2_CLASSES.values())
    return [m for m in model.modules() if type(m).__name__ in mixers]


@pytest.mark.parametrize("model_type", MAMBA2_TYPES)
def test_every_mamba2_mixer_computes_what_the_models_own_mixer_computes(model_type):
    """Each Mamba-2 mixer of the tiny model, its weights drawn, run by the model in
    float64: the package's layer for it, from from_transformers, gives its output."""
    with float64_throughout():
        torch.manual_seed(0)
        model = tiny_model(model_type)
        mixers = mamba2_mixers(model)
        for i, mixer in enumerate(mixers):
            randomize(mixer, i)
            with torch.no_grad():  # decay rates of 1 to 3 per step, not e^1.5
                mixer.A_log.copy_(torch.linspace(0.0, 1.0, mixer.A_log.numel(), dtype=F64))
        records = []

        def record(module, args, kwargs, output):
            hidden = args[0] if args else kwargs["hidden_states"]
            records.append((module, hidden.clone(), output.clone()))

        hooks = [m.register_forward_hook(record, with_kwargs=True) for m in mixers]
        ids = torch.randint(1, BASE["vocab_size"], (2, TOKENS), generator=torch.Generator())
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)
        for hook in hooks:
            hook.remove()
    assert mixers and len(records) == len(mixers)
    for module, hidden, expected in records:
        ours = from_transformers(module, config=model.config)
        assert isinstance(ours, Mamba2) and next(ours.parameters()).dtype == F64
        with torch.no_grad():
            torch.testing.assert_close(ours(hidden), expected, **EXACT)


def test_each_mamba2_mixer_is_read_with_its_models_config():
    """The five mixers, each named by its model's config class; none of them has a
    builder, as layer_for builds Mamba-2 layers whatever the family."""
    assert not set(MAMBA2_CLASSES) & set(BUILDERS)
    run = {type(tiny(model_type)).__name__ for model_type in MAMBA2_TYPES}
    assert run == set(MAMBA2_CLASSES)


def test_a_mamba2_mixer_without_its_config_or_of_another_layer_is_refused():
    model = tiny_model("nemotron_h")
    mamba = model.model.layers[0].mixer
    assert isinstance(from_transformers(mamba), Mamba2)  # NemotronHMamba2Mixer keeps one
    bare = tiny_model("mamba2").backbone.layers[0].mixer
    with pytest.raises(ValueError, match=r"Mamba2Mixer keeps none: give config="):
        from_transformers(bare)
    mamba.layer_idx = 2  # an attention layer of this model
    with pytest.raises(
        ValueError,
        match=r"a 'full_attention' layer, not one with a Mamba-2 mixer, but the module is a Nemo",
    ):
        from_transformers(mamba)


# --- what it refuses -------------------------------------------------------------------


def llama(**fields):
    config = LlamaConfig(**(BASE | {"num_hidden_layers": 2} | fields))
    return AutoModelForCausalLM.from_config(config)


def test_a_module_that_is_not_attention_is_refused():
    model = llama()
    with pytest.raises(ValueError, match=r"^from_transformers: expected the attention module "):
        from_transformers(model.model.layers[0].mlp)
    with pytest.raises(ValueError, match=r"got a LlamaDecoderLayer$"):
        from_transformers(model.model.layers[0])
    with pytest.raises(TypeError, match=r"^from_transformers: module must be a torch.nn.Module"):
        from_transformers(model.config)


def test_a_module_without_config_or_layer_index_is_refused():
    model = llama()
    attention = model.model.layers[1].self_attn
    attention.layer_idx = None
    with pytest.raises(ValueError, match=r"knows its layer index \(layer_idx\), got a Llama"):
        from_transformers(attention)
    model, records = run_recorded("qwen3_next")
    deltanet = records[0][0]
    assert not hasattr(deltanet, "config")
    with pytest.raises(ValueError, match=r"Qwen3NextGatedDeltaNet keeps none: give config="):
        from_transformers(deltanet)
    assert isinstance(from_transformers(deltanet, config=model.config), GatedDeltaNet)


def test_a_module_of_another_family_or_kind_is_refused():
    model = llama()
    attention = model.model.layers[0].self_attn
    with pytest.raises(ValueError, match=r"a LlamaAttention is the attention of a model with a "):
        from_transformers(attention, config=tiny("qwen3"))
    model, records = run_recorded("qwen3_next")
    full_attention = records[1][0]
    full_attention.layer_idx = 0  # a linear-attention layer of this model
    with pytest.raises(ValueError, match=r"builds as a GatedDeltaNet, but the module is a Qwen3"):
        from_transformers(full_attention)


def test_a_weight_with_no_place_or_a_place_with_no_weight_is_refused():
    model = llama()
    attention = model.model.layers[0].self_attn
    attention.extra = torch.nn.Linear(2, 2)  # a part the package's layer does not have
    with pytest.raises(ValueError, match=r"got \['extra.bias', 'extra.weight'\] left over"):
        from_transformers(attention)
    del attention.extra
    attention.v_proj = None
    with pytest.raises(ValueError, match=r"hold a parameter 'v_proj.weight'"):
        from_transformers(attention)


def test_a_config_that_does_not_describe_the_module_is_refused():
    model = llama()
    wider = tiny("llama")
    wider.head_dim = 16
    with pytest.raises(ValueError, match=r"expected W_query.weight of shape \(64, 32\) for layer"):
        from_transformers(model.model.layers[0].self_attn, config=wider)


def test_the_layer_follows_the_modules_dtype_and_mode():
    model = llama().train()
    ours = from_transformers(model.model.layers[0].self_attn)
    assert ours.training and ours.W_query.weight.dtype == torch.float32
    assert isinstance(ours, GroupedQueryAttention)
    assert not isinstance(ours, MultiHeadLatentAttention)
