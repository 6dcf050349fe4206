"""Block selection (attention.selection): properties, errors, and transformers' MiniMax-M3
and Qwen4-Exp layers.

Tolerances: EXACT (rtol 1e-10, atol 1e-12) against ``MiniMaxM3VLAttention`` and its
``MiniMaxM3VLIndexer``, and against ``Qwen4ExpTextAttention`` and its
``Qwen4ExpTextQSAIndexer``, every module float64, given float64 cos and sin, with their
``Tensor.float()`` casts (norms, scores) and the eager softmax kept float64
(``float64_casts``, ``float64_softmax``): a full pass, and a prefill then one-token
steps across block boundaries with transformers' ``DynamicCache``, whose tensors
(keys, values, the indexer's keys) are compared with the package's cache after each
step. The chosen blocks and tokens are compared exactly, as integers.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from unittest import mock

import pytest
import torch
from helpers import F64
from hf_models import EXACT, causal_4d, copy_projections, float64_softmax, qwen3_next_query_gate
from hf_models import rope_cos_sin as half_split_cos_sin
from torch import nn
from transformers import DynamicCache
from transformers.models.minimax_m3_vl.configuration_minimax_m3_vl import MiniMaxM3VLTextConfig
from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import MiniMaxM3VLAttention
from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig
from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpTextAttention

from attention import (
    BlockTopKAttention,
    BlockTopKCache,
    BlockTopKIndexer,
    KVCache,
    QSAAttention,
    QSACache,
    QSAIndexer,
    RMSNorm,
    Rotary,
    attend,
    block_sparse_attention,
    pool_block_scores,
    select_blocks,
)

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, BASE = 32, 4, 2, 8, 10_000.0


@contextlib.contextmanager
def float64_casts() -> Iterator[None]:
    """Within the block, ``Tensor.float()`` leaves a float64 tensor float64: the
    references' norms and indexer scores cast with it; the package never calls it."""
    original = torch.Tensor.float

    def keep(self, *args, **kwargs):
        return self if self.dtype == F64 else original(self, *args, **kwargs)

    with mock.patch.object(torch.Tensor, "float", keep):
        yield


def randomize(module: nn.Module, seed: int) -> nn.Module:
    """Draw every parameter, norms' scales around 1, so that no part is an identity."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, parameter in module.named_parameters():
            if "norm" in name:
                parameter.copy_(1.0 + 0.3 * torch.randn_like(parameter))
            else:
                parameter.copy_(torch.randn_like(parameter) * parameter.shape[-1] ** -0.5)
    return module


def copy_norm(ours: RMSNorm, theirs: nn.Module) -> None:
    """The references' norms are zero-centred, ``1 + weight``."""
    with torch.no_grad():
        theirs.weight.copy_(ours.weight - 1.0)


# --- MiniMax-M3's block top-k -------------------------------------------------------------


def block_layer(block_size=4, top_k_blocks=3, local_blocks=1, seed=0) -> BlockTopKAttention:
    layer = BlockTopKAttention(
        HIDDEN,
        HIDDEN,
        context_length=64,
        num_heads=HEADS,
        num_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        out_bias=False,
        rotary=Rotary(HEAD_DIM, BASE, partial_rotary_factor=0.5),
        q_norm=RMSNorm(HEAD_DIM),
        k_norm=RMSNorm(HEAD_DIM),
        index_head_dim=HEAD_DIM,
        block_size=block_size,
        top_k_blocks=top_k_blocks,
        local_blocks=local_blocks,
    )
    return randomize(layer.to(F64), seed)


