"""The paged KV cache: PagedKVCache and paged_attention.

Decoding through block tables must give, in float64 to 1e-10, what
``GroupedQueryAttention`` gives over one contiguous ``KVCache`` per sequence, and what
``transformers``' own paged path gives (``eager_paged_attention_forward`` reading and
writing a ``PagedAttentionCache``). Random interleavings of add, update, fork and free
are checked against a plain dict of token lists: no token lost or mixed up, every block
returned to the pool exactly once, the pool's accounting exact, and a failed update
changing nothing.
"""

from __future__ import annotations

import itertools
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LlamaConfig
from transformers.generation.configuration_utils import ContinuousBatchingConfig
from transformers.generation.continuous_batching.cache import PagedAttentionCache
from transformers.generation.continuous_batching.distributed import DistributedHelper
from transformers.integrations.eager_paged import eager_paged_attention_forward

from attention import GroupedQueryAttention, KVCache, PagedKVCache, attend, paged_attention

pytestmark = pytest.mark.usefixtures("single_thread")
F64 = torch.float64


def tokens(values: list[float], num_kv_heads: int = 2, head_dim: int = 3) -> torch.Tensor:
    """(len(values), num_kv_heads, head_dim) keys whose every number is the token's value."""
    column = torch.tensor(values, dtype=F64)[:, None, None]
    return column.expand(len(values), num_kv_heads, head_dim).contiguous()


def held(cache: PagedKVCache, seq_id: int) -> list[float]:
    """The token values a sequence holds, read back through its block table."""
    keys, values = cache.gather(seq_id)
    assert torch.equal(values, -keys)  # each token's value is minus its key
    return keys[:, 0, 0].tolist()


# -- parity ------------------------------------------------------------------------------


@pytest.mark.parametrize("num_kv_heads", [1, 2, 4])
@torch.no_grad()
def test_decode_steps_equal_grouped_query_attention_over_contiguous_caches(num_kv_heads, seeded):
    """Three sequences of different lengths, decoded together, each as if alone."""
    seeded(0)
    num_heads, d_out, block_size = 4, 32, 4
    head_dim = d_out // num_heads
    layer = GroupedQueryAttention(
        6, d_out, context_length=64, num_heads=num_heads, num_kv_heads=num_kv_heads
    ).to(F64)
    paged = PagedKVCache(32, block_size, num_kv_heads, head_dim, dtype=F64)
    prompts = {10: 7, 11: 1, 12: 12}  # seq_id: prompt length (2 blocks, 1 token, 3 full blocks)
    contiguous = {}
    for seq_id, length in prompts.items():
        contiguous[seq_id] = KVCache()
        layer(torch.randn(1, length, 6, dtype=F64), cache=contiguous[seq_id])
        k, v = contiguous[seq_id].keys[0], contiguous[seq_id].values[0]  # (kv_heads, n, dim)
        paged.add(seq_id)
        paged.update(seq_id, k.transpose(0, 1), v.transpose(0, 1))
    seq_ids = list(prompts)
    for _ in range(6):  # decode steps: every sequence gets one token
        x = torch.randn(len(seq_ids), 1, 6, dtype=F64)
        expected = torch.cat(
            [layer(x[b : b + 1], cache=contiguous[s]) for b, s in enumerate(seq_ids)]
        )
        # The new token's query, key and value, as the layer computes them (no RoPE here).
        q = layer.W_query(x).view(-1, 1, num_heads, head_dim).transpose(1, 2)
        k = layer.W_key(x).view(-1, num_kv_heads, head_dim)
        v = layer.W_value(x).view(-1, num_kv_heads, head_dim)
        for b, s in enumerate(seq_ids):
            paged.update(s, k[b : b + 1], v[b : b + 1])
        context = paged_attention(q, paged, seq_ids)  # (batch, num_heads, 1, head_dim)
        assert context.shape == q.shape
        got = layer.out_proj(context.transpose(1, 2).reshape(-1, 1, d_out))
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)
    for s in seq_ids:  # the blocks hold exactly the contiguous caches' keys and values
        k, v = paged.gather(s)  # (the decode tokens projected in a batch: not bit-equal)
        torch.testing.assert_close(k, contiguous[s].keys[0].transpose(0, 1), rtol=0, atol=1e-12)
        torch.testing.assert_close(v, contiguous[s].values[0].transpose(0, 1), rtol=0, atol=1e-12)


