"""Boolean attention masks beyond the plain causal triangle.

Every mask here uses the convention of ``scaled_dot_product_attention``'s boolean
``attn_mask``, which is the package's one meaning of a boolean mask: ``True`` where a
query *may attend* (or, for :func:`~attention.padding_mask`, where a token is real).
Functions and modules take such a mask as ``allowed=``. Only the book's modules keep
the book's ``mask`` buffer, ``True`` for the hidden future (``masked_fill``); they
pass ``allowed=~mask``.

* :func:`~attention.causal_mask`: each query sees itself and the past. With fewer queries than
  keys (decoding with a cache) the queries are the *last* ones, so the triangle is
  aligned to the bottom-right corner, as ``torch.nn.attention.bias.causal_lower_right``
  does, not the top-left corner that ``is_causal=True`` uses.
* :func:`~attention.sliding_window_mask`: causal, and only the last ``window`` positions, the
  query included (Mistral, Gemma's local layers); with ``causal=False``, ``window``
  positions on each side (ModernBERT's local layers, an encoder's).
* :func:`~attention.chunked_mask`: causal, and only within the query's own chunk of
  ``chunk`` positions (Llama 4's chunked local attention).
* :func:`~attention.padding_mask`: which tokens of a right-padded batch are real.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attention import _checks

__all__ = ["causal_mask", "chunked_mask", "padding_mask", "sliding_window_mask"]


def _non_negative_int(owner: str, name: str, value: object) -> int:
    number = _checks.whole_number(owner, value, f"{name} must be an integer >= 0")
    if number < 0:
        raise ValueError(f"{owner}: {name} must be at least 0, got {number}")
    return number


def _span(owner: str, name: str, value: object, meaning: str) -> int:
    """Return ``value``, a window or chunk size, as an int >= 1, or raise."""
    what = f"{name} must be an integer >= 1 ({meaning})"
    value = _checks.whole_number(owner, value, what)
    if value < 1:
        raise ValueError(f"{owner}: {what}, got {name}={value}")
    return value


def _window(owner: str, window: object) -> int:
    return _span(owner, "window", window, "how many positions a query sees, itself included")


def causal_mask(
    num_queries: int,
    num_keys: int | None = None,
    *,
    window: int | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Which keys each query may attend to: itself and the past, optionally only the recent past.

    The queries are the *last* ``num_queries`` of ``num_keys`` positions: query ``i``
    sits at position ``num_keys - num_queries + i`` and sees keys up to there.

    Parameters
    ----------
    num_queries : int
        Number of queries, at least 1.
    num_keys : int, optional
        Number of keys, at least ``num_queries``; default ``num_queries``.
    window : int, optional
        If given, a query at position ``p`` sees only keys ``p - window + 1 ... p``.
    device : torch.device or str, optional
        Where to build the mask.

    Returns
    -------
    torch.Tensor of bool, shape (num_queries, num_keys)
        ``True`` where the query may attend.

    Examples
    --------
    >>> causal_mask(2, 4).int()  # 2 new tokens after 2 cached ones: bottom-right aligned
    tensor([[1, 1, 1, 0],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    owner = "causal_mask"
    num_queries = _checks.positive_int(owner, "num_queries", num_queries)
    num_keys = (
        num_queries if num_keys is None else _checks.positive_int(owner, "num_keys", num_keys)
    )
    if num_keys < num_queries:
        raise ValueError(
            f"{owner}: num_keys must be at least num_queries (the queries are the last "
            f"tokens, and each sees itself), got num_queries={num_queries} and "
            f"num_keys={num_keys}"
        )
    window = None if window is None else _window(owner, window)
    return _causal_mask(num_queries, num_keys, window, device)


def _causal_mask(
    num_queries: int, num_keys: int, window: int | None, device: torch.device | str | None
) -> torch.Tensor:
    """:func:`causal_mask` of arguments already checked (the modules' own sizes)."""
    query_pos = torch.arange(num_keys - num_queries, num_keys, device=device)[:, None]
    key_pos = torch.arange(num_keys, device=device)[None, :]
    allowed = key_pos <= query_pos  # (num_queries, num_keys)
    if window is not None:
        allowed &= key_pos > query_pos - window
    return allowed


def sliding_window_mask(num_tokens: int, window: int, *, causal: bool = True) -> torch.Tensor:
    """Attention over the nearest ``window`` positions only: the last ones, or both sides.

    Query ``i`` sees keys ``i - window + 1`` to ``i``: itself and the ``window - 1``
    tokens before it, as ``transformers``' Mistral does with ``sliding_window=window``.
    Stacking layers widens what a token can draw on: after ``L`` layers, information
    from up to ``L * (window - 1)`` positions back.

    The Mistral paper counts one more: it writes the window ``W`` as positions
    ``i - W`` to ``i``, ``W + 1`` tokens, and its original reference code
    (``one_file_ref.py`` in ``mistralai/mistral-src``) builds that band with
    ``torch.triu(mask, diagonal=-W)``. The paper's window ``W`` is ``window=W + 1``
    here; ``transformers``, which reads Mistral 7B's released ``config.json``, counts
    as this function does.

    With ``causal=False`` the window reaches as far on both sides, as in an encoder's
    local layers: query ``i`` sees keys ``j`` with ``|i - j| < window``, ``window - 1``
    positions before it and as many after, ``2 * window - 1`` keys in all (the mask is
    the causal one or'ed with its transpose). ``transformers`` counts the
    bidirectional window without the query: ModernBERT's ``local_attention=128``
    becomes its ``sliding_window = 64`` and a mask ``|i - j| <= 64``, which is
    ``window=65`` here.

    Parameters
    ----------
    num_tokens : int
        Number of tokens (queries and keys), at least 1.
    window : int
        Positions each query sees on each side it looks to, itself included, at
        least 1. ``window >= num_tokens`` is the plain causal mask (or, with
        ``causal=False``, no mask at all); ``window == 1`` lets each token see only
        itself.
    causal : bool
        Keyword only. ``True``: the past side only; ``False``: both sides.

    Returns
    -------
    torch.Tensor of bool, shape (num_tokens, num_tokens)
        ``True`` where the query may attend; with ``causal=True``,
        ``causal_mask(num_tokens, window=window)``.

    Examples
    --------
    >>> sliding_window_mask(5, window=3).int()
    tensor([[1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [0, 1, 1, 1, 0],
            [0, 0, 1, 1, 1]], dtype=torch.int32)
    >>> sliding_window_mask(5, window=2, causal=False).int()  # one neighbour each side
    tensor([[1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [0, 1, 1, 1, 0],
            [0, 0, 1, 1, 1],
            [0, 0, 0, 1, 1]], dtype=torch.int32)
    """
    owner = "sliding_window_mask"
    num_tokens = _checks.positive_int(owner, "num_tokens", num_tokens)
    window = _window(owner, window)
    _checks.flag(owner, "causal", causal, "only the past side, or both sides of each query")
    if causal:
        return _causal_mask(num_tokens, num_tokens, window, None)
    positions = torch.arange(num_tokens)
    distance = (positions[:, None] - positions[None, :]).abs()  # (num_tokens, num_tokens)
    return distance < window


def chunked_mask(num_tokens: int, chunk: int) -> torch.Tensor:
    """Causal attention within chunks: each query sees the keys of its own chunk up to itself.

    The positions are cut into chunks of ``chunk``: ``0 ... chunk - 1``, then
    ``chunk ... 2 * chunk - 1``, and so on. Query ``i`` sees key ``j`` when ``j <= i``
    and both lie in the same chunk, ``i // chunk == j // chunk``. This is Llama 4's
    chunked local attention (``attention_chunk_size``, 8192 in its released configs),
    as ``transformers``' ``chunked_causal_mask_function`` builds it. Unlike a sliding
    window, what a token sees depends on where it falls in its chunk: the first token
    of a chunk sees only itself, the last one the whole chunk.

    Parameters
    ----------
    num_tokens : int
        Number of tokens (queries and keys), at least 1.
    chunk : int
        Positions per chunk, at least 1. ``chunk >= num_tokens`` is the plain causal
        mask; ``chunk == 1`` lets each token see only itself.

    Returns
    -------
    torch.Tensor of bool, shape (num_tokens, num_tokens)
        ``True`` where the key is in the query's chunk, at or before the query.

    Examples
    --------
    Six tokens in chunks of three; the fourth token starts afresh:

    >>> chunked_mask(6, chunk=3).int()
    tensor([[1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [0, 0, 0, 1, 0, 0],
            [0, 0, 0, 1, 1, 0],
            [0, 0, 0, 1, 1, 1]], dtype=torch.int32)
    """
    owner = "chunked_mask"
    num_tokens = _checks.positive_int(owner, "num_tokens", num_tokens)
    chunk = _span(owner, "chunk", chunk, "how many positions each chunk spans")
    return _chunked_mask(num_tokens, num_tokens, 0, chunk, None)


def _chunked_mask(
    num_queries: int, num_keys: int, first: int, chunk: int, device: torch.device | str | None
) -> torch.Tensor:
    """:func:`chunked_mask` for the last ``num_queries`` of ``num_keys`` positions from ``first``.

    Where a chunk starts depends on the absolute position, so a module decoding with a
    cache gives the position of its first key, ``first``.
    """
    key_pos = torch.arange(first, first + num_keys, device=device)
    query_pos = key_pos[num_keys - num_queries :, None]
    return (key_pos <= query_pos) & (key_pos // chunk == query_pos // chunk)


def _local_mask(
    num_queries: int,
    num_keys: int,
    first: int,
    window: int | None,
    chunk: int | None,
    device: torch.device | str | None,
) -> torch.Tensor | None:
    """A module's own mask: causal, within ``window`` or the query's chunk.

    The queries are the last ``num_queries`` of ``num_keys`` positions, the first at
    position ``first``. ``None`` when one query may see every key, which lets
    ``scaled_dot_product_attention`` pick its fastest kernel for decoding.
    """
    if num_queries == 1:
        last = first + num_keys - 1
        sees_all = (window is None or window >= num_keys) and (
            chunk is None or first // chunk == last // chunk
        )
        if sees_all:
            return None
    if chunk is not None:
        return _chunked_mask(num_queries, num_keys, first, chunk, device)
    return _causal_mask(num_queries, num_keys, window, device)


def padding_mask(lengths: Sequence[int] | torch.Tensor, num_tokens: int) -> torch.Tensor:
    """Which tokens are real in a batch of sequences padded on the right to ``num_tokens``.

    Combine it with a causal mask to hide the padding's keys:
    ``causal_mask(n) & padding_mask(lengths, n)[:, None, None, :]`` has shape
    ``(batch, 1, n, n)``, one mask per sequence shared by every head.

    Parameters
    ----------
    lengths : sequence of int or 1-D integer tensor, shape (batch,)
        Each sequence's number of real tokens, from 1 to ``num_tokens``.
    num_tokens : int
        The padded length, at least 1.

    Returns
    -------
    torch.Tensor of bool, shape (batch, num_tokens)
        ``True`` for a real token, ``False`` for padding (``transformers``'
        ``attention_mask`` with 1 and 0).

    Examples
    --------
    >>> padding_mask([3, 1, 4], num_tokens=4).int()
    tensor([[1, 1, 1, 0],
            [1, 0, 0, 0],
            [1, 1, 1, 1]], dtype=torch.int32)
    """
    owner = "padding_mask"
    num_tokens = _checks.positive_int(owner, "num_tokens", num_tokens)
    if isinstance(lengths, torch.Tensor):
        if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
            raise ValueError(f"{owner}: lengths must be integers, got a tensor of {lengths.dtype}")
        if lengths.dim() != 1:
            raise ValueError(
                f"{owner}: expected lengths of shape (batch,), got shape {tuple(lengths.shape)}"
            )
        device, lengths = lengths.device, lengths.tolist()
    else:
        device = None
        if isinstance(lengths, str | bytes) or not isinstance(lengths, Sequence):
            raise TypeError(
                f"{owner}: lengths must be a sequence of integers (one per sequence), "
                f"got {type(lengths).__name__}"
            )
        lengths = [_non_negative_int(owner, "each length", n) for n in lengths]
    if not lengths:
        raise ValueError(f"{owner}: lengths must hold at least one sequence's length, got none")
    for index, length in enumerate(lengths):
        if not 1 <= length <= num_tokens:
            raise ValueError(
                f"{owner}: each length must be from 1 to num_tokens={num_tokens} (a sequence "
                f"with no real token has nothing to attend to), got lengths[{index}]={length}"
            )
    limits = torch.tensor(lengths, device=device)[:, None]  # (batch, 1)
    return torch.arange(num_tokens, device=device)[None, :] < limits  # (batch, num_tokens)
