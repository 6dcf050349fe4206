"""CompressedAttention, TokenCompressor, CompressedIndexer and CompressedCache
(DeepSeek-V4): against transformers' DeepSeek-V4 classes, at the limits, and bad input.

Tolerances:

* EXACT (rtol 1e-10, atol 1e-12) against ``DeepseekV4Attention``,
  ``DeepseekV4CSACompressor``, ``DeepseekV4HCACompressor`` and ``DeepseekV4Indexer``
  in float64, with transformers' float32 steps kept float64
  (``hf_models.deepseek_v4_in_float64``: its RMS norms, softmaxes, RoPE tables, rotation
  and the indexer's scorer): a full pass, and a prefill then steps (one token, or a
  few) that cross compression boundaries, for a sliding, a CSA and an HCA layer, with
  YaRN on the compressed layers as DeepSeek-V4-Flash's config has it.
* Byte for byte (``torch.equal``): the caches' tensors after each step against
  ``DeepseekV4CSACache`` and ``DeepseekV4HCACache`` (the window's keys, the entries,
  the waiting tokens and their gates, the overlap), and which entries the indexer
  picks.
* EXACT at the limits: before any group is complete the layer is a window with sinks
  (``attend`` with ``sliding_window_mask``, chapters 16 and 17); with a top-k that keeps
  every entry, the indexer changes nothing.
"""

from __future__ import annotations

import pytest
import torch
from helpers import F64, expect
from hf_models import (
    EXACT,
    deepseek_v4_attention,
    deepseek_v4_config,
    deepseek_v4_in_float64,
    deepseek_v4_step,
)
from transformers import DynamicCache
from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
    DeepseekV4CSACompressor,
    DeepseekV4HCACompressor,
    DeepseekV4RotaryEmbedding,
)

from attention import (
    Cache,
    CompressedAttention,
    CompressedCache,
    CompressedIndexer,
    CompressorState,
    KVCache,
    Rotary,
    TokenCompressor,
    attend,
    sliding_window_mask,
)

SLIDING, CSA, HCA = (
    "sliding_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
)
KINDS = (SLIDING, CSA, HCA)
#: DeepSeek-V4-Flash's YaRN on its compressed layers, over a short original context.
YARN = {
    "rope_type": "yarn",
    "factor": 16.0,
    "original_max_position_embeddings": 8,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "attention_factor": 1.0,
}
WINDOW = 5


def small_layer(kind: str, seed: int = 0, **overrides) -> CompressedAttention:
    """A float64 layer of ``kind`` with every weight drawn, the norms' and biases' too."""
    torch.manual_seed(seed)
    compressed = kind != SLIDING
    arguments = {
        "num_heads": 4,
        "head_dim": 16,
        "q_lora_rank": 12,
        "window": WINDOW,
        "rope_dim": 4,
        "rope_base": 160000.0 if compressed else 10000.0,
        "rope_scaling": YARN if compressed else None,
        "o_groups": 2,
        "o_lora_rank": 6,
    }
    if kind == CSA:
        arguments |= {"compress_rate": 4, "index_top_k": 2}
        arguments |= {"index_num_heads": 8, "index_head_dim": 8}
    if kind == HCA:
        arguments["compress_rate"] = 6
    layer = CompressedAttention(24, 24, 128, **(arguments | overrides)).to(F64)
    with torch.no_grad():
        for name, parameter in layer.named_parameters():
            if "norm" in name:
                parameter.copy_(1 + 0.2 * torch.randn_like(parameter))
            elif name.endswith("position_bias") or name == "sinks":
                parameter.copy_(torch.randn_like(parameter))
    return layer.eval()


def theirs_for(layer: CompressedAttention) -> tuple:
    """transformers' layer with ``layer``'s weights, its config and rotary (float64)."""
    index = KINDS.index(layer.kind)
    config = deepseek_v4_config(layer, kinds=KINDS)
    theirs = deepseek_v4_attention(layer, config, index)
    return theirs, config, DeepseekV4RotaryEmbedding(config)