def test_each_row_equals_attend_over_its_own_tokens_and_forked_rows_diverge(seeded):
    seeded(1)
    cache = PagedKVCache(16, 3, 2, 5, dtype=F64)
    cache.add(0)
    cache.update(0, torch.randn(8, 2, 5, dtype=F64), torch.randn(8, 2, 5, dtype=F64))
    cache.fork(0, 1)
    cache.update(1, torch.randn(2, 2, 5, dtype=F64), torch.randn(2, 2, 5, dtype=F64))
    q = torch.randn(2, 6, 1, 5, dtype=F64)
    out = paged_attention(q, cache, [0, 1])
    for b in range(2):
        k, v = (x.transpose(0, 1)[None] for x in cache.gather(b))
        torch.testing.assert_close(out[b : b + 1], attend(q[b : b + 1], k, v), rtol=0, atol=1e-12)


def test_matches_transformers_eager_paged_attention_forward(seeded):
    """The same keys, values and queries through transformers' continuous-batching cache.

    The attention agrees to 1e-6 (transformers' softmax runs in float32 even for float64
    inputs); the keys and values each request reads back are equal bit for bit.

    ``PagedAttentionCache`` allocates blocks and gives physical read and write indices;
    its ``update`` writes the new keys and values through them and reads each request's
    whole cache back; ``eager_paged_attention_forward`` attends with a block-diagonal
    additive mask over the packed decode queries.
    """
    seeded(2)
    num_heads, num_kv_heads, head_dim, block_size = 4, 2, 8, 4
    config = LlamaConfig(
        hidden_size=num_heads * head_dim,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=head_dim,
        num_hidden_layers=1,
        intermediate_size=16,
        vocab_size=10,
    )
    batching = ContinuousBatchingConfig(
        num_blocks=16, page_size=block_size, max_batch_tokens=64, max_memory_percent=0.1
    )
    theirs = PagedAttentionCache(config, batching, "cpu", DistributedHelper(None, None), dtype=F64)
    ours = PagedKVCache(16, block_size, num_kv_heads, head_dim, dtype=F64)

    class Request:  # what the cache asks of a request's state
        def __init__(self, request_id: str) -> None:
            self.request_id, self.length = request_id, 0

        def current_len(self) -> int:
            return self.length

    class Layer(torch.nn.Module):  # what the attention function asks of the module
        layer_idx = 0
        num_key_value_groups = num_heads // num_kv_heads

    class UpdateDone:  # a paged cache whose update for this step was already made
        def update(self, key_states, value_states, layer_idx, kwargs):
            return key_states, value_states

    layer, scale = Layer(), head_dim**-0.5

    def forward(requests, new_lengths, q, k, v):
        """One packed forward through transformers: q (1, H, n, D), k and v (1, KVH, n, D)."""
        reads, writes, cu_k, mask_rows = [], [], [0], []
        for request, n in zip(requests, new_lengths, strict=True):
            assert theirs.can_store_request_tokens(request, n)
            read, write = [[]], [[]]
            theirs.extend_read_and_write_indices(request.request_id, request.length, n, read, write)
            reads += read[0]
            writes += write[0]
            cu_k.append(cu_k[-1] + request.length + n)
            mask_rows.append((request.length, n))
        # A block-diagonal causal mask, (1, 1, queries, keys), 0 where allowed, -inf elsewhere.
        mask = torch.full((sum(new_lengths), cu_k[-1]), float("-inf"), dtype=F64)
        row = 0
        for (past, n), start in zip(mask_rows, cu_k, strict=False):
            for i in range(n):
                mask[row + i, start : start + past + i + 1] = 0
            row += n
        kwargs = {
            "read_index": [torch.tensor(reads, dtype=torch.long)],
            "write_index": [torch.tensor(writes, dtype=torch.long)],
            "cu_seq_lens_k": {"full_attention": torch.tensor(cu_k)},
            "max_length_k": {"full_attention": max(b - a for a, b in itertools.pairwise(cu_k))},
        }
        # The cache writes the new keys and values and reads each request's whole cache
        # back. transformers 5.24 moved this call from the attention function into the
        # layer; up to 5.23 the function makes it, so it gets a cache with nothing left to do.
        k, v = theirs.update(k, v, layer.layer_idx, kwargs)
        out, _ = eager_paged_attention_forward(
            layer, q, k, v, mask[None, None], scale, cache=UpdateDone()
        )
        for request, n in zip(requests, new_lengths, strict=True):
            request.length += n
        return out  # (1, n, H, D)

    lengths = {"a": 5, "b": 9, "c": 1}
    requests = {r: Request(r) for r in lengths}
    for seq_id, (r, n) in enumerate(lengths.items()):  # prefill each request alone
        k, v = (torch.randn(1, num_kv_heads, n, head_dim, dtype=F64) for _ in "kv")
        forward([requests[r]], [n], torch.randn(1, num_heads, n, head_dim, dtype=F64), k, v)
        ours.add(seq_id)
        ours.update(seq_id, k[0].transpose(0, 1), v[0].transpose(0, 1))
    seq_ids = list(range(len(lengths)))
    for _ in range(5):  # decode steps: one packed forward for the three requests
        q = torch.randn(3, num_heads, 1, head_dim, dtype=F64)
        k, v = (torch.randn(3, num_kv_heads, head_dim, dtype=F64) for _ in "kv")
        packed = [x.transpose(0, 1)[None] for x in (k, v)]  # (1, KVH, 3, D)
        expected = forward(list(requests.values()), [1, 1, 1], q.transpose(0, 2), *packed)
        for b in seq_ids:
            ours.update(b, k[b : b + 1], v[b : b + 1])
        got = paged_attention(q, ours, seq_ids)  # (3, H, 1, D)
        # transformers takes the softmax in float32 whatever the dtype (softmax(...,
        # dtype=torch.float32)), so float64 inputs agree to float32's precision.
        torch.testing.assert_close(got.transpose(0, 2), expected.transpose(1, 2), rtol=0, atol=1e-6)
    # What each request's cache holds, read back through transformers' physical indices,
    # is bit for bit what our block tables hold.
    allocator = theirs.cache_allocators["full_attention"]
    k_view, v_view = allocator._kv_token_views[0]
    for seq_id, r in enumerate(lengths):
        index = torch.tensor(allocator.get_read_indices(r, requests[r].length, 0))
        keys, values = ours.gather(seq_id)
        assert torch.equal(k_view.index_select(0, index), keys)
        assert torch.equal(v_view.index_select(0, index), values)
    # Both pools hold blocks of the same size, and the same number per request.
    assert [len(allocator.block_table[r]) for r in lengths] == [
        len(ours.block_table(s)) for s in seq_ids
    ]


