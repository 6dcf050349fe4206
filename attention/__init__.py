"""Self-attention step by step, from a dot product to the attention of today's decoders.

Everything a chapter uses is importable from ``attention``, except the figures, which
need matplotlib (the ``plot`` extra) and live in :mod:`attention.figures`. The package
has three rooms: the attention core, flat in ``attention/``; the model atlas,
:mod:`attention.models`, which imports the core; and :mod:`attention.figures`, which
imports both. The core imports neither.

**Part I, the book's attention** (chapters 1 to 6). It follows chapter 3 of *Build a
Large Language Model (From Scratch)* and the attention head of "Let's build GPT".
Every class draws from the random generator exactly as the book's code does, so the
same seed gives the book's numbers.

* :mod:`attention.data`: the running examples, ``INPUTS`` and ``TOKENS``.
* :mod:`attention.simple`: attention without trainable weights, one function per step.
* :func:`scaled_dot_product_weights`: ``softmax(Q K^T / sqrt(d_k))``.
* :class:`SelfAttentionV1` and :class:`SelfAttentionV2`: trainable query, key and
  value weights.
* :class:`CausalAttention` and Karpathy's :class:`Head`: the causal mask and dropout.
* :class:`MultiHeadAttentionWrapper` and :class:`MultiHeadAttention`: several heads,
  stacked, then split from one projection.

**Efficient variants** (chapter 7). :mod:`attention.efficient` rewrites
``MultiHeadAttention`` several ways, each computing the same function faster: a fused
projection, ``einsum``, ``scaled_dot_product_attention``,
``torch.nn.MultiheadAttention`` and ``flex_attention``. :mod:`attention.tiled` computes
attention block by block with the online softmax, as the fused kernels do.

**Part II, the attention of today's decoders** (chapters 8 to 13). Every module
from the fast variants on computes its attention with one function, :func:`attend`,
and every mask the package takes is ``allowed=``: ``True`` where a query may attend.

* :class:`KVCache` and :func:`kv_cache_bytes_per_token`: generating one token at a
  time without recomputing the past, and what that costs in memory. Every cache of
  one sequence, in this part and the later ones, implements the protocol
  :class:`Cache` (tokens seen and held, bytes, roll-back); those of keys and values
  also :class:`KeyValueCache`, what :class:`GroupedQueryAttention` takes.
* :class:`GroupedQueryAttention` and :func:`grouped_query_attention`: query heads that
  share key/value heads (Llama, Mistral), with RoPE, a sliding window and a cache.
* :func:`sinusoidal_positions`, :func:`alibi_bias` (with :func:`alibi_slopes`) and
  :class:`RelativePositionBias` (with :func:`relative_position_bucket`): the positions
  of the original Transformer, of BLOOM and of T5, the last two a bias that
  :func:`attend` adds to the scores (``bias=``).
* :func:`apply_rope` and :func:`apply_rope_interleaved`: rotary position embeddings
  in both layouts, scaled for longer contexts with :func:`rope_frequencies`.
* :func:`causal_mask`, :func:`sliding_window_mask`, :func:`chunked_mask` and
  :func:`padding_mask`.
* :class:`MultiHeadLatentAttention`, :class:`LatentCache` and
  :func:`latent_cache_bytes_per_token`: DeepSeek's latent attention, which caches one
  small latent per token.

**Part III, the attention of 2025–26 models.** :class:`GroupedQueryAttention` takes
softcapping and its own ``scale`` (Gemma 2) and attention sinks (gpt-oss), as
:func:`attend` does, and holds parts: QK-norm with :class:`RMSNorm` (Qwen3) or
:class:`ProjectionRMSNorm` (OLMo 2), an output gate (Qwen3-Next), Gemma 4's value norm
and keys used as values, and RoPE as a :class:`Rotary` scaled for longer contexts.
:func:`layer_for` assembles the layer of each model in :data:`MODELS` from them
(:mod:`attention.models.recipes`).

**Part IV, attention that does not look at every key.** :func:`linear_attention`
replaces the softmax by a feature map, so the past fits in a fixed-size state, in a
parallel and a recurrent form; :func:`gated_delta_rule` writes to that state with the
delta rule and a decay (Gated DeltaNet, Qwen3-Next), token by token or in chunks;
:class:`GatedDeltaNet` is Qwen3-Next's whole layer, decoding with a fixed-size
:class:`GatedDeltaNetCache`. :func:`mamba2_ssd` is Mamba-2's selective scan, token by
token or in chunks, and :func:`mamba2_ssd_dual` the same numbers as masked attention
with a :func:`semiseparable_mask`; :class:`Mamba2` is the layer of Nemotron-H's and
the other hybrids' Mamba-2 layers, decoding with a fixed-size :class:`Mamba2Cache`.
:func:`topk_sparse_attention` keeps the softmax but lets each query read only the
``top_k`` keys that DeepSeek-V3.2's :class:`LightningIndexer` scores highest;
:class:`SparseLatentAttention` is MLA with it, as in DeepSeek-V3.2's layers, and
:func:`indexer_kl_loss` trains the indexer to follow the attention.
:mod:`attention.selection` picks blocks of keys instead: :class:`BlockTopKAttention`
pools an indexer's scores into blocks and reads the best ones (MiniMax-M3), and
:class:`QSAAttention` spends a token budget on compressed blocks (Qwen4-Exp's QSA).
:class:`CompressedAttention` is DeepSeek-V4's layer: a window of raw tokens with sinks,
and the entries a :class:`TokenCompressor` makes of each group of tokens, all of them
(HCA) or those a :class:`CompressedIndexer` picks (CSA), kept in a
:class:`CompressedCache` while decoding.

**Part V, attention in serving.** :class:`PagedKVCache` keeps many sequences' keys
and values in one pool of fixed-size blocks, each sequence's listed in its block
table, blocks shared by :meth:`~attention.PagedKVCache.fork` and copied on write (PagedAttention,
vLLM); :func:`paged_attention` decodes a batch of them through their block tables.
:func:`varlen_attention` attends over sequences
packed one after the other without padding, FlashAttention's ``cu_seqlens`` layout,
each token inside its own sequence's block of :func:`varlen_mask`.
:func:`quantize_kv` stores keys per channel and values per token in 8 or 4 bits
(KIVI); :class:`QuantizedKVCache` keeps the newest tokens exact and the rest so;
:class:`StreamingCache` keeps StreamingLLM's first tokens and its recent ones, at positions
re-indexed inside the cache. :func:`train_recall_model` trains the site's toy, a
:class:`RecallModel` that answers a question from a fact earlier in its text, whose
trained keys and values these caches are measured on (:mod:`attention.toy`).

**Part VI, FlashAttention, the whole algorithm.**
:func:`~attention.tiled.tiled_attention` returns the log-sum-exp of each query with
``return_lse=True``; :func:`~attention.flash.tiled_attention_backward` recomputes the
weights from it, block by block, and :func:`~attention.flash.flash_attention` ties
the two together under autograd. :func:`~attention.merge.merge_attention_states`
combines attention over disjoint keys, as :func:`~attention.merge.split_kv_attention`
(flash-decoding) and :func:`~attention.ring.ring_attention` (keys and values passed
round a ring of ``torch.distributed`` processes) do.

**Part VII, attention that is not decoder-only.** An encoder attends both ways:
:func:`attend` with no causal mask and ``allowed=`` a padding mask (BERT), or a
:func:`sliding_window_mask` with ``causal=False`` (ModernBERT's local layers).
:class:`CrossAttention` takes its queries from one sequence and its keys and values
from another (an encoder–decoder's decoder, Whisper; Llama 3.2 Vision's image
layers), and :class:`CrossAttentionCache` keeps the context's keys and values from the
first decoding step on.

**Real models.** :data:`MODELS` maps a name to the :class:`ModelFacts` of a released
model: its attention config, copied from its ``config.json``, with the source. Every
number the site gives about a real model is computed from it. They live in
:mod:`attention.models`, the model atlas, beside :func:`facts_from_config` (any
model's facts from its config), the costs and the recipes; the figures live in
:mod:`attention.figures` (they need matplotlib, the ``plot`` extra).

The book's module, then an attention layer with Llama 3 8B's heads (its query heads
grouped over fewer key/value heads), its RoPE base and no bias, at a toy width:

>>> import torch
>>> from attention import INPUTS, MODELS, GroupedQueryAttention, MultiHeadAttention, Rotary
>>> _ = torch.manual_seed(123)
>>> mha = MultiHeadAttention(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=2)
>>> mha(INPUTS.unsqueeze(0)).shape  # (batch, num_tokens, d_out)
torch.Size([1, 6, 2])
>>> llama = MODELS["Llama 3 8B"]
>>> layer = GroupedQueryAttention(
...     3, 64, context_length=6, num_heads=llama.num_heads, num_kv_heads=llama.num_kv_heads,
...     rotary=Rotary(64 // llama.num_heads, llama.rope.theta), out_bias=False,
... )
>>> layer(INPUTS.unsqueeze(0)).shape, layer.W_key.out_features
(torch.Size([1, 6, 64]), 16)
>>> layer.W_key.out_features == llama.num_kv_heads * layer.head_dim
True
"""

