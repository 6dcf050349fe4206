"""What a cache needs per token of context, from its sizes alone.

:func:`kv_cache_bytes_per_token` for keys and values (:mod:`attention.kv_cache`),
:func:`latent_cache_bytes_per_token` for MLA's latent (:mod:`attention.latent`). They
do arithmetic on sizes and never build a tensor, so this module imports no ``torch``:
the atlas's cost functions (:mod:`attention.models`) run where torch is absent, in the
site's calculator, which runs them in the browser. A dtype is a ``torch.dtype`` or its
size in bytes; the default, 4, is float32's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attention import _checks

if TYPE_CHECKING:
    import torch

__all__ = ["kv_cache_bytes_per_token", "latent_cache_bytes_per_token"]


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype | int = 4
) -> int:
    """Bytes a key-value cache needs per token of context.

    ``2 * layers * kv_heads * head_dim * bytes per number``; the 2 counts the key and
    the value.

    Parameters
    ----------
    num_layers : int
        Attention layers, each with its own cache.
    num_kv_heads : int
        Key/value heads per layer (``num_key_value_heads`` in a ``transformers``
        config; equal to the number of query heads without grouped-query attention).
    head_dim : int
        Size of each key and value vector.
    dtype : torch.dtype or int
        The cache's number type, or its size in bytes.

    Examples
    --------
    >>> import torch
    >>> kv_cache_bytes_per_token(32, 8, 128, torch.bfloat16)  # Llama 3 8B: 128 KiB per token
    131072
    >>> kv_cache_bytes_per_token(12, 12, 64, torch.float32)  # GPT-2 small
    73728
    """
    owner = "kv_cache_bytes_per_token"
    num_layers = _checks.positive_int(owner, "num_layers", num_layers)
    num_kv_heads = _checks.positive_int(owner, "num_kv_heads", num_kv_heads)
    head_dim = _checks.positive_int(owner, "head_dim", head_dim)
    return 2 * num_layers * num_kv_heads * head_dim * _checks.dtype_bytes(owner, dtype)


def latent_cache_bytes_per_token(
    num_layers: int,
    kv_lora_rank: int,
    qk_rope_head_dim: int,
    dtype: torch.dtype | int = 4,
) -> int:
    """Bytes an MLA cache needs per token: ``layers * (kv_lora_rank + qk_rope_head_dim) * size``.

    No factor 2 and no heads: one latent and one shared rotary key per token and layer.

    Examples
    --------
    >>> import torch
    >>> latent_cache_bytes_per_token(61, 512, 64, torch.bfloat16)  # DeepSeek-V3: about 69 KiB
    70272
    """
    owner = "latent_cache_bytes_per_token"
    num_layers = _checks.positive_int(owner, "num_layers", num_layers)
    kv_lora_rank = _checks.positive_int(owner, "kv_lora_rank", kv_lora_rank)
    qk_rope_head_dim = _checks.positive_int(owner, "qk_rope_head_dim", qk_rope_head_dim)
    return num_layers * (kv_lora_rank + qk_rope_head_dim) * _checks.dtype_bytes(owner, dtype)
