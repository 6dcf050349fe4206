"""The engine: continuous batching with chunked prefill and automatic prefix caching.

A server cannot wait for a whole batch of requests to finish before starting the
next: answers differ in length, and the short ones would sit idle while the long
ones go on. *Continuous batching* (Orca, Yu et al., OSDI 2022; vLLM) decides again at
every step which requests run. Each step the scheduler builds one packed batch:

1. every running request brings its next tokens, in the order they were admitted:
   one token if it is generating, a *chunk* of its prompt if it is still reading it
   (*chunked prefill*: at most ``max_batch_tokens`` tokens a step, so a long prompt
   shares its steps with other requests' decode tokens instead of stalling them);
2. if the pool has too few free blocks for a running request's tokens, the request
   admitted last is *preempted*: its blocks are freed and it goes back to the front of
   the queue, to be recomputed later (vLLM's recompute preemption);
3. with tokens left in the step's budget and nothing preempted, waiting requests are
   admitted in arrival order while the pool has blocks for them. On admission a
   request takes the blocks of its prompt's longest cached prefix
   (:class:`~attention.serving.PrefixCache`) and computes only the rest.

The :class:`~attention.serving.ModelRunner` runs the batch; a request whose tokens
are all in the cache gets its next token, greedily (the highest score). Full
blocks are hashed and indexed as soon as they are written, so a request arriving one
step later can already use them. Every step leaves a :class:`StepRecord`: who ran
how many tokens, who was admitted with how many blocks found, who was preempted, and
how the pool's blocks stood.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from attention import _checks
from attention.serving.prefix import PrefixCache, block_hash
from attention.serving.runner import ModelRunner

__all__ = ["Admission", "Engine", "Request", "StepRecord"]


@dataclass
class Request:
    """One request: its prompt, how many tokens to generate, and what it has so far.

    Attributes
    ----------
    request_id : int
    prompt : list of int
    max_new_tokens : int
    output : list of int
        The tokens generated so far.
    num_computed : int
        Tokens of ``prompt + output`` whose keys and values are in the cache.
    hashes : list of int
        The hash chain of its full blocks registered so far.
    num_preemptions : int
        How many times it was preempted, its blocks freed to be computed again.
    """

    request_id: int
    prompt: list[int]
    max_new_tokens: int
    output: list[int] = field(default_factory=list)
    num_computed: int = 0
    hashes: list[int] = field(default_factory=list)
    num_preemptions: int = 0

    @property
    def tokens(self) -> list[int]:
        """The prompt and the tokens generated so far."""
        return self.prompt + self.output

    @property
    def finished(self) -> bool:
        """Whether it has generated its ``max_new_tokens`` tokens."""
        return len(self.output) >= self.max_new_tokens


@dataclass(frozen=True)
class Admission:
    """A request taken from the queue: the prompt's blocks found cached, and the rest."""

    request_id: int
    blocks_hit: int  # full blocks of its tokens found in the prefix cache
    blocks_computed: int  # blocks of its tokens it computes (the last maybe partial)


@dataclass(frozen=True)
class StepRecord:
    """What one step of the engine did.

    Attributes
    ----------
    step : int
    batch : tuple
        The packed batch in order, ``(request_id, num_tokens, kind)`` each; ``kind``
        is ``"prefill"`` (a chunk of the tokens it must compute) or ``"decode"`` (the
        token it generated last).
    admitted : tuple of Admission
    preempted : tuple of int
        The requests sent back to the queue this step, their blocks freed.
    finished : tuple of int
    used_blocks, cached_blocks, free_blocks : int
        The pool after the step: blocks requests read, blocks only the prefix cache
        holds, and free blocks.
    """

    step: int
    batch: tuple[tuple[int, int, str], ...]
    admitted: tuple[Admission, ...]
    preempted: tuple[int, ...]
    finished: tuple[int, ...]
    used_blocks: int
    cached_blocks: int
    free_blocks: int

    @property
    def num_tokens(self) -> int:
        """Tokens in the packed batch."""
        return sum(n for _, n, _ in self.batch)


