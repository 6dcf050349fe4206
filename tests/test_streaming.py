"""StreamingCache: it keeps exactly the first num_sinks and the last `recent` tokens, in
order; a module decoding with it equals attention over the kept tokens alone, at
positions 0 ... len - 1 (StreamingLLM's re-indexing); errors.

transformers 5.23 has no SinkCache to compare with (it left the library), so the
reference is the plain computation: the module run without a cache on the kept
tokens' inputs. Tolerances (float64): EXACT (rtol 1e-10, atol 1e-12).
"""

from __future__ import annotations

import pytest
import torch
from helpers import expect
from hf_models import EXACT
from hypothesis import given
from hypothesis import strategies as st

from attention import GroupedQueryAttention, KVCache, Rotary, StreamingCache, apply_rope

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64


def kept_positions(seen: int, num_sinks: int, recent: int) -> list[int]:
    if seen <= num_sinks + recent:
        return list(range(seen))
    return list(range(num_sinks)) + list(range(seen - recent, seen))


@given(
    num_sinks=st.integers(0, 4),
    recent=st.integers(1, 6),
    pieces=st.lists(st.integers(1, 9), min_size=1, max_size=8),
)
def test_keeps_exactly_the_sinks_and_the_recent_tokens_in_order(num_sinks, recent, pieces):
    cache = StreamingCache(num_sinks, recent)
    seen = 0
    for size in pieces:
        # each token's key is its position; its value, minus the position
        positions = torch.arange(seen, seen + size, dtype=F64).view(1, 1, size, 1)
        new = positions.expand(1, 2, size, 3), -positions.expand(1, 2, size, 3)
        if seen + size > num_sinks + recent and size > recent:
            # some new tokens would leave at once, though a layer's queries need them
            with expect(f"StreamingCache: {size} new tokens would push some of themselves out"):
                cache.update(*new)
            assert cache.seen_tokens == seen  # refused before anything changed
            continue
        keys, values = cache.update(*new)
        seen += size
        expected = kept_positions(seen, num_sinks, recent)
        assert cache.positions == expected
        assert keys[0, 1, :, 2].tolist() == expected
        assert values[0, 0, :, 0].tolist() == [-p for p in expected]
        assert torch.equal(keys, cache.keys) and torch.equal(values, cache.values)
        assert cache.seen_tokens == seen and len(cache) == len(expected) <= num_sinks + recent


