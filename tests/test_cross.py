"""CrossAttention and CrossAttentionCache against transformers' cross-attention classes.

* ``WhisperAttention`` used as cross-attention (``key_value_states``), a full pass
  and a prefill followed by decoding steps, each side with its own cache
  (``CrossAttentionCache``; transformers' ``EncoderDecoderCache``);
* ``MllamaTextCrossAttention``: grouped key/value heads and QK-norm per head, with and
  without a mask of the image tokens, a prefill and decoding steps.

Tolerance: ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12) in float64. Mllama's RMS norms
compute in float32 whatever the input, so ``float64_norms`` swaps them for float64 ones
with the same weights, and its eager kernel's softmax keeps float64 within
``float64_softmax``. Nothing is downloaded: every module is built from a config here.
"""

from __future__ import annotations

import pytest
import torch
from hf_models import EXACT, float64_norms, float64_softmax
from hypothesis import given
from hypothesis import strategies as st
from transformers import MllamaTextConfig, WhisperConfig
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.models.mllama.modeling_mllama import MllamaTextCrossAttention
from transformers.models.whisper.modeling_whisper import WhisperAttention

from attention import (
    MODELS,
    Cache,
    CrossAttention,
    CrossAttentionCache,
    layer_for,
    padding_mask,
)
from attention.models import Sizes, from_transformers

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64


def make_cross(d_in, d_context, d_out, seed=0, **kwargs) -> CrossAttention:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layer = CrossAttention(d_in, d_context, d_out, **kwargs)
        for part in ("q_norm", "k_norm"):  # a learned scale that is not all ones
            norm = getattr(layer, part)
            if norm is not None:
                torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
    return layer.to(F64).eval()


def randn(*shape, seed=1) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# -- Whisper's decoder cross-attention --------------------------------------------------


def whisper_cross(ours: CrossAttention) -> WhisperAttention:
    """``WhisperAttention`` with ``ours``'s weights: ``k_proj`` has no bias, so ours is 0.

    Copied by hand: ``from_transformers`` reads only the layers ``layer_for`` builds,
    and it builds none of an encoder-decoder."""
    config = WhisperConfig(d_model=ours.d_in, decoder_attention_heads=ours.num_heads)
    config._attn_implementation = "eager"
    theirs = WhisperAttention(
        ours.d_in, ours.num_heads, is_decoder=True, layer_idx=0, config=config
    )
    theirs = theirs.to(F64).eval()
    with torch.no_grad():
        ours.W_key.bias.zero_()
        pairs = (("q_proj", ours.W_query), ("k_proj", ours.W_key), ("v_proj", ours.W_value))
        for name, layer in (*pairs, ("out_proj", ours.out_proj)):
            getattr(theirs, name).weight.copy_(layer.weight)
            if getattr(theirs, name).bias is not None:
                getattr(theirs, name).bias.copy_(layer.bias)
    return theirs


WHISPER = st.fixed_dictionaries(
    {
        "num_heads": st.integers(1, 3),
        "head_dim": st.integers(1, 4),
        "batch": st.integers(1, 2),
        "num_queries": st.integers(1, 5),
        "context_tokens": st.integers(1, 7),
        "seed": st.integers(0, 2**16),
    }
)


@given(sizes=WHISPER)
def test_whisper_cross_attention_full_pass(sizes):
    d = sizes["num_heads"] * sizes["head_dim"]
    ours = make_cross(d, d, d, sizes["seed"], num_heads=sizes["num_heads"], qkv_bias=True)
    x = randn(sizes["batch"], sizes["num_queries"], d, seed=sizes["seed"])
    encoded = randn(sizes["batch"], sizes["context_tokens"], d, seed=sizes["seed"] + 1)
    theirs = whisper_cross(ours)
    expected, _ = theirs(x, key_value_states=encoded)
    torch.testing.assert_close(ours(x, encoded), expected, **EXACT)