# -- bookkeeping -------------------------------------------------------------------------


def test_fork_allocates_nothing_and_copies_a_shared_partial_block_once():
    cache = PagedKVCache(8, 4, 2, 3, dtype=F64)
    cache.add(0)
    cache.update(0, tokens([1, 2, 3, 4, 5, 6]), -tokens([1, 2, 3, 4, 5, 6]))
    cache.fork(0, 1)
    cache.fork(0, 2)
    assert cache.num_free_blocks == 6
    cache.update(1, tokens([7]), -tokens([7]))  # copies block 1, then writes
    assert cache.num_free_blocks == 5
    assert cache.block_table(1)[0] == cache.block_table(0)[0]  # the full block stays shared
    assert cache.block_table(1)[1] != cache.block_table(0)[1]
    cache.update(1, tokens([8]), -tokens([8]))  # its own block now: no copy
    assert cache.num_free_blocks == 5
    cache.update(0, tokens([9]), -tokens([9]))  # still shared with 2: copies
    assert cache.num_free_blocks == 4
    cache.update(2, tokens([10]), -tokens([10]))  # the last reader: writes in place
    assert cache.num_free_blocks == 4
    assert held(cache, 0) == [1, 2, 3, 4, 5, 6, 9]
    assert held(cache, 1) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert held(cache, 2) == [1, 2, 3, 4, 5, 6, 10]


