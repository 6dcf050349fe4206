"""Argument and input checks shared by every module.

Each check raises an error that names the module, what it expected and what it was
given, so that a reader sees the mistake in their own terms instead of a shape error
from deep inside a matrix product. As in Python, NumPy and torch, an argument of the
wrong type (a list for a tensor, a float for a size, a number for a flag) raises a
``TypeError``, and one of the right type with a wrong value (a size of 0, a tensor of
the wrong shape or dtype) raises a ``ValueError``.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterator, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Protocol, SupportsIndex

# torch is imported by the checks of tensors only, inside them: the checks of numbers
# and sizes run without it, as the atlas's cost functions do in the site's calculator.
if TYPE_CHECKING:
    import torch


class _Weighted(Protocol):
    """A module, as :func:`module_input` reads it: its parameters (their dtype)."""

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...


class _Layer(_Weighted, Protocol):
    """A layer that decodes with a cache, as :func:`cached_input` reads it."""

    d_in: int
    context_length: int


class _Seen(Protocol):
    """A cache, as :func:`cached_input` reads it (every ``attention.Cache`` is one)."""

    reindexes_positions: bool

    @property
    def seen_tokens(self) -> int: ...

    def __len__(self) -> int: ...


def whole_number(owner: str, value: object, what: str) -> int:
    """Return ``value`` as an int, or raise ``"{owner}: {what}, got ..."`` if it is not one.

    ``what`` says what was expected, such as ``"d_in must be a positive integer"``; the
    caller checks the range. A boolean is refused, though Python counts it as an int.
    """
    if type(value) is int:  # the common case, first: the protocol check below is slow
        return value
    if isinstance(value, bool):
        raise TypeError(f"{owner}: {what}, got the boolean {value}")
    try:
        if isinstance(value, SupportsIndex):  # what operator.index takes
            return operator.index(value)
    except TypeError:  # an __index__ that raises, or returns a non-int
        pass
    raise TypeError(f"{owner}: {what}, got {value!r} of type {type(value).__name__}") from None


def positive_int(owner: str, name: str, value: object) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 1."""
    number = whole_number(owner, value, f"{name} must be a positive integer")
    if number < 1:
        raise ValueError(f"{owner}: {name} must be at least 1, got {number}")
    return number


def dtype_bytes(owner: str, dtype: object) -> int:
    """Bytes of one number: a ``torch.dtype``'s size, or a positive int taken as it is."""
    torch = sys.modules.get("torch")  # a torch.dtype exists only once torch is imported
    if torch is not None and isinstance(dtype, torch.dtype):
        return dtype.itemsize
    return positive_int(owner, "dtype (a torch.dtype or a number of bytes)", dtype)


def sizes(owner: str, **values: object) -> tuple[int, ...]:
    """Each of ``values`` (say ``d_in=3``), in order, checked as a positive int.

    Raises as :func:`positive_int` does, naming ``owner``. A constructor assigns what
    it returns in plain sight: ``self.d_in, self.d_out = sizes(owner, d_in=d_in,
    d_out=d_out)``.

    >>> sizes("Layer", d_in=3, d_out=2)
    (3, 2)
    """
    return tuple(positive_int(owner, name, value) for name, value in values.items())


def flag(owner: str, name: str, value: object, meaning: str) -> bool:
    """Return ``value`` if it is True or False, or raise naming what the flag means."""
    if not isinstance(value, bool):
        raise TypeError(
            f"{owner}: {name} must be True or False ({meaning}), "
            f"got {value!r} of type {type(value).__name__}"
        )
    return value


def removed_keyword(owner: str, name: str, value: object, instead: str) -> None:
    """Raise if ``value``, given for a keyword the API no longer takes, is not ``None``.

    ``instead`` says what to write now, e.g. ``"write qkv_bias= (and out_bias=)"``.
    """
    if value is not None:
        given = repr(value) if isinstance(value, bool | int | float) else type(value).__name__
        raise ValueError(f"{owner}: {name}= is no longer taken; {instead} (got {name}={given})")


def refuse_removed(owner: str, removed: dict, instead: dict[str, str]) -> None:
    """Raise for each keyword in ``removed`` (a constructor's ``**removed``): a ``ValueError``
    saying what to write now for one the API used to take (``instead``), a ``TypeError``
    for any other, as Python's own for an unexpected keyword.

    >>> refuse_removed("Layer", {"rope_base": 1e4}, {"rope_base": "give rotary="})
    Traceback (most recent call last):
        ...
    ValueError: Layer: rope_base= is no longer taken; give rotary= (got rope_base=10000.0)
    """
    for name, value in removed.items():
        if name not in instead:
            raise TypeError(f"{owner}: unexpected keyword argument {name!r}")
        removed_keyword(owner, name, value, instead[name])


