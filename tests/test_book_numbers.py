"""The published numbers of chapter 3 of *Build a Large Language Model (From Scratch)*.

Every expected value below is printed in the book (to 4 decimals) and is reproduced
here under the book's seeds. The last tests check the contract that makes this
possible: each module draws from the random generator exactly as the book's code.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attention import (
    INPUTS,
    SENTENCE,
    SWITCH_INPUTS,
    SWITCH_SENTENCE,
    SWITCH_TOKENS,
    TOKENS,
    CausalAttention,
    Head,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttentionV1,
    SelfAttentionV2,
    attention_weights,
    context_vectors,
    scaled_dot_product_weights,
    scores_for_all,
    scores_for_query,
    simple_self_attention,
    softmax_naive,
    softmax_stable,
)

pytestmark = pytest.mark.usefixtures("single_thread")

BATCH = torch.stack((INPUTS, INPUTS))  # (2, 6, 3), the book's batch


def assert_book(actual: torch.Tensor, published: list) -> None:
    """``actual`` matches the book's 4-decimal numbers."""
    expected = torch.tensor(published, dtype=actual.dtype)
    torch.testing.assert_close(actual.detach(), expected, atol=1e-4, rtol=0)


@pytest.fixture
def seeded():
    """Seed the global generator like the book, and restore it afterwards."""
    with torch.random.fork_rng(devices=[]):
        yield torch.manual_seed


# ---------------------------------------------------------------------------------------
# The running examples
# ---------------------------------------------------------------------------------------


def test_tokens_are_the_words_of_the_sentences_and_each_has_a_3d_embedding():
    assert tuple(SENTENCE.split()) == TOKENS
    assert tuple(SWITCH_SENTENCE.split()) == SWITCH_TOKENS
    assert INPUTS.shape == SWITCH_INPUTS.shape == (6, 3)
    assert INPUTS.dtype == SWITCH_INPUTS.dtype == torch.float32


# ---------------------------------------------------------------------------------------
# Section 3.3: attention without trainable weights
# ---------------------------------------------------------------------------------------

JOURNEY_SCORES = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]
JOURNEY_SOFTMAX = [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]
BOOK_CONTEXT = [
    [0.4421, 0.5931, 0.5790],
    [0.4419, 0.6515, 0.5683],
    [0.4431, 0.6496, 0.5671],
    [0.4304, 0.6298, 0.5510],
    [0.4671, 0.5910, 0.5266],
    [0.4177, 0.6503, 0.5645],
]


def test_scores_of_journey_from_scores_for_query():
    assert_book(scores_for_query(INPUTS[1], INPUTS), JOURNEY_SCORES)


def test_scores_of_journey_are_row_1_of_scores_for_all():
    assert_book(scores_for_all(INPUTS)[1], JOURNEY_SCORES)


def test_full_score_matrix_row_0():
    assert_book(scores_for_all(INPUTS)[0], [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310])


def test_sum_normalised_weights_of_journey():
    scores = scores_for_query(INPUTS[1], INPUTS)
    assert_book(scores / scores.sum(), [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])


@pytest.mark.parametrize("softmax", [softmax_naive, softmax_stable, attention_weights])
def test_softmax_weights_of_journey(softmax):
    assert_book(softmax(scores_for_query(INPUTS[1], INPUTS)), JOURNEY_SOFTMAX)


def test_context_vector_of_journey():
    weights = attention_weights(scores_for_query(INPUTS[1], INPUTS))
    assert_book(context_vectors(weights, INPUTS), BOOK_CONTEXT[1])


def test_all_context_vectors_from_simple_self_attention():
    assert_book(simple_self_attention(INPUTS), BOOK_CONTEXT)


def test_all_context_vectors_step_by_step():
    weights = attention_weights(scores_for_all(INPUTS))
    assert_book(context_vectors(weights, INPUTS), BOOK_CONTEXT)


def test_scores_of_light_in_the_switch_sentence():
    light = SWITCH_TOKENS.index("light")
    expected = [0.9046, 0.5701, 0.6006, 0.7121, 0.7818, 0.5065]
    assert_book(scores_for_query(SWITCH_INPUTS[light], SWITCH_INPUTS), expected)
    assert_book(scores_for_all(SWITCH_INPUTS)[light], expected)


