"""How the fused attention kernels work: attention block by block, with the online softmax.

:func:`tiled_attention` computes what ``scaled_dot_product_attention`` computes, in
plain PyTorch, without ever holding the ``(num_tokens, num_tokens)`` score matrix:
chapter 7 follows it step by step. With ``return_lse=True`` it also returns the
log-sum-exp of each query's scores, the one number per query from which the backward
pass (:mod:`attention.flash`, chapter 33) recomputes any block of weights, and with
which partial results over different keys merge (:mod:`attention.merge`, chapter 34).
"""

from __future__ import annotations

import torch

from attention import _checks

__all__ = ["tiled_attention"]


#: What each flag of this family of functions means, for the error that refuses a non-bool.
_FLAGS = {
    "causal": "whether query i sees only keys 0 to i",
    "return_lse": "whether to return each query's log-sum-exp too",
}


def _flag(owner: str, name: str, value: object) -> bool:
    """``_checks.flag``, with what the flag means from ``_FLAGS``."""
    return _checks.flag(owner, name, value, _FLAGS[name])


def _qkv(owner: str, q: object, k: object, v: object, causal: object) -> int:
    """Check queries, keys and values; return the group size (query heads per k/v head).

    Leading dimensions must match, except that ``q`` may have a whole multiple of
    ``k``'s heads (dimension -3): grouped-query attention.
    """
    layout = "(..., num_tokens, features)"
    tensors = {
        name: _checks.float_tensor(owner, name, tensor, layout=layout, min_rank=2)
        for name, tensor in (("q", q), ("k", k), ("v", v))
    }
    q, k, v = tensors["q"], tensors["k"], tensors["v"]
    _flag(owner, "causal", causal)
    shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
    if len({(t.dtype, t.device) for t in tensors.values()}) > 1:
        raise ValueError(
            f"{owner}: expected q, k and v of one dtype and device, got "
            + ", ".join(f"{name} {t.dtype} on {t.device}" for name, t in tensors.items())
        )
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"{owner}: expected k and v with the same leading dimensions and number of "
            f"tokens (one value per key), got {shapes}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{owner}: expected q and k with the same number of features (their dot "
            f"products are the scores), got {shapes}"
        )
    group = 1
    if q.shape[:-2] != k.shape[:-2]:
        heads, kv_heads = (q.shape[-3], k.shape[-3]) if q.dim() > 2 else (0, 0)
        same_rest = q.dim() == k.dim() > 2 and q.shape[:-3] == k.shape[:-3]
        if not (same_rest and kv_heads > 0 and heads % kv_heads == 0):
            raise ValueError(
                f"{owner}: expected q, k and v with the same leading (batch, heads) "
                f"dimensions, or q with a whole multiple of k's heads in dimension -3 "
                f"(grouped-query attention), got {shapes}"
            )
        group = heads // kv_heads
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        raise ValueError(f"{owner}: expected at least one query and one key, got {shapes}")
    if causal and q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"{owner}: expected as many queries as keys for causal attention (query i "
            f"sees keys 0 to i), got {shapes}"
        )
    return group