def minimax_attention(layer: BlockTopKAttention) -> MiniMaxM3VLAttention:
    """``MiniMaxM3VLAttention`` on a ``"minimax_m3_sparse"`` layer, with ``layer``'s weights."""
    indexer = layer.indexer
    config = MiniMaxM3VLTextConfig(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=1,
        layer_types=["minimax_m3_sparse"],
        mlp_layer_types=["dense"],
        index_n_heads=indexer.num_heads,
        index_head_dim=indexer.head_dim,
        index_block_size=indexer.block_size,
        index_topk_blocks=indexer.top_k_blocks,
        index_local_blocks=indexer.local_blocks,
        rope_parameters={"rope_type": "default", "rope_theta": BASE, "partial_rotary_factor": 0.5},
        attn_implementation="eager",
    )
    theirs = MiniMaxM3VLAttention(config, layer_idx=0).to(F64).eval()
    copy_projections(layer, theirs)
    copy_norm(layer.q_norm, theirs.q_norm)
    copy_norm(layer.k_norm, theirs.k_norm)
    with torch.no_grad():
        theirs.indexer.q_proj.weight.copy_(indexer.W_query.weight)
        theirs.indexer.k_proj.weight.copy_(indexer.W_key.weight)
    copy_norm(indexer.q_norm, theirs.indexer.q_norm)
    copy_norm(indexer.k_norm, theirs.indexer.k_norm)
    return theirs


def minimax_step(theirs, x, start, cache=None):
    positions = torch.arange(start, start + x.shape[1])[None]
    cos, sin = half_split_cos_sin(positions, layer_rotary_dim(), BASE)
    with float64_casts(), float64_softmax(), torch.no_grad():
        out, _ = theirs(x, (cos, sin), None, cache, position_ids=positions)
    return out


def layer_rotary_dim() -> int:
    return HEAD_DIM // 2


@pytest.mark.parametrize(
    ("block_size", "top_k_blocks", "local_blocks"), [(4, 3, 1), (3, 2, 2), (2, 4, 0), (5, 9, 1)]
)
def test_block_top_k_attention_equals_minimax_m3_attention_in_float64(
    block_size, top_k_blocks, local_blocks
) -> None:
    layer = block_layer(block_size, top_k_blocks, local_blocks)
    theirs = minimax_attention(layer)
    x = torch.randn(2, 21, HIDDEN, dtype=F64)
    with torch.no_grad():
        ours = layer(x)
    torch.testing.assert_close(ours, minimax_step(theirs, x, 0), **EXACT)


def test_block_top_k_chooses_the_blocks_minimax_m3_indexer_chooses() -> None:
    layer = block_layer()
    theirs = minimax_attention(layer)
    x = torch.randn(1, 19, HIDDEN, dtype=F64)
    positions = torch.arange(19)[None]
    cos_sin = half_split_cos_sin(positions, layer_rotary_dim(), BASE)
    with float64_casts(), torch.no_grad():
        expected = theirs.indexer(x, cos_sin, None, positions)
        ours = layer.indexer(x)
    assert torch.equal(ours.sort(dim=-1).values, expected.sort(dim=-1).values)
    # the first block's queries have one block to read, -1 padded; from the third on, 3
    assert (ours[..., :4, 1:] == -1).all() and (ours[..., 8:, :] >= 0).all()


def test_block_top_k_decodes_as_minimax_m3_with_its_cache_byte_for_byte() -> None:
    """A prefill of 6 tokens, then 13 steps across block boundaries (blocks of 4)."""
    layer = block_layer()
    theirs = minimax_attention(layer)
    x = torch.randn(1, 19, HIDDEN, dtype=F64)
    ours_cache = BlockTopKCache()
    their_cache = DynamicCache(config=theirs.config)
    splits = [0, 6, *range(7, 20)]
    for start, stop in itertools.pairwise(splits):
        chunk = x[:, start:stop]
        with torch.no_grad():
            ours = layer(chunk, cache=ours_cache)
        torch.testing.assert_close(ours, minimax_step(theirs, chunk, start, their_cache), **EXACT)
        held = their_cache.layers[0]
        assert torch.equal(ours_cache.keys, held.keys)
        assert torch.equal(ours_cache.values, held.values)
        assert torch.equal(ours_cache.index_keys, held.idx_keys[:, 0])
    expected = 19 * (2 * KV_HEADS * HEAD_DIM + HEAD_DIM) * 8
    assert ours_cache.nbytes == expected == 19 * layer.cache_bytes_per_token


