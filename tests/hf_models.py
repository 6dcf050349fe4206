"""transformers' attention modules, built from small configs with the package's weights.

Nothing is downloaded: every module is constructed from a config written here, and
its weights are copied from the package's module, so the two compute the same
function and any difference is the implementation's.

Places where transformers computes in float32 whatever the model's dtype:
``LlamaRotaryEmbedding`` (and the other rotary embeddings) compute their angles in
float32, the RMS norms (DeepSeek's, Qwen3's, OLMo 2's, Qwen3-Next's, Gemma 4's)
normalize in float32, and the eager kernels of Llama, Gemma 2 and the others run their
softmax with ``dtype=torch.float32``. :func:`rope_cos_sin` gives the same cos and sin
in float64, :func:`float64_norms` swaps the norms for float64 ones with the same
weights, and :func:`float64_softmax` lets the softmax keep float64, so that the
comparison of everything else can be exact in float64; the tests also compare against
the modules untouched, at float32's tolerance.

Part III's builders (Qwen3, OLMo 2, Gemma 2 and 3, gpt-oss, Qwen3-Next, Gemma 4) map
the layer that :func:`attention.layer_for` builds for the model (a
:class:`~attention.GroupedQueryAttention` with the model's parts) onto the model's
attention class; :func:`copy_projections` copies the shared layers.
:func:`llama4_chunked_attention` is Llama 4's chunked layer holding a
:class:`~attention.GroupedQueryAttention`'s weights, its query and key rows reordered
for its interleaved rotation (done in float64 by :func:`rotate_float64`), and
:func:`llama4_decode` decodes with both, each with its own cache and mask.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import torch
from helpers import F64
from rope_reference import _TorchWithFloat64AsFloat
from torch import nn
from torch.nn import functional as F
from transformers import (
    DeepseekV3Config,
    DeepseekV4Config,
    DynamicCache,
    Gemma2Config,
    Gemma3TextConfig,
    Gemma4TextConfig,
    GptOssConfig,
    Llama4TextConfig,
    LlamaConfig,
    MistralConfig,
    Olmo2Config,
    Qwen3Config,
    Qwen3NextConfig,
    modeling_rope_utils,
)
from transformers.masking_utils import create_chunked_causal_mask, sdpa_mask
from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention
from transformers.models.deepseek_v4 import modeling_deepseek_v4
from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4Attention
from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention
from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextAttention
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention
from transformers.models.llama.modeling_llama import LlamaAttention
from transformers.models.llama4 import modeling_llama4
from transformers.models.mistral.modeling_mistral import MistralAttention
from transformers.models.olmo2.modeling_olmo2 import Olmo2Attention
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention

from attention import (
    GroupedQueryAttention,
    KVCache,
    MultiHeadLatentAttention,
    ProjectionRMSNorm,
    RMSNorm,
)

#: Tolerance where both sides compute in float64 throughout.
EXACT = {"rtol": 1e-10, "atol": 1e-12}
#: Tolerance where transformers computes a step in float32 (see the module docstring).
FLOAT32_STEP = {"rtol": 1e-5, "atol": 1e-5}


def _base(gqa, default: float) -> float:
    """The layer's RoPE base, or ``default`` for a layer without RoPE (its config needs one)."""
    return default if gqa.rotary is None else gqa.rotary.base


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
        rope_parameters={
            "rope_type": "default",
            "rope_theta": gqa.rotary.base if gqa.rotary is not None else 10000.0,
        },
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
        rope_interleave=mla.rotary.interleaved,
        rms_norm_eps=mla.kv_norm.eps,
        max_position_embeddings=mla.context_length,
        rope_parameters={"rope_type": "default", "rope_theta": mla.rotary.base},
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


def float64_norms(
    theirs: nn.Module, names: tuple[str, ...] = ("q_a_layernorm", "kv_a_layernorm")
) -> nn.Module:
    """Swap the float32-computing RMS norms ``names`` for float64 ``nn.RMSNorm``, same function.

    The defaults are DeepSeek's norms. A zero-centred norm (Gemma 2's and Qwen3-Next's
    kind, with ``eps``, applied as ``1 + weight``) gets ``1 + weight`` as its new weight;
    Gemma 4's norm without a scale (``with_scale=False``) gets none.
    """
    for name in names:
        # Without q_lora_rank there is no q_a_layernorm: None from transformers 5.18 on,
        # no attribute at all before.
        old = getattr(theirs, name, None)
        if old is None:
            continue
        eps = old.variance_epsilon if hasattr(old, "variance_epsilon") else old.eps
        weight = getattr(old, "weight", None)
        size = theirs.head_dim if weight is None else weight.shape[0]  # None: Gemma 4's v_norm
        affine = weight is not None
        new = nn.RMSNorm(size, eps=eps, elementwise_affine=affine, dtype=torch.float64)
        if affine:
            zero_centred = not hasattr(old, "variance_epsilon") and not hasattr(old, "with_scale")
            with torch.no_grad():
                new.weight.copy_(1.0 + weight if zero_centred else weight)
        setattr(theirs, name, new)
    return theirs


