"""GroupedQueryAttention: head sharing, the book's module as a special case, and parity
with SDPA's ``enable_gqa`` and with transformers' ``LlamaAttention`` and ``MistralAttention``;
Part III's options and parts (``softcap``, ``sinks``, ``scale``, QK-norm per head or over
the projection, ``W_gate``, ``v_norm``, no ``W_value``): the defaults are today's module
and draw the same weights from a seed, each option at its limit changes nothing, each
is refused when it cannot mean anything, and decoding with every one on gives the full
pass's outputs. ``chunk``: attention within chunks. Decoding with a rolling cache,
against ``MistralAttention`` (``sliding_window``) and ``Llama4TextAttention`` on a
chunked layer, each with transformers' own cache built from the config
(``DynamicSlidingWindowLayer``) and its own mask. A ``rotary`` with a scaling (linear,
llama3, yarn, dynamic NTK) against ``LlamaAttention``, in a full pass and decoding step
by step, and with a partial rotary factor against ``GPTNeoXAttention``.

Tolerances (float64): ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12) wherever both sides
compute in float64, with the steps transformers computes in float32 (Mistral's cos and
sin, Llama 4's complex ``freqs_cis`` and its rotation, done in complex64, the scaled
RoPE tables: ``tests/rope_reference.py``) replaced by float64 ones;
``hf_models.FLOAT32_STEP`` (1e-5) against Llama's eager kernel, whose softmax runs in
float32, and against the rotary embeddings' float32 angles (the modules as shipped).
"""

from __future__ import annotations

import pytest
import torch
from helpers import (
    BAD_ARGUMENTS,
    BASE,
    F64,
    Shape,
    build,
    count_check_calls,
    decode_splits,
    gqa_layouts,
    layout_input,
    make,
    make_gqa,
    make_input,
    randomize_new_parameters,
    rotary_gqa,
    scaled_gqa,
    shapes,
    vectors,
    with_edge_shapes,
)
from hf_models import (
    EXACT,
    FLOAT32_STEP,
    causal_4d,
    freqs_cis_float64,
    llama4_chunked_attention,
    llama4_decode,
    llama_attention,
    llama_config,
    mistral_attention,
    padded_causal_4d,
    rope_cos_sin,
    rotate_float64,
)
from hypothesis import given
from hypothesis import strategies as st
from rope_reference import MODULE_SCALINGS, rope_config, their_cos_sin, their_frequencies
from torch.nn import functional as F
from transformers import DynamicCache, GPTNeoXConfig, MistralConfig
from transformers.masking_utils import (
    create_sliding_window_causal_mask,
    sliding_window_causal_mask_function,
)
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.llama import modeling_llama
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.llama4 import modeling_llama4
from transformers.models.mistral.modeling_mistral import MistralRotaryEmbedding

from attention import (
    GroupedQueryAttention,
    KVCache,
    MultiHeadAttention,
    MultiHeadLatentAttention,
    Rotary,
    apply_rope,
    causal_mask,
    chunked_mask,
    grouped_query_attention,
    padding_mask,
)

pytestmark = pytest.mark.usefixtures("single_thread")


# --- the kernel ---------------------------------------------------------------------------


@given(
    num_kv_heads=st.integers(1, 3),
    group=st.integers(1, 3),
    num_queries=st.integers(1, 4),
    extra_keys=st.integers(0, 3),
    use_mask=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_kernel_matches_sdpa_on_repeated_heads_and_enable_gqa(
    num_kv_heads, group, num_queries, extra_keys, use_mask, seed
):
    generator = torch.Generator().manual_seed(seed)
    num_keys = num_queries + extra_keys
    q = torch.randn(2, num_kv_heads * group, num_queries, 4, generator=generator, dtype=F64)
    k, v = torch.randn(2, 2, num_kv_heads, num_keys, 4, generator=generator, dtype=F64)
    mask = causal_4d(num_queries, num_keys) if use_mask else None
    ours = grouped_query_attention(q, k, v, allowed=mask)
    # Query head h reads key/value head h // group: heads 0 0 1 1 ... after repeat_interleave.
    repeated = [t.repeat_interleave(group, dim=1) for t in (k, v)]
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, *repeated, mask), **EXACT)
    expected = F.scaled_dot_product_attention(q, k, v, mask, enable_gqa=True)
    torch.testing.assert_close(ours, expected, **EXACT)


def test_kernel_pairs_query_head_h_with_kv_head_h_div_group():
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(1, 6, 3, 4, generator=generator, dtype=F64)  # 6 query heads
    k, v = torch.randn(2, 1, 2, 3, 4, generator=generator, dtype=F64)  # 2 key/value heads
    out = grouped_query_attention(q, k, v)
    for h in range(6):
        kv = h // 3
        alone = F.scaled_dot_product_attention(q[:, h], k[:, kv], v[:, kv])
        torch.testing.assert_close(out[:, h], alone, **EXACT)


def test_kernel_rejects_heads_that_do_not_group():
    q, k = torch.randn(1, 4, 2, 3), torch.randn(1, 3, 2, 3)
    with pytest.raises(ValueError, match=r"num_kv_heads dividing num_heads.*\(1, 4, 2, 3\).*"):
        grouped_query_attention(q, k, k)


def test_kernel_takes_allowed_by_keyword_and_explains_the_old_mask():
    q = torch.randn(1, 2, 3, 4)
    allowed = torch.ones(3, 3, dtype=torch.bool).tril()
    with pytest.raises(ValueError, match=r"^grouped_query_attention: mask= is no longer taken"):
        grouped_query_attention(q, q, q, mask=allowed)
    with pytest.raises(TypeError, match=r"positional"):
        grouped_query_attention(q, q, q, allowed)
    expected = r"allowed must be a bool tensor.*got a tensor of dtype torch.int64"
    with pytest.raises(ValueError, match=expected):
        grouped_query_attention(q, q, q, allowed=allowed.long())


# --- the module against the book's MultiHeadAttention -----------------------------------


@given(shape=shapes())
@with_edge_shapes()
def test_equal_heads_is_the_books_multihead_attention(shape: Shape):
    """Same seed, same layers in the same order: the same weights and the same output."""
    book = build(MultiHeadAttention, shape).eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(shape.seed)
        gqa = GroupedQueryAttention(
            shape.d_in,
            shape.d_out,
            shape.context_length,
            num_heads=shape.num_heads,
            num_kv_heads=shape.num_heads,
            qkv_bias=shape.qkv_bias,
        )
    gqa = gqa.to(F64).eval()
    book_weights = {k: v for k, v in book.state_dict().items() if k != "mask"}
    assert book_weights.keys() == gqa.state_dict().keys()
    for name, value in gqa.state_dict().items():
        assert torch.equal(value, book_weights[name]), name
    x = make_input(shape)
    torch.testing.assert_close(gqa(x), book(x), **EXACT)
    torch.testing.assert_close(gqa.attention_weights(x), book.attention_weights(x), **EXACT)


