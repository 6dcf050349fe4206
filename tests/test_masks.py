"""causal_mask, sliding_window_mask (causal and both ways), chunked_mask (Llama 4's
chunked attention) and padding_mask against transformers and PyTorch.

Masks are booleans, compared for equality; attention outputs with EXACT (rtol 1e-10,
atol 1e-12) in float64.
"""

from __future__ import annotations

import pytest
import torch
from hf_models import EXACT
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F
from torch.nn.attention.bias import causal_lower_right
from transformers import Llama4TextConfig, MistralConfig, ModernBertConfig
from transformers.masking_utils import (
    causal_mask_function,
    chunked_causal_mask_function,
    create_bidirectional_sliding_window_mask,
    create_chunked_causal_mask,
    create_sliding_window_causal_mask,
    padding_mask_function,
    sliding_window_bidirectional_mask_function,
    sliding_window_causal_mask_function,
)

from attention import causal_mask, chunked_mask, padding_mask, sliding_window_mask

pytestmark = pytest.mark.usefixtures("single_thread")


def grid(mask_function, num_queries: int, num_keys: int, offset: int = 0) -> torch.Tensor:
    """Evaluate one of transformers' index-based mask functions on every (query, key) pair."""
    q = torch.arange(offset, offset + num_queries)[:, None]
    return mask_function(0, 0, q, torch.arange(num_keys)[None, :])


@given(num_tokens=st.integers(1, 12), window=st.integers(1, 14))
def test_sliding_window_is_transformers_sliding_window_causal_mask(num_tokens, window):
    expected = grid(sliding_window_causal_mask_function(window), num_tokens, num_tokens)
    mask = sliding_window_mask(num_tokens, window)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)


def paper_window_mask(num_tokens: int, window: int) -> torch.Tensor:
    """The Mistral paper's window: query i sees positions i - window ... i.

    Built as the original reference code builds it (mistralai/mistral-src,
    one_file_ref.py): a causal triangle, then ``triu`` with ``diagonal=-window``.
    """
    return torch.ones(num_tokens, num_tokens).tril().triu(diagonal=-window).bool()


@given(num_tokens=st.integers(1, 12), window=st.integers(1, 14))
def test_the_papers_window_w_is_the_packages_and_transformers_w_plus_one(num_tokens, window):
    """The paper's window W sees W + 1 tokens; the package and transformers see W.

    transformers' side is the mask MistralModel builds from a config with
    ``sliding_window=window``, so the comparison holds for the released model's field.
    """
    paper = paper_window_mask(num_tokens, window)
    assert torch.equal(paper, sliding_window_mask(num_tokens, window + 1))
    if window < num_tokens:  # otherwise both conventions cover the whole triangle
        assert not torch.equal(paper, sliding_window_mask(num_tokens, window))
    config = MistralConfig(sliding_window=window, attn_implementation="sdpa")
    embeddings = torch.zeros(1, num_tokens, 1)  # only its batch, length and device count
    from_config = create_sliding_window_causal_mask(
        config, embeddings, None, None, allow_is_causal_skip=False
    )
    assert torch.equal(from_config[0, 0], sliding_window_mask(num_tokens, window))


@given(num_tokens=st.integers(1, 10), window=st.integers(1, 10))
def test_each_query_sees_min_of_window_and_position_plus_one_keys(num_tokens, window):
    counts = sliding_window_mask(num_tokens, window).sum(dim=-1)
    assert counts.tolist() == [min(window, i + 1) for i in range(num_tokens)]


def test_window_at_least_num_tokens_is_causal():
    assert torch.equal(sliding_window_mask(5, 5), causal_mask(5))
    assert torch.equal(sliding_window_mask(5, 99), torch.ones(5, 5, dtype=torch.bool).tril())


@given(num_tokens=st.integers(1, 12), window=st.integers(1, 14))
def test_a_bidirectional_window_is_transformers_with_one_more(num_tokens, window):
    """transformers' bidirectional window counts the positions on each side without the
    query (|i - j| <= sliding_window); the package's counts it, as its causal one does.
    The causal mask or'ed with its transpose."""
    mask = sliding_window_mask(num_tokens, window, causal=False)
    expected = grid(sliding_window_bidirectional_mask_function(window - 1), num_tokens, num_tokens)
    assert mask.dtype == torch.bool and torch.equal(mask, expected)
    causal = sliding_window_mask(num_tokens, window)
    assert torch.equal(mask, causal | causal.T)
    assert mask.sum(-1).tolist() == [
        min(i, window - 1) + 1 + min(num_tokens - 1 - i, window - 1) for i in range(num_tokens)
    ]


@given(num_tokens=st.integers(1, 12), half=st.integers(1, 6))
def test_modernbert_local_attention_is_a_bidirectional_window_of_half_plus_one(num_tokens, half):
    """The mask ModernBertModel builds for its local layers from ``local_attention``
    (``2 * half`` as released: 128), against ``window = local_attention // 2 + 1``."""
    config = ModernBertConfig(local_attention=2 * half, attn_implementation="sdpa")
    embeddings = torch.zeros(1, num_tokens, 1)
    from_config = create_bidirectional_sliding_window_mask(
        config, embeddings, None, allow_is_bidirectional_skip=False
    )
    assert torch.equal(from_config[0, 0], sliding_window_mask(num_tokens, half + 1, causal=False))


