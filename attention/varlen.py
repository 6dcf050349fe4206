"""Packed variable-length attention: many sequences in one tensor, no padding.

A server that prefills a batch of prompts of different lengths can pad them all to the
longest, or *pack* them: put their tokens one after the other in a single
``(total_tokens, heads, dim)`` tensor and say where each sequence starts with
``cu_seqlens``, the cumulative sequence lengths, as FlashAttention's
``flash_attn_varlen_func`` takes them. Sequences of 3, 5 and 2 tokens are
``cu_seqlens = [0, 3, 8, 10]``: sequence ``i`` is tokens ``cu_seqlens[i]`` to
``cu_seqlens[i + 1] - 1``.

Packed, a token must still attend only within its own sequence: the mask over the
packed tokens is *block-diagonal*, one causal triangle per sequence
(:func:`~attention.varlen_mask`). Attention over all the packed tokens with that mask,
``attend(..., allowed=varlen_mask(cu_seqlens))``, is the definition.
:func:`~attention.varlen_attention` computes the same thing sequence by sequence
instead, which never forms the blocks the mask would hide: ``total_tokens ** 2``
scores become the sum of ``length ** 2``, what FlashAttention's varlen kernel computes,
tile by tile, in one launch. On a CPU, one call per sequence was also faster than the
one masked call at every size tried (from 4 sequences of about 16 tokens to 64 of
about 15, 8 heads of 64 dimensions, one thread).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention import _checks
from attention.step import _attend

__all__ = ["varlen_attention", "varlen_mask"]


def varlen_mask(
    cu_seqlens: Sequence[int] | torch.Tensor,
    *,
    causal: bool = True,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The block-diagonal mask of packed sequences: each token sees only its own sequence.

    Parameters
    ----------
    cu_seqlens : list of int or 1-D integer tensor, shape (num_sequences + 1,)
        Where each sequence starts in the packed tokens, then where the last one ends:
        0, strictly increasing, ``total_tokens``.
    causal : bool
        Keyword only. ``True``: a token sees itself and the tokens before it in its own
        sequence, one causal triangle per sequence. ``False``: its whole sequence, one
        square each.
    device : torch.device or str, optional
        Where to build the mask; default ``cu_seqlens``' device, or the CPU for a list.

    Returns
    -------
    torch.Tensor of bool, shape (total_tokens, total_tokens)
        ``True`` where the query (row) may attend to the key (column).

    Examples
    --------
    Two sequences, of 2 and 3 tokens:

    >>> varlen_mask([0, 2, 5]).int()
    tensor([[1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [0, 0, 1, 0, 0],
            [0, 0, 1, 1, 0],
            [0, 0, 1, 1, 1]], dtype=torch.int32)
    >>> bool(varlen_mask([0, 2, 5])[2:, :2].any())  # the second never sees the first
    False
    """
    owner = "varlen_mask"
    lengths = _checks.sequence_lengths(owner, cu_seqlens)
    _checks.flag(owner, "causal", causal, "each token sees only the tokens before it")
    if device is None and isinstance(cu_seqlens, torch.Tensor):
        device = cu_seqlens.device
    return _varlen_mask(lengths, causal, device)


def _varlen_mask(
    lengths: list[int], causal: bool, device: torch.device | str | None
) -> torch.Tensor:
    """:func:`varlen_mask` of lengths already checked."""
    counts = torch.tensor(lengths, device=device)
    # Each packed token's sequence: [0, 0, 1, 1, 1] for lengths [2, 3].
    sequence = torch.repeat_interleave(torch.arange(len(lengths), device=device), counts)
    allowed = sequence[:, None] == sequence[None, :]  # the blocks on the diagonal
    if causal:
        # Within a block, packed order is the sequence's order: keep key <= query.
        allowed = allowed.tril()
    return allowed


