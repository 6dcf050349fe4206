"""Rotary position embeddings (RoPE), as Llama, Mistral and DeepSeek apply them.

RoPE tells attention where each token sits by *rotating* its query and key: the
``head_dim`` numbers are taken as ``head_dim / 2`` pairs, and pair ``i`` of the token
at position ``p`` turns by the angle ``p * base ** (-2 i / head_dim)``. A query at
position ``m`` and a key at position ``n`` then meet at an angle that depends only on
``m - n``, so the scores see relative positions, whatever the absolute ones.

Two layouts pair the numbers differently:

* **half-split** (:func:`~attention.apply_rope`): number ``j`` pairs with number
  ``j + head_dim / 2``. This is the layout of ``transformers``' ``apply_rotary_pos_emb``
  with ``rotate_half``, used by Llama, Mistral and most checkpoints on the Hub.
* **interleaved** (:func:`~attention.apply_rope_interleaved`): neighbours ``(0, 1), (2, 3), ...``
  pair up, as in the RoFormer paper, Meta's original Llama code and DeepSeek's weights.

The two differ only by a fixed permutation of the head dimensions, so a model trained
with one runs with the other once the rows of its query and key weights are permuted.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention import _checks

__all__ = ["apply_rope", "apply_rope_interleaved"]


def _inverse_frequencies(head_dim: int, base: float, device: torch.device) -> torch.Tensor:
    """``base ** (-2 i / head_dim)`` for each pair ``i``, in float64: ``(head_dim / 2,)``."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim
    return 1.0 / base**exponents  # one speed per pair, fastest first