@contextlib.contextmanager
def float64_softmax() -> Iterator[None]:
    """Within the block, ``F.softmax(x, dim, dtype=torch.float32)`` keeps a float64 ``x`` float64.

    transformers' eager kernels upcast their softmax to float32 (``dtype=torch.float32``)
    and cast back, which rounds a float64 model's weights to float32's precision. The
    package's own code calls ``torch.softmax``, which this leaves alone.
    """
    original = F.softmax

    def softmax(x: torch.Tensor, dim: int | None = None, *args, dtype=None, **kwargs):
        if dtype == torch.float32 and x.dtype == torch.float64:
            dtype = torch.float64
        return original(x, dim, *args, dtype=dtype, **kwargs)

    with mock.patch.object(F, "softmax", softmax):
        yield


def copy_projections(gqa: GroupedQueryAttention, theirs: nn.Module, query_weight=None) -> None:
    """Copy ``gqa``'s ``W_query``, ``W_key``, ``W_value`` and ``out_proj`` into ``q/k/v/o_proj``.

    transformers' ``attention_bias`` is one flag for the four, so ``gqa`` must have
    ``qkv_bias == out_bias``. A missing ``W_value`` (Gemma 4's keys as values) has no
    ``v_proj`` to fill. ``query_weight``: ``(weight, bias)`` for ``q_proj`` instead of
    ``W_query``'s (Qwen3-Next's fused query and gate).
    """
    pairs = [("q_proj", gqa.W_query), ("k_proj", gqa.W_key), ("o_proj", gqa.out_proj)]
    if gqa.W_value is not None:
        pairs.append(("v_proj", gqa.W_value))
    with torch.no_grad():
        for name, ours in pairs:
            layer = getattr(theirs, name)
            has_bias = f"{type(theirs).__name__}.{name} has a bias: {layer.bias is not None}"
            assert (layer.bias is None) == (ours.bias is None), has_bias
            weight, bias = ours.weight, ours.bias
            if name == "q_proj" and query_weight is not None:
                weight, bias = query_weight
            layer.weight.copy_(weight)
            if layer.bias is not None:
                layer.bias.copy_(bias)


def per_head_norms(gqa: GroupedQueryAttention) -> bool:
    """Whether ``gqa`` has QK-norm over each head (Qwen3's kind), with a learned scale."""
    norms = (gqa.q_norm, gqa.k_norm)
    return all(
        isinstance(n, RMSNorm) and not isinstance(n, ProjectionRMSNorm) and n.weight is not None
        for n in norms
    )


def _common(gqa: GroupedQueryAttention, implementation: str) -> dict:
    """Config fields every Part III model shares, from ``gqa``."""
    return {
        "hidden_size": gqa.d_in,
        "num_attention_heads": gqa.num_heads,
        "num_key_value_heads": gqa.num_kv_heads,
        "attention_bias": gqa.W_query.bias is not None,
        "max_position_embeddings": gqa.context_length,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": gqa.rotary.base if gqa.rotary is not None else 1e4,
        },
        "attn_implementation": implementation,
        "num_hidden_layers": 1,
    }


def _layer_type(gqa: GroupedQueryAttention) -> dict:
    """One layer, sliding with ``gqa.window`` if it has one, else full attention.

    (The attention classes take the mask from the caller; ``sliding_window`` only
    tells the kernels that build none themselves.)
    """
    if gqa.window is None:
        return {"layer_types": ["full_attention"]}
    return {"layer_types": ["sliding_attention"], "sliding_window": gqa.window}


def _built(cls: type, config, gqa: GroupedQueryAttention, layer_idx: int = 0) -> nn.Module:
    return cls(config, layer_idx=layer_idx).to(gqa.W_query.weight.dtype).eval()