@given(sizes=WHISPER)
def test_whisper_cross_attention_decodes_with_the_cache(sizes):
    """A prompt, then one token at a time: EncoderDecoderCache against CrossAttentionCache.

    Each computes the encoder's keys and values at the prompt and reuses them; the
    second step passes the encoder output again (as WhisperDecoder does), unread; the
    third passes None.
    """
    d = sizes["num_heads"] * sizes["head_dim"]
    ours = make_cross(d, d, d, sizes["seed"], num_heads=sizes["num_heads"], qkv_bias=True)
    theirs = whisper_cross(ours)
    tokens = randn(sizes["batch"], sizes["num_queries"] + 2, d, seed=sizes["seed"])
    encoded = randn(sizes["batch"], sizes["context_tokens"], d, seed=sizes["seed"] + 1)
    cache, their_cache = CrossAttentionCache(), EncoderDecoderCache(DynamicCache(), DynamicCache())
    n = sizes["num_queries"]
    for step, chunk in enumerate((tokens[:, :n], tokens[:, n : n + 1], tokens[:, n + 1 :])):
        # The cache goes 3rd, by position: `past_key_values` before transformers 5.24, `cache`
        # after, and the old keyword warns (FutureWarning) from 5.24 on.
        expected, _ = theirs(chunk, encoded, their_cache)
        got = ours(chunk, encoded if step < 2 else None, cache=cache)
        torch.testing.assert_close(got, expected, **EXACT)
    assert their_cache.is_updated[0]
    held = their_cache.cross_attention_cache.layers[0]
    torch.testing.assert_close(cache.keys, held.keys, **EXACT)
    torch.testing.assert_close(cache.values, held.values, **EXACT)
    assert cache.seen_tokens == n + 2 and len(cache) == sizes["context_tokens"]


# -- Llama 3.2 Vision's cross-attention layers ------------------------------------------

MLLAMA = st.fixed_dictionaries(
    {
        "num_kv_heads": st.integers(1, 2),
        "group": st.integers(1, 3),
        "head_dim": st.sampled_from([2, 4]),
        "batch": st.integers(1, 2),
        "num_queries": st.integers(1, 4),
        "context_tokens": st.integers(1, 6),
        "seed": st.integers(0, 2**16),
    }
)


def mllama_pair(sizes) -> tuple[CrossAttention, MllamaTextCrossAttention]:
    """Mllama's cross-attention (GQA, RMSNorm per head) built from a config, its
    QK-norms' weights drawn away from ones, and ours from it by ``from_transformers``."""
    heads = sizes["num_kv_heads"] * sizes["group"]
    config = MllamaTextConfig(
        hidden_size=heads * sizes["head_dim"],
        num_attention_heads=heads,
        num_key_value_heads=sizes["num_kv_heads"],
        rms_norm_eps=1e-5,
        num_hidden_layers=1,
        cross_attention_layers=[0],
    )
    config._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(sizes["seed"])
        theirs = MllamaTextCrossAttention(config, layer_idx=0).to(F64).eval()
    generator = torch.Generator().manual_seed(sizes["seed"])
    with torch.no_grad():
        for norm in (theirs.q_norm, theirs.k_norm):  # a learned scale that is not all ones
            norm.weight.copy_(torch.rand(norm.weight.shape, generator=generator) + 0.5)
    ours = from_transformers(theirs)
    assert (ours.num_kv_heads, ours.out_proj.bias, ours.q_norm.eps) == (
        sizes["num_kv_heads"],
        None,
        1e-5,
    )
    return ours, float64_norms(theirs, ("q_norm", "k_norm"))


@given(sizes=MLLAMA, masked=st.booleans())
def test_mllama_cross_attention_with_grouped_heads_and_qk_norm(sizes, masked):
    """With a mask, each sequence sees only its first image tokens (padding after)."""
    ours, theirs = mllama_pair(sizes)
    d, m = ours.d_in, sizes["context_tokens"]
    x = randn(sizes["batch"], sizes["num_queries"], d, seed=sizes["seed"])
    image = randn(sizes["batch"], m, d, seed=sizes["seed"] + 1)
    allowed = additive = None
    if masked:
        generator = torch.Generator().manual_seed(sizes["seed"])
        lengths = torch.randint(1, m + 1, (sizes["batch"],), generator=generator)
        allowed = padding_mask(lengths, m)[:, None, None, :]  # (batch, 1, 1, m)
        additive = torch.zeros(allowed.shape, dtype=F64).masked_fill(~allowed, float("-inf"))
    with float64_softmax():
        expected, _ = theirs(x, cross_attention_states=image, attention_mask=additive)
    torch.testing.assert_close(ours(x, image, allowed=allowed), expected, **EXACT)


@given(sizes=MLLAMA)
def test_mllama_cross_attention_decodes_from_its_cache(sizes):
    """transformers' text model skips the projection of the image after the first step
    (``cross_attention_states=None``, the cache's keys and values); so does ours."""
    ours, theirs = mllama_pair(sizes)
    d, n = ours.d_in, sizes["num_queries"]
    tokens = randn(sizes["batch"], n + 2, d, seed=sizes["seed"])
    image = randn(sizes["batch"], sizes["context_tokens"], d, seed=sizes["seed"] + 1)
    cache, their_cache = CrossAttentionCache(), DynamicCache()
    with float64_softmax():
        for step, chunk in enumerate((tokens[:, :n], tokens[:, n : n + 1], tokens[:, n + 1 :])):
            states = image if step == 0 else None
            # The cache goes 3rd, by position: `past_key_values` before transformers 5.24, `cache`
            # after, and the old keyword warns (FutureWarning) from 5.24 on.
            expected, _ = theirs(chunk, states, their_cache)
            torch.testing.assert_close(ours(chunk, states, cache=cache), expected, **EXACT)
    torch.testing.assert_close(cache.keys, their_cache.layers[0].keys, **EXACT)


