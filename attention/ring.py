"""Ring attention: a sequence spread over processes, keys and values passed round a ring.

Each of ``world_size`` processes holds one block of the sequence's queries, keys and
values. In ``world_size`` steps, each process attends with its queries to the key/value
block it holds, merges the result into its running output with
:func:`~attention.merge.merge_attention_states`, and passes the block on to the next process
while receiving one from the previous (Liu et al., 2023, "Ring Attention with
Blockwise Transformers"). After the last step every process has exact attention over
the whole sequence for its queries, and no process ever held more than two key/value
blocks. :func:`ring_attention` runs over ``torch.distributed`` (the ``gloo`` backend on
CPUs); :func:`simulate_ring_attention` runs the same steps in one process.

With a causal mask the contiguous split is unbalanced: the last process's queries see
every block, the first's only their own. The *zigzag* order gives process ``r`` the
chunks ``r`` and ``2 * world_size - 1 - r`` of ``2 * world_size`` equal chunks, one
early and one late, so that every process computes the same number of scores
(:func:`ring_work`). Chapter 34 follows it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from attention import _checks
from attention.merge import merge_attention_states
from attention.tiled import _flag, _qkv, tiled_attention

__all__ = ["ring_attention", "ring_positions", "ring_work", "simulate_ring_attention"]

#: What ``zigzag`` means, for the error that refuses a non-bool.
_ZIGZAG = "whether each process holds an early and a late chunk"


def _chunk_starts(rank: int, world_size: int, zigzag: bool, length: int) -> list[tuple[int, int]]:
    """(local start, global start) of each chunk a rank holds, of ``length`` tokens in all."""
    if not zigzag:
        return [(0, rank * length)]
    half = length // 2
    return [(0, rank * half), (half, (2 * world_size - 1 - rank) * half)]


def _check_layout(owner: str, num_tokens: int, world_size: int, zigzag: bool) -> None:
    parts = 2 * world_size if zigzag else world_size
    if num_tokens % parts:
        order = "zigzag order: 2 chunks per process" if zigzag else "contiguous blocks"
        raise ValueError(
            f"{owner}: expected a number of tokens divisible by {parts} ({order} for "
            f"world_size={world_size}), got {num_tokens}"
        )


def ring_positions(num_tokens: int, world_size: int, *, zigzag: bool = False) -> list[torch.Tensor]:
    """The positions of the tokens each process holds, in the order it holds them.

    Parameters
    ----------
    num_tokens : int
        The whole sequence's length: a multiple of ``world_size`` (of
        ``2 * world_size`` with ``zigzag=True``).
    world_size : int
        How many processes share it.
    zigzag : bool, default False
        Contiguous blocks, or the zigzag order that balances causal attention.

    Returns
    -------
    list of torch.Tensor
        ``world_size`` int64 tensors of ``num_tokens // world_size`` positions; process
        ``r`` holds ``x[..., positions[r], :]``.

    Examples
    --------
    >>> [p.tolist() for p in ring_positions(8, 2)]
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    >>> [p.tolist() for p in ring_positions(8, 2, zigzag=True)]
    [[0, 1, 6, 7], [2, 3, 4, 5]]
    """
    owner = "ring_positions"
    num_tokens = _checks.positive_int(owner, "num_tokens", num_tokens)
    world_size = _checks.positive_int(owner, "world_size", world_size)
    _checks.flag(owner, "zigzag", zigzag, _ZIGZAG)
    _check_layout(owner, num_tokens, world_size, zigzag)
    length = num_tokens // world_size
    chunk = length // 2 if zigzag else length
    return [
        torch.cat(
            [torch.arange(g, g + chunk) for _, g in _chunk_starts(r, world_size, zigzag, length)]
        )
        for r in range(world_size)
    ]


def _ring_step(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_rank: int,
    kv_rank: int,
    world_size: int,
    causal: bool,
    zigzag: bool,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """One step: the queries of ``q_rank`` against the key/value block of ``kv_rank``.

    Returns the partial output and log-sum-exp of every local query (``-inf`` where a
    query saw none of these keys), or ``None`` if no query saw any. Only the pairs of
    chunks that a causal query can see are computed: a chunk of keys in the past is
    attended in full, the chunk on the diagonal with the causal mask, a chunk in the
    future not at all.
    """
    length = q.shape[-2]
    chunk = length // 2 if zigzag else length
    out = q.new_zeros((*q.shape[:-1], v.shape[-1]))
    lse = q.new_full(q.shape[:-1], float("-inf"))
    seen = False
    for q_local, q_global in _chunk_starts(q_rank, world_size, zigzag, length):
        outs, lses = [], []
        for k_local, k_global in _chunk_starts(kv_rank, world_size, zigzag, length):
            if causal and k_global > q_global:
                continue  # every key of this chunk is in the future of every query
            part = tiled_attention(
                q[..., q_local : q_local + chunk, :],
                k[..., k_local : k_local + chunk, :],
                v[..., k_local : k_local + chunk, :],
                causal=causal and k_global == q_global,  # the diagonal chunk
                block_size=chunk,
                return_lse=True,
            )
            outs.append(part[0])
            lses.append(part[1])
        if outs:
            rows = slice(q_local, q_local + chunk)
            out[..., rows, :], lse[..., rows] = merge_attention_states(outs, lses)
            seen = True
    return (out, lse) if seen else None


def _merge(
    state: tuple[torch.Tensor, torch.Tensor] | None, part: tuple[torch.Tensor, torch.Tensor] | None
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The running (out, lse) with one more step merged in."""
    if part is None or state is None:
        return state if part is None else part
    return merge_attention_states([state[0], part[0]], [state[1], part[1]])


