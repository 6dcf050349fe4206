"""One attention step: ``softmax(q @ k^T * scale) @ v``, masked, with dropout.

Every module of the package that turns queries, keys and values into context vectors
calls :func:`~attention.attend` (or its unchecked twin): the fast variants of chapter 7,
:class:`~attention.GroupedQueryAttention` and
:class:`~attention.MultiHeadLatentAttention`. The modules own the weights, the head
split, the rotation and the cache; this function owns the attention itself, so that a
change to it (a cap on the scores, an attention sink) is made once.

Two implementations compute the same function, as ``transformers`` picks one with
``attn_implementation``:

* ``"sdpa"``: PyTorch's ``scaled_dot_product_attention``, which picks a fused kernel
  and never forms the ``(num_queries, num_keys)`` weights when it need not;
* ``"eager"``: the book's way, the weights of
  :func:`~attention.scaled_dot_product_weights`, dropout, then the weighted sum.

Three changes to the scores that models make, which this function applies itself, so
that with any of them the eager way runs whatever ``implementation`` says:

* ``softcap``: Gemma 2's ``attn_logit_softcapping``, the scaled scores squashed into
  ``(-softcap, softcap)`` by ``softcap * tanh(scores / softcap)`` before the mask;
* ``sinks``: gpt-oss's attention sinks, one learned logit per head that joins every
  softmax and whose weight is then dropped, so a query's weights over the keys may sum
  to less than 1;
* ``bias``: a number added to each score after the scale, the way positions enter the
  scores of ALiBi (BLOOM) and T5's relative position bias (:mod:`attention.positions`).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from attention import _checks

__all__ = ["attend"]

IMPLEMENTATIONS = ("sdpa", "eager")


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    allowed: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    dropout: float = 0.0,
    implementation: str = "sdpa",
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of ``num_heads`` query heads over ``num_kv_heads`` key/value heads.

    Query head ``h`` reads key/value head ``h // (num_heads // num_kv_heads)``, as if
    each key/value head were repeated with ``repeat_interleave``: one key/value head
    per query head is multi-head attention, fewer is grouped-query attention.

    Parameters
    ----------
    q : torch.Tensor, shape (batch, num_heads, num_queries, head_dim)
        The queries.
    k : torch.Tensor, shape (batch, num_kv_heads, num_keys, head_dim)
        The keys.
    v : torch.Tensor, shape (batch, num_kv_heads, num_keys, value_dim)
        The values.
        ``num_kv_heads`` must divide ``num_heads``.
    allowed : torch.Tensor of bool, optional
        ``True`` where a query may attend; broadcastable to
        ``(batch, num_heads, num_queries, num_keys)``. ``None``: every key (unless
        ``causal``).
    causal : bool
        Each query sees itself and the keys before it, without a mask tensor (which lets
        a fused kernel skip the blocks above the diagonal). Needs as many queries as
        keys, and no ``allowed``: combine the two with ``&`` and pass ``allowed``.
    scale : float, optional
        Multiplies the scores; default ``1 / sqrt(head_dim)``.
    dropout : float
        Probability in [0, 1) of dropping each attention weight; pass 0 outside
        training (the function has no training mode of its own).
    implementation : {"sdpa", "eager"}
        Which of the two implementations computes it (see the module's docstring);
        with ``softcap``, ``sinks`` or ``bias``, always the eager one.
    softcap : float, optional
        A positive number ``c``: the scaled scores ``s`` become ``c * tanh(s / c)``
        before the mask and the softmax (Gemma 2's ``attn_logit_softcapping``). Scores
        far below ``c`` hardly change; none can reach ``c``.
    sinks : torch.Tensor, shape (num_heads,), optional
        One logit per query head, of ``q``'s dtype, that joins each of the head's
        softmaxes as one more key with no value; its weight is dropped, so each row of
        weights sums to ``1 - sink weight`` (gpt-oss's ``sinks``). A sink of ``-inf`` is
        no sink. A query that the mask keeps from every key gets zeros, not NaN.
    bias : torch.Tensor, optional
        Added to the scores after the scale and the cap, before the mask, of ``q``'s
        dtype and broadcastable to ``(batch, num_heads, num_queries, num_keys)``: an
        ALiBi or a T5 bias of shape ``(num_heads, num_queries, num_keys)`` serves
        every sequence of the batch.

    Returns
    -------
    torch.Tensor, shape (batch, num_heads, num_queries, value_dim)

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> q = torch.randn(1, 4, 3, 8)  # 4 query heads
    >>> k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)  # 2 key/value heads
    >>> out = attend(q, k, v, causal=True)
    >>> out.shape
    torch.Size([1, 4, 3, 8])
    >>> eager = attend(q, k, v, causal=True, implementation="eager")
    >>> torch.allclose(out, eager, atol=1e-6)
    True
    >>> past_and_present = torch.ones(3, 3, dtype=torch.bool).tril()
    >>> torch.allclose(out, attend(q, k, v, allowed=past_and_present), atol=1e-6)
    True

    A cap far above every score changes nothing; a sink of 0 takes a share of each softmax,
    so the outputs shrink:

    >>> capped = attend(q, k, v, causal=True, softcap=1e6)
    >>> torch.allclose(out, capped, atol=1e-6)
    True
    >>> sunk = attend(q, k, v, causal=True, sinks=torch.zeros(4))
    >>> bool(sunk[0, :, 0].norm() < out[0, :, 0].norm())  # the first query's one value, shrunk
    True

    A bias that is the same for every key of a query changes none of its weights:

    >>> same_for_every_key = torch.full((3, 1), 5.0)  # (num_queries, 1): one per query
    >>> torch.allclose(out, attend(q, k, v, causal=True, bias=same_for_every_key), atol=1e-6)
    True
    """
    arguments = (q, k, v, allowed, causal, scale, dropout, implementation)
    _check("attend", *arguments, softcap, sinks, bias)
    return _attend(*arguments, softcap, sinks, bias)


