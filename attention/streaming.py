"""StreamingLLM's cache: the first tokens (attention sinks) and a window of the last ones.

Xiao et al. ("Efficient Streaming Language Models with Attention Sinks", 2023)
found that a model decoding with only a sliding window of recent keys breaks down
as soon as the first tokens leave the window: its heads park unneeded attention on
the first token (chapter 16's *sink*). Keeping the first ``num_sinks`` tokens
beside the last ``recent`` ones holds the cache at a fixed size, for a stream of any
length, and keeps the model fluent. It does not keep what was said in between:
a fact that left the window is gone.

Positions are those *inside the cache*, as in StreamingLLM: the kept tokens sit at
positions ``0, 1, ..., len(cache) - 1`` whatever their place in the text, so a
rotary model never meets a position past the cache's size. The cache therefore
holds keys *before* RoPE, and :class:`~attention.GroupedQueryAttention` rotates them
at every step by their index in the cache (``transformers``' former ``SinkCache``
instead stored rotated keys and rotated them back when they shifted; both give the
same scores).
"""

from __future__ import annotations

import torch

from attention import _checks
from attention.cache import _CacheBase
from attention.kv_cache import _check_new

__all__ = ["StreamingCache"]


class StreamingCache(_CacheBase):
    """StreamingLLM's cache: the first ``num_sinks`` tokens and the last ``recent`` ones.

    :meth:`update` appends the new keys and values, then evicts every token that is
    neither among the first ``num_sinks`` nor among the last ``recent`` seen, and
    returns what it keeps (which ``keys`` and ``values`` then hold), in the
    order of the text. It never holds more than ``num_sinks + recent`` tokens. A
    decoding step's query sees the sinks, itself and the ``recent - 1`` tokens before
    it: in the words of a layer's sliding window, the recent part is a window of
    ``recent`` tokens. (:class:`~attention.KVCache` with ``window=recent`` holds
    ``recent - 1`` between steps: it evicts after returning the keys, where this cache
    evicts before, so that what it returns is what it holds.)

    It implements :class:`~attention.KeyValueCache` with ``reindexes_positions = True``
    (and ``window`` and ``chunk`` ``None``: it serves a layer without either): given
    to :class:`~attention.GroupedQueryAttention`, the layer attends over the kept
    tokens with *positions re-indexed*: it puts the keys into the cache before RoPE
    and rotates the held keys by their index in the cache, ``0 ... len(cache) - 1``,
    and the new tokens are the last of them. So decoding one token is attention over
    the kept tokens as if they were the whole text, and :attr:`~.Cache.seen_tokens` may grow
    past the layer's ``context_length``. A call's queries all see the cache as it is
    after the call, so each new token must be kept: :meth:`update` takes at most
    ``recent`` new tokens once the cache would hold more than ``num_sinks + recent``
    (feed a long prompt in pieces of ``recent`` tokens). :meth:`~.Cache.crop` goes back only
    while nothing was evicted (or to 0, which empties it).

    Parameters
    ----------
    num_sinks : int
        How many of the first tokens stay (0 is a plain sliding window).
    recent : int
        How many of the last tokens stay, the newest included (at least 1).

    Attributes
    ----------
    keys, values : torch.Tensor or None
        ``(batch, kv_heads, len(cache), head_dim)``: every kept token's key and value
        as :meth:`update` received them, the sinks first (keys before RoPE when a
        layer wrote them); ``None`` while empty.
    reindexes_positions : bool
        ``True``: the layer rotates the held keys by their index in the cache.

    Examples
    --------
    >>> import torch
    >>> cache = StreamingCache(num_sinks=2, recent=3)
    >>> tokens = torch.arange(8.0).view(1, 1, 8, 1)  # tokens 0 to 7, one number each
    >>> _ = cache.update(tokens[..., :5, :], tokens[..., :5, :])  # it holds 0 to 4
    >>> keys, _ = cache.update(tokens[..., 5:, :], tokens[..., 5:, :])  # 3 more: 2, 3, 4 go
    >>> keys.flatten().tolist(), cache.positions, cache.seen_tokens
    ([0.0, 1.0, 5.0, 6.0, 7.0], [0, 1, 5, 6, 7], 8)
    >>> _ = cache.update(torch.full((1, 1, 1, 1), 8.0), torch.zeros(1, 1, 1, 1))
    >>> cache.keys.flatten().tolist()
    [0.0, 1.0, 6.0, 7.0, 8.0]
    """

    reindexes_positions = True
    window = chunk = None  # it serves a layer without a window or chunk (see `recent`)
    _holds = "keys before RoPE, at positions re-indexed in the cache"
    _layers = ("GroupedQueryAttention",)

    def __init__(self, num_sinks: int = 4, recent: int = 1020) -> None:
        super().__init__()
        owner = type(self).__name__
        what = "num_sinks must be an integer >= 0 (how many of the first tokens stay)"
        if _checks.whole_number(owner, num_sinks, what) < 0:
            raise ValueError(f"{owner}: {what}, got {num_sinks!r}")
        self.num_sinks = num_sinks
        self.recent = _checks.positive_int(owner, "recent", recent)
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        """How many tokens the cache holds, at most ``num_sinks + recent``."""
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes held by the kept keys and values."""
        if self.keys is None or self.values is None:  # both None, or both held
            return 0
        return self.keys.nbytes + self.values.nbytes

    @property
    def capacity(self) -> int:
        """The most tokens the cache holds, ``num_sinks + recent``."""
        return self.num_sinks + self.recent

    @property
    def positions(self) -> list[int]:
        """The kept tokens' positions in the text, oldest first."""
        held = len(self)
        sinks = min(self.num_sinks, held)
        return list(range(sinks)) + list(range(self._seen - (held - sinks), self._seen))

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new keys and values, evict, and return the kept ones (new ones last).

        Parameters
        ----------
        keys : torch.Tensor, shape (..., num_new, key_dim)
        values : torch.Tensor, shape (..., num_new, value_dim)

        Returns
        -------
        (keys, values) : tuple of torch.Tensor, shapes (..., len(cache), ...)
            What the cache holds after the call, in the order of the text.
        """
        owner = type(self).__name__
        keys, values = _check_new(owner, keys, values, self.keys, self.values)
        num_new = keys.shape[-2]
        if self._seen + num_new > self.capacity and num_new > self.recent:
            raise ValueError(
                f"{owner}: {num_new} new tokens would push some of themselves out of the "
                f"cache (num_sinks={self.num_sinks}, recent={self.recent}, {self._seen} "
                f"tokens seen), and every new token needs its keys; feed at most "
                f"recent={self.recent} tokens per call"
            )
        if self.keys is not None and self.values is not None:  # both None, or both held
            keys = torch.cat((self.keys, keys), dim=-2)  # (..., held + num_new, dim)
            values = torch.cat((self.values, values), dim=-2)
        self._seen += num_new
        held = keys.shape[-2]
        if held > self.capacity:  # the sinks, then the last `recent` tokens
            recent = slice(held - self.recent, held)
            keys = torch.cat((keys[..., : self.num_sinks, :], keys[..., recent, :]), dim=-2)
            values = torch.cat((values[..., : self.num_sinks, :], values[..., recent, :]), dim=-2)
        self.keys, self.values = keys, values
        return keys, values

    def _why_not_crop(self, length: int) -> str | None:
        evicted = self._seen - len(self)
        if not evicted or length == self._seen:
            return None
        return (
            f"the cache has seen {self._seen} tokens and evicted {evicted} of them; start a "
            f"new {type(self).__name__} (or crop to 0) to go back"
        )

    def _forget(self, length: int) -> None:
        if not length:
            self.keys = self.values = None
        else:  # nothing was evicted: the first `length` held are the first seen
            assert self.keys is not None and self.values is not None  # length > 0 are held
            self.keys, self.values = self.keys[..., :length, :], self.values[..., :length, :]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_sinks={self.num_sinks}, recent={self.recent}, "
            f"tokens={len(self)}, seen_tokens={self._seen}, nbytes={self.nbytes})"
        )