@given(layout=gqa_layouts())
def test_grouped_module_is_mha_with_each_kv_head_repeated_for_its_group(layout):
    """GQA == MHA whose key/value weights repeat kv head j for each query head of group j."""
    gqa = make_gqa(layout)
    group = layout["num_heads"] // layout["num_kv_heads"]
    d, head_dim = gqa.d_out, layout["head_dim"]
    out_bias = gqa.out_proj.bias is not None
    mha = MultiHeadAttention(
        d, d, layout["context_length"], 0.0, layout["num_heads"], out_bias=out_bias
    )
    mha = mha.to(F64).eval()
    mha.W_query.bias = mha.W_key.bias = mha.W_value.bias = None
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value", "out_proj"):
            layer = getattr(gqa, name)
            weight, bias = layer.weight, layer.bias
            if name in ("W_key", "W_value"):
                weight = weight.view(-1, head_dim, d).repeat_interleave(group, dim=0).reshape(d, d)
                bias = None if bias is None else bias.view(-1, head_dim).repeat_interleave(group, 0)
            getattr(mha, name).weight = torch.nn.Parameter(weight.clone())
            if bias is not None:
                getattr(mha, name).bias = torch.nn.Parameter(bias.reshape(-1).clone())
    x = layout_input(layout)
    torch.testing.assert_close(gqa(x), mha(x), **EXACT)


def test_one_kv_head_has_one_head_of_keys_and_values_to_cache():
    mqa = GroupedQueryAttention(16, 16, context_length=4, num_heads=4, num_kv_heads=1)
    mha = GroupedQueryAttention(16, 16, context_length=4, num_heads=4, num_kv_heads=4)
    assert mqa.W_key.out_features == mqa.W_value.out_features == mqa.head_dim == 4
    assert mqa.cache_bytes_per_token * 4 == mha.cache_bytes_per_token == 2 * 16 * 4


def multi_query_attention(mqa: GroupedQueryAttention, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Multi-query attention from ``mqa``'s weights, with SDPA instead of the module's code.

    Every query head attends over the one key/value head, passed to SDPA expanded to
    all heads (RoPE, if any, is :func:`apply_rope`, checked in ``test_rope.py``).
    Returns the output and each head's weights (SDPA's, with values = I).
    """
    batch, num_tokens, _ = x.shape
    heads, head_dim = mqa.num_heads, mqa.head_dim
    q = F.linear(x, mqa.W_query.weight, mqa.W_query.bias)
    q = q.view(batch, num_tokens, heads, head_dim).transpose(1, 2)  # (b, heads, n, head_dim)
    k, v = (F.linear(x, w.weight, w.bias)[:, None] for w in (mqa.W_key, mqa.W_value))
    if mqa.rotary is not None:
        base = mqa.rotary.base
        q, k = apply_rope(q, base=base), apply_rope(k, base=base)
    k, v = (t.expand(batch, heads, num_tokens, head_dim) for t in (k, v))  # one head, shared
    context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = F.linear(
        context.transpose(1, 2).reshape(batch, num_tokens, heads * head_dim),
        mqa.out_proj.weight,
        mqa.out_proj.bias,
    )
    identity = torch.eye(num_tokens, dtype=x.dtype).expand(batch, heads, -1, -1)
    return out, F.scaled_dot_product_attention(q, k, identity, is_causal=True)


@given(
    num_heads=st.integers(1, 4),
    half_head_dim=st.integers(1, 3),
    num_tokens=st.integers(1, 5),
    batch=st.integers(1, 2),
    qkv_bias=st.booleans(),
    rope_base=st.sampled_from([None, 10000.0]),
    seed=st.integers(0, 2**16),
)
def test_one_kv_head_is_multi_query_attention(
    num_heads, half_head_dim, num_tokens, batch, qkv_bias, rope_base, seed
):
    """Every query head uses the same keys and values: SDPA with the one head expanded.

    The full pass, its attention weights, and a prefill then one-token decoding steps
    with a cache, which holds the one key/value head.
    """
    d = num_heads * 2 * half_head_dim
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mqa = GroupedQueryAttention(
            d,
            d,
            context_length=num_tokens,
            num_heads=num_heads,
            num_kv_heads=1,
            qkv_bias=qkv_bias,
            rotary=None if rope_base is None else Rotary(2 * half_head_dim, rope_base),
        )
    mqa = mqa.to(F64).eval()
    x = torch.randn(batch, num_tokens, d, generator=torch.Generator().manual_seed(seed), dtype=F64)
    expected, weights = multi_query_attention(mqa, x)
    torch.testing.assert_close(mqa(x), expected, **EXACT)
    torch.testing.assert_close(mqa.attention_weights(x), weights, **EXACT)
    cache = KVCache()
    prefill = (num_tokens + 1) // 2
    steps = [mqa(x[:, :prefill], cache=cache)]
    steps += [mqa(x[:, t : t + 1], cache=cache) for t in range(prefill, num_tokens)]
    torch.testing.assert_close(torch.cat(steps, dim=1), expected, **EXACT)
    assert cache.shape == (batch, 1, num_tokens, mqa.head_dim)
    assert cache.nbytes == batch * num_tokens * mqa.cache_bytes_per_token


# --- against transformers' LlamaAttention and MistralAttention -------------------------


@given(layout=gqa_layouts(even_head_dim=True), base=st.sampled_from([10000.0, 500000.0]))
def test_matches_llama_attention_sdpa(layout, base):
    """Llama's sdpa kernel, an explicit causal mask and float64 cos/sin: EXACT."""
    gqa = make_gqa(layout, rope_base=base)
    llama = llama_attention(gqa, "sdpa")
    x = layout_input(layout)
    positions = torch.arange(x.shape[1]).expand(x.shape[0], -1)
    cos_sin = rope_cos_sin(positions, gqa.head_dim, base)
    theirs, _ = llama(x, cos_sin, causal_4d(x.shape[1], x.shape[1]))
    torch.testing.assert_close(gqa(x), theirs, **EXACT)