def _check(
    owner: str,
    q: object,
    k: object,
    v: object,
    allowed: object,
    causal: object,
    scale: object,
    dropout: object,
    implementation: object,
    softcap: object = None,
    sinks: object = None,
    bias: object = None,
) -> None:
    """:func:`attend`'s argument checks, naming ``owner`` in the errors."""
    layout = (
        "expected q (batch, num_heads, num_queries, head_dim), k (batch, num_kv_heads, "
        "num_keys, head_dim) and v (batch, num_kv_heads, num_keys, "
        "value_dim) with num_kv_heads dividing num_heads"
    )
    q, k, v = _checks.attention_inputs(owner, q, k, v, layout, _grouped_heads)
    if allowed is not None:
        _checks.allowed_tensor(owner, allowed)
    _checks.flag(owner, "causal", causal, "each query sees itself and the keys before it")
    if causal and allowed is not None:
        raise ValueError(
            f"{owner}: give causal=True or allowed, not both; for both, pass "
            f"allowed=causal_mask(num_queries, num_keys) & allowed"
        )
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(
            f"{owner}: causal=True needs as many queries as keys, got {q.shape[2]} "
            f"queries and {k.shape[2]} keys; for queries that are the last tokens, pass "
            f"allowed=causal_mask(num_queries, num_keys)"
        )
    if scale is not None:
        _checks.positive_number(owner, "scale", scale, "scale must be a positive number or None")
    _checks.dropout_rate(owner, dropout)
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(
            f"{owner}: implementation must be one of {IMPLEMENTATIONS}, got {implementation!r}"
        )
    check_softcap(owner, softcap)
    if sinks is not None:
        expected = (
            f"sinks must be None or a tensor of shape (num_heads,) = ({q.shape[1]},) "
            f"and of q's dtype {q.dtype}"
        )
        if not isinstance(sinks, torch.Tensor):
            raise TypeError(f"{owner}: {expected}, got {type(sinks).__name__}")
        if tuple(sinks.shape) != (q.shape[1],) or sinks.dtype != q.dtype:
            raise ValueError(
                f"{owner}: {expected}, got shape {tuple(sinks.shape)} and dtype {sinks.dtype}"
            )
    if bias is not None:
        _check_bias(owner, bias, q, k)


def _check_bias(owner: str, bias: object, q: torch.Tensor, k: torch.Tensor) -> None:
    """Raise unless ``bias`` is a tensor of ``q``'s dtype that broadcasts to the scores."""
    scores = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    expected = (
        f"bias must be None or a tensor of q's dtype {q.dtype} that broadcasts to the "
        f"scores, (batch, num_heads, num_queries, num_keys) = {scores}"
    )
    if not isinstance(bias, torch.Tensor):
        raise TypeError(f"{owner}: {expected}, got {type(bias).__name__}")
    try:
        fits = torch.broadcast_shapes(bias.shape, scores) == scores
    except RuntimeError:
        fits = False
    if not fits or bias.dtype != q.dtype:
        raise ValueError(
            f"{owner}: {expected}, got shape {tuple(bias.shape)} and dtype {bias.dtype}"
        )


