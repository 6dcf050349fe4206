"""Rotary position embeddings (RoPE), as Llama, Mistral and DeepSeek apply them.

RoPE tells attention where each token sits by *rotating* its query and key: the
``head_dim`` numbers are taken as ``head_dim / 2`` pairs, and pair ``i`` of the token
at position ``p`` turns by the angle ``p * base ** (-2 i / head_dim)``. A query at
position ``m`` and a key at position ``n`` then meet at an angle that depends only on
``m - n``, so the scores see relative positions, whatever the absolute ones.

Two layouts pair the numbers differently:

* **half-split** (:func:`~attention.apply_rope`): number ``j`` pairs with number
  ``j + head_dim / 2``. This is the layout of ``transformers``' ``apply_rotary_pos_emb``
  with ``rotate_half``, used by Llama, Mistral and most checkpoints on the Hub.
* **interleaved** (:func:`~attention.apply_rope_interleaved`): neighbours ``(0, 1), (2, 3), ...``
  pair up, as in the RoFormer paper, Meta's original Llama code and DeepSeek's weights.

The two differ only by a fixed permutation of the head dimensions, so a model trained
with one runs with the other once the rows of its query and key weights are permuted.

**Longer contexts.** A model trained on ``n`` positions meets angles it never saw past
``n``. :func:`~attention.rope_frequencies` slows the rotations down the ways released
models do (linear position interpolation, dynamic NTK, YaRN, Llama 3.1's ``llama3``,
Gemma 4's ``proportional``), with the formulas and ``rope_parameters`` dicts of
``transformers``; :func:`~attention.apply_rope` and the modules take the same dict as
``scaling`` / ``rope_scaling``. ``partial_rotary_factor`` rotates only the first part
of each head (GPT-NeoX, Qwen3-Next).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeGuard

import torch

from attention import _checks

__all__ = ["Rotary", "apply_rope", "apply_rope_interleaved", "rope_frequencies"]

#: Each ``rope_type`` the package computes: its required keys, then its optional ones,
#: besides ``rope_type``, ``rope_theta`` and ``partial_rotary_factor``, which every type
#: takes. The names and meanings are those of ``transformers``' ``rope_parameters``.
_ROPE_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor", "original_max_position_embeddings"), ()),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"),
    ),
    "llama3": (
        ("factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"),
        (),
    ),
    "proportional": ((), ("factor",)),
}


def _number(owner: str, key: str, value: object, what: str, ok) -> float:
    """``value`` as a float if it is a real number (not a bool) for which ``ok`` holds."""
    value = _checks.real_number(owner, value, f"{key} must be {what}")
    if not math.isfinite(value) or not ok(value):
        raise ValueError(f"{owner}: {key} must be {what}, got {value!r}")
    return float(value)


def _fraction(owner: str, key: str, value: object) -> float:
    return _number(owner, key, value, "a number in (0, 1]", lambda v: 0 < v <= 1)


def _check_values(owner: str, rope_type: str, params: dict) -> None:
    """Check the value of each key a ``rope_type`` takes (their presence is checked already)."""

    def key(name: str) -> str:
        return f"scaling[{name!r}]"

    if "factor" in params:
        what = "a number >= 1 (how many times longer the context becomes)"
        params["factor"] = _number(owner, key("factor"), params["factor"], what, lambda v: v >= 1)
    if "original_max_position_embeddings" in params:
        name = key("original_max_position_embeddings")
        params["original_max_position_embeddings"] = _checks.positive_int(
            owner, name, params["original_max_position_embeddings"]
        )
    positive = ("a positive number", lambda v: v > 0)
    for name in ("attention_factor", "beta_fast", "beta_slow", "low_freq_factor"):
        if name in params:
            params[name] = _number(owner, key(name), params[name], *positive)
    for name in ("mscale", "mscale_all_dim"):
        if name in params:
            what = "a number >= 0 (0 counts as absent, as in transformers)"
            params[name] = _number(owner, key(name), params[name], what, lambda v: v >= 0)
    if "truncate" in params:
        _checks.flag(owner, key("truncate"), params["truncate"], "whether YaRN rounds its ramp")
    if rope_type == "yarn" and params.get("beta_fast", 32.0) < params.get("beta_slow", 1.0):
        raise ValueError(
            f"{owner}: scaling['beta_fast'] (the rotations below which a pair is interpolated "
            f"fully) must be at least scaling['beta_slow'], got beta_fast="
            f"{params.get('beta_fast', 32.0)!r} and beta_slow={params.get('beta_slow', 1.0)!r}"
        )
    if "high_freq_factor" in params:
        low = params["low_freq_factor"]
        what = f"a number greater than scaling['low_freq_factor']={low!r}"
        params["high_freq_factor"] = _number(
            owner, key("high_freq_factor"), params["high_freq_factor"], what, lambda v: v > low
        )


def _settings(
    owner: str,
    head_dim: int,
    base: float,
    scaling: object,
    partial_rotary_factor: object = None,
) -> tuple[int, tuple | None]:
    """Check a scaling and a partial rotary factor; return ``(rotary_dim, key)``.

    ``rotary_dim`` is the number of leading dimensions of each head that rotate (each
    cos and sin then has ``rotary_dim / 2`` columns); ``key`` is the scaling in a
    canonical, hashable form (sorted ``(name, value)`` pairs, without ``rope_theta``),
    or ``None`` for plain RoPE. ``partial_rotary_factor=None`` (for
    :func:`rope_frequencies`) takes the one in ``scaling``, as ``transformers`` does.
    """
    base = _checks.real_number(owner, base, "base must be a number greater than 1")
    if not base > 1:
        raise ValueError(f"{owner}: base must be a number greater than 1, got {base!r}")
    if partial_rotary_factor is not None:
        partial_rotary_factor = _fraction(owner, "partial_rotary_factor", partial_rotary_factor)
    if scaling is None:
        params: dict = {"rope_type": "default"}
    elif not isinstance(scaling, Mapping):
        raise TypeError(
            f"{owner}: scaling must be a dict in transformers' rope_parameters form, such as "
            f"{{'rope_type': 'linear', 'factor': 2.0}}, or None, got {type(scaling).__name__}"
        )
    else:
        params = dict(scaling)
    types = ", ".join(repr(name) for name in _ROPE_TYPES)
    if "rope_type" not in params:
        raise ValueError(
            f"{owner}: scaling needs a 'rope_type' key, one of {types}, "
            f"got the keys {sorted(params)}"
        )
    rope_type = params.pop("rope_type")
    if rope_type not in _ROPE_TYPES:
        raise ValueError(f"{owner}: scaling['rope_type'] must be one of {types}, got {rope_type!r}")
    theta = params.pop("rope_theta", None)
    if theta is not None and theta != base:
        raise ValueError(
            f"{owner}: scaling['rope_theta']={theta!r} differs from base={base!r}; "
            f"RoPE has one base: leave rope_theta out of scaling, or give the same value"
        )
    in_scaling = params.pop("partial_rotary_factor", None)
    if in_scaling is not None:
        in_scaling = _fraction(owner, "scaling['partial_rotary_factor']", in_scaling)
    required, optional = _ROPE_TYPES[rope_type]
    # An optional key given as None is absent, as transformers reads it (.get): the
    # dicts of released configs sometimes spell out a null.
    params = {k: v for k, v in params.items() if not (v is None and k in optional)}
    missing = [name for name in required if name not in params]
    if missing:
        raise ValueError(
            f"{owner}: scaling with rope_type {rope_type!r} needs the keys {list(required)}, "
            f"missing {missing}"
        )
    unknown = sorted(set(params) - set(required) - set(optional))
    if unknown:
        takes = sorted({"rope_type", "rope_theta", "partial_rotary_factor", *required, *optional})
        raise ValueError(
            f"{owner}: scaling with rope_type {rope_type!r} takes the keys {takes}, "
            f"got unknown keys {unknown}"
        )
    _check_values(owner, rope_type, params)

    if rope_type == "proportional":
        # Gemma 4: the whole head turns, with zero speed past its proportion of pairs.
        if partial_rotary_factor not in (None, 1.0):
            raise ValueError(
                f"{owner}: proportional RoPE rotates the whole head, with its own fraction "
                f"scaling['partial_rotary_factor']; got partial_rotary_factor="
                f"{partial_rotary_factor!r} too"
            )
        rotary_dim = head_dim
        params["partial_rotary_factor"] = 1.0 if in_scaling is None else in_scaling
    else:
        if partial_rotary_factor is None:
            partial_rotary_factor = 1.0 if in_scaling is None else in_scaling
        elif in_scaling is not None and in_scaling != partial_rotary_factor:
            raise ValueError(
                f"{owner}: scaling['partial_rotary_factor']={in_scaling!r} differs from "
                f"partial_rotary_factor={partial_rotary_factor!r}; give it once"
            )
        rotary_dim = int(head_dim * partial_rotary_factor)
    if rotary_dim % 2 or rotary_dim < 2:
        raise ValueError(
            f"{owner}: RoPE rotates pairs of numbers, so the rotary dimension must be even and "
            f"at least 2, got int(head_dim * partial_rotary_factor) = int({head_dim} * "
            f"{partial_rotary_factor if rope_type != 'proportional' else 1.0}) = {rotary_dim}"
        )
    if rope_type == "dynamic" and rotary_dim < 4:
        raise ValueError(
            f"{owner}: dynamic NTK scaling raises the base to the power "
            f"rotary_dim / (rotary_dim - 2), so it needs a rotary dimension of at least 4, "
            f"got {rotary_dim}"
        )
    if rope_type == "default" and not params:
        return rotary_dim, None
    return rotary_dim, tuple(sorted({"rope_type": rope_type, **params}.items()))


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's ``0.1 * mscale * ln(scale) + 1`` (1 for ``scale <= 1``), as transformers writes it."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _softmax_mscale(key: tuple | None) -> float:
    """DeepSeek-V3 multiplies its softmax scale by this twice: ``mscale(factor, mscale_all_dim)``.

    1 unless a yarn scaling has a nonzero ``mscale_all_dim`` (``yarn_apply_mscale``).
    """
    params = dict(key or ())
    if params.get("rope_type") != "yarn" or not params.get("mscale_all_dim"):
        return 1.0
    return _get_mscale(params["factor"], params["mscale_all_dim"])


def _frequencies(
    dim: int, base: float, key: tuple | None, num_tokens: int | None, device: torch.device
) -> tuple[torch.Tensor, float]:
    """``(inv_freq, attention_factor)`` of a checked scaling, in float64: ``(dim / 2,)``.

    Each formula is ``transformers``' (``modeling_rope_utils``), step for step, in float64.
    """
    params = dict(key or ())
    rope_type = params.get("rope_type", "default")
    base = float(base)
    if rope_type == "proportional":
        angles = int(params["partial_rotary_factor"] * dim // 2)  # pairs that turn
        exponents = torch.arange(0, 2 * angles, 2, dtype=torch.float64, device=device) / dim
        still = torch.zeros(dim // 2 - angles, dtype=torch.float64, device=device)
        inv_freq = torch.cat((1.0 / base**exponents, still))
        return inv_freq / params.get("factor", 1.0), 1.0
    if rope_type == "dynamic":
        # NTK-aware: a larger base once the sequence outgrows the original context.
        factor, original = params["factor"], params["original_max_position_embeddings"]
        length = original if num_tokens is None else max(num_tokens, original)
        base = base * ((factor * length / original) - (factor - 1)) ** (dim / (dim - 2))
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim
    if rope_type == "yarn":
        return _yarn(dim, base, params, exponents)
    inv_freq = 1.0 / base**exponents  # one speed per pair, fastest first
    if rope_type == "linear":
        inv_freq = inv_freq / params["factor"]  # position interpolation
    elif rope_type == "llama3":
        inv_freq = _llama3(inv_freq, params)
    return inv_freq, 1.0


def _yarn(
    dim: int, base: float, params: dict, exponents: torch.Tensor
) -> tuple[torch.Tensor, float]:
    """YaRN (Peng et al. 2023): interpolate the slow pairs, keep the fast ones, ramp between."""
    factor = params["factor"]
    original = params["original_max_position_embeddings"]
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = _get_mscale(factor, mscale) / _get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _get_mscale(factor)

    def pair_turning(rotations: float) -> float:
        # The (fractional) pair index that turns `rotations` times over the original context
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low = pair_turning(params.get("beta_fast", 32.0))
    high = pair_turning(params.get("beta_slow", 1.0))
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    keep = (1 - ramp).to(exponents.device)  # 1: extrapolate (fast pairs), 0: interpolate
    speeds = base**exponents
    extrapolated, interpolated = 1.0 / speeds, 1.0 / (factor * speeds)
    return interpolated * (1 - keep) + extrapolated * keep, float(attention_factor)


def _llama3(inv_freq: torch.Tensor, params: dict) -> torch.Tensor:
    """Llama 3.1: slow pairs divided by ``factor``, fast ones kept, a smooth blend between."""
    factor = params["factor"]
    low, high = params["low_freq_factor"], params["high_freq_factor"]
    original = params["original_max_position_embeddings"]
    low_freq_wavelen, high_freq_wavelen = original / low, original / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


def _is_dynamic(key: tuple | None) -> TypeGuard[tuple]:
    return key is not None and dict(key)["rope_type"] == "dynamic"


def _cos_sin(
    positions: torch.Tensor,
    head_dim: int,
    base: float,
    dtype: torch.dtype,
    key: tuple | None = None,
    num_tokens: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos`` and ``sin`` of each position's angles, each ``(..., num_tokens, head_dim / 2)``.

    Unchecked. ``head_dim`` is the rotary dimension, ``key`` a checked scaling (see
    :func:`_settings`), ``num_tokens`` the sequence length dynamic NTK scales for. Both
    are multiplied by the scaling's attention factor. The angles are float64 whatever
    ``dtype``: at position 4000 a float32 angle is already off by about 2e-4 radians.
    """
    inv_freq, attention_factor = _frequencies(head_dim, base, key, num_tokens, positions.device)
    angles = positions.to(torch.float64)[..., None] * inv_freq
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos.to(dtype), sin.to(dtype)