@given(layout=gqa_layouts(even_head_dim=True))
def test_matches_llama_attention_eager_with_explicit_causal_mask(layout):
    """Llama's eager kernel takes an additive mask and runs its softmax in float32."""
    gqa = make_gqa(layout, rope_base=10000.0)
    llama = llama_attention(gqa, "eager")
    x = layout_input(layout)
    n = x.shape[1]
    positions = torch.arange(n).expand(x.shape[0], -1)
    additive = torch.zeros(1, 1, n, n, dtype=F64).masked_fill(~causal_4d(n, n), float("-inf"))
    theirs, weights = llama(x, rope_cos_sin(positions, gqa.head_dim, 10000.0), additive)
    torch.testing.assert_close(gqa(x), theirs, **FLOAT32_STEP)
    torch.testing.assert_close(gqa.attention_weights(x), weights, **FLOAT32_STEP)


def test_llama_eager_without_a_mask_is_not_causal():
    """With attention_mask=None, Llama's eager kernel lets every token see the future."""
    gqa = make_gqa(
        {"num_heads": 4, "num_kv_heads": 2, "head_dim": 4, "context_length": 6, "num_tokens": 6}
        | {"batch": 1, "qkv_bias": False, "seed": 0},
        rope_base=10000.0,
    )
    llama = llama_attention(gqa, "eager")
    x = torch.randn(1, 6, 16, dtype=F64, generator=torch.Generator().manual_seed(1))
    cos_sin = rope_cos_sin(torch.arange(6)[None], 4, 10000.0)
    _, weights = llama(x, cos_sin, None)
    assert weights[0, :, 0, 1:].sum() > 0.1  # token 0 attends to later tokens
    mask = torch.zeros(1, 1, 6, 6, dtype=F64).masked_fill(~causal_4d(6, 6), float("-inf"))
    masked, weights = llama(x, cos_sin, mask)
    assert weights[0, :, 0, 1:].sum() == 0
    torch.testing.assert_close(gqa(x), masked, **FLOAT32_STEP)


def test_rope_base_lives_in_rope_parameters_and_matches_llamas_rotary_embedding():
    """transformers 5 keeps the base in config.rope_parameters["rope_theta"]."""
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 8, "context_length": 32}
    gqa = make_gqa(
        layout | {"num_tokens": 32, "batch": 1, "qkv_bias": True, "seed": 3}, rope_base=500000.0
    )
    config = llama_config(gqa)
    assert config.rope_parameters["rope_theta"] == 500000.0
    llama = llama_attention(gqa, "sdpa", config=config)
    x = torch.randn(1, 32, 32, dtype=F64, generator=torch.Generator().manual_seed(4))
    cos_sin = LlamaRotaryEmbedding(config)(x, torch.arange(32)[None])  # float32 angles
    theirs, _ = llama(x, cos_sin, causal_4d(32, 32))
    torch.testing.assert_close(gqa(x), theirs, **FLOAT32_STEP)


@given(layout=gqa_layouts(max_tokens=8, even_head_dim=True), window=st.integers(1, 5))
def test_matches_mistral_sliding_window_attention(layout, window):
    """The mask is transformers' own sliding_window_causal_mask_function, evaluated per pair."""
    gqa = make_gqa(layout | {"qkv_bias": False}, rope_base=10000.0, window=window)
    mistral = mistral_attention(gqa, "sdpa")
    assert mistral.config.sliding_window == window
    x = layout_input(layout)
    n = x.shape[1]
    allowed = sliding_window_causal_mask_function(window)
    index = torch.arange(n)
    mask = allowed(0, 0, index[:, None], index[None, :])[None, None]  # (1, 1, n, n)
    positions = index.expand(x.shape[0], -1)
    theirs, _ = mistral(x, rope_cos_sin(positions, gqa.head_dim, 10000.0), mask)
    torch.testing.assert_close(gqa(x), theirs, **EXACT)


def test_window_hides_what_is_further_back():
    gqa = GroupedQueryAttention(8, 8, context_length=6, num_heads=2, num_kv_heads=1, window=2)
    weights = gqa.attention_weights(torch.randn(1, 6, 8))
    far = torch.ones(6, 6, dtype=torch.bool).tril(-2)  # keys at least 2 back
    assert torch.all(weights[..., far] == 0)
    assert torch.all(weights[..., ~far & torch.ones(6, 6, dtype=torch.bool).tril()] > 0)


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "message", "error"), BAD_ARGUMENTS[GroupedQueryAttention])
def test_bad_arguments_name_what_was_expected_and_given(kwargs, message, error):
    with pytest.raises(error, match=message):
        make(GroupedQueryAttention, **kwargs)


def test_bad_inputs_name_what_was_expected_and_given():
    gqa = make(GroupedQueryAttention)  # d_in 8, context_length 4
    with pytest.raises(ValueError, match=r"d_in=8, got 5"):
        gqa(torch.randn(1, 3, 5))
    with pytest.raises(ValueError, match=r"got 5 tokens.*context_length=4"):
        gqa(torch.randn(1, 5, 8))
    with pytest.raises(TypeError, match=r"cache must be a KeyValueCache .* or None, got dict$"):
        gqa(torch.randn(1, 2, 8), cache={})
    with pytest.raises(
        ValueError, match=r"weights are torch.float32 but the input is torch.float64"
    ):
        gqa(torch.randn(1, 2, 8, dtype=F64))


# --- out_bias -------------------------------------------------------------------------