def test_keeping_every_block_is_causal_attention() -> None:
    layer = block_layer(block_size=3, top_k_blocks=7)  # 7 blocks cover 21 keys
    x = torch.randn(1, 21, HIDDEN, dtype=F64)
    weights = layer.attention_weights(x)
    dense = super(BlockTopKAttention, layer).attention_weights(x)
    torch.testing.assert_close(weights, dense, **EXACT)


@pytest.mark.parametrize("local_blocks", [1, 2, 3])
def test_a_query_always_reads_its_local_blocks(local_blocks) -> None:
    layer = block_layer(block_size=2, top_k_blocks=3, local_blocks=local_blocks)
    x = torch.randn(1, 15, HIDDEN, dtype=F64)
    chosen = layer.chosen(x)  # (b, kv, n, keys)
    for position in range(15):
        first = max(0, (position // 2 - local_blocks + 1) * 2)
        assert chosen[..., position, first : position + 1].all(), position
        assert not chosen[..., position, position + 1 :].any()  # never a later key
    assert (chosen.sum(-1) <= 3 * 2).all()


def test_block_sparse_attention_reads_only_the_chosen_blocks() -> None:
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 2, 8, 4, dtype=F64) for _ in range(3))
    blocks = torch.tensor([0, -1]).expand(1, 1, 8, 2).clone()  # only block 0 (keys 0-3)
    out = block_sparse_attention(q, k[:, :1], v[:, :1], blocks, block_size=4)
    allowed = torch.zeros(8, 8, dtype=torch.bool)
    allowed[:, :4] = torch.ones(8, 4).tril().bool()
    allowed[4:, :4] = True
    expected = attend(q, k[:, :1], v[:, :1], allowed=allowed)
    torch.testing.assert_close(out, expected, **EXACT)


def test_pool_and_select_on_hand_made_scores() -> None:
    inf = float("inf")
    scores = torch.tensor([[1.0, 5.0, 2.0, 0.0, 3.0, -inf]])  # one query at position 5
    assert pool_block_scores(scores, 2).tolist() == [[5.0, 2.0, 3.0]]
    picked = select_blocks(pool_block_scores(scores, 2), 2, 1, 2)
    assert picked.tolist() == [[2, 0]]  # its own block, then the best other
    assert select_blocks(torch.full((1, 3), -inf), 2, 0, 2).tolist() == [[-1, -1]]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: pool_block_scores(torch.zeros(2, 3), 0), ValueError, "block_size must be"),
        (lambda: pool_block_scores([1.0], 2), TypeError, "token_scores must be a torch"),
        (lambda: select_blocks(torch.zeros(1, 3), 1, 2, 2), ValueError, "local_blocks <= "),
        (lambda: select_blocks(torch.zeros(1, 3), 2, -1, 2), ValueError, "local_blocks must"),
        (lambda: select_blocks(torch.zeros(3), 2, 1, 2), ValueError, "num_queries, num_blocks"),
        (
            lambda: block_sparse_attention(
                torch.zeros(1, 2, 4, 4),
                torch.zeros(1, 1, 4, 4),
                torch.zeros(1, 1, 4, 4),
                torch.zeros(1, 1, 4, 1),
                2,
            ),
            TypeError,
            "integer tensor",
        ),
        (
            lambda: block_sparse_attention(
                torch.zeros(1, 2, 4, 4),
                torch.zeros(1, 1, 4, 4),
                torch.zeros(1, 1, 4, 4),
                torch.full((1, 1, 4, 1), 2),
                2,
            ),
            ValueError,
            "from 0 to 1",
        ),
        (
            lambda: BlockTopKIndexer(
                8, num_heads=1, head_dim=4, block_size=2, top_k_blocks=1, local_blocks=2
            ),
            ValueError,
            "local_blocks <= top_k_blocks",
        ),
        (
            lambda: BlockTopKIndexer(
                8, num_heads=1, head_dim=4, block_size=2, top_k_blocks=1, rotary=Rotary(8)
            ),
            ValueError,
            "at most head_dim=4",
        ),
        (
            lambda: block_layer()(torch.zeros(1, 3, HIDDEN, dtype=F64), cache=KVCache()),
            TypeError,
            "cache must be a BlockTopKCache",
        ),
        (
            lambda: BlockTopKAttention(
                8,
                8,
                8,
                num_heads=2,
                num_kv_heads=1,
                window=4,
                index_head_dim=4,
                block_size=2,
                top_k_blocks=1,
            ),
            ValueError,
            "no window",
        ),
    ],
)
def test_block_selection_refuses_bad_input(call, error, match) -> None:
    with pytest.raises(error, match=match):
        call()