def test_a_full_last_block_is_never_copied():
    cache = PagedKVCache(8, 4, 2, 3, dtype=F64)
    cache.add(0)
    cache.update(0, tokens([1, 2, 3, 4]), -tokens([1, 2, 3, 4]))
    cache.fork(0, 1)
    cache.update(1, tokens([5]), -tokens([5]))
    assert cache.num_free_blocks == 6  # one new block, no copy
    assert cache.block_table(1)[0] == cache.block_table(0)[0]


def test_running_out_counts_the_copy_and_changes_nothing():
    cache = PagedKVCache(3, 4, 2, 3, dtype=F64)
    cache.add(0)
    cache.update(0, tokens([1, 2, 3, 4, 5]), -tokens([1, 2, 3, 4, 5]))
    cache.fork(0, 1)
    before = (cache.block_table(1), cache.num_free_blocks, cache.key_blocks.clone())
    # 4 new tokens: a copy of the shared half block (room for 3), then 1 more block.
    with pytest.raises(ValueError, match=re.escape("needs 2 more blocks, 1 free")):
        cache.update(1, tokens([6, 7, 8, 9]), -tokens([6, 7, 8, 9]))
    assert (cache.block_table(1), cache.num_free_blocks) == before[:2]
    assert torch.equal(cache.key_blocks, before[2])
    assert held(cache, 1) == [1, 2, 3, 4, 5]


IDS = st.integers(0, 3)  # few ids, so that operations often meet the same sequence
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), IDS),
        st.tuples(st.just("update"), IDS, st.integers(0, 6)),
        st.tuples(st.just("update"), IDS, st.integers(0, 6)),  # twice as often
        st.tuples(st.just("fork"), IDS, IDS),
        st.tuples(st.just("free"), IDS),
    ),
    max_size=40,
)