def _seeded_gqa(seed: int, **kwargs) -> tuple[GroupedQueryAttention, torch.Tensor]:
    """A GQA built right after ``manual_seed(seed)``, and the next number the generator gives."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gqa = GroupedQueryAttention(12, 12, 5, num_heads=4, num_kv_heads=2, **kwargs)
        return gqa, torch.rand(1)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_out_bias_default_is_the_books_draws_and_false_draws_the_same_weights(qkv_bias):
    """The bias is drawn last: leaving it out changes no other weight of the same seed."""
    default, after_default = _seeded_gqa(7, qkv_bias=qkv_bias)
    with_bias, after_with_bias = _seeded_gqa(7, qkv_bias=qkv_bias, out_bias=True)
    without, after_without = _seeded_gqa(7, qkv_bias=qkv_bias, out_bias=False)
    assert with_bias.state_dict().keys() == default.state_dict().keys()
    for name, value in default.state_dict().items():
        assert torch.equal(with_bias.state_dict()[name], value), name
    assert torch.equal(after_with_bias, after_default)
    assert without.out_proj.bias is None and default.out_proj.bias is not None
    assert without.state_dict().keys() == default.state_dict().keys() - {"out_proj.bias"}
    for name, value in without.state_dict().items():
        assert torch.equal(value, default.state_dict()[name]), name
    # d_out bias numbers fewer were drawn, so the generator is elsewhere afterwards
    assert not torch.equal(after_without, after_default)
    x = torch.randn(2, 5, 12)
    with torch.no_grad():
        default.out_proj.bias.zero_()  # what had to be done by hand before out_bias
    torch.testing.assert_close(without(x), default(x), rtol=0, atol=0)


def test_everything_after_context_length_is_keyword_only():
    """A positional num_heads is Python's TypeError, which says how many positions it takes."""
    with pytest.raises(TypeError, match=r"takes 4 positional arguments but 6 were given"):
        GroupedQueryAttention(8, 8, 4, 2, 1)
    with pytest.raises(TypeError, match=r"missing 2 required keyword-only arguments"):
        GroupedQueryAttention(8, 8, 4)
    gqa = GroupedQueryAttention(8, 8, 4, num_heads=2, num_kv_heads=1, out_bias=False)
    assert (gqa.num_heads, gqa.num_kv_heads, gqa.out_proj.bias) == (2, 1, None)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_out_bias_false_on_the_books_module_leaves_the_other_draws(qkv_bias):
    """MultiHeadAttention's positional call stays; out_bias=False drops only the last draw."""
    torch.manual_seed(3)
    book = MultiHeadAttention(6, 6, 4, 0.0, 2, qkv_bias)
    torch.manual_seed(3)
    llama_like = MultiHeadAttention(6, 6, 4, 0.0, 2, qkv_bias, out_bias=False)
    assert llama_like.out_proj.bias is None
    assert book.state_dict().keys() - llama_like.state_dict().keys() == {"out_proj.bias"}
    for name, value in llama_like.state_dict().items():
        assert torch.equal(value, book.state_dict()[name]), name
    x = torch.randn(2, 4, 6)
    with torch.no_grad():
        book.out_proj.bias.zero_()
    torch.testing.assert_close(llama_like(x), book(x), rtol=0, atol=0)
    with pytest.raises(TypeError, match=r"out_bias must be True or False.*got None"):
        MultiHeadAttention(6, 6, 4, 0.0, 2, out_bias=None)


# --- one check per call -----------------------------------------------------------------


@pytest.mark.parametrize("window", [None, 2])
def test_a_forward_checks_its_input_once_and_nothing_else(monkeypatch, window):
    """Rotation, mask and kernel run unchecked: only forward's own check runs, and the
    cache's public update checks the two tensors it is given (one call each)."""
    from attention import KVCache

    gqa = GroupedQueryAttention(
        8,
        8,
        context_length=6,
        num_heads=4,
        num_kv_heads=2,
        rotary=Rotary(2, 10.0),
        window=window,
    )
    x, cache = torch.randn(2, 6, 8), KVCache(window=window)
    counts = count_check_calls(monkeypatch)
    once = {"cached_input": 1, "module_input": 1, "float_tensor": 1}
    for step in (x[:, :4], x[:, 4:5], x[:, 5:]):  # prefill, then two decoding steps
        counts.clear()
        gqa(step, cache=cache)
        assert counts == once | {"float_tensor": 3}  # x, then the new keys and values
    counts.clear()
    gqa.attention_weights(x)
    assert counts == once


# --- allowed: padding and extra masks -------------------------------------------------------


@st.composite
def padded_batches(draw: st.DrawFn) -> tuple[dict, int, list[int]]:
    """A layout of 2+ tokens, a prefill length, and each sequence's real tokens in it."""
    layout = draw(gqa_layouts(max_tokens=7, even_head_dim=True))
    layout["num_tokens"] = draw(
        st.integers(min(2, layout["context_length"]), layout["context_length"])
    )
    prefill = draw(st.integers(1, layout["num_tokens"]))
    lengths = draw(
        st.lists(st.integers(1, prefill), min_size=layout["batch"], max_size=layout["batch"])
    )
    return layout, prefill, lengths


@given(batch=padded_batches(), base=st.sampled_from([10000.0, 500000.0]))
def test_a_right_padded_batch_matches_llama_attention_in_prefill_and_decoding(batch, base):
    """Prefill a right-padded batch, then decode: the padding stays cached and hidden.

    transformers gets the same 2-D attention_mask, turned into its 4-D mask by its own
    masking utils (causal and padding mask functions), and its sdpa path in float64.
    """
    layout, prefill, lengths = batch
    gqa = make_gqa(layout, rope_base=base)
    llama = llama_attention(gqa, "sdpa")
    x = layout_input(layout)
    n = x.shape[1]
    # 1 for a real token: each sequence's prompt, then every decoded token
    attention_mask = torch.cat(
        (padding_mask(lengths, prefill), torch.ones(len(lengths), n - prefill, dtype=torch.bool)),
        dim=1,
    )
    ours, theirs = KVCache(), DynamicCache()
    for start, stop in zip([0, *range(prefill, n)], range(prefill, n + 1), strict=False):
        positions = torch.arange(start, stop).expand(x.shape[0], -1)
        cos_sin = rope_cos_sin(positions, gqa.head_dim, base)
        mask = padded_causal_4d(attention_mask[:, :stop], stop - start)
        expected, _ = llama(x[:, start:stop], cos_sin, mask, theirs)
        keys = attention_mask[:, None, None, :stop]  # (batch, 1, 1, keys): every query
        got = gqa(x[:, start:stop], cache=ours, allowed=keys)
        torch.testing.assert_close(got, expected, **EXACT)
    torch.testing.assert_close(ours.keys, theirs.layers[0].keys, **EXACT)


@given(layout=gqa_layouts(max_tokens=6), data=st.data())
def test_real_tokens_of_a_left_padded_batch_get_what_they_get_alone(layout, data):
    """Padding (noise here) in front of each sequence: hidden, it changes no real output.

    Left padding, because on the right causality alone already hides it; without RoPE,
    because RoPE would see the real tokens at shifted positions.
    """
    gqa = make_gqa(layout, window=data.draw(st.none() | st.integers(1, 3), label="window"))
    x = layout_input(layout)
    b, n = x.shape[:2]
    lengths = data.draw(st.lists(st.integers(1, n), min_size=b, max_size=b), label="lengths")
    allowed = padding_mask(lengths, n).flip(-1)[:, None, None, :]  # the real tokens last
    out = gqa(x, allowed=allowed)
    weights = gqa.attention_weights(x, allowed=allowed)
    for i, length in enumerate(lengths):
        alone = gqa(x[i : i + 1, n - length :])
        torch.testing.assert_close(out[i : i + 1, n - length :], alone, **EXACT)
        # No weight on the padding from a real token. (A padding token that may see no
        # key has no weights: a row of NaN, as forward's docstring says.)
        assert torch.all(weights[i, :, n - length :, : n - length] == 0)


