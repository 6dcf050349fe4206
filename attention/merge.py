"""One merge: attention over disjoint sets of keys, combined exactly.

Attention over some keys gives an output and the log-sum-exp ``lse`` of each query's
scores over them. Two such partial results over disjoint keys combine into attention
over all of them: each is weighted by its share of the softmax's denominator,
``exp(lse_i - lse)``, where ``lse = log(exp(lse_1) + exp(lse_2))``. That is the online
softmax's step (chapter 7), written once: :func:`merge_attention_states`. It is what
flash-decoding does across splits of a long cache (:func:`split_kv_attention`), what
ring attention does across processes (:func:`~attention.ring.ring_attention`), and
what a paged kernel can do across the blocks of a block table. Chapter 34 follows it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention import _checks
from attention.tiled import _qkv, tiled_attention

__all__ = ["merge_attention_states", "split_kv_attention"]


def _states(outs: Sequence[torch.Tensor], lses: Sequence[torch.Tensor]) -> None:
    """Check :func:`merge_attention_states`'s arguments."""
    owner = "merge_attention_states"
    for name, seq in (("outs", outs), ("lses", lses)):
        if not isinstance(seq, Sequence) or isinstance(seq, str | torch.Tensor):
            raise TypeError(
                f"{owner}: {name} must be a list or tuple of tensors, got {type(seq).__name__}"
            )
        for i, t in enumerate(seq):
            _checks.tensor(owner, f"{name}[{i}]", t)
    if len(outs) == 0 or len(outs) != len(lses):
        raise ValueError(
            f"{owner}: expected one lse per output and at least one of each, got "
            f"{len(outs)} outputs and {len(lses)} lses"
        )
    first = outs[0]
    if first.dim() < 1 or not first.is_floating_point():
        raise ValueError(
            f"{owner}: expected floating-point outputs of shape (..., num_queries, "
            f"value_dim), got outs[0] of shape {tuple(first.shape)} and dtype {first.dtype}"
        )
    for i, (out, lse) in enumerate(zip(outs, lses, strict=True)):
        if out.shape != first.shape or lse.shape != first.shape[:-1]:
            raise ValueError(
                f"{owner}: expected every output of shape {tuple(first.shape)} and every "
                f"lse of shape {tuple(first.shape[:-1])}, got outs[{i}] of shape "
                f"{tuple(out.shape)} and lses[{i}] of shape {tuple(lse.shape)}"
            )
        if {out.dtype, lse.dtype} != {first.dtype} or {out.device, lse.device} != {first.device}:
            raise ValueError(
                f"{owner}: expected every output and lse of dtype {first.dtype} on "
                f"{first.device}, got outs[{i}] {out.dtype} on {out.device} and lses[{i}] "
                f"{lse.dtype} on {lse.device}"
            )


