"""transformers' attention modules, built from small configs with the package's weights.

Nothing is downloaded: every module is constructed from a config written here, and
its weights are copied from the package's module, so the two compute the same
function and any difference is the implementation's.

Two places where transformers computes in float32 whatever the model's dtype:
``LlamaRotaryEmbedding`` (and DeepSeek's) compute their angles in float32, and
``DeepseekV3RMSNorm`` normalizes in float32. :func:`rope_cos_sin` gives the same cos
and sin in float64, and :func:`float64_norms` swaps the norms for float64 ones with
the same weights, so that the comparison of everything else can be exact in float64;
the tests also compare against the modules untouched, at float32's tolerance.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import DeepseekV3Config, LlamaConfig, MistralConfig
from transformers.masking_utils import sdpa_mask
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention
from transformers.models.llama.modeling_llama import LlamaAttention
from transformers.models.mistral.modeling_mistral import MistralAttention

from attention import GroupedQueryAttention, MultiHeadLatentAttention

#: Tolerance where both sides compute in float64 throughout.
EXACT = {"rtol": 1e-10, "atol": 1e-12}
#: Tolerance where transformers computes a step in float32 (see the module docstring).
FLOAT32_STEP = {"rtol": 1e-5, "atol": 1e-5}


def rope_cos_sin(
    positions: torch.Tensor, head_dim: int, base: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` as transformers' rotary embeddings return them, in float64.

    Shapes ``(batch, num_tokens, head_dim)`` for positions ``(batch, num_tokens)``: each
    angle appears twice, once for each half of the head (the half-split layout).
    """
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = positions.to(torch.float64)[..., None] * inv_freq
    both = torch.cat((angles, angles), dim=-1)
    return both.cos(), both.sin()


def llama_config(gqa: GroupedQueryAttention, implementation: str = "sdpa", cls=LlamaConfig):
    """A Llama (or Mistral) config with ``gqa``'s sizes and RoPE base."""
    return cls(
        hidden_size=gqa.d_in,
        num_attention_heads=gqa.num_heads,
        num_key_value_heads=gqa.num_kv_heads,
        head_dim=gqa.head_dim,
        attention_bias=gqa.W_query.bias is not None,
        max_position_embeddings=gqa.context_length,
        rope_parameters={"rope_type": "default", "rope_theta": float(gqa.rope_base or 10000.0)},
        attn_implementation=implementation,
    )


def llama_attention(
    gqa: GroupedQueryAttention, implementation: str = "sdpa", cls=LlamaAttention, config=None
) -> nn.Module:
    """transformers' ``LlamaAttention`` (or ``cls``) holding ``gqa``'s weights, in eval mode.

    Llama's ``attention_bias`` puts a bias on all four projections or on none, so
    ``gqa`` must be built with ``out_bias=qkv_bias``; nothing is edited by hand.
    ``gqa.d_in`` must equal ``gqa.d_out`` (Llama's ``hidden_size``).
    """
    assert gqa.d_in == gqa.d_out, "Llama's attention maps hidden_size to hidden_size"
    config = config or llama_config(gqa, implementation)
    theirs = cls(config, layer_idx=0).to(gqa.W_query.weight.dtype).eval()
    with torch.no_grad():
        pairs = (("q_proj", "W_query"), ("k_proj", "W_key"), ("v_proj", "W_value"))
        for name, ours in (*pairs, ("o_proj", "out_proj")):
            theirs_layer, our_layer = getattr(theirs, name), getattr(gqa, ours)
            has_bias = f"{cls.__name__}.{name} has a bias: {theirs_layer.bias is not None}"
            assert (theirs_layer.bias is None) == (our_layer.bias is None), has_bias
            theirs_layer.weight.copy_(our_layer.weight)
            if theirs_layer.bias is not None:
                theirs_layer.bias.copy_(our_layer.bias)
    return theirs


def mistral_attention(gqa: GroupedQueryAttention, implementation: str = "sdpa") -> nn.Module:
    """transformers' ``MistralAttention`` with ``sliding_window=gqa.window`` and ``gqa``'s weights.

    Mistral's projections have no bias: ``gqa`` must have ``qkv_bias=False``.
    """
    config = llama_config(gqa, implementation, cls=MistralConfig)
    config.sliding_window = gqa.window
    return llama_attention(gqa, cls=MistralAttention, config=config)


def deepseek_config(mla: MultiHeadLatentAttention, implementation: str = "sdpa"):
    """A ``DeepseekV3Config`` with ``mla``'s sizes."""
    return DeepseekV3Config(
        hidden_size=mla.d_in,
        num_attention_heads=mla.num_heads,
        num_key_value_heads=mla.num_heads,
        q_lora_rank=mla.q_lora_rank,
        kv_lora_rank=mla.kv_lora_rank,
        qk_nope_head_dim=mla.qk_nope_head_dim,
        qk_rope_head_dim=mla.qk_rope_head_dim,
        v_head_dim=mla.v_head_dim,
        attention_bias=mla.out_proj.bias is not None,  # deepseek_attention checks W_dkv's
        rope_interleave=mla.rope_interleave,
        rms_norm_eps=mla.kv_norm.eps,
        max_position_embeddings=mla.context_length,
        rope_parameters={"rope_type": "default", "rope_theta": mla.rope_base},
        attn_implementation=implementation,
    )


