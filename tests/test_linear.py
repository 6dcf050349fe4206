"""linear_attention: the parallel and recurrent forms, the formula, its properties and errors.

Tolerance: ``helpers.TIGHT`` (1e-10) in float64 throughout; both forms and the direct
formula compute the same sums in a different order.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers import F64, TIGHT, expect
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F

from attention import linear_attention
from attention.linear import elu_plus_one

pytestmark = pytest.mark.usefixtures("single_thread")

CAUSAL = pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])


def qkv(
    batch: int = 2,
    heads: int = 3,
    tokens: int = 7,
    dim_k: int = 4,
    dim_v: int = 5,
    *,
    tokens_k: int | None = None,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random float64 q, k, v in the layout (batch, heads, tokens, dim)."""
    gen = torch.Generator().manual_seed(seed)
    tokens_k = tokens if tokens_k is None else tokens_k
    q = torch.randn(batch, heads, tokens, dim_k, dtype=F64, generator=gen)
    k = torch.randn(batch, heads, tokens_k, dim_k, dtype=F64, generator=gen)
    v = torch.randn(batch, heads, tokens_k, dim_v, dtype=F64, generator=gen)
    return q, k, v


def direct(q, k, v, causal, phi=elu_plus_one):
    """The definition, one query and one key at a time, in plain Python loops."""
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            for i in range(q.shape[2]):
                seen = range(i + 1) if causal else range(k.shape[2])
                fq = phi(q[b, h, i])
                state = sum(torch.outer(phi(k[b, h, j]), v[b, h, j]) for j in seen)  # S_i
                total = sum(phi(k[b, h, j]) for j in seen)  # z_i
                out[b, h, i] = (fq @ state) / (fq @ total)
    return out


@CAUSAL
@pytest.mark.parametrize("form", ["parallel", "recurrent"])
def test_equals_the_formula(causal, form):
    q, k, v = qkv()
    torch.testing.assert_close(
        linear_attention(q, k, v, causal=causal, form=form), direct(q, k, v, causal), **TIGHT
    )


@CAUSAL
def test_parallel_equals_recurrent(causal):
    q, k, v = qkv(tokens=11, dim_k=6, dim_v=2, seed=1)
    parallel = linear_attention(q, k, v, causal=causal, form="parallel")
    recurrent = linear_attention(q, k, v, causal=causal, form="recurrent")
    torch.testing.assert_close(parallel, recurrent, **TIGHT)


@st.composite
def layouts(draw):
    return {
        "batch": draw(st.integers(1, 2)),
        "heads": draw(st.integers(1, 3)),
        "tokens": draw(st.integers(1, 8)),
        "dim_k": draw(st.integers(1, 5)),
        "dim_v": draw(st.integers(1, 5)),
        "seed": draw(st.integers(0, 2**16)),
    }


@given(layout=layouts(), causal=st.booleans())
def test_the_two_forms_agree_for_any_layout(layout, causal):
    q, k, v = qkv(**layout)
    torch.testing.assert_close(
        linear_attention(q, k, v, causal=causal),
        linear_attention(q, k, v, causal=causal, form="recurrent"),
        **TIGHT,
    )


def test_non_causal_queries_and_keys_may_differ_in_number():
    q, k, v = qkv(tokens=3, tokens_k=8)
    out = linear_attention(q, k, v, causal=False, form="recurrent")
    assert out.shape == (2, 3, 3, 5)
    torch.testing.assert_close(out, direct(q, k, v, causal=False), **TIGHT)
    torch.testing.assert_close(out, linear_attention(q, k, v, causal=False), **TIGHT)


@given(layout=layouts())
def test_causal_output_depends_only_on_the_past(layout):
    """Changing the keys and values after token i leaves outputs 0..i unchanged."""
    q, k, v = qkv(**layout)
    cut = layout["tokens"] // 2
    k2, v2 = k.clone(), v.clone()
    k2[:, :, cut + 1 :] += 1.0
    v2[:, :, cut + 1 :] -= 2.0
    for form in ("parallel", "recurrent"):
        before = linear_attention(q, k, v, form=form)[:, :, : cut + 1]
        after = linear_attention(q, k2, v2, form=form)[:, :, : cut + 1]
        torch.testing.assert_close(before, after, **TIGHT)