def test_the_llama_32_vision_recipe_is_mllama_text_cross_attention():
    """layer_for's cross-attention layer of Llama 3.2 Vision, at a small width."""
    facts = MODELS["Llama 3.2 11B Vision"]
    small = Sizes(hidden_size=16, num_heads=4, num_kv_heads=2)  # 4 heads of 4, 2 key/value
    torch.manual_seed(0)
    ours = layer_for(facts, facts.layer_types.index("cross_attention"), sizes=small)
    ours = ours.to(F64).eval()
    assert (ours.num_kv_heads, ours.out_proj.bias, ours.q_norm.eps) == (2, None, 1e-5)
    sizes = {"num_kv_heads": 2, "group": 2, "head_dim": 4, "seed": 0}
    mine, theirs = mllama_pair(sizes)
    ours.load_state_dict(mine.state_dict())
    x, image = randn(2, 3, 16), randn(2, 5, 16, seed=2)
    with float64_softmax():
        expected, _ = theirs(x, cross_attention_states=image)
    torch.testing.assert_close(ours(x, image), expected, **EXACT)


# -- properties -------------------------------------------------------------------------


@given(
    heads=st.integers(1, 3),
    group=st.integers(1, 2),
    head_dim=st.integers(1, 3),
    d_context=st.integers(1, 5),
    num_queries=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_one_context_token_gives_its_value_to_every_query(
    heads, group, head_dim, d_context, num_queries, seed
):
    """Softmax over one key is 1: each query head returns that token's value projection,
    whatever the query, so the output is out_proj of the values, the same for all."""
    num_heads = heads * group
    d_out = num_heads * head_dim
    layer = make_cross(
        3, d_context, d_out, seed, num_heads=num_heads, num_kv_heads=heads, qkv_bias=True
    )
    x = randn(2, num_queries, 3, seed=seed)
    token = randn(2, 1, d_context, seed=seed + 1)
    value = layer.W_value(token).view(2, 1, heads, head_dim)  # (batch, 1, kv_heads, head_dim)
    per_query_head = value.repeat_interleave(group, dim=2).reshape(2, 1, d_out)
    expected = layer.out_proj(per_query_head).expand(2, num_queries, d_out)
    torch.testing.assert_close(layer(x, token), expected, **EXACT)


def test_the_weights_are_a_softmax_over_the_context_and_match_forward():
    layer = make_cross(4, 6, 8, num_heads=4, num_kv_heads=2)
    x, context = randn(2, 3, 4), randn(2, 5, 6, seed=2)
    allowed = padding_mask([5, 2], 5)[:, None, None, :]
    weights = layer.attention_weights(x, context, allowed=allowed)
    assert weights.shape == (2, 4, 3, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 3, dtype=F64), **EXACT)
    assert (weights[1, ..., 2:] == 0).all()  # the second sequence's padding gets nothing
    values = layer.W_value(context).view(2, 5, 2, 2).transpose(1, 2).repeat_interleave(2, 1)
    heads = (weights @ values).transpose(1, 2).reshape(2, 3, 8)
    torch.testing.assert_close(layer(x, context, allowed=allowed), layer.out_proj(heads), **EXACT)


def test_the_cache_implements_the_protocol_and_holds_the_context_once():
    layer = make_cross(4, 6, 8, num_heads=2)
    cache = CrossAttentionCache()
    assert isinstance(cache, Cache) and not cache.reindexes_positions
    assert (cache.seen_tokens, len(cache), cache.nbytes) == (0, 0, 0)
    context = randn(1, 5, 6)
    layer(randn(1, 3, 4), context, cache=cache)
    size = cache.nbytes
    assert size == 2 * 5 * 8 * 8  # keys and values: 5 tokens, 2 heads of 4, float64
    keys = cache.keys
    for _ in range(3):
        layer(randn(1, 1, 4), None, cache=cache)
    assert cache.seen_tokens == 6 and len(cache) == 5 and cache.nbytes == size
    assert cache.keys is keys  # read again, never recomputed
    cache.crop(2)  # the context's keys and values do not depend on the decoder's tokens
    assert cache.seen_tokens == 2 and cache.nbytes == size
    assert "context_tokens=5" in repr(cache)


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: CrossAttention(4, 6, 8, num_heads=0),
            ValueError,
            r"^CrossAttention: num_heads must be at least 1, got 0$",
        ),
        (
            lambda: CrossAttention(4, 6, 8, num_heads=4, num_kv_heads=3),
            ValueError,
            r"^CrossAttention: num_heads must be divisible by num_kv_heads .*num_heads=4 and "
            r"num_kv_heads=3",
        ),
        (
            lambda: CrossAttention(4, 6, 9, num_heads=2),
            ValueError,
            r"^CrossAttention: d_out must be divisible by num_heads",
        ),
        (
            lambda: CrossAttention(4, 6, 8, num_heads=2, q_norm="rms"),
            TypeError,
            r"^CrossAttention: q_norm must be an nn.Module or None, got 'rms'$",
        ),
        (
            lambda: CrossAttention(4, 6, 8, num_heads=2, qkv_bias=1),
            TypeError,
            r"^CrossAttention: qkv_bias must be True or False",
        ),
    ],
    ids=["zero heads", "groups", "head split", "norm type", "bias flag"],
)
def test_construction_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


