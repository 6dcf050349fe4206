"""Cross-attention: queries from one sequence, keys and values from another.

In self-attention the queries, keys and values all come from the same tokens. The
encoder–decoder of Vaswani et al. (2017) has a third attention: in each decoder
layer, the decoder's tokens ask the questions (queries) and the *encoder's output*
answers (keys and values). Whisper's decoder reads 30 seconds of encoded audio that
way, and Llama 3.2 Vision's cross-attention layers read an image's encoded patches.

Two things change against a decoder's self-attention:

* there is no causal mask: every query may see every context token (the context is
  all there before the first query), unless ``allowed`` hides some, such as padding;
* during generation the context does not change, so its keys and values are computed
  once, at the first step, and read again at every later one:
  :class:`CrossAttentionCache` holds them, and does not grow.
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.cache import _CacheBase, _check_cache
from attention.kv_cache import _check_new
from attention.scaled import _scaled_dot_product_weights
from attention.step import _attend

__all__ = ["CrossAttention", "CrossAttentionCache"]


class CrossAttentionCache(_CacheBase):
    """The context's keys and values, computed once, read at every decoding step.

    A :class:`CrossAttention` layer fills it at its first call with a ``context`` and
    reads it, unchanged, at every later call. It implements :class:`~attention.Cache`:

    * :attr:`~.Cache.seen_tokens` counts the decoder's tokens (the queries) that have read it,
      the next one's position, as for a :class:`~attention.KVCache`;
    * ``len(cache)`` counts the tokens it holds, as for every cache: here the
      *context's* tokens, whose keys and values it keeps, and their number does not
      grow (it can exceed :attr:`~.Cache.seen_tokens`);
    * :meth:`~.Cache.crop` only sets the count back: the context's keys and values do not
      depend on the decoder's tokens, so there is nothing to forget. ``crop(0)``
      empties the cache, the context included, as for every cache: the next call
      gives a context again.

    Attributes
    ----------
    keys, values : torch.Tensor or None
        ``(batch, num_kv_heads, context_tokens, head_dim)``, after ``k_norm``; ``None``
        until the first call.
    reindexes_positions : bool
        ``False``: the context has no positions of the decoder's.

    Examples
    --------
    >>> import torch
    >>> layer = CrossAttention(8, 6, 8, num_heads=2)
    >>> cache = CrossAttentionCache()
    >>> context = torch.randn(1, 5, 6)  # five encoder tokens
    >>> _ = layer(torch.randn(1, 3, 8), context, cache=cache)  # the prompt: 3 tokens
    >>> _ = layer(torch.randn(1, 1, 8), None, cache=cache)  # a step: no context needed
    >>> cache.seen_tokens, len(cache), cache.keys.shape
    (4, 5, torch.Size([1, 2, 5, 4]))
    """

    _holds = "the context's keys and values"
    _layers = ("CrossAttention",)

    def __init__(self) -> None:
        super().__init__()  # seen_tokens: how many of the decoder's tokens read the cache
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __len__(self) -> int:
        """How many context tokens it holds (0 before the first call)."""
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes of the held keys and values, fixed once the cache is filled."""
        return sum(t.nbytes for t in (self.keys, self.values) if t is not None)

    def update(
        self, keys: torch.Tensor | None, values: torch.Tensor | None, num_new: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Hold the context's ``keys`` and ``values`` (the first call only); count ``num_new``.

        Parameters
        ----------
        keys, values : torch.Tensor or None
            ``(batch, num_kv_heads, context_tokens, head_dim)``: given at the first
            call, ``None`` at every later one.
        num_new : int
            The decoder's tokens (queries) that read the cache in this call.

        Returns
        -------
        (keys, values) : tuple of torch.Tensor
            The held ones.
        """
        owner = type(self).__name__
        num_new = _checks.positive_int(owner, "num_new", num_new)
        if (keys is None) != (self.keys is not None) or (keys is None) != (values is None):
            raise ValueError(
                f"{owner}: expected keys and values at the first call only, and None after "
                f"(the context's keys and values are computed once), got keys "
                f"{'None' if keys is None else 'given'} and values "
                f"{'None' if values is None else 'given'} with the cache "
                f"{'empty' if self.keys is None else 'holding ' + str(len(self)) + ' tokens'}"
                "; start a new CrossAttentionCache for another context"
            )
        if keys is not None:
            self.keys, self.values = _check_new(owner, keys, values, None, None)
        assert self.keys is not None and self.values is not None  # given now, or before
        self._seen += num_new
        return self.keys, self.values

    def _forget(self, length: int) -> None:  # crop: the context stays, but for crop(0)
        if not length:
            self.keys = self.values = None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(context_tokens={len(self)}, seen_tokens={self._seen}, "
            f"nbytes={self.nbytes})"
        )


class CrossAttention(nn.Module):
    """Attention of ``x``'s tokens (queries) over a ``context``'s tokens (keys and values).

    No causal mask: each query may see every context token, unless ``allowed`` says
    otherwise. Query heads share key/value heads as in
    :class:`~attention.GroupedQueryAttention` (query head ``h`` reads key/value head
    ``h // (num_heads // num_kv_heads)``).

    Parameters
    ----------
    d_in : int
        Width of ``x``, the tokens that ask (the decoder's).
    d_context : int
        Width of ``context``, the tokens that answer (the encoder's output, an image's
        patches after their projection).
    d_out : int
        Output width; ``num_heads`` heads of ``head_dim = d_out // num_heads``.
    num_heads : int
        Query heads.
    num_kv_heads : int, optional
        Key/value heads, dividing ``num_heads``; default ``num_heads``.
    qkv_bias, out_bias : bool
        A bias on the three projections, on ``out_proj``.
    q_norm, k_norm : nn.Module, optional
        Parts, ``None`` by default and assignable after construction, applied to each
        head's queries and keys, ``(batch, heads, tokens, head_dim)``: Llama 3.2
        Vision's cross-attention layers have an :class:`~attention.RMSNorm` per head.

    Shapes
    ------
    ``x``: ``(batch, num_queries, d_in)``; ``context``: ``(batch, context_tokens,
    d_context)``; output ``(batch, num_queries, d_out)``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS
    >>> _ = torch.manual_seed(0)
    >>> cross = CrossAttention(3, 4, 8, num_heads=4, num_kv_heads=2)
    >>> encoded = torch.randn(1, 10, 4)  # ten context tokens of width 4
    >>> cross(INPUTS.unsqueeze(0), encoded).shape  # six queries
    torch.Size([1, 6, 8])
    >>> weights = cross.attention_weights(INPUTS.unsqueeze(0), encoded)
    >>> weights.shape, bool(torch.allclose(weights.sum(-1), torch.ones(1, 4, 6)))
    (torch.Size([1, 4, 6, 10]), True)
    """

    # The optional norms, set by name in __init__ (an nn.Module's submodule or None).
    q_norm: nn.Module | None
    k_norm: nn.Module | None

    def __init__(
        self,
        d_in: int,
        d_context: int,
        d_out: int,
        *,
        num_heads: int,
        num_kv_heads: int | None = None,
        qkv_bias: bool = False,
        out_bias: bool = True,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
    ):
        super().__init__()
        owner = type(self).__name__
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.d_in, self.d_context, self.d_out = _checks.sizes(
            owner, d_in=d_in, d_context=d_context, d_out=d_out
        )
        self.num_heads, self.num_kv_heads = _checks.sizes(
            owner, num_heads=num_heads, num_kv_heads=num_kv_heads
        )
        _checks.heads_divide(owner, d_out, num_heads)
        what = "num_heads must be divisible by num_kv_heads so that each key/value head serves"
        _checks.divides(
            owner, f"{what} the same number of query heads", num_heads=num_heads,
            num_kv_heads=num_kv_heads,
        )  # fmt: skip
        _checks.flag(owner, "qkv_bias", qkv_bias, "a bias on W_query, W_key and W_value")
        _checks.flag(owner, "out_bias", out_bias, "whether out_proj has a bias")
        self.head_dim = d_out // num_heads
        kv_dim = self.num_kv_heads * self.head_dim
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)  # from x
        self.W_key = nn.Linear(d_context, kv_dim, bias=qkv_bias)  # from the context
        self.W_value = nn.Linear(d_context, kv_dim, bias=qkv_bias)  # from the context
        self.out_proj = nn.Linear(d_out, d_out, bias=out_bias)
        for name, part in (("q_norm", q_norm), ("k_norm", k_norm)):
            if part is not None and not isinstance(part, nn.Module):
                raise TypeError(f"{owner}: {name} must be an nn.Module or None, got {part!r}")
            setattr(self, name, part)

    def _heads(self, projected: torch.Tensor, heads: int, norm: nn.Module | None) -> torch.Tensor:
        # (batch, tokens, heads * head_dim) -> (batch, heads, tokens, head_dim), normed
        batch, tokens, _ = projected.shape
        split = projected.view(batch, tokens, heads, self.head_dim).transpose(1, 2)
        return split if norm is None else norm(split)

    def _project(
        self, x: object, context: object, cache: CrossAttentionCache | None, allowed: object
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Queries, the context's keys and values (projected, or the cache's), the mask."""
        owner = type(self).__name__
        _check_cache(self, cache, CrossAttentionCache, "a CrossAttentionCache")
        x = _checks.module_input(self, x, d_in=self.d_in)
        batch, num_queries, _ = x.shape
        # The cache, if it holds the context's keys and values (computed at the first step)
        filled = cache if cache is not None and cache.keys is not None else None
        if filled is not None:
            if context is not None:
                self._check_context(x, context, filled)
            context_tokens = len(filled)
        else:
            context = self._check_context(x, context, None)
            context_tokens = context.shape[1]
        checked = None
        if allowed is not None:  # checked before the cache takes anything
            expected = (batch, self.num_heads, num_queries, context_tokens)
            checked = _checks.allowed_mask(owner, allowed, expected, "context_tokens")
        queries = self._heads(self.W_query(x), self.num_heads, self.q_norm)  # (b, h, q, d)
        if filled is not None:  # the context's keys and values, computed at the first step
            keys, values = filled.update(None, None, num_queries)
        else:
            keys = self._heads(self.W_key(context), self.num_kv_heads, self.k_norm)
            values = self._heads(self.W_value(context), self.num_kv_heads, None)
            if cache is not None:  # (b, num_kv_heads, context_tokens, head_dim), kept
                keys, values = cache.update(keys, values, num_queries)
        return queries, keys, values, checked

    def _check_context(
        self, x: torch.Tensor, context: object, cache: CrossAttentionCache | None
    ) -> torch.Tensor:
        """The context, checked: ``(batch, context_tokens, d_context)``, ``x``'s dtype."""
        owner = type(self).__name__
        if context is None:
            raise ValueError(
                f"{owner}: expected a context (batch, context_tokens, "
                f"d_context={self.d_context}) at the first call, got None (only a "
                "CrossAttentionCache that holds the context's keys and values can do without)"
            )
        layout = f"(batch, context_tokens, d_context) = ({x.shape[0]}, ..., {self.d_context})"
        context = _checks.float_tensor(owner, "context", context, 3, layout)
        if context.shape[0] != x.shape[0] or context.shape[2] != self.d_context:
            raise ValueError(
                f"{owner}: expected a context of shape {layout}, got {tuple(context.shape)}"
            )
        if context.dtype != x.dtype:
            raise ValueError(
                f"{owner}: expected a context of the input's dtype {x.dtype}, got {context.dtype}"
            )
        if cache is not None and context.shape[1] != len(cache):
            raise ValueError(
                f"{owner}: the cache holds the keys and values of {len(cache)} context "
                f"tokens, got a context of {context.shape[1]}; pass None to read the cache, "
                "or start a new CrossAttentionCache for another context"
            )
        return context

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None,
        cache: CrossAttentionCache | None = None,
        allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend from ``x``'s tokens over ``context``'s.

        With a ``cache``, the first call projects the context and keeps its keys and
        values; every later call reads them and takes ``context=None`` (a context given
        then must have the held number of tokens, and is not read again). ``allowed``
        (bool, ``True`` where a query may attend) is broadcastable to ``(batch,
        num_heads, num_queries, context_tokens)``: a padding mask of the context is
        ``padding_mask(lengths, context_tokens)[:, None, None, :]``. A query that may
        see no context token has no meaningful output.
        """
        queries, keys, values, allowed = self._project(x, context, cache, allowed)
        # (b, num_heads, num_queries, head_dim); query head h reads key/value head h // group
        out = _attend(queries, keys, values, allowed)
        batch, num_queries, _ = x.shape
        out = out.transpose(1, 2).reshape(batch, num_queries, -1)  # heads side by side
        return self.out_proj(out)  # (batch, num_queries, d_out)

    def attention_weights(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None,
        cache: CrossAttentionCache | None = None,
        allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Each query head's weights over the context, ``(batch, heads, queries, context)``.

        As :meth:`forward` computes them (a cache is filled or read the same way).
        """
        queries, keys, _, allowed = self._project(x, context, cache, allowed)
        # (b, num_kv_heads, m, d) -> (b, num_heads, m, d): heads 0 0 1 1 ...
        keys = keys.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)
        return _scaled_dot_product_weights(queries, keys, allowed)