class Rotary:
    """RoPE as a part of a layer: its base, scaling and partial factor, and its cos/sin table.

    Rotates queries or keys as :func:`apply_rope` does, the tokens at positions
    ``start, start + 1, ...``. The cos and sin of each position are computed once, in
    float64, into a table the module keeps per device and dtype (grown by doubling), so
    a decoding step only slices it. A module without RoPE (NoPE) holds no ``Rotary``.
    It holds no parameters, so it is a plain object, not an ``nn.Module``: the layers
    that hold one list no extra child, and their ``state_dict`` is unchanged.

    Parameters
    ----------
    head_dim : int
        Size of each head's query and key.
    base : float
        RoPE's base (``rope_theta``), greater than 1.
    scaling : dict, optional
        RoPE scaled for a longer context, in ``transformers``' ``rope_parameters`` form
        (:func:`rope_frequencies` lists the types). ``"dynamic"`` scales for the tokens
        seen so far, ``start + num_tokens``, so cached keys keep the rotation of the step
        that made them, as in ``transformers``.
    partial_rotary_factor : float
        The fraction of each head that rotates, in (0, 1] (Qwen3-Next: 0.25);
        ``int(head_dim * partial_rotary_factor)`` must be even.
    interleaved : bool
        ``True``: the pairs that turn together are neighbours, ``(x[0], x[1])``,
        ``(x[2], x[3])``, ..., as in DeepSeek's weights (MLA's ``rope_interleave``). The
        rotation reorders each vector evens first, odds second, and turns it as the
        half-split layout does, returning that order, as ``transformers``'
        ``apply_rotary_pos_emb_interleave`` does; the dot products of queries and keys
        rotated alike are those of :func:`apply_rope_interleaved`. ``False``: the
        half-split layout of :func:`apply_rope`.

    Attributes
    ----------
    rotary_dim : int
        The leading dimensions of each head that rotate.
    base, scaling, partial_rotary_factor, interleaved : float, dict or None, float, bool

    Examples
    --------
    >>> import torch
    >>> rope = Rotary(4)
    >>> x = torch.randn(1, 2, 5, 4)  # (batch, heads, tokens, head_dim)
    >>> torch.equal(rope(x), apply_rope(x))
    True
    >>> torch.equal(rope(x[..., 3:, :], start=3), rope(x)[..., 3:, :])  # decoding on
    True
    >>> Rotary(8, 1e6, partial_rotary_factor=0.25)
    Rotary(head_dim=8, base=1000000.0, rotary_dim=2)
    >>> pairs = Rotary(4, interleaved=True)  # neighbours turn together
    >>> torch.equal(pairs(x), rope(torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)))
    True
    """

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        scaling: Mapping | None = None,
        partial_rotary_factor: float = 1.0,
        *,
        interleaved: bool = False,
    ):
        owner = type(self).__name__
        self.head_dim = _checks.positive_int(owner, "head_dim", head_dim)
        what = "whether neighbours, not halves, turn together"
        self.interleaved = _checks.flag(owner, "interleaved", interleaved, what)
        if interleaved and partial_rotary_factor != 1.0:
            raise ValueError(
                f"{owner}: an interleaved rotation turns the whole head, got "
                f"partial_rotary_factor={partial_rotary_factor}"
            )
        # The one check of a base, a scaling and a partial factor (_settings)
        self.rotary_dim, self._key = _settings(
            owner, head_dim, base, scaling, partial_rotary_factor
        )
        self.base = float(base)
        self.scaling = None if scaling is None else dict(scaling)
        self.partial_rotary_factor = float(partial_rotary_factor)
        # Dynamic NTK: past its original context, each length has its own speeds.
        self._dynamic_from = None
        if _is_dynamic(self._key):
            self._dynamic_from = dict(self._key)["original_max_position_embeddings"]
        self._tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def cos_sin(
        self, start: int, num_tokens: int, like: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of positions ``start ...``, ``(num_tokens, rotary_dim / 2)`` each.

        In ``like``'s device and dtype: rows of the table, computed the way
        :func:`apply_rope` computes them.
        """
        stop = start + num_tokens
        if self._dynamic_from is not None and stop > self._dynamic_from:
            positions = torch.arange(start, stop, device=like.device)
            dim, base, key = self.rotary_dim, self.base, self._key
            return _cos_sin(positions, dim, base, like.dtype, key, num_tokens=stop)
        tables = self._tables.get((like.device, like.dtype))
        if tables is None or tables[0].shape[0] < stop:
            length = max(stop, 2 * (0 if tables is None else tables[0].shape[0]), 64)
            # A plain tensor even when the first call runs under inference_mode, so
            # that a later training forward can save it for backward.
            with torch.inference_mode(False), torch.no_grad():
                positions = torch.arange(length, device=like.device)
                tables = _cos_sin(positions, self.rotary_dim, self.base, like.dtype, self._key)
            self._tables[(like.device, like.dtype)] = tables
        cos, sin = tables
        return cos[start:stop], sin[start:stop]

    def __call__(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Rotate ``x``, ``(..., num_tokens, head_dim)``, the tokens from position ``start`` on."""
        cos, sin = self.cos_sin(start, x.shape[-2], x)
        if self.interleaved:
            # Pairs are neighbours (0, 1), (2, 3), ...: evens first, odds second, and the
            # half-split rotation does the rest (transformers' order, and its result).
            x = torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)
        return _rotate(x, cos, sin)

    def __repr__(self) -> str:
        scaling = "" if self.scaling is None else f", scaling={self.scaling}"
        layout = ", interleaved=True" if self.interleaved else ""
        sizes = f"head_dim={self.head_dim}, base={self.base}, rotary_dim={self.rotary_dim}"
        return f"Rotary({sizes}{scaling}{layout})"


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The half-split rotation of :func:`apply_rope`, given its ``cos`` and ``sin``. Unchecked.

    ``cos`` and ``sin`` have ``rotary_dim / 2`` columns: the first ``rotary_dim`` numbers
    of each vector rotate (half-split among themselves), the rest pass through.
    """
    rotary_dim = 2 * cos.shape[-1]
    if rotary_dim < x.shape[-1]:  # partial rotary (GPT-NeoX, Qwen3-Next)
        return torch.cat((_rotate(x[..., :rotary_dim], cos, sin), x[..., rotary_dim:]), dim=-1)
    half = rotary_dim // 2
    x1, x2 = x[..., :half], x[..., half:]  # each (..., num_tokens, rotary_dim / 2)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _angles(
    owner: str,
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | None,
    base: float,
    scaling: object = None,
    partial_rotary_factor: object = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check the arguments; return ``cos`` and ``sin``, each ``(..., tokens, rotary_dim / 2)``."""
    x = _checks.float_tensor(owner, "x", x)
    if x.dim() < 2:
        raise ValueError(
            f"{owner}: expected x of shape (..., num_tokens, head_dim), "
            f"got a {x.dim()}-D tensor of shape {tuple(x.shape)}"
        )
    num_tokens, head_dim = x.shape[-2:]
    if head_dim % 2 and partial_rotary_factor == 1.0:
        raise ValueError(
            f"{owner}: head_dim must be even, since RoPE rotates pairs of numbers, "
            f"got head_dim={head_dim} (x of shape {tuple(x.shape)})"
        )
    rotary_dim, key = _settings(owner, head_dim, base, scaling, partial_rotary_factor)
    if positions is None:
        positions = torch.arange(num_tokens, device=x.device)
    else:
        positions = torch.as_tensor(positions, device=x.device)
    if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
        raise ValueError(
            f"{owner}: positions must be integers (token indices), got dtype {positions.dtype}"
        )
    if positions.dim() == 0 or positions.shape[-1] != num_tokens:
        raise ValueError(
            f"{owner}: expected positions of shape (num_tokens,) or (..., num_tokens) with "
            f"num_tokens={num_tokens}, got shape {tuple(positions.shape)}"
        )
    # Dynamic NTK scales for the longest sequence, as transformers' max(position_ids) + 1
    length = int(positions.max()) + 1 if _is_dynamic(key) and positions.numel() else None
    return _cos_sin(positions, rotary_dim, base, x.dtype, key, num_tokens=length)


