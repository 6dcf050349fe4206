"""The paged KV cache: one pool of fixed-size blocks shared by many sequences.

A server that keeps one contiguous :class:`~attention.KVCache` per request must reserve
each for the longest the request may get, since it cannot know in advance where the
answer will stop; most of that memory is never written. PagedAttention (Kwon et al.,
"Efficient Memory Management for Large Language Model Serving with PagedAttention",
2023, the idea behind vLLM) cuts the memory into *blocks* of ``block_size`` tokens,
like the pages of an operating system. A sequence takes one block at a time as it
grows, and its *block table* lists its blocks in token order: token ``t`` lives in
block ``table[t // block_size]`` at slot ``t % block_size``. Nothing is reserved, and at
most one partly filled block per sequence is wasted.

Blocks can be shared. :meth:`~attention.PagedKVCache.fork` gives a new sequence the blocks of
another (a shared system prompt, or several answers to one prompt) without copying
anything; each block counts its readers, and returns to the pool when the last one is
freed. A full block never changes again, so sharing it is safe forever; a partly
filled last block would be written by both, so the first sequence to append to it gets
its own copy first (*copy-on-write*).

:func:`~attention.paged_attention` is the decode step: each sequence's one new query attends over
every token the sequence holds, read through its block table.
"""

from __future__ import annotations

import math

import torch

from attention import _checks
from attention.step import _attend

__all__ = ["PagedKVCache", "paged_attention"]