@given(num_queries=st.integers(1, 6), extra=st.integers(0, 6))
def test_causal_mask_is_bottom_right_aligned_like_causal_lower_right(num_queries, extra):
    num_keys = num_queries + extra
    expected = grid(causal_mask_function, num_queries, num_keys, offset=extra)
    assert torch.equal(causal_mask(num_queries, num_keys), expected)
    q = torch.randn(1, 2, num_queries, 4, dtype=torch.float64)
    k, v = torch.randn(2, 1, 2, num_keys, 4, dtype=torch.float64)
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(num_queries, num_keys))
    theirs = F.scaled_dot_product_attention(
        q, k, v, attn_mask=causal_lower_right(num_queries, num_keys)
    )
    torch.testing.assert_close(ours, theirs, **EXACT)


def test_is_causal_aligns_top_left_so_a_decoding_query_would_see_only_the_first_key():
    """The trap: with one query and 5 keys, is_causal=True keeps only key 0."""
    q = torch.randn(1, 1, 1, 4, dtype=torch.float64)
    k, v = torch.randn(2, 1, 1, 5, 4, dtype=torch.float64)
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(top_left, v[:, :, :1], **EXACT)
    right = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(1, 5))
    torch.testing.assert_close(right, F.scaled_dot_product_attention(q, k, v), **EXACT)


@given(lengths=st.lists(st.integers(1, 7), min_size=1, max_size=4), pad=st.integers(0, 3))
def test_padding_mask_is_transformers_padding_mask(lengths, pad):
    num_tokens = max(lengths) + pad
    mask = padding_mask(lengths, num_tokens)
    assert mask.shape == (len(lengths), num_tokens)
    assert mask.sum(dim=-1).tolist() == lengths
    attention_mask = torch.tensor([[1] * n + [0] * (num_tokens - n) for n in lengths]).bool()
    keys = torch.arange(num_tokens)
    for b in range(len(lengths)):
        assert torch.equal(mask[b], padding_mask_function(attention_mask)(b, 0, 0, keys))


def test_padding_then_causal_gives_each_sentence_what_it_gets_alone():
    """Padded batch attention == each sentence alone, on its real tokens."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(3, 2, 2, 5, 4, generator=generator, dtype=torch.float64)
    lengths = [5, 3]
    combined = causal_mask(5) & padding_mask(lengths, 5)[:, None, None, :]  # (2, 1, 5, 5)
    batched = F.scaled_dot_product_attention(q, k, v, attn_mask=combined)
    for b, n in enumerate(lengths):
        alone = F.scaled_dot_product_attention(
            q[b, :, :n], k[b, :, :n], v[b, :, :n], is_causal=True
        )
        torch.testing.assert_close(batched[b, :, :n], alone, **EXACT)


def test_padding_mask_accepts_a_tensor_of_lengths():
    mask = padding_mask(torch.tensor([2, 1]), 3)
    assert mask.tolist() == [[True, True, False], [True, False, False]]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sliding_window_mask(4, 0), r"sliding_window_mask: window must be .*got window=0"),
        (lambda: sliding_window_mask(4, -2), r"got window=-2"),
        (lambda: sliding_window_mask(0, 2), r"num_tokens must be at least 1, got 0"),
        (lambda: causal_mask(3, 2), r"num_queries=3 and num_keys=2"),
        (lambda: causal_mask(2, window=0), r"causal_mask: window must be .*got window=0"),
        (lambda: padding_mask([2, 5], 4), r"from 1 to num_tokens=4.*lengths\[1\]=5"),
        (lambda: padding_mask([0], 4), r"lengths\[0\]=0"),
        (lambda: padding_mask([], 4), r"at least one sequence's length, got none"),
        (lambda: padding_mask(torch.ones(2, 2).long(), 4), r"shape \(batch,\), got shape \(2, 2\)"),
        (lambda: padding_mask(torch.ones(2), 4), r"integers, got a tensor of torch.float32"),
    ],
)
def test_bad_input_names_what_was_expected_and_given(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: sliding_window_mask(4, 2.5), r"window must be an integer.*2.5 of type float"),
        (lambda: padding_mask(3, 4), r"sequence of integers.*got int"),
        (
            lambda: sliding_window_mask(4, 2, causal=None),
            r"^sliding_window_mask: causal must be True or False \(only the past side, or "
            r"both sides of each query\), got None",
        ),
        (lambda: padding_mask([1.5], 4), r"integer >= 0, got 1.5 of type float"),
    ],
)
def test_input_of_a_wrong_type_raises_a_type_error(call, message):
    with pytest.raises(TypeError, match=message):
        call()


# --- chunked_mask: Llama 4's chunked attention --------------------------------------------


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
