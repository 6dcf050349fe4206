"""Serving: a small engine assembled from the package's own parts.

:mod:`attention.serving.prefix`: automatic prefix caching by block hash.
"""

from attention.serving.prefix import PrefixCache, block_hash, block_hashes

__all__ = ["PrefixCache", "block_hash", "block_hashes"]
