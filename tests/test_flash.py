"""flash_attention and tiled_attention_backward: FlashAttention's backward pass.

The gradients from the saved log-sum-exp equal autograd through plain attention (the
book's masked softmax) in float64 to 1e-10: causal or not, block sizes that divide
the length and ones that do not, grouped heads. What the tiled form saves for backward
grows with ``num_tokens * head_dim``; plain attention's, with ``num_tokens ** 2``.
"""

from __future__ import annotations

import re

import pytest
import torch
from helpers import assert_tight
from hypothesis import given
from hypothesis import strategies as st

from attention import flash_attention, tiled_attention, tiled_attention_backward
from attention.flash import saved_bytes

F64 = torch.float64


def plain_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool):
    """The book's masked softmax with grouped heads repeated: autograd's reference."""
    group = q.shape[-3] // k.shape[-3] if q.dim() > 2 else 1
    if group > 1:
        k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def problem(seed, batch, kv_heads, group, num_queries, num_keys, head_dim, value_dim):
    generator = torch.Generator().manual_seed(seed)

    def randn(*size):
        return torch.randn(*size, generator=generator, dtype=F64)

    q = randn(batch, kv_heads * group, num_queries, head_dim)
    k = randn(batch, kv_heads, num_keys, head_dim)
    v = randn(batch, kv_heads, num_keys, value_dim)
    grad_out = randn(batch, kv_heads * group, num_queries, value_dim)
    return q, k, v, grad_out


def autograd_grads(q, k, v, grad_out, causal):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = plain_attention(*leaves, causal)
    return out.detach(), torch.autograd.grad(out, leaves, grad_out)


def assert_backward_matches(q, k, v, grad_out, causal, block_size):
    expected_out, expected = autograd_grads(q, k, v, grad_out, causal)
    out, lse = tiled_attention(q, k, v, causal=causal, block_size=block_size, return_lse=True)
    assert_tight(out, expected_out)
    grads = tiled_attention_backward(
        q, k, v, out, lse, grad_out, causal=causal, block_size=block_size
    )
    for got, want, t in zip(grads, expected, (q, k, v), strict=True):
        assert got.shape == t.shape
        assert_tight(got, want)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize(
    ("num_tokens", "block_size"),
    [
        (12, 4),  # blocks divide the length
        (12, 5),  # they do not: a last block of 2
        (7, 1),  # one token per block
        (9, 64),  # one block, larger than the sequence
    ],
)
@pytest.mark.parametrize(("kv_heads", "group"), [(3, 1), (2, 3), (1, 4)], ids=["mha", "gqa", "mqa"])
def test_backward_equals_autograd_through_plain_attention(
    causal, num_tokens, block_size, kv_heads, group
):
    q, k, v, grad_out = problem(
        num_tokens + block_size, 2, kv_heads, group, num_tokens, num_tokens, 8, 5
    )
    assert_backward_matches(q, k, v, grad_out, causal, block_size)


