"""Grouped-query attention: query heads that share keys and values (Llama 2 70B, Llama 3, Mistral).

The book's :class:`~attention.MultiHeadAttention` gives every head its own keys and
values. During generation those are what the KV cache stores, one copy per sequence.
For one sequence the cache stays below the weights: Llama 2 7B, with a key/value head
per query head, holds 2 GiB of cache at its trained context against about 13.5 GB
of 16-bit weights. A server decodes many sequences at once, though, and from seven
sequences of that length on, the caches outgrow the weights:

>>> from attention import MODELS
>>> llama2 = MODELS["Llama 2 7B"]
>>> llama2.kv_cache_bytes(llama2.trained_context) / 2**30  # GiB, 16-bit numbers
2.0
>>> round(llama2.parameters * 2 / 1e9, 1)  # GB of 16-bit weights
13.5
>>> [n * llama2.kv_cache_bytes(llama2.trained_context) > llama2.parameters * 2 for n in (6, 7)]
[False, True]

Grouped-query attention keeps
``num_heads`` query heads but only ``num_kv_heads`` key/value heads; query head ``h``
uses key/value head ``h // (num_heads // num_kv_heads)``. ``num_kv_heads == num_heads``
is multi-head attention, ``num_kv_heads == 1`` multi-query attention.

:class:`GroupedQueryAttention` also takes the other changes today's decoders made:
rotary position embeddings (``rope_base``), a sliding window (``window``) and a
:class:`~attention.KVCache`. The module owns the weights; the attention itself is the
package's one attention step, :func:`~attention.attend`, which chapter 9 calls
:func:`~attention.grouped_query_attention`.
"""

from __future__ import annotations

import torch
from torch import nn

from attention import _checks
from attention.cache import Cache
from attention.kv_cache import _check_layer_cache, _local_sizes
from attention.masks import _local_mask
from attention.norms import _attention_norms
from attention.rope import _cos_sin_range, _module_settings, _rotate
from attention.scaled import _scaled_dot_product_weights
from attention.step import _attend, _weights, check_softcap
from attention.step import _check as _attend_checks

__all__ = ["GroupedQueryAttention", "grouped_query_attention"]


