"""Selected attention: each query reads the blocks of keys an indexer picks.

Chapter 24's indexer (DeepSeek-V3.2) picks single keys. The newer members of the
family pick *blocks* of keys, which suits the hardware: a block of 128 keys is one
contiguous read. Two ways of scoring a block are taught here, each as
``transformers`` computes it.

* **Block top-k** (MiniMax-M3; the NSA and MoBA line). A small indexer scores every
  key, as chapter 24's does; the scores are max-pooled into blocks of ``block_size``
  keys; each query keeps its ``top_k_blocks`` best blocks, among which its
  ``local_blocks`` nearest always count. :func:`~attention.pool_block_scores`,
  :func:`~attention.select_blocks` and :func:`~attention.block_sparse_attention` are
  the three steps;
  :class:`BlockTopKIndexer`, :class:`BlockTopKAttention` and :class:`BlockTopKCache`
  are MiniMax-M3's layer (``MiniMaxM3VLIndexer`` and ``MiniMaxM3VLAttention``).
* **A token budget over compressed blocks** (Qwen4-Exp's QSA). The indexer's keys are
  averaged, ``compress_ratio`` at a time, into one key per complete block; each query
  scores those, keeps the best ``budget // compress_ratio`` blocks, and always keeps
  the tokens of its last, incomplete block. :class:`QSAIndexer`,
  :class:`QSAAttention` and :class:`QSACache` (``Qwen4ExpTextQSAIndexer`` and
  ``Qwen4ExpTextAttention``).

Queries are aligned to the end of the keys, as in decoding: with ``num_queries``
queries and ``num_keys`` keys, query ``i`` is the token at position
``num_keys - num_queries + i`` and sees the keys up to it.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from attention import _checks
from attention.cache import KeyValueCache, _CacheBase, _check_cache
from attention.gqa import GroupedQueryAttention
from attention.kv_cache import KVCache
from attention.masks import _causal_mask
from attention.norms import RMSNorm
from attention.rope import Rotary
from attention.step import _attend

__all__ = [
    "BlockTopKAttention",
    "BlockTopKCache",
    "BlockTopKIndexer",
    "QSAAttention",
    "QSACache",
    "QSAIndexer",
    "block_sparse_attention",
    "pool_block_scores",
    "select_blocks",
]


def _count(owner: str, name: str, value: object) -> int:
    """``value`` as a count from 0: TypeError if not an integer, ValueError if negative."""
    number = _checks.whole_number(owner, value, f"{name} must be an integer >= 0")
    if number < 0:
        raise ValueError(f"{owner}: {name} must be at least 0, got {number}")
    return number


def _query_positions(num_queries: int, num_keys: int, device: torch.device) -> torch.Tensor:
    """Positions of the queries, the last ``num_queries`` of ``num_keys`` tokens."""
    return torch.arange(num_keys - num_queries, num_keys, device=device)


def pool_block_scores(token_scores: torch.Tensor, block_size: int) -> torch.Tensor:
    """Max-pool each query's key scores into blocks of ``block_size`` consecutive keys.

    Block ``j`` holds keys ``j * block_size`` to ``(j + 1) * block_size - 1``; the last
    block may be short. A block's score is its best key's, so one key the query wants
    is enough to want its block. Scores of ``-inf`` (keys a query may not see) lose to
    every other; a block with no visible key scores ``-inf``.

    Parameters
    ----------
    token_scores : torch.Tensor, shape (..., num_keys)
        Each query's score of each key, ``-inf`` where it may not see the key.
    block_size : int
        Keys per block, at least 1.

    Returns
    -------
    torch.Tensor, shape (..., ceil(num_keys / block_size))

    Examples
    --------
    >>> import torch
    >>> scores = torch.tensor([[0.1, 0.9, 0.3, -1.0, float("-inf")]])
    >>> pool_block_scores(scores, 2)
    tensor([[0.9000, 0.3000,   -inf]])
    """
    owner = "pool_block_scores"
    block_size = _checks.positive_int(owner, "block_size", block_size)
    token_scores = _checks.float_tensor(owner, "token_scores", token_scores)
    if token_scores.dim() < 1 or token_scores.shape[-1] < 1:
        raise ValueError(
            f"{owner}: expected token_scores of shape (..., num_keys) with at least one key, "
            f"got shape {tuple(token_scores.shape)}"
        )
    return _pool(token_scores, block_size)


def _pool(token_scores: torch.Tensor, block_size: int) -> torch.Tensor:
    """:func:`pool_block_scores`, unchecked."""
    num_keys = token_scores.shape[-1]
    num_blocks = -(-num_keys // block_size)
    padded = F.pad(token_scores, (0, num_blocks * block_size - num_keys), value=float("-inf"))
    return padded.view(*token_scores.shape[:-1], num_blocks, block_size).amax(dim=-1)


def select_blocks(
    block_scores: torch.Tensor, top_k_blocks: int, local_blocks: int, block_size: int
) -> torch.Tensor:
    """Each query's chosen blocks: its ``local_blocks`` nearest, then the best-scored.

    The query at position ``p`` sits in block ``p // block_size``; that block and the
    ``local_blocks - 1`` before it are always kept (as if scored ``+inf``, so they take
    places among the ``top_k_blocks``), and the best-scored other blocks fill the
    rest. A block scored ``-inf`` (no key the query may see) is never chosen.

    Parameters
    ----------
    block_scores : torch.Tensor, shape (..., num_queries, num_blocks)
        :func:`pool_block_scores`' output; the queries are the last tokens of
        ``num_keys`` keys, ``num_blocks = ceil(num_keys / block_size)``.
    top_k_blocks : int
        Blocks each query reads, local ones included (``index_topk_blocks``).
    local_blocks : int
        Blocks always kept, the query's own and those just before (``index_local_blocks``),
        from 0 to ``top_k_blocks``.
    block_size : int
        Keys per block.

    Returns
    -------
    torch.Tensor of int64, shape (..., num_queries, min(top_k_blocks, num_blocks))
        The chosen blocks' indices, left-packed, ``-1`` in the places left over:
        the layout of ``MiniMaxM3VLIndexer``'s output and of block-sparse kernels.

    Examples
    --------
    >>> import torch
    >>> scores = torch.tensor([[5.0, 1.0, 3.0, 2.0]])  # one query, in block 3
    >>> select_blocks(scores, top_k_blocks=2, local_blocks=1, block_size=4)
    tensor([[3, 0]])
    """
    owner = "select_blocks"
    block_scores = _checks.float_tensor(owner, "block_scores", block_scores)
    top_k_blocks = _checks.positive_int(owner, "top_k_blocks", top_k_blocks)
    local_blocks = _count(owner, "local_blocks", local_blocks)
    block_size = _checks.positive_int(owner, "block_size", block_size)
    if local_blocks > top_k_blocks:
        raise ValueError(
            f"{owner}: expected local_blocks <= top_k_blocks, since the local blocks take "
            f"places among the top k, got local_blocks={local_blocks} and "
            f"top_k_blocks={top_k_blocks}"
        )
    if block_scores.dim() < 2:
        raise ValueError(
            f"{owner}: expected block_scores of shape (..., num_queries, num_blocks), got "
            f"shape {tuple(block_scores.shape)}"
        )
    return _select(block_scores, top_k_blocks, local_blocks, block_size, None)


def _select(
    block_scores: torch.Tensor,
    top_k_blocks: int,
    local_blocks: int,
    block_size: int,
    num_keys: int | None,
) -> torch.Tensor:
    """:func:`select_blocks`, unchecked; ``num_keys`` defaults to the blocks' span."""
    num_queries, num_blocks = block_scores.shape[-2:]
    if num_keys is None:  # the queries end in the last block: it is theirs
        num_keys = num_blocks * block_size
    own = _query_positions(num_queries, num_keys, block_scores.device) // block_size
    scores = block_scores.clone()
    if local_blocks:
        # The query's block and those just before: +inf wins a place, whatever the key scores
        local = (own[:, None] - torch.arange(local_blocks, device=own.device)).clamp(min=0)
        local = local.expand(*scores.shape[:-1], local_blocks)
        scores.scatter_(-1, local, float("inf"))
    best, indices = scores.topk(min(top_k_blocks, num_blocks), dim=-1)
    return indices.masked_fill(best == float("-inf"), -1)


