"""Llama 4's NoPE layers: no rotation, and queries that warm with their position.

Llama 4 leaves RoPE out of every fourth layer (chapter 18's NoPE). With no position
in the scores, a query far into a long text competes with ever more keys, and its
softmax flattens; Llama 4 scales each query up with the logarithm of its position
to keep it sharp (``attn_temperature_tuning``).
"""

from __future__ import annotations

import torch

from attention import _checks
from attention.gqa import GroupedQueryAttention

__all__ = ["NoPEWithTemperature"]


class NoPEWithTemperature(GroupedQueryAttention):
    """Llama 4's NoPE layer: no rotation, and each query scaled up with its position.

    The query at position ``p`` is multiplied by
    ``1 + attn_scale * log(1 + floor((p + 1) / floor_scale))``, 1 for the first
    ``floor_scale - 1`` positions and then growing like the logarithm of the keys it
    competes with (``attn_temperature_tuning`` in ``Llama4TextAttention``). Takes
    :class:`~attention.GroupedQueryAttention`'s arguments, without RoPE.

    Examples
    --------
    >>> import torch
    >>> layer = NoPEWithTemperature(8, 8, 6, num_heads=2, num_kv_heads=1,
    ...                             attn_scale=0.1, floor_scale=2)
    >>> q, k = torch.ones(1, 2, 6, 4), torch.ones(1, 1, 6, 4)
    >>> [round(f, 4) for f in layer._rotate(q, k, 0)[0][0, 0, :, 0].tolist()]
    [1.0, 1.0693, 1.0693, 1.1099, 1.1099, 1.1386]
    """

    def __init__(self, *args, attn_scale: float, floor_scale: int, **kwargs):
        super().__init__(*args, **kwargs)
        owner = type(self).__name__
        if self.rotary is not None:
            raise ValueError(f"{owner}: a NoPE layer takes no rope_base or rotary")
        if isinstance(attn_scale, bool) or not isinstance(attn_scale, int | float):
            raise TypeError(f"{owner}: attn_scale must be a number, got {attn_scale!r}")
        self.attn_scale = float(attn_scale)
        self.floor_scale = _checks.positive_int(owner, "floor_scale", floor_scale)

    def _rotate(
        self, queries: torch.Tensor, keys: torch.Tensor, start: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """No rotation; the queries at positions ``start ...`` times their temperature."""
        stop = start + queries.shape[2]
        positions = torch.arange(start, stop, device=queries.device, dtype=queries.dtype)
        steps = torch.floor((positions + 1) / self.floor_scale)
        factor = 1 + self.attn_scale * torch.log1p(steps)  # (num_tokens,)
        return queries * factor[:, None], keys