@pytest.mark.parametrize("num_cached", [0, 3])
def test_allowed_per_query_is_anded_with_the_causal_and_window_mask(num_cached):
    """A (batch, num_queries, num_keys) mask hides what it hides, on top of the window."""
    gqa = GroupedQueryAttention(8, 8, 6, num_heads=2, num_kv_heads=1, window=3).double().eval()
    x = torch.randn(2, 6, 8, dtype=F64)
    cache = KVCache()
    if num_cached:
        gqa(x[:, :num_cached], cache=cache)
    new = x[:, num_cached:]
    n, k = new.shape[1], 6
    allowed = torch.rand(2, n, k, generator=torch.Generator().manual_seed(1)) > 0.3
    allowed[:, :, num_cached:] |= torch.eye(n, dtype=torch.bool)  # each query sees itself
    got = gqa(new, cache=cache, allowed=allowed[:, None])  # one mask for every head
    queries = gqa._heads(gqa.W_query(new), 2)
    # every key, cached or new (a window's cache keeps only the last 2); no rope_base
    keys, values = gqa._heads(gqa.W_key(x), 1), gqa._heads(gqa.W_value(x), 1)
    both = causal_mask(n, k, window=3) & allowed[:, None]  # (2, 1, n, k)
    context = F.scaled_dot_product_attention(queries, keys, values, attn_mask=both, enable_gqa=True)
    expected = gqa.out_proj(context.transpose(1, 2).reshape(2, n, 8))
    torch.testing.assert_close(got, expected, **EXACT)
    # all True changes nothing
    torch.testing.assert_close(
        gqa(x, allowed=torch.ones(2, 1, 1, 6, dtype=torch.bool)), gqa(x), rtol=0, atol=0
    )


@pytest.mark.parametrize(
    ("allowed", "message"),
    [
        (
            torch.ones(2, 1, 1, 5, dtype=torch.bool),
            r"expected allowed broadcastable to \(batch, num_heads, num_queries, num_keys\) = "
            r"\(2, 2, 4, 6\), got shape \(2, 1, 1, 5\); a padding mask of the keys is "
            r"padding_mask\(lengths, num_keys\)\[:, None, None, :\]",
        ),
        # a padding mask of the keys as it is: it does not broadcast (the queries are 4)
        (torch.ones(2, 6, dtype=torch.bool), r"got shape \(2, 6\)"),
        (torch.ones(3, 1, 1, 6, dtype=torch.bool), r"got shape \(3, 1, 1, 6\)"),
        (torch.ones(2, 3, 4, 6, dtype=torch.bool), r"got shape \(2, 3, 4, 6\)"),  # 3 heads
        (torch.ones(2, 6, dtype=torch.int64), r"got a tensor of dtype torch.int64; .*\.bool\(\)"),
        ([[True] * 6] * 2, r"True where a query may attend.* got list"),
    ],
)
def test_a_bad_allowed_names_the_expected_and_given_shapes(allowed, message):
    gqa = GroupedQueryAttention(8, 8, 6, num_heads=2, num_kv_heads=1)
    cache = KVCache()
    gqa(torch.randn(2, 2, 8), cache=cache)
    error = ValueError if isinstance(allowed, torch.Tensor) else TypeError
    with pytest.raises(error, match=r"^GroupedQueryAttention: .*" + message):
        gqa(torch.randn(2, 4, 8), cache=cache, allowed=allowed)


# --- Part III's parts and options: QK-norm per head or over the projection, a cap ---------


def test_qk_norm_per_head_and_over_the_projection_differ_with_more_than_one_head():
    """One head's size depends on the others only when the norm spans the projection."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 4, "d_model": 8}
    layout |= {"context_length": 4, "num_tokens": 4, "batch": 1, "qkv_bias": False, "seed": 3}
    x = layout_input(layout)
    head = make_gqa(layout, parts=("qk_norm",))(x)
    projection = make_gqa(layout, parts=("qk_norm_projection",))(x)
    assert (head - projection).abs().max() > 1e-3


def test_a_small_softcap_changes_the_output():
    """So the Gemma 2 comparison sees the cap: a cap of 0.05 flattens every row."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 4, "d_model": 8}
    layout |= {"context_length": 5, "num_tokens": 5, "batch": 1, "qkv_bias": False, "seed": 1}
    x = layout_input(layout)
    capped = make_gqa(layout, softcap=0.05)
    assert (capped(x) - make_gqa(layout)(x)).abs().max() > 1e-3
    weights = capped.attention_weights(x)  # scores within (-0.05, 0.05): nearly uniform
    uniform = torch.tril(torch.ones(5, 5, dtype=F64)) / torch.arange(1, 6, dtype=F64)[:, None]
    torch.testing.assert_close(weights[0, 0], uniform, atol=0.06, rtol=0)


# --- the module's defaults are today's module ---------------------------------------------


