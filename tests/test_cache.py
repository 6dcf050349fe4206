"""Every per-sequence cache implements attention.Cache, and behaves as it says.

The cache classes are discovered, not listed: every class the package exports whose
name ends in "Cache" (but the two protocols) must implement the protocol and have a
case below, or be the multi-sequence PagedKVCache. So a new cache cannot be forgotten.
For each one: seen_tokens, len and nbytes after a prefill and a decoding step (nbytes
is the bytes of the tensors it holds), and crop, or crop's ValueError where it cannot
go back (or, for CrossAttentionCache, whose context does not depend on the decoder's
tokens, a crop that only sets the count back); crop(0), which empties any cache.
Those of keys and values, and only those, implement KeyValueCache.

Every cache class against every layer that takes a cache: the right pairs decode, and
a wrong pair raises a TypeError that names the layer the cache belongs to, leaving
the cache as it was.
No cache subclasses another only to pass a type check: KVCache has no subclass.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import attention
from attention import (
    BlockTopKAttention,
    BlockTopKCache,
    Cache,
    CompressedAttention,
    CompressedCache,
    CrossAttention,
    CrossAttentionCache,
    GatedDeltaNet,
    GatedDeltaNetCache,
    GroupedQueryAttention,
    KeyValueCache,
    KVCache,
    LatentCache,
    LightningIndexer,
    Mamba2,
    Mamba2Cache,
    MultiHeadLatentAttention,
    NoPEWithTemperature,
    PagedKVCache,
    QSAAttention,
    QSACache,
    QuantizedKVCache,
    Rotary,
    SparseLatentAttention,
    SparseLatentCache,
    StreamingCache,
)

MULTI_SEQUENCE = {PagedKVCache}  # many sequences by id: update(seq_id, ...), nbytes
PROTOCOLS = {Cache, KeyValueCache}


def discovered() -> list[type]:
    return sorted(
        (
            obj
            for name in attention.__all__
            if inspect.isclass(obj := getattr(attention, name))
            and name.endswith("Cache")
            and obj not in PROTOCOLS
        ),
        key=lambda cls: cls.__name__,
    )


def gqa(**kwargs) -> GroupedQueryAttention:
    torch.manual_seed(0)
    rotary = Rotary(4, 10.0)
    return GroupedQueryAttention(8, 8, 64, num_heads=2, num_kv_heads=1, rotary=rotary, **kwargs)


def mla() -> MultiHeadLatentAttention:
    torch.manual_seed(0)
    return MultiHeadLatentAttention(
        8, 8, 64, num_heads=2, kv_lora_rank=4, qk_nope_head_dim=2, qk_rope_head_dim=2,
        v_head_dim=2,
    )  # fmt: skip


def dsa() -> SparseLatentAttention:
    torch.manual_seed(0)
    return SparseLatentAttention(
        8, 8, 64, num_heads=2, q_lora_rank=4, kv_lora_rank=4, qk_nope_head_dim=2,
        qk_rope_head_dim=2, v_head_dim=2, index_top_k=3, index_num_heads=2, index_head_dim=4,
    )  # fmt: skip


def block_top_k() -> BlockTopKAttention:
    torch.manual_seed(0)
    return BlockTopKAttention(
        8, 8, 64, num_heads=2, num_kv_heads=1, index_head_dim=4, block_size=2, top_k_blocks=2
    )


def qsa() -> QSAAttention:
    torch.manual_seed(0)
    return QSAAttention(
        8, 8, 64, num_heads=2, num_kv_heads=1, index_num_heads=2, index_head_dim=4, budget=2,
        compress_ratio=2,
    )  # fmt: skip


def deltanet() -> GatedDeltaNet:
    torch.manual_seed(0)
    return GatedDeltaNet(8, num_key_heads=1, num_value_heads=2, key_head_dim=4, value_head_dim=3)


def mamba2() -> Mamba2:
    torch.manual_seed(0)
    return Mamba2(8, num_heads=2, head_dim=4, state_size=3, chunk_size=2)


def csa() -> CompressedAttention:
    """DeepSeek-V4's compressed sparse layer: a window of 3, an entry per 2 tokens."""
    torch.manual_seed(0)
    return CompressedAttention(
        8, 8, 64, num_heads=2, head_dim=4, q_lora_rank=4, window=3, rope_dim=2,
        compress_rate=2, index_top_k=1, index_num_heads=2, index_head_dim=4, o_groups=2,
        o_lora_rank=2,
    )  # fmt: skip


def cross():
    """A cross-attention layer over a context of 3 tokens, called as the others are."""
    torch.manual_seed(0)
    layer = CrossAttention(8, 5, 8, num_heads=2, num_kv_heads=1)
    context = torch.randn(2, 3, 5)
    return lambda x, cache: layer(x, context, cache=cache)  # context read at the first call