def qwen3_attention(gqa: GroupedQueryAttention, implementation: str = "sdpa") -> nn.Module:
    """``Qwen3Attention`` holding ``gqa``'s weights: ``gqa`` has QK-norm per head."""
    assert per_head_norms(gqa)
    config = Qwen3Config(
        **_common(gqa, implementation), head_dim=gqa.head_dim, rms_norm_eps=gqa.q_norm.eps
    )
    theirs = _built(Qwen3Attention, config, gqa)
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight)
    return theirs


def olmo2_attention(gqa: GroupedQueryAttention, implementation: str = "sdpa") -> nn.Module:
    """``Olmo2Attention`` holding ``gqa``'s weights: ``gqa`` has a ``ProjectionRMSNorm``.

    OLMo 2's config has no ``head_dim``: it is ``hidden_size // num_attention_heads``,
    so ``gqa.d_in`` must equal ``gqa.d_out``.
    """
    assert isinstance(gqa.q_norm, ProjectionRMSNorm) and gqa.d_in == gqa.d_out
    config = Olmo2Config(**_common(gqa, implementation), rms_norm_eps=gqa.q_norm.eps)
    theirs = _built(Olmo2Attention, config, gqa)
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight)
    return theirs


def gemma2_attention(
    gqa: GroupedQueryAttention, query_pre_attn_scalar: int, implementation: str = "eager"
) -> nn.Module:
    """``Gemma2Attention`` holding ``gqa``'s weights and softcap, sliding if ``gqa.window``.

    ``gqa.scale`` must be ``query_pre_attn_scalar ** -0.5``. Only the eager kernel caps
    the scores, so that is the default.
    """
    assert gqa.scale == query_pre_attn_scalar**-0.5
    config = Gemma2Config(
        **_common(gqa, implementation),
        head_dim=gqa.head_dim,
        query_pre_attn_scalar=query_pre_attn_scalar,
        attn_logit_softcapping=gqa.softcap,
        **_layer_type(gqa),
    )
    theirs = _built(Gemma2Attention, config, gqa)
    copy_projections(gqa, theirs)
    return theirs


def gemma3_attention(
    gqa: GroupedQueryAttention, query_pre_attn_scalar: int, implementation: str = "sdpa"
) -> nn.Module:
    """``Gemma3Attention`` holding ``gqa``'s weights: QK-norm per head, Gemma's scale.

    Sliding if ``gqa.window``. Its norms are zero-centred (``1 + weight``): they get
    ``gqa``'s weight minus 1.
    """
    assert per_head_norms(gqa) and gqa.scale == query_pre_attn_scalar**-0.5
    config = Gemma3TextConfig(
        **_common(gqa, implementation),
        head_dim=gqa.head_dim,
        query_pre_attn_scalar=query_pre_attn_scalar,
        rms_norm_eps=gqa.q_norm.eps,
        **_layer_type(gqa),
    )
    theirs = _built(Gemma3Attention, config, gqa)
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight - 1.0)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight - 1.0)
    return theirs


def gpt_oss_attention(gqa: GroupedQueryAttention) -> nn.Module:
    """``GptOssAttention`` (eager: the kernel with the sinks), sliding if ``gqa.window``."""
    assert gqa.sinks is not None
    config = GptOssConfig(**_common(gqa, "eager"), head_dim=gqa.head_dim, **_layer_type(gqa))
    theirs = _built(GptOssAttention, config, gqa)
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.sinks.copy_(gqa.sinks)
    return theirs


