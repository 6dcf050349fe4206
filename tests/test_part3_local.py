"""Local attention (issue 23): the rolling KV cache, chunked attention and chunked_mask.

* A module with ``window`` keeps the last ``window - 1`` tokens in its cache after each
  call; with ``chunk``, the tokens of the current chunk. Decoding with the rolling
  cache, in steps of any size, gives the outputs of one full pass, and the cache's
  memory stays within ``window`` tokens.
* ``chunked_mask`` is the mask ``transformers``' masking utils build for Llama 4.
* Parity, float64, copied weights, decoding with ``transformers``' own cache built from
  the config (``DynamicSlidingWindowLayer``) and its own mask: ``MistralAttention``
  (``sliding_window``); ``Gemma3Attention`` on a sliding layer (QK-norm applied as
  ``1 + w``, ``query_pre_attn_scalar ** -0.5``); ``GptOssAttention`` on a sliding layer
  (sinks); ``Llama4TextAttention`` on a chunked layer (a RoPE layer), without and with
  Scout's L2 QK-norm.

Tolerances: EXACT (rtol 1e-10, atol 1e-12) where both sides compute in float64; the
steps that transformers computes in float32 (Mistral's cos and sin, Llama 4's complex
``freqs_cis`` and its rotation, done in complex64, Gemma 3's and Llama 4's norms) are
replaced by float64 ones for that comparison, and the modules as shipped are compared
at FLOAT32_STEP (1e-5).
"""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import F64, changed, gqa_layouts, layout_input, make_gqa, make_layer
from hf_models import (
    EXACT,
    FLOAT32_STEP,
    _common,
    copy_projections,
    float64_norms,
    llama_config,
    mistral_attention,
    per_head_norms,
    rope_cos_sin,
)
from hypothesis import given
from hypothesis import strategies as st
from transformers import (
    DynamicCache,
    Gemma3TextConfig,
    GptOssConfig,
    Llama4TextConfig,
    MistralConfig,
)
from transformers.masking_utils import (
    chunked_causal_mask_function,
    create_chunked_causal_mask,
    create_sliding_window_causal_mask,
)
from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssAttention
from transformers.models.llama4 import modeling_llama4
from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding

from attention import (
    GroupedQueryAttention,
    KVCache,
    LatentCache,
    MultiHeadLatentAttention,
    chunked_mask,
    padding_mask,
)
from attention.models import MODELS

pytestmark = pytest.mark.usefixtures("single_thread")


# --- what a rolling cache holds ---------------------------------------------------------


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
    gqa = GroupedQueryAttention(8, 8, n, num_heads=2, num_kv_heads=1, rope_base=10.0)
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
    gqa = GroupedQueryAttention(8, 8, 9, num_heads=2, num_kv_heads=1, rope_base=10.0, window=3)
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
    allowed = padding_mask(lengths, n).flip(-1)  # left padding: the real tokens last
    full = gqa(x, allowed=allowed)
    prefill = data.draw(st.integers(1, n), label="prefill")
    cache = KVCache(window=window)
    pieces = [gqa(x[:, :prefill], cache=cache, allowed=allowed[:, :prefill])]
    pieces += [
        gqa(x[:, i : i + 1], cache=cache, allowed=allowed[:, : i + 1]) for i in range(prefill, n)
    ]
    got = torch.cat(pieces, dim=1)
    for i, length in enumerate(lengths):  # a padding query may see nothing: no output
        torch.testing.assert_close(got[i, n - length :], full[i, n - length :], **EXACT)


def test_latent_attention_counts_what_its_cache_has_seen():
    mla = MultiHeadLatentAttention(
        8, 8, 6, num_heads=2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2, v_head_dim=4
    ).double()
    x = torch.randn(1, 6, 8, dtype=F64)
    cache = LatentCache()
    steps = [mla(x[:, :3], cache=cache), *(mla(x[:, i : i + 1], cache=cache) for i in range(3, 6))]
    assert cache.seen_tokens == len(cache) == 6
    torch.testing.assert_close(torch.cat(steps, dim=1), mla(x), **EXACT)