from attention._version import __version__ as __version__
from attention._version import check_version
from attention.cache import Cache, KeyValueCache
from attention.causal import CausalAttention
from attention.compressed import (
    CompressedAttention,
    CompressedCache,
    CompressedIndexer,
    CompressorState,
    TokenCompressor,
)
from attention.cross import CrossAttention, CrossAttentionCache
from attention.data import (
    INPUTS,
    SENTENCE,
    SWITCH_INPUTS,
    SWITCH_SENTENCE,
    SWITCH_TOKENS,
    TOKENS,
)
from attention.delta import GatedDeltaNet, GatedDeltaNetCache, gated_delta_rule
from attention.flash import flash_attention, tiled_attention_backward
from attention.gqa import GroupedQueryAttention, grouped_query_attention
from attention.head import Head
from attention.kv_cache import KVCache, kv_cache_bytes_per_token
from attention.kv_quant import QuantizedKV, QuantizedKVCache, quantize_kv
from attention.latent import LatentCache, MultiHeadLatentAttention, latent_cache_bytes_per_token
from attention.linear import linear_attention
from attention.masks import causal_mask, chunked_mask, padding_mask, sliding_window_mask
from attention.merge import merge_attention_states, split_kv_attention

# The model atlas is a room of its own above the core (attention.models); the names a
# reader uses most stay importable from here. The core never imports it.
from attention.models import MODELS, ModelFacts, facts_from_config, layer_for
from attention.multihead import MultiHeadAttention, MultiHeadAttentionWrapper
from attention.nope import NoPEWithTemperature
from attention.norms import ProjectionRMSNorm, RMSNorm
from attention.paged import PagedKVCache, paged_attention
from attention.positions import (
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    relative_position_bucket,
    sinusoidal_positions,
)
from attention.ring import ring_attention, ring_positions, ring_work, simulate_ring_attention
from attention.rope import Rotary, apply_rope, apply_rope_interleaved, rope_frequencies
from attention.scaled import scaled_dot_product_weights
from attention.selection import (
    BlockTopKAttention,
    BlockTopKCache,
    BlockTopKIndexer,
    QSAAttention,
    QSACache,
    QSAIndexer,
    block_sparse_attention,
    pool_block_scores,
    select_blocks,
)
from attention.self_attention import SelfAttentionV1, SelfAttentionV2
from attention.shared_kv import SharedKVAttention
from attention.simple import (
    attention_weights,
    context_vectors,
    scores_for_all,
    scores_for_query,
    simple_self_attention,
    softmax_naive,
    softmax_stable,
)
from attention.sparse import (
    LightningIndexer,
    SparseLatentAttention,
    SparseLatentCache,
    indexer_kl_loss,
    topk_sparse_attention,
)
from attention.ssd import Mamba2, Mamba2Cache, mamba2_ssd, mamba2_ssd_dual, semiseparable_mask
from attention.step import attend
from attention.streaming import StreamingCache
from attention.tiled import tiled_attention
from attention.toy import RecallModel, recall_batch, train_recall_model
from attention.varlen import varlen_attention, varlen_mask