def todays_module(layout: dict, x: torch.Tensor, rope: bool) -> torch.Tensor:
    """Today's GroupedQueryAttention written out from the same seed: four nn.Linear layers
    drawn in order, the heads, RoPE, causal SDPA over repeated heads, out_proj."""
    d, heads, kv_heads = layout["d_model"], layout["num_heads"], layout["num_kv_heads"]
    head_dim, bias = layout["head_dim"], layout["qkv_bias"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(layout["seed"])
        layers = [
            torch.nn.Linear(d, d, bias=bias),
            torch.nn.Linear(d, kv_heads * head_dim, bias=bias),
            torch.nn.Linear(d, kv_heads * head_dim, bias=bias),
            torch.nn.Linear(d, d, bias=bias),
        ]
    w_q, w_k, w_v, out = (layer.to(F64) for layer in layers)
    b, n, _ = x.shape

    def split(t, h):
        return t.view(b, n, h, head_dim).transpose(1, 2)

    q, k, v = split(w_q(x), heads), split(w_k(x), kv_heads), split(w_v(x), kv_heads)
    if rope:
        q, k = apply_rope(q, base=BASE), apply_rope(k, base=BASE)
    group = heads // kv_heads
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out(context.transpose(1, 2).reshape(b, n, d))


NEW_OFF = {
    "softcap": None,
    "sinks": False,
    "scale": None,
    "rotary": None,
    "q_norm": None,
    "k_norm": None,
    "v_norm": None,
    "W_gate": None,
}


@given(layout=gqa_layouts(even_head_dim=True), rope=st.booleans())
def test_defaults_are_todays_module(layout, rope):
    """Same seed: the same parameter names, weights, random-number use and outputs."""
    base = {"rope_base": BASE} if rope else {}
    with torch.random.fork_rng(devices=[]):
        gqa = make_gqa(layout, **base)
        after_default = torch.random.get_rng_state()
    explicit = make_gqa(layout, **base, **NEW_OFF)
    names = ["W_query.weight", "W_key.weight", "W_value.weight", "out_proj.weight"]
    if layout["qkv_bias"]:  # make_gqa: out_bias follows qkv_bias
        names = [
            f"{layer}.{kind}"
            for layer in ("W_query", "W_key", "W_value", "out_proj")
            for kind in ("weight", "bias")
        ]
    assert [name for name, _ in gqa.named_parameters()] == names
    assert [name for name, _ in explicit.named_parameters()] == names
    assert gqa.W_gate is gqa.q_norm is gqa.k_norm is gqa.v_norm is gqa.sinks is None
    x = layout_input(layout)
    torch.testing.assert_close(gqa(x), todays_module(layout, x, rope), **EXACT)
    assert torch.equal(gqa(x), explicit(x))
    with torch.random.fork_rng(devices=[]):
        make_gqa(layout, **base, **NEW_OFF)
        assert torch.equal(torch.random.get_rng_state(), after_default)


OPTIONS_ON = [
    pytest.param({"parts": ("qk_norm",)}, {"q_norm.weight", "k_norm.weight"}, id="qk_norm"),
    pytest.param(
        {"parts": ("qk_norm_projection",)},
        {"q_norm.weight", "k_norm.weight"},
        id="qk_norm_projection",
    ),
    pytest.param({"softcap": 30.0}, set(), id="softcap"),
    pytest.param({"sinks": True}, {"sinks"}, id="sinks"),
    pytest.param({"scale": 0.5}, set(), id="scale"),
    pytest.param({"parts": ("v_norm",)}, set(), id="v_norm"),
    pytest.param({"parts": ("W_gate",)}, {"W_gate.weight", "W_gate.bias"}, id="W_gate"),
]


@pytest.mark.parametrize(("option", "new_names"), OPTIONS_ON)
def test_each_option_and_part_keeps_the_existing_weights_of_the_same_seed(option, new_names):
    """Parts come after out_proj: W_query to out_proj are drawn as before."""
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 2, "d_model": 8}
    layout |= {"context_length": 4, "num_tokens": 4, "batch": 1, "qkv_bias": True, "seed": 5}
    default = make_gqa(layout).state_dict()
    with_option = make_gqa(layout, **option).state_dict()
    for name, tensor in default.items():
        assert torch.equal(with_option[name], tensor), name
    assert set(with_option) - set(default) == new_names


# --- the module's limits: cap, sink and gate that do nothing ------------------------------


@given(layout=gqa_layouts(even_head_dim=True))
def test_module_softcap_towards_infinity_is_no_cap(layout):
    x = layout_input(layout)
    capped = make_gqa(layout, rope_base=BASE, softcap=1e9)
    plain = make_gqa(layout, rope_base=BASE)
    torch.testing.assert_close(capped(x), plain(x), **EXACT)
    torch.testing.assert_close(capped.attention_weights(x), plain.attention_weights(x), **EXACT)


@given(layout=gqa_layouts(even_head_dim=True))
def test_module_sinks_of_minus_infinity_are_no_sinks(layout):
    x = layout_input(layout)
    sunk = make_gqa(layout, rope_base=BASE, sinks=True)
    with torch.no_grad():
        sunk.sinks.fill_(float("-inf"))
    plain = make_gqa(layout, rope_base=BASE)
    torch.testing.assert_close(sunk(x), plain(x), **EXACT)
    torch.testing.assert_close(sunk.attention_weights(x), plain.attention_weights(x), **EXACT)


@given(layout=gqa_layouts(even_head_dim=True), bias=st.sampled_from([1e3, float("inf")]))
def test_module_saturated_gate_is_no_gate(layout, bias):
    """A gate bias so large that sigmoid gives exactly 1 passes every output through."""
    layout = layout | {"qkv_bias": True}
    x = layout_input(layout)
    gated = make_gqa(layout, rope_base=BASE, parts=("W_gate",))
    with torch.no_grad():
        gated.W_gate.weight.zero_()
        gated.W_gate.bias.fill_(bias)
    torch.testing.assert_close(gated(x), make_gqa(layout, rope_base=BASE)(x), **EXACT)


def test_module_gate_of_zero_logits_halves_the_heads_outputs():
    """sigmoid(0) = 1/2 on every number into out_proj: the output minus the bias halves."""
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 2, "d_model": 4}
    layout |= {"context_length": 3, "num_tokens": 3, "batch": 1, "qkv_bias": True, "seed": 7}
    x = layout_input(layout)
    gated, plain = make_gqa(layout, parts=("W_gate",)), make_gqa(layout)
    with torch.no_grad():
        gated.W_gate.weight.zero_()
        gated.W_gate.bias.zero_()
    bias = plain.out_proj.bias
    torch.testing.assert_close(gated(x) - bias, (plain(x) - bias) / 2, **EXACT)


def test_module_sinks_make_rows_sum_below_one():
    layout = {"num_heads": 2, "num_kv_heads": 1, "head_dim": 2, "d_model": 4}
    layout |= {"context_length": 3, "num_tokens": 3, "batch": 1, "qkv_bias": False, "seed": 7}
    gqa = make_gqa(layout, sinks=True)
    sums = gqa.attention_weights(layout_input(layout)).sum(-1)
    assert (sums < 1).all() and (sums > 0).all()


def test_cache_bytes_per_token_is_the_same_without_w_value():
    layout = {"num_heads": 4, "num_kv_heads": 2, "head_dim": 2, "d_model": 8}
    layout |= {"context_length": 4, "num_tokens": 4, "batch": 1, "qkv_bias": False, "seed": 0}
    plain, shared = make_gqa(layout), make_gqa(layout, parts=("no_W_value", "v_norm"))
    assert shared.W_value is None
    assert shared.cache_bytes_per_token == plain.cache_bytes_per_token == 2 * 2 * 2 * 8


