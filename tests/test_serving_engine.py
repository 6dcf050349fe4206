"""The engine: continuous batching, chunked prefill, preemption and prefix caching.

Every request served must get the tokens ``transformers``' greedy ``generate`` gives
it alone, whatever else runs beside it: on a scripted trace with shared system
prompts, arrivals while others decode, a pool small enough to preempt; with chunked
prefill (and then equal to ``generate(..., prefill_chunk_size=...)``); and, as a
hypothesis property, over random arrivals, lengths, pools and step budgets. The
prefix cache's decisions (blocks hit, blocks computed) must be the ones the trace's
shared prefixes imply. Bad requests are refused on submission, and lose no other.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from serving_models import VOCAB, greedy, shared_model

from attention.serving import Admission, Engine, ModelRunner

SYSTEM = [3, 14, 15, 9, 26, 5, 35, 8, 9, 7]  # a shared system prompt of 10 tokens


def engine(num_blocks=64, block_size=4, max_batch_tokens=16, **options) -> Engine:
    runner = ModelRunner(shared_model(0), num_blocks=num_blocks, block_size=block_size)
    return Engine(runner, max_batch_tokens=max_batch_tokens, **options)


def trace() -> list[tuple[int, list[int], int]]:
    """(arrival step, prompt, max_new_tokens): system prompts, one long prompt, stragglers."""
    generator = torch.Generator().manual_seed(7)
    other = [44, 2, 19, 23, 40, 11]
    long = torch.randint(0, VOCAB, (37,), generator=generator).tolist()
    return [
        (0, [*SYSTEM, 1, 2, 3], 6),
        (0, [*other, 4, 5], 5),
        (1, [*SYSTEM, 6, 7, 8, 9, 10], 4),
        (2, long, 3),
        (4, [*SYSTEM, 1, 2, 3, 12], 6),
        (4, [17], 7),
        (9, [*other, 4, 5, 30], 2),
        (12, SYSTEM, 5),
    ]


def test_every_request_of_a_scripted_trace_gets_generates_tokens():
    served = engine(num_blocks=14, block_size=4, max_batch_tokens=12)
    outputs = served.run(trace())
    for request_id, (_, prompt, max_new) in enumerate(trace()):
        assert outputs[request_id] == greedy(prompt, max_new), f"request {request_id}"
    records = served.records
    # The trace exercised what it is meant to: packed mixes, preemption, prefix hits.
    assert any({kind for _, _, kind in r.batch} == {"prefill", "decode"} for r in records)
    assert any(r.preempted for r in records)
    assert any(a.blocks_hit for r in records for a in r.admitted)
    assert all(r.num_tokens <= 12 for r in records)
    assert served.cache.num_free_blocks + served.prefix_cache.num_cached_blocks == 14


def test_without_prefix_caching_the_tokens_are_the_same_and_nothing_is_hit():
    served = engine(num_blocks=14, block_size=4, max_batch_tokens=12, prefix_caching=False)
    outputs = served.run(trace())
    assert outputs == {i: greedy(p, n) for i, (_, p, n) in enumerate(trace())}
    assert served.prefix_hit_rate == 0.0 and served.cache.num_free_blocks == 14


@pytest.mark.parametrize("chunk", [3, 5, 8])
def test_chunked_prefill_gives_generates_tokens_with_prefill_chunk_size(chunk):
    generator = torch.Generator().manual_seed(chunk)
    prompt = torch.randint(0, VOCAB, (23,), generator=generator).tolist()
    served = engine(max_batch_tokens=chunk)
    request_id = served.submit(prompt, max_new_tokens=4)
    served.run()
    assert served.output(request_id) == greedy(prompt, 4, chunk=chunk) == greedy(prompt, 4)
    prefill = [n for r in served.records for _, n, kind in r.batch if kind == "prefill"]
    assert prefill == [chunk] * (23 // chunk) + ([23 % chunk] if 23 % chunk else [])


def test_a_long_prompts_chunks_share_their_steps_with_other_requests_decoding():
    served = engine(max_batch_tokens=6)
    short = served.submit([5, 6], max_new_tokens=8)
    served.step()
    long = served.submit(list(range(20)), max_new_tokens=2)
    served.run()
    mixed = [r.batch for r in served.records if len(r.batch) == 2]
    assert mixed[0] == ((short, 1, "decode"), (long, 5, "prefill"))
    assert served.output(short) == greedy([5, 6], 8)
    assert served.output(long) == greedy(list(range(20)), 2)


def cached_tokens(prompt: list[int], max_new: int) -> list[int]:
    """What a finished request leaves in the cache: all its tokens but the last."""
    return (prompt + greedy(prompt, max_new))[:-1]


def common_prefix(a: list[int], b: list[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def test_the_reuse_decisions_are_the_ones_the_traces_shared_prefixes_imply():
    block = 4
    requests = [(prompt, max_new) for _, prompt, max_new in trace()]
    # One at a time, each arriving after the last one finished: every block an earlier
    # request cached is still there (the pool is large) when the next one comes.
    arrivals = [(30 * i, prompt, max_new) for i, (prompt, max_new) in enumerate(requests)]
    served = engine(num_blocks=64, block_size=block)
    served.run(arrivals)
    expected = []
    for i, (prompt, _) in enumerate(requests):
        shared = max(
            (common_prefix(prompt, cached_tokens(*earlier)) for earlier in requests[:i]),
            default=0,
        )
        hit = min(shared // block, (len(prompt) - 1) // block)  # never the last token
        expected.append(Admission(i, hit, math.ceil(len(prompt) / block) - hit))
    admitted = [a for r in served.records for a in r.admitted]
    assert admitted == expected
    # Read by hand: the system prompt's two full blocks are found by every later
    # request that starts with it, three when request 4 extends request 0's prompt;
    # request 6 shares request 1's 8 prompt tokens, two blocks.
    assert [a.blocks_hit for a in admitted] == [0, 0, 2, 0, 3, 0, 2, 2]
    hit = sum(a.blocks_hit for a in expected)
    assert served.prefix_hit_rate == hit / sum(a.blocks_hit + a.blocks_computed for a in expected)


def test_cached_blocks_are_evicted_least_recently_used_when_the_pool_needs_them():
    first, second = [*SYSTEM, 1, 2, 3], [40 + i % 8 for i in range(13)]
    # Room for one request's blocks only: the second evicts the first's prefix.
    small = engine(num_blocks=4, block_size=4)
    small.run([(0, first, 1), (5, second, 1), (10, first, 1)])
    assert [a.blocks_hit for r in small.records for a in r.admitted] == [0, 0, 0]
    large = engine(num_blocks=8, block_size=4)
    large.run([(0, first, 1), (5, second, 1), (10, first, 1)])
    assert [a.blocks_hit for r in large.records for a in r.admitted] == [0, 0, 3]


def test_bad_requests_are_refused_on_submission_and_lose_no_other_request():
    served = engine(num_blocks=4, block_size=4)  # 16 tokens at most
    kept = served.submit([1, 2, 3], max_new_tokens=4)
    with pytest.raises(ValueError, match="prompt is empty"):
        served.submit([], max_new_tokens=2)
    with pytest.raises(ValueError, match=r"needs 5 blocks of 4 tokens .* pool's 4"):
        served.submit(list(range(15)), max_new_tokens=3)  # 17 tokens to cache
    with pytest.raises(ValueError, match=rf"outside the vocabulary \(0 to {VOCAB - 1}\)"):
        served.submit([1, VOCAB + 3], max_new_tokens=2)
    with pytest.raises(TypeError, match="prompt must be a list of token ids, got str"):
        served.submit("hello", max_new_tokens=2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        served.submit([1], max_new_tokens=0)
    fits = served.submit(list(range(13)), max_new_tokens=4)  # 16 tokens: exactly the pool
    assert served.run() == {kept: greedy([1, 2, 3], 4), fits: greedy(list(range(13)), 4)}
    with pytest.raises(TypeError, match="runner must be a ModelRunner"):
        Engine("runner", max_batch_tokens=4)
    with pytest.raises(ValueError, match="arrivals must be in order of their steps"):
        served.run([(3, [1], 1), (1, [2], 1)])


prompt_parts = st.lists(st.integers(0, VOCAB - 1), min_size=0, max_size=9)


@given(
    requests=st.lists(
        st.tuples(
            st.integers(0, 6),  # arrival step
            st.sampled_from([[], SYSTEM[:6], SYSTEM]),  # a shared prefix, or none
            prompt_parts,
            st.integers(1, 5),  # max_new_tokens
        ),
        min_size=1,
        max_size=5,
    ),
    block_size=st.integers(2, 4),
    spare_blocks=st.integers(0, 6),
    max_batch_tokens=st.integers(1, 12),
)
def test_every_request_finishes_with_the_tokens_it_gets_alone(
    requests, block_size, spare_blocks, max_batch_tokens
):
    arrivals = sorted(
        ((step, prefix + rest or [1], max_new) for step, prefix, rest, max_new in requests),
        key=lambda arrival: arrival[0],
    )
    # The pool fits the largest request alone, plus a few blocks: often it preempts.
    largest = max(math.ceil((len(p) + n - 1) / block_size) for _, p, n in arrivals)
    served = engine(largest + spare_blocks, block_size, max_batch_tokens)
    outputs = served.run(arrivals)
    assert outputs == {i: greedy(p, n) for i, (_, p, n) in enumerate(arrivals)}
    assert not served.running and not served.waiting
    assert served.cache.num_free_blocks + served.prefix_cache.num_cached_blocks == (
        largest + spare_blocks
    )
