"""Properties every attention module and helper must have, checked with hypothesis."""

from __future__ import annotations

import pytest
import torch
from helpers import (
    ALL_MODULES,
    CAUSAL,
    MASK_BUFFER,
    NON_CAUSAL,
    Shape,
    build,
    make_input,
    shapes,
)
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attention import (
    scaled_dot_product_weights,
    scores_for_all,
    scores_for_query,
    simple_self_attention,
    softmax_naive,
    softmax_stable,
)

pytestmark = pytest.mark.usefixtures("single_thread")

# ---------------------------------------------------------------------------------------
# Attention weights
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_MODULES)
@given(shape=shapes())
def test_attention_weight_rows_are_non_negative_and_sum_to_one_without_dropout(name, shape):
    weights = build(name, shape).attention_weights(make_input(shape))
    assert torch.all(weights >= 0)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]).double())


@pytest.mark.parametrize("name", CAUSAL)
@given(shape=shapes())
def test_causal_attention_weights_on_future_tokens_are_exactly_zero(name, shape):
    weights = build(name, shape).attention_weights(make_input(shape))
    assert torch.all(weights.triu(diagonal=1) == 0)


@given(shape=shapes())
def test_multiply_by_tril_and_renormalise_equals_the_minus_infinity_mask(shape):
    ca = build("CausalAttention", shape)
    sa_v2 = build("SelfAttentionV2", shape)
    incompatible = sa_v2.load_state_dict(ca.state_dict(), strict=False)
    assert incompatible.unexpected_keys == ["mask"] and not incompatible.missing_keys
    x = make_input(shape)
    unmasked = sa_v2.attention_weights(x)  # every token sees every token
    kept = unmasked * torch.ones(shape.num_tokens, shape.num_tokens).tril().double()
    renormalised = kept / kept.sum(dim=-1, keepdim=True)
    torch.testing.assert_close(ca.attention_weights(x), renormalised)


# ---------------------------------------------------------------------------------------
# Causality and permutation equivariance
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CAUSAL)
@given(shape=shapes())
def test_causal_output_at_t_does_not_change_when_later_tokens_change(name, shape):
    module = build(name, shape)
    x = make_input(shape)
    out = module(x)
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(shape.seed + 2))
    for t in range(shape.num_tokens):
        changed = x.clone()
        changed[:, t + 1 :] = noise[:, t + 1 :].double() * 10
        torch.testing.assert_close(module(changed)[:, : t + 1], out[:, : t + 1])


@pytest.mark.parametrize("name", CAUSAL)
@given(shape=shapes())
def test_causal_output_on_a_prefix_is_the_prefix_of_the_output(name, shape):
    module = build(name, shape)
    x = make_input(shape)
    out = module(x)
    for t in range(1, shape.num_tokens + 1):
        torch.testing.assert_close(module(x[:, :t]), out[:, :t])


@pytest.mark.parametrize("rank", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("name", NON_CAUSAL)
@given(shape=shapes())
def test_self_attention_is_permutation_equivariant(name, rank, shape):
    module = build(name, shape)
    x = make_input(shape, rank=rank)
    perm = torch.randperm(shape.num_tokens, generator=torch.Generator().manual_seed(shape.seed))
    torch.testing.assert_close(module(x[..., perm, :]), module(x)[..., perm, :])


# ---------------------------------------------------------------------------------------
# Dropout
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CAUSAL)
@given(shape=shapes(), p=st.floats(0.05, 0.95))
def test_eval_turns_dropout_off(name, shape, p):
    module = build(name, shape, dropout=p).eval()
    x = make_input(shape)
    first = module.attention_weights(x)
    assert torch.equal(module.attention_weights(x), first)
    assert torch.equal(first, build(name, shape).attention_weights(x))


@pytest.mark.parametrize("name", CAUSAL)
@given(shape=shapes(), p=st.floats(0.05, 0.95))
def test_training_dropout_keeps_weights_scaled_by_one_over_one_minus_p(name, shape, p):
    module = build(name, shape, dropout=p)
    x = make_input(shape)
    clean = module.eval().attention_weights(x)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(shape.seed)
        dropped = module.train().attention_weights(x)
    kept = dropped != 0
    torch.testing.assert_close(dropped[kept], clean[kept] / (1 - p), atol=0, rtol=1e-12)


@pytest.mark.parametrize("name", CAUSAL)
def test_training_dropout_zeroes_about_a_fraction_p_of_the_weights(name):
    p = 0.5
    shape = Shape(4, 16, 16, d_in=4, num_heads=2, head_dim=2, qkv_bias=False, seed=0)
    module = build(name, shape, dropout=p)
    x = make_input(shape)
    clean = module.eval().attention_weights(x)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        dropped = module.train().attention_weights(x)
    visible = clean > 0  # the weights dropout can act on
    fraction = (dropped[visible] == 0).double().mean().item()
    assert 0.4 < fraction < 0.6  # ~ 500 to 1000 weights, so far inside these bounds