def rope_frequencies(
    head_dim: int,
    base: float = 10000.0,
    scaling: Mapping | None = None,
    num_tokens: int | None = None,
) -> tuple[torch.Tensor, float]:
    """RoPE's speed per pair, scaled for a longer context, and the attention factor.

    What ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type]`` returns for
    a config with this ``head_dim`` and ``rope_parameters`` (computed here in float64,
    there in float32). ``scaling`` is that dict:

    * ``None`` or ``{"rope_type": "default"}``: ``base ** (-2 i / dim)`` for pair ``i``.
    * ``"linear"`` (``factor``): every speed divided by ``factor`` (position interpolation,
      Chen et al. 2023).
    * ``"dynamic"`` (``factor``, ``original_max_position_embeddings``): NTK-aware scaling
      for a sequence of ``num_tokens``: plain RoPE up to the original context, then a base
      ``base * (factor * num_tokens / original - (factor - 1)) ** (dim / (dim - 2))``.
      ``transformers`` reads the original context from ``config.max_position_embeddings``;
      here the dict carries it. Past the original context this stretches even with a
      ``factor`` of 1 (the base grows with ``num_tokens / original``).
    * ``"yarn"`` (``factor``, ``original_max_position_embeddings``; optional
      ``beta_fast`` 32, ``beta_slow`` 1, ``truncate`` True, ``attention_factor``,
      ``mscale``, ``mscale_all_dim``): pairs that turn more than ``beta_fast`` times over
      the original context keep their speed, those under ``beta_slow`` are divided by
      ``factor``, with a linear ramp between (Peng et al. 2023). The attention factor is
      ``0.1 ln(factor) + 1`` unless given (or a ratio of two such, with ``mscale`` and
      ``mscale_all_dim``).
    * ``"llama3"`` (``factor``, ``low_freq_factor``, ``high_freq_factor``,
      ``original_max_position_embeddings``): wavelengths above ``original /
      low_freq_factor`` divided by ``factor``, below ``original / high_freq_factor`` kept,
      a smooth blend between (Llama 3.1).
    * ``"proportional"`` (``partial_rotary_factor``, optional ``factor``): Gemma 4's global
      layers: the first ``int(partial_rotary_factor * head_dim // 2)`` pairs get the speeds
      ``base ** (-2 i / head_dim)``, the others speed 0 (they do not turn).

    A ``partial_rotary_factor`` in the dict (any other type) makes ``dim`` =
    ``int(head_dim * partial_rotary_factor)``, the dimensions that rotate; otherwise
    ``dim = head_dim``. A ``rope_theta`` must equal ``base``.

    Parameters
    ----------
    head_dim : int
        Size of each head's query and key.
    base : float
        RoPE's base (``rope_theta``).
    scaling : dict, optional
        ``transformers`` 5's ``rope_parameters``, as above.
    num_tokens : int, optional
        The sequence's length, for ``"dynamic"`` (ignored by the others); default the
        original context, which gives plain RoPE.

    Returns
    -------
    inv_freq : torch.Tensor, float64, shape (dim / 2,)
        Radians per position of each pair, fastest first.
    attention_factor : float
        What cos and sin are multiplied by (1 except for ``"yarn"``).

    Examples
    --------
    >>> rope_frequencies(4, base=100.0)  # speeds 1 and 0.1 radians per position
    (tensor([1.0000, 0.1000], dtype=torch.float64), 1.0)
    >>> rope_frequencies(4, base=100.0, scaling={"rope_type": "linear", "factor": 4.0})
    (tensor([0.2500, 0.0250], dtype=torch.float64), 1.0)

    YaRN over an original context of 64 positions: the fastest pair keeps its speed,
    pair 1 gets the mean of kept and divided, and pairs 2 and 3, which turn less than
    once in 64 positions, are divided by 4.

    >>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    >>> inv_freq, attention_factor = rope_frequencies(8, scaling=yarn)
    >>> [round(speed, 6) for speed in inv_freq.tolist()]
    [1.0, 0.0625, 0.0025, 0.00025]
    >>> round(attention_factor, 4)  # 0.1 * ln(4) + 1
    1.1386
    """
    owner = "rope_frequencies"
    head_dim = _checks.positive_int(owner, "head_dim", head_dim)
    if num_tokens is not None:
        num_tokens = _checks.positive_int(owner, "num_tokens", num_tokens)
    rotary_dim, key = _settings(owner, head_dim, base, scaling)
    return _frequencies(rotary_dim, base, key, num_tokens, torch.device("cpu"))


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | None = None,
    base: float = 10000.0,
    scaling: Mapping | None = None,
    partial_rotary_factor: float = 1.0,
) -> torch.Tensor:
    """Rotate queries or keys by their positions, in the half-split layout.

    Number ``j < head_dim / 2`` of each vector pairs with number ``j + head_dim / 2``;
    pair ``j`` at position ``p`` turns by ``p * base ** (-2 j / head_dim)`` radians.
    This is ``q * cos + rotate_half(q) * sin`` of ``transformers``.

    ``scaling`` changes the speeds for a longer context, as :func:`rope_frequencies`
    computes them, and multiplies cos and sin by its attention factor, as
    ``transformers``' rotary embeddings do. With ``partial_rotary_factor`` below 1, only
    the first ``rotary_dim = int(head_dim * partial_rotary_factor)`` numbers rotate,
    half-split among themselves (``j`` pairs with ``j + rotary_dim / 2``), with the
    speeds of a head of size ``rotary_dim``; the others pass unchanged, as in GPT-NeoX
    and Qwen3-Next.

    Parameters
    ----------
    x : torch.Tensor, shape (..., num_tokens, head_dim)
        Queries or keys, e.g. ``(batch, num_heads, num_tokens, head_dim)``; ``head_dim``
        must be even.
    positions : torch.Tensor or sequence of int, shape (num_tokens,) or (..., num_tokens), optional
        Each token's position, broadcast against ``x``'s leading dimensions.
        Default ``0, 1, ..., num_tokens - 1``.
    base : float
        Sets the slowest rotation: pair ``j`` turns once every
        ``2 pi * base ** (2 j / head_dim)`` positions. Llama 2 uses 10000, Llama 3 500000.
    scaling : dict, optional
        ``transformers`` 5's ``rope_parameters``: ``{"rope_type": "linear", "factor": 4.0}``,
        say; the types and keys of :func:`rope_frequencies`. A ``rope_theta`` in it must
        equal ``base``, a ``partial_rotary_factor`` in it ``partial_rotary_factor``.
        ``"dynamic"`` scales for the sequence up to the largest position,
        ``max(positions) + 1``, as ``transformers`` does within one call.
    partial_rotary_factor : float
        The fraction of each head that rotates, in (0, 1]; ``int(head_dim * factor)``
        must be even.

    Returns
    -------
    torch.Tensor, same shape and dtype as ``x``
        Every pair keeps its length; only its direction changes.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[1.0, 1.0, 0.0, 0.0]]).repeat(3, 1)  # 3 tokens, head_dim 4
    >>> apply_rope(x)  # pair (0, 2) turns by 1 radian per position, pair (1, 3) by 0.01
    tensor([[ 1.0000,  1.0000,  0.0000,  0.0000],
            [ 0.5403,  0.9999,  0.8415,  0.0100],
            [-0.4161,  0.9998,  0.9093,  0.0200]])
    >>> q, k = torch.randn(2, 8), torch.randn(2, 8)
    >>> near = apply_rope(q, [3, 1]) @ apply_rope(k, [3, 1]).T
    >>> far = apply_rope(q, [103, 101]) @ apply_rope(k, [103, 101]).T
    >>> torch.allclose(near, far, atol=1e-4)  # scores see only relative positions
    True

    Position interpolation: with a factor of 4, position 8 turns as far as position 2 did.

    >>> linear = {"rope_type": "linear", "factor": 4.0}
    >>> torch.allclose(apply_rope(q, [8, 8], scaling=linear), apply_rope(q, [2, 2]))
    True
    >>> apply_rope(x, partial_rotary_factor=0.5)  # only numbers 0 and 1 turn, as a pair
    tensor([[ 1.0000,  1.0000,  0.0000,  0.0000],
            [-0.3012,  1.3818,  0.0000,  0.0000],
            [-1.3254,  0.4932,  0.0000,  0.0000]])
    """
    # (..., num_tokens, rotary_dim / 2)
    cos, sin = _angles("apply_rope", x, positions, base, scaling, partial_rotary_factor)
    return _rotate(x, cos, sin)


