"""The key-value cache: generate one token at a time without recomputing the past.

A decoder writes text one token at a time, and each new token attends to every
token before it. The keys and values of those earlier tokens never change (a token
only looks back), so recomputing them at every step is wasted work: a
:class:`KVCache` keeps them, and each step projects only the newest token.

The price is memory. Per token and layer the cache holds one key and one value per
key/value head, so a model needs :func:`~attention.kv_cache_bytes_per_token`
``= 2 * layers * kv_heads * head_dim * bytes per number`` for each token of context;
that is what grouped-query and latent attention shrink.
"""

from __future__ import annotations

import torch

from attention import _checks

__all__ = ["KVCache", "kv_cache_bytes_per_token"]


def _dtype_bytes(owner: str, dtype: object) -> int:
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    return _checks.positive_int(owner, "dtype (a torch.dtype or a number of bytes)", dtype)


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype | int = torch.float32
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
    return 2 * num_layers * num_kv_heads * head_dim * _dtype_bytes(owner, dtype)


class KVCache:
    """The keys and values of every token one attention layer has seen so far.

    Pass it to a module's forward pass, ``module(x, cache=cache)``: the module
    appends the new tokens' keys and values (:meth:`update`) and attends over all of
    them. The first call with several tokens is the *prefill*; each later call with
    one token is a *decode* step. A cache belongs to one layer and one batch.

    Attributes
    ----------
    keys, values : torch.Tensor or None
        ``(batch, num_kv_heads, num_cached, head_dim)`` for attention modules (any
        ``(..., num_cached, dim)`` in general); ``None`` while empty.

    The keys and values are views of a storage with room for more tokens (a quarter
    more, at least 16), so a decoding step writes its one token in place instead of
    copying the whole cache, as ``torch.cat`` (and ``transformers``' ``DynamicCache``)
    does; the storage grows by copying only when it is full. While gradients flow
    through the new keys or values, each step makes new tensors instead, so that
    autograd sees every step's tensors unchanged.

    Examples
    --------
    >>> import torch
    >>> cache = KVCache()
    >>> k, v = cache.update(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))  # prefill 5 tokens
    >>> k, v = cache.update(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))  # decode one more
    >>> len(cache), cache.shape
    (6, torch.Size([1, 2, 6, 4]))
    >>> cache.nbytes == 2 * 6 * 2 * 4 * 4  # keys and values, tokens, heads, head_dim, float32
    True
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        # What keys and values view: their first len(self) tokens, and room after them.
        self._key_storage: torch.Tensor | None = None
        self._value_storage: torch.Tensor | None = None

    def __len__(self) -> int:
        """How many tokens the cache holds."""
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def shape(self) -> torch.Size | None:
        """The cached keys' shape, ``(batch, num_kv_heads, num_cached, head_dim)``, or ``None``."""
        return None if self.keys is None else self.keys.shape

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values together."""
        if self.keys is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values; return everything cached, new tokens last.

        Parameters
        ----------
        keys : torch.Tensor, shape (..., num_new, key_dim)
        values : torch.Tensor, shape (..., num_new, value_dim)
            Same leading dimensions as ``keys`` (and as what is cached), same dtype.

        Returns
        -------
        (keys, values) : tuple of torch.Tensor
            Shapes ``(..., num_cached + num_new, key_dim)`` and ``(..., ..., value_dim)``:
            views of the cache's storage, which a later update writes into after a
            :meth:`crop` (``.clone()`` them to keep them).
        """
        owner = type(self).__name__
        keys = _checks.float_tensor(owner, "keys", keys)
        values = _checks.float_tensor(owner, "values", values)
        if keys.dim() < 2 or keys.shape[:-1] != values.shape[:-1] or keys.dtype != values.dtype:
            raise ValueError(
                f"{owner}: keys and values must be (..., num_new, dim) tensors of the same "
                f"dtype and leading shape, got keys of shape {tuple(keys.shape)} ({keys.dtype}) "
                f"and values of shape {tuple(values.shape)} ({values.dtype})"
            )
        return self._append(keys, values)

    def _append(
        self, keys: torch.Tensor, values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`update` for a module's own keys and values, known to be alike.

        Checks only that they fit what is cached: the cache was the caller's to pass.
        """
        owner = type(self).__name__
        pairs = (("keys", keys, self.keys), ("values", values, self.values))
        for name, new, old in pairs if self.keys is not None else ():
            if new.shape[:-2] != old.shape[:-2] or new.shape[-1] != old.shape[-1]:
                raise ValueError(
                    f"{owner}: new {name} of shape {tuple(new.shape)} do not fit the cached "
                    f"{name} of shape {tuple(old.shape)}: all but the token dimension (-2) "
                    "must match. A cache belongs to one layer and one batch; use a new "
                    "KVCache for another."
                )
            if new.dtype != old.dtype:
                raise ValueError(
                    f"{owner}: new {name} are {new.dtype} but the cached {name} are {old.dtype}"
                )
        num_cached = len(self)
        stop = num_cached + keys.shape[-2]
        storage = self._key_storage
        tracked = torch.is_grad_enabled() and (keys.requires_grad or values.requires_grad)
        if tracked or (storage is not None and storage.requires_grad):
            # Autograd keeps earlier steps' keys for backward: no writing in place.
            if self.keys is not None:
                keys = torch.cat((self.keys, keys), dim=-2)  # (..., stop, key_dim)
                values = torch.cat((self.values, values), dim=-2)
            self.keys = self._key_storage = keys
            self.values = self._value_storage = values
            return keys, values
        if (
            storage is None
            or storage.shape[-2] < stop
            or (storage.is_inference() and not torch.is_inference_mode_enabled())
        ):
            capacity = stop + max(stop // 4, 16)
            self._key_storage = self._grow(self.keys, keys, capacity)
            self._value_storage = self._grow(self.values, values, capacity)
        self._key_storage[..., num_cached:stop, :] = keys  # only the new tokens are copied
        self._value_storage[..., num_cached:stop, :] = values
        self.keys = self._key_storage[..., :stop, :]  # (..., num_cached + num_new, key_dim)
        self.values = self._value_storage[..., :stop, :]
        return self.keys, self.values

    @staticmethod
    def _grow(cached: torch.Tensor | None, new: torch.Tensor, capacity: int) -> torch.Tensor:
        """New storage for ``capacity`` tokens shaped like ``new``, starting with ``cached``."""
        storage = new.new_empty((*new.shape[:-2], capacity, new.shape[-1]))
        if cached is not None:
            storage[..., : cached.shape[-2], :] = cached
        return storage

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` tokens (to retry a step, or reuse a shared prompt).

        Nothing is copied or freed: the next update writes over the forgotten tokens.
        """
        length = _checks.positive_int(type(self).__name__, "length", length)
        if length > len(self):
            raise ValueError(
                f"{type(self).__name__}: cannot crop to {length} tokens, the cache holds "
                f"only {len(self)}"
            )
        self.keys = self.keys[..., :length, :]
        self.values = self.values[..., :length, :]

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return (
            f"{type(self).__name__}(tokens={len(self)}, keys shape={shape}, nbytes={self.nbytes})"
        )