def dropout_rate(owner: str, value: object) -> float:
    """Return ``value`` as a float, or raise if it is not a probability in [0, 1)."""
    value = real_number(owner, value, "dropout must be a number in [0, 1)")
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"{owner}: dropout must be in [0, 1) (the probability of dropping a weight), "
            f"got {value}"
        )
    return float(value)


def real_number(owner: str, value: object, what: str) -> float:
    """Return ``value`` as a float, or raise a ``TypeError`` unless it is an int or float.

    ``what`` says what was expected, as in :func:`whole_number`; a boolean is refused.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{owner}: {what}, got {value!r} of type {type(value).__name__}")
    return float(value)


def positive_number(owner: str, name: str, value: object, what: str = "") -> float:
    """Return ``value`` as a float, or raise unless it is a number > 0 (an epsilon, a scale).

    ``what`` says what was expected; by default ``"{name} must be a positive number"``.
    """
    what = what or f"{name} must be a positive number"
    number = real_number(owner, value, what)
    if not number > 0:
        raise ValueError(f"{owner}: {what}, got {value!r}")
    return number


def tensor(owner: str, name: str, x: object) -> torch.Tensor:
    """Return ``x``, or raise a ``TypeError`` unless it is a tensor."""
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def divides(owner: str, what: str, **sizes: int) -> None:
    """Raise ``"{owner}: {what}, got a=.. and b=.. (a / b = ..)"`` unless ``b`` divides ``a``.

    ``sizes`` are the two, ``a`` first: ``divides(owner, what, num_heads=8, num_kv_heads=3)``.
    """
    (big_name, big), (small_name, small) = sizes.items()
    if big % small:
        raise ValueError(
            f"{owner}: {what}, got {big_name}={big} and {small_name}={small} "
            f"({big} / {small} = {big / small:g})"
        )


def heads_divide(owner: str, d_out: int, num_heads: int) -> None:
    """Raise unless ``num_heads`` splits ``d_out`` into equal whole heads."""
    what = "d_out must be divisible by num_heads so each head gets d_out // num_heads dimensions"
    divides(owner, what, d_out=d_out, num_heads=num_heads)


def multi_head_arguments(
    owner: str,
    d_in: object,
    d_out: object,
    context_length: object,
    num_heads: object,
    dropout: object,
) -> tuple[int, int, int, int, int, float]:
    """MultiHeadAttention's argument checks, in its order, for it and its rewrites.

    Returns ``(d_in, d_out, context_length, num_heads, head_dim, dropout)``, checked;
    the errors name ``owner``.

    >>> multi_head_arguments("MHA", 3, 4, 6, 2, 0.0)
    (3, 4, 6, 2, 2, 0.0)
    """
    d_in, d_out, context_length = sizes(
        owner, d_in=d_in, d_out=d_out, context_length=context_length
    )
    (heads,) = sizes(owner, num_heads=num_heads)
    rate = dropout_rate(owner, dropout)
    heads_divide(owner, d_out, heads)
    return (d_in, d_out, context_length, heads, d_out // heads, rate)


def float_tensor(
    owner: str,
    name: str,
    x: object,
    rank: int | None = None,
    layout: str = "",
    *,
    min_rank: int = 0,
) -> torch.Tensor:
    """Return ``x``, or raise unless it is a floating-point tensor, of ``rank`` dimensions if given.

    ``min_rank`` asks for at least that many dimensions instead, as ``(..., tokens, dim)``
    does. ``layout`` names the dimensions in the error, e.g. ``"(batch, heads, tokens, dim)"``.
    """
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{owner}: {name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise ValueError(
            f"{owner}: {name} must be a floating-point tensor (embeddings are real numbers), "
            f"got dtype {x.dtype}; convert it with .float()"
        )
    if (rank is not None and x.dim() != rank) or x.dim() < min_rank:
        raise ValueError(
            f"{owner}: {name} must have shape {layout}, got a {x.dim()}-D tensor "
            f"of shape {tuple(x.shape)}"
        )
    return x


def attention_inputs(
    owner: str,
    q: object,
    k: object,
    v: object,
    layout: str,
    fits: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], bool],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Return ``q``, ``k`` and ``v``, or raise unless they are floating-point tensors that fit.

    ``fits(q, k, v)`` says whether their shapes do; ``layout`` says, in the error, what
    was expected (``"expected q (batch, heads, tokens, dim), ..."``).
    """
    q, k, v = (float_tensor(owner, name, x) for name, x in (("q", q), ("k", k), ("v", v)))
    if not fits(q, k, v):
        raise ValueError(
            f"{owner}: {layout}, got q of shape {tuple(q.shape)}, k of shape "
            f"{tuple(k.shape)} and v of shape {tuple(v.shape)}"
        )
    return q, k, v


