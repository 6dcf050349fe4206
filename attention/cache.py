"""What every cache of one sequence has in common: the :class:`Cache` protocol.

A layer that decodes one token at a time keeps something per sequence between
calls: the keys and values of the tokens seen (:class:`~attention.KVCache`, its
rolling, quantized and streaming kin), a latent per token
(:class:`~attention.LatentCache`), or a state of fixed size
(:class:`~attention.GatedDeltaNetCache`). What each one holds, and its ``update``,
belong to its layer; a few questions have the same answer for every one of them,
and :class:`Cache` names them: how many tokens went through, how many it holds, how
many bytes, and can it go back. :class:`KeyValueCache` adds what
:class:`~attention.GroupedQueryAttention` asks of the caches it takes: an ``update``
of keys and values, and the window or chunk they are kept for.

A cache belongs to one kind of layer, and a layer refuses any other kind with a
``TypeError`` that names the layer the cache belongs to, before it touches it.

``.keys`` and ``.values``, on the caches that have them, are every held token's key
and value exactly as ``update`` received them, oldest first. A cache that holds
them otherwise names them otherwise: :class:`~attention.QuantizedKVCache`'s
``residual_keys``, :class:`~attention.LatentCache`'s ``latent`` and ``rope_keys``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from attention import _checks

if TYPE_CHECKING:
    import torch

__all__ = ["Cache", "KeyValueCache"]


@runtime_checkable
class Cache(Protocol):
    """The protocol of every per-sequence cache: tokens seen and held, bytes, roll-back.

    Nothing to subclass: a class implements it by having these members, and
    ``isinstance(cache, Cache)`` checks that it has them. Each cache also has an
    ``update`` that its layer calls with the new tokens' tensors; its arguments
    differ from cache to cache (keys and values, a latent and a rotary key, the
    states of a recurrence). :class:`KeyValueCache` names the one of keys and values.

    Two counts, one meaning each:

    * :attr:`seen_tokens` counts the tokens that have gone through the layer with the
      cache, dropped or not: the next token's position.
    * ``len(cache)`` counts the tokens the cache *holds* now, those whose own key and
      value (or latent) it keeps: what :attr:`nbytes` grows with. A rolling or
      streaming cache holds fewer than it has seen. A
      :class:`~attention.GatedDeltaNetCache` holds none: it folds every token into a
      state of fixed size, so its length is 0 whatever it has seen. A
      :class:`~attention.CrossAttentionCache` holds the *context's* tokens, whose
      keys and values it computes once, while :attr:`seen_tokens` counts the
      decoder's tokens that read them; so its length can exceed what it has seen.

    Attributes
    ----------
    reindexes_positions : bool
        ``True`` only for a cache that gives its held tokens new positions,
        ``0 ... len(cache) - 1`` (:class:`~attention.StreamingCache`): a layer then
        puts its keys into the cache *before* RoPE and rotates the held keys by
        their index in the cache, the new queries by the last indices. ``False``:
        the new tokens sit at positions ``seen_tokens`` onwards, keys rotated before
        they are cached.

    Examples
    --------
    >>> import torch
    >>> from attention import KVCache
    >>> cache = KVCache(window=4)  # a sliding window's cache: keeps 3 tokens
    >>> _ = cache.update(torch.zeros(1, 2, 10, 8), torch.zeros(1, 2, 10, 8))
    >>> isinstance(cache, Cache), cache.seen_tokens, len(cache), cache.nbytes
    (True, 10, 3, 384)
    >>> cache.crop(9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: KVCache: cannot crop to 9 tokens: the next token, at position 9, would ...

    Token 9 would see tokens 6 to 9 (its window), and the cache dropped 0 to 6.
    ``crop(0)`` always works: it empties the cache.

    >>> cache.crop(0)
    >>> cache.seen_tokens, len(cache), cache.nbytes
    (0, 0, 0)
    """

    reindexes_positions: bool

    @property
    def seen_tokens(self) -> int:
        """The number of tokens that have gone through the cache, the next token's position."""

    def __len__(self) -> int:
        """Tokens the cache holds now: those whose own key and value (or latent) it keeps.

        Fewer than :attr:`seen_tokens` once it drops some; 0 for a state of fixed size
        (:class:`~attention.GatedDeltaNetCache`); the context's tokens for a
        :class:`~attention.CrossAttentionCache`.
        """

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor the cache holds (the tokens held, not room kept for more)."""

    def crop(self, length: int) -> None:
        """Go back to ``length`` tokens seen, forgetting the later ones.

        ``crop(0)`` empties any cache. A cache that cannot go back to another length
        (it dropped tokens it would need, or folded them into a state) raises a
        ``ValueError`` that says why.
        """


@runtime_checkable
class KeyValueCache(Cache, Protocol):
    """A :class:`Cache` of keys and values: what :class:`~attention.GroupedQueryAttention` takes.

    :class:`~attention.KVCache` (with or without a window or chunk),
    :class:`~attention.StreamingCache` and :class:`~attention.QuantizedKVCache`
    implement it; so can a class of your own, by having these members.

    Attributes
    ----------
    window, chunk : int or None
        The sliding window (a query sees itself and the ``window - 1`` tokens before
        it) or the chunk of the layer the cache is built for: it keeps only the
        tokens that those let the next query see, and serves only a layer with the
        same ``window`` and ``chunk``. Both ``None``: it serves a layer with neither
        (one that keeps every token serves any layer, its mask picking the keys).

    Examples
    --------
    >>> import torch
    >>> from attention import KVCache, LatentCache, StreamingCache
    >>> isinstance(KVCache(window=4), KeyValueCache), KVCache(window=4).window
    (True, 4)
    >>> isinstance(StreamingCache(), KeyValueCache), isinstance(LatentCache(), KeyValueCache)
    (True, False)
    """

    window: int | None
    chunk: int | None

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Take the new tokens' keys and values, ``(..., num_new, head_dim)`` each.

        Returns every key and value the new tokens' queries attend over, the new ones
        last, ``(..., num_keys, head_dim)`` each.
        """


class _CacheBase:
    """The members every cache of the package writes the same way (private to it).

    The count of tokens seen, :meth:`crop`'s checks and its one message, and what a
    layer needs to refuse a cache of another kind: :attr:`_holds`, what the cache
    holds, and :attr:`_layers`, the layers it serves (the first is the one an error
    names). A subclass sets those two, adds to ``_seen`` in its ``update``, and
    writes :meth:`_forget` (and :meth:`_why_not_crop` if it cannot always go back).
    """

    reindexes_positions: bool = False  # as Cache declares it (a ClassVar would not match)
    _holds: ClassVar[str]
    _layers: ClassVar[tuple[str, ...]]

    def __init__(self) -> None:
        self._seen = 0

    @property
    def seen_tokens(self) -> int:
        """How many tokens have gone through the cache, dropped ones included.

        The next token's position.
        """
        return self._seen

    def crop(self, length: int) -> None:
        """Go back to ``length`` tokens seen, forgetting the later ones.

        ``length`` counts tokens seen, as :attr:`seen_tokens` does, which becomes
        ``length``; ``crop(0)`` empties the cache. A ``ValueError`` says why a cache
        cannot go back to ``length`` (see each cache's own notes).
        """
        owner = type(self).__name__
        what = "length must be an integer >= 0 (the tokens seen to go back to)"
        length = _checks.whole_number(owner, length, what)
        if length < 0:
            raise ValueError(f"{owner}: {what}, got {length}")
        why = None
        if length > self._seen:
            why = f"the cache has seen only {self._seen}"
        elif length:  # going back to nothing keeps nothing, so it is always possible
            why = self._why_not_crop(length)
        if why is not None:
            raise ValueError(f"{owner}: cannot crop to {length} tokens: {why}")
        self._forget(length)
        self._seen = length

    def _why_not_crop(self, length: int) -> str | None:
        """Why the cache cannot go back to ``length`` (0 < length <= seen), or ``None``."""
        return None

    def _forget(self, length: int) -> None:
        """Hold only what the first ``length`` tokens seen left (nothing for 0)."""
        raise NotImplementedError


class _FixedStatesBase(_CacheBase):
    """A cache of two states of fixed size, a convolution's and a recurrence's (private).

    Gated DeltaNet's and Mamba-2's caches hold no token's key or value, only the states
    the tokens were folded into, so ``len`` is 0 and :meth:`crop` can go back only to 0
    or to every token seen. A subclass names its two states (:attr:`_states`, the
    convolution's first) and the recurrence for the messages (:attr:`_folded`), and its
    ``update`` calls :meth:`_replace`.
    """

    _states: ClassVar[tuple[str, str]]
    _folded: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        for name in self._states:
            setattr(self, name, None)

    def __len__(self) -> int:
        """0: the cache holds no token's key or value, only the states they were folded into."""
        return 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the two states (0 before the first forward pass)."""
        states = (getattr(self, name) for name in self._states)
        return sum(state.nbytes for state in states if state is not None)

    def _replace(self, num_new: object, **states: torch.Tensor) -> None:
        """Hold ``states`` (by name), after ``num_new`` more tokens; a state keeps its size."""
        owner = type(self).__name__
        num_new = _checks.positive_int(owner, "num_new", num_new)
        for name, new in states.items():
            _checks.float_tensor(owner, name, new)
            old = getattr(self, name)
            if old is not None and (new.shape != old.shape or new.dtype != old.dtype):
                raise ValueError(
                    f"{owner}: expected a {name} of the held one's shape {tuple(old.shape)} "
                    f"({old.dtype}): the states keep their size, got {tuple(new.shape)} "
                    f"({new.dtype}); a cache belongs to one layer and one batch"
                )
        for name, new in states.items():
            setattr(self, name, new)
        self._seen += num_new

    def _why_not_crop(self, length: int) -> str | None:
        if length == self._seen:
            return None  # nothing to forget
        return (
            f"the {self._folded} has folded all {self._seen} tokens seen into a fixed "
            "size and cannot take any of them out; keep a copy of the states to go back "
            "to, or crop to 0 to start again"
        )

    def _forget(self, length: int) -> None:
        if not length:
            for name in self._states:
                setattr(self, name, None)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seen_tokens={self._seen}, nbytes={self.nbytes})"


def _check_cache(layer: object, cache: object, wanted: type, expected: str) -> None:
    """Raise a ``TypeError`` unless ``cache`` is ``None`` or a ``wanted`` that serves ``layer``.

    ``expected`` says what the layer takes, for the message. A cache of the package
    names the layers it serves, so one that is a ``wanted`` but belongs to another
    layer (a :class:`~attention.SparseLatentCache` given to MLA) is refused too, and
    the message names the layer it belongs to. The cache is not read or written.
    """
    if cache is None:
        return
    owner, name = type(layer).__name__, type(cache).__name__
    if isinstance(cache, _CacheBase):  # the package's own: it names the layers it serves
        serves = cache._layers
        # The layers it serves, and of the kind wanted: a protocol's members are known
        # to be there (the costly check of the protocol is left to a reader's caches).
        kind = wanted in (Cache, KeyValueCache) or isinstance(cache, wanted)
        if kind and any(cls.__name__ in serves for cls in type(layer).__mro__):
            return
    else:  # a cache of the reader's: it serves if it has the members (a slower check)
        serves = ()
        if isinstance(cache, wanted):
            return
    message = f"{owner}: cache must be {expected} or None, got {name}"
    if serves and isinstance(cache, _CacheBase):  # only a _CacheBase serves named layers
        message += f"; {name} holds {cache._holds}: pass it to {serves[0]}"
    raise TypeError(message)