def held_tensors(cache) -> list[torch.Tensor]:
    """Every tensor the cache holds, by the names each class gives them."""
    if isinstance(cache, QuantizedKVCache):
        packed = cache._quantized
        quantized = [] if packed is None else [getattr(packed, f) for f in QUANTIZED_FIELDS]
        return [*quantized, cache.residual_keys, cache.residual_values]
    if isinstance(cache, LatentCache):
        extra = [cache.index_keys] if isinstance(cache, SparseLatentCache) else []
        return [cache.latent, cache.rope_keys, *extra]
    if isinstance(cache, GatedDeltaNetCache):
        return [cache.conv_state, cache.recurrent_state]
    if isinstance(cache, Mamba2Cache):
        return [cache.conv_state, cache.ssm_state]
    if isinstance(cache, CompressedCache):  # the window's keys, each compressor's state
        states = [s for s in (cache.compressor, cache.indexer) if s is not None]
        parts = ("entries", "waiting_kv", "waiting_gate", "overlap_kv", "overlap_gate")
        return [cache.window_keys, *(getattr(s, part) for s in states for part in parts)]
    if isinstance(cache, BlockTopKCache | QSACache):
        return [cache.keys, cache.values, cache.index_keys]
    return [cache.keys, cache.values]


QUANTIZED_FIELDS = ("key_codes", "key_scale", "key_min", "value_codes", "value_scale", "value_min")

# (a layer, a fresh cache, tokens held after n seen, what crop(3) does after 6 seen)
CASES = {
    KVCache: [
        (lambda: gqa(), KVCache, lambda n: n, "crops"),
        (lambda: gqa(window=4), lambda: KVCache(window=4), lambda n: min(n, 3), "window=4"),
        (lambda: gqa(chunk=4), lambda: KVCache(chunk=4), lambda n: n % 4, "chunk=4"),
    ],
    StreamingCache: [
        (gqa, lambda: StreamingCache(1, 3), lambda n: min(n, 4), "evicted 2"),
    ],
    QuantizedKVCache: [
        (gqa, lambda: QuantizedKVCache(8, 2, 1), lambda n: n, "crops"),
    ],
    LatentCache: [(mla, LatentCache, lambda n: n, "crops")],
    SparseLatentCache: [(dsa, SparseLatentCache, lambda n: n, "crops")],
    BlockTopKCache: [(block_top_k, BlockTopKCache, lambda n: n, "crops")],
    QSACache: [(qsa, QSACache, lambda n: n, "crops")],
    GatedDeltaNetCache: [(deltanet, GatedDeltaNetCache, lambda n: 0, "recurrent state")],
    Mamba2Cache: [(mamba2, Mamba2Cache, lambda n: 0, "SSM state")],
    CrossAttentionCache: [(cross, CrossAttentionCache, lambda n: 3, "keeps the context")],
    CompressedCache: [(csa, lambda: CompressedCache(3), lambda n: min(n, 2), "folds")],
}


def test_every_cache_class_is_discovered_and_has_a_case():
    found = set(discovered())
    assert found == set(CASES) | MULTI_SEQUENCE, "a cache class without a test case"
    assert {KVCache, StreamingCache, GatedDeltaNetCache} <= found  # discovery works


KEY_VALUE = {KVCache, StreamingCache, QuantizedKVCache}
#: Keys and values with an indexer's keys beside them: caches of keys and values, which
#: only their own layer takes (it fills the indexer's keys).
INDEXED_KEY_VALUE = {BlockTopKCache, QSACache}


@pytest.mark.parametrize("cls", [c for c in discovered() if c not in MULTI_SEQUENCE])
def test_the_caches_of_keys_and_values_and_only_they_implement_key_value_cache(cls):
    for _, make, _, _ in CASES[cls]:
        cache = make()
        assert isinstance(cache, KeyValueCache) == (cls in KEY_VALUE | INDEXED_KEY_VALUE), cls
        if cls in KEY_VALUE | INDEXED_KEY_VALUE:
            assert cache.window in (None, 4) and cache.chunk in (None, 4)


@pytest.mark.parametrize("cls", [c for c in discovered() if c not in MULTI_SEQUENCE])
def test_every_per_sequence_cache_implements_the_protocol(cls):
    for _, make, _, _ in CASES[cls]:
        cache = make()
        assert isinstance(cache, Cache)
        assert isinstance(cache.reindexes_positions, bool)
        assert cache.reindexes_positions == (cls is StreamingCache)
        assert cache.seen_tokens == len(cache) == cache.nbytes == 0


