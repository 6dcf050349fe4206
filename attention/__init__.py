"""Self-attention step by step, from a dot product to multi-head causal attention.

The package follows chapter 3 of *Build a Large Language Model (From Scratch)* and
the attention head of "Let's build GPT". Every class consumes the random generator
exactly as the book's code does, so the same seed gives the book's numbers.

>>> import torch
>>> from attention import INPUTS, MultiHeadAttention
>>> _ = torch.manual_seed(123)
>>> mha = MultiHeadAttention(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=2)
>>> mha(INPUTS.unsqueeze(0)).shape  # (batch, num_tokens, d_out)
torch.Size([1, 6, 2])
"""

from attention._version import __version__ as __version__
from attention._version import check_version
from attention.causal import CausalAttention
from attention.data import (
    INPUTS,
    SENTENCE,
    SWITCH_INPUTS,
    SWITCH_SENTENCE,
    SWITCH_TOKENS,
    TOKENS,
)
from attention.gqa import GroupedQueryAttention, grouped_query_attention
from attention.head import Head
from attention.kv_cache import KVCache, kv_cache_bytes_per_token
from attention.latent import LatentCache, MultiHeadLatentAttention, latent_cache_bytes_per_token
from attention.masks import causal_mask, padding_mask, sliding_window_mask
from attention.model_facts import MODELS, ModelFacts
from attention.multihead import MultiHeadAttention, MultiHeadAttentionWrapper
from attention.rope import apply_rope, apply_rope_interleaved
from attention.scaled import scaled_dot_product_weights
from attention.self_attention import SelfAttentionV1, SelfAttentionV2
from attention.simple import (
    attention_weights,
    context_vectors,
    scores_for_all,
    scores_for_query,
    simple_self_attention,
    softmax_naive,
    softmax_stable,
)

__all__ = [
    "INPUTS",
    "MODELS",
    "SENTENCE",
    "SWITCH_INPUTS",
    "SWITCH_SENTENCE",
    "SWITCH_TOKENS",
    "TOKENS",
    "CausalAttention",
    "GroupedQueryAttention",
    "Head",
    "KVCache",
    "LatentCache",
    "ModelFacts",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "MultiHeadLatentAttention",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "apply_rope",
    "apply_rope_interleaved",
    "attention_weights",
    "causal_mask",
    "check_version",
    "context_vectors",
    "grouped_query_attention",
    "kv_cache_bytes_per_token",
    "latent_cache_bytes_per_token",
    "padding_mask",
    "scaled_dot_product_weights",
    "scores_for_all",
    "scores_for_query",
    "simple_self_attention",
    "sliding_window_mask",
    "softmax_naive",
    "softmax_stable",
]
