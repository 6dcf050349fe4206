"""tiled_attention: the online softmax, block by block, equals the fused kernel.

Compared in float64 with ``scaled_dot_product_attention`` over hypothesis-drawn
problems and the corner cases of block sizes, with grouped heads, and its log-sum-exp;
bad arguments raise ``TypeError`` or ``ValueError``.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import assert_tight
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from attention import scaled_dot_product_weights
from attention.tiled import tiled_attention


@st.composite
def tiled_problems(draw: st.DrawFn) -> dict:
    """Random float64 queries, keys and values, a block size and a causal flag.

    Token counts run to 20 and block sizes to 24, so the draws include block sizes of
    1, sizes that do not divide the token count, and sizes at or above it.
    """
    causal = draw(st.booleans())
    leading = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))  # e.g. (batch, heads)
    num_queries = draw(st.integers(1, 20))
    num_keys = num_queries if causal else draw(st.integers(1, 20))
    head_dim, value_dim = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1)))

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(*leading, *size, generator=generator, dtype=torch.float64)

    return {
        "q": randn(num_queries, head_dim),
        "k": randn(num_keys, head_dim),
        "v": randn(num_keys, value_dim),
        "block_size": draw(st.integers(1, 24)),
        "causal": causal,
    }


def assert_tiled_equals_sdpa(problem: dict) -> None:
    q, k, v = problem["q"], problem["k"], problem["v"]
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=problem["causal"])
    assert_tight(tiled_attention(**problem), expected)


@given(problem=tiled_problems())
def test_tiled_attention_equals_scaled_dot_product_attention(problem):
    assert_tiled_equals_sdpa(problem)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize(
    ("num_tokens", "block_size"),
    [
        (1, 1),  # one token
        (1, 64),  # one token, a block far larger
        (7, 1),  # one token per block: the online softmax at its most incremental
        (10, 4),  # 10 tokens are not a whole number of blocks of 4
        (8, 8),  # one block exactly
        (5, 64),  # block_size above num_tokens: a single, partial block
        (130, 64),  # the default block size, with a last block of 2 tokens
    ],
)
def test_tiled_attention_edge_cases(num_tokens, block_size, causal):
    generator = torch.Generator().manual_seed(num_tokens * 100 + block_size)
    q, k, v = (
        torch.randn(2, 3, num_tokens, 4, generator=generator, dtype=torch.float64) for _ in range(3)
    )
    assert_tiled_equals_sdpa({"q": q, "k": k, "v": v, "block_size": block_size, "causal": causal})


def test_tiled_attention_equals_the_book_weights_and_survives_huge_scores():
    # The book's masked softmax, then the weighted sum: the naive computation. Scores
    # of several hundred would overflow a softmax without the running maximum.
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 9, 5, generator=generator, dtype=torch.float64) for _ in range(3))
    q = q * 100
    future = torch.ones(9, 9, dtype=torch.bool).triu(1)
    naive = scaled_dot_product_weights(q, k, allowed=~future) @ v
    tiled = tiled_attention(q, k, v, causal=True, block_size=2)
    assert tiled.isfinite().all()
    assert_tight(tiled, naive)


def test_tiled_attention_keeps_dtype_shape_and_gradients():
    q, k, v = (torch.randn(3, 6, 2, requires_grad=True) for _ in range(3))
    out = tiled_attention(q, k, v, causal=True, block_size=4)
    assert out.dtype == torch.float32 and out.shape == (3, 6, 2)
    out.sum().backward()
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, expected)
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    expected.sum().backward()
    for grad, t in zip(grads, (q, k, v), strict=True):
        torch.testing.assert_close(grad, t.grad)


GOOD = {"q": torch.rand(2, 4, 3), "k": torch.rand(2, 4, 3), "v": torch.rand(2, 4, 5)}

BAD_TILED = {
    "a list": ({"q": [[0.1, 0.2]]}, TypeError, "q must be a torch.Tensor, got list"),
    "integers": (
        {"k": torch.ones(2, 4, 3, dtype=torch.int64)},
        ValueError,
        "k must be a floating-point tensor",
    ),
    "1-D": ({"v": torch.rand(5)}, ValueError, "v must have shape (..., num_tokens, features)"),
    "mixed dtypes": (
        {"k": torch.rand(2, 4, 3, dtype=torch.float64)},
        ValueError,
        "of one dtype and device",
    ),
    "other leading dims": ({"k": torch.rand(3, 4, 3)}, ValueError, "the same leading"),
    "heads that do not divide": (
        {"q": torch.rand(1, 3, 4, 3), "k": torch.rand(1, 2, 4, 3), "v": torch.rand(1, 2, 4, 5)},
        ValueError,
        "a whole multiple of k's heads",
    ),
    "head_dim mismatch": ({"k": torch.rand(2, 4, 2)}, ValueError, "the same number of features"),
    "keys and values": ({"v": torch.rand(2, 3, 5)}, ValueError, "one value per key"),
    "no tokens": (
        {"q": torch.rand(2, 0, 3), "k": torch.rand(2, 0, 3), "v": torch.rand(2, 0, 5)},
        ValueError,
        "expected at least one query and one key",
    ),
    "causal, fewer queries": (
        {"q": torch.rand(2, 3, 3), "causal": True},
        ValueError,
        "as many queries as keys",
    ),
    "causal not a bool": ({"causal": 1}, TypeError, "causal must be True or False"),
    "return_lse not a bool": ({"return_lse": "yes"}, TypeError, "return_lse must be True"),
    "block_size zero": ({"block_size": 0}, ValueError, "block_size must be at least 1"),
    "block_size a float": ({"block_size": 2.0}, TypeError, "block_size must be a positive"),
}


@pytest.mark.parametrize(("bad", "error", "match"), list(BAD_TILED.values()), ids=list(BAD_TILED))
def test_tiled_attention_rejects_bad_arguments(bad, error, match):
    with pytest.raises(error, match="^tiled_attention: .*" + re.escape(match)):
        tiled_attention(**{**GOOD, **bad})


def test_tiled_attention_takes_causal_and_block_size_by_keyword_only():
    with pytest.raises(TypeError):
        tiled_attention(GOOD["q"], GOOD["k"], GOOD["v"], 2)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_tiled_attention_returns_the_log_sum_exp_of_each_query(causal):
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 11, 4, generator=generator, dtype=torch.float64) for _ in range(3))
    out, lse = tiled_attention(q, k, v, causal=causal, block_size=3, return_lse=True)
    scores = q @ k.transpose(-2, -1) / 2.0  # sqrt(head_dim) = 2
    if causal:
        scores = scores.masked_fill(torch.ones(11, 11, dtype=torch.bool).triu(1), float("-inf"))
    assert lse.shape == (2, 11)
    assert_tight(lse, scores.logsumexp(dim=-1))
    assert_tight(out, tiled_attention(q, k, v, causal=causal, block_size=3))


@given(
    kv_heads=st.integers(1, 3),
    group=st.integers(1, 3),
    num_tokens=st.integers(1, 12),
    block_size=st.integers(1, 14),
    causal=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_tiled_attention_with_grouped_heads_equals_sdpa_with_enable_gqa(
    kv_heads, group, num_tokens, block_size, causal, seed
):
    generator = torch.Generator().manual_seed(seed)

    def randn(heads: int) -> torch.Tensor:
        return torch.randn(2, heads, num_tokens, 4, generator=generator, dtype=torch.float64)

    q, k, v = randn(kv_heads * group), randn(kv_heads), randn(kv_heads)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert_tight(tiled_attention(q, k, v, causal=causal, block_size=block_size), expected)


def test_tiled_attention_allows_other_query_counts_without_the_mask():
    out = tiled_attention(**{**GOOD, "q": torch.rand(2, 3, 3)}, block_size=2, causal=False)
    assert out.shape == (2, 3, 5)


def test_tiled_attention_is_still_importable_from_efficient():
    # Chapter 7 imported it from attention.efficient before it had a module of its own.
    from attention import efficient

    assert efficient.tiled_attention is tiled_attention
    assert "tiled_attention" in efficient.__all__
