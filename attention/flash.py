"""FlashAttention's backward pass: gradients from the saved log-sum-exp, block by block.

:func:`~attention.tiled.tiled_attention` computes attention without the
``(num_queries, num_keys)`` matrix of weights. Autograd through it would still keep
every block it made, as much as the full matrix, to differentiate later. FlashAttention
keeps only the output and one number per query, the log-sum-exp ``lse`` of its scores,
and in the backward pass recomputes each block of weights, ``exp(scores - lse)``, when
it needs it. :func:`tiled_attention_backward` is that backward pass in plain PyTorch;
:func:`flash_attention` ties it to the tiled forward pass with a
``torch.autograd.Function``, so that ``.backward()`` works and the tensors saved for it
grow with ``num_tokens * head_dim``, not ``num_tokens ** 2``. Chapter 33 follows it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from attention import _checks
from attention.tiled import _qkv, _repeat_kv, tiled_attention

__all__ = [
    "TiledAttentionFunction",
    "flash_attention",
    "saved_bytes",
    "tiled_attention_backward",
]


def _backward_inputs(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: object,
    lse: object,
    grad_out: object,
    causal: object,
    block_size: object,
) -> tuple[int, int]:
    """Check :func:`tiled_attention_backward`'s arguments; return (group, block_size)."""
    owner = "tiled_attention_backward"
    group = _qkv(owner, q, k, v, causal)
    block_size = _checks.positive_int(owner, "block_size", block_size)
    out_shape = (*q.shape[:-1], v.shape[-1])
    for name, tensor, shape in (
        ("out", out, out_shape),
        ("grad_out", grad_out, out_shape),
        ("lse", lse, tuple(q.shape[:-1])),
    ):
        if name == "lse":
            tensor = _checks.tensor(owner, name, tensor)
        else:
            tensor = _checks.float_tensor(owner, name, tensor)
        if tuple(tensor.shape) != tuple(shape) or tensor.dtype != q.dtype:
            raise ValueError(
                f"{owner}: expected {name} of shape {tuple(shape)} and dtype {q.dtype} "
                f"(as tiled_attention(q, k, v, return_lse=True) returns them), got shape "
                f"{tuple(tensor.shape)} and dtype {tensor.dtype}"
            )
    return group, block_size