def module_input(
    module: _Weighted,
    x: object,
    *,
    d_in: int,
    ranks: tuple[int, ...] = (3,),
    context_length: int | None = None,
    names: tuple[str, str] = ("d_in", "context_length"),
) -> torch.Tensor:
    """Check the input of an attention module's forward pass.

    Checks, in order: a floating-point tensor; of a rank in ``ranks``; whose last
    dimension is ``d_in``; with at most ``context_length`` tokens; of the same dtype
    as the module's parameters. ``names`` are what the module calls ``d_in`` and
    ``context_length`` (Karpathy's ``Head`` says ``n_embd`` and ``block_size``).
    """
    owner = type(module).__name__
    d_in_name, length_name = names
    x = float_tensor(owner, "the input", x)
    layout = {2: f"(num_tokens, {d_in_name})", 3: f"(batch, num_tokens, {d_in_name})"}
    expected = " or ".join(f"{r}-D {layout[r]}" for r in ranks)
    if x.dim() not in ranks:
        hint = " Add a batch dimension with x.unsqueeze(0)." if x.dim() == 2 else ""
        raise ValueError(
            f"{owner}: expected a {expected} input with {d_in_name}={d_in}, "
            f"got a {x.dim()}-D tensor of shape {tuple(x.shape)}.{hint}"
        )
    if x.shape[-1] != d_in:
        raise ValueError(
            f"{owner}: expected the last dimension of the input to be {d_in_name}={d_in}, "
            f"got {x.shape[-1]} (input shape {tuple(x.shape)})"
        )
    if context_length is not None and x.shape[-2] > context_length:
        raise ValueError(
            f"{owner}: got {x.shape[-2]} tokens but the module was built with "
            f"{length_name}={context_length}, so its causal mask covers at most "
            f"{context_length} tokens (input shape {tuple(x.shape)}); build it with a "
            f"larger {length_name} or pass fewer tokens"
        )
    param = next(module.parameters(), None)
    if param is not None and param.dtype != x.dtype:
        raise ValueError(
            f"{owner}: the module's weights are {param.dtype} but the input is {x.dtype}; "
            f"convert one to match, e.g. module.to({x.dtype}) or x.to({param.dtype})"
        )
    return x


def cached_input(module: _Layer, x: object, cache: _Seen | None) -> tuple[torch.Tensor, int]:
    """Check the input of a forward pass that can decode with a cache (checked before).

    Checks :func:`module_input`'s rules, and that the cached and the new tokens fit in
    ``module.context_length``. Returns the input and the number of tokens the cache
    has seen (``cache.seen_tokens``: the new tokens' first position, which counts the
    tokens a rolling cache dropped). The layer has checked the cache's kind first
    (``attention.cache._check_cache``).
    """
    owner = type(module).__name__
    x = module_input(module, x, d_in=module.d_in, context_length=module.context_length)
    num_cached = 0 if cache is None else cache.seen_tokens
    num_tokens = x.shape[1]
    # A cache that re-indexes positions keeps them below its size: the module checks that.
    reindexes = cache is not None and cache.reindexes_positions
    if num_cached + num_tokens > module.context_length and not reindexes:
        held = num_cached if cache is None else len(cache)
        has = f"holds {num_cached} tokens"
        if held != num_cached:
            has = f"has seen {num_cached} tokens (holding the last {held})"
        raise ValueError(
            f"{owner}: the cache {has} and {num_tokens} more make "
            f"{num_cached + num_tokens}, past context_length={module.context_length}; "
            f"build the module with a larger context_length or start a new "
            f"{type(cache).__name__}"
        )
    return x, num_cached


def allowed_tensor(owner: str, allowed: object) -> torch.Tensor:
    """Return ``allowed``, or raise unless it is a bool tensor (the caller checks the shape)."""
    import torch

    expected = "allowed must be a bool tensor, True where a query may attend"
    if not isinstance(allowed, torch.Tensor):
        raise TypeError(f"{owner}: {expected}, got {type(allowed).__name__}")
    if allowed.dtype != torch.bool:
        raise ValueError(
            f"{owner}: {expected}, got a tensor of dtype {allowed.dtype}; a 0/1 "
            "attention_mask becomes one with .bool()"
        )
    return allowed