def varlen_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: Sequence[int] | torch.Tensor,
    *,
    causal: bool = True,
) -> torch.Tensor:
    """Attention over packed sequences of different lengths, each one on its own.

    The layout of FlashAttention's ``flash_attn_varlen_func``: the sequences' tokens one
    after the other, no padding, and ``cu_seqlens`` saying where each starts. Query head
    ``h`` reads key/value head ``h // (heads // kv_heads)`` (grouped-query attention);
    the scale is ``1 / sqrt(dim)``. Each sequence's rows equal attention over that
    sequence alone, and the real rows of the padded batch with a padding mask.

    Parameters
    ----------
    q : torch.Tensor, shape (total_tokens, heads, dim)
    k : torch.Tensor, shape (total_tokens, kv_heads, dim)
    v : torch.Tensor, shape (total_tokens, kv_heads, value_dim)
        ``kv_heads`` must divide ``heads``.
    cu_seqlens : list of int or 1-D integer tensor, shape (num_sequences + 1,)
        0, then the end of each sequence in the packed tokens: strictly increasing (no
        empty sequence), the last entry ``total_tokens``.
    causal : bool
        Keyword only. ``True``: each token attends to itself and the tokens before it in its own
        sequence (a decoder's prefill). ``False``: to its whole sequence (an encoder).

    Returns
    -------
    torch.Tensor, shape (total_tokens, heads, value_dim)

    Examples
    --------
    Three sequences, of 3, 5 and 2 tokens, packed into 10:

    >>> import torch
    >>> from torch.nn.functional import scaled_dot_product_attention as sdpa
    >>> _ = torch.manual_seed(0)
    >>> q = torch.randn(10, 4, 8)  # (total_tokens, heads, dim)
    >>> k, v = torch.randn(10, 2, 8), torch.randn(10, 2, 8)  # 2 key/value heads
    >>> out = varlen_attention(q, k, v, cu_seqlens=[0, 3, 8, 10])
    >>> out.shape
    torch.Size([10, 4, 8])
    >>> second = [t[3:8].transpose(0, 1) for t in (q, k, v)]  # (heads, 5, dim)
    >>> alone = sdpa(*second, is_causal=True, enable_gqa=True).transpose(0, 1)
    >>> torch.allclose(out[3:8], alone, atol=1e-6)
    True

    The definition: one attention over all 10 tokens, the block-diagonal mask keeping
    each token inside its sequence:

    >>> from attention import attend, varlen_mask
    >>> packed = [t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)]  # (1, heads, 10, dim)
    >>> masked = attend(*packed, allowed=varlen_mask([0, 3, 8, 10]))[0].transpose(0, 1)
    >>> torch.allclose(out, masked, atol=1e-6)
    True
    """
    owner = "varlen_attention"
    layout = (
        "expected q (total_tokens, heads, dim), k (total_tokens, kv_heads, dim) and v "
        "(total_tokens, kv_heads, value_dim), with kv_heads dividing heads"
    )
    _checks.attention_inputs(owner, q, k, v, layout, _packed)
    what = "kv_heads must divide heads (each key/value head serves a group of query heads)"
    _checks.divides(owner, what, heads=q.shape[1], kv_heads=k.shape[1])
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(
            f"{owner}: q, k and v must share a dtype, got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    lengths = _checks.sequence_lengths(owner, cu_seqlens, q.shape[0])
    _checks.flag(owner, "causal", causal, "each token sees only the tokens before it")
    return _varlen_attention(q, k, v, lengths, causal)


def _packed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether ``q``, ``k``, ``v`` are ``(t, h, d)``, ``(t, h_kv, d)`` and ``(t, h_kv, d_v)``."""
    return (
        q.dim() == k.dim() == v.dim() == 3
        and k.shape[:2] == q.shape[:1] + k.shape[1:2]
        and v.shape[:2] == k.shape[:2]
        and q.shape[2] == k.shape[2]
    )


def _varlen_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int], causal: bool
) -> torch.Tensor:
    """:func:`varlen_attention` of checked arguments and each sequence's length."""

    def heads_first(x: torch.Tensor) -> torch.Tensor:
        # (tokens, heads, dim) -> (1, heads, tokens, dim): attend's layout, a batch of one
        return x.transpose(0, 1).unsqueeze(0)

    # One attention per sequence: the blocks off the diagonal of varlen_mask, which
    # the mask would hide, are never computed.
    outputs = []
    for piece_q, piece_k, piece_v in zip(
        q.split(lengths), k.split(lengths), v.split(lengths), strict=True
    ):
        out = _attend(
            heads_first(piece_q), heads_first(piece_k), heads_first(piece_v), causal=causal
        )
        outputs.append(out[0].transpose(0, 1))
    return torch.cat(outputs)