# --- Qwen4-Exp's QSA ------------------------------------------------------------------


def qsa_layer(budget=4, compress_ratio=2, index_heads=4, seed=0) -> QSAAttention:
    layer = QSAAttention(
        HIDDEN,
        HIDDEN,
        context_length=64,
        num_heads=HEADS,
        num_kv_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        out_bias=False,
        rotary=Rotary(HEAD_DIM, BASE, partial_rotary_factor=0.5),
        q_norm=RMSNorm(HEAD_DIM),
        k_norm=RMSNorm(HEAD_DIM),
        W_gate=nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False),
        index_num_heads=index_heads,
        index_head_dim=2 * HEAD_DIM,
        budget=budget,
        compress_ratio=compress_ratio,
    )
    return randomize(layer.to(F64), seed)


def qwen4_attention(layer: QSAAttention) -> Qwen4ExpTextAttention:
    """``Qwen4ExpTextAttention`` with ``layer``'s weights."""
    indexer = layer.indexer
    config = Qwen4ExpTextConfig(
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        num_hidden_layers=1,
        layer_types=["indexed_attention"],
        indexer_n_heads=indexer.num_heads,
        indexer_kv_heads=1,
        indexer_head_dim=indexer.head_dim,
        indexer_budget=indexer.budget,
        indexer_compress_ratio=indexer.compress_ratio,
        num_experts=4,
        num_experts_per_tok=2,
        rope_parameters={"rope_type": "default", "rope_theta": BASE, "partial_rotary_factor": 0.5},
        attn_implementation="eager",
    )
    theirs = Qwen4ExpTextAttention(config, layer_idx=0).to(F64).eval()
    copy_projections(layer, theirs, query_weight=qwen3_next_query_gate(layer))
    copy_norm(layer.q_norm, theirs.q_norm)
    copy_norm(layer.k_norm, theirs.k_norm)
    with torch.no_grad():
        theirs.indexer.index_qk_proj.weight.copy_(indexer.W_qk.weight)
    copy_norm(indexer.q_norm, theirs.indexer.q_layernorm)
    copy_norm(indexer.k_norm, theirs.indexer.k_layernorm)
    return theirs


def qwen4_step(theirs, x, start, cache=None):
    """One call: transformers' Qwen4-Exp passes cos and sin of every position so far, and
    the causal mask as a float mask (eager)."""
    stop = start + x.shape[1]
    positions = torch.arange(stop).expand(x.shape[0], stop)
    cos, sin = half_split_cos_sin(positions, layer_rotary_dim(), BASE)
    mask = torch.zeros(x.shape[0], 1, x.shape[1], stop, dtype=F64)
    mask = mask.masked_fill(~causal_4d(x.shape[1], stop), torch.finfo(F64).min)
    with float64_casts(), float64_softmax(), torch.no_grad():
        out, _ = theirs(x, (cos, sin), mask, cache)
    return out


@pytest.mark.parametrize(("budget", "compress_ratio"), [(4, 2), (6, 3), (8, 4), (3, 1)])
def test_qsa_attention_equals_qwen4_exp_attention_in_float64(budget, compress_ratio) -> None:
    layer = qsa_layer(budget, compress_ratio)
    theirs = qwen4_attention(layer)
    x = torch.randn(2, 19, HIDDEN, dtype=F64)
    with torch.no_grad():
        ours = layer(x)
    torch.testing.assert_close(ours, qwen4_step(theirs, x, 0), **EXACT)