class PagedKVCache:
    """The keys and values of many sequences, in one pool of fixed-size blocks.

    Parameters
    ----------
    num_blocks : int
        Blocks in the pool; with ``block_size``, the most tokens it can hold.
    block_size : int
        Tokens per block.
    num_kv_heads, head_dim : int
        The shape of each token's key and value, ``(num_kv_heads, head_dim)``.
    dtype : torch.dtype
        The numbers' type; :meth:`update` takes keys and values of this dtype.

    Attributes
    ----------
    key_blocks, value_blocks : torch.Tensor
        The pool itself, ``(num_blocks, block_size, num_kv_heads, head_dim)``. Slots
        past a sequence's length hold stale numbers: only the block tables say what
        is whose.

    Examples
    --------
    A pool of 8 blocks of 4 tokens. A prompt of 6 tokens takes two blocks, the second
    half full:

    >>> import torch
    >>> cache = PagedKVCache(num_blocks=8, block_size=4, num_kv_heads=2, head_dim=3)
    >>> cache.add(0)
    >>> k = v = torch.arange(6.0)[:, None, None].expand(6, 2, 3)  # (num_new, heads, dim)
    >>> cache.update(0, k, v)
    >>> cache.block_table(0), cache.num_tokens(0), cache.num_free_blocks
    ([0, 1], 6, 6)

    A fork shares both blocks; the child's first append copies the half-full one and
    writes into the copy, so the parent's tokens are untouched:

    >>> cache.fork(0, 1)
    >>> cache.num_free_blocks
    6
    >>> cache.update(1, k[:1] + 100, v[:1] + 100)
    >>> cache.block_table(1), cache.num_free_blocks
    ([0, 2], 5)
    >>> cache.gather(0)[0][:, 0, 0].tolist()  # the parent's keys, head 0, dimension 0
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    >>> cache.gather(1)[0][:, 0, 0].tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 100.0]

    Freeing the parent returns only the block nobody else reads:

    >>> cache.free(0)
    >>> cache.num_free_blocks
    6
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        owner = type(self).__name__
        self.num_blocks = _checks.positive_int(owner, "num_blocks", num_blocks)
        self.block_size = _checks.positive_int(owner, "block_size", block_size)
        self.num_kv_heads = _checks.positive_int(owner, "num_kv_heads", num_kv_heads)
        self.head_dim = _checks.positive_int(owner, "head_dim", head_dim)
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"{owner}: dtype must be a floating-point torch.dtype, got {dtype!r}")
        if not dtype.is_floating_point:
            raise ValueError(f"{owner}: dtype must be a floating-point torch.dtype, got {dtype!r}")
        self.dtype = dtype
        shape = (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)
        self.key_blocks = torch.zeros(shape, dtype=dtype)
        self.value_blocks = torch.zeros(shape, dtype=dtype)
        # Free blocks, taken from the end: reversed so that block 0 goes first.
        self._free = list(range(self.num_blocks - 1, -1, -1))
        self._refs = [0] * self.num_blocks  # how many sequences' tables hold each block
        self._holds = [0] * self.num_blocks  # of those references, how many are hold()s
        self._tables: dict[int, list[int]] = {}
        self._lengths: dict[int, int] = {}

    # -- bookkeeping -----------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        """Blocks in the pool that no sequence holds."""
        return len(self._free)

    @property
    def nbytes(self) -> int:
        """Bytes of the pool, every block's keys and values, used or free."""
        return self.key_blocks.nbytes + self.value_blocks.nbytes

    @property
    def seq_ids(self) -> list[int]:
        """The sequences the cache holds, in the order they were added or forked."""
        return list(self._tables)

    def _known(self, seq_id: object, name: str = "seq_id") -> int:
        owner = type(self).__name__
        seq_id = _checks.whole_number(owner, seq_id, f"{name} must be an int")
        if seq_id not in self._tables:
            raise ValueError(
                f"{owner}: unknown {name} {seq_id} (never added, or freed); the cache holds "
                f"{sorted(self._tables)}"
            )
        return seq_id

    def _new(self, seq_id: object, name: str) -> int:
        owner = type(self).__name__
        seq_id = _checks.whole_number(owner, seq_id, f"{name} must be an int")
        if seq_id in self._tables:
            raise ValueError(
                f"{owner}: {name} {seq_id} is already in the cache; free it first or pick "
                f"another id"
            )
        return seq_id

    def block_table(self, seq_id: int) -> list[int]:
        """The blocks of ``seq_id``, in token order (a copy)."""
        return list(self._tables[self._known(seq_id)])

    def num_tokens(self, seq_id: int) -> int:
        """How many tokens ``seq_id`` holds."""
        return self._lengths[self._known(seq_id)]

    def gather(self, seq_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values of ``seq_id``, copied out of its blocks in token order.

        Returns
        -------
        keys, values : torch.Tensor, shape (num_tokens, num_kv_heads, head_dim)
        """
        seq_id = self._known(seq_id)
        table, length = self._tables[seq_id], self._lengths[seq_id]
        index = torch.tensor(table, dtype=torch.long)
        shape = (-1, self.num_kv_heads, self.head_dim)
        # (blocks, block_size, heads, dim) -> (blocks * block_size, heads, dim), cut at length
        keys = self.key_blocks[index].reshape(shape)[:length]
        values = self.value_blocks[index].reshape(shape)[:length]
        return keys, values

    # -- the four operations ---------------------------------------------------------

    def add(self, seq_id: int, *, prefix_blocks: list[int] | tuple[int, ...] = ()) -> None:
        """Start sequence ``seq_id``: empty, or on full blocks other readers already hold.

        ``prefix_blocks`` (keyword only) are full blocks, in token order, that the new
        sequence starts with: it holds ``len(prefix_blocks) * block_size`` tokens, and
        each block gains a reader, as :meth:`fork` does, with nothing copied. This is
        how a prefix cache gives a new request the blocks of a prompt it has seen.
        Every block must be held (by a sequence, or by :meth:`hold`): a free block's
        numbers may belong to nobody.

        >>> cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1)
        >>> cache.add(0)
        >>> cache.update(0, *(2 * [torch.arange(5.0)[:, None, None]]))  # 5 tokens
        >>> cache.add(1, prefix_blocks=cache.block_table(0)[:2])  # its first 4 tokens
        >>> cache.num_tokens(1), cache.references(0), cache.num_free_blocks
        (4, 2, 1)
        """
        seq_id = self._new(seq_id, "seq_id")
        blocks = [self._held_block(block, "prefix_blocks") for block in prefix_blocks]
        for block in blocks:
            self._refs[block] += 1
        self._tables[seq_id] = blocks
        self._lengths[seq_id] = len(blocks) * self.block_size

    def _held_block(self, block: object, name: str) -> int:
        owner = type(self).__name__
        block = _checks.whole_number(owner, block, f"{name} must hold ints, block indices")
        if not 0 <= block < self.num_blocks:
            raise ValueError(
                f"{owner}: {name}: block {block} is not in the pool of {self.num_blocks} "
                f"blocks (0 to {self.num_blocks - 1})"
            )
        if self._refs[block] == 0:
            raise ValueError(
                f"{owner}: {name}: block {block} is free, so its numbers belong to nobody; "
                f"only a block a sequence or hold() keeps can be shared"
            )
        return block

    def references(self, block: int) -> int:
        """How many readers hold ``block``: sequences whose tables list it, and holds."""
        owner = type(self).__name__
        block = _checks.whole_number(owner, block, "block must be an int, a block index")
        if not 0 <= block < self.num_blocks:
            raise ValueError(
                f"{owner}: block {block} is not in the pool of {self.num_blocks} blocks "
                f"(0 to {self.num_blocks - 1})"
            )
        return self._refs[block]

    def hold(self, block: int) -> None:
        """Keep ``block`` out of the pool, as one more reader that is not a sequence.

        A prefix cache holds the full blocks it indexes, so that they outlive the
        request that wrote them; :meth:`release` lets one go. Only a block that some
        reader already holds can be held.
        """
        block = self._held_block(block, "block")
        self._refs[block] += 1
        self._holds[block] += 1

    def release(self, block: int) -> None:
        """Drop one :meth:`hold` of ``block``; with no reader left, it returns to the pool.

        >>> cache = PagedKVCache(num_blocks=2, block_size=2, num_kv_heads=1, head_dim=1)
        >>> cache.add(0)
        >>> cache.update(0, *(2 * [torch.zeros(2, 1, 1)]))
        >>> cache.hold(0)
        >>> cache.free(0)  # the sequence goes; its block stays, held
        >>> cache.references(0), cache.num_free_blocks
        (1, 1)
        >>> cache.release(0)
        >>> cache.references(0), cache.num_free_blocks
        (0, 2)
        """
        block = self._held_block(block, "block")
        if self._holds[block] == 0:
            raise ValueError(
                f"{type(self).__name__}: block {block} has no hold() to release; its "
                f"{self._refs[block]} readers are sequences, which free() lets go"
            )
        self._holds[block] -= 1
        self._refs[block] -= 1
        if self._refs[block] == 0:
            self._free.append(block)

    def fork(self, parent_id: int, child_id: int) -> None:
        """Start ``child_id`` with every token of ``parent_id``, sharing its blocks.

        Allocates nothing: each of the parent's blocks gains a reader.
        """
        parent_id = self._known(parent_id, "parent_id")
        child_id = self._new(child_id, "child_id")
        table = self._tables[parent_id]
        for block in table:
            self._refs[block] += 1
        self._tables[child_id] = list(table)
        self._lengths[child_id] = self._lengths[parent_id]

    def free(self, seq_id: int) -> None:
        """Drop ``seq_id``; each of its blocks that no other sequence reads returns to the pool."""
        seq_id = self._known(seq_id)
        for block in self._tables.pop(seq_id):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                self._free.append(block)
        del self._lengths[seq_id]

    def _take(self) -> int:
        block = self._free.pop()
        self._refs[block] = 1
        return block

    def update(self, seq_id: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Write ``num_new`` tokens' keys and values at the end of ``seq_id``.

        If the last block is partly filled and shared, it is copied first (copy-on-write);
        then the tokens fill it and as many new blocks as they need. If the pool has too
        few free blocks, a ``ValueError`` says how many it needs, before anything changes.

        Parameters
        ----------
        keys, values : torch.Tensor, shape (num_new, num_kv_heads, head_dim)
            In the cache's dtype.
        """
        owner = type(self).__name__
        seq_id = self._known(seq_id)
        expected = (None, self.num_kv_heads, self.head_dim)
        for name, x in (("keys", keys), ("values", values)):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
            if x.dim() != 3 or tuple(x.shape[1:]) != expected[1:]:
                raise ValueError(
                    f"{owner}: {name} must have shape (num_new, num_kv_heads, head_dim) = "
                    f"(num_new, {self.num_kv_heads}, {self.head_dim}), got {tuple(x.shape)}"
                )
            if x.dtype != self.dtype:
                raise ValueError(
                    f"{owner}: {name} must be {self.dtype}, the cache's dtype, got {x.dtype}"
                )
        if keys.shape[0] != values.shape[0]:
            raise ValueError(
                f"{owner}: keys and values must hold as many tokens, got {keys.shape[0]} "
                f"and {values.shape[0]}"
            )
        num_new = keys.shape[0]
        if num_new == 0:
            return
        table, length = self._tables[seq_id], self._lengths[seq_id]
        room = -length % self.block_size  # free slots in the last block
        copy = room > 0 and self._refs[table[-1]] > 1  # a shared, partly filled last block
        needed = int(copy) + math.ceil(max(0, num_new - room) / self.block_size)
        if needed > len(self._free):  # before anything is written
            raise ValueError(
                f"{owner}: seq_id {seq_id} needs {needed} more blocks, {len(self._free)} free "
                f"(appending {num_new} tokens to {length}, block_size={self.block_size})"
            )
        if copy:
            shared, own = table[-1], self._take()
            self.key_blocks[own] = self.key_blocks[shared]
            self.value_blocks[own] = self.value_blocks[shared]
            self._refs[shared] -= 1
            table[-1] = own
        written = 0
        while written < num_new:
            slot = (length + written) % self.block_size
            if slot == 0:  # the last block is full (or there is none): take a new one
                table.append(self._take())
            n = min(self.block_size - slot, num_new - written)
            block = table[-1]
            self.key_blocks[block, slot : slot + n] = keys[written : written + n]
            self.value_blocks[block, slot : slot + n] = values[written : written + n]
            written += n
        self._lengths[seq_id] = length + num_new


