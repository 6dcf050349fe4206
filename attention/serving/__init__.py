"""Serving: the package's parts working together as an engine does.

* :mod:`attention.serving.tree`: :func:`tree_attention_mask`, a draft tree's mask, and
  the tree's positions and its mask over the cache, for speculative decoding.
"""

from attention.serving.tree import (
    attention_at_positions,
    tree_attention_mask,
    tree_cache_mask,
    tree_positions,
)

__all__ = [
    "attention_at_positions",
    "tree_attention_mask",
    "tree_cache_mask",
    "tree_positions",
]
