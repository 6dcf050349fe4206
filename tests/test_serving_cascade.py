"""Cascade attention: attention.serving.cascade.

Requests that share a prefix, read once for all of them and merged with each one's own
suffix, get what full attention over prefix and suffix gives each request (float64,
1e-10): drawn numbers of requests, prefix and suffix lengths (an empty prefix, a
suffix of new tokens only), new tokens per request, grouped heads and value sizes.
The prefix is read in exactly one call, with every request's queries; bad input is
refused with what was expected and given.
"""

from __future__ import annotations

import pytest
import torch
from helpers import assert_tight, expect
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from attention import attend
from attention.serving import cascade, cascade_attention

pytestmark = pytest.mark.usefixtures("single_thread")
F64 = torch.float64


def full_attention(q, prefix_k, prefix_v, k, v):
    """Request's attention over prefix + suffix, its new tokens the suffix's last, causal."""
    keys, values = torch.cat((prefix_k, k), 1), torch.cat((prefix_v, v), 1)
    num_new, num_keys = q.shape[1], keys.shape[1]
    # Query i is the key at num_keys - num_new + i: it sees every key up to that one.
    allowed = torch.arange(num_keys) <= (num_keys - num_new + torch.arange(num_new))[:, None]
    return attend(q[None], keys[None], values[None], allowed=allowed)[0]


@st.composite
def requests(draw: st.DrawFn) -> dict:
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    kv_heads, group = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    head_dim, value_dim = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    num_prefix, count = draw(st.integers(0, 10)), draw(st.integers(1, 4))

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=F64)

    news = [draw(st.integers(1, 4)) for _ in range(count)]
    suffixes = [n + draw(st.integers(0, 5)) for n in news]
    return {
        "queries": [randn(kv_heads * group, n, head_dim) for n in news],
        "prefix_keys": randn(kv_heads, num_prefix, head_dim),
        "prefix_values": randn(kv_heads, num_prefix, value_dim),
        "suffix_keys": [randn(kv_heads, s, head_dim) for s in suffixes],
        "suffix_values": [randn(kv_heads, s, value_dim) for s in suffixes],
    }


@given(requests())
def test_cascade_equals_full_attention_over_prefix_and_suffix_for_every_request(batch):
    outs = cascade_attention(**batch)
    assert len(outs) == len(batch["queries"])
    prefix = batch["prefix_keys"], batch["prefix_values"]
    for q, k, v, out in zip(
        batch["queries"], batch["suffix_keys"], batch["suffix_values"], outs, strict=True
    ):
        assert_tight(out, full_attention(q, *prefix, k, v))


def test_one_new_token_each_is_plain_attention_over_all_its_keys():
    generator = torch.Generator().manual_seed(0)
    prefix_k, prefix_v = (torch.randn(2, 7, 4, generator=generator, dtype=F64) for _ in "kv")
    suffix_k = [torch.randn(2, n, 4, generator=generator, dtype=F64) for n in (1, 3)]
    suffix_v = [torch.randn(2, n, 4, generator=generator, dtype=F64) for n in (1, 3)]
    queries = [torch.randn(6, 1, 4, generator=generator, dtype=F64) for _ in range(2)]
    outs = cascade_attention(queries, prefix_k, prefix_v, suffix_k, suffix_v)
    for q, k, v, out in zip(queries, suffix_k, suffix_v, outs, strict=True):
        keys, values = torch.cat((prefix_k, k), 1), torch.cat((prefix_v, v), 1)
        assert_tight(out, F.scaled_dot_product_attention(q, keys, values, enable_gqa=True))


def test_the_prefix_is_read_in_one_call_by_every_request_together(monkeypatch):
    calls = []

    def counted(q, k, v, **kwargs):
        calls.append((q.shape[1], k.shape[1]))
        return torch_tiled(q, k, v, **kwargs)

    torch_tiled = cascade.tiled_attention
    monkeypatch.setattr(cascade, "tiled_attention", counted)
    generator = torch.Generator().manual_seed(1)
    news, suffixes = (1, 2, 3), (1, 4, 3)
    queries = [torch.randn(2, n, 4, generator=generator, dtype=F64) for n in news]
    suffix_k = [torch.randn(2, s, 4, generator=generator, dtype=F64) for s in suffixes]
    prefix = torch.randn(2, 9, 4, generator=generator, dtype=F64)
    cascade_attention(queries, prefix, prefix, suffix_k, suffix_k)
    reads_of_the_prefix = [call for call in calls if call[1] == 9]
    assert reads_of_the_prefix == [(sum(news), 9)]  # one call, all six new tokens
    assert len(calls) == 1 + 3 + 1  # the prefix; each new block; request 1's earlier tokens


def test_cascade_refuses_what_does_not_fit():
    q, k = torch.zeros(4, 2, 3), torch.zeros(2, 5, 3)
    with expect(
        "cascade_attention: queries must be a list of tensors, one per request, got Tensor",
        TypeError,
    ):
        cascade_attention(q, k, k, [k], [k])
    with expect("cascade_attention: expected at least one request, with as many suffix_keys"):
        cascade_attention([q], k, k, [k, k], [k])
    with expect("cascade_attention: expected at least one request"):
        cascade_attention([], k, k, [], [])
    with expect(
        "cascade_attention: expected request 0's queries of shape (num_heads, num_new, head_dim)"
    ):
        cascade_attention([torch.zeros(4, 6, 3)], k, k, [k], [k])  # more new tokens than suffix
    with expect(
        "cascade_attention: expected num_kv_heads dividing num_heads, got 2 key/value heads and 3"
    ):
        cascade_attention([torch.zeros(3, 2, 3)], k, k, [k], [k])
    with expect("cascade_attention: expected every tensor of one dtype and device"):
        cascade_attention([q.double()], k, k, [k], [k])
    with expect(
        "cascade_attention: expected prefix_values of shape (num_kv_heads, num_prefix, value_dim)"
    ):
        cascade_attention([q], k, torch.zeros(2, 4, 3), [k], [k])
    with expect("cascade_attention: suffix_keys[0] must have shape (heads, num_tokens, dim)"):
        cascade_attention([q], k, k, [k[None]], [k])
    with expect("cascade_attention: prefix_keys must be a torch.Tensor, got list", TypeError):
        cascade_attention([q], [k], k, [k], [k])
