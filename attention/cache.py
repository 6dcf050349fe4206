"""What every cache of one sequence has in common: the :class:`Cache` protocol.

A layer that decodes one token at a time keeps something per sequence between
calls: the keys and values of the tokens seen (:class:`~attention.KVCache`, its
rolling, quantized and streaming kin), a latent per token
(:class:`~attention.LatentCache`), or a state of fixed size
(:class:`~attention.GatedDeltaNetCache`). What each one holds, and its ``update``,
belong to its layer; a few questions have the same answer for every one of them,
and this protocol names them: how many tokens went through, how many it holds, how
many bytes, and can it go back.

``.keys`` and ``.values``, on the caches that have them, are every held token's key
and value exactly as ``update`` received them, oldest first. A cache that holds
them otherwise names them otherwise: :class:`~attention.QuantizedKVCache`'s
``residual_keys``, :class:`~attention.LatentCache`'s ``latent`` and ``rope_keys``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Cache"]


@runtime_checkable
class Cache(Protocol):
    """The protocol of every per-sequence cache: tokens seen and held, bytes, roll-back.

    Nothing to subclass: a class implements it by having these members, and
    ``isinstance(cache, Cache)`` checks that it has them. Each cache also has an
    ``update`` that its layer calls with the new tokens' tensors; its arguments
    differ from cache to cache (keys and values, a latent and a rotary key, the
    states of a recurrence).

    Attributes
    ----------
    reindexes_positions : bool
        ``True`` only for a cache that gives its held tokens new positions,
        ``0 ... len(cache) - 1`` (:class:`~attention.StreamingCache`): a layer then
        puts its keys into the cache *before* RoPE and rotates the held keys by
        their index in the cache, the new queries by the last indices. ``False``:
        the new tokens sit at positions ``seen_tokens`` onwards, keys rotated before
        they are cached.

    Examples
    --------
    >>> import torch
    >>> from attention import KVCache
    >>> cache = KVCache(window=4)  # a sliding window's cache: keeps 3 tokens
    >>> _ = cache.update(torch.zeros(1, 2, 10, 8), torch.zeros(1, 2, 10, 8))
    >>> isinstance(cache, Cache), cache.seen_tokens, len(cache), cache.nbytes
    (True, 10, 3, 384)
    >>> cache.crop(9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: KVCache: cannot crop to 9 tokens: the next token, at position 9, would ...

    Token 9 would see tokens 6 to 9 (its window), and the cache dropped 0 to 6.
    """

    reindexes_positions: bool

    @property
    def seen_tokens(self) -> int:
        """The number of tokens that have gone through the cache, the next token's position."""

    def __len__(self) -> int:
        """Tokens the cache holds now (fewer than :attr:`seen_tokens` once it drops some).

        A cache of fixed size that folds every token into a state
        (:class:`~attention.GatedDeltaNetCache`) stands for every token it has seen,
        so its length is :attr:`seen_tokens`.
        """

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor the cache holds (the tokens held, not room kept for more)."""

    def crop(self, length: int) -> None:
        """Go back to ``length`` tokens seen, forgetting the later ones.

        A cache that cannot (it dropped tokens it would need, or folded them into a
        state) raises a ``ValueError`` that says why.
        """