def _cos_sin(
    positions: torch.Tensor, head_dim: int, base: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` of each position's angles, each ``(..., num_tokens, head_dim / 2)``.

    Unchecked. The angles are float64 whatever ``dtype``: at position 4000 a float32
    angle is already off by about 2e-4 radians.
    """
    inv_freq = _inverse_frequencies(head_dim, base, positions.device)
    angles = positions.to(torch.float64)[..., None] * inv_freq
    return angles.cos().to(dtype), angles.sin().to(dtype)


# (head_dim, base, device, dtype) -> cos and sin of positions 0, 1, ..., n - 1, shared by
# every module and head that rotates with these settings (a model's layers, say).
_TABLES: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def _cos_sin_range(
    start: int, num_tokens: int, head_dim: int, base: float, x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``_cos_sin`` of positions ``start ... start + num_tokens - 1``, for ``x``'s device and dtype.

    Unchecked. Rows of a table computed once, the way :func:`_cos_sin` computes them,
    and grown (doubled) when a later position is asked for, so a decoding step only
    slices it. Each row is the same elementwise float64 computation either way.
    """
    key = (head_dim, float(base), x.device, x.dtype)
    stop = start + num_tokens
    tables = _TABLES.get(key)
    if tables is None or tables[0].shape[0] < stop:
        length = max(stop, 2 * (0 if tables is None else tables[0].shape[0]), 64)
        # A plain tensor even when the first call runs under inference_mode, so that a
        # later training forward can save it for backward.
        with torch.inference_mode(False), torch.no_grad():
            positions = torch.arange(length, device=x.device)
            tables = _TABLES[key] = _cos_sin(positions, head_dim, base, x.dtype)
    cos, sin = tables
    return cos[start:stop], sin[start:stop]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The half-split rotation of :func:`apply_rope`, given its ``cos`` and ``sin``. Unchecked."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]  # each (..., num_tokens, head_dim / 2)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _angles(
    owner: str,
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | None,
    base: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check the arguments; return ``cos`` and ``sin``, each ``(..., num_tokens, head_dim / 2)``."""
    x = _checks.float_tensor(owner, "x", x)
    if x.dim() < 2:
        raise ValueError(
            f"{owner}: expected x of shape (..., num_tokens, head_dim), "
            f"got a {x.dim()}-D tensor of shape {tuple(x.shape)}"
        )
    num_tokens, head_dim = x.shape[-2:]
    if head_dim % 2:
        raise ValueError(
            f"{owner}: head_dim must be even, since RoPE rotates pairs of numbers, "
            f"got head_dim={head_dim} (x of shape {tuple(x.shape)})"
        )
    if isinstance(base, bool) or not isinstance(base, int | float) or not base > 1:
        raise ValueError(f"{owner}: base must be a number greater than 1, got {base!r}")
    if positions is None:
        return _cos_sin_range(0, num_tokens, head_dim, base, x)
    positions = torch.as_tensor(positions, device=x.device)
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise ValueError(
            f"{owner}: positions must be integers (token indices), got dtype {positions.dtype}"
        )
    if positions.dim() == 0 or positions.shape[-1] != num_tokens:
        raise ValueError(
            f"{owner}: expected positions of shape (num_tokens,) or (..., num_tokens) with "
            f"num_tokens={num_tokens}, got shape {tuple(positions.shape)}"
        )
    return _cos_sin(positions, head_dim, base, x.dtype)


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | None = None,
    base: float = 10000.0,
) -> torch.Tensor:
    """Rotate queries or keys by their positions, in the half-split layout.

    Number ``j < head_dim / 2`` of each vector pairs with number ``j + head_dim / 2``;
    pair ``j`` at position ``p`` turns by ``p * base ** (-2 j / head_dim)`` radians.
    This is ``q * cos + rotate_half(q) * sin`` of ``transformers``.

    Parameters
    ----------
    x : torch.Tensor, shape (..., num_tokens, head_dim)
        Queries or keys, e.g. ``(batch, num_heads, num_tokens, head_dim)``; ``head_dim``
        must be even.
    positions : torch.Tensor or sequence of int, shape (num_tokens,) or (..., num_tokens), optional
        Each token's position, broadcast against ``x``'s leading dimensions.
        Default ``0, 1, ..., num_tokens - 1``.
    base : float
        Sets the slowest rotation: pair ``j`` turns once every
        ``2 pi * base ** (2 j / head_dim)`` positions. Llama 2 uses 10000, Llama 3 500000.

    Returns
    -------
    torch.Tensor, same shape and dtype as ``x``
        Every pair keeps its length; only its direction changes.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[1.0, 1.0, 0.0, 0.0]]).repeat(3, 1)  # 3 tokens, head_dim 4
    >>> apply_rope(x)  # pair (0, 2) turns by 1 radian per position, pair (1, 3) by 0.01
    tensor([[ 1.0000,  1.0000,  0.0000,  0.0000],
            [ 0.5403,  0.9999,  0.8415,  0.0100],
            [-0.4161,  0.9998,  0.9093,  0.0200]])
    >>> q, k = torch.randn(2, 8), torch.randn(2, 8)
    >>> near = apply_rope(q, [3, 1]) @ apply_rope(k, [3, 1]).T
    >>> far = apply_rope(q, [103, 101]) @ apply_rope(k, [103, 101]).T
    >>> torch.allclose(near, far, atol=1e-4)  # scores see only relative positions
    True
    """
    cos, sin = _angles("apply_rope", x, positions, base)  # (..., num_tokens, head_dim / 2)
    return _rotate(x, cos, sin)


def apply_rope_interleaved(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | None = None,
    base: float = 10000.0,
) -> torch.Tensor:
    """Rotate queries or keys by their positions, in the interleaved layout.

    Neighbours ``(x[2 j], x[2 j + 1])`` form pair ``j``, which turns by
    ``p * base ** (-2 j / head_dim)`` radians at position ``p``. Same arguments,
    shapes and errors as :func:`apply_rope`; the two agree once the head dimensions
    are reordered evens first, odds second:

    Examples
    --------
    >>> import torch
    >>> x = torch.randn(2, 5, 8)  # (batch, num_tokens, head_dim)
    >>> evens_then_odds = torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)
    >>> rotated = apply_rope_interleaved(x)
    >>> torch.allclose(torch.cat((rotated[..., 0::2], rotated[..., 1::2]), dim=-1),
    ...                apply_rope(evens_then_odds), atol=1e-6)
    True
    """
    cos, sin = _angles("apply_rope_interleaved", x, positions, base)
    even, odd = x[..., 0::2], x[..., 1::2]  # each (..., num_tokens, head_dim / 2)
    # stack puts each rotated pair back side by side: (..., head_dim / 2, 2) -> head_dim
    rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
    return rotated.flatten(-2)