def _block_mask(block_indices: torch.Tensor, block_size: int, num_keys: int) -> torch.Tensor:
    """``True`` at the visible keys of each query's chosen blocks, ``(..., q, num_keys)``."""
    num_queries = block_indices.shape[-2]
    num_blocks = -(-num_keys // block_size)
    # -1 places land in a column past the last block, then dropped
    safe = block_indices.masked_fill(block_indices < 0, num_blocks)
    chosen = torch.zeros(
        (*block_indices.shape[:-1], num_blocks + 1), dtype=torch.bool, device=safe.device
    )
    chosen.scatter_(-1, safe, True)
    keys = chosen[..., :num_blocks].repeat_interleave(block_size, dim=-1)[..., :num_keys]
    return keys & _causal_mask(num_queries, num_keys, None, safe.device)


def block_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_indices: torch.Tensor,
    block_size: int,
    scale: float | None = None,
) -> torch.Tensor:
    """Causal attention in which each query reads only the keys of its chosen blocks.

    Each key/value head has its own choice (MiniMax-M3 has one indexer head per
    key/value head), shared by the query heads of its group. Within a chosen block a
    query still sees only the keys up to itself. With every block chosen this is
    causal attention.

    Parameters
    ----------
    q : torch.Tensor, shape (batch, heads, num_queries, dim)
    k : torch.Tensor, shape (batch, heads_kv, num_keys, dim)
    v : torch.Tensor, shape (batch, heads_kv, num_keys, dim_v)
        ``heads_kv`` divides ``heads``; the queries are the last ``num_queries`` tokens.
    block_indices : torch.Tensor of int, shape (batch, heads_kv, num_queries, picks)
        Each query's blocks, ``-1`` for none (:func:`select_blocks`' output).
    block_size : int
        Keys per block.
    scale : float, optional
        The factor on the scores; default ``1 / sqrt(dim)``.

    Returns
    -------
    torch.Tensor, shape (batch, heads, num_queries, dim_v)

    Examples
    --------
    >>> import torch
    >>> from attention import attend
    >>> _ = torch.manual_seed(0)
    >>> q, k, v = torch.randn(1, 2, 6, 4), torch.randn(1, 1, 6, 4), torch.randn(1, 1, 6, 4)
    >>> every = torch.tensor([0, 1, 2]).expand(1, 1, 6, 3)  # all three blocks of 2
    >>> out = block_sparse_attention(q, k, v, every, block_size=2)
    >>> torch.allclose(out, attend(q, k, v, causal=True), atol=1e-6)
    True
    """
    owner = "block_sparse_attention"
    block_size = _checks.positive_int(owner, "block_size", block_size)
    q, k, v = _checks.attention_inputs(
        owner,
        q,
        k,
        v,
        "expected q (batch, heads, num_queries, dim), k (batch, heads_kv, num_keys, dim) and "
        "v (batch, heads_kv, num_keys, dim_v), with heads_kv dividing heads",
        _grouped,
    )
    batch, _, num_queries, _ = q.shape
    heads_kv, num_keys = k.shape[1], k.shape[2]
    if num_keys < num_queries:
        raise ValueError(
            f"{owner}: the queries are the last tokens of the keys, so num_keys must be at "
            f"least num_queries, got {num_queries} queries and {num_keys} keys"
        )
    if not isinstance(block_indices, torch.Tensor) or block_indices.is_floating_point():
        raise TypeError(
            f"{owner}: expected block_indices to be an integer tensor, got "
            f"{getattr(block_indices, 'dtype', type(block_indices).__name__)}"
        )
    num_blocks = -(-num_keys // block_size)
    if block_indices.dim() != 4 or tuple(block_indices.shape[:3]) != (
        batch,
        heads_kv,
        num_queries,
    ):
        raise ValueError(
            f"{owner}: expected block_indices of shape (batch, heads_kv, num_queries, picks) "
            f"= ({batch}, {heads_kv}, {num_queries}, picks), got {tuple(block_indices.shape)}"
        )
    if bool(((block_indices < -1) | (block_indices >= num_blocks)).any()):
        raise ValueError(
            f"{owner}: expected block indices from 0 to {num_blocks - 1} ({num_keys} keys in "
            f"blocks of {block_size}) or -1, got values from {int(block_indices.min())} to "
            f"{int(block_indices.max())}"
        )
    allowed = _block_mask(block_indices, block_size, num_keys)
    return _attend_blocks(q, k, v, allowed, scale)


def _grouped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Shapes of grouped heads: same batch, key and value lengths, dims, heads_kv | heads."""
    return (
        q.dim() == k.dim() == v.dim() == 4
        and q.shape[0] == k.shape[0] == v.shape[0]
        and k.shape[1] == v.shape[1]
        and q.shape[1] % k.shape[1] == 0
        and k.shape[2] == v.shape[2]
        and q.shape[3] == k.shape[3]
    )


def _attend_blocks(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor,
    scale: float | None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Attention under a per-key/value-head mask ``(batch, heads_kv, q, k)``, unchecked."""
    group = q.shape[1] // k.shape[1]
    return _attend(q, k, v, allowed.repeat_interleave(group, dim=1), scale=scale, dropout=dropout)


def _index_rotary(owner: str, rotary: object, head_dim: int) -> Rotary | None:
    """An indexer's RoPE: turns the leading ``rotary.rotary_dim`` numbers of its heads."""
    if rotary is None:
        return None
    if not isinstance(rotary, Rotary):
        raise TypeError(f"{owner}: rotary must be a Rotary or None, got {type(rotary).__name__}")
    if rotary.interleaved or rotary.rotary_dim > head_dim:
        raise ValueError(
            f"{owner}: expected a half-split rotary over at most head_dim={head_dim} numbers, "
            f"got {rotary!r}"
        )
    return rotary


def _norm_eps(norm: nn.Module | None) -> float:
    """The indexer's norms share the model's epsilon: its QK-norm's, or 1e-6."""
    return norm.eps if isinstance(norm, RMSNorm) else 1e-6


def _rotate(rotary: Rotary | None, x: torch.Tensor, start: int) -> torch.Tensor:
    return x if rotary is None else rotary(x, start)


class _WithIndexerKeys(_CacheBase):
    """Keys and values, as a :class:`~attention.KVCache` holds them, and one indexer key
    per token beside them (``indexer``): what the two selected layers keep."""

    window: int | None = None  # every key stays a candidate: nothing rolls
    chunk: int | None = None

    def __init__(self) -> None:
        super().__init__()
        self._key_values = KVCache()
        self.indexer = KVCache()

    @property
    def keys(self) -> torch.Tensor | None:
        """The held keys, ``(batch, num_kv_heads, num_cached, head_dim)``, rotated."""
        return self._key_values.keys

    @property
    def values(self) -> torch.Tensor | None:
        """The held values, ``(batch, num_kv_heads, num_cached, head_dim)``."""
        return self._key_values.values

    @property
    def index_keys(self) -> torch.Tensor | None:
        """The indexer's keys, ``(batch, num_cached, index_head_dim)``."""
        return self.indexer.keys

    def __len__(self) -> int:
        return len(self._key_values)

    @property
    def nbytes(self) -> int:
        """Bytes held by the keys, the values and the indexer's keys."""
        return self._key_values.nbytes + self.indexer.nbytes

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' keys and values (the layer's indexer appends its own
        keys to ``indexer`` first); return every held one, as
        :meth:`~attention.KVCache.update` does."""
        keys, values = self._key_values.update(keys, values)
        self._seen = self._key_values.seen_tokens
        return keys, values

    def _forget(self, length: int) -> None:  # crop, in both caches
        self._key_values.crop(length)
        self.indexer.crop(length)

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return (
            f"{type(self).__name__}(tokens={len(self)}, seen_tokens={self._seen}, "
            f"keys shape={shape}, nbytes={self.nbytes})"
        )


class BlockTopKCache(_WithIndexerKeys):
    """What :class:`BlockTopKAttention` keeps per token: a key and a value per key/value
    head, and the block indexer's key, ``index_head_dim`` numbers, normed and rotated
    (as ``MiniMaxM3VLSparseCacheLayer`` keeps ``idx_keys``).

    Attributes
    ----------
    keys, values : torch.Tensor or None
        ``(batch, num_kv_heads, num_cached, head_dim)`` each.
    indexer : KVCache
        The indexer's keys ``(batch, num_cached, index_head_dim)`` (``index_keys``).

    Examples
    --------
    >>> import torch
    >>> from attention import BlockTopKAttention
    >>> layer = BlockTopKAttention(8, 8, 16, num_heads=2, num_kv_heads=1,
    ...     index_head_dim=4, block_size=2, top_k_blocks=2)
    >>> cache = BlockTopKCache()
    >>> _ = layer(torch.randn(1, 5, 8), cache=cache)
    >>> cache.keys.shape, cache.index_keys.shape, cache.nbytes  # (2 * 4 + 4) * 4 * 5
    (torch.Size([1, 1, 5, 4]), torch.Size([1, 5, 4]), 240)
    """

    _holds = "a layer's keys and values and its block indexer's keys"
    _layers = ("BlockTopKAttention",)


class BlockTopKIndexer(nn.Module):
    """MiniMax-M3's block indexer: which blocks of keys each query should read.

    Each of ``num_heads`` indexer heads scores every key the query may see with a plain
    dot product, ``q[s, h] . k[t]`` (no scale, no ReLU, no head weights: the scores are
    only ranked). The query ``q[s, h]`` comes from the input through ``W_query`` and an
    RMSNorm per head; the key ``k[t]``, one per token shared by the heads, through
    ``W_key`` and an RMSNorm. Both are rotated by ``rotary`` on their leading numbers.
    The scores are max-pooled into blocks (:func:`pool_block_scores`) and each head
    picks its blocks (:func:`select_blocks`). As ``MiniMaxM3VLIndexer`` computes it,
    whose scores are float32 (this module keeps the input's dtype).

    Parameters
    ----------
    d_in : int
        Size of each input embedding (``hidden_size``).
    num_heads : int
        Indexer heads (``index_n_heads``): one per key/value head of the attention.
    head_dim : int
        Size of each indexer query and key (``index_head_dim``).
    block_size, top_k_blocks, local_blocks : int
        Keys per block, blocks read, and local blocks always read (``index_block_size``,
        ``index_topk_blocks``, ``index_local_blocks``: 128, 16 and 1 by default).
    rotary : Rotary, optional
        The RoPE of the leading ``rotary.rotary_dim`` numbers (the attention's own);
        none: no rotation.
    eps : float
        The norms' epsilon.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> indexer = BlockTopKIndexer(16, num_heads=2, head_dim=8, block_size=2,
    ...                            top_k_blocks=2, local_blocks=1)
    >>> blocks = indexer(torch.randn(1, 7, 16))
    >>> blocks.shape  # (batch, num_heads, num_queries, picks)
    torch.Size([1, 2, 7, 2])
    >>> blocks[0, 0, :2].tolist()  # the first block has no other block to pick
    [[0, -1], [0, -1]]
    """

    def __init__(
        self,
        d_in: int,
        *,
        num_heads: int,
        head_dim: int,
        block_size: int,
        top_k_blocks: int,
        local_blocks: int = 1,
        rotary: Rotary | None = None,
        eps: float = 1e-6,
    ):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.num_heads, self.head_dim = _checks.sizes(
            owner, d_in=d_in, num_heads=num_heads, head_dim=head_dim
        )
        self.block_size, self.top_k_blocks = _checks.sizes(
            owner, block_size=block_size, top_k_blocks=top_k_blocks
        )
        self.local_blocks = _count(owner, "local_blocks", local_blocks)
        if self.local_blocks > self.top_k_blocks:
            raise ValueError(
                f"{owner}: expected local_blocks <= top_k_blocks, got {local_blocks} and "
                f"{top_k_blocks}"
            )
        self.rotary = _index_rotary(owner, rotary, head_dim)
        eps = _checks.positive_number(owner, "eps", eps)
        self.W_query = nn.Linear(d_in, num_heads * head_dim, bias=False)
        self.W_key = nn.Linear(d_in, head_dim, bias=False)
        self.q_norm = RMSNorm(head_dim, eps=eps)
        self.k_norm = RMSNorm(head_dim, eps=eps)

    def scores(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """Every head's score of every key, ``-inf`` where the query may not see it.

        Parameters
        ----------
        x : torch.Tensor, shape (batch, num_tokens, d_in)
        cache : KVCache, optional
            The indexer's keys of earlier tokens; the new ones are appended.

        Returns
        -------
        torch.Tensor, shape (batch, num_heads, num_tokens, num_keys)
        """
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(
                f"{type(self).__name__}: expected a KVCache holding the indexer's keys or "
                f"None, got {type(cache).__name__}"
            )
        x = _checks.module_input(self, x, d_in=self.d_in)
        batch, num_tokens, _ = x.shape
        start = 0 if cache is None else cache.seen_tokens
        queries = self.W_query(x).view(batch, num_tokens, self.num_heads, self.head_dim)
        queries = _rotate(self.rotary, self.q_norm(queries).transpose(1, 2), start)
        keys = _rotate(self.rotary, self.k_norm(self.W_key(x)), start)  # (b, n, head_dim)
        if cache is not None:
            keys, _ = cache.update(keys, keys[..., :0])
        scores = queries @ keys[:, None].transpose(-2, -1)  # (b, H, n, num_keys)
        visible = _causal_mask(num_tokens, keys.shape[1], None, x.device)
        return scores.masked_fill(~visible, float("-inf"))

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """The blocks each head picks for each new token.

        Returns
        -------
        torch.Tensor of int64, shape (batch, num_heads, num_tokens, picks)
            ``picks = min(top_k_blocks, ceil(num_keys / block_size))``; ``-1`` where a
            query has fewer blocks to pick.
        """
        scores = self.scores(x, cache)
        num_keys = scores.shape[-1]
        blocks = _pool(scores, self.block_size)
        return _select(blocks, self.top_k_blocks, self.local_blocks, self.block_size, num_keys)


class BlockTopKAttention(GroupedQueryAttention):
    """MiniMax-M3's sparse layer: grouped-query attention over the blocks an indexer picks.

    A :class:`~attention.GroupedQueryAttention` (its QK-norm and partial RoPE are
    parts, as :func:`~attention.models.layer_for` gives them) with a
    :class:`BlockTopKIndexer` (``indexer``). Indexer head ``h`` chooses the blocks of
    key/value head ``h``'s group; each query reads the keys of its chosen blocks only,
    up to itself. As ``MiniMaxM3VLAttention`` computes it on its
    ``"minimax_m3_sparse"`` layers. The cache is a :class:`BlockTopKCache`.

    Parameters
    ----------
    d_in, d_out, context_length
        As in :class:`~attention.GroupedQueryAttention`.
    index_head_dim, block_size, top_k_blocks, local_blocks : int
        The indexer's sizes (:class:`BlockTopKIndexer`); it has ``num_kv_heads`` heads
        and rotates with the attention's ``rotary``.
    **kwargs
        Every keyword of :class:`~attention.GroupedQueryAttention` but ``window`` and
        ``chunk``.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> layer = BlockTopKAttention(16, 16, context_length=12, num_heads=4, num_kv_heads=2,
    ...     index_head_dim=8, block_size=2, top_k_blocks=2, local_blocks=1)
    >>> x = torch.randn(1, 12, 16)
    >>> cache = BlockTopKCache()
    >>> steps = [layer(x[:, :9], cache=cache)] + [layer(x[:, i:i + 1], cache=cache)
    ...                                             for i in range(9, 12)]
    >>> torch.allclose(torch.cat(steps, dim=1), layer(x), atol=1e-5)
    True
    >>> (layer.attention_weights(x)[0, 0, -1] > 0).sum().item()  # 2 blocks of 2 keys
    4
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        *,
        index_head_dim: int,
        block_size: int,
        top_k_blocks: int,
        local_blocks: int = 1,
        **kwargs,
    ):
        owner = type(self).__name__
        for local in ("window", "chunk"):
            if kwargs.get(local) is not None:
                raise ValueError(f"{owner}: every key is a candidate, so no {local}")
        super().__init__(d_in, d_out, context_length, **kwargs)
        index_rotary = None
        if self.rotary is not None:
            index_rotary = Rotary(self.rotary.rotary_dim, self.rotary.base, self.rotary.scaling)
        self.indexer = BlockTopKIndexer(
            d_in,
            num_heads=self.num_kv_heads,
            head_dim=index_head_dim,
            block_size=block_size,
            top_k_blocks=top_k_blocks,
            local_blocks=local_blocks,
            rotary=index_rotary,
            eps=_norm_eps(self.q_norm),
        )

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes the :class:`BlockTopKCache` grows by per token: keys, values, index key."""
        size = self.W_key.weight.element_size()
        return super().cache_bytes_per_token + self.indexer.head_dim * size

    def chosen(self, x: torch.Tensor, cache: BlockTopKCache | None = None) -> torch.Tensor:
        """``True`` at the keys each key/value head's queries read, ``(b, kv, n, keys)``."""
        blocks = self.indexer(x, None if cache is None else cache.indexer)
        num_keys = x.shape[1] if cache is None else cache.indexer.seen_tokens  # new ones in
        return _block_mask(blocks, self.indexer.block_size, num_keys)

    def forward(
        self,
        x: torch.Tensor,
        cache: KeyValueCache | None = None,
        allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend over the chosen blocks; with ``cache``, append the new tokens.

        ``allowed`` is combined with the choice, as in
        :meth:`~attention.GroupedQueryAttention.forward`.
        """
        _check_cache(self, cache, BlockTopKCache, "a BlockTopKCache (it holds indexer keys)")
        assert cache is None or isinstance(cache, BlockTopKCache)
        return super().forward(x, cache=cache, allowed=self._allowed(x, cache, allowed))

    def _allowed(
        self, x: torch.Tensor, cache: BlockTopKCache | None, allowed: torch.Tensor | None
    ) -> torch.Tensor:
        chosen = self.chosen(x, cache)  # (b, kv, n, keys)
        group = self.num_heads // self.num_kv_heads
        chosen = chosen.repeat_interleave(group, dim=1)  # each query head, its group's
        return chosen if allowed is None else chosen & allowed

    def attention_weights(
        self, x: torch.Tensor, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Each head's weights over a full pass, zero outside its chosen blocks."""
        return super().attention_weights(x, self._allowed(x, None, allowed))


class QSACache(_WithIndexerKeys):
    """What :class:`QSAAttention` keeps per token: a key and a value per key/value head,
    and QSA's indexer key of ``index_head_dim`` numbers *before* it is pooled, normed or
    rotated, as ``transformers``' ``DynamicIndexedLayer`` keeps it: each query pools
    the complete blocks again.

    Attributes
    ----------
    keys, values : torch.Tensor or None
        ``(batch, num_kv_heads, num_cached, head_dim)`` each.
    indexer : KVCache
        The raw indexer keys ``(batch, num_cached, index_head_dim)`` (``index_keys``).
    """

    _holds = "a layer's keys and values and QSA's raw indexer keys"
    _layers = ("QSAAttention",)


class QSAIndexer(nn.Module):
    """Qwen4-Exp's QSA indexer: a token budget spent on compressed blocks of keys.

    Each token has one raw indexer key, and each query ``num_heads`` query heads, from
    one projection, ``W_qk``. Every ``compress_ratio`` consecutive raw keys make a
    *complete block*, whose key is their mean, normed (``k_norm``) and rotated at the
    block's first position. A query, its heads normed (``q_norm``) and rotated at its
    own position, scores each complete block it sees,
    ``sum_h relu(q[s, h] . K[j]) / sqrt(head_dim)``, and keeps the
    ``budget // compress_ratio`` best; the tokens after its last complete block, fewer
    than ``compress_ratio``, are always kept. So a query reads at most
    ``budget + compress_ratio - 1`` tokens. The ReLU makes ties likely when few heads
    score (a block every head scores below zero scores 0); which of tied blocks wins
    is unspecified, as in ``torch.topk``. As ``Qwen4ExpTextQSAIndexer`` computes it
    (which scores in float32; this module keeps the input's dtype).

    Parameters
    ----------
    d_in : int
        Size of each input embedding.
    num_heads, head_dim : int
        The indexer's query heads and their size (``indexer_n_heads``,
        ``indexer_head_dim``); one key head.
    budget, compress_ratio : int
        Tokens read from complete blocks, and tokens per block (``indexer_budget``,
        ``indexer_compress_ratio``); ``compress_ratio`` divides ``budget``.
    rotary : Rotary, optional
        The RoPE of the leading ``rotary.rotary_dim`` numbers; none: no rotation.
    eps : float
        The norms' epsilon.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> qsa = QSAIndexer(16, num_heads=2, head_dim=8, budget=4, compress_ratio=2)
    >>> chosen = qsa(torch.randn(1, 9, 16))  # (batch, num_queries, num_keys)
    >>> chosen.sum(-1).tolist()  # tokens read: all, until 2 blocks + the tail exceed 4
    [[1, 2, 3, 4, 5, 4, 5, 4, 5]]
    """

    def __init__(
        self,
        d_in: int,
        *,
        num_heads: int,
        head_dim: int,
        budget: int,
        compress_ratio: int,
        rotary: Rotary | None = None,
        eps: float = 1e-6,
    ):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.num_heads, self.head_dim = _checks.sizes(
            owner, d_in=d_in, num_heads=num_heads, head_dim=head_dim
        )
        self.budget, self.compress_ratio = _checks.sizes(
            owner, budget=budget, compress_ratio=compress_ratio
        )
        if budget % compress_ratio:
            raise ValueError(
                f"{owner}: expected compress_ratio to divide budget (whole blocks are kept), "
                f"got budget={budget} and compress_ratio={compress_ratio}"
            )
        self.rotary = _index_rotary(owner, rotary, head_dim)
        eps = _checks.positive_number(owner, "eps", eps)
        # One projection for the queries and the key, as the released weights store it
        # (index_qk_proj): the queries' rows, then the key's.
        self.W_qk = nn.Linear(d_in, (num_heads + 1) * head_dim, bias=False)
        self.q_norm = RMSNorm(head_dim, eps=eps)
        self.k_norm = RMSNorm(head_dim, eps=eps)

    @property
    def top_k_blocks(self) -> int:
        """The complete blocks each query keeps, ``budget // compress_ratio``."""
        return self.budget // self.compress_ratio

    def block_scores(
        self, x: torch.Tensor, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, int]:
        """Each query's score of every complete block, ``-inf`` for those it cannot see.

        Returns
        -------
        (scores, num_keys) : torch.Tensor, int
            Scores ``(batch, num_tokens, num_keys // compress_ratio)``; a block is
            visible once its last token is at or before the query.
        """
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(
                f"{type(self).__name__}: expected a KVCache holding the raw indexer keys or "
                f"None, got {type(cache).__name__}"
            )
        x = _checks.module_input(self, x, d_in=self.d_in)
        batch, num_tokens, _ = x.shape
        start = 0 if cache is None else cache.seen_tokens
        queries, raw = self.W_qk(x).split((self.num_heads * self.head_dim, self.head_dim), -1)
        queries = queries.reshape(batch, num_tokens, self.num_heads, self.head_dim)
        queries = _rotate(self.rotary, self.q_norm(queries).transpose(1, 2), start)
        # raw: (b, n, head_dim), one key per token, pooled per block below
        if cache is not None:
            raw, _ = cache.update(raw, raw[..., :0])
        num_keys, ratio = raw.shape[1], self.compress_ratio
        num_blocks = num_keys // ratio
        pooled = raw[:, : num_blocks * ratio].reshape(batch, num_blocks, ratio, -1).mean(dim=2)
        # each block's key rotates at its first token's position: 0, ratio, 2 * ratio ...
        block_keys = self.k_norm(pooled)
        if self.rotary is not None and num_blocks:
            cos, sin = self.rotary.cos_sin(0, num_keys, block_keys)
            block_keys = _rotate_rows(
                block_keys, cos[::ratio][:num_blocks], sin[::ratio][:num_blocks]
            )
        # (b, H, n, blocks) -> (b, n, blocks)
        dots = F.relu(queries @ block_keys[:, None].transpose(-2, -1)).sum(dim=1)
        scores = dots / math.sqrt(self.head_dim)
        positions = _query_positions(num_tokens, num_keys, x.device)
        block_ends = torch.arange(1, num_blocks + 1, device=x.device) * ratio - 1
        visible = block_ends[None, :] <= positions[:, None]  # (n, blocks)
        return scores.masked_fill(~visible, float("-inf")), num_keys

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """``True`` at the tokens each new query reads: chosen blocks and its tail.

        Returns
        -------
        torch.Tensor of bool, shape (batch, num_tokens, num_keys)
        """
        scores, num_keys = self.block_scores(x, cache)
        num_tokens, num_blocks = scores.shape[-2:]
        ratio = self.compress_ratio
        positions = _query_positions(num_tokens, num_keys, x.device)
        keys = torch.arange(num_keys, device=x.device)
        # the tail: tokens after the query's last complete block, up to the query
        complete = (positions + 1) // ratio * ratio  # first token past the complete blocks
        chosen = (keys[None, :] >= complete[:, None]) & (keys[None, :] <= positions[:, None])
        chosen = chosen.expand(scores.shape[0], -1, -1).clone()
        if num_blocks:
            best, blocks = scores.topk(min(self.top_k_blocks, num_blocks), dim=-1)
            picked = torch.zeros_like(scores, dtype=torch.bool)
            picked.scatter_(-1, blocks, best > float("-inf"))
            in_blocks = picked.repeat_interleave(ratio, dim=-1)  # (b, n, blocks * ratio)
            chosen[..., : num_blocks * ratio] |= in_blocks
        return chosen


def _rotate_rows(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each row of ``x`` ``(..., rows, dim)`` by its own angles ``(rows, r / 2)``."""
    rotary_dim = 2 * cos.shape[-1]
    head, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    first, second = head[..., : rotary_dim // 2], head[..., rotary_dim // 2 :]
    turned = torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
    return torch.cat((turned, rest), dim=-1)


class QSAAttention(GroupedQueryAttention):
    """Qwen4-Exp's attention layer: gated grouped-query attention over QSA's tokens.

    A :class:`~attention.GroupedQueryAttention` (QK-norm, partial RoPE and the output
    gate are parts) with a :class:`QSAIndexer` (``indexer``); every query head reads
    the tokens the indexer chose for the query. As ``Qwen4ExpTextAttention`` computes
    it. The cache is a :class:`QSACache`.

    Parameters
    ----------
    d_in, d_out, context_length
        As in :class:`~attention.GroupedQueryAttention`.
    index_num_heads, index_head_dim, budget, compress_ratio : int
        The indexer's sizes (:class:`QSAIndexer`); it rotates with the attention's
        ``rotary``, whose rotated numbers must fit in ``index_head_dim``.
    **kwargs
        Every keyword of :class:`~attention.GroupedQueryAttention` but ``window`` and
        ``chunk``.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> layer = QSAAttention(16, 16, context_length=12, num_heads=4, num_kv_heads=2,
    ...     index_num_heads=4, index_head_dim=8, budget=4, compress_ratio=2)
    >>> x = torch.randn(1, 12, 16)
    >>> cache = QSACache()
    >>> steps = [layer(x[:, :9], cache=cache)] + [layer(x[:, i:i + 1], cache=cache)
    ...                                             for i in range(9, 12)]
    >>> torch.allclose(torch.cat(steps, dim=1), layer(x), atol=1e-5)
    True
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        *,
        index_num_heads: int,
        index_head_dim: int,
        budget: int,
        compress_ratio: int,
        **kwargs,
    ):
        owner = type(self).__name__
        for local in ("window", "chunk"):
            if kwargs.get(local) is not None:
                raise ValueError(f"{owner}: every key is a candidate, so no {local}")
        super().__init__(d_in, d_out, context_length, **kwargs)
        index_rotary = None
        if self.rotary is not None:
            index_rotary = Rotary(self.rotary.rotary_dim, self.rotary.base, self.rotary.scaling)
        self.indexer = QSAIndexer(
            d_in,
            num_heads=index_num_heads,
            head_dim=index_head_dim,
            budget=budget,
            compress_ratio=compress_ratio,
            rotary=index_rotary,
            eps=_norm_eps(self.q_norm),
        )

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes the :class:`QSACache` grows by per token: keys, values, raw index key."""
        size = self.W_key.weight.element_size()
        return super().cache_bytes_per_token + self.indexer.head_dim * size

    def forward(
        self,
        x: torch.Tensor,
        cache: KeyValueCache | None = None,
        allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend over the tokens QSA chose; with ``cache``, append the new tokens."""
        _check_cache(self, cache, QSACache, "a QSACache (it holds the raw indexer keys)")
        assert cache is None or isinstance(cache, QSACache)
        return super().forward(x, cache=cache, allowed=self._allowed(x, cache, allowed))

    def _allowed(
        self, x: torch.Tensor, cache: QSACache | None, allowed: torch.Tensor | None
    ) -> torch.Tensor:
        chosen = self.indexer(x, None if cache is None else cache.indexer)[:, None]
        return chosen if allowed is None else chosen & allowed

    def attention_weights(
        self, x: torch.Tensor, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Each head's weights over a full pass, zero outside the chosen tokens."""
        return super().attention_weights(x, self._allowed(x, None, allowed))