# --- crop and context_length with a rolling cache -------------------------------------


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
    gqa = GroupedQueryAttention(8, 8, 12, num_heads=2, num_kv_heads=1, rope_base=10.0, chunk=4)
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


# --- chunked attention ------------------------------------------------------------------


@given(num_tokens=st.integers(1, 40), chunk=st.integers(1, 12))
def test_chunked_mask_is_transformers_chunked_causal_mask(num_tokens, chunk):
    """The mask function transformers builds for Llama 4, and its create_chunked_causal_mask."""
    index = torch.arange(num_tokens)
    function = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    expected = function(0, 0, index[:, None], index[None, :])
    assert torch.equal(chunked_mask(num_tokens, chunk), expected)
    config = Llama4TextConfig(
        hidden_size=8, num_attention_heads=2, num_hidden_layers=1, attention_chunk_size=chunk
    )
    config._attn_implementation = "sdpa"
    embeds = torch.zeros(1, num_tokens, 8)
    built = create_chunked_causal_mask(
        config, embeds, None, None, index[None], allow_is_causal_skip=False
    )
    assert torch.equal(built, chunked_mask(num_tokens, chunk)[None, None])


def test_chunked_mask_by_hand():
    assert torch.equal(chunked_mask(4, 4), torch.ones(4, 4, dtype=torch.bool).tril())
    assert torch.equal(chunked_mask(3, 1), torch.eye(3, dtype=torch.bool))
    # each token sees from its chunk's start to itself: 0, 1 | 2, 3 | 4
    assert chunked_mask(5, 2).sum(dim=1).tolist() == [1, 2, 1, 2, 1]


def test_a_chunked_module_attends_within_chunks_only():
    gqa = GroupedQueryAttention(8, 8, 7, num_heads=2, num_kv_heads=1, chunk=3)
    weights = gqa.attention_weights(torch.randn(1, 7, 8))
    assert torch.all((weights > 0) == chunked_mask(7, 3))


# --- parity: Mistral's sliding layer and Llama 4's chunked layer, decoding ---------------


def decode_splits(n: int, prefill: int) -> list[tuple[int, int]]:
    return list(itertools.pairwise([0, *range(prefill, n + 1)]))


@given(
    layout=gqa_layouts(max_tokens=2, even_head_dim=True),
    window=st.integers(2, 5),
    data=st.data(),
)
def test_rolling_decoding_matches_mistral_with_its_sliding_window_cache(layout, window, data):
    """3 x window tokens after a prefill, one at a time: transformers' DynamicCache built
    from the config (a DynamicSlidingWindowLayer) and its own sliding-window mask."""
    n = 3 * window
    layout |= {"num_tokens": n, "context_length": n, "qkv_bias": False}
    gqa = make_gqa(layout, rope_base=10000.0, window=window)
    mistral = mistral_attention(gqa, "sdpa")
    config = mistral.config
    x = layout_input(layout)
    ours, theirs = KVCache(window=window), DynamicCache(config=config)
    assert type(theirs.layers[0]).__name__ == "DynamicSlidingWindowLayer"
    prefill = data.draw(st.integers(1, window), label="prefill")
    for start, stop in decode_splits(n, prefill):
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        new = x[:, start:stop]
        mask = create_sliding_window_causal_mask(config, new, None, theirs, positions)
        cos_sin = rope_cos_sin(positions, gqa.head_dim, 10000.0)
        expected, _ = mistral(new, cos_sin, mask, theirs)
        torch.testing.assert_close(gqa(new, cache=ours), expected, **EXACT)
        # the same window - 1 keys kept, in the same order
        torch.testing.assert_close(ours.keys, theirs.layers[0].keys, **EXACT)
        assert ours.seen_tokens == theirs.get_seq_length() == stop
        assert ours.nbytes <= x.shape[0] * window * gqa.cache_bytes_per_token