def test_context_vector_of_light_in_the_switch_sentence():
    light = SWITCH_TOKENS.index("light")
    assert_book(simple_self_attention(SWITCH_INPUTS)[light], [0.3039, 0.5600, 0.5155])


# ---------------------------------------------------------------------------------------
# Section 3.4: self-attention with trainable weights
# ---------------------------------------------------------------------------------------

V1_OUTPUT = [
    [0.2996, 0.8053],
    [0.3061, 0.8210],
    [0.3058, 0.8203],
    [0.2948, 0.7939],
    [0.2927, 0.7891],
    [0.2990, 0.8040],
]


def test_section_3_4_step_by_step_with_the_books_weight_matrices(seeded):
    seeded(123)
    W_query, W_key, W_value = torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)
    query_2 = INPUTS[1] @ W_query
    keys = INPUTS @ W_key
    values = INPUTS @ W_value
    assert_book(query_2, [0.4306, 1.4551])
    assert_book(query_2 @ keys[1], 1.8524)  # omega_22
    assert_book(query_2 @ keys.T, [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])
    weights = scaled_dot_product_weights(query_2.unsqueeze(0), keys)[0]
    assert_book(weights, [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])
    assert_book(weights @ values, [0.3061, 0.8210])


def test_self_attention_v1_draws_the_books_weight_matrices(seeded):
    seeded(123)
    expected = [torch.rand(3, 2) for _ in range(3)]
    seeded(123)
    sa_v1 = SelfAttentionV1(3, 2)
    for name, matrix in zip(("W_query", "W_key", "W_value"), expected, strict=True):
        assert torch.equal(getattr(sa_v1, name), matrix), name


def test_self_attention_v1_output_seed_123(seeded):
    seeded(123)
    assert_book(SelfAttentionV1(3, 2)(INPUTS), V1_OUTPUT)


def test_self_attention_v1_output_is_the_same_for_each_item_of_a_batch(seeded):
    seeded(123)
    assert_book(SelfAttentionV1(3, 2)(BATCH), [V1_OUTPUT, V1_OUTPUT])


def test_self_attention_v2_output_row_0_seed_789(seeded):
    seeded(789)
    assert_book(SelfAttentionV2(3, 2)(INPUTS)[0], [-0.0739, 0.0713])


def test_self_attention_v2_attention_weights_row_0_seed_789(seeded):
    seeded(789)
    weights = SelfAttentionV2(3, 2).attention_weights(INPUTS)
    assert_book(weights[0], [0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510])


def test_exercise_3_1_v1_from_v2_reproduces_v2(seeded):
    seeded(123)
    sa_v2 = SelfAttentionV2(3, 2)
    sa_v1 = SelfAttentionV1.from_v2(sa_v2)
    assert_book(sa_v1(INPUTS)[0], [-0.5337, -0.1051])
    torch.testing.assert_close(sa_v1(INPUTS), sa_v2(INPUTS))


def test_exercise_3_1_from_v2_leaves_the_global_generator_alone(seeded):
    seeded(123)
    sa_v2 = SelfAttentionV2(3, 2)
    before = torch.get_rng_state()
    SelfAttentionV1.from_v2(sa_v2)
    assert torch.equal(torch.get_rng_state(), before)


# ---------------------------------------------------------------------------------------
# Section 3.5: causal attention
# ---------------------------------------------------------------------------------------

