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
    """The keys and values of the tokens one attention layer has seen, or of its last ones.

    Pass it to a module's forward pass, ``module(x, cache=cache)``: the module
    appends the new tokens' keys and values (:meth:`update`) and attends over all of
    them. The first call with several tokens is the *prefill*; each later call with
    one token is a *decode* step. A cache belongs to one layer and one batch.

    A module with a ``window`` (or a ``chunk``) makes it a *rolling* cache: after each
    call it keeps only the tokens the next query can still see, so it never holds more
    than ``window - 1`` tokens (as ``transformers``' ``DynamicSlidingWindowLayer``
    does; the next token brings the window's last one), and with ``chunk`` only the
    tokens of the current chunk. During a call the module attends over the cached
    tokens and all the new ones, so a long prefill is held whole until it returns.
    :attr:`seen_tokens` counts every token appended, dropped or not: the positions of
    new tokens continue from it, while ``len(cache)`` counts the tokens held. Once it
    has dropped tokens, only a module whose ``window`` or ``chunk`` it still covers
    can go on with it: any other would miss keys, so it raises a ``ValueError``, as
    does :meth:`update`.

    Attributes
    ----------
    keys, values : torch.Tensor or None
        ``(batch, num_kv_heads, num_cached, head_dim)`` for attention modules (any
        ``(..., num_cached, dim)`` in general), in token order, oldest first; ``None``
        while empty. In a rolling cache, the last ``len(cache)`` tokens seen.

    The keys and values are views of a storage with room for more tokens (a quarter
    more, at least 16), so a decoding step writes its one token in place instead of
    copying the whole cache, as ``torch.cat`` (and ``transformers``' ``DynamicCache``)
    does; the storage grows by copying only when it is full. A rolling cache's storage
    has the same room after the ``window - 1`` tokens it keeps, and when a step finds no
    room left, the kept tokens move to its front, one copy of the window every quarter
    window of steps, and the storage never grows. While gradients flow
    through the new keys or values, each step makes new tensors instead, so that
    autograd sees every step's tensors unchanged.

    Examples
    --------
    >>> import torch
    >>> cache = KVCache()
    >>> k, v = cache.update(torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4))  # prefill 5 tokens
    >>> k, v = cache.update(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))  # decode one more
    >>> len(cache), cache.seen_tokens, cache.shape
    (6, 6, torch.Size([1, 2, 6, 4]))
    >>> cache.nbytes == 2 * 6 * 2 * 4 * 4  # keys and values, tokens, heads, head_dim, float32
    True

    A module with a window of 4 keeps the last 3 tokens; the positions go on counting:

    >>> from attention import GroupedQueryAttention
    >>> local = GroupedQueryAttention(3, 4, 100, num_heads=2, num_kv_heads=1, window=4)
    >>> cache = KVCache()
    >>> _ = local(torch.randn(1, 10, 3), cache=cache)  # a prefill of 10 tokens
    >>> _ = local(torch.randn(1, 1, 3), cache=cache)  # one more
    >>> len(cache), cache.seen_tokens
    (3, 11)
    """

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        # What keys and values view: len(self) tokens from self._start on, and room after.
        self._key_storage: torch.Tensor | None = None
        self._value_storage: torch.Tensor | None = None
        self._start = 0
        self._seen = 0

    def __len__(self) -> int:
        """How many tokens the cache holds (fewer than :attr:`seen_tokens` once it rolls)."""
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def seen_tokens(self) -> int:
        """How many tokens have been appended in all, including those a rolling cache dropped.

        The next token's position. It equals ``len(cache)`` until a window drops tokens.
        """
        return self._seen

    @property
    def shape(self) -> torch.Size | None:
        """The cached keys' shape, ``(batch, num_kv_heads, num_cached, head_dim)``, or ``None``."""
        return None if self.keys is None else self.keys.shape

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values together (the tokens held, not the room)."""
        if self.keys is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    def update(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        *,
        window: int | None = None,
        chunk: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values; return everything cached, new tokens last.

        Parameters
        ----------
        keys : torch.Tensor, shape (..., num_new, key_dim)
        values : torch.Tensor, shape (..., num_new, value_dim)
            Same leading dimensions as ``keys`` (and as what is cached), same dtype.
        window, chunk : int, optional
            Roll as the cache of a module with this ``window`` (or ``chunk``) does:
            afterwards hold only the ``window - 1`` last tokens (or those of the
            current chunk). At most one of the two.

        Returns
        -------
        (keys, values) : tuple of torch.Tensor
            Shapes ``(..., num_cached + num_new, key_dim)`` and ``(..., ..., value_dim)``,
            every token held before the call and the new ones: views of the cache's
            storage (or, after a prefill longer than a rolling cache's storage, a new
            tensor), which a later update may write into (``.clone()`` them to keep them).

        Examples
        --------
        >>> import torch
        >>> cache = KVCache()
        >>> steps = torch.arange(6.0).view(1, 1, 6, 1)  # six tokens, one number each
        >>> keys, _ = cache.update(steps, steps, window=4)
        >>> keys.flatten().tolist(), cache.keys.flatten().tolist(), cache.seen_tokens
        ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [3.0, 4.0, 5.0], 6)
        """
        owner = type(self).__name__
        window, chunk = _local_sizes(owner, window, chunk)
        keys = _checks.float_tensor(owner, "keys", keys)
        values = _checks.float_tensor(owner, "values", values)
        if keys.dim() < 2 or keys.shape[:-1] != values.shape[:-1] or keys.dtype != values.dtype:
            raise ValueError(
                f"{owner}: keys and values must be (..., num_new, dim) tensors of the same "
                f"dtype and leading shape, got keys of shape {tuple(keys.shape)} ({keys.dtype}) "
                f"and values of shape {tuple(values.shape)} ({values.dtype})"
            )
        return self._append(keys, values, window=window, chunk=chunk)

    def _append(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        *,
        window: int | None = None,
        chunk: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`update` for a module's own keys and values, known to be alike.

        Checks only that they fit what is cached (the cache was the caller's to pass),
        and that it still holds every key the new queries may see: all of them without
        ``window`` or ``chunk``, so a cache that rolled serves only a local module, and
        a :meth:`crop` after rolling can leave a window short. With ``window`` or
        ``chunk`` (a local module's, checked already) the cache rolls: after the
        append it keeps only the keys the next query may see. Returns all the keys and
        values to attend over: the cached ones and the new ones.
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
        held, num_new = len(self), keys.shape[-2]
        _check_reach(owner, self._seen, held, window, chunk)
        keep = limit = None
        if window is not None or chunk is not None:
            keep, limit = _rolling_keep(self._seen + num_new, window, chunk)
        storage = self._key_storage
        tracked = torch.is_grad_enabled() and (keys.requires_grad or values.requires_grad)
        if tracked or (storage is not None and storage.requires_grad):
            # Autograd keeps earlier steps' keys for backward: no writing in place.
            if self.keys is not None:
                keys = torch.cat((self.keys, keys), dim=-2)  # (..., held + num_new, key_dim)
                values = torch.cat((self.values, values), dim=-2)
            self._key_storage, self._value_storage, self._start = keys, values, 0
            return self._keep(keys, values, 0, keep, num_new)
        usable = storage is not None and not (
            storage.is_inference() and not torch.is_inference_mode_enabled()
        )
        room = storage.shape[-2] - self._start - held if usable else 0
        if num_new <= room:  # write in place after the cached tokens
            start = self._start
        elif keep is None:  # a growing cache: a larger storage, the cached tokens first
            stop = held + num_new
            capacity = stop + max(stop // 4, 16)
            self._key_storage = self._grow(self.keys, keys, capacity)
            self._value_storage = self._grow(self.values, values, capacity)
            start = 0
        else:
            capacity = limit + max(limit // 4, 16)
            if held + num_new > capacity:
                # More new tokens than the rolling storage holds (a long prefill): attend
                # over the whole sequence, a new tensor, and store its last `keep` tokens.
                if self.keys is not None:
                    keys = torch.cat((self.keys, keys), dim=-2)
                    values = torch.cat((self.values, values), dim=-2)
                if not usable or storage.shape[-2] < keep:
                    self._key_storage = self._grow(None, keys, capacity)
                    self._value_storage = self._grow(None, values, capacity)
                self._key_storage[..., :keep, :] = keys[..., keys.shape[-2] - keep :, :]
                self._value_storage[..., :keep, :] = values[..., values.shape[-2] - keep :, :]
                self._seen += num_new
                self._start = 0
                self.keys = self._key_storage[..., :keep, :]
                self.values = self._value_storage[..., :keep, :]
                return keys, values
            if not usable or storage.shape[-2] < held + num_new:
                self._key_storage = self._grow(self.keys, keys, capacity)
                self._value_storage = self._grow(self.values, values, capacity)
            elif held:  # no room after the kept tokens: move them to the front
                for kept, cached in (
                    (self._key_storage, self.keys),
                    (self._value_storage, self.values),
                ):
                    # a copy first where the two places overlap
                    kept[..., :held, :] = cached.clone() if self._start < held else cached
            start = 0
        stop = start + held + num_new
        self._key_storage[..., start + held : stop, :] = keys  # only the new tokens are copied
        self._value_storage[..., start + held : stop, :] = values
        # (..., held + num_new, key_dim): the cached tokens, then the new ones
        keys = self._key_storage[..., start:stop, :]
        values = self._value_storage[..., start:stop, :]
        return self._keep(keys, values, start, keep, num_new)

    def _keep(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        start: int,
        keep: int | None,
        num_new: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Hold the last ``keep`` (or all) of ``keys`` and ``values``, which begin at
        ``start`` in the storage; count the ``num_new`` new tokens; return both whole."""
        self._seen += num_new
        drop = 0 if keep is None else max(keys.shape[-2] - keep, 0)
        self._start = start + drop
        self.keys, self.values = keys, values
        if drop:
            self.keys, self.values = keys[..., drop:, :], values[..., drop:, :]
        return keys, values

    @staticmethod
    def _grow(cached: torch.Tensor | None, new: torch.Tensor, capacity: int) -> torch.Tensor:
        """New storage for ``capacity`` tokens shaped like ``new``, starting with ``cached``."""
        storage = new.new_empty((*new.shape[:-2], capacity, new.shape[-1]))
        if cached is not None:
            storage[..., : cached.shape[-2], :] = cached
        return storage

    def crop(self, length: int) -> None:
        """Forget every token from position ``length`` on (to retry a step, or reuse a prompt).

        ``length`` counts tokens seen, as :attr:`seen_tokens` does, which becomes
        ``length``. Nothing is copied or freed: the next update writes over the
        forgotten tokens. A rolling cache that has dropped its first tokens cannot go
        back past them (a ``ValueError``). Going back at all leaves a window's cache
        short of the keys that the next token should see, so the module refuses to
        decode with it; a chunk's cache can go back within the current chunk.
        """
        owner = type(self).__name__
        length = _checks.positive_int(owner, "length", length)
        dropped = self._seen - len(self)
        if length > self._seen:
            has = "holds" if not dropped else "has seen"
            raise ValueError(
                f"{owner}: cannot crop to {length} tokens, the cache {has} only {self._seen}"
            )
        if length < dropped:
            raise ValueError(
                f"{owner}: cannot crop to {length} tokens: this rolling cache has seen "
                f"{self._seen} tokens and dropped the first {dropped} of them (it holds "
                f"the last {len(self)}); start a new KVCache to go back further"
            )
        self.keys = self.keys[..., : length - dropped, :]
        self.values = self.values[..., : length - dropped, :]
        self._seen = length

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        return (
            f"{type(self).__name__}(tokens={len(self)}, seen_tokens={self._seen}, "
            f"keys shape={shape}, nbytes={self.nbytes})"
        )


def _rolling_keep(seen: int, window: int | None, chunk: int | None) -> tuple[int, int]:
    """How many of the ``seen`` tokens a local module's cache keeps, and the most it ever keeps.

    The next query, at position ``seen``, sees ``window - 1`` tokens before itself, or
    those of its own chunk before it: ``seen % chunk`` of them.
    """
    if window is not None:
        return min(window - 1, seen), window - 1
    return seen % chunk, chunk - 1


def _check_reach(owner: str, seen: int, held: int, window: int | None, chunk: int | None) -> None:
    """Raise unless the cache holds every cached key the next query (position ``seen``) sees.

    Without ``window`` or ``chunk`` it sees every earlier token, so none may be dropped.
    """
    if window is not None:
        first, local = max(seen - window + 1, 0), f"window={window}"
    elif chunk is not None:
        first, local = seen // chunk * chunk, f"chunk={chunk}"
    else:
        first, local = 0, "no window or chunk"
    if seen - held > first:
        raise ValueError(
            f"{owner}: the cache has seen {seen} tokens but holds only the last {held}, "
            f"while the next token, at position {seen}, sees the keys from position "
            f"{first} on ({local}); a rolling cache cannot be cropped back, nor serve a "
            "module with a wider window or none: start a new KVCache"
        )


def _local_sizes(owner: str, window: object, chunk: object) -> tuple[int | None, int | None]:
    """Check a ``window`` and a ``chunk`` (each None or an integer >= 1, not both)."""
    if window is not None:
        window = _checks.positive_int(owner, "window", window)
    if chunk is not None:
        chunk = _checks.positive_int(owner, "chunk", chunk)
        if window is not None:
            raise ValueError(
                f"{owner}: give window (a sliding window) or chunk (chunked local "
                f"attention), not both, got window={window} and chunk={chunk}"
            )
    return window, chunk