def test_rolling_decoding_matches_mistral_as_shipped():
    """Mistral's own rotary embedding (float32 angles) at float32's tolerance."""
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 8, "d_model": 32}
    layout |= {"num_tokens": 12, "context_length": 12, "batch": 1, "qkv_bias": False, "seed": 5}
    gqa = make_gqa(layout, rope_base=10000.0, window=4)
    mistral = mistral_attention(gqa, "sdpa")
    config = mistral.config
    assert isinstance(config, MistralConfig)
    rotary = MistralRotaryEmbedding(config)
    x = layout_input(layout)
    ours, theirs = KVCache(window=4), DynamicCache(config=config)
    for start, stop in decode_splits(12, 1):
        positions = torch.arange(start, stop)[None]
        new = x[:, start:stop]
        mask = create_sliding_window_causal_mask(config, new, None, theirs, positions)
        expected, _ = mistral(new, rotary(new, positions), mask, theirs)
        torch.testing.assert_close(gqa(new, cache=ours), expected, **FLOAT32_STEP)


def llama4_chunked_attention(
    gqa: GroupedQueryAttention, use_qk_norm: bool = False
) -> torch.nn.Module:
    """``Llama4TextAttention`` on a chunked layer (a RoPE layer), holding ``gqa``'s weights.

    Llama 4 rotates interleaved pairs (dims 2i, 2i + 1, as complex numbers); ``gqa``
    rotates the half-split pairs (i, i + head_dim / 2) with the same frequencies. Giving
    Llama 4 the query and key rows of each head in the order 0, h/2, 1, h/2 + 1, ...
    makes its interleaved pairs ours: the rotated queries and keys are ours permuted
    alike within each head, and their dot products, so the scores, are the same.
    ``use_qk_norm``: Scout's L2 norm on these layers (``rms_norm_eps`` from ``gqa``'s).
    """
    config = llama_config(gqa, "sdpa", cls=Llama4TextConfig)
    config.attention_chunk_size = gqa.chunk
    config.num_hidden_layers, config.no_rope_layers = 1, [1]  # 1: this layer uses RoPE
    config.layer_types, config.use_qk_norm = ["chunked_attention"], use_qk_norm
    if use_qk_norm:
        config.rms_norm_eps = gqa.q_norm.eps
    theirs = modeling_llama4.Llama4TextAttention(config, layer_idx=0).to(F64).eval()
    half = gqa.head_dim // 2
    order = torch.arange(gqa.head_dim).view(2, half).t().flatten()  # 0, h/2, 1, h/2 + 1, ...

    def interleaved(weight: torch.Tensor) -> torch.Tensor:
        return weight.view(-1, gqa.head_dim, *weight.shape[1:])[:, order].flatten(0, 1)

    with torch.no_grad():
        pairs = [("q_proj", gqa.W_query, True), ("k_proj", gqa.W_key, True)]
        pairs += [("v_proj", gqa.W_value, False), ("o_proj", gqa.out_proj, False)]
        for name, ours, rotated in pairs:
            layer = getattr(theirs, name)
            assert (layer.bias is None) == (ours.bias is None)
            for mine, their in ((ours.weight, layer.weight), (ours.bias, layer.bias)):
                if mine is not None:
                    their.copy_(interleaved(mine) if rotated else mine)
    return theirs


def freqs_cis_float64(positions: torch.Tensor, head_dim: int, base: float) -> torch.Tensor:
    """Llama 4's complex rotary factors ``exp(i * position * inv_freq)``, in complex128."""
    cos, sin = rope_cos_sin(positions, head_dim, base)
    half = head_dim // 2
    return torch.complex(cos[..., :half], sin[..., :half])


def rotate_float64(xq, xk, freqs_cis):
    """``modeling_llama4.apply_rotary_emb`` without its cast to float32 (complex64)."""
    xq_ = torch.view_as_complex(xq.reshape(*xq.shape[:-1], -1, 2).contiguous())
    xk_ = torch.view_as_complex(xk.reshape(*xk.shape[:-1], -1, 2).contiguous())
    rotated = (torch.view_as_real(t * freqs_cis[:, :, None, :]).flatten(3) for t in (xq_, xk_))
    return tuple(rotated)


