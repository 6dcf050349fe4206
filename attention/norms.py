"""RMSNorm: each vector divided by its root mean square, then scaled per dimension.

Today's decoders normalise with RMSNorm (Zhang and Sennrich, 2019) rather than
LayerNorm: no mean is subtracted and there is no bias, only

``x / sqrt(mean(x ** 2) + eps) * weight``

over the last dimension. Inside attention it keeps the queries and keys at a fixed
size before their dot products (QK-norm: Qwen3, OLMo 2, Gemma 3 and 4) and, without
the learnable ``weight``, the values too (Gemma 4's ``v_norm``).
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks

__all__ = ["ProjectionRMSNorm", "RMSNorm"]


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension, with a learnable scale.

    Computed in the input's dtype, so a float64 input is normalised in float64 (some
    ``transformers`` norms compute in float32 whatever the input).

    Parameters
    ----------
    dim : int
        Size of the last dimension of the inputs.
    eps : float
        Added to the mean square before the square root, so that a zero vector stays
        zero; 1e-6 as in Qwen3, OLMo 2, gpt-oss and Gemma.
    elementwise_affine : bool
        Whether the result is multiplied by a learnable ``weight`` of shape ``(dim,)``,
        initialised to ones (the name ``torch.nn.RMSNorm`` uses; ``transformers``' Gemma 4
        calls it ``with_scale``). ``False`` is Gemma 4's value norm: no parameter at all.

    Attributes
    ----------
    weight : nn.Parameter or None
        The scale, of shape ``(dim,)`` (``None`` without ``elementwise_affine``).
        Checkpoints that store a zero-centred scale applied as ``1 + w`` (Gemma,
        Qwen3-Next) map to ``w + 1``.
    eps : float

    Shapes
    ------
    Input ``(..., dim)``; output the same shape and dtype.

    Examples
    --------
    Each row comes out with a root mean square of 1 (up to ``eps``):

    >>> import torch
    >>> norm = RMSNorm(4)
    >>> x = torch.tensor([[3.0, 4.0, 0.0, 0.0], [10.0, 10.0, 10.0, 10.0]])
    >>> y = norm(x)
    >>> torch.allclose(y.pow(2).mean(-1).sqrt(), torch.ones(2))
    True
    >>> torch.allclose(y[1], torch.ones(4))
    True
    >>> RMSNorm(4, elementwise_affine=False).weight is None
    True
    """

    def __init__(self, dim: int, eps: float = 1e-6, *, elementwise_affine: bool = True):
        super().__init__()
        owner = type(self).__name__
        self.dim = _checks.positive_int(owner, "dim", dim)
        self.eps = _checks.positive_number(owner, "eps", eps)
        _checks.flag(owner, "elementwise_affine", elementwise_affine, "a learnable scale or not")
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.dim))
        else:
            self.register_parameter("weight", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x`` over its last dimension, of size ``dim``."""
        expected = f"expected a tensor whose last dimension is dim={self.dim}"
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{type(self).__name__}: {expected}, got {type(x).__name__}")
        if x.dim() < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"{type(self).__name__}: {expected}, got {tuple(x.shape)}")
        return _rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        affine = "" if self.weight is not None else ", elementwise_affine=False"
        return f"{self.dim}, eps={self.eps}{affine}"


class ProjectionRMSNorm(RMSNorm):
    """An :class:`RMSNorm` over every head of a token at once: OLMo 2's QK-norm.

    It takes and returns the per-head layout ``(batch, heads, num_tokens, head_dim)``
    that :class:`~attention.GroupedQueryAttention` hands its ``q_norm`` and ``k_norm``,
    and normalises each token's ``heads * head_dim`` numbers together, as
    ``Olmo2Attention`` does on the projection before the head split: so ``dim`` is
    ``heads * head_dim``, and each dimension of each head has its own weight.

    Examples
    --------
    >>> import torch
    >>> x = torch.randn(1, 2, 3, 4)  # 2 heads of 4
    >>> flat = x.transpose(1, 2).reshape(1, 3, 8)  # the projection, (1, 3, 2 * 4)
    >>> torch.equal(ProjectionRMSNorm(8)(x).transpose(1, 2).reshape(1, 3, 8), RMSNorm(8)(flat))
    True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x``, ``(batch, heads, num_tokens, head_dim)``, over its heads together."""
        batch, heads, num_tokens, head_dim = x.shape
        flat = x.transpose(1, 2).reshape(batch, num_tokens, heads * head_dim)
        normed = super().forward(flat)  # (batch, num_tokens, heads * head_dim)
        return normed.view(batch, num_tokens, heads, head_dim).transpose(1, 2)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x ** 2) + eps) * weight`` over the last dimension, in ``x``'s dtype."""
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return normed if weight is None else normed * weight