LAYER = make_cross(4, 6, 8, num_heads=2)
X, CONTEXT = randn(2, 3, 4), randn(2, 5, 6, seed=2)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (
            lambda: LAYER(X, randn(2, 5, 7)),
            ValueError,
            r"^CrossAttention: expected a context of shape \(batch, context_tokens, d_context\) "
            r"= \(2, \.\.\., 6\), got \(2, 5, 7\)$",
        ),
        (
            lambda: LAYER(X, randn(1, 5, 6)),
            ValueError,
            r"expected a context of shape .* = \(2, \.\.\., 6\), got \(1, 5, 6\)$",
        ),
        (
            lambda: LAYER(X, randn(5, 6)),
            ValueError,
            r"^CrossAttention: context must have shape .*, got a 2-D tensor of shape \(5, 6\)$",
        ),
        (lambda: LAYER(X, [[0.0]]), TypeError, r"^CrossAttention: context must be a torch.Tensor"),
        (
            lambda: LAYER(X, CONTEXT.float()),
            ValueError,
            r"^CrossAttention: expected a context of the input's dtype torch.float64, got "
            r"torch.float32$",
        ),
        (lambda: LAYER(X, None), ValueError, r"^CrossAttention: expected a context .* got None"),
        (
            lambda: LAYER(X, CONTEXT, allowed=torch.ones(2, 3, 4, dtype=torch.bool)),
            ValueError,
            r"^CrossAttention: expected allowed broadcastable to \(batch, num_heads, "
            r"num_queries, context_tokens\) = \(2, 2, 3, 5\), got shape \(2, 3, 4\); a padding "
            r"mask of the keys is padding_mask\(lengths, context_tokens\)\[:, None, None, :\]$",
        ),
        (
            lambda: LAYER(X, CONTEXT, allowed=torch.ones(2, 5, dtype=torch.bool)),
            ValueError,
            r"broadcastable to .* = \(2, 2, 3, 5\), got shape \(2, 5\)",
        ),
        (
            lambda: LAYER(X, CONTEXT, allowed=torch.ones(2, 1, 1, 5)),
            ValueError,
            r"^CrossAttention: allowed must be a bool tensor, True where a query may attend, "
            r"got a tensor of dtype torch.float32; a 0/1 attention_mask becomes one with "
            r"\.bool\(\)$",
        ),
        (
            lambda: LAYER(X, CONTEXT, cache=object()),
            TypeError,
            r"^CrossAttention: cache must be a CrossAttentionCache or None, got object$",
        ),
    ],
    ids=[
        "context width",
        "context batch",
        "context rank",
        "context type",
        "context dtype",
        "no context",
        "allowed shape",
        "allowed 2-D padding",
        "allowed dtype",
        "cache type",
    ],
)
def test_forward_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_filled_cache_refuses_another_context_and_a_second_fill():
    cache = CrossAttentionCache()
    LAYER(X, CONTEXT, cache=cache)
    with pytest.raises(ValueError, match=r"holds the keys and values of 5 context tokens, got a "):
        LAYER(X, randn(2, 4, 6), cache=cache)
    LAYER(X, CONTEXT, cache=cache)  # the same number of tokens: accepted, not read
    with pytest.raises(ValueError, match=r"^CrossAttentionCache: expected keys and values at "):
        cache.update(cache.keys, cache.values, 1)
    with pytest.raises(ValueError, match=r"^CrossAttentionCache: cannot crop to 7 tokens: the"):
        cache.crop(7)
    bad_mask = torch.ones(2, 3, 4, dtype=torch.bool)
    seen = cache.seen_tokens
    with pytest.raises(ValueError, match="allowed"):
        LAYER(X, None, cache=cache, allowed=bad_mask)
    assert cache.seen_tokens == seen  # a refused call counts nothing