def llama4_decode(gqa, theirs, x, splits, rotary, tolerance):
    config = theirs.config
    ours, their_cache = KVCache(chunk=gqa.chunk), DynamicCache(config=config)
    assert type(their_cache.layers[0]).__name__ == "DynamicSlidingWindowLayer"
    for start, stop in splits:
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        new = x[:, start:stop]
        mask = create_chunked_causal_mask(config, new, None, their_cache, positions)
        expected, _ = theirs(new, rotary(new, positions), mask, their_cache)
        torch.testing.assert_close(gqa(new, cache=ours), expected, **tolerance)
        assert ours.seen_tokens == their_cache.get_seq_length() == stop
        assert len(ours) == stop % gqa.chunk


@given(
    layout=gqa_layouts(max_tokens=2, even_head_dim=True),
    chunk=st.integers(2, 4),
    data=st.data(),
)
def test_chunked_decoding_matches_llama4_chunked_layer(layout, chunk, data):
    """Prefill, then 3 x chunk more tokens one at a time, against Llama 4's own chunked
    mask and cache, its complex rotation done in float64.

    Not chunk=1 (nor window=1 with Mistral): transformers' DynamicSlidingWindowLayer
    keeps ``keys[:, :, -sliding_window + 1:]``, which for 1 is ``[-0:]``, every token,
    while its mask is sized for none, and the sdpa call broadcasts that one column
    over all of them. Ours at chunk=1 is checked against the full pass above.
    """
    n = 3 * chunk + data.draw(st.integers(1, 4), label="extra tokens")
    layout |= {"num_tokens": n, "context_length": n}
    gqa = make_gqa(layout, rope_base=500000.0, chunk=chunk)
    theirs = llama4_chunked_attention(gqa)
    x = layout_input(layout)
    splits = decode_splits(n, data.draw(st.integers(1, n), label="prefill"))

    def rotary(new, positions):
        return freqs_cis_float64(positions, gqa.head_dim, 500000.0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(modeling_llama4, "apply_rotary_emb", rotate_float64)
        llama4_decode(gqa, theirs, x, splits, rotary, EXACT)


def test_chunked_decoding_matches_llama4_as_shipped():
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 8, "d_model": 32}
    layout |= {"num_tokens": 11, "context_length": 11, "batch": 2, "qkv_bias": True, "seed": 7}
    gqa = make_gqa(layout, rope_base=500000.0, chunk=3)
    theirs = llama4_chunked_attention(gqa)
    rotary = modeling_llama4.Llama4TextRotaryEmbedding(theirs.config)
    llama4_decode(gqa, theirs, layout_input(layout), decode_splits(11, 4), rotary, FLOAT32_STEP)


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"chunk": 0}, r"chunk must be at least 1, got 0", ValueError),
        ({"chunk": -3}, r"chunk must be at least 1, got -3", ValueError),
        ({"chunk": 2.5}, r"chunk must be a positive integer, got 2.5 of type float", TypeError),
        ({"chunk": True}, r"chunk must be a positive integer, got the boolean True", TypeError),
        (
            {"chunk": 4, "window": 2},
            r"give window \(a sliding window\) or chunk \(chunked local attention\), not both, "
            r"got window=2 and chunk=4",
            ValueError,
        ),
    ],
)
def test_bad_chunk_names_what_was_expected_and_given(kwargs, message, error):
    with pytest.raises(error, match=r"^GroupedQueryAttention: " + message):
        GroupedQueryAttention(8, 8, 6, num_heads=2, num_kv_heads=1, **kwargs)


@pytest.mark.parametrize(
    ("args", "message", "error"),
    [
        (
            (4, 0),
            r"chunk must be an integer >= 1 \(how many positions each chunk spans\), ",
            ValueError,
        ),
        ((4, 1.0), r"chunk must be an integer >= 1 .*got 1.0 of type float", TypeError),
        ((0, 2), r"num_tokens must be at least 1, got 0", ValueError),
    ],
)
def test_chunked_mask_rejects_bad_sizes(args, message, error):
    with pytest.raises(error, match=r"^chunked_mask: " + message):
        chunked_mask(*args)


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