def apply_rope_interleaved(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | None = None,
    base: float = 10000.0,
    scaling: Mapping | None = None,
) -> torch.Tensor:
    """Rotate queries or keys by their positions, in the interleaved layout.

    Neighbours ``(x[2 j], x[2 j + 1])`` form pair ``j``, which turns by
    ``p * base ** (-2 j / head_dim)`` radians at position ``p``. Same arguments,
    shapes and errors as :func:`apply_rope`, ``scaling`` included (DeepSeek-V3 uses
    YaRN with this layout); there is no ``partial_rotary_factor``: the whole head
    rotates, and a ``partial_rotary_factor`` in ``scaling`` other than 1 is refused,
    except in ``"proportional"``. The two agree once the head dimensions are reordered
    evens first, odds second:

    Examples
    --------
    >>> import torch
    >>> x = torch.randn(2, 5, 8)  # (batch, num_tokens, head_dim)
    >>> evens_then_odds = torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)
    >>> rotated = apply_rope_interleaved(x)
    >>> torch.allclose(torch.cat((rotated[..., 0::2], rotated[..., 1::2]), dim=-1),
    ...                apply_rope(evens_then_odds), atol=1e-6)
    True
    """
    cos, sin = _angles("apply_rope_interleaved", x, positions, base, scaling)
    even, odd = x[..., 0::2], x[..., 1::2]  # each (..., num_tokens, head_dim / 2)
    # stack puts each rotated pair back side by side: (..., head_dim / 2, 2) -> head_dim
    rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
    return rotated.flatten(-2)