def qwen3_next_query_gate(gqa: GroupedQueryAttention) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Qwen3-Next's ``q_proj`` weight and bias from ``gqa``'s ``W_query`` and ``W_gate``.

    Its ``q_proj`` gives, per head, ``head_dim`` query numbers then ``head_dim`` gate
    numbers (``view(..., num_heads, 2 * head_dim)`` then ``chunk(2)``): head ``h``'s
    rows of ``W_query`` followed by head ``h``'s rows of ``W_gate``.
    """
    heads, head_dim = gqa.num_heads, gqa.head_dim

    def interleave(query: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        per_head = (query.view(heads, head_dim, -1), gate.view(heads, head_dim, -1))
        return torch.cat(per_head, dim=1).reshape(2 * heads * head_dim, *query.shape[1:])

    weight = interleave(gqa.W_query.weight, gqa.W_gate.weight)
    bias = None
    if gqa.W_query.bias is not None:
        bias = interleave(gqa.W_query.bias, gqa.W_gate.bias)
    return weight, bias


def qwen3_next_attention(gqa: GroupedQueryAttention, implementation: str = "sdpa") -> nn.Module:
    """``Qwen3NextAttention`` holding ``gqa``'s weights: QK-norm per head and the output gate.

    Its norms are zero-centred (``1 + weight``): they get ``gqa``'s weight minus 1.
    Its config's ``partial_rotary_factor`` is ``gqa``'s (the released models' is 0.25),
    which only its rotary embedding reads: the attention rotates the leading
    dimensions that the cos and sin it is given cover.
    """
    assert per_head_norms(gqa) and gqa.W_gate is not None
    common = _common(gqa, implementation)
    partial = gqa.rotary.partial_rotary_factor
    common["rope_parameters"] |= {"partial_rotary_factor": partial}
    config = Qwen3NextConfig(
        **common,
        head_dim=gqa.head_dim,
        rms_norm_eps=gqa.q_norm.eps,
        layer_types=["full_attention"],
    )
    theirs = _built(Qwen3NextAttention, config, gqa)
    copy_projections(gqa, theirs, query_weight=qwen3_next_query_gate(gqa))
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight - 1.0)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight - 1.0)
    return theirs


def gemma4_attention(
    gqa: GroupedQueryAttention, implementation: str = "sdpa", released_rope: bool = False
) -> nn.Module:
    """``Gemma4TextAttention``, layer 1 (a full-attention layer) of two, with ``gqa``'s weights.

    ``gqa`` has Gemma 4's parts (QK-norm, ``v_norm``), ``scale=1.0`` and, for
    ``attention_k_eq_v``, no ``W_value``. The global layer's head size and key/value
    heads (``global_head_dim``, ``num_global_key_value_heads``) are ``gqa``'s. With
    ``released_rope``, the config keeps transformers' default ``rope_parameters`` for
    Gemma 4, the released models' (global layers: proportional RoPE over a quarter of
    the head, base 1e6), for its rotary embedding.
    """
    assert per_head_norms(gqa) and gqa.v_norm is not None and gqa.scale == 1.0
    common = _common(gqa, implementation) | {"num_hidden_layers": 2}
    if released_rope:
        common["rope_parameters"] = None
    config = Gemma4TextConfig(
        **common,
        head_dim=gqa.head_dim,
        global_head_dim=gqa.head_dim,
        num_global_key_value_heads=gqa.num_kv_heads,
        attention_k_eq_v=gqa.W_value is None,
        rms_norm_eps=gqa.q_norm.eps,
        layer_types=["sliding_attention", "full_attention"],
    )
    theirs = _built(Gemma4TextAttention, config, gqa, layer_idx=1)
    assert theirs.head_dim == gqa.head_dim and not theirs.is_sliding
    assert (theirs.v_proj is None) == (gqa.W_value is None)
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight)
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


# Llama 4's chunked layer, and decoding with its own cache and chunked mask


def llama4_chunked_attention(
    gqa: GroupedQueryAttention, use_qk_norm: bool = False
) -> torch.nn.Module:
    """``Llama4TextAttention`` on a chunked layer (a RoPE layer), holding ``gqa``'s weights.

    Llama 4 rotates interleaved pairs (dims 2i, 2i + 1, as complex numbers); ``gqa``
    rotates the half-split pairs (i, i + head_dim / 2) with the same frequencies. Giving
    Llama 4 the query and key rows of each head in the order 0, h/2, 1, h/2 + 1, ...
    makes its interleaved pairs ours: the rotated queries and keys are ours permuted
    alike within each head, and their dot products, so the scores, are the same.
    ``use_qk_norm``: Scout's L2 norm on these layers (``rms_norm_eps`` from ``gqa``'s).
    """
    config = llama_config(gqa, "sdpa", cls=Llama4TextConfig)
    config.attention_chunk_size = gqa.chunk
    config.num_hidden_layers, config.no_rope_layers = 1, [1]  # 1: this layer uses RoPE
    config.layer_types, config.use_qk_norm = ["chunked_attention"], use_qk_norm
    if use_qk_norm:
        config.rms_norm_eps = gqa.q_norm.eps
    theirs = modeling_llama4.Llama4TextAttention(config, layer_idx=0).to(F64).eval()
    half = gqa.head_dim // 2
    order = torch.arange(gqa.head_dim).view(2, half).t().flatten()  # 0, h/2, 1, h/2 + 1, ...

    def interleaved(weight: torch.Tensor) -> torch.Tensor:
        return weight.view(-1, gqa.head_dim, *weight.shape[1:])[:, order].flatten(0, 1)

    with torch.no_grad():
        pairs = [("q_proj", gqa.W_query, True), ("k_proj", gqa.W_key, True)]
        pairs += [("v_proj", gqa.W_value, False), ("o_proj", gqa.out_proj, False)]
        for name, ours, rotated in pairs:
            layer = getattr(theirs, name)
            assert (layer.bias is None) == (ours.bias is None)
            for mine, their in ((ours.weight, layer.weight), (ours.bias, layer.bias)):
                if mine is not None:
                    their.copy_(interleaved(mine) if rotated else mine)
    return theirs


def freqs_cis_float64(positions: torch.Tensor, head_dim: int, base: float) -> torch.Tensor:
    """Llama 4's complex rotary factors ``exp(i * position * inv_freq)``, in complex128."""
    cos, sin = rope_cos_sin(positions, head_dim, base)
    half = head_dim // 2
    return torch.complex(cos[..., :half], sin[..., :half])