def test_no_cache_subclasses_another_to_pass_a_type_check():
    """KVCache, StreamingCache and QuantizedKVCache share no base but the protocols and
    the private base that writes the members every cache shares (and Gated DeltaNet's
    and Mamba-2's caches the private base of two fixed states). SparseLatentCache
    extends LatentCache with its indexer's keys (shared code)."""
    for cls in discovered():
        bases = {base for base in cls.__mro__[1:] if base.__name__.endswith("Cache")}
        assert bases <= ({LatentCache} if cls is SparseLatentCache else set()), cls


@pytest.mark.parametrize(
    ("cls", "case"),
    [(cls, i) for cls, cases in CASES.items() for i in range(len(cases))],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v),
)
def test_seen_len_nbytes_after_updates_and_crop(cls, case):
    make_layer, make_cache, held_after, crop = CASES[cls][case]
    layer, cache = make_layer(), make_cache()
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        layer(x[:, :4], cache=cache)  # prefill
        assert cache.seen_tokens == 4 and len(cache) == held_after(4)
        layer(x[:, 4:5], cache=cache)  # two decoding steps
        layer(x[:, 5:6], cache=cache)
    assert cache.seen_tokens == 6 and len(cache) == held_after(6)
    assert cache.nbytes == sum(t.nbytes for t in held_tensors(cache)) > 0
    if crop == "crops":
        cache.crop(3)
        assert cache.seen_tokens == len(cache) == 3
        assert cache.nbytes == sum(t.nbytes for t in held_tensors(cache))
        with torch.no_grad():
            layer(x[:, 3:4], cache=cache)  # goes on from there
        assert cache.seen_tokens == 4
    elif crop == "keeps the context":  # only the count goes back
        cache.crop(3)
        assert cache.seen_tokens == 3 and len(cache) == held_after(6)
        assert cache.nbytes == sum(t.nbytes for t in held_tensors(cache))
        with torch.no_grad():
            layer(x[:, 3:4], cache=cache)  # goes on from there
        assert cache.seen_tokens == 4
    else:
        with pytest.raises(ValueError, match=rf"^{cls.__name__}: cannot crop to 3 tokens.*{crop}"):
            cache.crop(3)
        assert cache.seen_tokens == 6 and len(cache) == held_after(6)  # unchanged
        cache.crop(6)  # going back to where it is: nothing to forget
    beyond = cache.seen_tokens + 1
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: cannot crop to {beyond} tokens"):
        cache.crop(beyond)
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: length must be an integer >= 0"):
        cache.crop(-1)
    cache.crop(0)  # every cache can empty itself, and then starts again
    assert cache.seen_tokens == len(cache) == cache.nbytes == 0
    with torch.no_grad():
        fresh, again = layer(x[:, :2], cache=make_cache()), layer(x[:, :2], cache=cache)
    assert torch.equal(fresh, again) and cache.seen_tokens == 2


def test_a_fixed_state_stands_for_every_token_and_keeps_its_size():
    layer, cache = deltanet(), GatedDeltaNetCache()
    with torch.no_grad():
        layer(torch.randn(1, 5, 8), cache=cache)
        size = cache.nbytes
        layer(torch.randn(1, 40, 8), cache=cache)
    assert len(cache) == 0 and cache.seen_tokens == 45 and cache.nbytes == size  # no token held
    with pytest.raises(ValueError, match=r"recurrent_state of the held one's shape"):
        cache.update(cache.conv_state, cache.recurrent_state[:, :1], 1)


def test_the_paged_cache_says_update_and_reports_its_pool_bytes():
    cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=3)
    assert cache.nbytes == 2 * 4 * 2 * 1 * 3 * 4  # keys and values, whole pool, float32
    cache.add(0)
    cache.update(0, torch.ones(3, 1, 3), torch.ones(3, 1, 3))
    assert cache.num_tokens(0) == 3 and not hasattr(cache, "append")


def nope() -> NoPEWithTemperature:
    torch.manual_seed(0)
    return NoPEWithTemperature(8, 8, 64, num_heads=2, num_kv_heads=1, attn_scale=0.1, floor_scale=2)


def indexer():
    """DeepSeek-V3.2's indexer, called as the layers are (its query latents made up)."""
    torch.manual_seed(0)
    layer = LightningIndexer(8, 4, num_heads=2, head_dim=4, qk_rope_head_dim=2)
    return lambda x, cache: layer(x, torch.randn(*x.shape[:2], 4), cache=cache)