def grouped_query_attention(
    queries: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    allowed: torch.Tensor | None = None,
    dropout: float = 0.0,
    scale: float | None = None,
    mask: None = None,
) -> torch.Tensor:
    """:func:`~attention.attend` under chapter 9's name: query heads that share key/value heads.

    ``attend(queries, keys, values, allowed=allowed, dropout=dropout, scale=scale)``, with
    the same shapes and the same meaning of each argument: query head ``h`` attends with
    key/value head ``h // (num_heads // num_kv_heads)``, as if each key/value head were
    repeated with ``repeat_interleave`` (without making the copies). ``mask=`` is no
    longer taken: write ``allowed=`` (the same meaning, ``True`` = may attend).

    Returns
    -------
    torch.Tensor, shape (batch, num_heads, num_queries, value_dim)

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
    _attend_checks(owner, queries, keys, values, allowed, False, scale, dropout, "sdpa")
    return _attend(queries, keys, values, allowed, scale=scale, dropout=dropout)


class GroupedQueryAttention(nn.Module):
    """Causal attention with ``num_kv_heads`` key/value heads shared by ``num_heads`` query heads.

    With ``num_kv_heads == num_heads`` and the same seed, this is the book's
    :class:`~attention.MultiHeadAttention`: the same layers, created in the same order,
    so the same weights and the same output.

    Every argument after ``context_length`` is keyword-only, under the names that
    :class:`~attention.MultiHeadLatentAttention` uses too.

    Parameters
    ----------
    d_in : int
        Size of each input embedding.
    d_out : int
        Size of the output and of all query heads together: ``head_dim = d_out // num_heads``.
    context_length : int
        The most tokens the module attends over, cached ones included.
    num_heads : int
        Query heads; must divide ``d_out``.
    num_kv_heads : int
        Key/value heads; must divide ``num_heads``. 1 is multi-query attention.
    dropout : float
        Dropout probability on the attention weights, in [0, 1), while training.
    qkv_bias : bool
        Whether the query, key and value projections have a bias.
    out_bias : bool
        Whether ``out_proj`` has a bias: ``True`` (the default) as in the book, ``False``
        as in Llama's ``o_proj``. The bias is drawn last, so leaving it out changes no
        other weight drawn from the same seed. Llama's ``attention_bias`` is
        ``qkv_bias=out_bias``.
    rope_base : float, optional
        If given, queries and keys are rotated by :func:`~attention.apply_rope` with this
        base (Llama's half-split layout); ``head_dim`` must then be even.
    window : int, optional
        If given, sliding-window attention: the query at position ``i`` sees keys
        ``i - window + 1`` to ``i``. Its rolling cache is ``KVCache(window=window)``,
        which holds at most the last ``window - 1`` tokens after each call.
    qk_norm : {False, True, "head", "projection"}
        Normalise queries and keys with an :class:`~attention.RMSNorm` (weight
        initialised to ones, eps 1e-6) after the projections and before RoPE. ``True``
        or ``"head"``: over each head's ``head_dim``, one weight shared by the heads
        (``Qwen3Attention``, Gemma 3 and 4, Qwen3-Next). ``"projection"``: over the whole
        projection before the head split, ``num_heads * head_dim`` numbers for the
        queries and ``num_kv_heads * head_dim`` for the keys, so one head's size depends
        on the others and each dimension of each head has its own weight
        (``Olmo2Attention``).
    softcap : float, optional
        Cap the scaled scores ``s`` to ``softcap * tanh(s / softcap)`` before the mask
        (Gemma 2's ``attn_logit_softcapping``); see :func:`~attention.attend`.
    sinks : bool
        Add a parameter ``sinks``, one logit per query head (initialised to zeros), that
        joins each softmax and whose weight is dropped (gpt-oss); see
        :func:`~attention.attend`.
    output_gate : bool
        Add a layer ``W_gate`` (``d_in -> d_out``, with a bias if ``qkv_bias``): the
        heads' outputs, laid out as ``out_proj``'s input, are multiplied element by
        element by ``sigmoid(W_gate(x))`` before ``out_proj`` (Qwen3-Next; Qiu et al.,
        "Gated Attention for Large Language Models", 2025).
    scale : float, optional
        The factor on the scores; default ``1 / sqrt(head_dim)``. Gemma 2 and 3 use
        ``query_pre_attn_scalar ** -0.5``, Gemma 4 ``1.0``.
    value_norm : bool
        Normalise each head's values with an :class:`~attention.RMSNorm` without a
        learnable scale, ``v_norm`` (Gemma 4).
    keys_as_values : bool
        No ``W_value``: the values are ``W_key``'s output too, taken before ``k_norm``
        and RoPE (Gemma 4's ``attention_k_eq_v``, on its global layers). The cache
        still holds keys and values apart, as Gemma 4's does, since the norms and the
        rotation make them differ: ``cache_bytes_per_token`` does not change.
    chunk : int, optional
        If given, chunked local attention (Llama 4's ``attention_chunk_size``): the
        query at position ``i`` sees keys ``(i // chunk) * chunk`` to ``i``, those of its
        own chunk (:func:`~attention.chunked_mask`). Its rolling cache,
        ``KVCache(chunk=chunk)``, keeps only the tokens of the current chunk. Not
        together with ``window``.
    rope_scaling : dict, optional
        RoPE scaled for a longer context, in ``transformers``' ``rope_parameters`` form,
        as :func:`~attention.apply_rope` takes it (``"linear"``, ``"dynamic"``, ``"yarn"``,
        ``"llama3"``, ``"proportional"``); needs ``rope_base``. ``"dynamic"`` scales
        for the tokens seen so far, cached ones included, so cached keys keep the
        rotation of the step that made them, as in ``transformers``.
    partial_rotary_factor : float
        The fraction of each head that RoPE rotates (Qwen3-Next 0.25); the rest carries
        no position. ``int(head_dim * partial_rotary_factor)`` must be even.

    Every option off (the defaults) is today's module: the same layers, the same
    weights from the same seed, the same outputs. The options' layers are created after
    ``out_proj``, in the order ``W_gate``, ``q_norm``, ``k_norm``, ``v_norm``,
    ``sinks``; only ``W_gate`` draws from the random generator. ``keys_as_values``
    leaves ``W_value`` out, so from the same seed ``out_proj`` gets other numbers.

    Attributes
    ----------
    W_query : nn.Linear
        ``d_in -> d_out``: ``num_heads`` query heads.
    W_key, W_value : nn.Linear
        ``d_in -> num_kv_heads * head_dim``: the shared key and value heads
        (``W_value`` is ``None`` with ``keys_as_values``).
    out_proj : nn.Linear
        ``d_out -> d_out``: mixes what the heads found.
    W_gate : nn.Linear or None
        ``d_in -> d_out``, with ``output_gate``.
    q_norm, k_norm : RMSNorm or None
        With ``qk_norm``: over ``head_dim``, or over ``d_out`` and
        ``num_kv_heads * head_dim`` with ``qk_norm="projection"``.
    v_norm : RMSNorm or None
        With ``value_norm``: over ``head_dim``, no weight.
    sinks : nn.Parameter or None
        With ``sinks=True``: shape ``(num_heads,)``. gpt-oss leaves it uninitialised
        (``torch.empty``) and ``transformers`` then draws it from a normal
        distribution; zeros here draw nothing from the random generator and start each
        sink at the weight of a key whose score is 0.
    qk_norm : bool or str
        ``False``, ``"head"`` (for ``True`` too) or ``"projection"``.
    softcap, scale : float or None
    value_norm, keys_as_values : bool

    Shapes
    ------
    Input ``(batch, num_tokens, d_in)``; output ``(batch, num_tokens, d_out)``. With a
    cache, the new tokens sit at positions ``cache.seen_tokens`` onwards (which is
    ``len(cache)`` unless a ``window`` or ``chunk`` made it drop tokens), and
    ``cache.seen_tokens + num_tokens <= context_length``.

    Examples
    --------
    >>> import torch
    >>> from attention import INPUTS, KVCache, MultiHeadAttention
    >>> x = INPUTS.unsqueeze(0)  # (1, 6, 3)
    >>> _ = torch.manual_seed(123)
    >>> gqa = GroupedQueryAttention(3, 8, context_length=6, num_heads=4, num_kv_heads=2)
    >>> gqa.W_key  # 2 key heads of head_dim 2, instead of 4
    Linear(in_features=3, out_features=4, bias=False)
    >>> gqa(x).shape
    torch.Size([1, 6, 8])

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

    Qwen3's QK-norm, gpt-oss's sinks and Qwen3-Next's output gate, together:

    >>> _ = torch.manual_seed(123)
    >>> new = GroupedQueryAttention(3, 8, context_length=6, num_heads=4, num_kv_heads=2,
    ...                             qk_norm=True, sinks=True, output_gate=True)
    >>> [name for name, _ in new.named_parameters()]  # doctest: +NORMALIZE_WHITESPACE
    ['sinks', 'W_query.weight', 'W_key.weight', 'W_value.weight', 'out_proj.weight',
     'out_proj.bias', 'W_gate.weight', 'q_norm.weight', 'k_norm.weight']
    >>> weights = new.attention_weights(x)  # the sinks take a share of every row
    >>> bool((weights.sum(-1) < 1).all())
    True
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        context_length: int,
        *,
        num_heads: int,
        num_kv_heads: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        out_bias: bool = True,
        rope_base: float | None = None,
        window: int | None = None,
        qk_norm: bool | str = False,
        softcap: float | None = None,
        sinks: bool = False,
        output_gate: bool = False,
        scale: float | None = None,
        value_norm: bool = False,
        keys_as_values: bool = False,
        chunk: int | None = None,
        rope_scaling: dict | None = None,
        partial_rotary_factor: float = 1.0,
    ):
        super().__init__()
        owner = type(self).__name__
        _checks.flag(owner, "out_bias", out_bias, "whether out_proj has a bias")
        sizes = {"d_in": d_in, "d_out": d_out, "context_length": context_length}
        _checks.sizes(self, **sizes, num_heads=num_heads, num_kv_heads=num_kv_heads)
        dropout = _checks.dropout_rate(owner, dropout)
        _checks.heads_divide(owner, d_out, num_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"{owner}: num_heads must be divisible by num_kv_heads so that each key/value "
                f"head serves the same number of query heads, got num_heads={num_heads} and "
                f"num_kv_heads={num_kv_heads} ({num_heads} / {num_kv_heads} = "
                f"{num_heads / num_kv_heads:g})"
            )
        self.head_dim = d_out // num_heads
        if rope_base is not None:
            if isinstance(rope_base, bool) or not isinstance(rope_base, int | float):
                raise ValueError(
                    f"{owner}: rope_base must be a number greater than 1 or None, "
                    f"got {rope_base!r} of type {type(rope_base).__name__}"
                )
            if not rope_base > 1:
                raise ValueError(f"{owner}: rope_base must be greater than 1, got {rope_base}")
            if self.head_dim % 2 and partial_rotary_factor == 1.0:
                raise ValueError(
                    f"{owner}: rotary embeddings rotate pairs of numbers, so head_dim = "
                    f"d_out // num_heads must be even, got head_dim={self.head_dim} "
                    f"(d_out={d_out}, num_heads={num_heads})"
                )
        window, chunk = _local_sizes(owner, window, chunk)
        self.rope_base = rope_base
        self.window = window
        self.softcap = check_softcap(owner, softcap)
        if scale is not None and (
            isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0
        ):
            raise ValueError(f"{owner}: scale must be a positive number or None, got {scale!r}")
        self.scale = None if scale is None else float(scale)
        _checks.flag(owner, "sinks", sinks, "a learned sink logit per query head")
        _checks.flag(owner, "output_gate", output_gate, "sigmoid(W_gate(x)) gates each head")
        _checks.flag(owner, "keys_as_values", keys_as_values, "no W_value: values are keys")
        self.keys_as_values = keys_as_values
        self.chunk = chunk
        # The rotated dims and the checked scaling (rope.py); scaling=None: plain RoPE
        self._rotary_dim, self._rope_key = _module_settings(
            owner, self.head_dim, rope_base, rope_scaling, partial_rotary_factor
        )
        self.rope_scaling = None if rope_scaling is None else dict(rope_scaling)
        self.partial_rotary_factor = float(partial_rotary_factor)
        kv_dim = self.num_kv_heads * self.head_dim
        # Same layers, in the same order, as the book's MultiHeadAttention: one seed,
        # the same weights when num_kv_heads == num_heads.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.W_value = None if keys_as_values else nn.Linear(d_in, kv_dim, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=out_bias)  # its bias is drawn last
        self.dropout = nn.Dropout(dropout)
        # The options' layers, after every other one: off, they draw nothing.
        self.W_gate = nn.Linear(d_in, d_out, bias=qkv_bias) if output_gate else None
        self.qk_norm, self.q_norm, self.k_norm, self.value_norm, self.v_norm = _attention_norms(
            owner, qk_norm, value_norm, num_heads, self.num_kv_heads, self.head_dim
        )
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None

    @property
    def cache_bytes_per_token(self) -> int:
        """Bytes this layer's :class:`~attention.KVCache` grows by per token.

        ``2 * num_kv_heads * head_dim * bytes per number``: a key and a value per key/value head,
        with ``keys_as_values`` too (the cache holds the normalised, rotated keys and the
        normalised values apart).
        """
        return 2 * self.num_kv_heads * self.head_dim * self.W_key.weight.element_size()

    def _heads(self, projected: torch.Tensor, num_heads: int) -> torch.Tensor:
        # (batch, num_tokens, num_heads * head_dim) -> (batch, num_heads, num_tokens, head_dim)
        batch, num_tokens, _ = projected.shape
        return projected.view(batch, num_tokens, num_heads, self.head_dim).transpose(1, 2)

    def _project(
        self, x: object, cache: Cache | None, allowed: object = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Queries, keys and values (cached ones included), and the mask (``None``: see all)."""
        owner = type(self).__name__
        x, num_cached = _checks.cached_input(self, x, cache, Cache)
        if cache is not None:
            _check_layer_cache(owner, cache, self.window, self.chunk, allowed)
        # A cache that re-indexes positions (StreamingLLM's) takes keys before RoPE.
        reindex = cache is not None and cache.reindexes_positions
        if allowed is not None:
            batch, n = x.shape[:2]
            allowed = _checks.allowed_mask(owner, allowed, batch, n, num_cached + n, num_cached)
        num_tokens = x.shape[1]
        queries, keys, values = self._heads_qkv(x)
        if self.rope_base is not None and not reindex:
            # apply_rope's rotation, the new tokens continuing where the cache stops. One
            # cos and sin for every head, queries and keys; sliced from a table computed once.
            cos, sin = _cos_sin_range(
                num_cached, num_tokens, self._rotary_dim, self.rope_base, x, self._rope_key
            )
            queries = _rotate(queries, cos, sin)
            keys = _rotate(keys, cos, sin)  # the cached ones are rotated already
        if cache is not None:
            # (b, num_kv_heads, num_held + n, head_dim); a rolling cache keeps its last ones
            keys, values = cache.update(keys, values)
        num_keys = keys.shape[2]
        if reindex:  # positions 0 ... num_keys - 1: the index in the cache, new tokens last
            if num_keys > self.context_length:
                raise ValueError(
                    f"{owner}: the {type(cache).__name__} holds {num_keys} tokens now, past "
                    f"context_length={self.context_length}; build the module with a "
                    "context_length of at least the most tokens the cache holds"
                )
            num_cached = num_keys - num_tokens
            if self.rope_base is not None:
                cos, sin = _cos_sin_range(
                    0, num_keys, self._rotary_dim, self.rope_base, x, self._rope_key
                )
                keys = _rotate(keys, cos, sin)
                queries = _rotate(queries, cos[num_cached:], sin[num_cached:])
        first = num_cached + num_tokens - num_keys  # the first key's position
        # None when one new token sees every key, which lets SDPA pick its fastest kernel.
        mask = _local_mask(num_tokens, num_keys, first, self.window, self.chunk, x.device)
        if allowed is not None:
            # (batch, 1, num_tokens or 1, num_keys), True only where both allow
            allowed = allowed[..., first:]  # the keys a rolling cache still holds
            mask = allowed if mask is None else mask & allowed
        return queries, keys, values, mask

    def _heads_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The new tokens' queries, keys and values, split into heads and normed; no RoPE yet."""
        queries, keys = self.W_query(x), self.W_key(x)
        values = keys if self.W_value is None else self.W_value(x)
        if self.qk_norm == "projection":  # OLMo 2: over all heads at once
            queries, keys = self.q_norm(queries), self.k_norm(keys)
        queries = self._heads(queries, self.num_heads)  # (b, num_heads, n, head_dim)
        keys = self._heads(keys, self.num_kv_heads)  # (b, num_kv_heads, n, head_dim)
        values = self._heads(values, self.num_kv_heads)  # (b, num_kv_heads, n, head_dim)
        if self.qk_norm == "head":  # Qwen3: each head on its own
            queries, keys = self.q_norm(queries), self.k_norm(keys)
        if self.v_norm is not None:
            values = self.v_norm(values)
        return queries, keys, values

    def forward(
        self, x: torch.Tensor, cache: Cache | None = None, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Attend causally; with ``cache``, over the cached tokens too, and append the new ones.

        Parameters
        ----------
        x : torch.Tensor, shape (batch, num_tokens, d_in)
        cache : Cache, optional
            This layer's cache, updated in place: a :class:`~attention.KVCache` (built
            with the layer's ``window`` or ``chunk`` to roll with it), or another
            cache of keys and values (:class:`~attention.QuantizedKVCache`,
            :class:`~attention.StreamingCache`).
        allowed : torch.Tensor of bool, optional
            ``True`` where a query may attend, combined (logical and) with the causal,
            window or chunk mask: shape ``(batch, num_keys)``, such as
            :func:`~attention.padding_mask`, or ``(batch, num_tokens, num_keys)``.
            ``num_keys`` counts the tokens seen (``cache.seen_tokens``) and the new ones,
            so while decoding a padded batch the mask grows by one column per step, and
            the padding stays hidden; the columns of tokens a rolling cache dropped are
            not used. A query that may attend to no key at all (a padding token that a
            ``window`` keeps from every real one) has no meaningful output:
            ``scaled_dot_product_attention`` gives it zeros before ``out_proj``, and
            :meth:`attention_weights` a row of NaN.

        Returns
        -------
        torch.Tensor, shape (batch, num_tokens, d_out)

        Examples
        --------
        Two sentences of 6 and 3 tokens, the second padded on the right: its real tokens
        get the outputs they get alone.

        >>> import torch
        >>> from attention import INPUTS, padding_mask
        >>> _ = torch.manual_seed(0)
        >>> gqa = GroupedQueryAttention(3, 4, context_length=6, num_heads=2, num_kv_heads=1)
        >>> batch = torch.stack((INPUTS, torch.cat((INPUTS[:3], torch.zeros(3, 3)))))
        >>> out = gqa(batch, allowed=padding_mask([6, 3], num_tokens=6))
        >>> torch.allclose(out[1, :3], gqa(INPUTS[:3].unsqueeze(0))[0], atol=1e-6)
        True
        """
        queries, keys, values, mask = self._project(x, cache, allowed)
        dropout = self.dropout.p if self.training else 0.0
        # (b, num_heads, n, head_dim), each query head reading its group's key/value head
        options = {"scale": self.scale, "softcap": self.softcap, "sinks": self.sinks}
        context = _attend(queries, keys, values, mask, dropout=dropout, **options)
        batch, num_tokens, _ = x.shape
        context = context.transpose(1, 2).reshape(batch, num_tokens, self.d_out)
        if self.W_gate is not None:  # each head's output dimensions, gated by the input
            context = context * torch.sigmoid(self.W_gate(x))
        return self.out_proj(context)  # (batch, num_tokens, d_out)

    def attention_weights(
        self, x: torch.Tensor, allowed: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Each query head's attention weights over a full pass, for heatmaps.

        Computed explicitly, key/value heads repeated with ``repeat_interleave`` (no
        dropout, no cache). ``allowed`` as in :meth:`forward`. With ``softcap`` they are
        the capped scores' weights; with ``sinks`` the weights over the real keys, each
        row summing to less than 1 (the rest went to the sink).

        Returns
        -------
        torch.Tensor, shape (batch, num_heads, num_tokens, num_tokens)
        """
        queries, keys, _, mask = self._project(x, None, allowed)
        # (b, num_kv_heads, n, head_dim) -> (b, num_heads, n, head_dim): heads 0 0 1 1 ...
        keys = keys.repeat_interleave(self.num_heads // self.num_kv_heads, dim=1)
        if self.softcap is None and self.sinks is None:
            return _scaled_dot_product_weights(queries, keys, mask, self.scale)
        return _weights(queries, keys, mask, False, self.scale, self.softcap, self.sinks)
