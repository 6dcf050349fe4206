"""KVCache: prefill plus one-token steps == one full pass; memory == the formula;
parity with LlamaAttention + DynamicCache; errors.

Tolerances (float64): EXACT (rtol 1e-10, atol 1e-12), outputs and cached keys/values.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import gqa_layouts, layout_input, make_gqa
from hf_models import EXACT, causal_4d, llama_attention, rope_cos_sin
from hypothesis import given
from hypothesis import strategies as st
from transformers import DynamicCache

from attention import GroupedQueryAttention, KVCache, kv_cache_bytes_per_token

pytestmark = pytest.mark.usefixtures("single_thread")


@given(
    layout=gqa_layouts(max_tokens=7, even_head_dim=True),
    rope=st.booleans(),
    window=st.none() | st.integers(1, 4),
    data=st.data(),
)
def test_prefill_then_steps_equals_one_full_pass(layout, rope, window, data):
    gqa = make_gqa(layout, rope_base=10000.0 if rope else None, window=window)
    x = layout_input(layout)
    n = x.shape[1]
    # A prefill, then one-token steps
    prefill = data.draw(st.integers(1, n), label="prefill")
    cuts = [0, prefill, *range(prefill + 1, n + 1)]
    cache = KVCache(window=window)
    pieces = [gqa(x[:, a:b], cache=cache) for a, b in itertools.pairwise(cuts)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), gqa(x), **EXACT)
    # A window's cache rolls: it keeps the last window - 1 tokens (tests/test_part3_local.py)
    held = n if window is None else min(n, window - 1)
    assert len(cache) == held and cache.seen_tokens == n
    assert cache.shape == (x.shape[0], gqa.num_kv_heads, held, gqa.head_dim)


@given(layout=gqa_layouts(max_tokens=7, even_head_dim=True))
def test_cache_memory_is_the_formula(layout):
    gqa = make_gqa(layout, rope_base=10000.0)
    cache = KVCache()
    assert cache.nbytes == 0
    x = layout_input(layout)
    gqa(x, cache=cache)
    batch, n = x.shape[:2]
    per_token = kv_cache_bytes_per_token(1, gqa.num_kv_heads, gqa.head_dim, torch.float64)
    assert per_token == gqa.cache_bytes_per_token == 2 * gqa.num_kv_heads * gqa.head_dim * 8
    assert cache.nbytes == batch * n * per_token


def test_formula_for_published_configs():
    assert kv_cache_bytes_per_token(12, 12, 64, 2) == 36864  # GPT-2 small, 16-bit
    assert kv_cache_bytes_per_token(32, 8, 128, torch.bfloat16) == 131072  # Llama 3 8B
    assert kv_cache_bytes_per_token(32, 8, 128, torch.bfloat16) * 4 == kv_cache_bytes_per_token(
        32, 32, 128, torch.bfloat16
    )


@given(
    layout=gqa_layouts(max_tokens=7, even_head_dim=True),
    base=st.sampled_from([10000.0, 500000.0]),
    data=st.data(),
)
def test_decoding_matches_llama_attention_with_dynamic_cache(layout, base, data):
    """Same outputs at every step, and the same keys (already rotated) and values cached."""
    gqa = make_gqa(layout, rope_base=base)
    llama = llama_attention(gqa, "sdpa")
    x = layout_input(layout)
    n = x.shape[1]
    prefill = data.draw(st.integers(1, n), label="prefill")
    ours, theirs = KVCache(), DynamicCache()
    for start, stop in zip([0, *range(prefill, n)], range(prefill, n + 1), strict=False):
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        cos_sin = rope_cos_sin(positions, gqa.head_dim, base)
        mask = causal_4d(stop - start, stop) if stop - start > 1 else None
        # The cache goes 4th, by position: `past_key_values` before transformers 5.24, `cache`
        # after, and the old keyword warns (FutureWarning) from 5.24 on.
        expected, _ = llama(x[:, start:stop], cos_sin, mask, theirs)
        torch.testing.assert_close(gqa(x[:, start:stop], cache=ours), expected, **EXACT)
    torch.testing.assert_close(ours.keys, theirs.layers[0].keys, **EXACT)
    torch.testing.assert_close(ours.values, theirs.layers[0].values, **EXACT)


def test_positions_continue_from_the_cache_length():
    """A token decoded after 3 cached ones is rotated as position 3, not 0."""
    gqa = GroupedQueryAttention(8, 8, context_length=4, num_heads=2, num_kv_heads=1, rope_base=10.0)
    x = torch.randn(1, 4, 8)
    cache = KVCache()
    gqa(x[:, :3], cache=cache)
    gqa(x[:, 3:], cache=cache)
    full = KVCache()
    gqa(x, cache=full)
    torch.testing.assert_close(cache.keys, full.keys)
    alone = KVCache()
    gqa(x[:, 3:], cache=alone)
    assert not torch.allclose(alone.keys[:, :, 0], full.keys[:, :, 3])


def test_going_past_context_length_names_both_numbers():
    gqa = GroupedQueryAttention(8, 8, context_length=5, num_heads=2, num_kv_heads=2)
    cache = KVCache()
    gqa(torch.randn(1, 4, 8), cache=cache)
    with pytest.raises(
        ValueError, match=r"holds 4 tokens and 2 more make 6, past context_length=5"
    ):
        gqa(torch.randn(1, 2, 8), cache=cache)
    gqa(torch.randn(1, 1, 8), cache=cache)  # exactly full is fine
    with pytest.raises(
        ValueError, match=r"holds 5 tokens and 1 more make 6, past context_length=5"
    ):
        gqa(torch.randn(1, 1, 8), cache=cache)


def test_crop_forgets_the_last_tokens():
    cache = KVCache()
    cache.update(torch.zeros(1, 2, 4, 3), torch.ones(1, 2, 4, 3))
    cache.crop(2)
    assert cache.shape == (1, 2, 2, 3) and cache.nbytes == 2 * 2 * 2 * 3 * 4
    with pytest.raises(
        ValueError, match=r"^KVCache: cannot crop to 3 tokens: the cache has seen only 2$"
    ):
        cache.crop(3)
    with pytest.raises(ValueError, match=r"^KVCache: length must be an integer >= 0"):
        cache.crop(-1)
    cache.crop(0)  # empties it, as new
    assert cache.keys is None and cache.seen_tokens == len(cache) == cache.nbytes == 0


@pytest.mark.parametrize(
    ("keys", "values", "message"),
    [
        (
            torch.zeros(1, 3, 1, 4),
            torch.zeros(1, 3, 1, 4),
            r"new keys of shape \(1, 3, 1, 4\).*\(1, 2, 2, 4\)",
        ),
        (torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4), r"new keys of shape \(2, 2, 1, 4\)"),
        (torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 5), r"new values of shape \(1, 2, 1, 5\)"),
        (
            torch.zeros(1, 2, 1, 4).double(),
            torch.zeros(1, 2, 1, 4).double(),
            r"torch.float64.*float32",
        ),
        (torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 1, 4), r"same dtype and leading shape"),
        ([0.0], torch.zeros(1, 2, 1, 4), r"keys must be a torch.Tensor, got list"),
    ],
)
def test_update_errors_name_what_was_expected_and_given(keys, values, message):
    cache = KVCache()
    cache.update(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
    error = ValueError if isinstance(keys, torch.Tensor) else TypeError
    with pytest.raises(error, match=message):
        cache.update(keys, values)


def test_formula_rejects_bad_sizes():
    with pytest.raises(ValueError, match=r"num_kv_heads must be at least 1, got 0"):
        kv_cache_bytes_per_token(2, 0, 64)
    with pytest.raises(TypeError, match=r"dtype \(a torch.dtype or a number of bytes\)"):
        kv_cache_bytes_per_token(2, 2, 64, "float32")


# --- storage: decoding writes in place ----------------------------------------------------


def test_decoding_writes_each_token_in_place_and_keeps_the_callers_tensors():
    """After the prefill, a step copies one token into room already there, not the cache."""
    generator = torch.Generator().manual_seed(0)
    prefill = [torch.randn(1, 2, 5, 4, generator=generator) for _ in range(2)]
    kept = [t.clone() for t in prefill]
    steps = [torch.randn(2, 1, 2, 1, 4, generator=generator) for _ in range(3)]
    cache = KVCache()
    cache.update(*prefill)
    where = (cache.keys.data_ptr(), cache.values.data_ptr())
    for keys, values in steps:
        returned = cache.update(keys, values)
        assert (cache.keys.data_ptr(), cache.values.data_ptr()) == where
        assert returned[0] is cache.keys and returned[1] is cache.values
    for i, (cached, first) in enumerate(zip((cache.keys, cache.values), prefill, strict=True)):
        expected = torch.cat((first, *(step[i] for step in steps)), dim=-2)
        assert torch.equal(cached, expected)
    # The cache copied the prefill: writing after it never reaches the caller's tensors.
    cache.crop(1)
    cache.update(*(torch.zeros(1, 2, 4, 4) for _ in range(2)))
    assert all(torch.equal(t, k) for t, k in zip(prefill, kept, strict=True))
    assert torch.equal(cache.keys[..., :1, :], kept[0][..., :1, :])
    assert torch.equal(cache.keys[..., 1:, :], torch.zeros(1, 2, 4, 4))


def test_storage_grows_when_full_and_keeps_what_was_cached():
    cache, expected = KVCache(), []
    for step in range(40):  # past the first storage's room (16 more tokens than the prefill)
        keys = torch.full((1, 1, 1 if step else 3, 2), float(step))
        cache.update(keys, keys)
        expected.append(keys)
    assert torch.equal(cache.keys, torch.cat(expected, dim=-2)) and len(cache) == 42
    assert cache.nbytes == 2 * 42 * 2 * 4  # the cached tokens, not the room after them


def test_backward_through_cached_steps_gives_the_full_pass_gradients():
    """With gradients flowing, no step overwrites a tensor an earlier step saved for backward."""
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(8, 8, context_length=6, num_heads=2, num_kv_heads=1, rope_base=10.0)
    x = torch.randn(1, 6, 8)
    cache = KVCache()
    steps = [gqa(x[:, :3], cache=cache), *(gqa(x[:, i : i + 1], cache=cache) for i in range(3, 6))]
    cached = torch.autograd.grad(torch.cat(steps, dim=1).square().sum(), gqa.W_key.weight)[0]
    full = torch.autograd.grad(gqa(x).square().sum(), gqa.W_key.weight)[0]
    torch.testing.assert_close(cached, full)


def test_a_cache_filled_in_inference_mode_goes_on_outside_it():
    cache = KVCache()
    with torch.inference_mode():
        cache.update(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2))
    keys, _ = cache.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    assert torch.equal(keys, torch.tensor([[[[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]]]))