@given(layout=layouts(), causal=st.booleans())
def test_output_is_a_convex_combination_of_the_values(layout, causal):
    """The weights φ(q_i)·φ(k_j) / Σ are positive and sum to 1, so each output lies
    between the smallest and largest value it sees, coordinate by coordinate."""
    q, k, v = qkv(**layout)
    out = linear_attention(q, k, v, causal=causal)
    if causal:
        low = v.cummin(dim=2).values
        high = v.cummax(dim=2).values
    else:
        low = v.min(dim=2, keepdim=True).values
        high = v.max(dim=2, keepdim=True).values
    assert (out >= low - 1e-12).all() and (out <= high + 1e-12).all()


def test_first_causal_output_is_the_first_value():
    q, k, v = qkv()
    for form in ("parallel", "recurrent"):
        torch.testing.assert_close(linear_attention(q, k, v, form=form)[:, :, 0], v[:, :, 0])


def test_default_feature_map_is_elu_plus_one():
    q, k, v = qkv(seed=3)
    given_map = linear_attention(q, k, v, feature_map=lambda x: F.elu(x) + 1)
    torch.testing.assert_close(linear_attention(q, k, v), given_map, **TIGHT)
    # exp(x) below 0, x + 1 above: positive everywhere.
    x = torch.tensor([-2.0, 0.0, 3.0], dtype=F64)
    torch.testing.assert_close(elu_plus_one(x), torch.tensor([math.exp(-2.0), 1.0, 4.0], dtype=F64))


@CAUSAL
def test_a_feature_map_may_change_the_dimension(causal):
    """A feature map with more outputs than inputs (here [exp(x), exp(-x)])."""

    def both_signs(x):
        return torch.cat([x.exp(), (-x).exp()], dim=-1)

    q, k, v = qkv(seed=4)
    out = linear_attention(q, k, v, causal=causal, feature_map=both_signs)
    torch.testing.assert_close(out, direct(q, k, v, causal, phi=both_signs), **TIGHT)
    recurrent = linear_attention(q, k, v, causal=causal, feature_map=both_signs, form="recurrent")
    torch.testing.assert_close(out, recurrent, **TIGHT)


def test_exponential_feature_map_of_single_keys_is_softmax_attention():
    """With one-dimensional keys, φ = exp and q = 0, the weight of key j is
    φ(0)·φ(k_j) = exp(k_j): the output is the softmax over the keys times the values."""
    q, k, v = qkv(dim_k=1)
    q = torch.zeros_like(q)
    weights = torch.softmax(k[..., 0], dim=-1)  # (batch, heads, tokens)
    expected = (weights[..., None] * v).sum(dim=2, keepdim=True).expand_as(v)
    out = linear_attention(q, k, v, causal=False, feature_map=torch.exp)
    torch.testing.assert_close(out, expected, **TIGHT)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_keeps_the_dtype(dtype):
    q, k, v = (x.to(dtype) for x in qkv())
    for form in ("parallel", "recurrent"):
        assert linear_attention(q, k, v, form=form).dtype == dtype


def test_zero_tokens():
    q, k, v = qkv(tokens=0)
    for form in ("parallel", "recurrent"):
        assert linear_attention(q, k, v, form=form).shape == (2, 3, 0, 5)


def test_errors():
    q, k, v = qkv()
    with expect("linear_attention: form must be 'parallel' or 'recurrent', got 'chunked'"):
        linear_attention(q, k, v, form="chunked")
    with expect("linear_attention: feature_map must return positive values"):
        linear_attention(q, k, v, feature_map=lambda x: x)
    with expect("linear_attention: feature_map must be a callable or None, got int", TypeError):
        linear_attention(q, k, v, feature_map=3)
    with expect("linear_attention: feature_map must return a tensor of shape"):
        linear_attention(q, k, v, feature_map=lambda x: x.exp().sum(dim=-2))
    with expect("linear_attention: q must have shape (batch, heads, tokens, dim), got a 3-D"):
        linear_attention(q[0], k, v)
    with expect("linear_attention: v must be a torch.Tensor, got list", TypeError):
        linear_attention(q, k, [1.0])
    with expect(
        "linear_attention: k must be a floating-point tensor (embeddings are real numbers), "
        "got dtype torch.int64"
    ):
        linear_attention(q, k.long(), v)
    with expect("linear_attention: q, k and v must have one dtype"):
        linear_attention(q.float(), k, v)
    with expect("linear_attention: q, k and v must have the same (batch, heads)"):
        linear_attention(q, k[:, :2], v[:, :2])
    with expect("linear_attention: k and v must have the same number of tokens"):
        linear_attention(q, k, v[:, :, :3])
    with expect("linear_attention: q and k must have the same last dimension dim_k"):
        linear_attention(q[..., :2], k, v)
    with expect("linear_attention: with causal=True, q and k must have the same number"):
        linear_attention(q[:, :, :3], k, v)
    with expect("linear_attention: causal must be True or False", TypeError):
        linear_attention(q, k, v, causal=1)
    with pytest.raises(TypeError, match="positional argument"):
        linear_attention(q, k, v, True)


