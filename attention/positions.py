"""Positions before RoPE: sinusoids, ALiBi's linear biases and T5's relative buckets.

Attention alone is blind to order: shuffle the keys and values together and every
query's output stays the same. Before RoPE (:mod:`attention.rope`) models told it where
each token sits in one of four ways:

* **A learned table** (GPT-2's ``wpe``): one trained vector per position, added to the
  token embeddings. It is a plain ``nn.Embedding(n_positions, d_model)``, so this module
  has nothing to add; a table has no row past ``n_positions``.
* **Sinusoids** (Vaswani et al. 2017): :func:`~attention.sinusoidal_positions`, a fixed table of
  sines and cosines added to the embeddings, defined at any position.
* **ALiBi** (Press et al. 2022; BLOOM): :func:`~attention.alibi_bias`, nothing added to the
  embeddings; each head subtracts ``slope * distance`` from its scores, with the slopes
  of :func:`~attention.alibi_slopes`.
* **T5's relative position bias** (Raffel et al. 2020): :class:`~attention.RelativePositionBias`,
  one learned number per head and per bucket of distances
  (:func:`~attention.relative_position_bucket`), added to the scores.

The two biases enter through :func:`~attention.attend`'s ``bias=``, shaped
``(num_heads, num_queries, num_keys)``. Both place the queries at the end of the keys,
as they are when a cache holds the earlier tokens: query ``i`` of ``num_queries`` sits
at position ``num_keys - num_queries + i``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attention import _checks

__all__ = [
    "RelativePositionBias",
    "alibi_bias",
    "alibi_slopes",
    "relative_position_bucket",
    "sinusoidal_positions",
]


def _dtype(owner: str, dtype: object) -> torch.dtype:
    """``dtype``, or torch's default where it is ``None``; it must be a floating-point one."""
    if dtype is None:
        return torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"{owner}: dtype must be a torch.dtype such as torch.float64, or None, "
            f"got {type(dtype).__name__}"
        )
    if not dtype.is_floating_point:
        raise ValueError(f"{owner}: dtype must be a floating-point dtype, got {dtype}")
    return dtype


