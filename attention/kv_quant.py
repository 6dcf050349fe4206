"""A quantized key-value cache: keys per channel, values per token (KIVI).

A KV cache stores each number in 16 or 32 bits. Stored as an 8-bit or 4-bit integer
code plus one scale and one offset per small group of numbers, it takes two to eight
times less memory, at the price of a rounding error that the scales bound.

Which numbers share a scale matters. Liu et al. ("KIVI: A Tuning-Free Asymmetric 2bit
Quantization for KV Cache", 2024) found that the keys of trained models have a few
*outlier channels*: some of the ``head_dim`` dimensions are large for every token. A
scale shared by the numbers of one token would be set by its outlier channel and round
every other channel coarsely; a scale per channel fits each channel's own range. Values
have no such channels, and each output mixes values token by token, so they are grouped
per token. :func:`~attention.quantize_kv` does this for a whole tensor;
:class:`~attention.QuantizedKVCache` keeps the newest tokens exact and the rest
quantized, as KIVI does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attention import _checks
from attention.cache import _CacheBase
from attention.kv_cache import _check_new

__all__ = ["QuantizedKV", "QuantizedKVCache", "quantize_kv"]


def _bits(owner: str, bits: object) -> int:
    bits = _checks.whole_number(owner, bits, "bits must be 4 or 8")
    if bits not in (4, 8):
        raise ValueError(f"{owner}: bits must be 4 or 8, got {bits!r}")
    return bits


def _group(axis_length: int, group_size: int) -> tuple[int, int]:
    """Number of groups along an axis, and the padding that completes the last one."""
    groups = -(-axis_length // group_size)
    return groups, groups * group_size - axis_length


def _min_max_codes(
    x: torch.Tensor, axis: int, group_size: int, bits: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Codes, scales and minima of ``x`` quantized over groups along ``axis`` (-1 or -2).

    The scale and the minimum have the shape of ``x`` with ``axis`` shrunk to the
    number of groups. A partial last group is completed with copies of its last
    element, which change neither its minimum nor its maximum, then cut off again.
    """
    length = x.shape[axis]
    groups, pad = _group(length, group_size)
    moved = x.movedim(axis, -1)  # (..., length)
    if pad:
        moved = torch.cat((moved, moved[..., -1:].expand(*moved.shape[:-1], pad)), dim=-1)
    # 16-bit inputs are quantized in float32: their own arithmetic would round the
    # codes' steps. The scale and minimum are stored in the input's dtype, and the
    # codes are computed from the stored ones, which dequantization will use.
    work = torch.promote_types(x.dtype, torch.float32)
    grouped = moved.reshape(*moved.shape[:-1], groups, group_size).to(work)
    low = grouped.amin(dim=-1, keepdim=True).to(x.dtype).to(work)
    scale = (grouped.amax(dim=-1, keepdim=True) - low) / (2**bits - 1)
    scale = scale.to(x.dtype).to(work)
    # A constant group has scale 0: its code is 0 and it comes back exactly.
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.round((grouped - low) / safe).clamp_(0, 2**bits - 1).to(torch.uint8)
    codes = codes.reshape(*moved.shape[:-1], groups * group_size)[..., :length]
    return (
        codes.movedim(-1, axis),
        scale.squeeze(-1).movedim(-1, axis).to(x.dtype),
        low.squeeze(-1).movedim(-1, axis).to(x.dtype),
    )


def _expand(per_group: torch.Tensor, axis: int, group_size: int, length: int) -> torch.Tensor:
    """One number per group along ``axis`` -> one per element (``length`` of them)."""
    return per_group.repeat_interleave(group_size, dim=axis).narrow(axis, 0, length)


def _pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """int4 codes two to a byte along the last axis (padded to an even length); int8 as is."""
    if bits == 8:
        return codes
    if codes.shape[-1] % 2:
        codes = torch.cat((codes, codes.new_zeros(*codes.shape[:-1], 1)), dim=-1)
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def _unpack(packed: torch.Tensor, bits: int, head_dim: int) -> torch.Tensor:
    if bits == 8:
        return packed
    codes = torch.stack((packed & 15, packed >> 4), dim=-1).flatten(-2)
    return codes[..., :head_dim]


@dataclass
class QuantizedKV:
    """Keys and values stored as integer codes, with a scale and a minimum per group.

    Made by :func:`quantize_kv`; :meth:`dequantize` gives the tensors back. A number
    ``x`` of a group with minimum ``m`` and scale ``s`` is stored as the code
    ``q = round((x - m) / s)`` and read back as ``m + q * s``.

    Attributes
    ----------
    key_codes, value_codes : torch.Tensor
        ``uint8`` codes, ``(batch, kv_heads, tokens, head_dim)`` with ``bits=8``; with
        ``bits=4`` two codes per byte, ``(..., ceil(head_dim / 2))``.
    key_scale, key_min : torch.Tensor
        ``(batch, kv_heads, ceil(tokens / group_size), head_dim)``: one per channel for
        each group of ``group_size`` tokens.
    value_scale, value_min : torch.Tensor
        ``(batch, kv_heads, tokens, ceil(head_dim / group_size))``: one per token for
        each group of ``group_size`` channels.
    bits, group_size : int
    shape : torch.Size
        The keys' (and values') shape.
    dtype : torch.dtype
        The dtype of the tensors quantized, and of the scales and minima.
    """

    key_codes: torch.Tensor
    key_scale: torch.Tensor
    key_min: torch.Tensor
    value_codes: torch.Tensor
    value_scale: torch.Tensor
    value_min: torch.Tensor
    bits: int
    group_size: int
    shape: torch.Size
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        """The bytes stored, counting the codes, scales and minima of keys and values."""
        return sum(
            t.nbytes
            for t in (
                self.key_codes,
                self.key_scale,
                self.key_min,
                self.value_codes,
                self.value_scale,
                self.value_min,
            )
        )

    def scales(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The scale of each key and each value, both of :attr:`shape`.

        Each element's rounding error is at most half of its scale.
        """
        tokens, head_dim = self.shape[-2], self.shape[-1]
        keys = _expand(self.key_scale, -2, self.group_size, tokens)
        values = _expand(self.value_scale, -1, self.group_size, head_dim)
        return keys, values

    def dequantize(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values back, ``m + q * s`` for each code ``q``, in :attr:`dtype`."""
        tokens, head_dim = self.shape[-2], self.shape[-1]
        work = torch.promote_types(self.dtype, torch.float32)  # as quantize_kv computed
        key_codes = _unpack(self.key_codes, self.bits, head_dim).to(work)
        value_codes = _unpack(self.value_codes, self.bits, head_dim).to(work)
        key_scale, value_scale = (scale.to(work) for scale in self.scales())
        key_min = _expand(self.key_min, -2, self.group_size, tokens).to(work)
        value_min = _expand(self.value_min, -1, self.group_size, head_dim).to(work)
        keys = key_min + key_codes * key_scale
        values = value_min + value_codes * value_scale
        return keys.to(self.dtype), values.to(self.dtype)


def quantize_kv(
    keys: torch.Tensor, values: torch.Tensor, bits: int = 8, group_size: int = 32
) -> QuantizedKV:
    """Quantize keys per channel and values per token, in groups (KIVI).

    Keys get one scale and one minimum per channel (each of the ``head_dim``
    dimensions) over each group of ``group_size`` tokens; values one per token over
    each group of ``group_size`` channels. The quantization is *asymmetric* (min-max,
    with the minimum as zero point, as in KIVI): the ``2**bits`` codes span exactly
    ``[min, max]`` of each group, ``scale = (max - min) / (2**bits - 1)``. A symmetric
    scheme spans ``[-max|x|, max|x|]`` and wastes half its codes on a group that does
    not straddle 0, which is what an outlier key channel looks like (large and of one
    sign for every token); with 4 bits those codes are dear. Rounding to the nearest
    code leaves every element within half its scale of its true value (up to the
    rounding of the dtype itself: float16 and bfloat16 inputs are quantized in float32
    against their stored scales and minima, and read back into their own dtype).

    When ``tokens`` (for keys) or ``head_dim`` (for values) is not a multiple of
    ``group_size``, the last group is shorter and has its own scale, over its own
    elements only.

    Parameters
    ----------
    keys, values : torch.Tensor, shape (batch, kv_heads, tokens, head_dim)
        Floating-point, the same shape and dtype.
    bits : {8, 4}
        Bits per code. 4-bit codes are stored two to a byte.
    group_size : int
        How many numbers share a scale and a minimum.

    Returns
    -------
    QuantizedKV
        ``.dequantize()`` gives ``(keys, values)`` back; ``.nbytes`` counts the codes,
        scales and minima; ``.scales()`` each element's scale.

    Examples
    --------
    >>> import torch
    >>> keys, values = torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16)
    >>> packed = quantize_kv(keys, values, bits=4, group_size=32)
    >>> packed.key_scale.shape, packed.value_scale.shape  # 2 token groups; 1 channel group
    (torch.Size([1, 2, 2, 16]), torch.Size([1, 2, 40, 1]))
    >>> k, v = packed.dequantize()
    >>> key_scale, value_scale = packed.scales()
    >>> bool(((k - keys).abs() <= key_scale / 2 + 1e-6).all())
    True
    >>> packed.nbytes, keys.nbytes + values.nbytes  # 4-bit codes plus float32 scales
    (2432, 10240)
    """
    owner = "quantize_kv"
    bits = _bits(owner, bits)
    group_size = _checks.positive_int(owner, "group_size", group_size)
    keys = _checks.float_tensor(owner, "keys", keys)
    values = _checks.float_tensor(owner, "values", values)
    if keys.dim() != 4 or keys.shape != values.shape or keys.dtype != values.dtype:
        raise ValueError(
            f"{owner}: keys and values must be (batch, kv_heads, tokens, head_dim) tensors of "
            f"the same shape and dtype, got keys of shape {tuple(keys.shape)} ({keys.dtype}) "
            f"and values of shape {tuple(values.shape)} ({values.dtype})"
        )
    if keys.shape[-2] == 0 or keys.shape[-1] == 0:
        raise ValueError(
            f"{owner}: keys and values need at least one token and one channel, got shape "
            f"{tuple(keys.shape)}"
        )
    keys, values = keys.detach(), values.detach()
    key_codes, key_scale, key_min = _min_max_codes(keys, -2, group_size, bits)
    value_codes, value_scale, value_min = _min_max_codes(values, -1, group_size, bits)
    return QuantizedKV(
        _pack(key_codes, bits),
        key_scale,
        key_min,
        _pack(value_codes, bits),
        value_scale,
        value_min,
        bits,
        group_size,
        keys.shape,
        keys.dtype,
    )


def _cat(first: QuantizedKV | None, more: QuantizedKV) -> QuantizedKV:
    """Two quantized runs of tokens as one; ``first`` must end on a whole key group."""
    if first is None:
        return more

    def cat(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cat((a, b), dim=-2)

    shape = torch.Size((*first.shape[:-2], first.shape[-2] + more.shape[-2], first.shape[-1]))
    return QuantizedKV(
        cat(first.key_codes, more.key_codes),
        cat(first.key_scale, more.key_scale),
        cat(first.key_min, more.key_min),
        cat(first.value_codes, more.value_codes),
        cat(first.value_scale, more.value_scale),
        cat(first.value_min, more.value_min),
        first.bits,
        first.group_size,
        shape,
        first.dtype,
    )


class QuantizedKVCache(_CacheBase):
    """A key-value cache that keeps the newest tokens exact and the rest quantized.

    New tokens go into a full-precision *residual* part. Once it holds
    ``residual_length + group_size`` tokens or more, its oldest whole groups of
    ``group_size`` tokens are quantized with :func:`quantize_kv` (keys per channel
    over the group's tokens, values per token) and move to the quantized part, so the
    last ``residual_length`` tokens are always exact and at most
    ``residual_length + group_size - 1`` are held in full precision (KIVI's
    residual). Every quantized key group is whole, so the quantized part grows by
    appending groups and nothing is quantized twice.

    :meth:`update` (and a layer's forward pass) returns every token: the quantized
    part dequantized, then the residual. That costs a dequantization of the whole
    cache each step; a serving kernel reads the codes inside the attention kernel
    instead. ``transformers``' ``QuantizedCache`` re-quantizes its whole cache each
    time its residual fills up, and groups keys and values the same way. It keeps
    every token (it implements :class:`~attention.KeyValueCache`, and serves a layer of
    any window the way :class:`~attention.KVCache` without a window does).

    :meth:`~.Cache.crop` inside the quantized part keeps its whole groups before the new
    length; the tokens of the group cut in two go back to the residual as their
    dequantized values (still within half a scale of the originals).

    Parameters
    ----------
    bits : {8, 4}
    group_size : int
        Tokens per key scale, channels per value scale.
    residual_length : int
        How many of the newest tokens stay exact (0 or more).

    Attributes
    ----------
    residual_keys, residual_values : torch.Tensor or None
        ``(batch, kv_heads, len(cache) - quantized_tokens, head_dim)``: the newest
        tokens, exact; ``None`` before the first update.
    reindexes_positions : bool
        ``False``, as for :class:`~attention.KVCache`.

    Examples
    --------
    >>> import torch
    >>> cache = QuantizedKVCache(bits=4, group_size=8, residual_length=4)
    >>> keys = torch.randn(1, 2, 21, 16)
    >>> k, v = cache.update(keys, keys)
    >>> len(cache), cache.quantized_tokens  # 16 tokens in two groups; 5 exact
    (21, 16)
    >>> torch.equal(k[..., 16:, :], keys[..., 16:, :])
    True
    >>> cache.nbytes, 2 * keys.nbytes  # bytes held, against a float32 KVCache's
    (2816, 5376)
    """

    window = chunk = None  # it keeps every token, as KVCache() does
    _holds = "keys and values, the older ones quantized"
    _layers = ("GroupedQueryAttention",)

    def __init__(self, bits: int = 8, group_size: int = 32, residual_length: int = 32) -> None:
        super().__init__()
        owner = type(self).__name__
        self.bits = _bits(owner, bits)
        self.group_size = _checks.positive_int(owner, "group_size", group_size)
        what = "residual_length must be an integer >= 0 (how many of the newest tokens stay exact)"
        if _checks.whole_number(owner, residual_length, what) < 0:
            raise ValueError(f"{owner}: {what}, got {residual_length!r}")
        self.residual_length = residual_length
        self._quantized: QuantizedKV | None = None
        self.residual_keys: torch.Tensor | None = None
        self.residual_values: torch.Tensor | None = None

    @property
    def quantized_tokens(self) -> int:
        """How many of the oldest tokens are held quantized."""
        return 0 if self._quantized is None else self._quantized.shape[-2]

    def __len__(self) -> int:
        """How many tokens the cache holds, quantized or exact."""
        residual = 0 if self.residual_keys is None else self.residual_keys.shape[-2]
        return self.quantized_tokens + residual

    @property
    def shape(self) -> torch.Size | None:
        """The shape of the keys that ``update`` returns, or ``None`` while empty."""
        if self.residual_keys is None:
            return None
        return torch.Size((*self.residual_keys.shape[:-2], len(self), self.residual_keys.shape[-1]))

    @property
    def nbytes(self) -> int:
        """The bytes held by the quantized part (codes, scales, minima) and the residual.

        ``nbytes / len(cache)`` is the cache's bytes per token.
        """
        quantized = 0 if self._quantized is None else self._quantized.nbytes
        if self.residual_keys is None or self.residual_values is None:  # both, or neither
            return quantized
        return quantized + self.residual_keys.nbytes + self.residual_values.nbytes

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new keys and values; return every token's, the quantized ones dequantized.

        Parameters
        ----------
        keys, values : torch.Tensor, shape (batch, kv_heads, num_new, head_dim)
            The same shape and dtype.

        Returns
        -------
        (keys, values) : tuple of torch.Tensor, shape (batch, kv_heads, len(cache), head_dim)
        """
        owner = type(self).__name__
        keys, values = _check_new(owner, keys, values, self.residual_keys, self.residual_values)
        if keys.dim() != 4 or keys.shape != values.shape:
            raise ValueError(
                f"{owner}: keys and values must both be (batch, kv_heads, num_new, head_dim), "
                f"got {tuple(keys.shape)} and {tuple(values.shape)}"
            )
        keys, values = keys.detach(), values.detach()
        self._seen += keys.shape[-2]
        # (b, kv_heads, residual + num_new, head_dim); both None, or both held
        if self.residual_keys is not None and self.residual_values is not None:
            keys = torch.cat((self.residual_keys, keys), dim=-2)
            values = torch.cat((self.residual_values, values), dim=-2)
        # Quantize the oldest whole groups beyond the residual_length newest tokens.
        move = max(keys.shape[-2] - self.residual_length, 0) // self.group_size * self.group_size
        if move:
            more = quantize_kv(
                keys[..., :move, :], values[..., :move, :], self.bits, self.group_size
            )
            self._quantized = _cat(self._quantized, more)
            keys, values = keys[..., move:, :], values[..., move:, :]
        self.residual_keys, self.residual_values = keys, values  # perhaps 0 tokens
        if self._quantized is None:
            return keys, values
        old_keys, old_values = self._quantized.dequantize()
        return torch.cat((old_keys, keys), dim=-2), torch.cat((old_values, values), dim=-2)

    def _forget(self, length: int) -> None:
        if not length:
            self._quantized = self.residual_keys = self.residual_values = None
            return
        # Every update leaves a residual (perhaps of 0 tokens), and length > 0 had one.
        assert self.residual_keys is not None and self.residual_values is not None
        quantized = self.quantized_tokens
        if length >= quantized:
            keep = length - quantized
            self.residual_keys = self.residual_keys[..., :keep, :]
            self.residual_values = self.residual_values[..., :keep, :]
            return
        assert self._quantized is not None  # length < quantized_tokens: some are
        keys, values = self._quantized.dequantize()
        whole = length // self.group_size * self.group_size
        q, groups = self._quantized, whole // self.group_size
        self._quantized = None
        if whole:
            self._quantized = QuantizedKV(
                q.key_codes[..., :whole, :],
                q.key_scale[..., :groups, :],
                q.key_min[..., :groups, :],
                q.value_codes[..., :whole, :],
                q.value_scale[..., :whole, :],
                q.value_min[..., :whole, :],
                q.bits,
                q.group_size,
                torch.Size((*q.shape[:-2], whole, q.shape[-1])),
                q.dtype,
            )
        self.residual_keys = keys[..., whole:length, :]
        self.residual_values = values[..., whole:length, :]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(bits={self.bits}, group_size={self.group_size}, "
            f"residual_length={self.residual_length}, tokens={len(self)}, "
            f"quantized_tokens={self.quantized_tokens}, nbytes={self.nbytes})"
        )