# --- the options' and parts' errors, and decoding with every one on -----------------------


BAD_OPTIONS = [
    ({"softcap": 0}, r"softcap must be a positive, finite number .*got 0"),
    ({"softcap": -50.0}, r"softcap must be a positive, finite number .*got -50.0"),
    ({"softcap": True}, r"softcap must be a positive number .*got True of type bool", TypeError),
    ({"sinks": 1}, r"sinks must be True or False .*got 1 of type int", TypeError),
    ({"scale": 0}, r"scale must be a positive number or None, got 0"),
    ({"scale": -0.5}, r"scale must be a positive number or None, got -0.5"),
    ({"scale": True}, r"scale must be a positive number or None, got True", TypeError),
    # Part III's former flags: each says which part or recipe replaces it
    ({"qk_norm": True}, r"qk_norm= is no longer taken; give the parts q_norm= and k_norm="),
    ({"value_norm": True}, r"value_norm= is no longer taken; give the part v_norm="),
    ({"output_gate": True}, r"output_gate= is no longer taken; assign the part W_gate"),
    ({"keys_as_values": True}, r"keys_as_values= is no longer taken; set layer.W_value = None"),
    ({"rope_scaling": {}}, r"rope_scaling= is no longer taken; give rotary=Rotary\("),
    ({"partial_rotary_factor": 0.5}, r"partial_rotary_factor= .*rotary=Rotary\("),
    ({"rope_base": 1e4}, r"rope_base= is no longer taken; give rotary=Rotary\(head_dim, base\)"),
]


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [(kwargs, message, *(error or [ValueError])) for kwargs, message, *error in BAD_OPTIONS],
    ids=[", ".join(map(repr, row[0].items())) for row in BAD_OPTIONS],
)
def test_module_rejects_bad_options(kwargs, message, error):
    with pytest.raises(error, match="^GroupedQueryAttention: " + message):
        GroupedQueryAttention(8, 8, 4, num_heads=2, num_kv_heads=1, **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"q_norm": "rms"}, {"W_gate": torch.ones(2)}, {"rotary": 10000.0}, {"qk_nrom": True}],
    ids=["q_norm", "W_gate", "rotary", "misspelt"],
)
def test_module_rejects_parts_that_are_not_modules_and_unknown_keywords(kwargs):
    with pytest.raises(TypeError, match=r"^GroupedQueryAttention: "):
        GroupedQueryAttention(8, 8, 4, num_heads=2, num_kv_heads=1, **kwargs)


@given(layout=gqa_layouts(even_head_dim=True), window=st.one_of(st.none(), st.integers(1, 4)))
def test_every_option_on_decodes_with_a_cache_as_one_full_pass(layout, window):
    """Prefill then one token at a time gives the full pass's outputs, every option on."""
    layout = layout | {"num_tokens": layout["context_length"]}
    options = {"softcap": 2.0, "sinks": True, "scale": 0.7}
    parts = ("W_gate", "qk_norm", "v_norm", "no_W_value")
    gqa = make_gqa(layout, rope_base=BASE, window=window, parts=parts, **options)
    gqa = randomize_new_parameters(gqa, layout["seed"])
    x = layout_input(layout)
    cache, prefill = KVCache(), (layout["num_tokens"] + 1) // 2
    steps = [gqa(x[:, :prefill], cache=cache)]
    steps += [gqa(x[:, i : i + 1], cache=cache) for i in range(prefill, x.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), gqa(x), **EXACT)


# --- chunked attention: a module with chunk -----------------------------------------------


def test_a_chunked_module_attends_within_chunks_only():
    gqa = GroupedQueryAttention(8, 8, 7, num_heads=2, num_kv_heads=1, chunk=3)
    weights = gqa.attention_weights(torch.randn(1, 7, 8))
    assert torch.all((weights > 0) == chunked_mask(7, 3))


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


# --- decoding with a rolling cache against Mistral's and Llama 4's layers -----------------


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


# --- rotary with a scaling, against LlamaAttention and GPTNeoXAttention -------------------


def llama_with(gqa: GroupedQueryAttention, scaling: dict):
    config = rope_config(gqa.head_dim, gqa.rotary.base, scaling)
    config.hidden_size, config.num_attention_heads = gqa.d_in, gqa.num_heads
    config.num_key_value_heads = gqa.num_kv_heads
    return llama_attention(gqa, config=config), config


@pytest.mark.parametrize("name", list(MODULE_SCALINGS))
def test_gqa_with_rope_scaling_matches_llama_attention_in_float64(name):
    """A full pass of 20 tokens: past the original context of yarn and dynamic."""
    scaling = MODULE_SCALINGS[name]
    gqa = scaled_gqa(scaling)
    theirs, config = llama_with(gqa, scaling)
    x = vectors(4, 2, 20, 32)
    positions = torch.arange(20)[None]
    inv_freq, factor = their_frequencies(config, float64=True, num_tokens=20)
    expected, _ = theirs(x, their_cos_sin(inv_freq, factor, positions), causal_4d(20, 20))
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    # as shipped: LlamaRotaryEmbedding, float32 angles
    cos_sin = modeling_llama.LlamaRotaryEmbedding(config)(x, positions)
    torch.testing.assert_close(gqa(x), theirs(x, cos_sin, causal_4d(20, 20))[0], **FLOAT32_STEP)


@pytest.mark.parametrize("name", ["llama3", "yarn", "dynamic"])
def test_gqa_decoding_with_rope_scaling_matches_llama_attention_step_by_step(name):
    """Prefill 5 tokens, then decode 9 one at a time, with both caches.

    Dynamic NTK scales for the tokens seen so far: from the 9th token on (past the
    original 8), each step rotates its query and key with speeds for its own length,
    and the cached keys keep the rotation they got; transformers' rotary embedding,
    called with each step's position, does the same.
    """
    scaling = MODULE_SCALINGS[name]
    gqa = scaled_gqa(scaling, seed=1)
    theirs, config = llama_with(gqa, scaling)
    rotary = modeling_llama.LlamaRotaryEmbedding(config)  # keeps its state across steps
    x = vectors(5, 1, 14, 32)
    ours_cache, their_cache, shipped_cache = KVCache(), DynamicCache(), DynamicCache()
    for start, stop in [(0, 5), *((p, p + 1) for p in range(5, 14))]:
        step, positions = x[:, start:stop], torch.arange(start, stop)[None]
        ours = gqa(step, cache=ours_cache)
        inv_freq, factor = their_frequencies(config, float64=True, num_tokens=stop)
        cos_sin = their_cos_sin(inv_freq, factor, positions)
        mask = causal_4d(stop - start, stop)
        expected, _ = theirs(step, cos_sin, mask, their_cache)
        torch.testing.assert_close(ours, expected, **EXACT)
        shipped, _ = theirs(step, rotary(step, positions), mask, shipped_cache)
        torch.testing.assert_close(ours, shipped, **FLOAT32_STEP)