__all__ = [
    "INPUTS",
    "MODELS",
    "SENTENCE",
    "SWITCH_INPUTS",
    "SWITCH_SENTENCE",
    "SWITCH_TOKENS",
    "TOKENS",
    "BlockTopKAttention",
    "BlockTopKCache",
    "BlockTopKIndexer",
    "Cache",
    "CausalAttention",
    "CompressedAttention",
    "CompressedCache",
    "CompressedIndexer",
    "CompressorState",
    "CrossAttention",
    "CrossAttentionCache",
    "GatedDeltaNet",
    "GatedDeltaNetCache",
    "GroupedQueryAttention",
    "Head",
    "KVCache",
    "KeyValueCache",
    "LatentCache",
    "LightningIndexer",
    "Mamba2",
    "Mamba2Cache",
    "ModelFacts",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "MultiHeadLatentAttention",
    "NoPEWithTemperature",
    "PagedKVCache",
    "ProjectionRMSNorm",
    "QSAAttention",
    "QSACache",
    "QSAIndexer",
    "QuantizedKV",
    "QuantizedKVCache",
    "RMSNorm",
    "RecallModel",
    "RelativePositionBias",
    "Rotary",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "SharedKVAttention",
    "SparseLatentAttention",
    "SparseLatentCache",
    "StreamingCache",
    "TokenCompressor",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "apply_rope_interleaved",
    "attend",
    "attention_weights",
    "block_sparse_attention",
    "causal_mask",
    "check_version",
    "chunked_mask",
    "context_vectors",
    "facts_from_config",
    "flash_attention",
    "gated_delta_rule",
    "grouped_query_attention",
    "indexer_kl_loss",
    "kv_cache_bytes_per_token",
    "latent_cache_bytes_per_token",
    "layer_for",
    "linear_attention",
    "mamba2_ssd",
    "mamba2_ssd_dual",
    "merge_attention_states",
    "padding_mask",
    "paged_attention",
    "pool_block_scores",
    "quantize_kv",
    "recall_batch",
    "relative_position_bucket",
    "ring_attention",
    "ring_positions",
    "ring_work",
    "rope_frequencies",
    "scaled_dot_product_weights",
    "scores_for_all",
    "scores_for_query",
    "select_blocks",
    "semiseparable_mask",
    "simple_self_attention",
    "simulate_ring_attention",
    "sinusoidal_positions",
    "sliding_window_mask",
    "softmax_naive",
    "softmax_stable",
    "split_kv_attention",
    "tiled_attention",
    "tiled_attention_backward",
    "topk_sparse_attention",
    "train_recall_model",
    "varlen_attention",
    "varlen_mask",
]