def ring_work(
    num_tokens: int, world_size: int, *, causal: bool = False, zigzag: bool = False
) -> torch.Tensor:
    """How many scores each process computes at each step of the ring.

    A chunk on the diagonal counts whole, as a kernel computes the block and masks it.

    Returns
    -------
    torch.Tensor of int64, shape (world_size, world_size)
        ``work[r, s]``: the scores process ``r`` computes at step ``s``, when it holds
        the key/value block of process ``(r - s) % world_size``.

    Examples
    --------
    >>> ring_work(8, 4, causal=True)  # contiguous: the last process does all the work
    tensor([[4, 0, 0, 0],
            [4, 4, 0, 0],
            [4, 4, 4, 0],
            [4, 4, 4, 4]])
    >>> ring_work(8, 4, causal=True, zigzag=True).sum(dim=1)  # balanced
    tensor([9, 9, 9, 9])
    """
    owner = "ring_work"
    num_tokens = _checks.positive_int(owner, "num_tokens", num_tokens)
    world_size = _checks.positive_int(owner, "world_size", world_size)
    _flag(owner, "causal", causal)
    _checks.flag(owner, "zigzag", zigzag, _ZIGZAG)
    _check_layout(owner, num_tokens, world_size, zigzag)
    length = num_tokens // world_size
    chunk = length // 2 if zigzag else length
    work = torch.zeros(world_size, world_size, dtype=torch.int64)
    for r in range(world_size):
        for s in range(world_size):
            for _, q_global in _chunk_starts(r, world_size, zigzag, length):
                kv = _chunk_starts((r - s) % world_size, world_size, zigzag, length)
                work[r, s] += chunk * chunk * sum(not causal or g <= q_global for _, g in kv)
    return work


def _ring_inputs(
    owner: str, q: object, k: object, v: object, causal: object, zigzag: object
) -> None:
    _qkv(owner, q, k, v, causal)
    _checks.flag(owner, "zigzag", zigzag, _ZIGZAG)


