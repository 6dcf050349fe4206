"""Serving: a small engine assembled from the package's own parts.

Part V teaches serving's parts one at a time; this room puts them to work together.

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

The room imports the core and :mod:`attention.models`; :mod:`attention.figures`
may import it.
"""

from attention.serving.engine import Admission, Engine, Request, StepRecord
from attention.serving.prefix import PrefixCache, block_hash, block_hashes
from attention.serving.runner import SUPPORTED_MODEL_TYPES, ModelRunner, cu_seqlens_of

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "Admission",
    "Engine",
    "ModelRunner",
    "PrefixCache",
    "Request",
    "StepRecord",
    "block_hash",
    "block_hashes",
    "cu_seqlens_of",
]