@given(
    num_sinks=st.integers(0, 3),
    recent=st.integers(1, 5),
    num_tokens=st.integers(1, 16),
    num_kv_heads=st.integers(1, 2),
    rope=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_decoding_equals_attention_over_the_kept_tokens_at_positions_from_zero(
    num_sinks, recent, num_tokens, num_kv_heads, rope, seed
):
    torch.manual_seed(seed)
    capacity = num_sinks + recent
    gqa = (
        GroupedQueryAttention(
            8,
            8,
            capacity,
            num_heads=2 * num_kv_heads if num_kv_heads == 1 else 2,
            num_kv_heads=num_kv_heads,
            rotary=Rotary(4, 100.0) if rope else None,
        )
        .to(F64)
        .eval()
    )
    x = torch.randn(1, num_tokens, 8, dtype=F64)
    cache = StreamingCache(num_sinks, recent)
    first = min(num_tokens, capacity)  # a prefill that fits, then one token at a time
    gqa(x[:, :first], cache=cache)
    for t in range(first, num_tokens):
        out = gqa(x[:, t : t + 1], cache=cache)
        kept = kept_positions(t + 1, num_sinks, recent)
        assert cache.positions == kept
        reference = gqa(x[:, kept])[:, -1:]  # the kept tokens alone, positions 0 ... len - 1
        torch.testing.assert_close(out, reference, **EXACT)


@given(
    num_sinks=st.integers(0, 3),
    recent=st.integers(2, 6),
    pieces=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    seed=st.integers(0, 2**16),
)
def test_several_new_tokens_see_the_cache_as_it_is_after_the_call(num_sinks, recent, pieces, seed):
    torch.manual_seed(seed)
    capacity = num_sinks + recent
    gqa = GroupedQueryAttention(4, 4, capacity, num_heads=2, num_kv_heads=1, rotary=Rotary(2, 50.0))
    gqa = gqa.to(F64).eval()
    pieces = [min(p, recent) for p in pieces]
    x = torch.randn(1, sum(pieces), 4, dtype=F64)
    cache, start = StreamingCache(num_sinks, recent), 0
    for size in pieces:
        out = gqa(x[:, start : start + size], cache=cache)
        start += size
        reference = gqa(x[:, cache.positions])[:, -size:]
        torch.testing.assert_close(out, reference, **EXACT)


def test_before_any_eviction_it_is_the_plain_cache():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(6, 6, 10, num_heads=3, num_kv_heads=1, rotary=Rotary(2, 10000.0))
    gqa = gqa.to(F64).eval()
    x = torch.randn(2, 10, 6, dtype=F64)
    streaming, plain = StreamingCache(2, 8), KVCache()
    for a, b in ((0, 4), (4, 5), (5, 10)):
        torch.testing.assert_close(
            gqa(x[:, a:b], cache=streaming), gqa(x[:, a:b], cache=plain), **EXACT
        )
    assert streaming.seen_tokens == 10 and streaming.positions == list(range(10))


def test_a_stream_outlives_the_module_context_length():
    gqa = GroupedQueryAttention(4, 4, 6, num_heads=1, num_kv_heads=1, rotary=Rotary(4, 100.0))
    cache = StreamingCache(2, 4)
    for _ in range(20):
        gqa(torch.randn(1, 1, 4), cache=cache)
    assert cache.seen_tokens == 20 and len(cache) == 6
    assert cache.positions == [0, 1, 16, 17, 18, 19]
    assert cache.nbytes == 2 * 6 * 4 * 4


def test_crop_before_eviction_only():
    cache = StreamingCache(1, 3)
    x = torch.zeros(1, 1, 3, 2)
    cache.update(x, x)
    cache.crop(2)
    assert len(cache) == cache.seen_tokens == 2
    cache.update(x, x)
    with expect(
        "StreamingCache: cannot crop to 3 tokens: the cache has seen 5 tokens and evicted 1"
    ):
        cache.crop(3)
    cache.crop(5)  # where it is: nothing to forget
    cache.crop(0)  # empties it, evicted tokens or not
    assert cache.keys is None and cache.seen_tokens == len(cache) == cache.nbytes == 0
    assert (cache.window, cache.chunk, cache.recent) == (None, None, 3)


@pytest.mark.parametrize(
    "kwargs, message, error",
    [
        (
            {"num_sinks": -1, "recent": 4},
            "StreamingCache: num_sinks must be an integer >= 0",
            ValueError,
        ),
        (
            {"num_sinks": 1.5, "recent": 4},
            "StreamingCache: num_sinks must be an integer >= 0",
            TypeError,
        ),
        (
            {"num_sinks": True, "recent": 4},
            "StreamingCache: num_sinks must be an integer >= 0",
            TypeError,
        ),
        ({"num_sinks": 4, "recent": 0}, "StreamingCache: recent", ValueError),
    ],
)
def test_bad_sizes_are_rejected_with_their_names(kwargs, message, error):
    with expect(message, error):
        StreamingCache(**kwargs)


def test_module_errors_name_what_is_wrong():
    gqa = GroupedQueryAttention(4, 4, 6, num_heads=1, num_kv_heads=1)
    cache = StreamingCache(1, 3)
    gqa(torch.randn(1, 4, 4), cache=cache)  # fills it: 1 + 3
    with expect("StreamingCache: 4 new tokens would push some of themselves out"):
        gqa(torch.randn(1, 4, 4), cache=cache)
    with expect("GroupedQueryAttention: a StreamingCache chooses the keys itself"):
        gqa(torch.randn(1, 1, 4), cache=cache, allowed=torch.ones(1, 5, dtype=torch.bool))
    local = GroupedQueryAttention(4, 4, 6, num_heads=1, num_kv_heads=1, window=2)
    with expect("GroupedQueryAttention: a StreamingCache chooses the keys itself"):
        local(torch.randn(1, 1, 4), cache=StreamingCache(1, 3))
    with expect("GroupedQueryAttention: the cache holds 7 tokens now, past context_length=6"):
        full = StreamingCache(3, 4)
        full.update(torch.zeros(1, 1, 3, 4), torch.zeros(1, 1, 3, 4))
        gqa(torch.randn(1, 4, 4), cache=full)
    cache = StreamingCache(1, 3)
    cache.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    with expect("StreamingCache: new keys of shape (1, 1, 1, 3)"):
        cache.update(torch.zeros(1, 1, 1, 3), torch.zeros(1, 1, 1, 3))


@given(num_sinks=st.integers(0, 3), recent=st.integers(1, 5), extra=st.integers(0, 12))
def test_rotating_at_the_cache_index_equals_sinkcache_rotating_back_by_the_shift(
    num_sinks, recent, extra
):
    # transformers' former SinkCache held keys rotated at their text positions and,
    # as tokens left, rotated the kept ones back by how far they moved. Rotations
    # compose, so that is the rotation at the cache index that the module applies.
    torch.manual_seed(num_sinks * 100 + recent * 10 + extra)
    seen = num_sinks + recent + extra
    raw = torch.randn(1, 2, seen, 6, dtype=F64)  # keys before RoPE
    cache = StreamingCache(num_sinks, recent)
    cache.update(raw[..., : num_sinks + recent, :], raw[..., : num_sinks + recent, :])
    for t in range(num_sinks + recent, seen):  # then one token at a time
        cache.update(raw[..., t : t + 1, :], raw[..., t : t + 1, :])
    positions = torch.tensor(cache.positions)
    index = torch.arange(len(cache))
    sinkcache_way = apply_rope(apply_rope(cache.keys, positions), index - positions)
    torch.testing.assert_close(sinkcache_way, apply_rope(cache.keys, index), **EXACT)
