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