def simulate_ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    world_size: int,
    causal: bool = False,
    zigzag: bool = False,
) -> torch.Tensor:
    """:func:`ring_attention`'s steps for ``world_size`` processes, run in this one.

    Cuts the whole sequence as :func:`ring_positions` does, runs every process's steps
    (the same step function as the distributed version) and puts the outputs back in
    the sequence's order.

    Parameters
    ----------
    q, k, v : torch.Tensor
        The whole sequence, as for :func:`~attention.tiled.tiled_attention`, with as many
        queries as keys; the length a multiple of ``world_size`` (``2 * world_size``
        with ``zigzag``).
    world_size : int
    causal, zigzag : bool, default False

    Returns
    -------
    torch.Tensor, shape (..., num_heads, num_tokens, value_dim)

    Examples
    --------
    >>> import torch
    >>> from torch.nn import functional as F
    >>> _ = torch.manual_seed(0)
    >>> q, k, v = (torch.randn(2, 16, 8, dtype=torch.float64) for _ in range(3))
    >>> out = simulate_ring_attention(q, k, v, world_size=4, causal=True, zigzag=True)
    >>> torch.allclose(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    True
    """
    owner = "simulate_ring_attention"
    _ring_inputs(owner, q, k, v, causal, zigzag)
    world_size = _checks.positive_int(owner, "world_size", world_size)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(
            f"{owner}: expected as many queries as keys (one sequence, cut into blocks), "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    _check_layout(owner, q.shape[-2], world_size, zigzag)
    positions = ring_positions(q.shape[-2], world_size, zigzag=zigzag)
    local = [tuple(t.index_select(-2, p.to(t.device)) for t in (q, k, v)) for p in positions]
    out = q.new_empty((*q.shape[:-1], v.shape[-1]))
    for r in range(world_size):
        state = None
        for s in range(world_size):
            j = (r - s) % world_size  # the block process r holds at step s
            part = _ring_step(
                local[r][0], local[j][1], local[j][2], r, j, world_size, causal, zigzag
            )
            state = _merge(state, part)
        assert state is not None  # step 0, the diagonal block, always has scores
        out[..., positions[r].to(q.device), :] = state[0]
    return out


def ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    zigzag: bool = False,
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """Attention over a sequence spread over the processes of ``torch.distributed``.

    Call it in every process of ``group`` (``gloo`` runs on CPUs),
    each with its own block of the sequence, cut as :func:`ring_positions` says. At
    step ``s`` a process attends to the key/value block that started at process
    ``(rank - s) % world_size``; while it computes, it sends that block on to process
    ``rank + 1`` and receives the next one from ``rank - 1`` (asynchronously, so
    communication and compute overlap). Each step's partial result is merged with
    :func:`~attention.merge.merge_attention_states`. Forward pass only.

    Parameters
    ----------
    q : torch.Tensor, shape (..., num_heads, block_tokens, head_dim)
    k : torch.Tensor, shape (..., num_kv_heads, block_tokens, head_dim)
    v : torch.Tensor, shape (..., num_kv_heads, block_tokens, value_dim)
        This process's tokens; the same shapes in every process (``block_tokens`` even
        with ``zigzag``).
    causal : bool, default False
        Each token sees itself and the tokens before it in the whole sequence.
    zigzag : bool, default False
        The tokens are held in the zigzag order of :func:`ring_positions`.
    group : torch.distributed.ProcessGroup, optional
        The processes that share the sequence, in the order of their ranks in it;
        default, every process (the default group).

    Returns
    -------
    torch.Tensor, shape (..., num_heads, block_tokens, value_dim)
        This process's rows of attention over the whole sequence.

    Raises
    ------
    RuntimeError
        If no process group is initialized.
    TypeError, ValueError
        For bad arguments, as :func:`~attention.tiled.tiled_attention`.

    Examples
    --------
    In each of ``world_size`` processes (``torch.multiprocessing.spawn`` starts them),
    with ``x`` the whole sequence's tensor:

    >>> import torch.distributed as dist
    >>> def worker(rank, world_size, q, k, v):  # doctest: +SKIP
    ...     dist.init_process_group("gloo", rank=rank, world_size=world_size)
    ...     mine = ring_positions(q.shape[-2], world_size, zigzag=True)[rank]
    ...     out = ring_attention(
    ...         q[..., mine, :], k[..., mine, :], v[..., mine, :], causal=True, zigzag=True
    ...     )  # equals scaled_dot_product_attention(q, k, v, is_causal=True)[..., mine, :]
    """
    owner = "ring_attention"
    _ring_inputs(owner, q, k, v, causal, zigzag)
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            f"{owner}: expected an initialized torch.distributed process group "
            f"(torch.distributed.init_process_group('gloo', ...)), got none"
        )
    if zigzag and q.shape[-2] % 2:
        raise ValueError(
            f"{owner}: expected an even number of tokens per process in the zigzag order "
            f"(two equal chunks), got {q.shape[-2]}"
        )
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError(
            f"{owner}: expected to be called in a process of group, got process "
            f"{dist.get_rank()}, which is not in it"
        )

    def peer(r: int) -> int:  # a rank in the group, as the default group numbers it
        r %= world_size
        return r if group is None else dist.get_global_rank(group, r)

    kv = torch.cat([k, v], dim=-1).contiguous()  # one message per step: keys and values
    split = k.shape[-1]
    state = None
    for s in range(world_size):
        requests = []
        if s < world_size - 1:  # pass this block on while computing with it
            incoming = torch.empty_like(kv)
            requests = [
                dist.isend(kv, peer(rank + 1), group=group),
                dist.irecv(incoming, peer(rank - 1), group=group),
            ]
        j = (rank - s) % world_size  # whose block this is
        part = _ring_step(q, kv[..., :split], kv[..., split:], rank, j, world_size, causal, zigzag)
        state = _merge(state, part)
        for request in requests:
            assert request is not None  # None only for a process outside group, refused above
            request.wait()
        if requests:
            kv = incoming
    assert state is not None  # step 0, the diagonal block, always has scores
    return state[0]