def check_pool(cache: PagedKVCache, model: dict[int, list[float]]) -> None:
    """Every sequence holds its tokens; blocks are counted and freed exactly once."""
    assert sorted(cache.seq_ids) == sorted(model)
    in_use: dict[int, int] = {}
    for seq_id, expected in model.items():
        assert held(cache, seq_id) == expected
        table = cache.block_table(seq_id)
        assert len(table) == -(-len(expected) // cache.block_size)  # no block wasted
        for block in table:
            in_use[block] = in_use.get(block, 0) + 1
    free = cache._free
    assert len(set(free)) == len(free), "a block in the free list twice"
    assert not set(free) & set(in_use), "a block both free and in use"
    assert cache.num_free_blocks + len(in_use) == cache.num_blocks
    assert all(cache._refs[b] == n for b, n in in_use.items())
    assert all(cache._refs[b] == 0 for b in free)


@settings(max_examples=150)
@given(OPS, st.integers(1, 4), st.integers(1, 12))
def test_random_add_update_fork_free_never_lose_or_mix_tokens(ops, block_size, num_blocks):
    ops = [("add", 0), ("update", 0, 5), *ops]  # a start that gives forks something to share
    cache = PagedKVCache(num_blocks, block_size, 2, 3, dtype=F64)
    model: dict[int, list[float]] = {}
    counter = 0
    for op in ops:
        name, seq_id = op[0], op[1]
        snapshot = {s: list(v) for s, v in model.items()}
        free_before = cache.num_free_blocks
        if name == "add":
            if seq_id in model:
                with pytest.raises(ValueError, match="already in the cache"):
                    cache.add(seq_id)
            else:
                cache.add(seq_id)
                model[seq_id] = []
        elif name == "update":
            new = [float(counter + i + 1) for i in range(op[2])]
            counter += op[2]
            if seq_id not in model:
                with pytest.raises(ValueError, match=f"unknown seq_id {seq_id}"):
                    cache.update(seq_id, tokens(new), -tokens(new))
                continue
            length = len(model[seq_id])
            room = -length % block_size
            table = cache.block_table(seq_id)
            shared = room > 0 and new and sum(table[-1] in cache.block_table(s) for s in model) > 1
            needed = int(bool(shared)) + -(-max(0, len(new) - room) // block_size)
            if needed > free_before:
                with pytest.raises(
                    ValueError, match=f"needs {needed} more blocks, {free_before} free"
                ):
                    cache.update(seq_id, tokens(new), -tokens(new))
                assert model == snapshot and cache.num_free_blocks == free_before
            else:
                cache.update(seq_id, tokens(new), -tokens(new))
                model[seq_id] = model[seq_id] + new
                assert cache.num_free_blocks == free_before - needed
        elif name == "fork":
            child = op[2]
            if seq_id not in model:
                with pytest.raises(ValueError, match=f"unknown parent_id {seq_id}"):
                    cache.fork(seq_id, child)
            elif child in model:
                with pytest.raises(ValueError, match=f"child_id {child} is already"):
                    cache.fork(seq_id, child)
            else:
                cache.fork(seq_id, child)
                model[child] = list(model[seq_id])
                assert cache.num_free_blocks == free_before  # a fork allocates nothing
        else:
            if seq_id not in model:
                with pytest.raises(ValueError, match=f"unknown seq_id {seq_id}"):
                    cache.free(seq_id)
            else:
                cache.free(seq_id)
                del model[seq_id]
        check_pool(cache, model)
    for seq_id in list(model):
        cache.free(seq_id)
    assert sorted(cache._free) == list(range(num_blocks))  # every block back, once


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message", "error"),
    [
        ({"block_size": 0}, "PagedKVCache: block_size must be at least 1, got 0", ValueError),
        ({"num_blocks": -1}, "PagedKVCache: num_blocks must be at least 1, got -1", ValueError),
        ({"head_dim": 2.5}, "PagedKVCache: head_dim must be a positive integer", TypeError),
        (
            {"dtype": torch.int64},
            "PagedKVCache: dtype must be a floating-point torch.dtype",
            ValueError,
        ),
        ({"dtype": "float"}, "PagedKVCache: dtype must be a floating-point", TypeError),
    ],
)
def test_bad_construction_names_the_argument(kwargs, message, error):
    arguments = {"num_blocks": 4, "block_size": 2, "num_kv_heads": 1, "head_dim": 2} | kwargs
    with pytest.raises(error, match=re.escape(message)):
        PagedKVCache(**arguments)


def test_bad_ids_and_inputs_name_the_argument():
    cache = PagedKVCache(4, 2, 2, 3, dtype=F64)
    cache.add(5)
    with pytest.raises(ValueError, match=re.escape("seq_id 5 is already in the cache")):
        cache.add(5)
    with pytest.raises(ValueError, match=re.escape("unknown seq_id 6 (never added, or freed)")):
        cache.update(6, tokens([1]), tokens([1]))
    with pytest.raises(ValueError, match=re.escape("unknown parent_id 6")):
        cache.fork(6, 7)
    with pytest.raises(ValueError, match=re.escape("child_id 5 is already in the cache")):
        cache.fork(5, 5)
    with pytest.raises(TypeError, match="seq_id must be an int"):
        cache.add("a")
    with pytest.raises(TypeError, match=re.escape("keys must be a torch.Tensor, got list")):
        cache.update(5, [[0.0]], tokens([1]))
    with pytest.raises(ValueError, match=re.escape("keys must have shape (num_new, num_kv_heads")):
        cache.update(5, torch.zeros(1, 3, 3, dtype=F64), tokens([1]))
    with pytest.raises(ValueError, match=re.escape("values must be torch.float64")):
        cache.update(5, tokens([1]), tokens([1]).float())
    cache.free(5)
    with pytest.raises(ValueError, match=re.escape("unknown seq_id 5")):
        cache.free(5)
    with pytest.raises(ValueError, match=re.escape("unknown seq_id 5")):
        paged_attention(torch.zeros(1, 2, 1, 3, dtype=F64), cache, [5])


def test_paged_attention_checks_its_queries():
    cache = PagedKVCache(4, 2, 2, 3, dtype=F64)
    cache.add(0)
    with pytest.raises(ValueError, match=re.escape("seq_ids [0] hold no tokens")):
        paged_attention(torch.zeros(1, 2, 1, 3, dtype=F64), cache, [0])
    cache.update(0, tokens([1]), tokens([1]))
    with pytest.raises(ValueError, match=re.escape("(len(seq_ids), num_heads, 1, head_dim)")):
        paged_attention(torch.zeros(1, 2, 2, 3, dtype=F64), cache, [0])
    with pytest.raises(ValueError, match=re.escape("num_heads=3 (q's dimension 1)")):
        paged_attention(torch.zeros(1, 3, 1, 3, dtype=F64), cache, [0])
    with pytest.raises(ValueError, match=re.escape("q must be torch.float64")):
        paged_attention(torch.zeros(1, 2, 1, 3), cache, [0])
    with pytest.raises(TypeError, match=re.escape("q must be a torch.Tensor, got list")):
        paged_attention([[0.0]], cache, [0])
    with pytest.raises(TypeError, match=re.escape("cache must be a PagedKVCache, got dict")):
        paged_attention(torch.zeros(1, 2, 1, 3, dtype=F64), {}, [0])
    with pytest.raises(TypeError, match=re.escape("seq_ids must be a list of ints, got int")):
        paged_attention(torch.zeros(1, 2, 1, 3, dtype=F64), cache, 0)


def test_add_on_prefix_blocks_shares_them_and_writes_after_them():
    cache = PagedKVCache(6, 2, 2, 3, dtype=F64)
    cache.add(0)
    cache.update(0, tokens([1, 2, 3, 4, 5]), -tokens([1, 2, 3, 4, 5]))
    shared = cache.block_table(0)[:2]  # tokens 1-4, two full blocks
    cache.add(1, prefix_blocks=shared)
    assert cache.num_tokens(1) == 4 and [cache.references(b) for b in shared] == [2, 2]
    cache.update(1, tokens([9]), -tokens([9]))  # into a block of its own: nothing copied
    assert held(cache, 1) == [1, 2, 3, 4, 9] and held(cache, 0) == [1, 2, 3, 4, 5]
    assert cache.block_table(1)[:2] == shared and cache.num_free_blocks == 2
    cache.free(0)
    assert held(cache, 1) == [1, 2, 3, 4, 9] and cache.num_free_blocks == 3


def test_a_hold_keeps_a_block_out_of_the_pool_until_released():
    cache = PagedKVCache(3, 2, 2, 3, dtype=F64)
    cache.add(0)
    cache.update(0, tokens([1, 2]), -tokens([1, 2]))
    block = cache.block_table(0)[0]
    cache.hold(block)
    cache.free(0)
    assert cache.references(block) == 1 and cache.num_free_blocks == 2
    cache.add(1, prefix_blocks=[block])  # a held block can start a new sequence
    assert held(cache, 1) == [1, 2]
    cache.free(1)
    cache.release(block)
    assert cache.references(block) == 0 and cache.num_free_blocks == 3


def test_only_held_blocks_are_shared_and_only_holds_are_released():
    cache = PagedKVCache(3, 2, 2, 3, dtype=F64)
    with pytest.raises(ValueError, match="block 0 is free, so its numbers belong to nobody"):
        cache.add(0, prefix_blocks=[0])
    assert cache.seq_ids == []  # the refused sequence was never added
    with pytest.raises(ValueError, match="block 5 is not in the pool of 3 blocks"):
        cache.hold(5)
    with pytest.raises(TypeError, match="block must be an int"):
        cache.references(1.0)
    cache.add(0)
    cache.update(0, tokens([1, 2]), -tokens([1, 2]))
    with pytest.raises(ValueError, match="block 0 has no hold"):
        cache.release(0)  # its one reader is a sequence: free() lets it go
    assert cache.references(0) == 1
