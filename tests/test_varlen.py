"""Packed variable-length attention: varlen_attention and varlen_mask.

Each packed sequence must get exactly what attention over that sequence alone gives,
and what the padded batch with a padding mask gives at its real tokens, in float64 to
1e-10; the block-diagonal mask must be the one transformers builds when it detects
packed sequences from their ``position_ids``, and ``cu_seqlens`` the one its
FlashAttention helpers compute.
"""

from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.nn import functional as F
from transformers import LlamaConfig
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import create_causal_mask, find_packed_sequence_indices
from transformers.modeling_flash_attention_utils import (
    _get_unpad_data,
    prepare_fa_kwargs_from_position_ids,
)

from attention import attend, causal_mask, padding_mask, varlen_attention, varlen_mask

F64 = torch.float64
EXACT = 1e-10

pytestmark = pytest.mark.usefixtures("single_thread")


def cumulative(lengths: list[int]) -> list[int]:
    return [0, *itertools.accumulate(lengths)]


def packed_inputs(lengths, heads=4, kv_heads=2, dim=8, value_dim=None, seed=0):
    """q, k, v of ``sum(lengths)`` packed tokens, float64."""
    generator = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q = torch.randn(total, heads, dim, generator=generator, dtype=F64)
    k = torch.randn(total, kv_heads, dim, generator=generator, dtype=F64)
    v = torch.randn(total, kv_heads, value_dim or dim, generator=generator, dtype=F64)
    return q, k, v


def alone(q, k, v, causal):
    """torch's own attention over one sequence, (tokens, heads, dim) in and out."""
    group = q.shape[1] // k.shape[1]
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(0, 1)


def pad(x, lengths):
    """(total, heads, dim) packed -> (batch, heads, longest, dim), zeros after each sequence."""
    longest = max(lengths)
    out = x.new_zeros(len(lengths), longest, *x.shape[1:])
    for row, piece in enumerate(x.split(lengths)):
        out[row, : len(piece)] = piece
    return out.transpose(1, 2)


def worst(a, b) -> float:
    return (a - b).abs().max().item()


CASES = pytest.mark.parametrize(
    ("heads", "kv_heads"), [(4, 4), (4, 2), (6, 1)], ids=["mha", "gqa", "mqa"]
)
CAUSAL = pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])


@CASES
@CAUSAL
def test_each_sequence_equals_torch_attention_over_that_sequence_alone(heads, kv_heads, causal):
    lengths = [3, 1, 7, 4]
    q, k, v = packed_inputs(lengths, heads, kv_heads)
    out = varlen_attention(q, k, v, cumulative(lengths), causal=causal)
    assert out.shape == q.shape and out.dtype == F64
    pieces = zip(q.split(lengths), k.split(lengths), v.split(lengths), strict=True)
    expected = torch.cat([alone(*piece, causal) for piece in pieces])
    assert worst(out, expected) < EXACT


@CASES
@CAUSAL
def test_packed_equals_the_padded_batch_with_a_padding_mask_at_its_real_tokens(
    heads, kv_heads, causal
):
    lengths = [5, 2, 8, 1]
    q, k, v = packed_inputs(lengths, heads, kv_heads, value_dim=6)
    out = varlen_attention(q, k, v, cumulative(lengths), causal=causal)
    longest = max(lengths)
    real = padding_mask(lengths, longest)  # (batch, longest)
    allowed = real[:, None, None, :]  # padding keys hidden from every query
    if causal:
        allowed = allowed & causal_mask(longest)
    padded = attend(pad(q, lengths), pad(k, lengths), pad(v, lengths), allowed=allowed)
    padded = padded.transpose(1, 2)  # (batch, longest, heads, value_dim)
    assert out.shape == (sum(lengths), heads, 6)
    assert worst(out, padded[real]) < EXACT  # the real rows, in packed order


@CAUSAL
def test_equals_one_attention_over_all_packed_tokens_with_the_block_diagonal_mask(causal):
    lengths = [4, 6, 2]
    q, k, v = packed_inputs(lengths)
    out = varlen_attention(q, k, v, cumulative(lengths), causal=causal)
    packed = [t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)]
    masked = attend(*packed, allowed=varlen_mask(cumulative(lengths), causal=causal))
    assert worst(out, masked[0].transpose(0, 1)) < EXACT