def test_qsa_chooses_the_tokens_qwen4_exp_indexer_chooses() -> None:
    layer = qsa_layer(budget=6, compress_ratio=3)
    theirs = qwen4_attention(layer)
    x = torch.randn(1, 20, HIDDEN, dtype=F64)
    cos_sin = half_split_cos_sin(torch.arange(20)[None], layer_rotary_dim(), BASE)
    mask = causal_4d(20, 20)
    with float64_casts(), torch.no_grad():
        expected = theirs.indexer(x, cos_sin, mask, None)[:, 0]
        ours = layer.indexer(x)
    assert torch.equal(ours, expected)
    # at most the budget and the tail: 6 + 2 tokens
    assert ours.sum(-1).max() == 8 and ours.sum(-1)[0, :6].tolist() == [1, 2, 3, 4, 5, 6]


def test_qsa_decodes_as_qwen4_exp_with_its_cache_byte_for_byte() -> None:
    """A prefill of 5 tokens, then 12 steps, completing a block of 3 every third."""
    layer = qsa_layer(budget=6, compress_ratio=3)
    theirs = qwen4_attention(layer)
    x = torch.randn(1, 17, HIDDEN, dtype=F64)
    ours_cache, their_cache = QSACache(), DynamicCache(config=theirs.config)
    splits = [0, 5, *range(6, 18)]
    for start, stop in itertools.pairwise(splits):
        chunk = x[:, start:stop]
        with torch.no_grad():
            ours = layer(chunk, cache=ours_cache)
        torch.testing.assert_close(ours, qwen4_step(theirs, chunk, start, their_cache), **EXACT)
        held = their_cache.layers[0]
        assert torch.equal(ours_cache.keys, held.keys)
        assert torch.equal(ours_cache.values, held.values)
        assert torch.equal(ours_cache.index_keys, held.indexer_keys)
    assert ours_cache.nbytes == 17 * layer.cache_bytes_per_token


def test_a_budget_that_covers_every_block_is_causal_attention() -> None:
    layer = qsa_layer(budget=20, compress_ratio=2)
    x = torch.randn(1, 19, HIDDEN, dtype=F64)
    dense = super(QSAAttention, layer).attention_weights(x)
    torch.testing.assert_close(layer.attention_weights(x), dense, **EXACT)


def test_qsa_keeps_the_tail_and_at_most_the_budget_of_block_tokens() -> None:
    indexer = qsa_layer(budget=4, compress_ratio=4).indexer
    chosen = indexer(torch.randn(1, 23, HIDDEN, dtype=F64))[0]
    for position in range(23):
        tail = position + 1 - (position + 1) % 4
        assert chosen[position, tail : position + 1].all()
        assert not chosen[position, position + 1 :].any()
        assert chosen[position, :tail].sum() == min(4, tail)  # one whole block of 4


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: QSAIndexer(8, num_heads=2, head_dim=4, budget=5, compress_ratio=2),
            ValueError,
            "compress_ratio to divide budget",
        ),
        (
            lambda: QSAIndexer(8, num_heads=2, head_dim=4, budget=4, compress_ratio=0),
            ValueError,
            "compress_ratio must be at least 1",
        ),
        (
            lambda: QSAIndexer(
                8, num_heads=2, head_dim=4, budget=4, compress_ratio=2, rotary="rope"
            ),
            TypeError,
            "rotary must be a Rotary",
        ),
        (
            lambda: qsa_layer()(torch.zeros(1, 3, HIDDEN, dtype=F64), cache=BlockTopKCache()),
            TypeError,
            "cache must be a QSACache",
        ),
        (
            lambda: qsa_layer().indexer(torch.zeros(1, 3, 5, dtype=F64)),
            ValueError,
            "d_in=32",
        ),
    ],
)
def test_qsa_refuses_bad_input(call, error, match) -> None:
    with pytest.raises(error, match=match):
        call()