def allowed_mask(
    owner: str, allowed: object, scores: tuple[int, int, int, int], keys: str = "num_keys"
) -> torch.Tensor:
    """Check a layer's ``allowed`` against the shape of its ``scores`` and return it.

    The package's one contract for a mask: a bool tensor, ``True`` where a query may
    attend to a key, that broadcasts to the scores ``(batch, num_heads, num_queries,
    num_keys)`` by PyTorch's rules. A padding mask of the keys, ``(batch, num_keys)``,
    is given as ``mask[:, None, None, :]``. ``keys`` names the last dimension in the
    message (``"context_tokens"`` for cross-attention).

    >>> import torch
    >>> allowed_mask("Layer", torch.ones(2, 1, 1, 5, dtype=torch.bool), (2, 4, 3, 5)).shape
    torch.Size([2, 1, 1, 5])
    >>> allowed_mask("Layer", torch.ones(2, 5, dtype=torch.bool), (2, 4, 3, 5))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: Layer: expected allowed broadcastable to ... got shape (2, 5); ...
    """
    import torch

    allowed = allowed_tensor(owner, allowed)
    try:
        fits = torch.broadcast_shapes(allowed.shape, scores) == scores
    except RuntimeError:
        fits = False
    if not fits:
        raise ValueError(
            f"{owner}: expected allowed broadcastable to (batch, num_heads, num_queries, "
            f"{keys}) = {scores}, got shape {tuple(allowed.shape)}; a padding mask of the "
            f"keys is padding_mask(lengths, {keys})[:, None, None, :]"
        )
    return allowed


def bool_mask(owner: str, allowed: object, expected: str, *shapes: tuple[int, ...]) -> torch.Tensor:
    """Return ``allowed``, or raise ``"{owner}: {expected}, got ..."`` unless it is a bool tensor.

    Its shape must be one of ``shapes``.
    """
    import torch

    if not isinstance(allowed, torch.Tensor):
        raise TypeError(f"{owner}: {expected}, got {type(allowed).__name__}")
    if allowed.dtype != torch.bool:
        raise ValueError(
            f"{owner}: {expected}, got a tensor of dtype {allowed.dtype}; a 0/1 "
            f"attention_mask becomes one with .bool()"
        )
    if tuple(allowed.shape) not in shapes:
        raise ValueError(f"{owner}: {expected}, got shape {tuple(allowed.shape)}")
    return allowed


def sequence_lengths(owner: str, cu_seqlens: object, total_tokens: int | None = None) -> list[int]:
    """Check ``cu_seqlens`` (packed sequences' bounds) and return each sequence's length.

    ``cu_seqlens`` is 0, then the running total of the lengths, as a list of ints or a
    1-D integer tensor (:func:`~attention.varlen_attention`'s layout). ``total_tokens``:
    what the last entry must be; ``None`` takes whatever it is.
    """
    import torch

    if isinstance(cu_seqlens, torch.Tensor):
        if (
            cu_seqlens.is_floating_point()
            or cu_seqlens.is_complex()
            or cu_seqlens.dtype == torch.bool
        ):
            raise ValueError(
                f"{owner}: cu_seqlens must hold integers, got a tensor of {cu_seqlens.dtype}"
            )
        if cu_seqlens.dim() != 1:
            raise ValueError(
                f"{owner}: cu_seqlens must be 1-D, (num_sequences + 1,), got shape "
                f"{tuple(cu_seqlens.shape)}"
            )
        bounds = cu_seqlens.tolist()
    elif isinstance(cu_seqlens, Sequence) and not isinstance(cu_seqlens, str | bytes):
        what = "cu_seqlens must hold integers"
        bounds = [whole_number(owner, b, what) for b in cu_seqlens]
    else:
        raise TypeError(
            f"{owner}: cu_seqlens must be a list or a 1-D integer tensor, "
            f"got {type(cu_seqlens).__name__}"
        )
    if len(bounds) < 2:
        raise ValueError(
            f"{owner}: cu_seqlens must hold at least two entries, 0 and the end of the first "
            f"sequence, got {bounds}"
        )
    if bounds[0] != 0:
        raise ValueError(f"{owner}: cu_seqlens must start at 0, got {bounds[0]} (in {bounds})")
    for i, (start, end) in enumerate(pairwise(bounds)):
        if end <= start:
            raise ValueError(
                f"{owner}: cu_seqlens must increase strictly (every sequence has at least "
                f"one token), got cu_seqlens[{i}]={start} and cu_seqlens[{i + 1}]={end}"
            )
    if total_tokens is not None and bounds[-1] != total_tokens:
        raise ValueError(
            f"{owner}: cu_seqlens must end at total_tokens={total_tokens}, the packed "
            f"tokens in q, got {bounds[-1]} (in {bounds})"
        )
    return [end - start for start, end in pairwise(bounds)]