@given(
    causal=st.booleans(),
    num_queries=st.integers(1, 16),
    num_keys=st.integers(1, 16),
    kv_heads=st.integers(1, 2),
    group=st.integers(1, 3),
    block_size=st.integers(1, 18),
    head_dim=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_backward_equals_autograd_for_any_shape_and_block_size(
    causal, num_queries, num_keys, kv_heads, group, block_size, head_dim, seed
):
    num_keys = num_queries if causal else num_keys
    q, k, v, grad_out = problem(seed, 1, kv_heads, group, num_queries, num_keys, head_dim, 3)
    assert_backward_matches(q, k, v, grad_out, causal, block_size)


def test_backward_on_2d_inputs_without_heads():
    q, k, v, grad_out = problem(3, 1, 1, 1, 6, 6, 3, 3)
    q, k, v, grad_out = (t[0, 0] for t in (q, k, v, grad_out))  # (6, 3)
    assert_backward_matches(q, k, v, grad_out, True, 4)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_flash_attention_backward_runs_through_the_autograd_function(causal):
    q, k, v, grad_out = problem(5, 2, 2, 2, 10, 10, 4, 4)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flash_attention(*leaves, causal=causal, block_size=3)
    assert out.grad_fn.name() == "TiledAttentionFunctionBackward"
    out.backward(grad_out)
    expected_out, expected = autograd_grads(q, k, v, grad_out, causal)
    assert_tight(out.detach(), expected_out)
    for leaf, want in zip(leaves, expected, strict=True):
        assert_tight(leaf.grad, want)


def test_flash_attention_passes_gradcheck():
    q, k, v, _ = problem(7, 1, 1, 2, 5, 5, 3, 2)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    assert torch.autograd.gradcheck(
        lambda q, k, v: flash_attention(q, k, v, causal=True, block_size=2), leaves
    )


def test_flash_attention_saves_q_k_v_out_and_lse_only():
    q, k, v, _ = problem(0, 1, 2, 1, 64, 64, 8, 8)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    numbers = 4 * q.numel() + q.numel() // q.shape[-1]  # q, k, v, out: (1, 2, 64, 8); lse
    assert saved_bytes(flash_attention, *leaves, causal=True, block_size=16) == numbers * 8
    # Autograd through the same tiled loop keeps every block: as much as the full matrix.
    through_loop = saved_bytes(tiled_attention, *leaves, causal=True, block_size=16)
    assert through_loop > 2 * 64 * 64 * 8


@pytest.mark.parametrize("num_tokens", [1024, 4096, 16384])
def test_flash_attention_saves_at_most_a_tenth_of_plain_attention_from_1k_tokens(num_tokens):
    # The meta device runs the shapes without the numbers, so 16k tokens cost nothing.
    q, k, v = (
        torch.empty(1, 1, num_tokens, 64, device="meta", requires_grad=True) for _ in range(3)
    )
    flash = saved_bytes(flash_attention, q, k, v, causal=True, block_size=num_tokens // 4)
    plain = saved_bytes(plain_attention_meta, q, k, v)
    assert flash == (4 * num_tokens * 64 + num_tokens) * 4  # O(T * d)
    assert plain >= 2 * num_tokens**2 * 4  # the weights and the scores: O(T ** 2)
    assert flash * 9 <= plain  # 1/9.7 at 1k tokens, 1/37 at 4k, 1/144 at 16k


def plain_attention_meta(q, k, v):
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v


def test_saved_bytes_counts_on_meta_what_it_counts_on_a_cpu():
    shapes = [(1, 2, 256, 16)] * 3
    cpu = [torch.randn(s, requires_grad=True) for s in shapes]
    meta = [torch.empty(s, device="meta", requires_grad=True) for s in shapes]
    assert saved_bytes(plain_attention_meta, *cpu) == saved_bytes(plain_attention_meta, *meta)
    assert saved_bytes(flash_attention, *cpu) == saved_bytes(flash_attention, *meta)


GOOD = problem(0, 1, 2, 1, 4, 4, 3, 5)
Q, K, V, GRAD = GOOD
OUT, LSE = tiled_attention(Q, K, V, return_lse=True)
BACKWARD = {"q": Q, "k": K, "v": V, "out": OUT, "lse": LSE, "grad_out": GRAD}

BAD_BACKWARD = {
    "lse not a tensor": ({"lse": [0.0]}, TypeError, "lse must be a torch.Tensor"),
    "out not a tensor": ({"out": 1.0}, TypeError, "out must be a torch.Tensor"),
    "lse of the wrong shape": (
        {"lse": LSE[..., :2]},
        ValueError,
        "expected lse of shape (1, 2, 4)",
    ),
    "grad_out of the wrong dtype": (
        {"grad_out": GRAD.float()},
        ValueError,
        "expected grad_out of shape (1, 2, 4, 5) and dtype torch.float64",
    ),
    "out of the wrong shape": ({"out": OUT[..., :3]}, ValueError, "expected out of shape"),
    "causal not a bool": ({"causal": "yes"}, TypeError, "causal must be True or False"),
    "block_size zero": ({"block_size": 0}, ValueError, "block_size must be at least 1"),
    "q an int tensor": ({"q": Q.long()}, ValueError, "q must be a floating-point"),
}


@pytest.mark.parametrize(
    ("bad", "error", "match"), list(BAD_BACKWARD.values()), ids=list(BAD_BACKWARD)
)
def test_tiled_attention_backward_rejects_bad_arguments(bad, error, match):
    with pytest.raises(error, match="^tiled_attention_backward: .*" + re.escape(match)):
        tiled_attention_backward(**{**BACKWARD, **bad})


def test_flash_attention_rejects_bad_arguments_in_its_own_name():
    with pytest.raises(TypeError, match=r"^flash_attention: block_size must be a positive"):
        flash_attention(Q, K, V, block_size=None)
    with pytest.raises(ValueError, match=r"^flash_attention: expected as many queries as keys"):
        flash_attention(Q[..., :3, :], K, V, causal=True)
    with pytest.raises(TypeError, match=r"^saved_bytes: fn must be a callable"):
        saved_bytes(None)
