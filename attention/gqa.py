"""Grouped-query attention: query heads that share keys and values (Llama 2 70B, Llama 3, Mistral).

The book's :class:`~attention.MultiHeadAttention` gives every head its own keys and
values. During generation those are what the KV cache stores, one copy per sequence.
For one sequence the cache stays below the weights: Llama 2 7B, with a key/value head
per query head, holds 2 GiB of cache at its trained context against about 13.5 GB
of 16-bit weights. A server decodes many sequences at once, though, and from seven
sequences of that length on, the caches outgrow the weights:

>>> from attention import MODELS
>>> from attention.models import kv_cache_bytes
>>> llama2 = MODELS["Llama 2 7B"]
>>> kv_cache_bytes(llama2, llama2.trained_context) / 2**30  # GiB, 16-bit numbers
2.0
>>> weights = llama2.weights.parameters * 2  # bytes of 16-bit weights
>>> round(weights / 1e9, 1)  # GB
13.5
>>> [n * kv_cache_bytes(llama2, llama2.trained_context) > weights for n in (6, 7)]
[False, True]

Grouped-query attention keeps
``num_heads`` query heads but only ``num_kv_heads`` key/value heads; query head ``h``
uses key/value head ``h // (num_heads // num_kv_heads)``. ``num_kv_heads == num_heads``
is multi-head attention, ``num_kv_heads == 1`` multi-query attention.

:class:`GroupedQueryAttention` also takes the other changes today's decoders made:
rotary position embeddings (``rotary``, a :class:`~attention.Rotary`), a sliding window
(``window``) or chunks (``chunk``) and a :class:`~attention.KVCache`. What Part III's
models add (QK-norm, a value norm, an output gate, scaled RoPE) are *parts* the layer
holds, empty by default; :mod:`attention.models.recipes` assembles each model's layer
from them. The module owns the
weights; the attention itself is the package's one attention step,
:func:`~attention.attend`, which chapter 9 calls :func:`~attention.grouped_query_attention`.
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.cache import KeyValueCache, _check_cache
from attention.kv_cache import _check_layer_cache, _local_sizes
from attention.masks import _local_mask
from attention.rope import Rotary
from attention.step import _attend, _weights, check_softcap
from attention.step import _check as _attend_checks

__all__ = ["GroupedQueryAttention", "grouped_query_attention"]


def grouped_query_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    allowed: torch.Tensor | None = None,
    dropout: float = 0.0,
    scale: float | None = None,
    mask: None = None,
) -> torch.Tensor:
    """:func:`~attention.attend` under chapter 9's name: query heads that share key/value heads.

    ``attend(q, k, v, allowed=allowed, dropout=dropout, scale=scale)``, with
    the same shapes and the same meaning of each argument: query head ``h`` attends with
    key/value head ``h // (num_heads // num_kv_heads)``, as if each key/value head were
    repeated with ``repeat_interleave`` (without making the copies). ``mask=`` is no
    longer taken: write ``allowed=`` (the same meaning, ``True`` = may attend).

    Returns
    -------
    torch.Tensor, shape (batch, num_heads, num_queries, value_dim)
        What :func:`~attention.attend` returns for the same arguments.

    Examples
    --------
    >>> import torch
    >>> q = torch.randn(1, 4, 3, 8)  # 4 query heads
    >>> k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)  # 2 key/value heads
    >>> out = grouped_query_attention(q, k, v)
    >>> out.shape
    torch.Size([1, 4, 3, 8])
    >>> repeated = [t.repeat_interleave(2, dim=1) for t in (k, v)]  # heads 0 0 1 1
    >>> torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, *repeated),
    ...                atol=1e-6)
    True
    """
    owner = "grouped_query_attention"
    what = "write allowed= (True where a query may attend, as this mask meant)"
    _checks.removed_keyword(owner, "mask", mask, what)
    _attend_checks(owner, q, k, v, allowed, False, scale, dropout, "sdpa")
    return _attend(q, k, v, allowed, scale=scale, dropout=dropout)


#: Part III's former flags, and the part or recipe that replaces each.
_REMOVED = {
    "qk_norm": "give the parts q_norm= and k_norm= (RMSNorm(head_dim), or OLMo 2's "
    "ProjectionRMSNorm), or build a model's layer with attention.layer_for",
    "value_norm": "give the part v_norm=RMSNorm(head_dim, elementwise_affine=False) (Gemma 4)",
    "output_gate": "assign the part W_gate = nn.Linear(d_in, num_heads * head_dim) after "
    "construction (Qwen3-Next's recipe)",
    "keys_as_values": "set layer.W_value = None: the values are then W_key's output "
    "(Gemma 4's recipe)",
    "rope_base": "give rotary=Rotary(head_dim, base)",
    "rope_scaling": "give rotary=Rotary(head_dim, base, scaling=...)",
    "partial_rotary_factor": "give rotary=Rotary(head_dim, base, partial_rotary_factor=...)",
}


#: What ``forward`` takes as its cache, for the error that refuses another one.
_KEY_VALUE_CACHES = "a KeyValueCache (KVCache, StreamingCache or QuantizedKVCache)"


def _check_groups(owner: str, num_heads: int, num_kv_heads: int) -> None:
    if num_heads % num_kv_heads:
        raise ValueError(
            f"{owner}: num_heads must be divisible by num_kv_heads so that each key/value "
            f"head serves the same number of query heads, got num_heads={num_heads} and "
            f"num_kv_heads={num_kv_heads} ({num_heads} / {num_kv_heads} = "
            f"{num_heads / num_kv_heads:g})"
        )


def _check_scale(owner: str, scale: object) -> float | None:
    what = "scale must be a positive number or None"
    return None if scale is None else _checks.positive_number(owner, "scale", scale, what)


class GroupedQueryAttention(nn.Module):
    """Causal attention with ``num_kv_heads`` key/value heads shared by ``num_heads`` query heads.

    With ``num_kv_heads == num_heads`` and the same seed, this is the book's
    :class:`~attention.MultiHeadAttention`: the same layers, created in the same order,
    so the same weights and the same output. Arguments after ``context_length`` are
    keyword-only.

    Parameters
    ----------
    d_in, d_out, context_length : int
        Input and output sizes; the most tokens attended over, cached ones included.
    num_heads, num_kv_heads : int
        Query heads, and key/value heads (dividing ``num_heads``; 1 is multi-query).
    head_dim : int, optional
        Size of each head; default ``d_out // num_heads``. ``out_proj`` maps the
        ``num_heads * head_dim`` numbers of the heads to ``d_out`` (Gemma's ``head_dim``).
    dropout : float
        Dropout probability on the attention weights, in [0, 1), while training.
    qkv_bias, out_bias : bool
        A bias on the query, key and value projections, on ``out_proj`` (drawn last).
    window, chunk : int, optional
        A sliding window (the query at ``i`` sees keys ``i - window + 1`` to ``i``; its
        rolling cache, ``KVCache(window=window)``, keeps ``window - 1`` tokens) or
        chunks (Llama 4: keys ``(i // chunk) * chunk`` to ``i``; ``KVCache(chunk=chunk)``
        keeps the current chunk), not both.
    scale, softcap : float, optional
        :func:`~attention.attend`'s factor on the scores (default ``1 / sqrt(head_dim)``)
        and cap ``softcap * tanh(s / softcap)`` (Gemma 2).
    sinks : bool
        A parameter ``sinks``, one logit per query head (zeros: no random draw), that
        joins each softmax with its weight dropped (gpt-oss).
    rotary, q_norm, k_norm, v_norm, W_gate : optional
        Parts, ``None`` by default, also assignable after construction (which keeps the
        weights a seed gives the other layers). The norms take the per-head layout
        ``(batch, heads, num_tokens, head_dim)``:

        * ``rotary``: a :class:`~attention.Rotary` (scaled or partial RoPE); none is NoPE.
        * ``q_norm``, ``k_norm``: QK-norm before RoPE, an :class:`~attention.RMSNorm`
          per head (Qwen3, Gemma 3 and 4) or a :class:`~attention.ProjectionRMSNorm`
          over all heads (OLMo 2); ``v_norm`` on the values (Gemma 4).
        * ``W_gate``: ``d_in -> num_heads * head_dim``; the heads' outputs are multiplied
          by ``sigmoid(W_gate(x))`` before ``out_proj`` (Qwen3-Next).
        * ``W_value = None``: the values are ``W_key``'s output, before ``k_norm`` and
          RoPE (Gemma 4's ``attention_k_eq_v``); the cache still holds both.

        :func:`~attention.models.layer_for` assembles each model's layer from them.

    Shapes
    ------
    ``(batch, num_tokens, d_in) -> (batch, num_tokens, d_out)``; with a cache, the new
    tokens sit at positions ``cache.seen_tokens`` onwards.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS, KVCache, MultiHeadAttention, RMSNorm
    >>> x = INPUTS.unsqueeze(0)  # (1, 6, 3)
    >>> _ = torch.manual_seed(123)
    >>> gqa = GroupedQueryAttention(3, 8, context_length=6, num_heads=4, num_kv_heads=2)
    >>> gqa.W_key  # 2 key heads of head_dim 2, instead of 4
    Linear(in_features=3, out_features=4, bias=False)

    Generation with a cache: a prefill, then one token at a time, as one full pass.

    >>> cache = KVCache()
    >>> steps = [gqa(x[:, :4], cache=cache)]  # prefill: tokens 0-3
    >>> steps += [gqa(x[:, 4:5], cache=cache), gqa(x[:, 5:], cache=cache)]  # decode 4, then 5
    >>> torch.allclose(torch.cat(steps, dim=1), gqa(x), atol=1e-6), cache.shape
    (True, torch.Size([1, 2, 6, 2]))

    With as many key/value heads as query heads, it is the book's module:

    >>> _ = torch.manual_seed(123)
    >>> mha = GroupedQueryAttention(3, 2, context_length=6, num_heads=2, num_kv_heads=2)
    >>> _ = torch.manual_seed(123)
    >>> book = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    >>> torch.allclose(mha(x), book(x), atol=1e-6)
    True

    Qwen3's QK-norm as parts, and gpt-oss's sinks:

    >>> new = GroupedQueryAttention(3, 8, context_length=6, num_heads=4, num_kv_heads=2,
    ...                             sinks=True, q_norm=RMSNorm(2), k_norm=RMSNorm(2))
    >>> [name for name, _ in new.named_parameters()]  # doctest: +NORMALIZE_WHITESPACE
    ['sinks', 'W_query.weight', 'W_key.weight', 'W_value.weight', 'out_proj.weight',
     'out_proj.bias', 'q_norm.weight', 'k_norm.weight']
    >>> bool((new.attention_weights(x).sum(-1) < 1).all())  # the sinks take a share
    True
    """

    # The optional parts, set by name in __init__ (an nn.Module's submodule or None).
    W_gate: nn.Module | None
    W_value: nn.Linear | None  # None: the values are the keys (Gemma 4's recipe sets it)
    q_norm: nn.Module | None
    k_norm: nn.Module | None
    v_norm: nn.Module | None

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        *,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int | None = None,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        out_bias: bool = True,
        window: int | None = None,
        chunk: int | None = None,
        scale: float | None = None,
        softcap: float | None = None,
        sinks: bool = False,
        rotary: Rotary | None = None,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
        v_norm: nn.Module | None = None,
        W_gate: nn.Module | None = None,
        **removed: object,
    ):
        super().__init__()
        owner = type(self).__name__
        _checks.refuse_removed(owner, removed, _REMOVED)
        _checks.flag(owner, "out_bias", out_bias, "whether out_proj has a bias")
        self.d_in, self.d_out, self.context_length = _checks.sizes(
            owner, d_in=d_in, d_out=d_out, context_length=context_length
        )
        self.num_heads, self.num_kv_heads = _checks.sizes(
            owner, num_heads=num_heads, num_kv_heads=num_kv_heads
        )
        dropout = _checks.dropout_rate(owner, dropout)
        if head_dim is None:
            _checks.heads_divide(owner, d_out, num_heads)
            head_dim = d_out // num_heads
        self.head_dim = _checks.positive_int(owner, "head_dim", head_dim)
        _check_groups(owner, num_heads, num_kv_heads)
        self.window, self.chunk = _local_sizes(owner, window, chunk)
        self.softcap = check_softcap(owner, softcap)
        self.scale = _check_scale(owner, scale)
        _checks.flag(owner, "sinks", sinks, "a learned sink logit per query head")
        if rotary is not None and not isinstance(rotary, Rotary):
            raise TypeError(f"{owner}: rotary must be a Rotary or None, got {rotary!r}")
        self.rotary = rotary
        q_dim, kv_dim = num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        # Same layers, in the same order, as the book's MultiHeadAttention: one seed,
        # the same weights when num_kv_heads == num_heads.
        self.W_query = nn.Linear(d_in, q_dim, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(q_dim, d_out, bias=out_bias)  # its bias is drawn last
        self.dropout = nn.Dropout(dropout)
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None
        parts = {"W_gate": W_gate, "q_norm": q_norm, "k_norm": k_norm, "v_norm": v_norm}
        for name, part in parts.items():
            if part is not None and not isinstance(part, nn.Module):
                raise TypeError(f"{owner}: {name} must be an nn.Module or None, got {part!r}")
            setattr(self, name, part)

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes its cache grows by per token, a key and a value per key/value head."""
        return 2 * self.num_kv_heads * self.head_dim * self.W_key.weight.element_size()

    def _heads(self, projected: torch.Tensor, num_heads: int) -> torch.Tensor:
        # (batch, num_tokens, num_heads * head_dim) -> (batch, num_heads, num_tokens, head_dim)
        batch, num_tokens, _ = projected.shape
        return projected.view(batch, num_tokens, num_heads, self.head_dim).transpose(1, 2)

    def _project(
        self, x: object, cache: KeyValueCache | None, allowed: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Queries, keys and values (cached ones included), and the mask (``None``: see all)."""
        owner = type(self).__name__
        _check_cache(self, cache, KeyValueCache, _KEY_VALUE_CACHES)
        x, start = _checks.cached_input(self, x, cache)  # start: first new position
        if cache is not None:
            _check_layer_cache(owner, cache, self.window, self.chunk, allowed)
        if allowed is not None:
            batch, n = x.shape[:2]
            scores = (batch, self.num_heads, n, start + n)  # keys: the cached and the new
            allowed = _checks.allowed_mask(owner, allowed, scores)
        queries, keys, values = self._heads_qkv(x)
        if cache is not None and cache.reindexes_positions:  # StreamingLLM's cache
            keys, values = self._cache(keys, values, cache)  # keys go in before RoPE
            queries, keys, start = self._rotate_in_cache(queries, keys)
        else:
            queries, keys = self._rotate(queries, keys, start)
            keys, values = self._cache(keys, values, cache)
        mask = self._mask(x.shape[1], keys.shape[2], start, allowed, x.device)
        return queries, keys, values, mask

    def _heads_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Project: the new tokens' queries, keys and values, in heads and normed; no RoPE."""
        queries = self._heads(self.W_query(x), self.num_heads)  # (b, num_heads, n, head_dim)
        keys = self._heads(self.W_key(x), self.num_kv_heads)  # (b, num_kv_heads, n, head_dim)
        # No W_value (Gemma 4): the values are the keys' projection, before k_norm
        values = keys if self.W_value is None else self._heads(self.W_value(x), self.num_kv_heads)
        norms = (self.q_norm, self.k_norm, self.v_norm)
        qkv = (queries, keys, values)
        queries, keys, values = (
            t if norm is None else norm(t) for t, norm in zip(qkv, norms, strict=True)
        )
        return queries, keys, values

    def _rotate(
        self, queries: torch.Tensor, keys: torch.Tensor, start: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate: RoPE at positions ``start, start + 1, ...``; no ``rotary`` is NoPE."""
        if self.rotary is None:
            return queries, keys
        return self.rotary(queries, start), self.rotary(keys, start)  # cached keys are rotated

    def _cache(
        self, keys: torch.Tensor, values: torch.Tensor, cache: KeyValueCache | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cache: append the new keys and values; return all the queries see."""
        if cache is None:
            return keys, values
        # (b, num_kv_heads, num_held + n, head_dim); a rolling cache keeps its last ones
        return cache.update(keys, values)

    def _rotate_in_cache(
        self, queries: torch.Tensor, keys: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Rotate at each key's index in the cache (StreamingLLM), new tokens last."""
        held, start = keys.shape[2], keys.shape[2] - queries.shape[2]
        if held > self.context_length:
            raise ValueError(
                f"{type(self).__name__}: the cache holds {held} tokens now, past "
                f"context_length={self.context_length}; build the module with a "
                "context_length of at least the most tokens the cache holds"
            )
        if self.rotary is None:
            return queries, keys, start
        return self.rotary(queries, start), self.rotary(keys), start

    def _mask(
        self,
        num_tokens: int,
        num_keys: int,
        start: int,
        allowed: torch.Tensor | None,
        device: torch.device,
    ) -> torch.Tensor | None:
        """Mask: causal, window or chunk, and ``allowed``; ``None`` lets SDPA see every key."""
        first = start + num_tokens - num_keys  # the first held key's position
        mask = _local_mask(num_tokens, num_keys, first, self.window, self.chunk, device)
        if allowed is None:
            return mask
        # (batch, 1, num_tokens or 1, num_keys), True only where both allow
        allowed = allowed[..., first:]  # the keys a rolling cache still holds
        return allowed if mask is None else mask & allowed

    def forward(
        self,
        x: torch.Tensor,
        cache: KeyValueCache | None = None,
        allowed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend causally; with ``cache``, over the cached tokens too, and append the new ones.

        ``cache`` is this layer's cache, updated in place: a :class:`~attention.KVCache`
        (built with the layer's ``window`` or ``chunk`` to roll with it), or another
        :class:`~attention.KeyValueCache` (quantized, streaming); any other cache is
        refused with a ``TypeError`` that names its layer, before it is touched.
        ``allowed`` (bool, ``True`` where a query may attend) is combined with the causal,
        window or chunk mask. It broadcasts to the scores, ``(batch, num_heads,
        num_tokens, num_keys)``, as every ``allowed`` in the package does: a padding mask
        of the keys (:func:`~attention.padding_mask`) is ``mask[:, None, None, :]``.
        ``num_keys`` counts the tokens seen (``cache.seen_tokens``) and the new ones; the
        columns of tokens a rolling cache dropped go unused. A query that may see no key
        has no meaningful output (zeros before ``out_proj``; NaN weights).

        Two sentences of 6 and 3 tokens, the second padded: its real tokens get the
        outputs they get alone.

        >>> import torch
        >>> from attention import INPUTS, padding_mask
        >>> _ = torch.manual_seed(0)
        >>> gqa = GroupedQueryAttention(3, 4, context_length=6, num_heads=2, num_kv_heads=1)
        >>> batch = torch.stack((INPUTS, torch.cat((INPUTS[:3], torch.zeros(3, 3)))))
        >>> real = padding_mask([6, 3], num_tokens=6)  # (2, 6): the keys that are real
        >>> out = gqa(batch, allowed=real[:, None, None, :])  # (2, 6, 4)
        >>> torch.allclose(out[1, :3], gqa(INPUTS[:3].unsqueeze(0))[0], atol=1e-6)
        True
        """
        queries, keys, values, mask = self._project(x, cache, allowed)
        dropout = self.dropout.p if self.training else 0.0
        # (b, num_heads, n, head_dim), each query head reading its group's key/value head
        context = _attend(
            queries,
            keys,
            values,
            mask,
            dropout=dropout,
            scale=self.scale,
            softcap=self.softcap,
            sinks=self.sinks,
        )
        batch, num_tokens, _ = x.shape
        context = context.transpose(1, 2).reshape(batch, num_tokens, -1)  # heads side by side
        if self.W_gate is not None:  # gate: each head's output dimensions, by the input
            context = context * torch.sigmoid(self.W_gate(x))
        return self.out_proj(context)  # (batch, num_tokens, d_out)

    def attention_weights(
        self, x: torch.Tensor, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Each query head's attention weights over a full pass, ``(b, heads, n, n)``.

        Computed explicitly (no dropout, no cache); ``allowed`` as in :meth:`forward`.
        With ``softcap``, the capped scores' weights; with ``sinks``, each row sums to
        less than 1 (the rest went to the sink).
        """
        queries, keys, _, mask = self._project(x, None, allowed)
        # each query head's weights over its group's key/value head, as forward's
        return _weights(queries, keys, mask, False, self.scale, self.softcap, self.sinks)