# --- the recurrent form's state --------------------------------------------------------------


@given(layout=layouts(), data=st.data())
def test_a_sequence_split_in_two_and_carried_equals_one_run(layout, data):
    """The recurrent form from the first part's final state continues it exactly: the
    outputs and the final state of the two parts are those of one run."""
    q, k, v = qkv(**layout)
    cut = data.draw(st.integers(0, layout["tokens"]), label="cut")
    whole, (state, normaliser) = linear_attention(q, k, v, form="recurrent", return_state=True)
    first, carried = linear_attention(
        q[:, :, :cut], k[:, :, :cut], v[:, :, :cut], form="recurrent", return_state=True
    )
    rest, (state_2, normaliser_2) = linear_attention(
        q[:, :, cut:],
        k[:, :, cut:],
        v[:, :, cut:],
        form="recurrent",
        initial_state=carried,
        return_state=True,
    )
    torch.testing.assert_close(torch.cat([first, rest], dim=2), whole, **TIGHT)
    torch.testing.assert_close(state_2, state, **TIGHT)
    torch.testing.assert_close(normaliser_2, normaliser, **TIGHT)


@given(layout=layouts())
def test_the_final_state_is_the_sum_over_the_keys(layout):
    """``S = Σ φ(k_j) v_jᵀ`` and ``z = Σ φ(k_j)``, with or without causal."""
    q, k, v = qkv(**layout)
    phi_k = elu_plus_one(k)
    for causal in (True, False):
        _, (state, normaliser) = linear_attention(
            q, k, v, causal=causal, form="recurrent", return_state=True
        )
        torch.testing.assert_close(state, phi_k.transpose(-2, -1) @ v, **TIGHT)
        torch.testing.assert_close(normaliser, phi_k.sum(dim=2), **TIGHT)


def test_a_non_causal_call_reads_the_initial_state_and_every_key():
    """Without causal, every query reads the initial state plus all the keys: the same
    as a causal run's last query over the two parts together."""
    q, k, v = qkv(tokens=6)
    _, carried = linear_attention(q[:, :, :2], k[:, :, :2], v[:, :, :2], return_state=True,
                                  form="recurrent")  # fmt: skip
    out = linear_attention(
        q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], causal=False, form="recurrent",
        initial_state=carried,
    )  # fmt: skip
    last = linear_attention(q, k, v, form="recurrent")[:, :, -1]
    torch.testing.assert_close(out[:, :, -1], last, **TIGHT)
    torch.testing.assert_close(out[:, :, 0], direct(q[:, :, 2:3], k, v, causal=False)[:, :, 0],
                               **TIGHT)  # fmt: skip


def test_state_errors():
    q, k, v = qkv(batch=2, heads=3, dim_k=4, dim_v=5)
    s, z = torch.zeros(2, 3, 4, 5, dtype=F64), torch.zeros(2, 3, 4, dtype=F64)
    with expect("linear_attention: initial_state and return_state need form='recurrent'"):
        linear_attention(q, k, v, initial_state=(s, z))
    with expect("linear_attention: initial_state and return_state need form='recurrent'"):
        linear_attention(q, k, v, return_state=True)
    with expect("linear_attention: return_state must be True or False", TypeError):
        linear_attention(q, k, v, form="recurrent", return_state=1)
    expected = "linear_attention: initial_state must be None or a pair (S, z) of torch.float64"
    with expect(expected, TypeError):
        linear_attention(q, k, v, form="recurrent", initial_state=s)
    with expect(expected + " tensors of shapes", TypeError):
        linear_attention(q, k, v, form="recurrent", initial_state=(s, z, z))
    with expect("linear_attention: initial_state's z must be a torch.Tensor, got list", TypeError):
        linear_attention(q, k, v, form="recurrent", initial_state=(s, [0.0]))
    with expect(expected):
        linear_attention(q, k, v, form="recurrent", initial_state=(s[..., :4], z))
    with expect(expected):
        linear_attention(q, k, v, form="recurrent", initial_state=(s, z.float()))