def tiled_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    grad_out: torch.Tensor,
    *,
    causal: bool = False,
    block_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of attention with respect to q, k and v, block by block.

    With ``S = q @ k^T * scale``, ``P = softmax(S)`` and ``out = P @ v``, the chain
    rule gives ``dv = P^T @ dO``, ``dP = dO @ v^T``, ``dS = P * (dP - D)`` and
    ``dq = dS @ k * scale``, ``dk = dS^T @ q * scale``, where ``dO`` is ``grad_out``
    and ``D = rowsum(dO * out)`` is one number per query (it equals
    ``rowsum(P * dP)``, the softmax's correction). No ``P`` is kept from the forward
    pass: for each pair of a key block and a query block, the block of ``P`` is
    recomputed from the scores and the saved ``lse`` as ``exp(S - lse)``. As in
    FlashAttention-2, the outer loop runs over key blocks, so that each block of
    ``dk`` and ``dv`` is finished in one go, and ``dq`` is accumulated across them.

    Parameters
    ----------
    q, k, v : torch.Tensor
        As for :func:`~attention.tiled.tiled_attention`: ``(..., num_heads, num_queries,
        head_dim)``, ``(..., num_kv_heads, num_keys, head_dim)`` and
        ``(..., num_kv_heads, num_keys, value_dim)``.
    out : torch.Tensor, shape (..., num_heads, num_queries, value_dim)
    lse : torch.Tensor, shape (..., num_heads, num_queries)
        What ``tiled_attention(q, k, v, causal=causal, return_lse=True)`` returned.
    grad_out : torch.Tensor, shape (..., num_heads, num_queries, value_dim)
        The gradient of the loss with respect to ``out``.
    causal : bool, default False
        As in the forward pass; key blocks in the future of a query block are skipped.
    block_size : int, default 64
        Tokens per block; any size gives the same gradients, up to rounding.

    Returns
    -------
    dq, dk, dv : torch.Tensor
        Of the shapes of ``q``, ``k`` and ``v``. With grouped heads, ``dk`` and ``dv``
        sum the gradients of every query head of a group.

    Raises
    ------
    TypeError
        For an argument of the wrong type (as :func:`~attention.tiled.tiled_attention`).
    ValueError
        For shapes, dtypes or devices that do not match.

    Examples
    --------
    >>> import torch
    >>> from attention import tiled_attention
    >>> _ = torch.manual_seed(0)
    >>> q, k, v = (torch.randn(2, 5, 4, dtype=torch.float64) for _ in range(3))
    >>> out, lse = tiled_attention(q, k, v, causal=True, return_lse=True)
    >>> grad_out = torch.randn_like(out)  # (2, 5, 4)
    >>> dq, dk, dv = tiled_attention_backward(
    ...     q, k, v, out, lse, grad_out, causal=True, block_size=2
    ... )
    >>> q_, k_, v_ = (t.clone().requires_grad_() for t in (q, k, v))
    >>> plain = torch.nn.functional.scaled_dot_product_attention(
    ...     q_, k_, v_, is_causal=True
    ... )
    >>> plain.backward(grad_out)
    >>> all(torch.allclose(a, b.grad) for a, b in zip((dq, dk, dv), (q_, k_, v_)))
    True
    """
    group, block_size = _backward_inputs(q, k, v, out, lse, grad_out, causal, block_size)
    keys, values = _repeat_kv(k, group), _repeat_kv(v, group)  # (..., num_heads, Tk, d)
    num_queries, num_keys = q.shape[-2], k.shape[-2]
    scale = q.shape[-1] ** -0.5
    lse = lse.unsqueeze(-1)  # (..., Tq, 1)
    delta = (grad_out * out).sum(dim=-1, keepdim=True)  # (..., Tq, 1): D = rowsum(dO * O)
    dq = torch.zeros_like(q)
    dk, dv = torch.zeros_like(keys), torch.zeros_like(values)
    for k_start in range(0, num_keys, block_size):
        k_end = min(k_start + block_size, num_keys)
        k_block, v_block = keys[..., k_start:k_end, :], values[..., k_start:k_end, :]
        # A query before k_start sees none of these keys: start at their block.
        first = (k_start // block_size) * block_size if causal else 0
        for q_start in range(first, num_queries, block_size):
            q_end = min(q_start + block_size, num_queries)
            q_block = q[..., q_start:q_end, :]
            scores = q_block @ k_block.transpose(-2, -1) * scale  # (..., bq, bk)
            if causal and k_end > q_start + 1:  # the block straddles the diagonal
                q_pos = torch.arange(q_start, q_end, device=q.device).unsqueeze(-1)
                k_pos = torch.arange(k_start, k_end, device=q.device)
                scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
            p = torch.exp(scores - lse[..., q_start:q_end, :])  # the weights, recomputed
            d_o = grad_out[..., q_start:q_end, :]  # (..., bq, value_dim)
            dv[..., k_start:k_end, :] += p.transpose(-2, -1) @ d_o
            dp = d_o @ v_block.transpose(-2, -1)  # (..., bq, bk)
            ds = p * (dp - delta[..., q_start:q_end, :])  # through the softmax
            dq[..., q_start:q_end, :] += ds @ k_block * scale
            dk[..., k_start:k_end, :] += ds.transpose(-2, -1) @ q_block * scale
    if group > 1:  # each key/value head served `group` query heads: add their gradients
        dk = dk.unflatten(-3, (k.shape[-3], group)).sum(dim=-3)
        dv = dv.unflatten(-3, (v.shape[-3], group)).sum(dim=-3)
    return dq, dk, dv


class TiledAttentionFunction(torch.autograd.Function):
    """:func:`~attention.tiled.tiled_attention` forward, :func:`tiled_attention_backward` backward.

    The forward pass saves ``q``, ``k``, ``v``, the output and its log-sum-exp, nothing
    of size ``num_queries * num_keys``. Call it through :func:`flash_attention`.
    """

    @staticmethod
    def forward(ctx, q, k, v, causal, block_size):
        out, lse = tiled_attention(q, k, v, causal=causal, block_size=block_size, return_lse=True)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.block_size = causal, block_size
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = tiled_attention_backward(
            q, k, v, out, lse, grad_out, causal=ctx.causal, block_size=ctx.block_size
        )
        return dq, dk, dv, None, None


def flash_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    block_size: int = 64,
) -> torch.Tensor:
    """Tiled attention whose backward pass recomputes the weights: FlashAttention.

    Computes what :func:`~attention.tiled.tiled_attention` computes; under autograd it keeps
    only ``q``, ``k``, ``v``, the output and the log-sum-exp for the backward pass,
    which :func:`tiled_attention_backward` runs block by block.

    Parameters
    ----------
    q, k, v, causal, block_size
        As for :func:`~attention.tiled.tiled_attention` (grouped heads allowed).

    Returns
    -------
    torch.Tensor, shape (..., num_heads, num_queries, value_dim)

    Examples
    --------
    >>> import torch
    >>> from torch.nn import functional as F
    >>> _ = torch.manual_seed(0)
    >>> q = torch.randn(1, 4, 6, 8, dtype=torch.float64, requires_grad=True)
    >>> k = torch.randn(1, 2, 6, 8, dtype=torch.float64, requires_grad=True)  # GQA
    >>> v = torch.randn(1, 2, 6, 8, dtype=torch.float64, requires_grad=True)
    >>> out = flash_attention(q, k, v, causal=True, block_size=4)  # (1, 4, 6, 8)
    >>> out.grad_fn.name()
    'TiledAttentionFunctionBackward'
    >>> out.sum().backward()
    >>> grad = torch.autograd.grad(
    ...     F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).sum(),
    ...     k,
    ... )[0]
    >>> torch.allclose(k.grad, grad)
    True
    """
    _qkv("flash_attention", q, k, v, causal)
    block_size = _checks.positive_int("flash_attention", "block_size", block_size)
    return TiledAttentionFunction.apply(q, k, v, causal, block_size)


def saved_bytes(fn: Callable[..., object], *args: object, **kwargs: object) -> int:
    """How many bytes of tensors autograd saves for the backward pass of ``fn(*args)``.

    Counted with ``torch.autograd.graph.saved_tensors_hooks`` while ``fn`` runs: every
    tensor an operation (or a ``torch.autograd.Function``) saves, each tensor once.
    On the ``"meta"`` device the operations run on shapes alone, so the count costs no
    memory at any length, and it is the count a CPU gives.

    Parameters
    ----------
    fn : callable
        Called as ``fn(*args, **kwargs)``; its inputs should require gradients.

    Returns
    -------
    int
        The bytes saved, ``sum(t.numel() * t.element_size())``.

    Examples
    --------
    >>> import torch
    >>> q, k, v = (torch.randn(4096, 64, device="meta", requires_grad=True) for _ in range(3))
    >>> def plain(q, k, v):
    ...     return torch.softmax(q @ k.T / 8, dim=-1) @ v
    >>> saved_bytes(plain, q, k, v) > 4096 * 4096 * 4  # at least one (T, T) matrix
    True
    >>> saved_bytes(flash_attention, q, k, v, block_size=1024)  # q, k, v, out and lse
    4210688
    >>> 4 * 4096 * 64 * 4 + 4096 * 4
    4210688
    """
    if not callable(fn):
        raise TypeError(f"saved_bytes: fn must be a callable, got {type(fn).__name__}")
    sizes: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        sizes[id(t)] = t.numel() * t.element_size()  # the graph keeps t alive, so ids stay
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args, **kwargs)
    return sum(sizes.values())
