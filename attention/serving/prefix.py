"""Automatic prefix caching: full blocks found again by the hash of everything before them.

Requests to a server often begin alike: one system prompt, one few-shot preamble, one
document asked several questions. Their keys and values for that prefix are the same
numbers, so a server that kept them need not compute them again. vLLM's *automatic
prefix caching* (and SGLang's radix cache) finds them without being told which
requests share what: every full block of the paged cache gets a *hash* of its tokens
**and of every token before it**, as a chain, ``hash(parent's hash, tokens)``. Two
blocks with one hash hold the same tokens at the same positions after the same past,
so their keys and values are equal. A new request hashes its prompt block by block
and takes every block whose hash the cache knows, until the first miss.

A block is only ever reused whole, and it is never written again, so several
requests can read it at once; each write goes into blocks of their own. When a
request ends its hashed blocks stay in the pool, held by the index, until a new
request needs room: then the block used least recently is evicted. The hash here is
the one ``transformers``' continuous batching uses (``compute_block_hash``):
BLAKE2b with an 8-byte digest over the parent's hash (8 bytes, little-endian) and the
tokens as 32-bit integers, so both name the same block the same way.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Sequence

from attention import _checks
from attention.paged import PagedKVCache

__all__ = ["PrefixCache", "block_hash", "block_hashes"]


def _tokens(owner: str, tokens: object) -> list[int]:
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise TypeError(f"{owner}: tokens must be a list of ints, got {type(tokens).__name__}")
    return [_checks.whole_number(owner, t, "tokens must hold ints, token ids") for t in tokens]


def block_hash(parent_hash: int | None, tokens: Sequence[int]) -> int:
    """The hash of one block: its parent's hash (``None`` for the first) and its tokens.

    The same function as ``transformers``' ``compute_block_hash``: BLAKE2b, 8-byte
    digest, over the parent's hash as 8 little-endian bytes and then the tokens as
    32-bit integers, read as a little-endian unsigned int. Python's own ``hash`` would
    not do: it is salted per process, so two workers would disagree.

    Parameters
    ----------
    parent_hash : int or None
        The previous block's hash, an unsigned 64-bit int; ``None`` for a sequence's
        first block.
    tokens : list of int
        The block's token ids.

    Returns
    -------
    int
        In ``[0, 2**64)``.

    Examples
    --------
    >>> first = block_hash(None, [1, 2, 3, 4])
    >>> second = block_hash(first, [5, 6, 7, 8])
    >>> second == block_hash(block_hash(None, [9, 2, 3, 4]), [5, 6, 7, 8])  # another past
    False
    >>> 0 <= second < 2**64
    True
    """
    owner = "block_hash"
    ids = _tokens(owner, tokens)
    digest = hashlib.blake2b(digest_size=8)
    if parent_hash is not None:
        parent = _checks.whole_number(owner, parent_hash, "parent_hash must be an int or None")
        if not 0 <= parent < 2**64:
            raise ValueError(
                f"{owner}: parent_hash must be an unsigned 64-bit int, in [0, 2**64), got {parent}"
            )
        digest.update(parent.to_bytes(8, "little", signed=False))
    digest.update(array("i", ids).tobytes())
    return int.from_bytes(digest.digest(), "little", signed=False)


def block_hashes(tokens: Sequence[int], block_size: int) -> list[int]:
    """The hash chain of the full blocks of ``tokens``; a last, partial block gets none.

    Examples
    --------
    >>> chain = block_hashes(list(range(10)), block_size=4)  # blocks 0-3, 4-7; 8-9 partial
    >>> len(chain), chain[1] == block_hash(chain[0], [4, 5, 6, 7])
    (2, True)
    """
    owner = "block_hashes"
    ids = _tokens(owner, tokens)
    size = _checks.positive_int(owner, "block_size", block_size)
    chain: list[int] = []
    parent = None
    for start in range(0, len(ids) - size + 1, size):
        parent = block_hash(parent, ids[start : start + size])
        chain.append(parent)
    return chain


class PrefixCache:
    """An index from block hashes to the blocks of a :class:`~attention.PagedKVCache`.

    Every block it indexes it also holds (:meth:`~attention.PagedKVCache.hold`), so
    that the block outlives the request that wrote it. A block that only the index
    holds is *cached*: no request reads it, but its keys and values wait for one that
    will. :meth:`evict` frees cached blocks, least recently used first, when the pool
    needs room.

    Parameters
    ----------
    cache : PagedKVCache
        The pool whose blocks it indexes.

    Examples
    --------
    A request writes 9 tokens in blocks of 4; its two full blocks are registered:

    >>> import torch
    >>> cache = PagedKVCache(num_blocks=6, block_size=4, num_kv_heads=1, head_dim=1)
    >>> index = PrefixCache(cache)
    >>> prompt = list(range(9))
    >>> cache.add(0)
    >>> cache.update(0, *(2 * [torch.zeros(9, 1, 1)]))
    >>> chain = block_hashes(prompt, 4)
    >>> for hash_, block in zip(chain, cache.block_table(0)):
    ...     _ = index.register(hash_, block)
    >>> cache.free(0)  # the request ends: its full blocks stay, held by the index
    >>> index.num_cached_blocks, cache.num_free_blocks
    (2, 4)

    A new request sharing the first 6 tokens finds one block, then misses:

    >>> index.match(list(range(6)) + [40, 41, 42])
    [0]
    >>> index.evict(1)  # the least recently used block returns to the pool
    1
    >>> index.num_cached_blocks, cache.num_free_blocks
    (1, 5)
    """

    def __init__(self, cache: PagedKVCache) -> None:
        if not isinstance(cache, PagedKVCache):
            raise TypeError(
                f"PrefixCache: cache must be a PagedKVCache, got {type(cache).__name__}"
            )
        self.cache = cache
        # hash -> block, least recently used first: OrderedDict keeps the use order.
        self._blocks: OrderedDict[int, int] = OrderedDict()

    def __len__(self) -> int:
        """How many blocks the index holds, read by requests or cached."""
        return len(self._blocks)

    def __contains__(self, hash_: object) -> bool:
        return hash_ in self._blocks

    @property
    def num_cached_blocks(self) -> int:
        """How many indexed blocks no request reads, the index being their only reader."""
        return sum(self.cache.references(block) == 1 for block in self._blocks.values())

    def match(self, tokens: Sequence[int], *, keep_last: bool = True) -> list[int]:
        """The blocks that hold ``tokens``' longest known prefix of full blocks, in order.

        With ``keep_last`` (keyword only, the default), a prompt's last token is never
        matched: the model must still compute it, since its output gives the first new
        token. This is ``transformers``' rule too (``match_prefix_blocks``). The blocks
        found become the most recently used.
        """
        ids = _tokens("PrefixCache.match", tokens)
        size = self.cache.block_size
        usable = len(ids) - 1 if keep_last else len(ids)
        found = []
        parent = None
        for start in range(0, usable - size + 1, size):
            parent = block_hash(parent, ids[start : start + size])
            block = self._blocks.get(parent)
            if block is None:
                break
            found.append(block)
            self._blocks.move_to_end(parent)
        return found

    def register(self, hash_: int, block: int) -> bool:
        """Index the full ``block`` under ``hash_`` and hold it; ``False`` if the hash is known.

        A hash already indexed keeps its first block (two requests that computed the
        same prefix at once): the second block stays its request's own.
        """
        if hash_ in self._blocks:
            self._blocks.move_to_end(hash_)
            return False
        self.cache.hold(block)
        self._blocks[hash_] = block
        return True

    def touch(self, hashes: Sequence[int]) -> None:
        """Mark indexed blocks used now, the last of ``hashes`` most recently."""
        for hash_ in hashes:
            if hash_ in self._blocks:
                self._blocks.move_to_end(hash_)

    def evict(self, num_blocks: int) -> int:
        """Free up to ``num_blocks`` cached blocks, least recently used first; how many went."""
        wanted = _checks.whole_number("PrefixCache.evict", num_blocks, "num_blocks must be an int")
        evicted: list[int] = []
        for hash_, block in self._blocks.items():
            if len(evicted) == wanted:
                break
            if self.cache.references(block) == 1:  # only the index reads it
                evicted.append(hash_)
        for hash_ in evicted:
            self.cache.release(self._blocks.pop(hash_))
        return len(evicted)

    def clear(self) -> None:
        """Forget every cached block (blocks requests still read stay indexed)."""
        self.evict(len(self._blocks))