BOOK_CAUSAL_WEIGHTS = [
    [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
    [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
    [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
    [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
    [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529],
]
CAUSAL_OUTPUT = [
    [-0.4519, 0.2216],
    [-0.5874, 0.0058],
    [-0.6300, -0.0632],
    [-0.5675, -0.0843],
    [-0.5526, -0.0981],
    [-0.5299, -0.1081],
]


def test_causal_weights_from_the_books_v2_weights_masked_with_minus_infinity(seeded):
    seeded(789)
    sa_v2 = SelfAttentionV2(3, 2)
    scores = sa_v2.W_query(INPUTS) @ sa_v2.W_key(INPUTS).T
    masked = scores.masked_fill(torch.ones(6, 6).triu(diagonal=1).bool(), float("-inf"))
    assert_book(torch.softmax(masked / 2**0.5, dim=-1), BOOK_CAUSAL_WEIGHTS)


def test_causal_attention_with_the_books_v2_weights_gives_the_books_causal_weights(seeded):
    seeded(789)
    sa_v2 = SelfAttentionV2(3, 2)
    ca = CausalAttention(3, 2, context_length=6, dropout=0.0)
    incompatible = ca.load_state_dict(sa_v2.state_dict(), strict=False)
    assert incompatible.missing_keys == ["mask"]
    assert not incompatible.unexpected_keys
    weights = ca.attention_weights(INPUTS.unsqueeze(0))[0]
    assert_book(weights, BOOK_CAUSAL_WEIGHTS)
    assert torch.all(weights.triu(diagonal=1) == 0)


def test_causal_attention_output_seed_123(seeded):
    seeded(123)
    ca = CausalAttention(3, 2, context_length=6, dropout=0.0)
    assert_book(ca(BATCH), [CAUSAL_OUTPUT, CAUSAL_OUTPUT])


# ---------------------------------------------------------------------------------------
# Section 3.6: multi-head attention
# ---------------------------------------------------------------------------------------

WRAPPER_OUTPUT = [
    [-0.4519, 0.2216, 0.4772, 0.1063],
    [-0.5874, 0.0058, 0.5891, 0.3257],
    [-0.6300, -0.0632, 0.6202, 0.3860],
    [-0.5675, -0.0843, 0.5478, 0.3589],
    [-0.5526, -0.0981, 0.5321, 0.3428],
    [-0.5299, -0.1081, 0.5077, 0.3493],
]
MHA_OUTPUT = [
    [0.3190, 0.4858],
    [0.2943, 0.3897],
    [0.2856, 0.3593],
    [0.2693, 0.3873],
    [0.2639, 0.3928],
    [0.2575, 0.4028],
]


def test_multi_head_attention_wrapper_output_seed_123(seeded):
    seeded(123)
    wrapper = MultiHeadAttentionWrapper(3, 2, context_length=6, dropout=0.0, num_heads=2)
    out = wrapper(BATCH)
    assert out.shape == (2, 6, 4)
    assert_book(out, [WRAPPER_OUTPUT, WRAPPER_OUTPUT])


def test_exercise_3_2_wrapper_with_d_out_1_gives_two_output_features():
    wrapper = MultiHeadAttentionWrapper(3, 1, context_length=6, dropout=0.0, num_heads=2)
    assert wrapper(BATCH).shape == (2, 6, 2)


def test_multi_head_attention_output_seed_123(seeded):
    seeded(123)
    mha = MultiHeadAttention(3, 2, context_length=6, dropout=0.0, num_heads=2)
    out = mha(BATCH)
    assert out.shape == (2, 6, 2)
    assert_book(out, [MHA_OUTPUT, MHA_OUTPUT])


def test_exercise_3_3_gpt2_sized_multi_head_attention():
    gpt2 = MultiHeadAttention(768, 768, context_length=1024, dropout=0.0, num_heads=12)
    assert sum(p.numel() for p in gpt2.parameters()) == 2_360_064
    assert (gpt2.num_heads, gpt2.head_dim) == (12, 64)
    assert gpt2.mask.shape == (1024, 1024)


# ---------------------------------------------------------------------------------------
# The random-generator contract: each module draws exactly what the book's code draws
# ---------------------------------------------------------------------------------------


def _linears(*sizes: tuple[int, int, bool]) -> list[nn.Linear]:
    return [nn.Linear(d_in, d_out, bias=bias) for d_in, d_out, bias in sizes]


def _params(*linears: nn.Linear) -> list[torch.Tensor]:
    return [p for linear in linears for p in linear.parameters()]


def _reference_self_attention_v1(d_in, d_out, bias):
    return [torch.rand(d_in, d_out) for _ in ("W_query", "W_key", "W_value")]


def _reference_self_attention_v2(d_in, d_out, bias):
    return _params(*_linears(*[(d_in, d_out, bias)] * 3))


def _reference_causal_attention(d_in, d_out, bias):
    # nn.Dropout and the mask draw nothing
    return _params(*_linears(*[(d_in, d_out, bias)] * 3))


def _reference_wrapper(d_in, d_out, bias):
    # two CausalAttention heads, each with its own W_query, W_key, W_value
    return _params(*_linears(*[(d_in, d_out, bias)] * 6))


def _reference_multi_head_attention(d_in, d_out, bias):
    # W_query, W_key, W_value, then out_proj, which always has a bias
    return _params(*_linears(*[(d_in, d_out, bias)] * 3, (d_out, d_out, True)))


def _reference_head(d_in, d_out, bias):
    # Karpathy's order: key, query, value, none with a bias
    return _params(*_linears(*[(d_in, d_out, False)] * 3))


CONSTRUCTIONS = {
    "SelfAttentionV1": (
        lambda d_in, d_out, bias: SelfAttentionV1(d_in, d_out),
        _reference_self_attention_v1,
    ),
    "SelfAttentionV2": (
        lambda d_in, d_out, bias: SelfAttentionV2(d_in, d_out, qkv_bias=bias),
        _reference_self_attention_v2,
    ),
    "CausalAttention": (
        lambda d_in, d_out, bias: CausalAttention(d_in, d_out, 5, 0.1, qkv_bias=bias),
        _reference_causal_attention,
    ),
    "MultiHeadAttentionWrapper": (
        lambda d_in, d_out, bias: MultiHeadAttentionWrapper(d_in, d_out, 5, 0.1, 2, bias),
        _reference_wrapper,
    ),
    "MultiHeadAttention": (
        lambda d_in, d_out, bias: MultiHeadAttention(d_in, d_out, 5, 0.1, 2, qkv_bias=bias),
        _reference_multi_head_attention,
    ),
    "Head": (lambda d_in, d_out, bias: Head(d_in, d_out, 5, 0.1), _reference_head),
}


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "qkv_bias"])
@pytest.mark.parametrize("name", list(CONSTRUCTIONS))
def test_construction_draws_the_same_random_numbers_as_the_books_code(seeded, name, bias):
    build, reference = CONSTRUCTIONS[name]
    d_in, d_out = 3, 4
    seeded(2024)
    expected = reference(d_in, d_out, bias)
    state_after_reference = torch.get_rng_state()
    seeded(2024)
    module = build(d_in, d_out, bias)
    parameters = list(module.parameters())
    assert len(parameters) == len(expected)
    for actual, wanted in zip(parameters, expected, strict=True):
        assert torch.equal(actual, wanted)
    assert torch.equal(torch.get_rng_state(), state_after_reference)


# ---------------------------------------------------------------------------------------
# "Let's build GPT": Karpathy's Head
# ---------------------------------------------------------------------------------------


def test_head_key_query_value_are_linears_built_in_karpathys_order(seeded):
    seeded(1337)
    key, query, value = _linears(*[(32, 16, False)] * 3)
    seeded(1337)
    head = Head(n_embd=32, head_size=16, block_size=8)
    assert torch.equal(head.key.weight, key.weight)
    assert torch.equal(head.query.weight, query.weight)
    assert torch.equal(head.value.weight, value.weight)
    assert head.key.bias is None and head.query.bias is None and head.value.bias is None


def test_head_output_follows_karpathys_formula(seeded):
    seeded(1337)
    head = Head(n_embd=32, head_size=16, block_size=8)
    x = torch.randn(4, 8, 32)  # (B, T, C)
    k, q, v = head.key(x), head.query(x), head.value(x)
    wei = q @ k.transpose(-2, -1) * 16**-0.5
    tril = torch.tril(torch.ones(8, 8))
    wei = F.softmax(wei.masked_fill(tril == 0, float("-inf")), dim=-1)
    torch.testing.assert_close(head.attention_weights(x), wei)
    torch.testing.assert_close(head(x), wei @ v)
