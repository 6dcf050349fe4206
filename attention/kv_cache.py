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
from attention.cache import Cache, _CacheBase
from attention.cache_sizes import kv_cache_bytes_per_token

__all__ = ["KVCache", "kv_cache_bytes_per_token"]


class KVCache(_CacheBase):
    """The keys and values of the tokens one attention layer has seen, or of its last ones.

    Pass it to a layer's forward pass, ``layer(x, cache=cache)``: the layer appends the
    new tokens' keys and values (:meth:`update`) and attends over all of them. The
    first call with several tokens is the *prefill*; each later call with one token is
    a *decode* step. A cache belongs to one layer and one batch.

    Built with a ``window`` (or a ``chunk``), it is the *rolling* cache of a layer with
    that window (or chunk): after each update it keeps only the tokens the next query
    can still see, never more than ``window - 1`` (as ``transformers``'
    ``DynamicSlidingWindowLayer`` does; the next token brings the window's last one),
    and with ``chunk`` only those of the current chunk. :meth:`update` returns the held
    tokens and all the new ones, so a long prefill is attended over whole.
    :attr:`~.Cache.seen_tokens` counts every token appended, dropped or not: the positions of
    new tokens continue from it, while ``len(cache)`` counts the tokens held. A cache
    without a window or chunk keeps every token and serves any layer (its mask picks
    the keys); a rolling cache serves only a layer with its own window or chunk. It
    implements :class:`~attention.KeyValueCache`.

    :meth:`~.Cache.crop` goes back to fewer tokens seen (to retry a step, or reuse a prompt),
    without copying or freeing anything. A rolling cache goes back only as far as it
    still holds every key the next token sees: a window's cache not at all once it
    has dropped tokens, a chunk's within the current chunk (a ``ValueError``
    otherwise). ``crop(0)`` makes any of them as new.

    Parameters
    ----------
    window : int, optional
        Keep the last ``window - 1`` tokens: the cache of a sliding window of
        ``window`` tokens.
    chunk : int, optional
        Keep the tokens of the current chunk of ``chunk`` tokens (chunked local
        attention). Not together with ``window``.

    Attributes
    ----------
    keys, values : torch.Tensor or None
        ``(batch, num_kv_heads, len(cache), head_dim)`` for attention layers (any
        ``(..., len(cache), dim)`` in general): every held token's key and value as
        :meth:`update` received them, oldest first; ``None`` while empty.
    window, chunk : int or None
        The rolling policy, fixed at construction.
    reindexes_positions : bool
        ``False``: new tokens sit at positions :attr:`~.Cache.seen_tokens` onwards
        (see :class:`~attention.Cache`).

    The keys and values are views of a storage with room for more tokens (a quarter
    more, at least 16), so a decoding step writes its one token in place instead of
    copying the whole cache, as ``torch.cat`` (and ``transformers``' ``DynamicCache``)
    does; the storage grows by copying only when it is full. A rolling cache's storage
    has the same room after the ``window - 1`` tokens it keeps, and when a step finds
    no room left, the kept tokens move to its front, one copy of the window every
    quarter window of steps, and the storage never grows. While gradients flow
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

    A layer with a window of 4 takes a cache with the same window, which keeps the
    last 3 tokens; the positions go on counting:

    >>> from attention import GroupedQueryAttention
    >>> local = GroupedQueryAttention(3, 4, 100, num_heads=2, num_kv_heads=1, window=4)
    >>> cache = KVCache(window=4)
    >>> _ = local(torch.randn(1, 10, 3), cache=cache)  # a prefill of 10 tokens
    >>> _ = local(torch.randn(1, 1, 3), cache=cache)  # one more
    >>> len(cache), cache.seen_tokens
    (3, 11)
    """

    _holds = "a layer's keys and values"
    _layers = ("GroupedQueryAttention", "LightningIndexer")

    def __init__(self, window: int | None = None, chunk: int | None = None) -> None:
        super().__init__()
        self.window, self.chunk = _local_sizes(type(self).__name__, window, chunk)
        most = None if self.chunk is None else self.chunk - 1  # the most tokens ever kept
        most = most if self.window is None else self.window - 1
        self._storage = _Storage(most)

    @property
    def keys(self) -> torch.Tensor | None:
        """The held tokens' keys, ``(..., len(cache), key_dim)``, or ``None`` while empty."""
        return self._storage.part(0)

    @property
    def values(self) -> torch.Tensor | None:
        """The held tokens' values, ``(..., len(cache), value_dim)``, or ``None``."""
        return self._storage.part(1)

    def __len__(self) -> int:
        """How many tokens the cache holds (fewer than it has seen once it rolls)."""
        return self._storage.length

    @property
    def shape(self) -> torch.Size | None:
        """The held keys' shape, ``(batch, num_kv_heads, len(cache), head_dim)``, or ``None``."""
        return None if self.keys is None else self.keys.shape

    @property
    def nbytes(self) -> int:
        """Bytes held by the keys and values together (the tokens held, not the room)."""
        return self._storage.nbytes

    def update(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' keys and values; return every held one, the new ones last.

        Parameters
        ----------
        keys : torch.Tensor, shape (..., num_new, key_dim)
        values : torch.Tensor, shape (..., num_new, value_dim)
            Same leading dimensions as ``keys`` (and as what is held), same dtype.

        Returns
        -------
        (keys, values) : tuple of torch.Tensor
            ``(..., len(cache) + num_new, key_dim)`` and ``(..., ..., value_dim)``: what
            ``torch.cat((cache.keys, keys), dim=-2)`` gives (and the same for the
            values), as views of the cache's storage that a later update may write
            into (``.clone()`` them to keep them). A rolling cache then keeps only
            the last of them.

        Examples
        --------
        >>> import torch
        >>> cache = KVCache(window=4)
        >>> steps = torch.arange(6.0).view(1, 1, 6, 1)  # six tokens, one number each
        >>> keys, _ = cache.update(steps, steps)
        >>> keys.flatten().tolist(), cache.keys.flatten().tolist(), cache.seen_tokens
        ([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], [3.0, 4.0, 5.0], 6)
        """
        owner = type(self).__name__
        keys, values = _check_new(owner, keys, values, self.keys, self.values)
        self._seen += keys.shape[-2]
        # torch.cat((self.keys, keys), dim=-2), and the same for the values, written
        # into room kept after the held tokens: a decoding step copies one token.
        keys, values = self._storage.cat(keys, values)
        if self.window is not None or self.chunk is not None:
            # Keep only the tokens the next one sees: the window's, or its chunk's.
            first = _first_seen(self._seen, self.window, self.chunk)
            self._storage.keep_last(self._seen - first)
        return keys, values

    # crop(length) is the base's (see the class docstring); the next update writes
    # over the forgotten tokens. crop(0) makes a new storage: keys None, any sizes.

    def _why_not_crop(self, length: int) -> str | None:
        dropped, first = self._seen - len(self), _first_seen(length, self.window, self.chunk)
        if dropped <= first:
            return None
        local = f"window={self.window}" if self.window is not None else f"chunk={self.chunk}"
        return (
            f"the next token, at position {length}, would see the keys from position "
            f"{first} on ({local}), but this rolling cache has seen {self._seen} tokens and "
            f"dropped the first {dropped} of them; start a new {type(self).__name__} (or "
            "crop to 0) to go back further"
        )

    def _forget(self, length: int) -> None:
        if not length:
            self._storage = _Storage(self._storage.most)
        else:  # the tokens from `length` on are the last ones held
            self._storage.crop(length - (self._seen - len(self)))

    def __repr__(self) -> str:
        shape = None if self.keys is None else tuple(self.keys.shape)
        policy = "".join(
            f"{name}={value}, "
            for name, value in (("window", self.window), ("chunk", self.chunk))
            if value is not None
        )
        return (
            f"{type(self).__name__}({policy}tokens={len(self)}, seen_tokens={self._seen}, "
            f"keys shape={shape}, nbytes={self.nbytes})"
        )


class _Storage:
    """Two runs of tokens (keys and values) along dim -2, with room after them.

    :meth:`cat` returns what ``torch.cat((held, new), dim=-2)`` would, for each of the
    two, but writes the new tokens into room kept after the held ones, so a decoding
    step copies one token instead of the whole cache. ``most`` is the most tokens a
    rolling cache keeps (``None``: it keeps all): its storage has room for that many
    and a quarter more, and never grows.
    """

    def __init__(self, most: int | None = None) -> None:
        self.most = most
        self.tensors: tuple[torch.Tensor, ...] | None = None  # what ``held`` views
        self.held: tuple[torch.Tensor, ...] | None = None  # the held tokens, oldest first
        self.start = self.length = 0  # where they are in ``tensors``

    @property
    def nbytes(self) -> int:
        return 0 if self.held is None else sum(t.nbytes for t in self.held)

    def part(self, i: int) -> torch.Tensor | None:
        """The held tokens' ``i``-th tensor (0: keys, 1: values), or ``None`` while empty."""
        return None if self.held is None else self.held[i]

    def _view(self, start: int, length: int) -> tuple[torch.Tensor, ...]:
        # Never while empty: crop and keep_last come after an update, as does cat's call.
        assert self.tensors is not None
        self.start, self.length = start, length
        self.held = tuple(t[..., start : start + length, :] for t in self.tensors)
        return self.held

    def cat(self, *new: torch.Tensor) -> tuple[torch.Tensor, ...]:
        held, length, num_new = self.held, self.length, new[0].shape[-2]
        if held is None and num_new == 0:  # nothing held, nothing new: nothing to keep
            return new
        tracked = torch.is_grad_enabled() and any(t.requires_grad for t in new)
        if tracked or (self.tensors is not None and self.tensors[0].requires_grad):
            # Autograd keeps earlier steps' tensors for backward: no writing in place.
            if held is not None:
                new = tuple(torch.cat(pair, dim=-2) for pair in zip(held, new, strict=True))
            self.tensors = new
            self._view(0, new[0].shape[-2])
            return new
        usable = self.tensors is not None and not (
            self.tensors[0].is_inference() and not torch.is_inference_mode_enabled()
        )
        size = self.tensors[0].shape[-2] if usable and self.tensors is not None else 0
        if num_new > size - self.start - length:  # no room after the held tokens
            needed = length + num_new
            most = needed if self.most is None else self.most
            capacity = most + max(most // 4, 16)
            if needed > capacity:
                # A long prefill on a rolling cache: attend over a new tensor, and
                # keep its last `most` tokens (all the cache will hold) in the storage.
                whole = new
                if held is not None:
                    whole = tuple(torch.cat(pair, dim=-2) for pair in zip(held, new, strict=True))
                keep = min(most, whole[0].shape[-2])  # most is self.most: not None here
                if size < keep:
                    self.tensors = tuple(_empty(t, capacity) for t in whole)
                assert self.tensors is not None  # new, or size >= keep >= 1: usable
                for stored, t in zip(self.tensors, whole, strict=True):
                    stored[..., :keep, :] = t[..., t.shape[-2] - keep :, :]
                self._view(0, keep)
                return whole
            overlap = size >= needed and self.start < length  # moving within the storage
            if size < needed:  # a larger storage, the held tokens first
                self.tensors = tuple(_empty(t, capacity) for t in new)
            assert self.tensors is not None  # new, or size >= needed >= 1: usable
            for stored, t in zip(self.tensors, held if held is not None else (), strict=False):
                # the held tokens to the front; a copy first where the two places overlap
                stored[..., :length, :] = t.clone() if overlap else t
            self.start = 0
        stop = self.start + length + num_new
        # Set above, unless an empty storage is given no tokens: that raises here.
        assert self.tensors is not None
        for stored, t in zip(self.tensors, new, strict=True):
            stored[..., self.start + length : stop, :] = t  # only the new tokens are copied
        return self._view(self.start, length + num_new)

    def keep_last(self, count: int) -> None:
        """Hold only the last ``count`` tokens (the rolling caches')."""
        if self.length > count:
            self._view(self.start + self.length - count, count)

    def crop(self, length: int) -> None:
        """Hold only the first ``length`` tokens."""
        self._view(self.start, length)


def _empty(like: torch.Tensor, capacity: int) -> torch.Tensor:
    """An uninitialised storage of ``capacity`` tokens, shaped like ``like`` otherwise."""
    return like.new_empty((*like.shape[:-2], capacity, like.shape[-1]))


def _check_new(
    owner: str,
    keys: object,
    values: object,
    held_keys: torch.Tensor | None,
    held_values: torch.Tensor | None,
    names: tuple[str, str] = ("keys", "values"),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check new keys and values: alike ``(..., num_new, dim)`` tensors that fit those held.

    Every dimension but the tokens' (-2), and the dtype, must be the held ones'.
    ``names`` names the two in messages.
    """
    keys = _checks.float_tensor(owner, names[0], keys)
    values = _checks.float_tensor(owner, names[1], values)
    if keys.dim() < 2 or keys.shape[:-1] != values.shape[:-1] or keys.dtype != values.dtype:
        raise ValueError(
            f"{owner}: {names[0]} and {names[1]} must be (..., num_new, dim) tensors of the "
            f"same dtype and leading shape, got {names[0]} of shape {tuple(keys.shape)} "
            f"({keys.dtype}) and {names[1]} of shape {tuple(values.shape)} ({values.dtype})"
        )
    if held_keys is None:
        return keys, values
    assert held_values is not None  # a cache holds keys and values together
    for name, new, old in zip(names, (keys, values), (held_keys, held_values), strict=True):
        if (
            new.shape[:-2] != old.shape[:-2]
            or new.shape[-1] != old.shape[-1]
            or (new.dtype != old.dtype)
        ):
            raise ValueError(
                f"{owner}: new {name} of shape {tuple(new.shape)} ({new.dtype}) do not fit "
                f"the cached {name} of shape {tuple(old.shape)} ({old.dtype}): all but the "
                f"token dimension (-2) and the dtype must match. A cache belongs to one "
                f"layer and one batch; use a new {owner} for another."
            )
    return keys, values


def _first_seen(position: int, window: int | None, chunk: int | None) -> int:
    """The first position the query at ``position`` sees: its window's, or its chunk's."""
    if window is not None:
        return max(position - window + 1, 0)
    if chunk is not None:
        return position // chunk * chunk
    return 0


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


def _check_layer_cache(
    owner: str, cache: Cache, window: int | None, chunk: int | None, allowed: object
) -> None:
    """Raise unless ``cache`` can serve a layer with this ``window`` or ``chunk``.

    A cache that re-indexes positions chooses its keys itself: no window, chunk or
    ``allowed`` mask on the layer. Any other must keep every token, or roll with the
    layer's own window or chunk (given to it once, when it was built).
    """
    name = type(cache).__name__
    if cache.reindexes_positions:
        if allowed is not None or window is not None or chunk is not None:
            mask = None if allowed is None else "a mask"
            raise ValueError(
                f"{owner}: a {name} chooses the keys itself, so it takes no allowed= mask "
                f"and no layer window or chunk, got allowed={mask}, window={window}, "
                f"chunk={chunk}"
            )
        return
    has = getattr(cache, "window", None), getattr(cache, "chunk", None)
    if has != (None, None) and has != (window, chunk):
        wanted = (
            f"KVCache(window={window})"
            if window is not None
            else f"KVCache(chunk={chunk})"
            if chunk is not None
            else "KVCache()"
        )
        raise ValueError(
            f"{owner}: the layer has window={window} and chunk={chunk}, but its {name} was "
            f"built with window={has[0]} and chunk={has[1]} and keeps only the tokens that "
            f"those see; give the layer a {wanted}"
        )
