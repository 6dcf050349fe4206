"""Serving: the package's parts working together as an engine does.

* :mod:`attention.serving.tree`: speculative decoding with a draft tree.
  :func:`tree_attention_mask` (each node sees itself and its ancestors),
  :func:`tree_positions` and :func:`tree_cache_mask` place a tree after the cache;
  :func:`attention_at_positions` runs a layer over it; :func:`greedy_accept` verifies
  it, :func:`keep_accepted` and :func:`keep_accepted_paged` roll a cache back to the
  accepted path; :class:`Decoder` is a small model of the package's layers, and
  :func:`speculative_decode` gives its :func:`greedy_decode` tokens in fewer calls.
* :mod:`attention.serving.cascade`: :func:`cascade_attention`, requests that share a
  prefix read it once, together, and their own suffixes apart, the parts merged.
"""

from attention.serving.cascade import cascade_attention
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
    "Acceptance",
    "Decoder",
    "DecoderBlock",
    "SpeculativeOutput",
    "attention_at_positions",
    "cascade_attention",
    "greedy_accept",
    "greedy_decode",
    "keep_accepted",
    "keep_accepted_paged",
    "speculative_decode",
    "tree_attention_mask",
    "tree_cache_mask",
    "tree_positions",
]
