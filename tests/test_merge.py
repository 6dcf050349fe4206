"""merge_attention_states and split_kv_attention: one merge, any partition of the keys.

Attention over disjoint parts of the keys, merged, equals attention over all of them,
in float64 to 1e-10, whatever the parts and their order; split-KV decoding equals SDPA
for any number of splits, including one that does not divide the keys.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import assert_tight
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from attention import merge_attention_states, split_kv_attention, tiled_attention

F64 = torch.float64


def randn(generator, *size):
    return torch.randn(*size, generator=generator, dtype=F64)


@given(
    num_keys=st.integers(1, 20),
    data=st.data(),
    seed=st.integers(0, 2**32 - 1),
)
def test_merging_any_partition_of_the_keys_gives_attention_over_all(num_keys, data, seed):
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (
        randn(generator, 2, 3, 4),
        randn(generator, 2, num_keys, 4),
        randn(generator, 2, num_keys, 5),
    )
    # Any partition: a random owner for every key, parts in a random order, none empty.
    owners = data.draw(st.lists(st.integers(0, 3), min_size=num_keys, max_size=num_keys))
    parts = [torch.tensor([i for i, o in enumerate(owners) if o == p]) for p in sorted(set(owners))]
    parts = data.draw(st.permutations(parts))
    outs, lses = zip(
        *(tiled_attention(q, k[:, idx], v[:, idx], return_lse=True) for idx in parts), strict=True
    )
    out, lse = merge_attention_states(list(outs), list(lses))
    expected, expected_lse = tiled_attention(q, k, v, return_lse=True)
    assert_tight(out, expected)
    assert_tight(lse, expected_lse)
    assert_tight(out, F.scaled_dot_product_attention(q, k, v))


def test_merging_is_associative_and_a_single_part_is_itself():
    generator = torch.Generator().manual_seed(0)
    q, k, v = randn(generator, 5, 3), randn(generator, 9, 3), randn(generator, 9, 2)
    a, b, c = (
        tiled_attention(q, k[s], v[s], return_lse=True)
        for s in (slice(0, 2), slice(2, 6), slice(6, 9))
    )
    ab = merge_attention_states([a[0], b[0]], [a[1], b[1]])
    left = merge_attention_states([ab[0], c[0]], [ab[1], c[1]])
    flat = merge_attention_states([a[0], b[0], c[0]], [a[1], b[1], c[1]])
    assert_tight(left[0], flat[0])
    assert_tight(left[1], flat[1])
    single = merge_attention_states([a[0]], [a[1]])
    assert_tight(single[0], a[0])


def test_a_part_that_saw_no_keys_gets_no_weight():
    generator = torch.Generator().manual_seed(1)
    out, lse = randn(generator, 4, 3), randn(generator, 4)
    empty_out, empty_lse = torch.zeros(4, 3, dtype=F64), torch.full((4,), float("-inf"), dtype=F64)
    merged = merge_attention_states([out, empty_out], [lse, empty_lse])
    assert_tight(merged[0], out)
    assert_tight(merged[1], lse)


def test_merging_survives_huge_log_sum_exps():
    generator = torch.Generator().manual_seed(2)
    q, k, v = randn(generator, 3, 4) * 300, randn(generator, 8, 4), randn(generator, 8, 2)
    halves = [tiled_attention(q, k[s], v[s], return_lse=True) for s in (slice(0, 4), slice(4, 8))]
    out, lse = merge_attention_states([h[0] for h in halves], [h[1] for h in halves])
    assert out.isfinite().all() and lse.isfinite().all()
    assert_tight(out, tiled_attention(q, k, v))


@given(
    num_keys=st.integers(1, 40),
    num_splits=st.integers(1, 40),
    group=st.integers(1, 3),
    num_queries=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_split_kv_attention_equals_sdpa_for_any_split_count(
    num_keys, num_splits, group, num_queries, seed
):
    num_splits = min(num_splits, num_keys)
    generator = torch.Generator().manual_seed(seed)
    q = randn(generator, 2, 2 * group, num_queries, 8)
    k, v = randn(generator, 2, 2, num_keys, 8), randn(generator, 2, 2, num_keys, 6)
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert_tight(split_kv_attention(q, k, v, num_splits=num_splits), expected)


@pytest.mark.parametrize("num_splits", [1, 3, 7, 16, 1000])
def test_split_kv_attention_on_a_long_cache(num_splits):
    generator = torch.Generator().manual_seed(num_splits)
    q, k, v = (
        randn(generator, 1, 4, 1, 16),
        randn(generator, 1, 4, 1000, 16),
        randn(generator, 1, 4, 1000, 16),
    )
    assert_tight(
        split_kv_attention(q, k, v, num_splits=num_splits), F.scaled_dot_product_attention(q, k, v)
    )


OUT, LSE = torch.zeros(2, 3), torch.zeros(2)
BAD_MERGE = {
    "a tensor, not a list": ({"outs": OUT}, TypeError, "outs must be a list or tuple"),
    "an element not a tensor": (
        {"lses": [1.0]},
        TypeError,
        "lses[0] must be a torch.Tensor",
    ),
    "no parts": ({"outs": [], "lses": []}, ValueError, "at least one of each, got 0 outputs"),
    "more outputs than lses": ({"outs": [OUT, OUT]}, ValueError, "got 2 outputs and 1 lses"),
    "lse of the wrong shape": ({"lses": [torch.zeros(3)]}, ValueError, "every lse of shape (2,)"),
    "outputs of two shapes": (
        {"outs": [OUT, torch.zeros(2, 4)], "lses": [LSE, LSE]},
        ValueError,
        "got outs[1] of shape (2, 4)",
    ),
    "mixed dtypes": ({"lses": [LSE.double()]}, ValueError, "of dtype torch.float32"),
    "integer outputs": ({"outs": [OUT.long()]}, ValueError, "expected floating-point outputs"),
}


@pytest.mark.parametrize(("bad", "error", "match"), list(BAD_MERGE.values()), ids=list(BAD_MERGE))
def test_merge_attention_states_rejects_bad_arguments(bad, error, match):
    arguments = {"outs": [OUT], "lses": [LSE], **bad}
    with pytest.raises(error, match="^merge_attention_states: .*" + re.escape(match)):
        merge_attention_states(**arguments)


Q, K = torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 5, 4)
BAD_SPLIT = {
    "too many splits": ({"num_splits": 6}, ValueError, "num_splits of at most num_keys=5"),
    "no splits": ({"num_splits": 0}, ValueError, "num_splits must be at least 1"),
    "a float": ({"num_splits": 2.5}, TypeError, "num_splits must be a positive integer"),
    "k not a tensor": ({"k": "keys"}, TypeError, "k must be a torch.Tensor, got str"),
    "k and v differ": ({"v": torch.zeros(1, 2, 4, 4)}, ValueError, "one value per key"),
}


@pytest.mark.parametrize(("bad", "error", "match"), list(BAD_SPLIT.values()), ids=list(BAD_SPLIT))
def test_split_kv_attention_rejects_bad_arguments(bad, error, match):
    arguments = {"q": Q, "k": K, "v": K, "num_splits": 2, **bad}
    with pytest.raises(error, match="^split_kv_attention: .*" + re.escape(match)):
        split_kv_attention(**arguments)