def rotate_float64(xq, xk, freqs_cis):
    """``modeling_llama4.apply_rotary_emb`` without its cast to float32 (complex64)."""
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2).contiguous())
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2).contiguous())
    rotated = (torch.view_as_real(t * freqs_cis[:, :, None, :]).flatten(3) for t in (xq_, xk_))
    return tuple(rotated)


def llama4_decode(gqa, theirs, x, splits, rotary, tolerance):
    config = theirs.config
    ours, their_cache = KVCache(chunk=gqa.chunk), DynamicCache(config=config)
    assert type(their_cache.layers[0]).__name__ == "DynamicSlidingWindowLayer"
    for start, stop in splits:
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        new = x[:, start:stop]
        mask = create_chunked_causal_mask(config, new, None, their_cache, positions)
        expected, _ = theirs(new, rotary(new, positions), mask, their_cache)
        torch.testing.assert_close(gqa(new, cache=ours), expected, **tolerance)
        assert ours.seen_tokens == their_cache.get_seq_length() == stop
        assert len(ours) == stop % gqa.chunk


# -- DeepSeek-V4 ---------------------------------------------------------------------------

#: ``DeepseekV4Attention``'s parameters, by the package's names (``CompressedAttention``).
DEEPSEEK_V4_NAMES = {
    "W_dq.weight": "q_a_proj.weight",
    "q_norm.weight": "q_a_norm.weight",
    "W_uq.weight": "q_b_proj.weight",
    "W_kv.weight": "kv_proj.weight",
    "kv_norm.weight": "kv_norm.weight",
    "W_out_groups.weight": "o_a_proj.weight",
    "W_out.weight": "o_b_proj.weight",
    "sinks": "sinks",
}
#: A compressor's, the same in the attention's compressor and in the indexer's.
DEEPSEEK_V4_COMPRESSOR_NAMES = {
    "W_kv.weight": "kv_proj.weight",
    "W_gate.weight": "gate_proj.weight",
    "position_bias": "position_bias",
    "kv_norm.weight": "kv_norm.weight",
}
#: The indexer's own, beside its compressor's.
DEEPSEEK_V4_INDEXER_NAMES = {
    "W_query.weight": "q_b_proj.weight",
    "W_weights.weight": "scorer.weights_proj.weight",
}


def deepseek_v4_theirs_names(layer) -> dict[str, str]:
    """Each parameter of a ``CompressedAttention``, by name, to its ``DeepseekV4Attention`` name."""
    names = dict(DEEPSEEK_V4_NAMES)
    if layer.compressor is not None:
        for ours, theirs in DEEPSEEK_V4_COMPRESSOR_NAMES.items():
            names[f"compressor.{ours}"] = f"compressor.{theirs}"
    if layer.indexer is not None:
        for ours, theirs in DEEPSEEK_V4_COMPRESSOR_NAMES.items():
            names[f"indexer.compressor.{ours}"] = f"compressor.indexer.{theirs}"
        for ours, theirs in DEEPSEEK_V4_INDEXER_NAMES.items():
            names[f"indexer.{ours}"] = f"compressor.indexer.{theirs}"
    return names