def paged_attention(q: torch.Tensor, cache: PagedKVCache, seq_ids: list[int]) -> torch.Tensor:
    """One decode step for a batch of sequences, over their keys and values in ``cache``.

    Row ``b`` of ``q`` is the new query of ``seq_ids[b]``; it attends over every
    token that sequence holds (append the new token's key and value first). Query head
    ``h`` reads key/value head ``h // (num_heads // num_kv_heads)``, scale
    ``1 / sqrt(head_dim)``. Each sequence's blocks are gathered through its block table
    (one copy of its keys and values; a fused GPU kernel such as vLLM's reads the blocks
    in place instead), and :func:`~attention.attend` does the rest, sequence by sequence,
    so that no padding is computed.

    Parameters
    ----------
    q : torch.Tensor, shape (len(seq_ids), num_heads, 1, head_dim)
        The new queries, one per sequence.
    cache : PagedKVCache
    seq_ids : list of int
        Sequences of any lengths, each holding at least one token.

    Returns
    -------
    torch.Tensor, shape (len(seq_ids), num_heads, 1, head_dim)

    Examples
    --------
    Two sequences of 5 and 2 tokens: each row equals attention over its own tokens.

    >>> import torch
    >>> from attention import attend
    >>> _ = torch.manual_seed(0)
    >>> cache = PagedKVCache(num_blocks=4, block_size=4, num_kv_heads=1, head_dim=8)
    >>> for seq_id, length in ((7, 5), (3, 2)):
    ...     cache.add(seq_id)
    ...     cache.update(seq_id, torch.randn(length, 1, 8), torch.randn(length, 1, 8))
    >>> q = torch.randn(2, 4, 1, 8)  # 4 query heads share the one key/value head
    >>> out = paged_attention(q, cache, [7, 3])
    >>> out.shape
    torch.Size([2, 4, 1, 8])
    >>> k, v = (x.transpose(0, 1)[None] for x in cache.gather(3))  # (1, 1, 2, 8)
    >>> torch.allclose(out[1:], attend(q[1:], k, v), atol=1e-6)
    True
    """
    owner = "paged_attention"
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"{owner}: cache must be a PagedKVCache, got {type(cache).__name__}")
    if isinstance(seq_ids, int) or not hasattr(seq_ids, "__len__"):
        raise TypeError(f"{owner}: seq_ids must be a list of ints, got {type(seq_ids).__name__}")
    seq_ids = [cache._known(s) for s in seq_ids]
    q = _checks.float_tensor(owner, "q", q)
    batch = len(seq_ids)
    if q.dim() != 4 or q.shape[0] != batch or q.shape[2] != 1 or q.shape[3] != cache.head_dim:
        raise ValueError(
            f"{owner}: q must have shape (len(seq_ids), num_heads, 1, head_dim) = "
            f"({batch}, num_heads, 1, {cache.head_dim}), got {tuple(q.shape)}"
        )
    num_heads = q.shape[1]
    if num_heads % cache.num_kv_heads:
        raise ValueError(
            f"{owner}: num_heads={num_heads} (q's dimension 1) must be a multiple of "
            f"the cache's num_kv_heads={cache.num_kv_heads}"
        )
    if q.dtype != cache.dtype:
        raise ValueError(f"{owner}: q must be {cache.dtype}, the cache's dtype, got {q.dtype}")
    lengths = [cache._lengths[s] for s in seq_ids]
    empty = [s for s, n in zip(seq_ids, lengths, strict=True) if n == 0]
    if empty:
        raise ValueError(
            f"{owner}: seq_ids {empty} hold no tokens; append each new token's key and value "
            f"before attending"
        )
    # One sequence at a time: its blocks, gathered in table order, cut at its length.
    # A padded batch would attend over every sequence's padding too (and copy it);
    # this way each step reads and computes only the tokens the sequences hold.
    outputs = []
    for b, (seq_id, length) in enumerate(zip(seq_ids, lengths, strict=True)):
        index = torch.tensor(cache._tables[seq_id], dtype=torch.long)
        shape = (-1, cache.num_kv_heads, cache.head_dim)
        # (blocks, block_size, heads, dim) -> (length, heads, dim) -> (1, heads, length, dim)
        keys = cache.key_blocks.index_select(0, index).view(shape)[:length]
        values = cache.value_blocks.index_select(0, index).view(shape)[:length]
        keys, values = keys.transpose(0, 1)[None], values.transpose(0, 1)[None]
        outputs.append(_attend(q[b : b + 1], keys, values))  # (1, num_heads, 1, dim)
    return torch.cat(outputs)
