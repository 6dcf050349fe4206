"""attend: the one attention step that the fast variants, GQA and MLA call.

Both implementations compute the formula, with a bias and dropout; ``softcap`` and
``sinks`` (Gemma 2's and gpt-oss's eager kernels) against those kernels written out, at
their limits (a cap of 1e9, sinks of -inf) and with a fully masked query; the errors.

Tolerance (float64): ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12).
"""

from __future__ import annotations

import pytest
import torch
from helpers import F64, expect, make
from hf_models import EXACT
from hypothesis import given
from hypothesis import strategies as st

import attention.efficient
import attention.gqa
import attention.latent
from attention import (
    GroupedQueryAttention,
    MultiHeadAttention,
    MultiHeadLatentAttention,
    attend,
    causal_mask,
)
from attention.efficient import FastMultiHeadAttention, FusedQKVAttention, SDPAttention
from attention.step import _attend

pytestmark = pytest.mark.usefixtures("single_thread")


def reference(q, k, v, allowed=None, scale=None):
    """The formula, written out: heads repeated, masked scores, softmax, weighted sum."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


@given(
    num_kv_heads=st.integers(1, 3),
    group=st.integers(1, 3),
    num_queries=st.integers(1, 4),
    extra_keys=st.integers(0, 3),
    how=st.sampled_from(["none", "causal", "allowed"]),
    scale=st.none() | st.floats(0.1, 2.0),
    implementation=st.sampled_from(["sdpa", "eager"]),
    seed=st.integers(0, 2**16),
)
def test_both_implementations_compute_the_formula(
    num_kv_heads, group, num_queries, extra_keys, how, scale, implementation, seed
):
    generator = torch.Generator().manual_seed(seed)
    num_keys = num_queries + (0 if how == "causal" else extra_keys)
    q = torch.randn(2, num_kv_heads * group, num_queries, 4, generator=generator, dtype=F64)
    k = torch.randn(2, num_kv_heads, num_keys, 4, generator=generator, dtype=F64)
    v = torch.randn(2, num_kv_heads, num_keys, 3, generator=generator, dtype=F64)
    allowed = {
        "none": None,
        "causal": causal_mask(num_queries),
        "allowed": causal_mask(num_queries, num_keys, window=2),
    }[how]
    got = attend(
        q,
        k,
        v,
        allowed=allowed if how == "allowed" else None,
        causal=how == "causal",
        scale=scale,
        implementation=implementation,
    )
    torch.testing.assert_close(got, reference(q, k, v, allowed, scale), **EXACT)


@given(
    num_kv_heads=st.integers(1, 3),
    group=st.integers(1, 3),
    num_queries=st.integers(1, 4),
    extra_keys=st.integers(0, 3),
    shape=st.sampled_from(["scores", "heads", "per batch", "per key"]),
    causal=st.booleans(),
    implementation=st.sampled_from(["sdpa", "eager"]),
    seed=st.integers(0, 2**16),
)
def test_a_bias_is_added_to_the_scaled_scores_before_the_mask(
    num_kv_heads, group, num_queries, extra_keys, shape, causal, implementation, seed
):
    """Any shape that broadcasts to the scores: (heads, queries, keys) as ALiBi and T5
    give it, one per sequence of the batch, or one number per key."""
    generator = torch.Generator().manual_seed(seed)
    num_heads, num_keys = num_kv_heads * group, num_queries + extra_keys
    q = torch.randn(2, num_heads, num_queries, 4, generator=generator, dtype=F64)
    k = torch.randn(2, num_kv_heads, num_keys, 4, generator=generator, dtype=F64)
    v = torch.randn(2, num_kv_heads, num_keys, 3, generator=generator, dtype=F64)
    size = {
        "scores": (2, num_heads, num_queries, num_keys),
        "heads": (num_heads, num_queries, num_keys),
        "per batch": (2, 1, 1, num_keys),
        "per key": (num_keys,),
    }[shape]
    bias = torch.randn(size, generator=generator, dtype=F64)
    allowed = causal_mask(num_queries, num_keys) if causal else None
    got = attend(q, k, v, allowed=allowed, bias=bias, implementation=implementation)
    group_k, group_v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    scores = q @ group_k.transpose(-2, -1) / 2 + bias  # head_dim 4: scale 1/2
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    torch.testing.assert_close(got, torch.softmax(scores, dim=-1) @ group_v, **EXACT)


def test_eager_dropout_draws_what_the_books_dropout_layer_draws():
    """The eager implementation drops weights as nn.Dropout does, from the same seed."""
    q, k, v = torch.randn(3, 1, 2, 5, 4, dtype=F64).unbind(0)
    weights = torch.softmax((q @ k.transpose(-2, -1)) / 2, dim=-1)
    torch.manual_seed(7)
    expected = torch.nn.Dropout(0.4)(weights) @ v
    torch.manual_seed(7)
    got = attend(q, k, v, dropout=0.4, implementation="eager")
    torch.testing.assert_close(got, expected, **EXACT)
    assert not torch.allclose(got, attend(q, k, v, implementation="eager"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"causal": True, "allowed": torch.ones(3, 3, dtype=torch.bool)}, r"not both"),
        ({"implementation": "flash"}, r"one of \('sdpa', 'eager'\), got 'flash'"),
        ({"scale": 0.0}, r"scale must be a positive number or None, got 0.0"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\)"),
        (
            {"allowed": torch.ones(3, 3)},
            r"allowed must be a bool tensor.*got a tensor of dtype torch.float32",
        ),
        (
            {"bias": torch.zeros(2, 3, 4)},
            r"bias must be None or a tensor of q's dtype torch.float32 that broadcasts to the "
            r"scores, \(batch, num_heads, num_queries, num_keys\) = \(1, 2, 3, 3\), got shape "
            r"\(2, 3, 4\) and dtype torch.float32",
        ),
        ({"bias": torch.zeros(3, 3, dtype=torch.float64)}, r"bias must be.*dtype torch.float64"),
    ],
)
def test_bad_values_name_what_was_expected_and_given(kwargs, message):
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(ValueError, match=r"^attend: .*" + message):
        attend(q, q, q, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"causal": 1}, r"causal must be True or False.*got 1 of type int"),
        ({"scale": "1"}, r"scale must be a positive number or None, got '1' of type str"),
        ({"dropout": None}, r"dropout must be a number in \[0, 1\), got None"),
        ({"allowed": [[True]]}, r"allowed must be a bool tensor.*got list"),
        ({"bias": 0.5}, r"bias must be None or a tensor of q's dtype.*got float"),
    ],
)
def test_bad_types_raise_a_type_error_naming_what_was_expected(kwargs, message):
    q = torch.randn(1, 2, 3, 4)
    with pytest.raises(TypeError, match=r"^attend: .*" + message):
        attend(q, q, q, **kwargs)
    with pytest.raises(TypeError, match=r"^attend: q must be a torch.Tensor, got list"):
        attend([[0.0]], q, q)


def test_causal_needs_as_many_queries_as_keys_and_says_what_to_pass_instead():
    q, k = torch.randn(1, 2, 2, 4), torch.randn(1, 2, 5, 4)
    with pytest.raises(ValueError, match=r"2 queries and 5 keys.*allowed=causal_mask"):
        attend(q, k, k, causal=True)
    with pytest.raises(ValueError, match=r"num_kv_heads dividing num_heads.*\(1, 3, 5, 4\)"):
        attend(q, torch.randn(1, 3, 5, 4), torch.randn(1, 3, 5, 4))


def _counting(monkeypatch) -> list[str]:
    """Record each call of _attend from the modules, with its implementation."""
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs.get("implementation", "sdpa"))
        return _attend(*args, **kwargs)

    for module in (attention.gqa, attention.latent, attention.efficient):
        monkeypatch.setattr(module, "_attend", counted)
    return calls


@pytest.mark.parametrize(
    ("build", "implementation"),
    [
        (lambda: make(GroupedQueryAttention), "sdpa"),
        (lambda: make(MultiHeadLatentAttention), "sdpa"),
        (lambda: FastMultiHeadAttention(4, 4, 4, 0.0, 2), "sdpa"),
        (lambda: SDPAttention.from_module(MultiHeadAttention(4, 4, 4, 0.0, 2)), "sdpa"),
        (lambda: FusedQKVAttention(4, 4, 4, 0.0, 2), "eager"),
    ],
    ids=["GroupedQueryAttention", "MultiHeadLatentAttention", "Fast", "SDPA", "FusedQKV"],
)
def test_every_module_attends_through_the_one_step(monkeypatch, build, implementation):
    module = build()
    calls = _counting(monkeypatch)
    module(torch.randn(2, 3, module.d_in))
    assert calls == [implementation]


# --- softcap and sinks: Gemma 2's and gpt-oss's eager kernels -----------------------------


def attend_inputs(seed: int, num_heads: int = 4, num_kv_heads: int = 2, n: int = 5):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, num_heads, n, 8, generator=generator, dtype=F64)
    k, v = (torch.randn(2, num_kv_heads, n, 8, generator=generator, dtype=F64) for _ in "kv")
    return q, k, v


def written_out(q, k, v, allowed=None, scale=None, softcap=None, sinks=None):
    """Gemma 2's and gpt-oss's eager kernels, written out: scale, cap, mask, sink, softmax."""
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    scores = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    if sinks is not None:
        column = sinks[None, :, None, None].expand(*scores.shape[:-1], 1)
        weights = torch.softmax(torch.cat((scores, column), dim=-1), dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1)
    return weights @ v


@given(
    seed=st.integers(0, 2**16),
    softcap=st.one_of(st.none(), st.floats(0.01, 50.0)),
    with_sinks=st.booleans(),
    causal=st.booleans(),
    implementation=st.sampled_from(["sdpa", "eager"]),
)
def test_attend_caps_and_sinks_as_written_out(seed, softcap, with_sinks, causal, implementation):
    q, k, v = attend_inputs(seed)
    sinks = torch.randn(4, generator=torch.Generator().manual_seed(seed), dtype=F64)
    sinks = sinks if with_sinks else None
    allowed = torch.ones(5, 5, dtype=torch.bool).tril() if causal else None
    ours = attend(
        q, k, v, causal=causal, softcap=softcap, sinks=sinks, implementation=implementation
    )
    expected = written_out(q, k, v, allowed, softcap=softcap, sinks=sinks)
    torch.testing.assert_close(ours, expected, **EXACT)


def test_attend_runs_sdpa_without_cap_or_sinks_and_the_eager_way_with_them(monkeypatch):
    """SDPA cannot cap scores or add a sink: with either, the eager way runs."""
    calls = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    q, k, v = attend_inputs(0)
    attend(q, k, v, causal=True)
    assert len(calls) == 1
    attend(q, k, v, causal=True, softcap=30.0)
    attend(q, k, v, causal=True, sinks=torch.zeros(4, dtype=F64))
    assert len(calls) == 1


@given(seed=st.integers(0, 2**16), causal=st.booleans())
def test_attend_with_an_enormous_softcap_is_uncapped(seed, causal):
    q, k, v = attend_inputs(seed)
    uncapped = attend(q, k, v, causal=causal, implementation="eager")
    torch.testing.assert_close(attend(q, k, v, causal=causal, softcap=1e9), uncapped, **EXACT)


@given(seed=st.integers(0, 2**16), causal=st.booleans())
def test_attend_with_sinks_of_minus_infinity_has_no_sink(seed, causal):
    q, k, v = attend_inputs(seed)
    no_sink = attend(q, k, v, causal=causal, implementation="eager")
    sinks = torch.full((4,), float("-inf"), dtype=F64)
    torch.testing.assert_close(attend(q, k, v, causal=causal, sinks=sinks), no_sink, **EXACT)


def test_attend_sink_takes_its_share_and_a_fully_masked_query_gets_zeros():
    """A sink of log(3) next to one key of score 0: the key keeps 1 / (1 + 3) of the weight."""
    q = torch.zeros(1, 1, 2, 4, dtype=F64)
    k, v = torch.zeros(1, 1, 2, 4, dtype=F64), torch.ones(1, 1, 2, 4, dtype=F64)
    allowed = torch.tensor([[True, False], [False, False]])  # query 1 sees nothing
    sinks = torch.tensor([3.0], dtype=F64).log()
    out = attend(q, k, v, allowed=allowed, sinks=sinks)
    torch.testing.assert_close(out[0, 0, 0], torch.full((4,), 0.25, dtype=F64), **EXACT)
    assert torch.equal(out[0, 0, 1], torch.zeros(4, dtype=F64))


BAD_ATTEND = [
    pytest.param(
        {"softcap": 0}, "attend: softcap must be a positive, finite number", ValueError, id="0"
    ),
    pytest.param(
        {"softcap": -1.0}, "attend: softcap must be a positive, finite", ValueError, id="neg"
    ),
    pytest.param(
        {"softcap": float("inf")},
        "attend: softcap must be a positive, finite",
        ValueError,
        id="inf",
    ),
    pytest.param(
        {"softcap": True}, "attend: softcap must be a positive number", TypeError, id="bool"
    ),
    pytest.param(
        {"softcap": "30"}, "attend: softcap must be a positive number", TypeError, id="str"
    ),
    pytest.param(
        {"sinks": torch.zeros(2, dtype=F64)},
        "attend: sinks must be None or a tensor of shape (num_heads,) = (4,)",
        ValueError,
        id="shape",
    ),
    pytest.param(
        {"sinks": torch.zeros(4)},
        "attend: sinks must be None or a tensor of shape (num_heads,) = (4,) and of "
        "q's dtype torch.float64, got shape (4,) and dtype torch.float32",
        ValueError,
        id="dtype",
    ),
    pytest.param(
        {"sinks": [0.0] * 4}, "attend: sinks must be None or a tensor", TypeError, id="list"
    ),
]


@pytest.mark.parametrize(("kwargs", "message", "error"), BAD_ATTEND)
def test_attend_rejects_bad_softcap_and_sinks(kwargs, message, error):
    q, k, v = attend_inputs(0)
    with expect(message, error):
        attend(q, k, v, **kwargs)