def _repeat_kv(x: torch.Tensor, group: int) -> torch.Tensor:
    """Each key/value head once per query head of its group, as chapter 9 does."""
    return x if group == 1 else x.repeat_interleave(group, dim=-3)


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_size: int = 64,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention computed block by block, as flash-style kernels do.

    The same function as ``scaled_dot_product_attention(q, k, v, is_causal=causal)``,
    written in plain PyTorch to show how the fused kernels avoid the
    ``(num_tokens, num_tokens)`` score matrix. The queries are taken ``block_size`` at
    a time; for each block of queries, the keys and values arrive ``block_size`` at a
    time, and the *online softmax* keeps three running quantities per query: the
    largest score seen so far ``m``, the softmax denominator ``denom`` (the sum of
    ``exp(score - m)``) and the weighted sum of values ``acc``. When a block brings a
    larger score, ``denom`` and ``acc`` are rescaled by ``exp(m_old - m_new)``, as if
    they had been computed with the new maximum from the start. After the last block,
    ``acc / denom`` is the context vector, and ``m + log(denom)`` the log-sum-exp of
    the query's scores. With ``causal=True``, key blocks entirely in the future of a
    query block are skipped, and a block that straddles the diagonal is masked.

    At any moment only a ``(..., block_size, block_size)`` block of scores exists.
    A real kernel keeps it in fast on-chip memory; this function is slow, a lesson
    rather than a tool: use :class:`~attention.efficient.FastMultiHeadAttention` for
    speed. Gradients flow through it by autograd, which keeps every block; for the
    backward pass that keeps only the log-sum-exp, use :func:`~attention.flash.flash_attention`.

    Parameters
    ----------
    q : torch.Tensor, shape (..., num_heads, num_queries, head_dim)
    k : torch.Tensor, shape (..., num_kv_heads, num_keys, head_dim)
    v : torch.Tensor, shape (..., num_kv_heads, num_keys, value_dim)
        Floating point, one dtype and device, the same leading dimensions (for
        example ``(batch, num_heads)``), except that ``num_kv_heads`` may divide
        ``num_heads`` (grouped-query attention: query head ``h`` reads key/value head
        ``h // (num_heads // num_kv_heads)``). With ``causal=True``, ``num_queries``
        must equal ``num_keys``.
    causal : bool, default False
        Whether query ``i`` sees only keys ``0`` to ``i``.
    block_size : int, default 64
        Tokens per block, for queries and keys alike; the last block may be shorter.
    return_lse : bool, default False
        Also return the log-sum-exp of each query's scaled, masked scores.

    Returns
    -------
    out : torch.Tensor, shape (..., num_heads, num_queries, value_dim)
        ``softmax(q @ k^T / sqrt(head_dim)) @ v``, masked if causal.
    lse : torch.Tensor, shape (..., num_heads, num_queries)
        Only with ``return_lse=True``: ``logsumexp(q @ k^T / sqrt(head_dim))`` over the
        keys each query sees, so that a weight is ``exp(score - lse)``.

    Raises
    ------
    TypeError
        For ``q``, ``k`` or ``v`` that are not tensors, a ``causal`` or ``return_lse``
        that is not a bool, a ``block_size`` that is not an integer.
    ValueError
        For tensors that are not floating point or whose shapes, dtypes and devices do
        not match, no queries or no keys, a ``block_size`` below 1.

    Examples
    --------
    Our running sentence attends to itself, two tokens at a time:

    >>> import torch
    >>> from torch.nn import functional as F
    >>> from attention import INPUTS
    >>> tiled = tiled_attention(INPUTS, INPUTS, INPUTS, causal=True, block_size=2)
    >>> tiled[4]  # the context vector of "one", shape (3,)
    tensor([0.5206, 0.5514, 0.5236])
    >>> fused = F.scaled_dot_product_attention(INPUTS, INPUTS, INPUTS, is_causal=True)
    >>> torch.allclose(tiled, fused, atol=1e-6)
    True
    >>> out, lse = tiled_attention(INPUTS, INPUTS, INPUTS, return_lse=True)
    >>> lse.shape  # one number per query
    torch.Size([6])
    >>> scores = INPUTS @ INPUTS.T / 3**0.5
    >>> torch.allclose(lse, scores.logsumexp(dim=-1))
    True
    """
    group = _qkv("tiled_attention", q, k, v, causal)
    block_size = _checks.positive_int("tiled_attention", "block_size", block_size)
    _flag("tiled_attention", "return_lse", return_lse)
    keys, values = _repeat_kv(k, group), _repeat_kv(v, group)  # (..., num_heads, Tk, d)
    num_queries, num_keys = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5
    blocks, lses = [], []
    for q_start in range(0, num_queries, block_size):
        q_end = min(q_start + block_size, num_queries)
        q_block = q[..., q_start:q_end, :] * scale  # (..., bq, head_dim)
        shape = (*q_block.shape[:-1], 1)  # one running value per query
        m = q.new_full(shape, float("-inf"))  # max so far
        denom = q.new_zeros(shape)  # sum of exp(score - m)
        acc = q.new_zeros((*q_block.shape[:-1], v.shape[-1]))  # sum of exp(score - m) * value
        for k_start in range(0, num_keys, block_size):
            if causal and k_start >= q_end:
                break  # this key block and every later one lie in the future
            k_end = min(k_start + block_size, num_keys)
            scores = q_block @ keys[..., k_start:k_end, :].transpose(-2, -1)  # (..., bq, bk)
            if causal and k_end > q_start + 1:  # the block straddles the diagonal
                q_pos = torch.arange(q_start, q_end, device=q.device).unsqueeze(-1)
                k_pos = torch.arange(k_start, k_end, device=q.device)
                scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
            m_new = torch.maximum(m, scores.amax(dim=-1, keepdim=True))
            rescale = torch.exp(m - m_new)  # 0 on the first block, where m is -inf
            p = torch.exp(scores - m_new)  # (..., bq, bk); masked scores give 0
            denom = denom * rescale + p.sum(dim=-1, keepdim=True)
            acc = acc * rescale + p @ values[..., k_start:k_end, :]
            m = m_new
        blocks.append(acc / denom)
        lses.append((m + torch.log(denom)).squeeze(-1))  # log of sum(exp(score))
    out = torch.cat(blocks, dim=-2)  # (..., num_queries, value_dim)
    return (out, torch.cat(lses, dim=-1)) if return_lse else out