@given(
    lengths=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    group=st.sampled_from([1, 2, 3]),
    kv_heads=st.integers(1, 2),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_any_lengths_give_each_sequence_its_own_attention(lengths, group, kv_heads, causal, seed):
    q, k, v = packed_inputs(lengths, group * kv_heads, kv_heads, dim=4, seed=seed)
    cu_seqlens = torch.tensor(cumulative(lengths), dtype=torch.int32)  # FlashAttention's dtype
    out = varlen_attention(q, k, v, cu_seqlens, causal=causal)
    for start, end in itertools.pairwise(cumulative(lengths)):
        piece = alone(q[start:end], k[start:end], v[start:end], causal)
        assert worst(out[start:end], piece) < EXACT
    # A token's output depends on its own sequence only: change another one's values.
    if len(lengths) > 1:
        changed = v.clone()
        changed[lengths[0] :] += 1.0
        again = varlen_attention(q, k, changed, cu_seqlens, causal=causal)
        assert torch.equal(again[: lengths[0]], out[: lengths[0]])


def test_one_sequence_is_plain_causal_attention():
    q, k, v = packed_inputs([9])
    assert worst(varlen_attention(q, k, v, [0, 9]), alone(q, k, v, True)) < EXACT


def test_cu_seqlens_as_a_list_or_any_integer_tensor_give_the_same_output():
    lengths = [2, 5, 3]
    q, k, v = packed_inputs(lengths)
    out = varlen_attention(q, k, v, cumulative(lengths))
    for dtype in (torch.int32, torch.int64):
        cu_seqlens = torch.tensor(cumulative(lengths), dtype=dtype)
        assert torch.equal(varlen_attention(q, k, v, cu_seqlens), out)


def test_float32_matches_float64_to_float32_precision():
    lengths = [6, 3, 7]
    q, k, v = packed_inputs(lengths)
    out = varlen_attention(q, k, v, cumulative(lengths))
    out32 = varlen_attention(q.float(), k.float(), v.float(), cumulative(lengths))
    assert out32.dtype == torch.float32
    assert worst(out32.double(), out) < 1e-5


# ---------------------------------------------------------------------------------------
# The mask
# ---------------------------------------------------------------------------------------


def test_the_mask_is_one_causal_triangle_per_sequence_on_the_diagonal():
    lengths = [3, 1, 4]
    blocks = [torch.ones(n, n, dtype=torch.bool).tril() for n in lengths]
    assert torch.equal(varlen_mask(cumulative(lengths)), torch.block_diag(*blocks))
    squares = [torch.ones(n, n, dtype=torch.bool) for n in lengths]
    assert torch.equal(varlen_mask(cumulative(lengths), causal=False), torch.block_diag(*squares))


def test_the_mask_is_built_on_the_device_of_cu_seqlens():
    mask = varlen_mask(torch.tensor([0, 2, 3]))
    assert mask.dtype == torch.bool and mask.device == torch.device("cpu")
    assert mask.shape == (3, 3)


@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_the_mask_is_the_one_transformers_builds_from_restarting_position_ids(lengths):
    """transformers detects packing when position_ids restart (DataCollatorWithFlattening)."""
    position_ids = torch.cat([torch.arange(n) for n in lengths])[None]  # (1, total)
    total = position_ids.shape[1]
    config = LlamaConfig(hidden_size=8, num_attention_heads=2, num_key_value_heads=1)
    config._attn_implementation = "sdpa"  # its masks are bool, True = may attend
    mask = create_causal_mask(
        config, torch.zeros(1, total, 8), None, None, position_ids, allow_is_causal_skip=False
    )
    assert torch.equal(mask[0, 0], varlen_mask(cumulative(lengths)))
    # Its sequence index per token, which starts the mask: 0 0 0 1 1 2 ...
    found = find_packed_sequence_indices(position_ids)
    if len(lengths) > 1:
        expected = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
        assert torch.equal(found[0], expected)
    else:
        assert found is None  # one sequence: not packed


@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_cu_seqlens_is_what_transformers_flash_attention_helpers_compute(lengths):
    expected = torch.tensor(cumulative(lengths), dtype=torch.int32)
    # From a padded batch's attention_mask (the unpad path of _flash_attention_forward)
    _, cu_from_mask, longest = _get_unpad_data(padding_mask(lengths, max(lengths)).int())
    assert torch.equal(cu_from_mask, expected) and longest == max(lengths)
    # From packed position_ids (its padding-free path)
    position_ids = torch.cat([torch.arange(n) for n in lengths])[None]
    (cu_q, cu_k), (max_q, _) = prepare_fa_kwargs_from_position_ids(position_ids)
    assert torch.equal(cu_q, expected) and torch.equal(cu_k, expected)
    assert int(max_q) == max(lengths)


def test_equals_transformers_sdpa_attention_with_its_packed_sequence_mask():
    """Causal only: create_bidirectional_mask takes no position_ids, so no packing."""
    lengths = [4, 7, 1, 5]
    q, k, v = packed_inputs(lengths, heads=6, kv_heads=2)
    total = sum(lengths)
    position_ids = torch.cat([torch.arange(n) for n in lengths])[None]
    config = LlamaConfig(hidden_size=48, num_attention_heads=6, num_key_value_heads=2)
    config._attn_implementation = "sdpa"
    mask = create_causal_mask(
        config, torch.zeros(1, total, 48, dtype=F64), None, None, position_ids,
        allow_is_causal_skip=False,
    )  # fmt: skip
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True, training=False)
    packed = [t.transpose(0, 1).unsqueeze(0) for t in (q, k, v)]  # (1, heads, total, dim)
    theirs, _ = sdpa_attention_forward(module, *packed, mask, scaling=8**-0.5)
    ours = varlen_attention(q, k, v, cumulative(lengths))
    assert worst(ours, theirs[0]) < EXACT  # theirs: (1, total, heads, dim)


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------