def deepseek_attention(mla: MultiHeadLatentAttention, implementation: str = "sdpa") -> nn.Module:
    """transformers' ``DeepseekV3Attention`` holding ``mla``'s weights, in eval mode.

    transformers fuses what the paper keeps apart: ``kv_a_proj_with_mqa`` is ``W_dkv``
    stacked on ``W_kr``, and ``kv_b_proj`` holds, head by head, ``W_uk``'s rows then
    ``W_uv``'s. Its ``attention_bias`` is one flag for the down-projections and
    ``o_proj``, so ``mla`` must have ``qkv_bias=out_bias``.
    """
    assert mla.d_in == mla.d_out, "DeepSeek's attention maps hidden_size to hidden_size"
    has_bias = (mla.W_dkv.bias is not None, mla.out_proj.bias is not None)
    assert has_bias[0] == has_bias[1], f"attention_bias needs qkv_bias == out_bias, got {has_bias}"
    theirs = DeepseekV3Attention(deepseek_config(mla, implementation), layer_idx=0)
    theirs = theirs.to(mla.W_dkv.weight.dtype).eval()
    heads, rank = mla.num_heads, mla.kv_lora_rank
    with torch.no_grad():
        if mla.q_lora_rank is None:
            theirs.q_proj.weight.copy_(mla.W_query.weight)
        else:
            theirs.q_a_proj.weight.copy_(mla.W_dq.weight)
            theirs.q_a_layernorm.weight.copy_(mla.q_norm.weight)
            theirs.q_b_proj.weight.copy_(mla.W_uq.weight)
        theirs.kv_a_proj_with_mqa.weight.copy_(torch.cat((mla.W_dkv.weight, mla.W_kr.weight)))
        theirs.kv_a_layernorm.weight.copy_(mla.kv_norm.weight)
        per_head = (
            mla.W_uk.weight.view(heads, mla.qk_nope_head_dim, rank),
            mla.W_uv.weight.view(heads, mla.v_head_dim, rank),
        )
        theirs.kv_b_proj.weight.copy_(torch.cat(per_head, dim=1).reshape(-1, rank))
        theirs.o_proj.weight.copy_(mla.out_proj.weight)
        if mla.out_proj.bias is not None:
            if mla.q_lora_rank is not None:
                theirs.q_a_proj.bias.copy_(mla.W_dq.bias)
            bias = torch.cat((mla.W_dkv.bias, mla.W_kr.bias))
            theirs.kv_a_proj_with_mqa.bias.copy_(bias)
            theirs.o_proj.bias.copy_(mla.out_proj.bias)
    return theirs


def float64_norms(theirs: DeepseekV3Attention) -> DeepseekV3Attention:
    """Swap DeepSeek's float32-computing RMS norms for float64 ``nn.RMSNorm``, same weights."""
    for name in ("q_a_layernorm", "kv_a_layernorm"):
        # Without q_lora_rank there is no q_a_layernorm: None from transformers 5.18 on,
        # no attribute at all before.
        old = getattr(theirs, name, None)
        if old is None:
            continue
        new = nn.RMSNorm(old.weight.shape[0], eps=old.variance_epsilon, dtype=torch.float64)
        with torch.no_grad():
            new.weight.copy_(old.weight)
        setattr(theirs, name, new)
    return theirs


def causal_4d(num_queries: int, num_keys: int) -> torch.Tensor:
    """A ``(1, 1, num_queries, num_keys)`` boolean mask, True = may attend, bottom-right aligned."""
    query_pos = torch.arange(num_keys - num_queries, num_keys)[:, None]
    return (torch.arange(num_keys)[None, :] <= query_pos)[None, None]


def padded_causal_4d(attention_mask: torch.Tensor, num_queries: int) -> torch.Tensor:
    """transformers' own 4-D boolean mask (True = may attend) for a padded batch.

    ``attention_mask`` is ``(batch, num_keys)``, 1 or True for a real token, the cached
    ones included; the ``num_queries`` queries are the last tokens. Built by
    ``masking_utils.sdpa_mask``, which combines its causal and padding mask functions,
    as ``create_causal_mask`` does for the sdpa implementation.
    """
    batch, num_keys = attention_mask.shape
    return sdpa_mask(
        batch,
        num_queries,
        num_keys,
        q_offset=num_keys - num_queries,
        attention_mask=attention_mask.bool(),
        allow_is_causal_skip=False,
    )
