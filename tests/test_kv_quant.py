"""quantize_kv and QuantizedKVCache: every element within half its scale, groups as
KIVI draws them (keys per channel over tokens, values per token over channels), the
residual exact, a module decoding close to the full cache; errors.

Tolerances: the rounding bound ``|x - x_hat| <= scale / 2`` holds in exact arithmetic;
in float64 it is checked with 1e-12 of slack for the arithmetic itself. Whole-cache
equalities (incremental quantization == one quantization of the same groups) are exact.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import expect
from hf_models import EXACT
from hypothesis import given
from hypothesis import strategies as st

from attention import GroupedQueryAttention, KVCache, QuantizedKVCache, Rotary, quantize_kv

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64


@st.composite
def kv_tensors(draw: st.DrawFn, max_tokens: int = 40, max_dim: int = 20) -> tuple:
    shape = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 2)),
        draw(st.integers(1, max_tokens)),
        draw(st.integers(1, max_dim)),
    )
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    spread = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    keys = torch.randn(shape, generator=generator, dtype=F64) * spread
    # an outlier channel, as trained keys have, with an offset
    keys[..., 0] = keys[..., 0] * 10 + 5 * spread
    values = torch.randn(shape, generator=generator, dtype=F64) * spread
    return keys, values


def assert_within_half_scale(original, restored, scale):
    assert restored.shape == original.shape and restored.dtype == original.dtype
    slack = 1e-12 * (original.abs() + 1)
    assert bool(((restored - original).abs() <= scale / 2 + slack).all())


@given(kv=kv_tensors(), bits=st.sampled_from([4, 8]), group_size=st.integers(1, 16))
def test_every_element_is_within_half_its_scale(kv, bits, group_size):
    keys, values = kv
    packed = quantize_kv(keys, values, bits=bits, group_size=group_size)
    restored_keys, restored_values = packed.dequantize()
    key_scale, value_scale = packed.scales()
    assert_within_half_scale(keys, restored_keys, key_scale)
    assert_within_half_scale(values, restored_values, value_scale)


@given(kv=kv_tensors(), bits=st.sampled_from([4, 8]), group_size=st.integers(1, 16))
def test_keys_get_a_scale_per_channel_per_token_group_values_per_token_per_channel_group(
    kv, bits, group_size
):
    keys, values = kv
    batch, heads, tokens, head_dim = keys.shape
    packed = quantize_kv(keys, values, bits=bits, group_size=group_size)
    token_groups, channel_groups = math.ceil(tokens / group_size), math.ceil(head_dim / group_size)
    assert packed.key_scale.shape == (batch, heads, token_groups, head_dim)
    assert packed.value_scale.shape == (batch, heads, tokens, channel_groups)
    levels = 2**bits - 1
    for g in range(token_groups):  # the last group is shorter: its own tokens only
        group = keys[..., g * group_size : (g + 1) * group_size, :]
        span = group.amax(dim=-2) - group.amin(dim=-2)
        torch.testing.assert_close(packed.key_scale[..., g, :], span / levels, **EXACT)
        torch.testing.assert_close(packed.key_min[..., g, :], group.amin(dim=-2), **EXACT)
    for g in range(channel_groups):
        group = values[..., g * group_size : (g + 1) * group_size]
        span = group.amax(dim=-1) - group.amin(dim=-1)
        torch.testing.assert_close(packed.value_scale[..., g], span / levels, **EXACT)


def test_a_partial_last_group_has_its_own_scale():
    keys = torch.zeros(1, 1, 5, 2, dtype=F64)
    keys[..., :4, :] = torch.tensor([0.0, 3.0]).repeat(4, 1).T.reshape(4, 2)  # range 0..3
    keys[..., 4, :] = torch.tensor([10.0, 10.5])  # the lone token of the last group
    packed = quantize_kv(keys, keys, bits=8, group_size=4)
    torch.testing.assert_close(packed.key_scale[0, 0, 1], torch.zeros(2, dtype=F64))
    restored, _ = packed.dequantize()
    torch.testing.assert_close(restored[..., 4, :], keys[..., 4, :], **EXACT)


def test_a_constant_group_comes_back_exactly():
    keys = torch.full((1, 2, 7, 3), 2.5, dtype=F64)
    restored_keys, restored_values = quantize_kv(keys, keys, bits=4, group_size=4).dequantize()
    assert torch.equal(restored_keys, keys) and torch.equal(restored_values, keys)


@given(kv=kv_tensors(max_tokens=64, max_dim=16), group_size=st.integers(2, 16))
def test_int8_errs_less_than_int4(kv, group_size):
    # 255 = 17 * 15: every int4 level of a group is an int8 level too, so rounding to
    # the finer grid is never worse, element by element, and better almost always.
    keys, values = kv
    errors = {}
    for bits in (8, 4):
        back = quantize_kv(keys, values, bits=bits, group_size=group_size).dequantize()
        errors[bits] = [(b - x).abs() for b, x in zip(back, kv, strict=True)]
    for fine, coarse, x in zip(errors[8], errors[4], kv, strict=True):
        assert bool((fine <= coarse + 1e-12 * (x.abs() + 1)).all())
    totals = {bits: sum(e.sum().item() for e in errors[bits]) for bits in (8, 4)}
    if group_size > 2 and keys.numel() >= 64:  # not only minima and maxima
        assert totals[8] < totals[4]


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("head_dim", [7, 8])
def test_nbytes_counts_packed_codes_scales_and_minima(bits, head_dim):
    keys = torch.randn(2, 3, 50, head_dim)  # float32: 4-byte scales
    packed = quantize_kv(keys, keys, bits=bits, group_size=16)
    per_row = head_dim if bits == 8 else math.ceil(head_dim / 2)
    codes = 2 * 2 * 3 * 50 * per_row
    key_scales = 2 * (2 * 3 * math.ceil(50 / 16) * head_dim) * 4
    value_scales = 2 * (2 * 3 * 50 * math.ceil(head_dim / 16)) * 4
    assert packed.nbytes == codes + key_scales + value_scales
    assert packed.key_codes.dtype == torch.uint8


def test_per_channel_keys_err_less_than_per_token_keys_with_an_outlier_channel():
    generator = torch.Generator().manual_seed(0)
    keys = torch.randn(1, 1, 64, 16, generator=generator, dtype=F64)
    keys[..., 3] += 20  # an outlier channel
    packed = quantize_kv(keys, keys, bits=4, group_size=16)
    per_channel, per_token = packed.dequantize()  # values are grouped per token
    assert (per_channel - keys).abs().mean() * 4 < (per_token - keys).abs().mean()


# ---------------------------------------------------------------------------------------
# QuantizedKVCache
# ---------------------------------------------------------------------------------------


@given(
    bits=st.sampled_from([4, 8]),
    group_size=st.integers(1, 6),
    residual_length=st.integers(0, 8),
    pieces=st.lists(st.integers(1, 7), min_size=1, max_size=8),
    seed=st.integers(0, 2**16),
)
def test_cache_keeps_the_residual_exact_and_quantizes_whole_groups(
    bits, group_size, residual_length, pieces, seed
):
    generator = torch.Generator().manual_seed(seed)
    n = sum(pieces)
    keys = torch.randn(1, 2, n, 4, generator=generator, dtype=F64)
    values = torch.randn(1, 2, n, 4, generator=generator, dtype=F64)
    cache = QuantizedKVCache(bits, group_size, residual_length)
    start = 0
    for size in pieces:
        k, v = cache.update(
            keys[..., start : start + size, :], values[..., start : start + size, :]
        )
        start += size
        q = cache.quantized_tokens
        assert len(cache) == cache.seen_tokens == start == k.shape[-2]
        assert q % group_size == 0
        assert residual_length <= start - q < residual_length + group_size or q == 0
        # the newest residual_length tokens (and every one not quantized) are exact
        assert torch.equal(k[..., q:, :], keys[..., q:start, :])
        assert torch.equal(v[..., q:, :], values[..., q:start, :])
        # the rest is what one quantize_kv of those tokens gives, bit for bit
        if q:
            old_k, old_v = quantize_kv(
                keys[..., :q, :], values[..., :q, :], bits, group_size
            ).dequantize()
            assert torch.equal(k[..., :q, :], old_k) and torch.equal(v[..., :q, :], old_v)
    assert cache.shape == (1, 2, n, 4)


def test_cache_bytes_per_token_fall_with_bits():
    keys = torch.randn(1, 2, 256, 64)  # float32
    full = KVCache()
    full.update(keys, keys)
    sizes = {}
    for bits in (8, 4):
        cache = QuantizedKVCache(bits, group_size=32, residual_length=0)
        cache.update(keys, keys)
        sizes[bits] = cache.nbytes / len(cache)
    assert sizes[4] < sizes[8] < full.nbytes / 256
    # int8: 1 byte per number, plus a float32 scale and minimum per 32 numbers
    assert sizes[8] == 2 * 2 * 64 * (1 + 2 * 4 / 32)
    assert sizes[4] == 2 * 2 * 64 * (0.5 + 2 * 4 / 32)


@pytest.mark.parametrize("bits, tolerance", [(8, 0.02), (4, 0.3)])
def test_decoding_with_a_quantized_cache_stays_close_to_the_full_cache(bits, tolerance):
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(32, 32, 64, num_heads=4, num_kv_heads=2, rotary=Rotary(8, 10000.0))
    gqa = gqa.to(F64).eval()
    x = torch.randn(1, 48, 32, dtype=F64)
    full = gqa(x)
    cache = QuantizedKVCache(bits, group_size=8, residual_length=4)
    steps = [gqa(x[:, :20], cache=cache)] + [
        gqa(x[:, i : i + 1], cache=cache) for i in range(20, 48)
    ]
    out = torch.cat(steps, dim=1)
    relative = ((out - full).norm() / full.norm()).item()
    assert 0 < relative < tolerance
    assert cache.quantized_tokens == 40


def test_a_residual_as_long_as_the_text_is_the_full_cache():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(8, 8, 16, num_heads=2, num_kv_heads=1, rotary=Rotary(4, 100.0)).to(
        F64
    )
    x = torch.randn(2, 12, 8, dtype=F64)
    cache = QuantizedKVCache(4, group_size=4, residual_length=12)
    out = torch.cat([gqa(x[:, :5], cache=cache), gqa(x[:, 5:], cache=cache)], dim=1)
    torch.testing.assert_close(out, gqa(x), **EXACT)
    assert cache.quantized_tokens == 0


def test_crop_inside_the_quantized_part_keeps_whole_groups_and_the_rest_as_read():
    keys = torch.randn(1, 1, 20, 4, dtype=F64)
    cache = QuantizedKVCache(4, group_size=4, residual_length=2)
    before, _ = cache.update(keys, keys)
    assert cache.quantized_tokens == 16
    cache.crop(10)
    assert len(cache) == cache.seen_tokens == 10 and cache.quantized_tokens == 8
    after, _ = cache.update(keys[..., 10:, :], keys[..., 10:, :])
    assert after.shape[-2] == 20
    torch.testing.assert_close(after[..., :10, :], before[..., :10, :], **EXACT)
    cache.crop(19)  # inside the residual
    assert len(cache) == 19


def test_repr_and_nbytes_of_an_empty_cache():
    cache = QuantizedKVCache(8, 32, 32)
    assert cache.nbytes == 0 and len(cache) == 0 and cache.shape is None
    assert "bits=8" in repr(cache)


@pytest.mark.parametrize(
    ("bits", "shown", "error"),
    [
        (2, "2", ValueError),
        (3, "3", ValueError),
        (16, "16", ValueError),
        (True, "the boolean True", TypeError),
        ("8", "'8' of type str", TypeError),
        (8.0, "8.0 of type float", TypeError),
    ],
)
def test_bits_other_than_4_or_8_are_rejected(bits, shown, error):
    with expect(f"quantize_kv: bits must be 4 or 8, got {shown}", error):
        quantize_kv(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 2, 2), bits=bits)
    with expect(f"QuantizedKVCache: bits must be 4 or 8, got {shown}", error):
        QuantizedKVCache(bits=bits)


def test_bad_arguments_are_rejected_with_their_names():
    x = torch.zeros(1, 1, 4, 2)
    with expect("quantize_kv: group_size"):
        quantize_kv(x, x, group_size=0)
    with expect("quantize_kv: keys and values must be (batch, kv_heads, tokens, head_dim)"):
        quantize_kv(x, torch.zeros(1, 1, 4, 3))
    with expect("quantize_kv: keys and values must be (batch, kv_heads, tokens, head_dim)"):
        quantize_kv(x[0], x[0])
    with expect("quantize_kv: keys"):
        quantize_kv(torch.zeros(1, 1, 4, 2, dtype=torch.long), x)
    with expect("QuantizedKVCache: residual_length must be an integer >= 0"):
        QuantizedKVCache(8, 32, residual_length=-1)
    with expect("QuantizedKVCache: residual_length must be an integer >= 0", TypeError):
        QuantizedKVCache(8, 32, residual_length=2.0)
    with expect("QuantizedKVCache: group_size"):
        QuantizedKVCache(8, group_size=0)
    cache = QuantizedKVCache(8, 2, 0)
    cache.update(x, x)
    with expect("QuantizedKVCache: new keys of shape (1, 1, 1, 3)"):
        cache.update(torch.zeros(1, 1, 1, 3), torch.zeros(1, 1, 1, 3))
    with expect("QuantizedKVCache: cannot crop to 9 tokens: the cache has seen only 4"):
        cache.crop(9)


def test_a_quantized_cache_keeps_every_token_and_serves_a_windowed_layer():
    """Like KVCache() without a window: the layer's mask picks the keys its window sees."""
    local = GroupedQueryAttention(2, 2, 8, num_heads=1, num_kv_heads=1, window=3)
    x, cache = torch.randn(1, 6, 2), QuantizedKVCache()  # a residual of 32: nothing rounded
    steps = [local(x[:, a:b], cache=cache) for a, b in ((0, 4), (4, 5), (5, 6))]
    torch.testing.assert_close(torch.cat(steps, dim=1), local(x))
    assert len(cache) == cache.seen_tokens == 6


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bits", [4, 8])
def test_16_bit_inputs_stay_within_half_a_scale_plus_their_own_rounding(dtype, bits):
    generator = torch.Generator().manual_seed(0)
    keys = torch.randn(2, 2, 70, 40, generator=generator) * 3 + 1
    keys[..., 3] += 20  # an outlier channel
    keys = keys.to(dtype)
    packed = quantize_kv(keys, keys, bits=bits, group_size=32)
    assert packed.key_scale.dtype == packed.value_min.dtype == dtype
    restored = packed.dequantize()
    for back, scale in zip(restored, packed.scales(), strict=True):
        assert back.dtype == dtype
        # the result is rounded to the dtype once: half a unit in its last place
        ulp = torch.finfo(dtype).eps * keys.double().abs()
        error = (back.double() - keys.double()).abs()
        assert bool((error <= scale.double() / 2 + ulp).all())