def merge_attention_states(
    outs: Sequence[torch.Tensor], lses: Sequence[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Combine attention over disjoint sets of keys into attention over all of them.

    Part ``i`` attended to its keys and returned ``outs[i]``, a softmax-weighted
    average of its values, and ``lses[i]``, the log of its softmax denominator (the
    log-sum-exp of its scores). Over all the keys, the denominator is the sum of the
    parts' denominators, so ``lse = logsumexp(lses)``, and part ``i`` holds the share
    ``exp(lses[i] - lse)`` of every weight: the output is
    ``sum_i exp(lses[i] - lse) * outs[i]``. The order and the grouping of the parts do
    not matter. A part with an ``lse`` of ``-inf`` saw no key and gets no weight.

    Parameters
    ----------
    outs : sequence of torch.Tensor, each of shape (..., num_queries, value_dim)
    lses : sequence of torch.Tensor, each of shape (..., num_queries)
        One per part, all of one dtype and device, as
        ``tiled_attention(q, k_part, v_part, return_lse=True)`` returns them.

    Returns
    -------
    out : torch.Tensor, shape (..., num_queries, value_dim)
    lse : torch.Tensor, shape (..., num_queries)
        Attention over the union of the parts' keys, and its log-sum-exp, which can be
        merged again.

    Raises
    ------
    TypeError
        For ``outs`` or ``lses`` that are not sequences of tensors.
    ValueError
        For no parts, as many outputs as lses, or shapes, dtypes and devices that do
        not match.

    Examples
    --------
    Our sentence's first three keys and its last three, merged:

    >>> import torch
    >>> from attention import INPUTS, tiled_attention
    >>> first = tiled_attention(INPUTS, INPUTS[:3], INPUTS[:3], return_lse=True)
    >>> last = tiled_attention(INPUTS, INPUTS[3:], INPUTS[3:], return_lse=True)
    >>> out, lse = merge_attention_states([first[0], last[0]], [first[1], last[1]])
    >>> out.shape, lse.shape
    (torch.Size([6, 3]), torch.Size([6]))
    >>> torch.allclose(out, tiled_attention(INPUTS, INPUTS, INPUTS))
    True
    """
    _states(outs, lses)
    stacked = torch.stack(list(lses))  # (parts, ..., num_queries)
    lse = torch.logsumexp(stacked, dim=0)  # the log of the summed denominators
    share = torch.exp(stacked - lse).nan_to_num(0.0)  # each part's share; 0 where no keys
    out = (share.unsqueeze(-1) * torch.stack(list(outs))).sum(dim=0)
    return out, lse


def split_kv_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, num_splits: int
) -> torch.Tensor:
    """Attention over a long cache in ``num_splits`` independent parts, merged: flash-decoding.

    One query token (or a few) reading a long cache gives a GPU too little work if one
    processor walks all the keys: flash-decoding cuts the keys into ``num_splits``
    parts, lets a processor attend to each (in parallel on a GPU; one after the other
    here), then combines them with :func:`merge_attention_states`. The parts are as
    equal as possible (``torch.tensor_split``), so the count need not divide the keys.
    No mask: every cached key is in the past of the new tokens.

    Parameters
    ----------
    q : torch.Tensor, shape (..., num_heads, num_queries, head_dim)
    k : torch.Tensor, shape (..., num_kv_heads, num_keys, head_dim)
    v : torch.Tensor, shape (..., num_kv_heads, num_keys, value_dim)
        As for :func:`~attention.tiled.tiled_attention`, grouped heads allowed.
    num_splits : int
        How many parts to cut the keys into, from 1 to ``num_keys``.

    Returns
    -------
    torch.Tensor, shape (..., num_heads, num_queries, value_dim)
        ``scaled_dot_product_attention(q, k, v)``.

    Raises
    ------
    TypeError
        For tensors that are not tensors, a ``num_splits`` that is not an integer.
    ValueError
        For shapes, dtypes or devices that do not match, or ``num_splits`` outside
        ``[1, num_keys]``.

    Examples
    --------
    >>> import torch
    >>> from torch.nn import functional as F
    >>> _ = torch.manual_seed(0)
    >>> q = torch.randn(1, 8, 1, 64)  # one new token, 8 query heads
    >>> k, v = torch.randn(1, 2, 1000, 64), torch.randn(1, 2, 1000, 64)  # 2 kv heads
    >>> out = split_kv_attention(q, k, v, num_splits=7)  # 7 parts of 142 or 143 keys
    >>> out.shape
    torch.Size([1, 8, 1, 64])
    >>> sdpa = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    >>> torch.allclose(out, sdpa, atol=1e-6)
    True
    """
    owner = "split_kv_attention"
    group = _qkv(owner, q, k, v, False)
    num_splits = _checks.positive_int(owner, "num_splits", num_splits)
    num_keys = k.shape[-2]
    if num_splits > num_keys:
        raise ValueError(
            f"{owner}: expected num_splits of at most num_keys={num_keys} (each part needs "
            f"a key), got {num_splits}"
        )
    num_queries = q.shape[-2]
    if group > 1:  # a group's query heads become rows of its one key/value head: no copies
        q = q.unflatten(-3, (k.shape[-3], group)).flatten(-3, -2)  # (..., kv_heads, g*Tq, d)
    outs, lses = [], []
    for k_part, v_part in zip(
        k.tensor_split(num_splits, dim=-2), v.tensor_split(num_splits, dim=-2), strict=True
    ):
        # One block of keys per part: each part is one plain attention with its lse.
        out, lse = tiled_attention(q, k_part, v_part, block_size=k_part.shape[-2], return_lse=True)
        outs.append(out)
        lses.append(lse)
    out = merge_attention_states(outs, lses)[0]
    return out.unflatten(-2, (group, num_queries)).flatten(-4, -3) if group > 1 else out