@contextlib.contextmanager
def deepseek_v4_in_float64() -> Iterator[None]:
    """Within the block, ``transformers``' DeepSeek-V4 code computes in float64.

    Where it computes in float32 whatever the model's dtype (its RMS norms' ``.to(
    torch.float32)``, the compressors' ``softmax(dtype=torch.float32)``, the rotary
    embedding's tables, its ``apply_rotary_pos_emb`` and the indexer's scorer, which
    call ``Tensor.float()``), float64 stays float64: the module's ``torch`` (and the
    RoPE utilities') is a stand-in whose ``float`` and ``float32`` are ``float64``, and
    ``Tensor.float()`` leaves a float64 tensor as it is. Build the modules inside too,
    so that their RoPE tables are computed in float64.
    """
    original = torch.Tensor.float

    def keep(self, *args, **kwargs):
        return self if self.dtype == F64 else original(self, *args, **kwargs)

    stand_in = _TorchWithFloat64AsFloat()
    with (
        mock.patch.object(torch.Tensor, "float", keep),
        mock.patch.object(modeling_deepseek_v4, "torch", stand_in),
        mock.patch.object(modeling_rope_utils, "torch", stand_in),
    ):
        yield


def deepseek_v4_config(layer, *, kinds: tuple[str, ...], **overrides):
    """A small ``DeepseekV4Config`` with ``layer``'s sizes, its RoPE on the compressed
    layers (base and scaling), and the layers ``kinds``, eager attention."""
    rates = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}
    index = {}
    if layer.indexer is not None:
        rates["compressed_sparse_attention"] = layer.indexer.rate
        index = {
            "index_n_heads": layer.indexer.num_heads,
            "index_head_dim": layer.indexer.head_dim,
            "index_topk": layer.indexer.top_k,
        }
    elif layer.compressor is not None:
        rates["heavily_compressed_attention"] = layer.compressor.rate
    scaling = dict(layer.rotary.scaling or {"rope_type": "default"})
    scaling.pop("attention_factor", None)  # DeepseekV4Config sets it to 1 for YaRN
    fields = {
        "hidden_size": layer.d_in,
        "num_attention_heads": layer.num_heads,
        "num_key_value_heads": 1,
        "head_dim": layer.head_dim,
        "q_lora_rank": layer.q_lora_rank,
        "qk_rope_head_dim": layer.rope_dim,
        "sliding_window": layer.window,
        "o_groups": layer.o_groups,
        "o_lora_rank": layer.o_lora_rank,
        "num_hidden_layers": len(kinds),
        "layer_types": list(kinds),
        "compress_rates": rates,
        "max_position_embeddings": layer.context_length,
        "rms_norm_eps": layer.kv_norm.eps,
        "rope_parameters": scaling,
        "compress_rope_theta": layer.rotary.base,
        "vocab_size": 32,
        "moe_intermediate_size": 8,
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "attn_implementation": "eager",
        **index,
        **overrides,
    }
    return DeepseekV4Config(**fields)


def deepseek_v4_attention(layer, config, layer_idx: int) -> nn.Module:
    """``DeepseekV4Attention`` for layer ``layer_idx`` of ``config``, holding ``layer``'s
    weights, in ``layer``'s dtype and in eval mode (build it in
    :func:`deepseek_v4_in_float64` to compare in float64)."""
    theirs = DeepseekV4Attention(config, layer_idx).to(layer.W_kv.weight.dtype).eval()
    state = layer.state_dict()
    names = deepseek_v4_theirs_names(layer).items()
    their_state = {theirs_name: state[ours] for ours, theirs_name in names}
    theirs.load_state_dict(their_state, strict=True)
    return theirs


def deepseek_v4_step(theirs, config, rotary, x, start, cache):
    """DeepseekV4Attention on the tokens at ``start ...``, as DeepseekV4Model calls it:
    both RoPE tables, the positions, the sliding-window mask over the keys it holds."""
    num_tokens = x.shape[1]
    positions = torch.arange(start, start + num_tokens)[None]
    tables = {kind: rotary(x, positions, layer_type=kind) for kind in ("main", "compress")}
    held = 0 if cache is None else min(start, config.sliding_window - 1)
    keys = torch.arange(start - held, start + num_tokens)
    gap = positions[0][:, None] - keys[None, :]
    seen = (gap >= 0) & (gap < config.sliding_window)
    mask = torch.zeros(x.shape[0], 1, num_tokens, len(keys), dtype=F64)
    mask = mask.masked_fill(~seen, float("-inf"))  # (batch, 1, n, keys), as the model's
    out, _ = theirs(x, tables, positions, mask, cache)  # 5th: the cache, by any name
    return out