# Every layer that takes a cache, and the cache classes it takes.
LAYERS = {
    "GroupedQueryAttention": (gqa, KEY_VALUE),
    "NoPEWithTemperature": (nope, KEY_VALUE),  # a subclass takes what its base takes
    "MultiHeadLatentAttention": (mla, {LatentCache}),
    "SparseLatentAttention": (dsa, {SparseLatentCache}),
    "BlockTopKAttention": (block_top_k, {BlockTopKCache}),
    "QSAAttention": (qsa, {QSACache}),
    "GatedDeltaNet": (deltanet, {GatedDeltaNetCache}),
    "Mamba2": (mamba2, {Mamba2Cache}),
    "CrossAttention": (cross, {CrossAttentionCache}),
    "CompressedAttention": (csa, {CompressedCache}),
    "LightningIndexer": (indexer, {KVCache}),
}
# The layer each cache belongs to, which a wrong layer's error names.
BELONGS = {
    KVCache: "GroupedQueryAttention",
    StreamingCache: "GroupedQueryAttention",
    QuantizedKVCache: "GroupedQueryAttention",
    LatentCache: "MultiHeadLatentAttention",
    SparseLatentCache: "SparseLatentAttention",
    BlockTopKCache: "BlockTopKAttention",
    QSACache: "QSAAttention",
    GatedDeltaNetCache: "GatedDeltaNet",
    Mamba2Cache: "Mamba2",
    CrossAttentionCache: "CrossAttention",
    CompressedCache: "CompressedAttention",
}
PAIRS = [(layer, cls) for layer in LAYERS for cls in CASES]


def test_every_cache_belongs_to_a_layer_and_every_layer_takes_one():
    assert set(BELONGS) == set(CASES)
    assert all(name in LAYERS for name in BELONGS.values())
    assert set().union(*(taken for _, taken in LAYERS.values())) == set(CASES)


def state(cache) -> tuple:
    """What a refusal must leave alone: the counts, the bytes, every held tensor."""
    held = [t if t is None else t.clone() for t in held_tensors(cache)]
    return cache.seen_tokens, len(cache), cache.nbytes, held


def same_state(a: tuple, b: tuple) -> bool:
    pairs = zip(a[3], b[3], strict=True)
    return a[:3] == b[:3] and all(x is y or torch.equal(x, y) for x, y in pairs)


@pytest.mark.parametrize(("layer_name", "cls"), PAIRS, ids=lambda v: getattr(v, "__name__", v))
def test_every_layer_takes_its_caches_and_refuses_the_others_untouched(layer_name, cls):
    make_layer, taken = LAYERS[layer_name]
    layer, x = make_layer(), torch.randn(2, 3, 8)
    if cls in taken:
        cache = CASES[cls][0][1]()
        with torch.no_grad():
            layer(x, cache=cache)
        assert cache.seen_tokens == 3
        return
    # A new cache, and one its own layer has filled: the wrong layer leaves both as they are.
    own_layer, make_cache = CASES[cls][0][:2]
    empty, filled = make_cache(), make_cache()
    with torch.no_grad():
        own_layer()(x[:, :2], cache=filled)
    name = cls.__name__
    expected = rf"^{layer_name}: cache must be .* or None, got {name}; {name} holds .*: "
    for cache in (empty, filled):
        before = state(cache)
        with pytest.raises(TypeError, match=rf"{expected}pass it to {BELONGS[cls]}$"):
            layer(x, cache=cache)
        assert same_state(state(cache), before)


def test_the_error_says_what_the_cache_holds_and_where_it_belongs():
    with pytest.raises(TypeError) as refused:
        gqa()(torch.randn(1, 2, 8), cache=LatentCache())
    assert str(refused.value) == (
        "GroupedQueryAttention: cache must be a KeyValueCache (KVCache, StreamingCache or "
        "QuantizedKVCache) or None, got LatentCache; LatentCache holds MLA's latent and "
        "RoPE keys: pass it to MultiHeadLatentAttention"
    )


class OwnCache:
    """A cache of keys and values written outside the package: the protocol's members."""

    reindexes_positions = False

    def __init__(self):
        self.window = self.chunk = None  # it keeps every token
        self.inner = KVCache()

    seen_tokens = property(lambda self: self.inner.seen_tokens)
    nbytes = property(lambda self: self.inner.nbytes)

    def __len__(self):
        return len(self.inner)

    def crop(self, length):
        self.inner.crop(length)

    def update(self, keys, values):
        return self.inner.update(keys, values)


def test_a_key_value_cache_of_ones_own_serves_the_layer_and_one_without_window_does_not():
    layer, x = gqa(), torch.randn(1, 4, 8)
    with torch.no_grad():
        assert torch.equal(layer(x, cache=OwnCache()), layer(x, cache=KVCache()))
    windowless = OwnCache()
    del windowless.window  # no longer a KeyValueCache: refused, with no layer to name
    with pytest.raises(TypeError, match=r"KeyValueCache .* or None, got OwnCache$"):
        layer(x, cache=windowless)
    assert windowless.seen_tokens == 0