def inputs(num_tokens: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(2, num_tokens, 24, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.mark.parametrize("kind", KINDS)
def test_a_full_pass_is_deepseek_v4_attention(kind):
    layer = small_layer(kind)
    x = inputs(23)
    with deepseek_v4_in_float64():
        theirs, config, rotary = theirs_for(layer)
        expected = deepseek_v4_step(theirs, config, rotary, x, 0, None)
    torch.testing.assert_close(layer(x), expected, **EXACT)


def same(ours: torch.Tensor | None, theirs: torch.Tensor | None) -> bool:
    """Both absent, or equal byte for byte."""
    if ours is None or theirs is None:
        return ours is theirs
    return ours.dtype == theirs.dtype and torch.equal(ours, theirs)


def assert_cache_is_theirs(ours: CompressedCache, theirs_layer, kind: str) -> None:
    """The cache's tensors, byte for byte, against transformers' cache layer."""
    assert same(ours.window_keys, theirs_layer.keys[:, 0])
    if kind == SLIDING:
        return
    names = {"compressor": ours.compressor}
    if kind == CSA:
        names["indexer"] = ours.indexer
    for name, state in names.items():
        assert same(state.entries, theirs_layer.compressed_kv[name]), name
        assert theirs_layer.entry_count[name] == state.num_entries
        assert same(state.waiting_kv, theirs_layer.buffer_kv[name]), name
        assert same(state.waiting_gate, theirs_layer.buffer_gate[name]), name
        if kind == CSA:
            assert same(state.overlap_kv, theirs_layer.overlap_kv[name]), name
            assert same(state.overlap_gate, theirs_layer.overlap_gate[name]), name
    # Every tensor held, each once (transformers' keys are its values: one storage)
    their_bytes = theirs_layer.keys.numel() * 8 + sum(
        t.numel() * t.element_size()
        for states in (
            theirs_layer.compressed_kv,
            theirs_layer.buffer_kv,
            theirs_layer.buffer_gate,
            getattr(theirs_layer, "overlap_kv", {}),
            getattr(theirs_layer, "overlap_gate", {}),
        )
        for t in states.values()
        if t is not None
    )
    assert ours.nbytes == their_bytes


#: (prefill, then the sizes of the later steps): one token at a time across two or
#: more group boundaries of every kind, and steps of several tokens.
SCHEDULES = [(7, [1] * 14), (3, [1, 4, 1, 1, 6, 1, 1, 1]), (13, [2, 1, 9, 1])]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("prefill", "steps"), SCHEDULES)
def test_decoding_across_boundaries_is_deepseek_v4_attention(kind, prefill, steps):
    layer = small_layer(kind, seed=3)
    x = inputs(prefill + sum(steps), seed=4)
    ours_cache = CompressedCache(window=WINDOW)
    with deepseek_v4_in_float64():
        theirs, config, rotary = theirs_for(layer)
        their_cache = DynamicCache(config=config)
        start, outputs = 0, []
        for size in [prefill, *steps]:
            chunk = x[:, start : start + size]
            expected = deepseek_v4_step(theirs, config, rotary, chunk, start, their_cache)
            outputs.append(layer(chunk, cache=ours_cache))
            torch.testing.assert_close(outputs[-1], expected, **EXACT)
            start += size
            assert ours_cache.seen_tokens == start
            assert_cache_is_theirs(ours_cache, their_cache.layers[KINDS.index(kind)], kind)
    # And the cached steps agree with one full pass
    torch.testing.assert_close(torch.cat(outputs, dim=1), layer(x), **EXACT)


def test_a_cache_counts_what_it_holds():
    layer = small_layer(CSA)
    cache = CompressedCache(window=WINDOW)
    layer(inputs(10), cache=cache)
    assert isinstance(cache, Cache)
    # 4 window keys; 2 entries of 16 and of 8 (the indexer's); 2 tokens waiting, their
    # vectors and gates twice as wide; the overlap of 4 places, vectors and gates
    numbers = 4 * 16 + sum(2 * d + 2 * 2 * 2 * d + 2 * 4 * d for d in (16, 8))
    assert (len(cache), cache.num_entries, cache.num_waiting) == (4, 2, 2)
    assert cache.nbytes == 2 * numbers * 8  # a batch of 2, float64
    cache.crop(0)
    assert (cache.seen_tokens, len(cache), cache.nbytes, cache.num_entries) == (0, 0, 0, 0)


# -- a cache built from its tensors ------------------------------------------------------

STATE_PARTS = ("entries", "waiting_kv", "waiting_gate", "overlap_kv", "overlap_gate")


def copied(state: CompressorState | None) -> CompressorState | None:
    """A new state holding clones of ``state``'s tensors."""
    if state is None:
        return None
    parts = {name: getattr(state, name) for name in STATE_PARTS}
    return CompressorState(**{k: None if v is None else v.clone() for k, v in parts.items()})


def built_like(cache: CompressedCache, layer: CompressedAttention) -> CompressedCache:
    """``CompressedCache.holding`` given clones of what ``cache`` holds."""
    return CompressedCache.holding(
        cache.window_keys.clone(),
        window=cache.window,
        seen_tokens=cache.seen_tokens,
        rate=layer.compress_rate,
        compressor=copied(cache.compressor),
        indexer=copied(cache.indexer),
    )


def assert_same_cache(built: CompressedCache, prefilled: CompressedCache) -> None:
    """The counts, the kind, the bytes and every tensor, byte for byte."""
    counts = ("kind", "seen_tokens", "num_entries", "num_waiting", "nbytes")
    assert [getattr(built, name) for name in counts] == [
        getattr(prefilled, name) for name in counts
    ]
    assert len(built) == len(prefilled)
    assert built.window_cache.seen_tokens == prefilled.window_cache.seen_tokens
    assert same(built.window_keys, prefilled.window_keys)
    for name in ("compressor", "indexer"):
        ours, theirs = getattr(built, name), getattr(prefilled, name)
        assert (ours is None) == (theirs is None), name
        for part in STATE_PARTS if ours is not None else ():
            assert same(getattr(ours, part), getattr(theirs, part)), (name, part)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prefill", [1, 3, 8, 13])
def test_a_cache_built_from_its_tensors_is_the_prefills_and_decodes_alike(kind, prefill):
    # 3 tokens: no group complete yet; 8: CSA's groups of 4 complete, nothing waiting;
    # 13: tokens waiting in both (HCA's groups are of 6), a window rolled past
    layer = small_layer(kind, seed=5)
    x = inputs(prefill + 9, seed=6)
    prefilled = CompressedCache(window=WINDOW)
    layer(x[:, :prefill], cache=prefilled)
    built = built_like(prefilled, layer)
    assert_same_cache(built, prefilled)
    # Then the same steps through both, across group boundaries of every kind
    for position in range(prefill, prefill + 9):
        token = x[:, position : position + 1]
        assert torch.equal(layer(token, cache=built), layer(token, cache=prefilled))
        assert_same_cache(built, prefilled)


def test_one_set_of_tensors_seeds_many_caches():
    layer = small_layer(CSA, seed=7)
    x = inputs(12, seed=8)
    prefilled = CompressedCache(window=WINDOW)
    layer(x[:, :11], cache=prefilled)
    seed = built_like(prefilled, layer)
    before = {part: getattr(seed.compressor, part).clone() for part in STATE_PARTS}
    outputs = []
    for _ in range(2):  # each step on a fresh cache over the same tensors
        fresh = CompressedCache.holding(
            seed.window_keys,
            window=WINDOW,
            seen_tokens=11,
            rate=4,
            compressor=CompressorState(
                **{part: getattr(seed.compressor, part) for part in STATE_PARTS}
            ),
            indexer=CompressorState(**{part: getattr(seed.indexer, part) for part in STATE_PARTS}),
        )
        outputs.append(layer(x[:, 11:], cache=fresh))  # token 11 completes a group
        assert fresh.num_entries == 3
    assert torch.equal(*outputs)
    assert all(torch.equal(getattr(seed.compressor, p), before[p]) for p in STATE_PARTS)


def held(batch: int, tokens: int, dim: int) -> torch.Tensor:
    return torch.zeros(batch, tokens, dim, dtype=F64)


def hca_state(**changes) -> CompressorState:
    """An HCA state after 8 tokens at rate 6 and head_dim 16: 1 entry, 2 waiting."""
    parts = {"entries": held(2, 1, 16), "waiting_kv": held(2, 2, 16)}
    parts["waiting_gate"] = held(2, 2, 16)
    return CompressorState(**(parts | changes))


@pytest.mark.parametrize(
    ("arguments", "message", "error"),
    [
        ({"seen_tokens": 0}, "CompressedCache.holding: seen_tokens must be at least 1", ValueError),
        (
            {"seen_tokens": 2.0},
            "CompressedCache.holding: seen_tokens must be an integer",
            TypeError,
        ),
        ({"window_keys": [0.0]}, "CompressedCache.holding: window_keys must be a torch", TypeError),
        (
            {"window_keys": held(2, 3, 16)},
            "CompressedCache.holding: window_keys must hold min(seen_tokens, window - 1) = 4 "
            "tokens (the window's, before the next token), got 3",
            ValueError,
        ),
        ({"rate": None}, "CompressedCache.holding: give rate with compressor", ValueError),
        ({"rate": 0}, "CompressedCache.holding: rate must be at least 1", ValueError),
        ({"compressor": {}}, "CompressedCache.holding: compressor must be a Compressor", TypeError),
        (
            {"compressor": None, "indexer": hca_state()},
            "CompressedCache.holding: an indexer's state comes with a compressor's",
            ValueError,
        ),
        (
            {"compressor": hca_state(entries=held(2, 2, 16))},
            "CompressedCache.holding: compressor.entries must have shape (2, 1, 16) after the "
            "tokens seen (rate 6), got (2, 2, 16)",
            ValueError,
        ),
        (
            {"compressor": hca_state(waiting_gate=None)},
            "CompressedCache.holding: compressor.waiting_gate must be a torch.Tensor",
            TypeError,
        ),
        (
            {"compressor": hca_state(waiting_kv=held(2, 2, 16).float())},
            "CompressedCache.holding: compressor.waiting_kv must have window_keys' dtype "
            "torch.float64",
            ValueError,
        ),
        (
            {"compressor": hca_state(overlap_kv=held(2, 6, 16))},
            "CompressedCache.holding: compressor.overlap_kv must be None without an indexer",
            ValueError,
        ),
        (
            {"indexer": hca_state()},  # a CSA layer's vectors and gates are twice as wide
            "CompressedCache.holding: compressor.waiting_kv must have shape (2, 2, 32)",
            ValueError,
        ),
    ],
)
def test_a_cache_built_from_tensors_a_prefill_would_not_leave_is_refused(arguments, message, error):
    given = {"window_keys": held(2, 4, 16), "window": WINDOW, "seen_tokens": 8, "rate": 6}
    given["compressor"] = hca_state()
    given |= arguments
    keys = given.pop("window_keys")
    with expect(message, error):
        CompressedCache.holding(keys, **given)


def test_a_layer_refuses_a_built_cache_of_other_sizes():
    layer = small_layer(HCA)  # head_dim 16, rate 6
    wide = CompressedCache.holding(held(2, 4, 8), window=WINDOW, seen_tokens=8)
    with expect("CompressedAttention: the cache holds a 'sliding_attention'"):
        layer(inputs(1), cache=wide)
    wide.kind = None  # as a sliding cache never used
    with expect("CompressedAttention: the cache holds keys of 8 numbers, this layer's head_dim"):
        layer(inputs(1), cache=wide)
    state = hca_state(entries=held(2, 2, 16), waiting_kv=held(2, 0, 16))
    state.waiting_gate = held(2, 0, 16)
    other_rate = CompressedCache.holding(
        held(2, 4, 16), window=WINDOW, seen_tokens=8, rate=4, compressor=state
    )
    with expect("CompressedAttention: the cache holds 2 entries and 0 waiting tokens after 8"):
        layer(inputs(1), cache=other_rate)


# -- the compressors and the indexer alone -------------------------------------------------


def their_compressor(layer: CompressedAttention, config):
    """transformers' compressor of ``layer``'s kind holding its weights (float64)."""
    cls = DeepseekV4CSACompressor if layer.kind == CSA else DeepseekV4HCACompressor
    theirs = cls(config).to(F64)
    state = layer.compressor.state_dict()
    names = {"W_kv.weight": "kv_proj.weight", "W_gate.weight": "gate_proj.weight"}
    names |= {"position_bias": "position_bias", "kv_norm.weight": "kv_norm.weight"}
    mapped = {names[key]: value for key, value in state.items()}
    if layer.indexer is not None:
        indexer = layer.indexer.state_dict()
        mapped |= {
            f"indexer.{names.get(k.removeprefix('compressor.'), k)}": v
            for k, v in indexer.items()
            if k.startswith("compressor.")
        }
        mapped["indexer.q_b_proj.weight"] = indexer["W_query.weight"]
        mapped["indexer.scorer.weights_proj.weight"] = indexer["W_weights.weight"]
    theirs.load_state_dict(mapped, strict=True)
    return theirs


@pytest.mark.parametrize("kind", [CSA, HCA])
def test_the_compressors_make_deepseek_v4s_entries(kind):
    layer = small_layer(kind, seed=5)
    x = inputs(19, seed=6)
    q_latent = layer.q_norm(layer.W_dq(x))
    with deepseek_v4_in_float64():
        config = deepseek_v4_config(layer, kinds=KINDS)
        theirs = their_compressor(layer, config)
        positions = torch.arange(19)[None]
        entries, bias = theirs(x, q_latent, positions, None, KINDS.index(kind))
    ours = layer.compressor(x)
    torch.testing.assert_close(ours, entries[:, 0], **EXACT)
    assert ours.shape[1] == 19 // layer.compressor.rate
    if kind == CSA:  # the entries each query reads: those the indexer picks
        scores = layer.indexer(x, q_latent)
        assert torch.equal(layer.indexer.chosen(scores), (bias[:, 0] == 0))


def test_the_indexer_picks_as_deepseek_v4s():
    layer = small_layer(CSA, seed=7)
    x = inputs(26, seed=8)
    q_latent = layer.q_norm(layer.W_dq(x))
    with deepseek_v4_in_float64():
        config = deepseek_v4_config(layer, kinds=KINDS)
        theirs = their_compressor(layer, config).indexer
        picks = theirs(x, q_latent, torch.arange(26)[None], None, 1)  # (b, n, top_k), -1: none
    chosen = layer.indexer.chosen(layer.indexer(x, q_latent))
    expected = torch.zeros_like(chosen)
    for b, n, k in zip(*torch.nonzero(picks >= 0, as_tuple=True), strict=True):
        expected[b, n, picks[b, n, k]] = True
    assert torch.equal(chosen, expected)
    assert chosen.sum(-1).max() == layer.indexer.top_k


# -- the limits --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [CSA, HCA])
def test_before_any_group_is_complete_it_is_a_window_with_sinks(kind):
    layer = small_layer(kind, seed=9)
    rate = layer.compress_rate
    x = inputs(rate - 1, seed=10)
    # Chapter 17's window and chapter 16's sinks, from attend, on the layer's own parts
    q = layer.W_uq(layer.q_norm(layer.W_dq(x))).view(2, rate - 1, 4, 16).transpose(1, 2)
    q = layer.q_head_norm(q)
    kv = layer.kv_norm(layer.W_kv(x))
    positions = torch.arange(rate - 1)
    q, kv = rotate_last(q, positions, layer), rotate_last(kv, positions, layer)
    out = attend(
        q,
        kv[:, None],
        kv[:, None],
        allowed=sliding_window_mask(rate - 1, WINDOW),
        sinks=layer.sinks,
    )
    out = rotate_last(out, -positions, layer)  # turned back
    grouped = out.transpose(1, 2).reshape(2, rate - 1, 2, 32)
    weight = layer.W_out_groups.weight.view(2, 6, 32)
    expected = layer.W_out(torch.einsum("bngi,gri->bngr", grouped, weight).flatten(2))
    torch.testing.assert_close(layer(x), expected, **EXACT)


def rotate_last(x, positions, layer):
    """V4's rotation of the last rope_dim numbers, by neighbouring pairs, from Rotary's
    own speeds (an independent route: apply_rope_interleaved)."""
    from attention import apply_rope_interleaved

    dim = layer.rope_dim
    turned = apply_rope_interleaved(
        x[..., -dim:], positions, layer.rotary.base, layer.rotary.scaling
    )
    return torch.cat((x[..., :-dim], turned), dim=-1)


def test_a_top_k_that_keeps_every_entry_makes_the_indexer_a_no_op():
    layer = small_layer(CSA, seed=11)
    x = inputs(30, seed=12)
    picked = layer(x)
    layer.indexer.top_k = 30  # more than the 7 entries
    everything = layer(x)
    indexer, layer.indexer = layer.indexer, None  # every complete entry, no indexer
    torch.testing.assert_close(everything, layer(x), **EXACT)
    assert not torch.allclose(picked, everything)  # top_k=2 did choose
    layer.indexer = indexer


def test_our_csa_layer_always_applies_its_top_k_where_transformers_needs_a_mask():
    """A difference, pinned (chapter 25's proof dropdown): ``DeepseekV4Attention`` joins
    the indexer's picks (``block_bias``) to the mask only when it is given a mask tensor
    (``if isinstance(attention_mask, torch.Tensor) ...`` in its ``forward``). Given
    ``attention_mask=None``, a CSA layer of ``transformers`` reads every complete entry;
    ours applies its top-k whatever the caller passes. ``DeepseekV4Model`` supports
    eager attention only and always passes a tensor, so the model is not affected."""
    layer = small_layer(CSA, seed=3)  # groups of 4, top_k 2
    x = inputs(17, seed=4)
    ours_cache = CompressedCache(window=WINDOW)
    layer(x[:, :16], cache=ours_cache)
    assert ours_cache.num_entries == 4 > layer.indexer.top_k  # the indexer chooses
    picked = layer(x[:, 16:], cache=ours_cache)
    with deepseek_v4_in_float64():
        theirs, config, rotary = theirs_for(layer)
        outputs = {}
        for masked in (True, False):
            cache = DynamicCache(config=config)
            deepseek_v4_step(theirs, config, rotary, x[:, :16], 0, cache)
            if masked:
                outputs[masked] = deepseek_v4_step(theirs, config, rotary, x[:, 16:], 16, cache)
                continue
            positions = torch.tensor([[16]])
            tables = {k: rotary(x[:, 16:], positions, layer_type=k) for k in ("main", "compress")}
            outputs[masked], _ = theirs(x[:, 16:], tables, positions, None, cache)
    torch.testing.assert_close(picked, outputs[True], **EXACT)
    assert not torch.allclose(picked, outputs[False])
    # Without a mask, theirs is ours with a top_k that keeps every entry
    layer.indexer.top_k = 10**6
    every_cache = CompressedCache(window=WINDOW)
    layer(x[:, :16], cache=every_cache)
    torch.testing.assert_close(layer(x[:, 16:], cache=every_cache), outputs[False], **EXACT)


# -- bad input ----------------------------------------------------------------------------


def test_a_layer_refuses_another_cache():
    layer = small_layer(HCA)
    with expect(
        "CompressedAttention: cache must be a CompressedCache or None, got KVCache", TypeError
    ):
        layer(inputs(3), cache=KVCache())
    with expect("CompressedAttention: the cache keeps a window of 3 tokens"):
        layer(inputs(3), cache=CompressedCache(window=3))
    cache = CompressedCache(window=WINDOW)
    layer(inputs(3), cache=cache)
    with expect("CompressedAttention: the cache holds a 'heavily_compressed_attention'"):
        small_layer(CSA)(inputs(1), cache=cache)


def test_a_compressed_cache_goes_back_to_nothing_only():
    cache = CompressedCache(window=WINDOW)
    small_layer(SLIDING)(inputs(4), cache=cache)
    cache.crop(4)  # where it is
    with expect("CompressedCache: cannot crop to 2 tokens: a compressed cache folds"):
        cache.crop(2)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rope_dim": 3}, "CompressedAttention: rope_dim must be even"),
        (
            {"rope_dim": 18},
            "CompressedAttention: rope_dim must be even (RoPE turns pairs) and "
            "at most head_dim=16, got rope_dim=18",
        ),
        ({"o_groups": 3}, "CompressedAttention: o_groups must divide num_heads * head_dim"),
        ({"index_top_k": 2}, "CompressedAttention: a CSA layer's indexer needs"),
        ({"window": 0}, "CompressedAttention: window must be"),
    ],
)
def test_bad_arguments_are_refused(overrides, message):
    with expect(message):
        small_layer(HCA if "index_top_k" not in overrides else SLIDING, **overrides)


def test_bad_inputs_are_refused():
    rotary = Rotary(2)
    compressor = TokenCompressor(8, 4, rate=2, overlap=False, rotary=rotary)
    with expect("TokenCompressor: state must be a CompressorState or None, got dict", TypeError):
        compressor(torch.randn(1, 3, 8), {})
    with expect("TokenCompressor: rotary must be a Rotary, got NoneType", TypeError):
        TokenCompressor(8, 4, rate=2, overlap=False, rotary=None)
    indexer = CompressedIndexer(8, 6, num_heads=2, head_dim=4, rate=2, top_k=1, rotary=rotary)
    with expect(
        "CompressedIndexer: q_latent must have shape (batch, num_tokens, q_lora_rank) = (1, 3, 6)"
    ):
        indexer(torch.randn(1, 3, 8), torch.randn(1, 3, 5))
    with expect("CompressedIndexer: start must be 0 without a state"):
        indexer(torch.randn(1, 3, 8), torch.randn(1, 3, 6), start=2)
    assert indexer(torch.randn(1, 3, 8), torch.randn(1, 3, 6), CompressorState()).shape == (1, 3, 1)
