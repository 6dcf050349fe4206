"""How the fused attention kernels work: attention block by block, with the online softmax.

:func:`tiled_attention` computes what ``scaled_dot_product_attention`` computes, in
plain PyTorch, without ever holding the ``(num_tokens, num_tokens)`` score matrix:
chapter 7 follows it step by step.
"""

from __future__ import annotations

import torch

from attention import _checks

__all__ = ["tiled_attention"]


def _tiled_inputs(
    queries: object, keys: object, values: object, block_size: object, causal: object
) -> int:
    """Check :func:`tiled_attention`'s arguments; return ``block_size`` as an int."""
    owner = "tiled_attention"
    tensors = {"queries": queries, "keys": keys, "values": values}
    for name, tensor in tensors.items():
        _checks.float_tensor(owner, name, tensor)
        if tensor.dim() < 2:
            raise ValueError(
                f"{owner}: {name} must have shape (..., num_tokens, features), got a "
                f"{tensor.dim()}-D tensor of shape {tuple(tensor.shape)}"
            )
    shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
    if len({(t.dtype, t.device) for t in tensors.values()}) > 1:
        raise ValueError(
            f"{owner}: queries, keys and values must share one dtype and device, got "
            + ", ".join(f"{name} {t.dtype} on {t.device}" for name, t in tensors.items())
        )
    if not queries.shape[:-2] == keys.shape[:-2] == values.shape[:-2]:
        raise ValueError(
            f"{owner}: queries, keys and values must have the same leading (batch, head) "
            f"dimensions, got {shapes}"
        )
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(
            f"{owner}: queries and keys must have the same number of features (their dot "
            f"products are the scores), got {shapes}"
        )
    if keys.shape[-2] != values.shape[-2]:
        raise ValueError(
            f"{owner}: keys and values must have the same number of tokens (one value per "
            f"key), got {shapes}"
        )
    if queries.shape[-2] == 0 or keys.shape[-2] == 0:
        raise ValueError(f"{owner}: needs at least one query and one key, got {shapes}")
    if not isinstance(causal, bool):
        raise ValueError(f"{owner}: causal must be True or False, got {causal!r}")
    if causal and queries.shape[-2] != keys.shape[-2]:
        raise ValueError(
            f"{owner}: causal attention needs as many queries as keys (query i sees keys "
            f"0 to i), got {shapes}"
        )
    return _checks.positive_int(owner, "block_size", block_size)


def tiled_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    block_size: int = 64,
    causal: bool = True,
) -> torch.Tensor:
    """Scaled dot-product attention computed block by block, as flash-style kernels do.

    The same function as ``scaled_dot_product_attention(queries, keys, values,
    is_causal=causal)``, written in plain PyTorch to show how the fused kernels avoid
    the ``(num_tokens, num_tokens)`` score matrix. The queries are taken
    ``block_size`` at a time; for each block of queries, the keys and values arrive
    ``block_size`` at a time, and the *online softmax* keeps three running
    quantities per query: the largest score seen so far ``m``, the softmax
    denominator ``denom`` (the sum of ``exp(score - m)``) and the weighted sum of
    values ``acc``. When a block brings a larger score, ``denom`` and ``acc`` are
    rescaled by ``exp(m_old - m_new)``, as if they had been computed with the new
    maximum from the start. After the last block, ``acc / denom`` is the context
    vector. With ``causal=True``, key blocks entirely in the future of a query block
    are skipped, and a block that straddles the diagonal is masked.

    At any moment only a ``(..., block_size, block_size)`` block of scores exists.
    A real kernel keeps it in fast on-chip memory; this function is slow, a lesson
    rather than a tool: use :class:`~attention.efficient.FastMultiHeadAttention` for speed.

    Parameters
    ----------
    queries : torch.Tensor, shape (..., num_queries, head_dim)
    keys : torch.Tensor, shape (..., num_keys, head_dim)
    values : torch.Tensor, shape (..., num_keys, value_dim)
        Floating point, one dtype and device, the same leading dimensions (for
        example ``(batch, num_heads)``). With ``causal=True``, ``num_queries`` must
        equal ``num_keys``.
    block_size : int, default 64
        Tokens per block, for queries and keys alike; the last block may be shorter.
    causal : bool, default True
        Whether query ``i`` sees only keys ``0`` to ``i``.

    Returns
    -------
    torch.Tensor, shape (..., num_queries, value_dim)
        ``softmax(queries @ keys^T / sqrt(head_dim)) @ values``, masked if causal.

    Raises
    ------
    ValueError
        For arguments that are not floating-point tensors of matching shapes, dtypes
        and devices, no queries or no keys, a ``block_size`` that is not a positive
        integer, or a ``causal`` that is not a bool.

    Examples
    --------
    Our running sentence attends to itself, two tokens at a time:

    >>> import torch
    >>> from torch.nn import functional as F
    >>> from attention import INPUTS
    >>> tiled = tiled_attention(INPUTS, INPUTS, INPUTS, block_size=2)  # (6, 3)
    >>> tiled[4]  # the context vector of "one"
    tensor([0.5206, 0.5514, 0.5236])
    >>> fused = F.scaled_dot_product_attention(INPUTS, INPUTS, INPUTS, is_causal=True)
    >>> torch.allclose(tiled, fused, atol=1e-6)
    True
    """
    block_size = _tiled_inputs(queries, keys, values, block_size, causal)
    num_queries, num_keys = queries.shape[-2], keys.shape[-2]
    scale = queries.shape[-1] ** -0.5
    blocks = []
    for q_start in range(0, num_queries, block_size):
        q_end = min(q_start + block_size, num_queries)
        q = queries[..., q_start:q_end, :] * scale  # (..., bq, head_dim)
        shape = (*q.shape[:-1], 1)  # one running value per query
        m = torch.full(shape, float("-inf"), dtype=q.dtype, device=q.device)  # max so far
        denom = torch.zeros(shape, dtype=q.dtype, device=q.device)  # sum of exp(score - m)
        acc = q.new_zeros((*q.shape[:-1], values.shape[-1]))  # sum of exp(score - m) * value
        for k_start in range(0, num_keys, block_size):
            if causal and k_start >= q_end:
                break  # this key block and every later one lie in the future
            k_end = min(k_start + block_size, num_keys)
            scores = q @ keys[..., k_start:k_end, :].transpose(-2, -1)  # (..., bq, bk)
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
    return torch.cat(blocks, dim=-2)