# ---------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_MODULES)
def test_gradcheck_passes_for_the_forward_pass(name):
    shape = Shape(2, 3, 4, d_in=3, num_heads=2, head_dim=2, qkv_bias=True, seed=7)
    module = build(name, shape)
    x = make_input(shape).requires_grad_()
    assert torch.autograd.gradcheck(module, (x,))


def test_gradcheck_passes_for_masked_scaled_dot_product_weights():
    generator = torch.Generator().manual_seed(8)
    queries = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64)
    keys = torch.randn(2, 4, 3, generator=generator, dtype=torch.float64)
    mask = torch.ones(4, 4, dtype=torch.bool).triu(diagonal=1)
    assert torch.autograd.gradcheck(
        lambda q, k: scaled_dot_product_weights(q, k, mask=mask),
        (queries.requires_grad_(), keys.requires_grad_()),
    )


@pytest.mark.parametrize("function", [softmax_stable, simple_self_attention])
def test_gradcheck_passes_for_the_weightless_functions(function):
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    assert torch.autograd.gradcheck(function, (x.requires_grad_(),))


# ---------------------------------------------------------------------------------------
# Dtypes, devices and the mask buffer
# ---------------------------------------------------------------------------------------

DTYPE_SHAPE = Shape(2, 5, 6, d_in=4, num_heads=2, head_dim=3, qkv_bias=True, seed=11)


@pytest.mark.parametrize(
    ("dtype", "tolerance"),
    [(torch.float64, 1e-5), (torch.bfloat16, 5e-2)],
    ids=["float64", "bfloat16"],
)
@pytest.mark.parametrize("name", ALL_MODULES)
def test_module_converted_to_another_dtype_runs_and_agrees_with_float32(name, dtype, tolerance):
    module = build(name, DTYPE_SHAPE, dtype=torch.float32)
    x = make_input(DTYPE_SHAPE, dtype=torch.float32) * 0.5
    expected = module(x)
    out = module.to(dtype)(x.to(dtype))
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("target", [torch.float64, torch.bfloat16, "meta"])
@pytest.mark.parametrize("name", CAUSAL)
def test_mask_buffer_stays_a_bool_buffer_and_moves_with_the_module(name, target):
    module = build(name, DTYPE_SHAPE, dtype=torch.float32)
    buffer = MASK_BUFFER[name]
    expected = dict(module.named_buffers())[buffer].clone()
    module.to(target)
    mask = dict(module.named_buffers())[buffer]
    assert mask.dtype == torch.bool
    assert buffer in module.state_dict()
    assert buffer not in dict(module.named_parameters())
    if target == "meta":
        assert mask.device.type == "meta"
        assert all(p.device.type == "meta" for p in module.parameters())
    else:
        assert torch.equal(mask, expected)


# ---------------------------------------------------------------------------------------
# Softmax and the weightless functions of section 3.3
# ---------------------------------------------------------------------------------------


def matrices(elements: st.SearchStrategy[float]) -> st.SearchStrategy:
    """float64 arrays of 1 to 6 rows and 1 to 4 columns."""
    return arrays("float64", st.tuples(st.integers(1, 6), st.integers(1, 4)), elements=elements)


@given(
    scores=matrices(st.floats(allow_nan=False, allow_infinity=False)),
    dim=st.sampled_from([0, 1, -1]),
)
def test_softmax_stable_matches_torch_softmax_for_any_finite_scores(scores, dim):
    scores = torch.from_numpy(scores)
    torch.testing.assert_close(softmax_stable(scores, dim=dim), torch.softmax(scores, dim=dim))


@given(
    scores=arrays("float64", st.integers(1, 6), elements=st.floats(-5, 5)),
    shift=st.floats(1e3, 1e6),
)
def test_softmax_naive_overflows_to_nan_where_softmax_stable_does_not(scores, shift):
    scores = torch.from_numpy(scores)
    assert torch.isnan(softmax_naive(scores + shift)).any()
    torch.testing.assert_close(softmax_stable(scores + shift), softmax_naive(scores))


@given(inputs=matrices(st.floats(-10, 10)))
def test_scores_for_all_is_symmetric_and_row_i_is_scores_for_query_i(inputs):
    inputs = torch.from_numpy(inputs)
    scores = scores_for_all(inputs)
    torch.testing.assert_close(scores, scores.T)
    for i in range(inputs.shape[0]):
        torch.testing.assert_close(scores_for_query(inputs[i], inputs), scores[i])


@given(inputs=matrices(st.floats(-10, 10)))
def test_simple_self_attention_context_vectors_lie_within_the_inputs_range(inputs):
    inputs = torch.from_numpy(inputs)
    context = simple_self_attention(inputs)
    low, high = inputs.min(dim=0).values, inputs.max(dim=0).values
    assert torch.all(context >= low - 1e-9) and torch.all(context <= high + 1e-9)