def _grouped_heads(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether ``q``, ``k``, ``v`` are ``(b, h, n, d)``, ``(b, h_kv, m, d)``, ``(b, h_kv, m, d_v)``.

    ``h_kv`` divides ``h``: grouped-query attention's heads, as :func:`attend` reads them.
    """
    return (
        q.dim() == k.dim() == v.dim() == 4
        and q.shape[1] % k.shape[1] == 0
        and q.shape[-1] == k.shape[-1]
        and q.shape[0] == k.shape[0]
        and k.shape[:3] == v.shape[:3]
    )


def check_softcap(owner: str, softcap: object) -> float | None:
    """Return ``softcap`` as a float (or ``None``), or raise unless it is a positive number."""
    if softcap is None:
        return None
    what = "softcap must be a positive number (the cap c in c * tanh(scores / c)) or None"
    softcap = _checks.real_number(owner, softcap, what)
    if not 0 < softcap < float("inf"):
        raise ValueError(
            f"{owner}: softcap must be a positive, finite number (the cap c in "
            f"c * tanh(scores / c)); for no cap pass None, got {softcap!r}"
        )
    return softcap


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    dropout: float = 0.0,
    implementation: str = "sdpa",
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`attend` of a module's own heads, unchecked."""
    batch, num_heads, num_queries, head_dim = q.shape
    num_kv_heads = k.shape[1]
    group = num_heads // num_kv_heads
    if implementation == "eager" or any(x is not None for x in (softcap, sinks, bias)):
        # The book's way, and the only one with a cap, sinks or a bias (beyond SDPA here)
        if group > 1:  # (b, num_kv_heads, k, d) -> (b, num_heads, k, d): heads 0 0 1 1 ...
            v = v.repeat_interleave(group, dim=1)
        weights = _weights(q, k, allowed, causal, scale, softcap, sinks, bias)
        if dropout > 0:
            weights = F.dropout(weights, dropout, training=True)
        return weights @ v  # (b, num_heads, num_queries, value_dim)
    if num_queries == 1 and group > 1 and allowed is None and not causal:
        # Decoding one token: the group's query heads become the rows of one query
        # matrix over their shared key/value head, so each cached key/value head is read
        # once for the whole group. (batch, num_heads, 1, head_dim) ->
        # (batch, num_kv_heads, group, head_dim): query head h = kv_head * group + g.
        packed = q.reshape(batch, num_kv_heads, group, head_dim)
        out = F.scaled_dot_product_attention(
            packed, k, v, dropout_p=dropout, scale=scale
        )  # (batch, num_kv_heads, group, value_dim)
        return out.reshape(batch, num_heads, 1, v.shape[-1])
    return F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=allowed,
        dropout_p=dropout,
        is_causal=causal,
        scale=scale,
        enable_gqa=group > 1,
    )


def _weights(
    q: torch.Tensor,
    k: torch.Tensor,
    allowed: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    softcap: float | None = None,
    sinks: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """The attention weights with a cap, a bias and sinks, ``(batch, num_heads, num_queries,
    num_keys)``.

    Scale, cap, bias, mask, softmax over the keys and the sink, then drop the sink's
    column: the order of Gemma 2's and gpt-oss's eager attention, with BLOOM's ALiBi and
    T5's bias added to the scaled scores as those models add them.
    """
    num_heads, num_queries = q.shape[1], q.shape[2]
    group = num_heads // k.shape[1]
    if group > 1:  # (b, num_kv_heads, k, d) -> (b, num_heads, k, d): heads 0 0 1 1 ...
        k = k.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1)  # (b, num_heads, num_queries, num_keys)
    scores = scores / k.shape[-1] ** 0.5 if scale is None else scores * scale
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if bias is not None:
        scores = scores + bias
    if causal:
        allowed = torch.ones(num_queries, num_queries, dtype=torch.bool, device=q.device)
        allowed = allowed.tril()
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    # One more logit per row, the head's sink: (b, num_heads, num_queries, num_keys + 1)
    sink_column = sinks.view(1, num_heads, 1, 1).expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat((scores, sink_column), dim=-1), dim=-1)[..., :-1]