def test_defaults_are_unchanged():
    """No chunk: no attribute changes the layers or the random draws."""
    torch.manual_seed(3)
    plain = GroupedQueryAttention(8, 8, 6, num_heads=2, num_kv_heads=1)
    torch.manual_seed(3)
    chunked = GroupedQueryAttention(8, 8, 6, num_heads=2, num_kv_heads=1, chunk=2)
    assert plain.chunk is None and chunked.chunk == 2
    assert plain.state_dict().keys() == chunked.state_dict().keys()
    for name, tensor in plain.state_dict().items():
        assert torch.equal(tensor, chunked.state_dict()[name])


# --- parity after Part III's options: Gemma 3's and gpt-oss's sliding layers, Llama 4's
# --- chunked layer with its QK-norm, all decoding with the rolling cache ------------------


def randomized(gqa: GroupedQueryAttention, seed: int) -> GroupedQueryAttention:
    """``gqa`` with its QK-norm weights and sinks drawn at random (they start at 1 and 0)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in (gqa.q_norm, gqa.k_norm, gqa.sinks):
            weight = getattr(parameter, "weight", parameter)
            if weight is not None:
                weight.copy_(torch.rand(weight.shape, generator=generator, dtype=F64) + 0.5)
    return gqa


def gemma3_sliding_attention(gqa: GroupedQueryAttention, query_pre_attn_scalar: int):
    """``Gemma3Attention`` on a sliding layer, holding ``gqa``'s weights.

    Gemma 3 stores its QK-norm weights zero-centred (applied as ``1 + w``): ours minus one.
    """
    assert per_head_norms(gqa) and gqa.scale == query_pre_attn_scalar**-0.5
    config = Gemma3TextConfig(
        **_common(gqa, "sdpa"),
        head_dim=gqa.head_dim,
        query_pre_attn_scalar=query_pre_attn_scalar,
        sliding_window=gqa.window,
        layer_types=["sliding_attention"],
        rms_norm_eps=gqa.q_norm.eps,
    )
    theirs = Gemma3Attention(config, layer_idx=0).to(F64).eval()
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight - 1.0)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight - 1.0)
    return theirs


def gpt_oss_sliding_attention(gqa: GroupedQueryAttention):
    """``GptOssAttention`` on a sliding layer (eager: the kernel with the sinks)."""
    config = GptOssConfig(
        **_common(gqa, "eager"),
        head_dim=gqa.head_dim,
        sliding_window=gqa.window,
        layer_types=["sliding_attention"],
    )
    theirs = GptOssAttention(config, layer_idx=0).to(F64).eval()
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.sinks.copy_(gqa.sinks)
    return theirs


def sliding_decode(gqa, theirs, x, splits, tolerance, cos_sin=None):
    """Decode with ours and theirs, each with its own cache and theirs with its own mask."""
    config = theirs.config
    ours, their_cache = KVCache(window=gqa.window), DynamicCache(config=config)
    assert type(their_cache.layers[0]).__name__ == "DynamicSlidingWindowLayer"
    for start, stop in splits:
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        new = x[:, start:stop]
        mask = create_sliding_window_causal_mask(config, new, None, their_cache, positions)
        cos, sin = rope_cos_sin(positions, gqa.head_dim, gqa.rope_base)
        if cos_sin == "half":  # gpt-oss's rotary embedding gives each angle once
            cos, sin = cos[..., : gqa.head_dim // 2], sin[..., : gqa.head_dim // 2]
        expected, _ = theirs(new, (cos, sin), mask, their_cache)
        torch.testing.assert_close(gqa(new, cache=ours), expected, **tolerance)
        assert ours.seen_tokens == their_cache.get_seq_length() == stop
        assert len(ours) == min(stop, gqa.window - 1)
        assert ours.nbytes <= x.shape[0] * gqa.window * gqa.cache_bytes_per_token
    torch.testing.assert_close(ours.keys, their_cache.layers[0].keys, **tolerance)


@given(
    layout=gqa_layouts(max_tokens=2, even_head_dim=True),
    window=st.integers(2, 5),
    query_pre_attn_scalar=st.sampled_from([3, 168]),
    data=st.data(),
)
def test_rolling_decoding_matches_gemma3_sliding_layer(layout, window, query_pre_attn_scalar, data):
    """QK-norm (1 + w), query_pre_attn_scalar ** -0.5 and a window, decoding 3 x window
    tokens after a prefill with transformers' own sliding cache and mask. Gemma3RMSNorm
    computes in float32: swapped for a float64 norm of the same function here."""
    n = 3 * window + data.draw(st.integers(1, 3), label="prefill")
    layout |= {"num_tokens": n, "context_length": n}
    scores = {"query_pre_attn_scalar": query_pre_attn_scalar}  # the local base: 10000
    gemma3 = changed(MODELS["Gemma 3 27B"], scores=scores)
    gqa = make_layer(layout, gemma3, "sliding_attention", sliding_window=window)
    assert gqa.rope_base == 10000.0
    gqa = randomized(gqa, layout["seed"])
    theirs = float64_norms(
        gemma3_sliding_attention(gqa, query_pre_attn_scalar), ("q_norm", "k_norm")
    )
    x = layout_input(layout)
    sliding_decode(gqa, theirs, x, decode_splits(n, n - 3 * window), EXACT)


def test_rolling_decoding_matches_gemma3_as_shipped():
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 8, "d_model": 32}
    layout |= {"num_tokens": 14, "context_length": 14, "batch": 2, "qkv_bias": False, "seed": 9}
    gqa = make_layer(layout, "Gemma 3 27B", "sliding_attention", sliding_window=4)  # 168
    gqa = randomized(gqa, 9)
    theirs = gemma3_sliding_attention(gqa, 168)  # its norms in float32
    sliding_decode(gqa, theirs, layout_input(layout), decode_splits(14, 2), FLOAT32_STEP)


@given(
    layout=gqa_layouts(max_tokens=2, even_head_dim=True),
    window=st.integers(2, 5),
    data=st.data(),
)
def test_rolling_decoding_matches_gpt_oss_sliding_layer(layout, window, data):
    """Sinks and a window (gpt-oss's 128 at toy size), decoding with its sliding cache.
    Its eager kernel keeps the logits' dtype: float64 throughout, no patch needed."""
    n = 3 * window + data.draw(st.integers(1, 3), label="prefill")
    layout |= {"num_tokens": n, "context_length": n}
    unscaled = changed(MODELS["gpt-oss-20b"], rope={"scaling": None})  # its base, 150000
    gqa = make_layer(layout, unscaled, "sliding_attention", sliding_window=window)
    gqa = randomized(gqa, 1)
    theirs = gpt_oss_sliding_attention(gqa)
    x = layout_input(layout)
    sliding_decode(gqa, theirs, x, decode_splits(n, n - 3 * window), EXACT, cos_sin="half")


@given(layout=gqa_layouts(max_tokens=2, even_head_dim=True), chunk=st.integers(2, 4))
def test_chunked_decoding_with_qk_norm_matches_llama4_scouts_chunked_layer(layout, chunk):
    """Scout's chunked layers apply an L2 norm (RMS, no weight) to q and k after RoPE;
    its recipe, an RMSNorm without a weight, before. A rotation keeps the RMS, so the
    order does not matter. Llama4TextL2Norm computes in float32: patched to float64.
    Scout's llama3 RoPE scaling is left out (tests/test_recipes.py runs it)."""
    n = 3 * chunk + 1
    layout |= {"num_tokens": n, "context_length": n}
    unscaled = changed(MODELS["Llama 4 Scout"], rope={"scaling": None})
    gqa = make_layer(layout, unscaled, "chunked_attention", attention_chunk_size=chunk)
    assert gqa.rope_base == 500000.0 and gqa.q_norm.weight is None
    theirs = llama4_chunked_attention(gqa, use_qk_norm=True)
    assert isinstance(theirs.qk_norm, modeling_llama4.Llama4TextL2Norm)
    x = layout_input(layout)

    def rotary(new, positions):
        return freqs_cis_float64(positions, gqa.head_dim, 500000.0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(modeling_llama4, "apply_rotary_emb", rotate_float64)
        patch.setattr(modeling_llama4.Llama4TextL2Norm, "forward", lambda self, t: self._norm(t))
        llama4_decode(gqa, theirs, x, decode_splits(n, 1), rotary, EXACT)
