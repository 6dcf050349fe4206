"""Serving: a small engine assembled from the package's own parts.

Part V teaches serving's parts one at a time; this room puts them to work together.
It imports the core and :mod:`attention.models`; :mod:`attention.figures` may import
it.

* :class:`ModelRunner`: a ``transformers`` Llama-family decoder whose attention layers
  are the package's (:func:`~attention.models.from_transformers`), run over one
  :class:`~attention.PagedKVCache`, one packed batch (``cu_seqlens``) of prefill
  chunks and decode tokens a step.
* :class:`Engine`: continuous batching. Requests are admitted while the pool has
  blocks, preempted (and recomputed later) when it runs out, and prompts are read in
  chunks that share steps with other requests' decoding. Each step leaves a
  :class:`StepRecord`.
* :class:`PrefixCache`, :func:`block_hash`, :func:`block_hashes`: automatic prefix
  caching. Full blocks are found again by a hash chain, the one ``transformers``'
  continuous batching computes, and evicted least recently used.
* :mod:`attention.serving.tree`: speculative decoding with a draft tree.
  :func:`~attention.serving.tree.tree_attention_mask` lets each node see itself and
  its ancestors; :func:`~attention.serving.tree.greedy_accept` verifies a tree,
  :func:`~attention.serving.tree.keep_accepted` rolls a cache back to the accepted
  path, and :func:`~attention.serving.tree.speculative_decode` gives a
  :class:`~attention.serving.tree.Decoder`'s greedy tokens in fewer calls.
* :mod:`attention.serving.cascade`: :func:`~attention.serving.cascade.cascade_attention`,
  requests that share a prefix read it once, together, and their own suffixes apart,
  the parts merged.
"""

from attention.serving.cascade import cascade_attention
from attention.serving.engine import Admission, Engine, Request, StepRecord
from attention.serving.prefix import PrefixCache, block_hash, block_hashes
from attention.serving.runner import SUPPORTED_MODEL_TYPES, ModelRunner, cu_seqlens_of
from attention.serving.tree import (
    Acceptance,
    Decoder,
    DecoderBlock,
    SpeculativeOutput,
    attention_at_positions,
    greedy_accept,
    greedy_decode,
    keep_accepted,
    keep_accepted_paged,
    speculative_decode,
    tree_attention_mask,
    tree_cache_mask,
    tree_positions,
)

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "Acceptance",
    "Admission",
    "Decoder",
    "DecoderBlock",
    "Engine",
    "ModelRunner",
    "PrefixCache",
    "Request",
    "SpeculativeOutput",
    "StepRecord",
    "attention_at_positions",
    "block_hash",
    "block_hashes",
    "cascade_attention",
    "cu_seqlens_of",
    "greedy_accept",
    "greedy_decode",
    "keep_accepted",
    "keep_accepted_paged",
    "speculative_decode",
    "tree_attention_mask",
    "tree_cache_mask",
    "tree_positions",
]