def test_static_scalings_decode_as_one_full_pass_and_dynamic_does_not():
    """Linear, yarn and llama3 speeds do not depend on the length: a cache changes
    nothing. Dynamic NTK's do once past the original context: decoding there differs
    from one pass over all the tokens, whose keys were all rotated for the full length.
    """
    x = vectors(6, 1, 14, 32)
    for name, scaling in MODULE_SCALINGS.items():
        gqa = scaled_gqa(scaling)
        cache = KVCache()
        steps = [gqa(x[:, :5], cache=cache)] + [
            gqa(x[:, p : p + 1], cache=cache) for p in range(5, 14)
        ]
        decoded = torch.cat(steps, dim=1)
        full = gqa(x)
        if name == "dynamic":
            # up to the original 8 tokens: plain RoPE, as a pass over those 8 alone
            torch.testing.assert_close(decoded[:, :8], gqa(x[:, :8]), **EXACT)
            assert not torch.allclose(decoded[:, 8:], full[:, 8:], rtol=1e-6, atol=1e-6)
        else:
            torch.testing.assert_close(decoded, full, **EXACT)


def test_dynamic_decoding_past_the_original_context_grows_no_table():
    gqa = scaled_gqa(MODULE_SCALINGS["dynamic"], seed=2)
    x = vectors(7, 1, 30, 32)
    cache = KVCache()
    gqa(x[:, :8], cache=cache)
    (before,) = [cos.shape for cos, _ in gqa.rotary._tables.values()]
    for p in range(8, 30):
        gqa(x[:, p : p + 1], cache=cache)
    assert [cos.shape for cos, _ in gqa.rotary._tables.values()] == [before]


def neox_attention(gqa: GroupedQueryAttention, fraction: float, scaling: dict | None):
    """transformers' ``GPTNeoXAttention`` (partial rotary) holding ``gqa``'s weights.

    GPT-NeoX fuses the three projections into ``query_key_value``, head by head: the
    rows of head ``h`` are its query, then its key, then its value.
    """
    params = {"rope_type": "default", **(scaling or {}), "rope_theta": gqa.rotary.base}
    config = GPTNeoXConfig(
        hidden_size=gqa.d_in,
        num_attention_heads=gqa.num_heads,
        attention_bias=True,
        max_position_embeddings=gqa.context_length,
        rope_parameters={**params, "partial_rotary_factor": fraction},
        attn_implementation="sdpa",
    )
    theirs = modeling_gpt_neox.GPTNeoXAttention(config, layer_idx=0).to(F64).eval()
    heads, head_dim = gqa.num_heads, gqa.head_dim
    with torch.no_grad():
        for part in ("weight", "bias"):
            per_head = [
                getattr(layer, part).view(heads, head_dim, -1)
                for layer in (gqa.W_query, gqa.W_key, gqa.W_value)
            ]
            fused = torch.cat(per_head, dim=1).reshape(3 * heads * head_dim, -1).squeeze(-1)
            getattr(theirs.query_key_value, part).copy_(fused)
        theirs.dense.weight.copy_(gqa.out_proj.weight)
        theirs.dense.bias.copy_(gqa.out_proj.bias)
    return theirs, config


@pytest.mark.parametrize("fraction", [0.25, 0.5])
@pytest.mark.parametrize("scaling", [None, MODULE_SCALINGS["linear"]], ids=["plain", "linear"])
def test_gqa_partial_rotary_matches_gpt_neox_attention(fraction, scaling):
    """GPT-NeoX rotates the first quarter of each head (``rotary_pct`` 0.25)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        gqa = rotary_gqa(
            32, 32, 64, num_heads=2, num_kv_heads=2, qkv_bias=True, rope_base=10000.0,
            rope_scaling=scaling, partial_rotary_factor=fraction,
        ).to(F64).eval()  # fmt: skip
    theirs, config = neox_attention(gqa, fraction, scaling)
    assert theirs.rotary_ndims == int(16 * fraction)
    x = vectors(8, 2, 9, 32)
    positions = torch.arange(9)[None]
    inv_freq, factor = their_frequencies(config, float64=True)
    expected, _ = theirs(
        x, causal_4d(9, 9), position_embeddings=their_cos_sin(inv_freq, factor, positions)
    )
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    rotary = modeling_gpt_neox.GPTNeoXRotaryEmbedding(config)
    shipped, _ = theirs(x, causal_4d(9, 9), position_embeddings=rotary(x, positions))
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


@given(seed=st.integers(0, 2**16), num_tokens=st.integers(1, 12))
def test_default_arguments_keep_todays_modules_exactly(seed, num_tokens):
    """The same seed, the same weights, the same outputs bit for bit."""
    x = vectors(seed, 1, num_tokens, 32)
    plain = scaled_gqa(None, seed)
    explicit = scaled_gqa(
        {"rope_type": "default", "rope_theta": 10000.0}, seed, partial_rotary_factor=1.0
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        before = GroupedQueryAttention(
            32, 32, 64, num_heads=4, num_kv_heads=2, rotary=Rotary(8), out_bias=False
        )  # a plain Rotary
    before = before.to(F64).eval()
    assert list(plain.state_dict()) == list(before.state_dict())
    for name, tensor in before.state_dict().items():
        assert torch.equal(plain.state_dict()[name], tensor)
    assert torch.equal(plain(x), before(x)) and torch.equal(explicit(x), before(x))
    mla_kwargs = {
        "num_heads": 2,
        "kv_lora_rank": 4,
        "qk_nope_head_dim": 3,
        "qk_rope_head_dim": 4,
        "v_head_dim": 3,
    }
    mlas = []
    for scaling in (None, {"rope_type": "default"}):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            mlas.append(
                MultiHeadLatentAttention(
                    32,
                    32,
                    64,
                    **mla_kwargs,
                    rotary=Rotary(4, scaling=scaling, interleaved=True),
                ).to(F64)
            )
    assert mlas[0]._scale is None and torch.equal(mlas[0](x), mlas[1](x))
