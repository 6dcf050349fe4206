"""Serving: the package's parts working together as an engine does.

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
