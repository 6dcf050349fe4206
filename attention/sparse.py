"""Sparse attention: each query attends to the few keys an indexer picks (DeepSeek-V3.2).

DeepSeek Sparse Attention (DSA) keeps MLA's softmax attention but lets each query read
only ``top_k`` of the keys it may see (2048 in DeepSeek-V3.2). Which ones is decided by
a small *lightning indexer*: a few cheap heads score every visible key,

``I[s, t] = sum_h w[s, h] * relu(q[s, h] . k[t] / sqrt(index_head_dim))``,

with one weight per query and head ``w[s, h]`` computed from the query token, and the
``top_k`` highest scores win. The indexer still looks at every key, so each new token
costs O(N) indexer work, but with few, small heads; the attention itself costs O(top_k).

* :func:`~attention.topk_sparse_attention`: the attention, given the scores.
* :class:`~attention.LightningIndexer`: the scores, as ``transformers``'
  ``DeepseekV32Indexer`` computes them, ``-inf`` where a query may not see a key.
* :class:`~attention.SparseLatentAttention` and :class:`~attention.SparseLatentCache`:
  the two together in DeepSeek-V3.2's layer, MLA over the chosen keys, as
  ``DeepseekV32Attention``.
* :func:`~attention.indexer_kl_loss`: how the indexer is trained, to match the
  attention's weights summed over its heads.

Both align the queries to the end of the keys, as in decoding: with ``num_queries``
queries and ``num_keys`` keys, query ``i`` is the token at position
``num_keys - num_queries + i`` and sees the keys up to it.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from attention import _checks
from attention.cache import _check_cache
from attention.kv_cache import KVCache
from attention.latent import LatentCache, MultiHeadLatentAttention, _rotary
from attention.masks import _causal_mask
from attention.rope import Rotary
from attention.scaled import _scaled_dot_product_weights
from attention.step import _attend, _grouped_heads

__all__ = [
    "LightningIndexer",
    "SparseLatentAttention",
    "SparseLatentCache",
    "indexer_kl_loss",
    "topk_sparse_attention",
]


def topk_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    index_scores: torch.Tensor,
    top_k: int,
) -> torch.Tensor:
    """Causal softmax attention in which each query reads only its ``top_k`` best-scored keys.

    Query ``i`` may see keys ``0 ... num_keys - num_queries + i`` (the queries are the last
    tokens, as in decoding). Among those it attends to the ``top_k`` with the highest
    ``index_scores``, or to all of them when it sees fewer, with the weights of
    ``softmax(q . k / sqrt(dim))`` renormalised over the chosen keys. A score of ``-inf``
    is never picked, even when that leaves a query fewer than ``top_k`` keys; a query left
    with no key at all gets zeros. Which of several tied keys is picked is unspecified.
    With ``top_k >= num_keys`` this is plain causal attention.

    Both ways below run :func:`~attention.attend`. For few queries (``num_queries *
    top_k <= num_keys``, as in decoding), each query's chosen keys and values are
    gathered and attended to alone, so the attention costs O(top_k) per query, not
    O(num_keys), as DSA's kernels do. For more queries, the choice is a mask passed to
    :func:`~attention.attend` as ``allowed``, which costs as much as dense attention.

    Parameters
    ----------
    q : torch.Tensor, shape (batch, heads, num_queries, dim)
    k : torch.Tensor, shape (batch, heads_kv, num_keys, dim)
    v : torch.Tensor, shape (batch, heads_kv, num_keys, dim_v)
        ``heads_kv`` divides ``heads``; query head ``h`` reads key/value head
        ``h // (heads // heads_kv)``, as in grouped-query attention. ``num_keys`` is at
        least ``num_queries``.
    index_scores : torch.Tensor, shape (batch, num_queries, num_keys)
        How much each query wants each key (higher: picked first), shared by the heads;
        only the order matters. Scores of keys a query may not see are ignored.
    top_k : int
        How many keys each query attends to, at least 1.

    Returns
    -------
    torch.Tensor, shape (batch, heads, num_queries, dim_v)
        Each query's attention over its chosen keys; zeros for a query with none.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> q, k, v = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)
    >>> scores = torch.randn(1, 6, 6)
    >>> out = topk_sparse_attention(q, k, v, scores, top_k=2)
    >>> out.shape
    torch.Size([1, 4, 6, 8])

    With as many picks as keys, every visible key is read: causal attention.

    >>> from attention import attend
    >>> full = topk_sparse_attention(q, k, v, scores, top_k=6)
    >>> torch.allclose(full, attend(q, k, v, causal=True), atol=1e-6)
    True

    The first two queries see at most two keys, so ``top_k=2`` leaves them unchanged:

    >>> torch.allclose(out[:, :, :2], full[:, :, :2], atol=1e-6)
    True
    """
    owner = "topk_sparse_attention"
    top_k = _checks.positive_int(owner, "top_k", top_k)
    _check_qkv(owner, q, k, v)
    batch, _, num_queries, _ = q.shape
    num_keys = k.shape[2]
    _checks.float_tensor(owner, "index_scores", index_scores)
    expected = (batch, num_queries, num_keys)
    if tuple(index_scores.shape) != expected:
        raise ValueError(
            f"{owner}: index_scores must have shape (batch, num_queries, num_keys) = "
            f"{expected}, from q {tuple(q.shape)} and k {tuple(k.shape)}, got shape "
            f"{tuple(index_scores.shape)}"
        )
    return _sparse_attend(q, k, v, index_scores, top_k)


def _sparse_attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    index_scores: torch.Tensor,
    top_k: int,
    scale: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """:func:`topk_sparse_attention`, unchecked, with a softmax ``scale`` and dropout."""
    indices, valid = _pick(index_scores, top_k)
    num_queries, num_keys = index_scores.shape[-2:]
    if indices is not None and num_queries * top_k <= num_keys:  # few queries: gather
        return _attend_gathered(q, k, v, indices, valid, scale, dropout)
    return _attend_chosen(q, k, v, _as_mask(index_scores, indices, valid), scale, dropout)


def _pick(index_scores: torch.Tensor, top_k: int) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Each query's ``top_k`` best visible keys, ``(indices, valid)``.

    Unchecked. ``indices`` is ``(batch, num_queries, top_k)``; ``valid``, of the same
    shape, is ``False`` where a query that sees fewer than ``top_k`` keys (or fewer
    above ``-inf``) picked one it may not see or one scored ``-inf``. With ``top_k >=
    num_keys``: no indices (``None``), and ``valid`` is the mask ``(batch, num_queries,
    num_keys)`` of every visible key above ``-inf``.
    """
    num_queries, num_keys = index_scores.shape[-2:]
    visible = _causal_mask(num_queries, num_keys, None, index_scores.device)
    scores = index_scores.masked_fill(~visible, float("-inf"))
    if top_k >= num_keys:
        return None, scores > float("-inf")
    best, indices = scores.topk(top_k, dim=-1)  # (batch, num_queries, top_k)
    return indices, best > float("-inf")


def _chosen(index_scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """``True`` at each query's ``top_k`` best visible keys with a score above ``-inf``.

    Unchecked; ``(batch, num_queries, num_keys)`` in and out.
    """
    return _as_mask(index_scores, *_pick(index_scores, top_k))


def _as_mask(
    index_scores: torch.Tensor, indices: torch.Tensor | None, valid: torch.Tensor
) -> torch.Tensor:
    """:func:`_pick`'s ``(indices, valid)`` as a mask ``(batch, num_queries, num_keys)``."""
    if indices is None:  # every visible key: already a mask
        return valid
    return torch.zeros_like(index_scores, dtype=torch.bool).scatter(-1, indices, valid)


def _attend_chosen(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    chosen: torch.Tensor,
    scale: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Attention over the ``chosen`` keys ``(batch, num_queries, num_keys)``; none: zeros.

    Returns ``(batch, heads, num_queries, dim_v)``.
    """
    empty = ~chosen.any(dim=-1, keepdim=True)  # queries left with no key at all
    if empty.any():  # attend over everything, then give them zeros: no NaN, no gradient
        out = _attend(q, k, v, (chosen | empty)[:, None], scale=scale, dropout=dropout)
        return out.masked_fill(empty[:, None], 0.0)
    return _attend(q, k, v, chosen[:, None], scale=scale, dropout=dropout)


def _attend_gathered(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    indices: torch.Tensor,
    valid: torch.Tensor,
    scale: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Attention of each query over its ``indices`` keys alone, gathered: O(top_k) per query.

    Each query becomes a batch row of one query over its ``top_k`` keys and values,
    ``(batch * num_queries, heads_kv, top_k, dim)``, and :func:`_attend_chosen` attends
    over the ``valid`` ones (a query with none gets zeros). Returns ``(batch, heads,
    num_queries, dim_v)``.
    """
    batch, num_heads, num_queries, dim = q.shape
    num_kv_heads, picks = k.shape[1], indices.shape[-1]
    rows = batch * num_queries
    flat = indices.reshape(batch, num_queries * picks)

    def gathered(x: torch.Tensor) -> torch.Tensor:  # (b, kv, keys, d) -> (rows, kv, picks, d)
        # index_select reads the chosen rows of a strided cache without copying the rest
        picked = torch.stack([x[b].index_select(1, flat[b]) for b in range(batch)])
        picked = picked.view(batch, num_kv_heads, num_queries, picks, x.shape[-1])
        return picked.transpose(1, 2).reshape(rows, num_kv_heads, picks, x.shape[-1])

    queries = q.transpose(1, 2).reshape(rows, num_heads, 1, dim)
    if valid.all():  # no mask: attend's packed decoding path
        out = _attend(queries, gathered(k), gathered(v), scale=scale, dropout=dropout)
    else:  # (rows, 1 query, picks)
        valid = valid.reshape(rows, 1, picks)
        out = _attend_chosen(queries, gathered(k), gathered(v), valid, scale, dropout)
    return out.view(batch, num_queries, num_heads, -1).transpose(1, 2)


def _check_qkv(owner: str, q: object, k: object, v: object) -> None:
    layout = (
        "expected q (batch, heads, num_queries, dim), k (batch, heads_kv, num_keys, dim) "
        "and v (batch, heads_kv, num_keys, dim_v), with heads_kv dividing heads"
    )
    q, k, v = _checks.attention_inputs(owner, q, k, v, layout, _grouped_heads)
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            f"{owner}: q, k and v must share a dtype, got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    if k.shape[2] < q.shape[2]:
        raise ValueError(
            f"{owner}: the queries are the last tokens of the keys, so num_keys must be at "
            f"least num_queries, got {q.shape[2]} queries (q of shape {tuple(q.shape)}) and "
            f"{k.shape[2]} keys (k of shape {tuple(k.shape)})"
        )


def indexer_kl_loss(
    index_scores: torch.Tensor,
    attention_weights: torch.Tensor,
    chosen: torch.Tensor | None = None,
) -> torch.Tensor:
    """DeepSeek-V3.2's loss for its indexer: how far its scores are from the attention.

    The target of query ``t`` is the main attention's weights summed over its heads and
    normalised to sum to 1, ``p[t] = sum_h a[h, t] / sum_s sum_h a[h, t, s]``; the
    indexer's distribution is ``softmax(I[t])`` over the keys it scores. The loss is
    ``KL(p[t] || softmax(I[t]))``, averaged over the queries. The target carries no
    gradient: only the indexer learns (DeepSeek detaches the indexer's input from the
    model, and first trains it alone, the model frozen, with dense attention: the
    *warm-up*). In the sparse stage that follows, ``chosen`` restricts both
    distributions to the keys the indexer picked.

    Parameters
    ----------
    index_scores : torch.Tensor, shape (batch, num_queries, num_keys)
        The indexer's scores, ``-inf`` at keys the query may not see
        (:class:`LightningIndexer`'s output).
    attention_weights : torch.Tensor, shape (batch, heads, num_queries, num_keys)
        The main attention's weights over the same keys (each row sums to 1).
    chosen : torch.Tensor of bool, optional
        ``True`` at the keys each query read, ``(batch, num_queries, num_keys)``; default
        every key it may see.

    Returns
    -------
    torch.Tensor, a scalar
        The mean over queries of the KL divergence, in nats: 0 when the indexer's
        softmax equals the target.

    Examples
    --------
    >>> import torch
    >>> weights = torch.tensor([[[[1.0, 0.0], [0.5, 0.5]]]])  # 1 head, 2 queries
    >>> scores = torch.tensor([[[0.0, float("-inf")], [0.0, 0.0]]])
    >>> indexer_kl_loss(scores, weights)  # already the same distributions
    tensor(0.)
    >>> round(indexer_kl_loss(torch.tensor([[[0.0, -9.0], [2.0, 0.0]]]), weights).item(), 4)
    0.217
    """
    owner = "indexer_kl_loss"
    index_scores = _checks.float_tensor(
        owner, "index_scores", index_scores, 3, "(batch, num_queries, num_keys)"
    )
    attention_weights = _checks.float_tensor(
        owner, "attention_weights", attention_weights, 4, "(batch, heads, num_queries, num_keys)"
    )
    batch, _, num_queries, num_keys = attention_weights.shape
    if tuple(index_scores.shape) != (batch, num_queries, num_keys):
        raise ValueError(
            f"{owner}: expected index_scores of shape (batch, num_queries, num_keys) = "
            f"{(batch, num_queries, num_keys)}, from attention_weights "
            f"{tuple(attention_weights.shape)}, got {tuple(index_scores.shape)}"
        )
    target = attention_weights.detach().sum(dim=1)  # (b, n, keys): every head's share
    if chosen is not None:
        chosen = _checks.bool_mask(
            owner, chosen, "a bool mask (batch, num_queries, num_keys)", tuple(target.shape)
        )
        target = target * chosen
        index_scores = index_scores.masked_fill(~chosen, float("-inf"))
    mass = target.sum(dim=-1, keepdim=True)
    if bool((mass <= 0).any()):
        raise ValueError(
            f"{owner}: expected every query to give weight to a key it keeps, got a query "
            f"whose target sums to 0 (its weights all fall outside chosen)"
        )
    target = target / mass
    log_q = torch.log_softmax(index_scores, dim=-1)
    # p log p - p log q over the keys with p > 0; where p = 0 nothing is owed
    kept = target > 0
    terms = torch.where(kept, target * (torch.log(target.clamp_min(1e-300)) - log_q), 0.0)
    return terms.sum(dim=-1).mean()


#: Keywords the indexer used to take, and what to write now.
_REMOVED = {
    "rope_base": "give rotary=Rotary(qk_rope_head_dim, base)",
    "rope_scaling": "give rotary=Rotary(qk_rope_head_dim, base, scaling)",
}


class LightningIndexer(nn.Module):
    """DeepSeek-V3.2's lightning indexer: which keys each query should attend to.

    For query token ``s`` and key token ``t``, the score is

    ``sum_h w[s, h] * relu(q[s, h] . k[t] / sqrt(head_dim))``

    over ``num_heads`` small indexer heads: ``q[s, h]`` comes from the query latent of
    the attention layer (MLA's ``q_norm(W_dq(x))``, ``q_lora_rank`` numbers) through
    ``W_query``; the key ``k[t]``, one per token and shared by the heads, from the input
    through ``W_key`` and a LayerNorm; the weight ``w[s, h]`` from the input through
    ``W_weights``, times ``1 / sqrt(num_heads)``. The first ``qk_rope_head_dim`` numbers
    of each query and key are rotated by RoPE in the half-split layout (MLA's own
    rotary parts are interleaved), with MLA's frequencies. As ``transformers``'
    ``DeepseekV32Indexer`` computes it, which leaves out the reference code's Hadamard
    rotation (it preserves dot products) and FP8 rounding.

    The scores go to :func:`topk_sparse_attention`. DeepSeek trains the indexer on its
    own, to match the attention's weights, so ``transformers`` runs it without
    gradients; this module leaves that choice to the caller.

    Parameters
    ----------
    d_in : int
        Size of each input embedding (``hidden_size``).
    q_lora_rank : int
        Size of the query latent the queries are made from.
    num_heads : int
        Indexer heads (``index_n_heads``, 64 in DeepSeek-V3.2).
    head_dim : int
        Size of each indexer query and key (``index_head_dim``, 128).
    qk_rope_head_dim : int
        How many leading numbers of each query and key rotate: MLA's rotary size. Even,
        at most ``head_dim``.
    rotary : Rotary, optional
        The RoPE of the first ``qk_rope_head_dim`` numbers, in the half-split layout;
        default ``Rotary(qk_rope_head_dim)`` (base 10,000). In DeepSeek-V3.2 it has
        MLA's base and scaling, whose attention factor scales cos and sin here too, as
        ``transformers`` passes the indexer MLA's.
    eps : float
        Epsilon of the key's LayerNorm (1e-6 in ``transformers``).

    Attributes
    ----------
    W_query : nn.Linear
        ``q_lora_rank -> num_heads * head_dim``, no bias (``wq_b``).
    W_key : nn.Linear
        ``d_in -> head_dim``, no bias (``wk``).
    k_norm : nn.LayerNorm
        On each key, with weight and bias (``k_norm``).
    W_weights : nn.Linear
        ``d_in -> num_heads``, no bias: each head's weight per query (``weights_proj``).

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> indexer = LightningIndexer(16, 12, num_heads=4, head_dim=8, qk_rope_head_dim=4)
    >>> x, q_latent = torch.randn(1, 5, 16), torch.randn(1, 5, 12)
    >>> scores = indexer(x, q_latent)
    >>> scores.shape  # (batch, num_queries, num_keys)
    torch.Size([1, 5, 5])
    >>> bool(scores[0, 1, 2:].isneginf().all())  # the second token cannot see the third on
    True

    With a cache, a decoding step scores its one query against every key seen so far:

    >>> from attention import KVCache
    >>> cache = KVCache()
    >>> _ = indexer(x[:, :4], q_latent[:, :4], cache=cache)
    >>> last = indexer(x[:, 4:], q_latent[:, 4:], cache=cache)
    >>> last.shape, torch.allclose(last, scores[:, 4:], atol=1e-6)
    (torch.Size([1, 1, 5]), True)
    """

    def __init__(
        self,
        d_in: int,
        q_lora_rank: int,
        *,
        num_heads: int,
        head_dim: int,
        qk_rope_head_dim: int,
        rotary: Rotary | None = None,
        eps: float = 1e-6,
        **removed: object,
    ):
        super().__init__()
        owner = type(self).__name__
        _checks.refuse_removed(owner, removed, _REMOVED)
        self.d_in, self.q_lora_rank, self.num_heads = _checks.sizes(
            owner, d_in=d_in, q_lora_rank=q_lora_rank, num_heads=num_heads
        )
        self.head_dim, self.qk_rope_head_dim = _checks.sizes(
            owner, head_dim=head_dim, qk_rope_head_dim=qk_rope_head_dim
        )
        if qk_rope_head_dim % 2 or qk_rope_head_dim > head_dim:
            raise ValueError(
                f"{owner}: qk_rope_head_dim must be even (RoPE rotates pairs) and at most "
                f"head_dim={head_dim}, got qk_rope_head_dim={qk_rope_head_dim}"
            )
        eps = _checks.positive_number(owner, "eps", eps)
        # Rotates the first qk_rope_head_dim numbers of each query and key
        self.rotary = _rotary(owner, rotary, qk_rope_head_dim, interleaved=False)
        self.W_query = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)
        self.W_key = nn.Linear(d_in, head_dim, bias=False)
        self.k_norm = nn.LayerNorm(head_dim, eps=eps)
        self.W_weights = nn.Linear(d_in, num_heads, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        q_latent: torch.Tensor,
        cache: KVCache | None = None,
        allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Score every key each new token may see.

        Parameters
        ----------
        x : torch.Tensor, shape (batch, num_tokens, d_in)
            The new tokens' inputs.
        q_latent : torch.Tensor, shape (batch, num_tokens, q_lora_rank)
            Their query latents (MLA's ``q_norm(W_dq(x))``).
        cache : KVCache, optional
            The indexer's own keys of earlier tokens, ``(batch, num_cached, head_dim)``
            in its ``keys`` (its ``values`` hold nothing, ``(batch, num_cached, 0)``);
            the new keys are appended and the new tokens sit after the cached ones.
        allowed : torch.Tensor of bool, optional
            ``True`` where a query may attend, broadcasting to ``(batch, 1, num_tokens,
            num_keys)`` (one mask for every indexer head; a padding mask of the keys is
            ``mask[:, None, None, :]``), combined with the causal mask.

        Returns
        -------
        torch.Tensor, shape (batch, num_tokens, num_keys)
            ``num_keys`` counts the cached tokens and the new ones; ``-inf`` where the
            query may not see the key.
        """
        owner = type(self).__name__
        _check_cache(self, cache, KVCache, "a KVCache (holding the indexer's keys)")
        x = _checks.module_input(self, x, d_in=self.d_in)
        batch, num_tokens, _ = x.shape
        num_cached = 0 if cache is None else cache.seen_tokens
        _checks.float_tensor(owner, "q_latent", q_latent)
        if tuple(q_latent.shape) != (batch, num_tokens, self.q_lora_rank) or (
            q_latent.dtype != x.dtype
        ):
            raise ValueError(
                f"{owner}: q_latent must have shape (batch, num_tokens, q_lora_rank) = "
                f"{(batch, num_tokens, self.q_lora_rank)} and x's dtype {x.dtype}, got "
                f"shape {tuple(q_latent.shape)} and dtype {q_latent.dtype}"
            )
        num_keys = num_cached + num_tokens
        if allowed is not None:  # one mask for every head: the indexer's scores have none
            allowed = _checks.allowed_mask(owner, allowed, (batch, 1, num_tokens, num_keys))
        # (b, n, H, head_dim) -> (b, H, n, head_dim), the first rope_dim numbers rotated
        queries = self.W_query(q_latent).view(batch, num_tokens, self.num_heads, self.head_dim)
        queries = self.rotary(queries.transpose(1, 2), num_cached)
        keys = self.rotary(self.k_norm(self.W_key(x)), num_cached)  # (b, n, head_dim), one key
        if cache is not None:
            keys, _ = cache.update(keys, keys[..., :0])  # (b, num_keys, head_dim)
        # (b, H, n, num_keys): each head's rectified, scaled dot products
        scores = F.relu(queries @ keys[:, None].transpose(-2, -1) * self.head_dim**-0.5)
        weights = self.W_weights(x) * self.num_heads**-0.5  # (b, n, H)
        index_scores = torch.einsum("bnh,bhnk->bnk", weights, scores)  # (b, n, num_keys)
        mask = _causal_mask(num_tokens, num_keys, None, x.device)  # (n, num_keys)
        if allowed is not None:
            mask = mask & allowed[:, 0]  # (b or 1, n or 1, num_keys) & (n, num_keys)
        return index_scores.masked_fill(~mask, float("-inf"))


class SparseLatentCache(LatentCache):
    """A :class:`~attention.LatentCache` that also holds the indexer's key of each token.

    What :class:`SparseLatentAttention` caches per token and layer: the latent, the
    shared rotary key and the indexer's key, ``kv_lora_rank + qk_rope_head_dim +
    index_head_dim`` numbers (576 + 128 in DeepSeek-V3.2).

    Attributes
    ----------
    indexer : KVCache
        The :class:`LightningIndexer`'s cache: its keys ``(batch, num_cached,
        index_head_dim)`` (:attr:`index_keys`), no values.
    """

    _holds = "MLA's latent and RoPE keys and the indexer's keys"
    _layers = ("SparseLatentAttention",)

    def __init__(self) -> None:
        super().__init__()
        self.indexer = KVCache()

    @property
    def index_keys(self) -> torch.Tensor | None:
        """The indexer's keys, ``(batch, num_cached, index_head_dim)``, already rotated."""
        return self.indexer.keys

    @property
    def nbytes(self) -> int:
        """Bytes held by the latents, the rotary keys and the indexer's keys."""
        return super().nbytes + self.indexer.nbytes

    def _forget(self, length: int) -> None:  # crop, in both caches
        super()._forget(length)
        self.indexer.crop(length)


class SparseLatentAttention(MultiHeadLatentAttention):
    """DeepSeek-V3.2's attention: MLA in which each query reads only ``index_top_k`` keys.

    A :class:`~attention.MultiHeadLatentAttention` with a :class:`LightningIndexer`
    (``indexer``) that scores, from the input and MLA's query latent, every key
    each query may see; the attention then runs over the ``index_top_k`` best of them
    only, as :func:`topk_sparse_attention` picks them, or over all of them while a
    query sees fewer. As ``transformers``' ``DeepseekV32Attention`` computes it.

    Parameters
    ----------
    d_in, d_out, context_length
        As in :class:`~attention.MultiHeadLatentAttention`.
    index_top_k : int
        Keys each query attends to (``index_topk``, 2048 in DeepSeek-V3.2).
    index_num_heads : int
        The indexer's heads (``index_n_heads``, 64).
    index_head_dim : int
        The size of the indexer's queries and keys (``index_head_dim``, 128), at least
        ``qk_rope_head_dim``.
    **kwargs
        Every keyword of :class:`~attention.MultiHeadLatentAttention`; ``q_lora_rank``
        is required, since the indexer's queries come from the query latent. The
        indexer rotates with ``rotary``'s base and scaling, in the half-split layout.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> dsa = SparseLatentAttention(32, 32, context_length=8, num_heads=4, q_lora_rank=12,
    ...     kv_lora_rank=8, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5,
    ...     index_top_k=3, index_num_heads=2, index_head_dim=8)
    >>> x = torch.randn(1, 8, 32)
    >>> cache = SparseLatentCache()
    >>> out = torch.cat([dsa(x[:, :5], cache=cache), dsa(x[:, 5:], cache=cache)], dim=1)
    >>> torch.allclose(out, dsa(x), atol=1e-5)
    True
    >>> (dsa.attention_weights(x)[0, 0] > 0).sum(dim=-1).tolist()  # keys read per query
    [1, 2, 3, 3, 3, 3, 3, 3]
    >>> dsa.cache_bytes_per_token  # (8 + 4 + 8) float32 numbers
    80
    """

    _cache_type = (SparseLatentCache, "a SparseLatentCache (it holds the indexer's keys too)")

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        *,
        index_top_k: int,
        index_num_heads: int,
        index_head_dim: int,
        **kwargs,
    ):
        super().__init__(d_in, d_out, context_length, **kwargs)
        owner = type(self).__name__
        self.index_top_k = _checks.positive_int(owner, "index_top_k", index_top_k)
        if self.q_lora_rank is None:
            raise ValueError(
                f"{owner}: q_lora_rank must be given (a positive integer), since the "
                f"indexer's queries are made from the query latent, got q_lora_rank=None"
            )
        self.indexer = LightningIndexer(
            d_in,
            self.q_lora_rank,
            num_heads=index_num_heads,
            head_dim=index_head_dim,
            qk_rope_head_dim=self.qk_rope_head_dim,
            rotary=Rotary(self.qk_rope_head_dim, self.rotary.base, self.rotary.scaling),
        )

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes this layer's :class:`SparseLatentCache` grows by per token.

        ``(kv_lora_rank + qk_rope_head_dim + index_head_dim) * bytes per number``.
        """
        return super().cache_bytes_per_token + self.indexer.head_dim * (
            self.indexer.W_key.weight.element_size()
        )

    def _index_scores(
        self, x: torch.Tensor, cache: SparseLatentCache | None, allowed: torch.Tensor | None
    ) -> torch.Tensor:
        """The indexer's scores, ``(batch, num_tokens, num_keys)``, -inf where not allowed."""
        q_latent = self.q_norm(self.W_dq(x))  # the latent W_uq reads, again
        index_cache = None if cache is None else cache.indexer
        return self.indexer(x, q_latent, cache=index_cache, allowed=allowed)

    def _attend_heads(
        self,
        x: torch.Tensor,
        projected: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None],
        cache: LatentCache | None,
        allowed: torch.Tensor | None,
    ) -> torch.Tensor:
        """Attend over the keys the indexer picks, which it picks causally (no ``mask``).

        :meth:`~attention.MultiHeadLatentAttention.forward` calls it, with this layer's
        :class:`SparseLatentCache`, updated in place.
        """
        assert cache is None or isinstance(cache, SparseLatentCache)  # _project refused others
        queries, keys, values, _ = projected
        scores = self._index_scores(x, cache, allowed)  # -inf where allowed is False
        dropout = self.dropout.p if self.training else 0.0
        top_k = self.index_top_k
        return _sparse_attend(queries, keys, values, scores, top_k, self._scale, dropout)

    def attention_weights(
        self, x: torch.Tensor, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Each head's weights over a full pass, zero outside each query's chosen keys.

        Returns
        -------
        torch.Tensor, shape (batch, num_heads, num_tokens, num_tokens)
        """
        queries, keys, _, _ = self._project(x, None, allowed)
        chosen = _chosen(self._index_scores(x, None, allowed), self.index_top_k)[:, None]
        return _scaled_dot_product_weights(queries, keys, chosen, self._scale)
