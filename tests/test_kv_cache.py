"""KVCache: prefill plus one-token steps == one full pass; memory == the formula;
parity with LlamaAttention + DynamicCache; errors.

The rolling cache (``KVCache(window=...)``, ``KVCache(chunk=...)``): after each call it
keeps the last ``window - 1`` tokens (with ``chunk``, those of the current chunk), in
token order, written in place within a fixed storage; decoding with it, in steps of any
size, gives the outputs of one full pass, and its memory stays within ``window``
tokens; it crops back only as far as it still holds, and ``context_length`` bounds the
tokens seen, not those held.

Tolerances (float64): EXACT (rtol 1e-10, atol 1e-12), outputs and cached keys/values;
the few float32 modules, at ``torch.testing.assert_close``'s float32 defaults.
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

from attention import GroupedQueryAttention, KVCache, Rotary, kv_cache_bytes_per_token, padding_mask

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
    # A window's cache rolls: it keeps the last window - 1 tokens (the rolling cache, below)
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


@pytest.mark.parametrize("window", [None, 3])
def test_an_empty_cache_given_no_tokens_stays_empty_and_fills_later(window):
    cache = KVCache(window=window)
    keys, values = cache.update(torch.zeros(1, 2, 0, 4), torch.zeros(1, 2, 0, 4))
    assert keys.shape == values.shape == (1, 2, 0, 4)
    assert (len(cache), cache.seen_tokens, cache.nbytes) == (0, 0, 0)
    new = torch.randn(1, 2, 5, 4)
    keys, _ = cache.update(new, new)
    assert torch.equal(keys, new) and cache.seen_tokens == 5


def test_positions_continue_from_the_cache_length():
    """A token decoded after 3 cached ones is rotated as position 3, not 0."""
    gqa = GroupedQueryAttention(
        8, 8, context_length=4, num_heads=2, num_kv_heads=1, rotary=Rotary(4, 10.0)
    )
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
    gqa = GroupedQueryAttention(
        8, 8, context_length=6, num_heads=2, num_kv_heads=1, rotary=Rotary(4, 10.0)
    )
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


# --- a rolling cache: a window's last tokens, or the current chunk's ----------------------


@st.composite
def local_runs(draw: st.DrawFn, *, max_local: int = 6) -> tuple[dict, dict, list[int]]:
    """A layout, ``{"window": w}`` or ``{"chunk": c}``, and the cuts of a prefill + steps.

    The sequence spans up to three windows (or chunks) and more; the steps after the
    prefill are of 1 to 3 tokens.
    """
    layout = draw(gqa_layouts(max_tokens=2, even_head_dim=True))
    size = draw(st.integers(1, max_local), label="window or chunk")
    local = draw(st.sampled_from([{"window": size}, {"chunk": size}]), label="local")
    n = draw(st.integers(1, 3 * size + 3), label="num_tokens")
    layout |= {"num_tokens": n, "context_length": n}
    cuts = [0, draw(st.integers(1, n), label="prefill")]
    while cuts[-1] < n:
        cuts.append(min(n, cuts[-1] + draw(st.integers(1, 3), label="step")))
    return layout, local, cuts


def held_after(seen: int, window: int | None = None, chunk: int | None = None) -> int:
    """What the cache should hold once it has seen ``seen`` tokens: what the next query sees."""
    return min(seen, window - 1) if window is not None else seen % chunk


@given(run=local_runs(), rope=st.booleans())
def test_rolling_cache_decoding_equals_one_full_pass(run, rope):
    """Any prefill, then steps of 1 to 3 tokens: the full pass's outputs, and at most
    window - 1 tokens held (the current chunk's with chunk), oldest first."""
    layout, local, cuts = run
    base = {"rope_base": 10000.0} if rope else {}
    gqa = make_gqa(layout, **base, **local)
    x = layout_input(layout)
    # The same weights without the window (the seed draws the same layers): its cache
    # keeps every key, rotated at its position, to compare what the rolling one holds.
    everything = KVCache()
    make_gqa(layout, **base)(x, cache=everything)
    cache, pieces = KVCache(**local), []
    size = local.get("window", local.get("chunk"))
    most = x.shape[0] * size * gqa.cache_bytes_per_token  # the bytes of `size` tokens
    for start, stop in itertools.pairwise(cuts):
        pieces.append(gqa(x[:, start:stop], cache=cache))
        held = held_after(stop, **local)
        assert cache.seen_tokens == stop and len(cache) == held
        assert cache.nbytes == x.shape[0] * held * gqa.cache_bytes_per_token <= most
        torch.testing.assert_close(cache.keys, everything.keys[..., stop - held : stop, :])
        torch.testing.assert_close(cache.values, everything.values[..., stop - held : stop, :])
    torch.testing.assert_close(torch.cat(pieces, dim=1), gqa(x), **EXACT)


@pytest.mark.parametrize("window", [1, 4])
def test_decoding_three_windows_one_token_at_a_time_keeps_memory_within_the_window(window):
    torch.manual_seed(0)
    n = 3 * window
    gqa = GroupedQueryAttention(8, 8, n, num_heads=2, num_kv_heads=1, rotary=Rotary(4, 10.0))
    local = GroupedQueryAttention(8, 8, n, num_heads=2, num_kv_heads=1, window=window)
    local.load_state_dict(gqa.state_dict())
    x = torch.randn(1, n, 8)
    cache, steps = KVCache(window=window), []
    for i in range(n):
        steps.append(local(x[:, i : i + 1], cache=cache))
        assert cache.nbytes <= window * local.cache_bytes_per_token
    assert cache.seen_tokens == n and len(cache) == window - 1
    torch.testing.assert_close(torch.cat(steps, dim=1), local(x))
    # Not what the full attention gives: the window hid something.
    assert not torch.allclose(torch.cat(steps, dim=1), gqa(x))


def test_rolling_writes_in_place_within_a_fixed_storage():
    """Decoding writes each token into room after the kept ones, moving them to the front
    when the room runs out: the storage is never replaced, never more than the window
    plus a quarter of it (16 tokens at least), and a long prefill is not kept."""
    window, per_token = 40, 2 * 1 * 4 * 4  # key and value, 1 head, head_dim 4, float32
    gqa = GroupedQueryAttention(4, 4, 1000, num_heads=1, num_kv_heads=1, window=window).eval()
    x = torch.randn(1, 300, 4)
    cache = KVCache(window=window)
    with torch.no_grad():
        gqa(x[:, :100], cache=cache)  # a prefill of 100 tokens
        storage = cache.keys.untyped_storage()
        assert storage.nbytes() == (window - 1 + 16) * per_token // 2  # keys only
        where = storage.data_ptr()
        steps = [gqa(x[:, i : i + 1], cache=cache) for i in range(100, 300)]
        assert cache.keys.untyped_storage().data_ptr() == where
        assert cache.values.untyped_storage().nbytes() == storage.nbytes()
        expected = gqa(x)[:, 100:]
    torch.testing.assert_close(torch.cat(steps, dim=1), expected)
    assert len(cache) == window - 1 and cache.nbytes == (window - 1) * per_token


def test_the_kept_keys_are_views_in_token_order_that_the_caller_can_read():
    cache = KVCache(window=4)
    keys = torch.arange(10.0).view(1, 1, 10, 1)
    returned, _ = cache.update(keys, keys)
    assert torch.equal(returned, keys)  # the whole sequence to attend over
    assert cache.keys.flatten().tolist() == [7.0, 8.0, 9.0]
    for token in range(10, 40):
        new = torch.full((1, 1, 1, 1), float(token))
        returned, _ = cache.update(new, new)
        assert returned.flatten().tolist() == [token - 3.0, token - 2.0, token - 1.0, token]
    assert cache.keys.flatten().tolist() == [37.0, 38.0, 39.0] and cache.seen_tokens == 40


def test_a_chunks_cache_keeps_only_the_current_chunk():
    cache, held = KVCache(chunk=4), []
    for token in range(9):
        new = torch.full((1, 1, 1, 1), float(token))
        cache.update(new, new)
        held.append(cache.keys.flatten().tolist())
    # positions 0-3, 4-7, 8-: after position 3 the next token starts a chunk
    assert held == [
        [0.0], [0.0, 1.0], [0.0, 1.0, 2.0], [], [4.0], [4.0, 5.0], [4.0, 5.0, 6.0], [], [8.0]
    ]  # fmt: skip
    assert cache.seen_tokens == 9 and len(cache) == 1


def test_backward_through_rolling_steps_gives_the_full_pass_gradients():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(
        8, 8, 9, num_heads=2, num_kv_heads=1, rotary=Rotary(4, 10.0), window=3
    )
    x = torch.randn(1, 9, 8)
    cache = KVCache(window=3)
    steps = [gqa(x[:, :4], cache=cache), *(gqa(x[:, i : i + 1], cache=cache) for i in range(4, 9))]
    assert len(cache) == 2
    cached = torch.autograd.grad(torch.cat(steps, dim=1).square().sum(), gqa.W_key.weight)[0]
    full = torch.autograd.grad(gqa(x).square().sum(), gqa.W_key.weight)[0]
    torch.testing.assert_close(cached, full)


@given(layout=gqa_layouts(max_tokens=2, even_head_dim=True), data=st.data())
def test_padding_stays_hidden_while_the_cache_rolls(layout, data):
    """allowed spans every token seen; the columns of dropped tokens are not used."""
    window = data.draw(st.integers(2, 4), label="window")
    n = data.draw(st.integers(2, 3 * window), label="num_tokens")
    layout |= {"num_tokens": n, "context_length": n, "batch": 2}
    gqa = make_gqa(layout, rope_base=10000.0, window=window)
    x = layout_input(layout)
    lengths = data.draw(st.lists(st.integers(1, n), min_size=2, max_size=2), label="lengths")
    # left padding, the real tokens last; (batch, 1, 1, n): the same for every query
    allowed = padding_mask(lengths, n).flip(-1)[:, None, None, :]
    full = gqa(x, allowed=allowed)
    prefill = data.draw(st.integers(1, n), label="prefill")
    cache = KVCache(window=window)
    pieces = [gqa(x[:, :prefill], cache=cache, allowed=allowed[..., :prefill])]
    pieces += [
        gqa(x[:, i : i + 1], cache=cache, allowed=allowed[..., : i + 1]) for i in range(prefill, n)
    ]
    got = torch.cat(pieces, dim=1)
    for i, length in enumerate(lengths):  # a padding query may see nothing: no output
        torch.testing.assert_close(got[i, n - length :], full[i, n - length :], **EXACT)


# --- crop and context_length with a rolling cache -----------------------------------------


def test_crop_counts_positions_and_cannot_reach_dropped_tokens():
    cache = KVCache(window=4)
    keys = torch.arange(10.0).view(1, 1, 10, 1)
    cache.update(keys, keys)  # holds positions 7, 8, 9
    with pytest.raises(
        ValueError,
        match=r"^KVCache: cannot crop to 6 tokens: the next token, at position 6, would see "
        r"the keys from position 3 on \(window=4\), but this rolling cache has seen 10 tokens "
        r"and dropped the first 7 of them; start a new KVCache",
    ):
        cache.crop(6)
    with pytest.raises(ValueError, match=r"cannot crop to 11 tokens: the cache has seen only 10"):
        cache.crop(11)
    cache.crop(10)  # nothing to forget
    assert cache.seen_tokens == 10 and cache.keys.flatten().tolist() == [7.0, 8.0, 9.0]


def test_a_window_cache_cannot_go_back_once_it_rolled():
    """Token 9 would see tokens 6 to 9, and the cache dropped 0 to 6: crop refuses,
    and leaves the cache as it was; before it drops anything, it goes back freely."""
    gqa = GroupedQueryAttention(8, 8, 20, num_heads=2, num_kv_heads=1, window=4)
    cache = KVCache(window=4)
    gqa(torch.randn(1, 10, 8), cache=cache)
    with pytest.raises(
        ValueError,
        match=r"^KVCache: cannot crop to 9 tokens: the next token, at position 9, would see "
        r"the keys from position 6 on \(window=4\)",
    ):
        cache.crop(9)
    assert cache.seen_tokens == 10 and len(cache) == 3  # unchanged by the refused crop
    cache.crop(0)  # but back to nothing it always goes, as a new cache
    x = torch.randn(1, 5, 8)
    torch.testing.assert_close(gqa(x, cache=cache), gqa(x, cache=KVCache(window=4)))
    young = KVCache(window=4)
    gqa(torch.randn(1, 3, 8), cache=young)
    young.crop(1)
    assert young.seen_tokens == len(young) == 1


def test_a_layer_refuses_a_cache_built_for_another_window():
    """A rolling cache serves only its own window or chunk; a full one serves any."""
    local = GroupedQueryAttention(8, 8, 20, num_heads=2, num_kv_heads=1, window=4)
    full = GroupedQueryAttention(8, 8, 20, num_heads=2, num_kv_heads=1)
    x = torch.randn(1, 3, 8)
    for layer, cache, wanted in (
        (local, KVCache(window=3), r"KVCache\(window=4\)"),
        (local, KVCache(chunk=4), r"KVCache\(window=4\)"),
        (full, KVCache(window=4), r"KVCache\(\)"),
    ):
        with pytest.raises(
            ValueError,
            match=r"^GroupedQueryAttention: the layer has window=.*give the layer a " + wanted,
        ):
            layer(x, cache=cache)
        assert cache.seen_tokens == 0
    everything = KVCache()  # keeps every token: the window's mask picks the keys
    torch.testing.assert_close(local(x, cache=everything), local(x))


def test_a_chunk_cache_can_go_back_within_its_chunk():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(
        8, 8, 12, num_heads=2, num_kv_heads=1, rotary=Rotary(4, 10.0), chunk=4
    )
    x = torch.randn(1, 12, 8)
    full = gqa(x)
    cache = KVCache(chunk=4)
    gqa(x[:, :10], cache=cache)  # holds positions 8 and 9
    cache.crop(9)
    torch.testing.assert_close(gqa(x[:, 9:11], cache=cache), full[:, 9:11])
    cache.crop(8)  # back to the chunk's start: nothing held, nothing needed
    assert len(cache) == 0
    torch.testing.assert_close(gqa(x[:, 8:], cache=cache), full[:, 8:])
    with pytest.raises(
        ValueError, match=r"cannot crop to 7 tokens: .* this rolling cache has seen 12"
    ):
        cache.crop(7)


def test_context_length_bounds_the_tokens_seen_not_held():
    gqa = GroupedQueryAttention(8, 8, 5, num_heads=2, num_kv_heads=1, window=2)
    cache = KVCache(window=2)
    for _ in range(5):
        gqa(torch.randn(1, 1, 8), cache=cache)
    assert len(cache) == 1
    with pytest.raises(
        ValueError,
        match=r"the cache has seen 5 tokens \(holding the last 1\) and 1 more make 6, "
        r"past context_length=5",
    ):
        gqa(torch.randn(1, 1, 8), cache=cache)


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"window": 0}, r"window must be at least 1, got 0", ValueError),
        ({"chunk": "4"}, r"chunk must be a positive integer, got '4' of type str", TypeError),
        (
            {"window": 3, "chunk": 3},
            r"give window \(a sliding .*, not both, got window=3 and chunk=3",
            ValueError,
        ),
    ],
)
def test_a_cache_rejects_a_bad_window_or_chunk(kwargs, message, error):
    with pytest.raises(error, match=r"^KVCache: " + message):
        KVCache(**kwargs)