class Engine:
    """Continuous batching over a :class:`~attention.serving.ModelRunner`'s paged cache.

    Parameters
    ----------
    runner : ModelRunner
    max_batch_tokens : int
        Keyword only. The most tokens one step's packed batch holds, prefill chunks
        and decode tokens together: the chunk size of chunked prefill.
    prefix_caching : bool
        Keyword only. Index full blocks by hash and reuse them on admission.

    Examples
    --------
    Two requests whose prompts share their first 8 tokens, the second arriving while
    the first is decoding: it finds 2 blocks of 4 tokens cached.

    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> _ = torch.manual_seed(0)
    >>> config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
    ...                      num_hidden_layers=2, num_attention_heads=4,
    ...                      num_key_value_heads=2)
    >>> model = LlamaForCausalLM(config).double().eval()
    >>> engine = Engine(ModelRunner(model, num_blocks=16, block_size=4), max_batch_tokens=8)
    >>> first = engine.submit(list(range(1, 11)), max_new_tokens=3)
    >>> _ = engine.step(), engine.step()  # its prompt, in chunks of 8 then 2
    >>> second = engine.submit(list(range(1, 9)) + [20, 21], max_new_tokens=3)
    >>> while engine.has_work:
    ...     _ = engine.step()
    >>> [a for record in engine.records for a in record.admitted]  # doctest: +NORMALIZE_WHITESPACE
    [Admission(request_id=0, blocks_hit=0, blocks_computed=3),
     Admission(request_id=1, blocks_hit=2, blocks_computed=1)]
    >>> alone = model.generate(torch.tensor([list(range(1, 11))]), max_new_tokens=3,
    ...                        do_sample=False)
    >>> engine.output(first) == alone[0, 10:].tolist()
    True
    """

    def __init__(
        self, runner: ModelRunner, *, max_batch_tokens: int, prefix_caching: bool = True
    ) -> None:
        owner = type(self).__name__
        if not isinstance(runner, ModelRunner):
            raise TypeError(f"{owner}: runner must be a ModelRunner, got {type(runner).__name__}")
        self.runner = runner
        self.cache = runner.cache
        self.max_batch_tokens = _checks.positive_int(owner, "max_batch_tokens", max_batch_tokens)
        _checks.flag(owner, "prefix_caching", prefix_caching, "reuse cached prefix blocks")
        self.prefix_cache = PrefixCache(self.cache) if prefix_caching else None
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.requests: dict[int, Request] = {}
        self.records: list[StepRecord] = []
        self.peak_used_blocks = 0
        self._next_id = 0

    # -- requests ----------------------------------------------------------------------

    def submit(self, prompt: Sequence[int], max_new_tokens: int) -> int:
        """Queue a request; return its id. Refused now if it could never run.

        A prompt must hold at least one token id of the model's vocabulary, and the
        request's tokens must fit in the pool when it runs alone: every token of
        ``prompt`` and of its answer but the last is cached, so it needs
        ``ceil((len(prompt) + max_new_tokens - 1) / block_size)`` blocks. A refused
        request changes nothing: the queued ones all still run.
        """
        owner = f"{type(self).__name__}.submit"
        if isinstance(prompt, (str, bytes)) or not isinstance(prompt, Sequence):
            raise TypeError(
                f"{owner}: prompt must be a list of token ids, got {type(prompt).__name__}"
            )
        what = "prompt must hold ints, token ids"
        tokens = [_checks.whole_number(owner, t, what) for t in prompt]
        if not tokens:
            raise ValueError(
                f"{owner}: prompt is empty; a request needs at least one token to start from"
            )
        vocab = self.runner.vocab_size
        outside = [t for t in tokens if not 0 <= t < vocab]
        if outside:
            raise ValueError(
                f"{owner}: prompt holds token ids outside the vocabulary (0 to {vocab - 1}): "
                f"{outside[:5]}"
            )
        max_new = _checks.positive_int(owner, "max_new_tokens", max_new_tokens)
        needed = math.ceil((len(tokens) + max_new - 1) / self.cache.block_size)
        if needed > self.cache.num_blocks:
            raise ValueError(
                f"{owner}: the request needs {needed} blocks of {self.cache.block_size} "
                f"tokens ({len(tokens)} prompt tokens + {max_new} new - 1), more than the "
                f"pool's {self.cache.num_blocks}; shorten it or build a larger pool"
            )
        request = Request(self._next_id, tokens, max_new)
        self._next_id += 1
        self.requests[request.request_id] = request
        self.waiting.append(request)
        return request.request_id

    def output(self, request_id: int) -> list[int]:
        """The tokens request ``request_id`` has generated so far."""
        return list(self.requests[request_id].output)

    @property
    def has_work(self) -> bool:
        """Whether any request waits or runs."""
        return bool(self.waiting or self.running)

    def run(self, arrivals: Sequence[tuple[int, Sequence[int], int]] = ()) -> dict[int, list[int]]:
        """Step until every request has finished; each request's generated tokens, by id.

        Parameters
        ----------
        arrivals : list of (step, prompt, max_new_tokens)
            Requests that arrive later: each is submitted just before the engine's
            step ``step`` (counting every step this engine has taken), in the order
            given, which must not go back in time. Their ids follow those already
            submitted, in that order. A step with nothing to run still counts.
        """
        owner = f"{type(self).__name__}.run"
        pending = deque(arrivals)
        what = "arrival steps must be ints"
        steps = [_checks.whole_number(owner, item[0], what) for item in pending]
        if any(later < earlier for earlier, later in itertools.pairwise(steps)):
            raise ValueError(f"{owner}: arrivals must be in order of their steps, got {steps}")
        while pending or self.has_work:
            while pending and pending[0][0] <= len(self.records):
                _, prompt, max_new_tokens = pending.popleft()
                self.submit(prompt, max_new_tokens)
            self.step()
        return {rid: list(r.output) for rid, r in self.requests.items()}

    # -- blocks ------------------------------------------------------------------------

    def _blocks_for(self, num_tokens: int) -> int:
        return math.ceil(num_tokens / self.cache.block_size)

    def _cached(self) -> int:
        return 0 if self.prefix_cache is None else self.prefix_cache.num_cached_blocks

    def _available(self, promised: int, cached: int) -> int:
        """Blocks a new write may take: free ones and evictable cached ones, less promised."""
        return self.cache.num_free_blocks + cached - promised

    def _preempt(self, request: Request) -> None:
        self.running.remove(request)
        self._release(request)
        request.num_computed = 0
        request.hashes = []
        request.num_preemptions += 1
        self.waiting.appendleft(request)  # first in line again: it arrived before the rest

    def _release(self, request: Request) -> None:
        self.cache.free(request.request_id)
        if self.prefix_cache is not None:
            # Its last blocks become the least recent: a prefix outlives its tails.
            self.prefix_cache.touch(request.hashes[::-1])

    # -- one step ----------------------------------------------------------------------

    def step(self) -> StepRecord:
        """Schedule one packed batch, run it, and take each finished prompt's next token."""
        budget = self.max_batch_tokens
        promised = 0  # blocks the scheduled tokens will take from the pool
        scheduled: list[tuple[Request, int, str]] = []
        preempted: list[int] = []
        admitted: list[Admission] = []
        cached = self._cached()  # counted again only when a preemption or admission changes it
        for request in list(self.running):
            if request not in self.running:  # preempted this step by one before it
                continue
            remaining = len(request.tokens) - request.num_computed
            kind = "decode" if remaining == 1 and request.output else "prefill"
            num = min(remaining, budget)
            if num == 0:
                continue
            held = len(self.cache.block_table(request.request_id))
            need = self._blocks_for(request.num_computed + num) - held
            while need > self._available(promised, cached):
                victim = self.running[-1]
                self._preempt(victim)
                preempted.append(victim.request_id)
                cached = self._cached()  # its blocks that the index holds are cached now
                if victim is request:
                    break
            if request not in self.running:
                continue
            scheduled.append((request, num, kind))
            promised += need
            budget -= num
        while self.waiting and budget > 0 and not preempted:
            request = self.waiting[0]
            hits = [] if self.prefix_cache is None else self.prefix_cache.match(request.tokens)
            computed = len(hits) * self.cache.block_size
            num = min(len(request.tokens) - computed, budget)
            need = self._blocks_for(computed + num) - len(hits)
            # The hit blocks are about to gain a reader: they stop being evictable.
            hit_cached = sum(self.cache.references(b) == 1 for b in hits)
            if need > self._available(promised, cached) - hit_cached:
                break
            cached -= hit_cached
            self.waiting.popleft()
            self.cache.add(request.request_id, prefix_blocks=hits)
            request.num_computed = computed
            request.hashes = [] if not hits else self._chain(request.tokens, len(hits))
            self.running.append(request)
            total_blocks = self._blocks_for(len(request.tokens))
            admitted.append(Admission(request.request_id, len(hits), total_blocks - len(hits)))
            scheduled.append((request, num, "prefill"))
            promised += need
            budget -= num
        if scheduled:
            self._run(scheduled, promised)
        finished = [r.request_id for r, _, _ in scheduled if r.finished]
        for request, _, _ in scheduled:
            if request.finished:
                self.running.remove(request)
                self._release(request)
        record = self._record(scheduled, admitted, preempted, finished)
        self.records.append(record)
        return record

    def _chain(self, tokens: list[int], num_blocks: int) -> list[int]:
        size, chain, parent = self.cache.block_size, [], None
        for i in range(num_blocks):
            parent = block_hash(parent, tokens[i * size : (i + 1) * size])
            chain.append(parent)
        return chain

    def _run(self, scheduled: list[tuple[Request, int, str]], promised: int) -> None:
        if self.prefix_cache is not None and promised > self.cache.num_free_blocks:
            self.prefix_cache.evict(promised - self.cache.num_free_blocks)
        seq_ids = [r.request_id for r, _, _ in scheduled]
        chunks = [r.tokens[r.num_computed : r.num_computed + n] for r, n, _ in scheduled]
        logits = self.runner.step(seq_ids, chunks)
        used = self.cache.num_blocks - self.cache.num_free_blocks
        if self.prefix_cache is not None:
            used -= self.prefix_cache.num_cached_blocks
        self.peak_used_blocks = max(self.peak_used_blocks, used)
        for row, (request, num, _) in enumerate(scheduled):
            request.num_computed += num
            self._register_full_blocks(request)
            if request.num_computed == len(request.tokens):  # its next token is known
                request.output.append(int(logits[row].argmax()))

    def _register_full_blocks(self, request: Request) -> None:
        if self.prefix_cache is None:
            return
        size = self.cache.block_size
        table = self.cache.block_table(request.request_id)
        tokens = request.tokens
        parent = request.hashes[-1] if request.hashes else None
        for i in range(len(request.hashes), request.num_computed // size):
            parent = block_hash(parent, tokens[i * size : (i + 1) * size])
            request.hashes.append(parent)
            self.prefix_cache.register(parent, table[i])

    def _record(
        self,
        scheduled: list[tuple[Request, int, str]],
        admitted: list[Admission],
        preempted: list[int],
        finished: list[int],
    ) -> StepRecord:
        cached = 0 if self.prefix_cache is None else self.prefix_cache.num_cached_blocks
        free = self.cache.num_free_blocks
        return StepRecord(
            step=len(self.records),
            batch=tuple((r.request_id, n, kind) for r, n, kind in scheduled),
            admitted=tuple(admitted),
            preempted=tuple(preempted),
            finished=tuple(finished),
            used_blocks=self.cache.num_blocks - free - cached,
            cached_blocks=cached,
            free_blocks=free,
        )

    # -- statistics --------------------------------------------------------------------

    @property
    def prefix_hit_rate(self) -> float:
        """Of the full blocks admitted requests' tokens hold, the share found cached."""
        hit = sum(a.blocks_hit for r in self.records for a in r.admitted)
        total = sum(a.blocks_hit + a.blocks_computed for r in self.records for a in r.admitted)
        return hit / total if total else 0.0