def sinusoidal_positions(
    num_positions: int,
    dim: int,
    base: float = 10000.0,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The sinusoidal position table of "Attention Is All You Need", interleaved.

    Feature ``j`` of position ``p`` turns at the angle ``p / base ** (2 * (j // 2) /
    dim)``: its sine at even ``j``, its cosine at odd ``j``. Each pair ``(2i, 2i + 1)``
    is one point on a circle that position turns, fast for the first pairs and slowly
    for the last, as RoPE's pairs turn (chapter 11), but added to the embeddings
    instead of rotating queries and keys.

    This is the layout of ``transformers``' ``create_sinusoidal_embeddings`` (XLM,
    FlauBERT, DistilBERT with ``sinusoidal_pos_embds``). Marian's
    ``MarianSinusoidalPositionalEmbedding`` holds the same numbers in the half-split
    layout: every sine first, then every cosine (``torch.cat((table[:, 0::2],
    table[:, 1::2]), -1)``).

    Parameters
    ----------
    num_positions : int
        Rows of the table: positions ``0`` to ``num_positions - 1``.
    dim : int
        Features per position, the embedding size. An odd ``dim`` gets one sine more
        than cosines, as in ``transformers``.
    base : float
        The longest wavelength's scale; 10,000 in the paper.
    dtype : torch.dtype, optional
        Computed in float64, returned in ``dtype`` (default: torch's default dtype).
    device : torch.device or str, optional

    Returns
    -------
    torch.Tensor, shape (num_positions, dim)

    Examples
    --------
    >>> table = sinusoidal_positions(6, 4, dtype=torch.float64)
    >>> table.shape
    torch.Size([6, 4])
    >>> table[0].tolist()  # position 0: every sine 0, every cosine 1
    [0.0, 1.0, 0.0, 1.0]
    >>> float(table[2, 0]) == math.sin(2.0)  # the first pair turns one radian a position
    True

    The dot product of two positions' rows depends only on how far apart they are:

    >>> round(float(table[1] @ table[3]), 12) == round(float(table[2] @ table[4]), 12)
    True
    """
    owner = "sinusoidal_positions"
    num_positions = _checks.positive_int(owner, "num_positions", num_positions)
    dim = _checks.positive_int(owner, "dim", dim)
    base = _checks.real_number(owner, base, "base must be a number greater than 1")
    if not 1 < base < math.inf:
        raise ValueError(f"{owner}: base must be a finite number greater than 1, got {base!r}")
    dtype = _dtype(owner, dtype)
    positions = torch.arange(num_positions, dtype=torch.float64, device=device)
    pairs = torch.arange(dim, device=device) // 2  # feature j belongs to pair j // 2
    speeds = base ** (-2 * pairs.to(torch.float64) / dim)  # (dim,): radians per position
    angles = positions[:, None] * speeds  # (num_positions, dim)
    table = torch.empty_like(angles)
    table[:, 0::2] = torch.sin(angles[:, 0::2])
    table[:, 1::2] = torch.cos(angles[:, 1::2])
    return table.to(dtype)


def _slopes(num_heads: int) -> list[float]:
    """ALiBi's slopes, in Python floats (float64), as BLOOM builds them."""
    # Powers of two first: the largest number of heads that is one, ``closest``, gets the
    # geometric sequence 2**(-8/closest), 2**(-16/closest), ... down to 2**-8.
    closest = 1 << (num_heads.bit_length() - 1)
    base = 2.0 ** (-8.0 / closest)
    slopes = [base**power for power in range(1, closest + 1)]
    # The other heads take the sequence of twice as many heads at its odd powers: the
    # slopes that fall between those above, from the steepest down.
    extra = 2.0 ** (-8.0 / (2 * closest))
    slopes += [extra**power for power in range(1, 2 * (num_heads - closest), 2)]
    return slopes


def alibi_slopes(
    num_heads: int,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """ALiBi's slope of each head: how much a head's score drops per token of distance.

    For a power of two ``n`` heads, the geometric sequence ``2 ** (-8 i / n)``, ``i = 1
    ... n``: from ``2 ** (-8 / n)`` down to ``2 ** -8``, so some heads look far back and
    others mostly at the last few tokens. For other head counts, the sequence of the
    largest power of two below, then every other slope of the sequence of twice as many
    heads: Press et al.'s rule, as ``transformers``' BLOOM builds it
    (``build_alibi_tensor``; BLOOM has 112 heads, no power of two).

    Parameters
    ----------
    num_heads : int
    dtype : torch.dtype, optional
        Computed in float64, returned in ``dtype`` (default: torch's default dtype);
        ``transformers`` computes them in float32.
    device : torch.device or str, optional

    Returns
    -------
    torch.Tensor, shape (num_heads,)

    Examples
    --------
    >>> alibi_slopes(8).tolist()
    [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]
    >>> alibi_slopes(6).tolist()  # 4 heads' slopes, then 2 of the 8 heads' odd ones
    [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    """
    owner = "alibi_slopes"
    num_heads = _checks.positive_int(owner, "num_heads", num_heads)
    dtype = _dtype(owner, dtype)
    return torch.tensor(_slopes(num_heads), dtype=torch.float64, device=device).to(dtype)


def _queries_and_keys(owner: str, num_queries: object, num_keys: object) -> tuple[int, int]:
    num_queries = _checks.positive_int(owner, "num_queries", num_queries)
    num_keys = _checks.positive_int(owner, "num_keys", num_keys)
    if num_queries > num_keys:
        raise ValueError(
            f"{owner}: the queries are the last num_queries of num_keys tokens, so "
            f"num_queries must be at most num_keys, got num_queries={num_queries} and "
            f"num_keys={num_keys}"
        )
    return num_queries, num_keys


def _distances(num_queries: int, num_keys: int, device) -> torch.Tensor:
    """``(num_queries, num_keys)``: key position minus query position, the queries last."""
    queries = torch.arange(num_keys - num_queries, num_keys, device=device)
    keys = torch.arange(num_keys, device=device)
    return keys[None, :] - queries[:, None]  # <= 0 for the keys a causal mask keeps


def alibi_bias(
    num_heads: int,
    num_queries: int,
    num_keys: int,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """ALiBi's bias on the scores: ``-slope * (i - j)`` for query position ``i``, key ``j``.

    A key ``d`` tokens back costs head ``h`` ``slopes[h] * d`` of score, the same at
    every position and at any length: nothing is learned and nothing runs out past the
    trained length. The query of row ``r`` sits at ``i = num_keys - num_queries + r``,
    as when a cache holds the earlier tokens.

    BLOOM adds ``slope * j`` instead, which depends on the key alone
    (``build_alibi_tensor``): it differs from this bias by ``slope * i``, the same for
    every key of a row, which the softmax cancels (:func:`~attention.attend`'s
    example), so the two give the same weights under the same mask. Either is the
    distance penalty ``-slope * |i - j|`` (up to that constant) only on the keys at or
    before the query: a key after it would get a bonus instead. ALiBi in this form is
    made for causal attention, whose mask hides those keys.

    Parameters
    ----------
    num_heads, num_queries, num_keys : int
        ``num_queries`` must be at most ``num_keys``.
    dtype : torch.dtype, optional
        Computed in float64, returned in ``dtype`` (default: torch's default dtype).
    device : torch.device or str, optional

    Returns
    -------
    torch.Tensor, shape (num_heads, num_queries, num_keys)
        For :func:`~attention.attend`'s ``bias=``.

    Examples
    --------
    >>> alibi_bias(2, 3, 3, dtype=torch.float64)[0]  # the steeper head: slope 1/16
    tensor([[ 0.0000,  0.0625,  0.1250],
            [-0.0625,  0.0000,  0.0625],
            [-0.1250, -0.0625,  0.0000]], dtype=torch.float64)
    >>> alibi_bias(2, 1, 3, dtype=torch.float64)[0]  # one new query, two cached keys
    tensor([[-0.1250, -0.0625,  0.0000]], dtype=torch.float64)
    """
    owner = "alibi_bias"
    num_heads = _checks.positive_int(owner, "num_heads", num_heads)
    num_queries, num_keys = _queries_and_keys(owner, num_queries, num_keys)
    dtype = _dtype(owner, dtype)
    slopes = torch.tensor(_slopes(num_heads), dtype=torch.float64, device=device)
    distances = _distances(num_queries, num_keys, device).to(torch.float64)
    return (slopes[:, None, None] * distances).to(dtype)  # -slope * (i - j)


def _bucket_sizes(owner: str, bidirectional: object, num_buckets: object, max_distance: object):
    """Check T5's bucket settings; return ``(bidirectional, num_buckets, max_distance)``."""
    what = "buckets for keys after the query too, as T5's encoder has"
    bidirectional = _checks.flag(owner, "bidirectional", bidirectional, what)
    num_buckets = _checks.positive_int(owner, "num_buckets", num_buckets)
    max_distance = _checks.positive_int(owner, "max_distance", max_distance)
    # Each direction's buckets are half exact distances, half logarithmic: at least one
    # of each, so 2 buckets a direction.
    least = 4 if bidirectional else 2
    if num_buckets < least:
        raise ValueError(
            f"{owner}: num_buckets must be at least {least} with bidirectional="
            f"{bidirectional} (at least one exact and one logarithmic bucket for each "
            f"direction), got {num_buckets}"
        )
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    if max_distance <= exact:
        raise ValueError(
            f"{owner}: max_distance must be greater than the {exact} distances that get a "
            f"bucket each (num_buckets={num_buckets}, bidirectional={bidirectional}), "
            f"got {max_distance}"
        )
    return bidirectional, num_buckets, max_distance


def relative_position_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket for each relative position ``key - query``, as ``transformers`` computes it.

    Half of a direction's buckets hold one distance each (0, 1, 2, ...); the other half
    cover distances up to ``max_distance`` in logarithmically wider ranges; every
    distance from ``max_distance`` on shares the last bucket. Near tokens are told
    apart, far ones only roughly, and no distance is past the table's end.

    With ``bidirectional=True`` (T5's encoder) keys before the query and at it take
    buckets ``0`` to ``num_buckets // 2 - 1``, and a key ``d`` tokens *after* it takes
    the bucket of ``-d`` plus ``num_buckets // 2``; bucket ``num_buckets // 2`` itself
    is never used, since only distance 0 would map there and it counts as "before".
    With ``bidirectional=False`` (the decoder) every key after the query shares bucket
    0 with distance 0; a causal mask hides them.

    Like ``T5Attention._relative_position_bucket``, the logarithm is taken in float32:
    in float64 a few distances, at a bucket's edge, would fall one bucket lower for
    some settings (not T5's 32 buckets and 128).

    Parameters
    ----------
    relative_position : torch.Tensor of integers
        Key position minus query position, any shape.
    bidirectional : bool
        Whether keys after the query get buckets of their own.
    num_buckets : int
        ``relative_attention_num_buckets`` (T5: 32).
    max_distance : int
        ``relative_attention_max_distance`` (T5: 128).

    Returns
    -------
    torch.Tensor of int64, the shape of ``relative_position``
        Buckets in ``[0, num_buckets)``.

    Examples
    --------
    >>> back = -torch.tensor([0, 1, 2, 15, 16, 20, 127, 128, 1000])
    >>> relative_position_bucket(back, bidirectional=False).tolist()
    [0, 1, 2, 15, 16, 17, 31, 31, 31]
    >>> relative_position_bucket(back, bidirectional=True).tolist()
    [0, 1, 2, 9, 10, 10, 15, 15, 15]
    >>> relative_position_bucket(-back[1:4], bidirectional=True).tolist()  # keys after
    [17, 18, 25]
    """
    owner = "relative_position_bucket"
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(
            f"{owner}: relative_position must be a torch.Tensor of integers (key position "
            f"minus query position), got {type(relative_position).__name__}"
        )
    kind = relative_position.dtype
    if kind.is_floating_point or kind.is_complex or kind == torch.bool:
        raise ValueError(
            f"{owner}: relative_position must hold integers (key position minus query "
            f"position), got dtype {relative_position.dtype}"
        )
    sizes = _bucket_sizes(owner, bidirectional, num_buckets, max_distance)
    return _bucket(relative_position.long(), *sizes)


def _bucket(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """:func:`relative_position_bucket` of checked arguments, step for step as T5's."""
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2  # each direction gets half
        buckets += (relative_position > 0).long() * num_buckets  # keys after: upper half
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # keys after the query: distance 0
    exact = num_buckets // 2  # distances 0 .. exact - 1 get a bucket each
    # The rest share num_buckets - exact buckets, each wider than the last: the bucket
    # grows with log(distance), reaching the last one at max_distance.
    log_ratio = torch.log(distance.float() / exact) / math.log(max_distance / exact)
    far = exact + (log_ratio * (num_buckets - exact)).long()
    far = far.clamp(max=num_buckets - 1)
    return buckets + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Module):
    """T5's relative position bias: a learned number per head for each bucket of distances.

    The bias on the score of query ``i`` and key ``j`` is
    ``relative_attention_bias.weight[bucket(j - i), head]``: a head learns how much
    to favour or avoid each distance, near ones one by one and far ones in shared
    buckets (:func:`relative_position_bucket`), with no limit on the length. T5 computes
    it in the first layer of each stack and every layer adds the same bias; its scores
    are not scaled by ``1 / sqrt(head_dim)`` (``attend(..., scale=1.0)``).

    The table is an ``nn.Embedding`` named as ``T5Attention``'s, so its
    ``relative_attention_bias.weight`` loads from T5's state dict.

    Parameters
    ----------
    num_heads : int
    bidirectional : bool
        ``True`` for T5's encoder, ``False`` for its decoder (see
        :func:`relative_position_bucket`).
    num_buckets : int
        ``relative_attention_num_buckets``.
    max_distance : int
        ``relative_attention_max_distance``.

    Attributes
    ----------
    relative_attention_bias : nn.Embedding
        The learned table, shape ``(num_buckets, num_heads)``.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> bias = RelativePositionBias(4, bidirectional=False)
    >>> bias.relative_attention_bias.weight.shape  # (num_buckets, num_heads)
    torch.Size([32, 4])
    >>> bias(3, 3).shape  # (num_heads, num_queries, num_keys)
    torch.Size([4, 3, 3])
    >>> table = bias.relative_attention_bias.weight
    >>> bool(bias(3, 3)[0, 2, 0] == table[2, 0])  # head 0, two tokens back: bucket 2
    True
    >>> torch.equal(bias(1, 3), bias(3, 3)[:, 2:])  # one new query after two cached keys
    True
    """

    def __init__(
        self,
        num_heads: int,
        *,
        bidirectional: bool,
        num_buckets: int = 32,
        max_distance: int = 128,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        self.num_heads = _checks.positive_int(owner, "num_heads", num_heads)
        sizes = _bucket_sizes(owner, bidirectional, num_buckets, max_distance)
        self.bidirectional, self.num_buckets, self.max_distance = sizes
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.num_heads)

    def forward(self, num_queries: int, num_keys: int) -> torch.Tensor:
        """The bias of the last ``num_queries`` of ``num_keys`` tokens.

        Returns
        -------
        torch.Tensor, shape (num_heads, num_queries, num_keys)
            In the table's dtype and on its device, for :func:`~attention.attend`'s
            ``bias=``.
        """
        owner = type(self).__name__
        num_queries, num_keys = _queries_and_keys(owner, num_queries, num_keys)
        weight = self.relative_attention_bias.weight
        distances = _distances(num_queries, num_keys, weight.device)
        buckets = _bucket(distances, self.bidirectional, self.num_buckets, self.max_distance)
        values = self.relative_attention_bias(buckets)  # (num_queries, num_keys, num_heads)
        return values.permute(2, 0, 1)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )
