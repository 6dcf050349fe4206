"""Automatic prefix caching: block hashes and the index of cached blocks.

:func:`block_hash` must name a block as ``transformers``' continuous batching does
(``compute_block_hash``), chain and all; :class:`PrefixCache` must find a prompt's
longest cached prefix of full blocks, hold what it indexes, and evict the least
recently used blocks that no request reads.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers.generation.continuous_batching.cache_allocators.cache_allocator import (
    compute_block_hash,
)

from attention import PagedKVCache
from attention.serving import PrefixCache, block_hash, block_hashes

token_lists = st.lists(st.integers(0, 2**31 - 1), min_size=0, max_size=40)


@given(tokens=token_lists, block_size=st.integers(1, 8))
def test_the_hash_chain_equals_transformers_compute_block_hash(tokens, block_size):
    theirs, parent = [], None
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = compute_block_hash(parent, tokens[start : start + block_size])
        theirs.append(parent)
    assert block_hashes(tokens, block_size) == theirs
    if theirs:
        assert block_hash(None, tokens[:block_size]) == theirs[0]


def test_a_block_hash_depends_on_its_whole_past_not_only_its_tokens():
    same_block = [7, 8, 9, 10]
    after_a = block_hash(block_hash(None, [1, 2, 3, 4]), same_block)
    after_b = block_hash(block_hash(None, [1, 2, 3, 5]), same_block)
    assert after_a != after_b
    assert after_a == block_hashes([1, 2, 3, 4, *same_block], 4)[1]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: block_hash(None, "abcd"), TypeError, "tokens must be a list of ints"),
        (lambda: block_hash(None, [1.5]), TypeError, "tokens must hold ints"),
        (lambda: block_hash(-1, [1]), ValueError, r"unsigned 64-bit int.*got -1"),
        (lambda: block_hash(2**64, [1]), ValueError, "unsigned 64-bit"),
        (lambda: block_hashes([1, 2], 0), ValueError, "block_size"),
        (lambda: PrefixCache("pool"), TypeError, "cache must be a PagedKVCache, got str"),
    ],
)
def test_bad_input_is_refused_with_what_was_expected(call, error, match):
    with pytest.raises(error, match=match):
        call()


def written(cache: PagedKVCache, seq_id: int, num_tokens: int) -> list[int]:
    cache.add(seq_id)
    values = torch.full((num_tokens, 1, 1), float(seq_id))
    cache.update(seq_id, values, values)
    return cache.block_table(seq_id)


def test_match_finds_the_longest_cached_prefix_and_never_the_last_token():
    cache = PagedKVCache(num_blocks=8, block_size=4, num_kv_heads=1, head_dim=1)
    index = PrefixCache(cache)
    prompt = list(range(12))
    table = written(cache, 0, 12)
    for hash_, block in zip(block_hashes(prompt, 4), table, strict=True):
        assert index.register(hash_, block)
    assert index.match([*prompt, 99]) == table  # all three blocks, then a token to compute
    assert index.match(prompt) == table[:2]  # the last token must be computed: 2 blocks
    assert index.match(prompt, keep_last=False) == table
    assert index.match([0, 1, 2, 3, 4, 5, 6, 0, 8]) == table[:1]  # a miss in block 1
    assert index.match([5, *prompt]) == []


def test_indexed_blocks_outlive_their_request_and_go_least_recently_used_first():
    cache = PagedKVCache(num_blocks=6, block_size=2, num_kv_heads=1, head_dim=1)
    index = PrefixCache(cache)
    tables = {}
    for seq_id, prompt in ((0, [1, 2, 3, 4]), (1, [5, 6, 7, 8])):
        tables[seq_id] = written(cache, seq_id, 4)
        for hash_, block in zip(block_hashes(prompt, 2), tables[seq_id], strict=True):
            index.register(hash_, block)
    # A duplicate hash keeps the first block; the second stays its request's own.
    assert not index.register(block_hashes([1, 2], 2)[0], tables[1][0])
    assert [cache.references(b) for b in tables[0]] == [2, 2]  # the request and the index
    cache.free(0)
    cache.free(1)
    assert index.num_cached_blocks == 4 and cache.num_free_blocks == 2
    index.match([1, 2, 3, 4, 9])  # request 0's blocks are used again: now the most recent
    assert index.evict(2) == 2  # request 1's two blocks go first
    assert index.match([5, 6, 7, 8, 9]) == []
    assert index.match([1, 2, 3, 4, 9]) == tables[0]
    assert cache.num_free_blocks == 4


def test_a_block_a_request_still_reads_is_never_evicted():
    cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1)
    index = PrefixCache(cache)
    table = written(cache, 0, 4)
    for hash_, block in zip(block_hashes([1, 2, 3, 4], 2), table, strict=True):
        index.register(hash_, block)
    assert index.num_cached_blocks == 0
    assert index.evict(4) == 0
    assert len(index) == 2 and cache.num_free_blocks == 2
    cache.free(0)
    index.clear()
    assert len(index) == 0 and cache.num_free_blocks == 4
