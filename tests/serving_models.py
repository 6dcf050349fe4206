"""The tiny decoders the serving tests run, and their greedy answers from ``generate``.

A Llama-family model built from a config with seeded random weights, in float64.
``transformers`` computes RoPE's angles (and Qwen3's QK-norms) in float32 even in a
float64 model; :func:`float64_rope` swaps them for float64 ones
(``hf_models.rope_cos_sin``, ``hf_models.float64_norms``), so that the model and the
engine, whose attention is the package's, agree to 1e-10.
"""

from __future__ import annotations

import functools

import torch
from hf_models import float64_norms, rope_cos_sin
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

VOCAB = 48


def float64_rope(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with its rotary embedding's angles computed in float64."""
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    base = config.rope_parameters["rope_theta"]

    def forward(x: torch.Tensor, position_ids: torch.Tensor):
        cos, sin = rope_cos_sin(position_ids, head_dim, base)
        return cos.to(x.dtype), sin.to(x.dtype)

    model.model.rotary_emb.forward = forward
    for layer in model.model.layers:  # Qwen3's QK-norms; Llama has none
        float64_norms(layer.self_attn, ("q_norm", "k_norm"))
    return model


def tiny_model(seed: int = 0, model_type: str = "llama") -> torch.nn.Module:
    """A 2-layer decoder, 4 query heads sharing 2 key/value heads of 8, float64, eval mode."""
    sizes = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=512,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if model_type == "qwen3":
            model = Qwen3ForCausalLM(Qwen3Config(**sizes))
        else:
            model = LlamaForCausalLM(LlamaConfig(**sizes))
    model = model.double().eval()
    return float64_rope(model)


@functools.cache
def _model(seed: int, model_type: str) -> torch.nn.Module:
    return tiny_model(seed, model_type)


def shared_model(seed: int = 0, model_type: str = "llama") -> torch.nn.Module:
    """One :func:`tiny_model` per seed and type for the whole session (never modified)."""
    return _model(seed, model_type)


@functools.cache
def _greedy(seed: int, model_type: str, prompt: tuple[int, ...], max_new_tokens: int, chunk):
    model = _model(seed, model_type)
    ids = torch.tensor([prompt])
    extra = {} if chunk is None else {"prefill_chunk_size": chunk}
    out = model.generate(
        ids,
        # Every token is real: without a mask, generate would take pad_token_id's for padding.
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        min_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
        **extra,
    )
    return tuple(out[0, len(prompt) :].tolist())


def greedy(prompt, max_new_tokens: int, *, seed: int = 0, model_type: str = "llama", chunk=None):
    """``generate``'s greedy tokens for ``prompt`` alone (no end-of-text stop)."""
    return list(_greedy(seed, model_type, tuple(prompt), max_new_tokens, chunk))