Q, K, V = packed_inputs([3, 4])  # 7 tokens, 4 query heads, 2 key/value heads

BAD_CU_SEQLENS = [
    ([1, 3, 7], "cu_seqlens must start at 0, got 1"),
    ([0, 3, 3, 7], "cu_seqlens must increase strictly (every sequence has at least one token), "
     "got cu_seqlens[1]=3 and cu_seqlens[2]=3"),
    ([0, 5, 3, 7], "got cu_seqlens[1]=5 and cu_seqlens[2]=3"),
    ([0, 3, 6], "cu_seqlens must end at total_tokens=7, the packed tokens in q, got 6"),
    ([0, 3, 8], "cu_seqlens must end at total_tokens=7, the packed tokens in q, got 8"),
    ([0], "cu_seqlens must hold at least two entries"),
    ([0, 3.0, 7], "cu_seqlens must hold integers, got 3.0", TypeError),
    (torch.tensor([0.0, 3.0, 7.0]), "cu_seqlens must hold integers, got a tensor of torch.float32"),
    (torch.tensor([[0, 3, 7]]), "cu_seqlens must be 1-D, (num_sequences + 1,), got shape (1, 3)"),
    (7, "cu_seqlens must be a list or a 1-D integer tensor, got int", TypeError),
    ("037", "cu_seqlens must be a list or a 1-D integer tensor, got str", TypeError),
]  # fmt: skip


def with_error(rows: list) -> list:
    """``(argument, message[, error])`` rows with the error: ValueError unless given."""
    return [(argument, message, *(error or [ValueError])) for argument, message, *error in rows]


@pytest.mark.parametrize(("cu_seqlens", "message", "error"), with_error(BAD_CU_SEQLENS))
def test_bad_cu_seqlens_are_refused_naming_it(cu_seqlens, message, error):
    with pytest.raises(error, match=re.escape(message)) as raised:
        varlen_attention(Q, K, V, cu_seqlens)
    assert str(raised.value).startswith("varlen_attention: cu_seqlens")


@pytest.mark.parametrize(
    ("cu_seqlens", "message", "error"), with_error(BAD_CU_SEQLENS[:3] + BAD_CU_SEQLENS[5:])
)
def test_the_mask_refuses_the_same_cu_seqlens(cu_seqlens, message, error):
    with pytest.raises(error, match=re.escape(message)):
        varlen_mask(cu_seqlens)


BAD_SHAPES = [
    ((Q, K[:, :1].expand(7, 3, 8), V[:, :1].expand(7, 3, 8)),
     "kv_heads must divide heads (each key/value head serves a group of query heads), "
     "got heads=4 and kv_heads=3 (4 / 3 = 1.33333)"),
    ((Q[0], K, V), "q of shape (4, 8)"),
    ((Q, K[:6], V[:6]), "got q of shape (7, 4, 8), k of shape (6, 2, 8) and v of shape (6, 2, 8)"),
    ((Q, K, V[:, :1]), "v of shape (7, 1, 8)"),
    ((Q, K[..., :4], V), "k of shape (7, 2, 4)"),
    ((Q, K, V.float()), "q, k and v must share a dtype, got torch.float64, torch.float64 and "
     "torch.float32"),
    ((Q, K.int(), V), "k must be a floating-point tensor"),
    ((Q.tolist(), K, V), "q must be a torch.Tensor, got list", TypeError),
]  # fmt: skip


@pytest.mark.parametrize(("qkv", "message", "error"), with_error(BAD_SHAPES))
def test_bad_shapes_are_refused_with_the_layout_and_the_shapes(qkv, message, error):
    with pytest.raises(error, match=re.escape(message)) as raised:
        varlen_attention(*qkv, [0, 3, 7])
    assert str(raised.value).startswith("varlen_attention: ")
    if "of shape" in message:
        assert "expected q (total_tokens, heads, dim)" in str(raised.value)


def test_causal_must_be_a_flag_given_by_keyword():
    with pytest.raises(TypeError, match=re.escape("varlen_attention: causal must be True or")):
        varlen_attention(Q, K, V, [0, 3, 7], causal=1)
    with pytest.raises(TypeError, match=re.escape("varlen_mask: causal must be True or")):
        varlen_mask([0, 3, 7], causal="yes")
    with pytest.raises(TypeError, match="positional argument"):
        varlen_attention(Q, K, V, [0, 3, 7], True)
    with pytest.raises(TypeError, match="positional argument"):
        varlen_mask([0, 3, 7], True)
