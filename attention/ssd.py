"""Mamba-2's state-space duality (SSD): a selective scan that is also masked attention.

Mamba-2 (Dao and Gu, 2024, "Transformers are SSMs") keeps, per head, a state ``S`` of
shape ``(head_dim, state)``. Token ``t`` brings an input ``x_t`` (``head_dim``), a step
``dt_t > 0``, and two vectors ``B_t`` and ``C_t`` (``state``) shared by a group of
heads. The head's decay rate ``A < 0`` is fixed. Per token::

    a_t = exp(dt_t · A)                   the decay, in (0, 1]
    S_t = a_t S_{t-1} + dt_t x_t B_tᵀ     forget a little, write x_t under B_t
    y_t = S_t C_t + D x_t                 read with C_t, plus a skip

That is chapter 21's decayed linear attention with ``C`` as the query, ``B`` as the key
and ``dt · x`` as the value. Unrolled, ``y_t = Σ_{s ≤ t} L[t, s] (C_t · B_s) dt_s x_s``
with ``L[t, s] = a_{s+1} ⋯ a_t``: masked attention whose mask ``L`` is
*1-semiseparable* (:func:`~attention.semiseparable_mask`). :func:`~attention.mamba2_ssd`
computes it token by token, or in chunks: inside a chunk as masked attention, across
chunks through the state. :func:`~attention.mamba2_ssd_dual` computes the masked
attention over the whole sequence at once. :class:`~attention.Mamba2` is the layer
around it (projections, short convolution, gated RMSNorm), decoding with a
:class:`~attention.Mamba2Cache` of fixed size. All agree with ``transformers``'
pure-PyTorch path (``Mamba2Mixer``, ``NemotronHMamba2Mixer``, ``BambaMixer``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attention import _checks
from attention.cache import _check_cache, _FixedStatesBase

__all__ = [
    "GatedRMSNorm",
    "Mamba2",
    "Mamba2Cache",
    "mamba2_ssd",
    "mamba2_ssd_dual",
    "semiseparable_mask",
]

_OWNER = "mamba2_ssd"


def semiseparable_mask(log_decay: torch.Tensor) -> torch.Tensor:
    """The 1-semiseparable causal mask of a sequence of decays: ``L[t, s] = a_{s+1} ⋯ a_t``.

    Entry ``[t, s]`` is how much of what token ``s`` wrote is left in the state when
    token ``t`` reads it: the product of the decays of the tokens after ``s`` up to and
    including ``t``. It is 1 on the diagonal and 0 above it (a token does not see later
    ones). Computed as ``exp`` of sums of ``log a``, each sum taken over the tokens it
    spans (not as a difference of running totals, which loses digits when the totals
    are large).

    Parameters
    ----------
    log_decay : torch.Tensor
        ``(..., tokens)``: ``log a_t = dt_t · A``, each finite and ``≤ 0``.

    Returns
    -------
    torch.Tensor
        ``(..., tokens, tokens)``, lower triangular.

    Raises
    ------
    ValueError
        If ``log_decay`` is not a floating tensor of at least one dimension, or has an
        entry above 0 or not finite.

    Examples
    --------
    >>> import torch
    >>> semiseparable_mask(torch.tensor([0.5, 0.5, 0.25]).log())
    tensor([[1.0000, 0.0000, 0.0000],
            [0.5000, 1.0000, 0.0000],
            [0.1250, 0.2500, 1.0000]])
    """
    owner = "semiseparable_mask"
    log_decay = _checks.float_tensor(owner, "log_decay", log_decay, layout="(..., tokens)",
                                     min_rank=1)  # fmt: skip
    _check_log_decay(owner, "log_decay", log_decay)
    return _segment_sum(log_decay).exp()


def _check_log_decay(owner: str, name: str, log_decay: Tensor) -> None:
    if log_decay.numel() and not bool((torch.isfinite(log_decay) & (log_decay <= 0)).all()):
        raise ValueError(
            f"{owner}: {name} must be finite and <= 0 (the log of a decay in (0, 1]), got "
            f"values from {log_decay.min().item():.4g} to {log_decay.max().item():.4g}"
        )


def _segment_sum(log_decay: Tensor) -> Tensor:
    """``out[..., t, s] = Σ_{s < r ≤ t} log_decay[..., r]`` for ``s ≤ t``, ``-inf`` above.

    Each entry is a sum of its own terms, as ``transformers``' ``segment_sum`` takes it.
    """
    tokens = log_decay.shape[-1]
    # terms[..., r, s] = log a_r where r > s: row t's running total is then Σ_{s<r≤t}.
    terms = log_decay[..., :, None].expand(*log_decay.shape, tokens)
    after = torch.ones(tokens, tokens, dtype=torch.bool, device=log_decay.device).tril(-1)
    sums = terms.masked_fill(~after, 0).cumsum(dim=-2)
    causal = torch.ones(tokens, tokens, dtype=torch.bool, device=log_decay.device).tril()
    return sums.masked_fill(~causal, -math.inf)


def _check(
    owner: str,
    x: object,
    dt: object,
    A: object,
    B: object,
    C: object,
    D: object,
    initial_state: object,
) -> None:
    """Check :func:`mamba2_ssd`'s tensors, their shapes and their signs."""
    x = _checks.float_tensor(owner, "x", x, 4, "(batch, tokens, heads, head_dim)")
    dt = _checks.float_tensor(owner, "dt", dt, 3, "(batch, tokens, heads)")
    A = _checks.float_tensor(owner, "A", A, 1, "(heads,)")
    B = _checks.float_tensor(owner, "B", B, 4, "(batch, tokens, groups, state)")
    C = _checks.float_tensor(owner, "C", C, 4, "(batch, tokens, groups, state)")
    batch, tokens, heads, head_dim = x.shape
    if dt.shape != (batch, tokens, heads):
        raise ValueError(
            f"{owner}: dt must have shape (batch, tokens, heads) = {(batch, tokens, heads)}, "
            f"one step per token and head, got {tuple(dt.shape)}"
        )
    if A.shape != (heads,):
        raise ValueError(f"{owner}: A must have shape (heads,) = ({heads},), got {tuple(A.shape)}")
    if B.shape != C.shape or B.shape[:2] != (batch, tokens):
        raise ValueError(
            f"{owner}: B and C must have the same shape (batch, tokens, groups, state) with "
            f"the (batch, tokens) of x, {(batch, tokens)}, got B {tuple(B.shape)} and C "
            f"{tuple(C.shape)}"
        )
    what = "heads must be a multiple of groups (consecutive heads share a group's B and C)"
    _checks.divides(owner, what, heads=heads, groups=B.shape[2])
    if dt.numel() and not bool((torch.isfinite(dt) & (dt >= 0)).all()):
        raise ValueError(
            f"{owner}: dt must be finite and >= 0 (the step, after the softplus), got "
            f"values from {dt.min().item():.4g} to {dt.max().item():.4g}"
        )
    if not bool((torch.isfinite(A) & (A <= 0)).all()):
        raise ValueError(
            f"{owner}: A must be finite and <= 0 (the decay rate -exp(A_log)), got "
            f"values from {A.min().item():.4g} to {A.max().item():.4g}"
        )
    if D is not None:
        D = _checks.float_tensor(owner, "D", D, 1, "(heads,)")
        if D.shape != (heads,):
            raise ValueError(
                f"{owner}: D must have shape (heads,) = ({heads},), got {tuple(D.shape)}"
            )
    if initial_state is not None:
        layout = "(batch, heads, head_dim, state)"
        initial_state = _checks.float_tensor(owner, "initial_state", initial_state, 4, layout)
        expected = (batch, heads, head_dim, B.shape[3])
        if tuple(initial_state.shape) != expected:
            raise ValueError(
                f"{owner}: initial_state must have shape {layout} = {expected}, got "
                f"{tuple(initial_state.shape)}"
            )


def _grouped(
    x: Tensor, dt: Tensor, A: Tensor, B: Tensor, C: Tensor, work: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Heads first, split into (groups, heads per group), in ``work``'s dtype.

    Returns ``dt · x`` ``(batch, groups, per_group, tokens, head_dim)``, ``log a = dt · A``
    ``(batch, groups, per_group, tokens)``, and ``B``, ``C`` ``(batch, groups, 1, tokens,
    state)``: the heads of a group broadcast over one ``B`` and ``C`` instead of copies.
    """
    batch, tokens, heads, head_dim = x.shape
    groups = B.shape[2]
    dt = dt.to(work)
    value = (x.to(work) * dt[..., None]).permute(0, 2, 1, 3)  # (batch, heads, tokens, dim)
    log_decay = (dt * A.to(work)).transpose(1, 2)  # (batch, heads, tokens)
    value = value.reshape(batch, groups, heads // groups, tokens, head_dim)
    log_decay = log_decay.reshape(batch, groups, heads // groups, tokens)
    B, C = (m.to(work).permute(0, 2, 1, 3)[:, :, None] for m in (B, C))
    return value, log_decay, B, C


def _finish(
    y: Tensor, x: Tensor, D: Tensor | None, state: Tensor, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """``y`` ``(batch, groups, per_group, tokens, head_dim)`` back to ``x``'s layout, plus
    ``D x``; the state ``(batch, groups, per_group, head_dim, n)`` to ``(batch, heads, ...)``."""
    batch, tokens, heads, head_dim = x.shape
    y = y.reshape(batch, heads, tokens, head_dim).transpose(1, 2)
    if D is not None:
        y = y + D.to(y.dtype)[:, None] * x.to(y.dtype)
    state = state.reshape(batch, heads, *state.shape[3:])
    return y.contiguous().to(dtype), state.to(dtype)


def mamba2_ssd(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    *,
    D: torch.Tensor | None = None,
    chunk_size: int | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba-2's selective state-space scan over a sequence: ``(y, final_state)``.

    Per head, ``S_t = exp(dt_t A) S_{t-1} + dt_t x_t B_tᵀ`` and ``y_t = S_t C_t + D x_t``
    (the module's docstring). The arguments are the tensors ``transformers``' pure-PyTorch
    path (``Mamba2Mixer.torch_forward``'s ``mamba2_chunk_scan``) holds just before the
    scan, in its layout.

    Parameters
    ----------
    x : torch.Tensor
        ``(batch, tokens, heads, head_dim)``: the inputs, after the convolution.
    dt : torch.Tensor
        ``(batch, tokens, heads)``: the steps, after the softplus of ``dt + dt_bias``
        (and any clamp), each finite and ``≥ 0``.
    A : torch.Tensor
        ``(heads,)``: the decay rates ``-exp(A_log)``, each finite and ``≤ 0``.
    B, C : torch.Tensor
        ``(batch, tokens, groups, state)``: what a token writes under (``B``) and reads
        with (``C``). ``heads`` is a multiple of ``groups``; group ``g`` serves the
        consecutive heads ``g·r .. g·r + r − 1``, ``r = heads // groups``.
    D : torch.Tensor or None
        Keyword only, as the rest. ``(heads,)``: the skip, ``y_t += D x_t``. ``None``:
        no skip.
    chunk_size : int or None
        ``None`` runs the scan token by token. An integer ``≥ 1`` runs the chunked SSD:
        masked attention inside each chunk of ``chunk_size`` tokens, the state from
        chunk to chunk; the last chunk may be shorter.
    initial_state : torch.Tensor or None
        ``(batch, heads, head_dim, state)``: the state before the first token; ``None``
        starts from zeros. A previous call's ``final_state`` continues that sequence.

    Returns
    -------
    y : torch.Tensor
        ``(batch, tokens, heads, head_dim)``.
    final_state : torch.Tensor
        ``(batch, heads, head_dim, state)``: the state after the last token.

    Both in ``x``'s dtype; float16 and bfloat16 are computed in float32.

    Raises
    ------
    TypeError
        If a tensor argument is not a tensor, or ``chunk_size`` not an integer.
    ValueError
        For shapes that do not fit together, ``dt < 0``, ``A > 0``, values that are not
        finite, ``heads`` not a multiple of ``groups``, or a ``chunk_size`` below 1.

    Examples
    --------
    The scan and the chunked form give the same numbers, and the dual form too:

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> x = torch.randn(1, 7, 4, 3)  # 4 heads of 3
    >>> dt = torch.rand(1, 7, 4)  # steps > 0
    >>> A = -torch.rand(4)  # rates < 0
    >>> B, C = torch.randn(2, 1, 7, 2, 5).unbind(0)  # 2 groups, state of 5
    >>> y, state = mamba2_ssd(x, dt, A, B, C, D=torch.ones(4))
    >>> y.shape, state.shape
    (torch.Size([1, 7, 4, 3]), torch.Size([1, 4, 3, 5]))
    >>> chunked, chunked_state = mamba2_ssd(x, dt, A, B, C, D=torch.ones(4), chunk_size=3)
    >>> torch.allclose(y, chunked, atol=1e-5), torch.allclose(state, chunked_state, atol=1e-5)
    (True, True)
    >>> dual, _ = mamba2_ssd_dual(x, dt, A, B, C, D=torch.ones(4))
    >>> torch.allclose(y, dual, atol=1e-5)
    True
    """
    _check(_OWNER, x, dt, A, B, C, D, initial_state)
    chunk = None
    if chunk_size is not None:
        what = "chunk_size must be None or an integer"
        chunk = _checks.whole_number(_OWNER, chunk_size, what)
        if chunk < 1:
            raise ValueError(f"{_OWNER}: chunk_size must be at least 1 (or None), got {chunk}")
    work = torch.promote_types(x.dtype, torch.float32)  # half precision runs in float32
    if chunk is not None:
        y, state = _chunked(x, dt, A, B, C, initial_state, chunk, work)
        if D is not None:
            y = y + D.to(work)[:, None] * x.to(work)
        return y.to(x.dtype), state.to(x.dtype)
    value, log_decay, B_, C_ = _grouped(x, dt, A, B, C, work)
    y, state = _scan(value, log_decay, B_, C_, _start(x, B, initial_state, work))
    return _finish(y, x, D, state, x.dtype)


def _start(x: Tensor, B: Tensor, initial_state: Tensor | None, work: torch.dtype) -> Tensor:
    """The state before the first token, ``(batch, groups, per_group, head_dim, state)``."""
    batch, _, heads, head_dim = x.shape
    groups, size = B.shape[2], B.shape[3]
    if initial_state is None:
        return torch.zeros(batch, groups, heads // groups, head_dim, size, dtype=work,
                           device=x.device)  # fmt: skip
    return initial_state.to(work).reshape(batch, groups, heads // groups, head_dim, size)


def _scan(
    value: Tensor, log_decay: Tensor, B: Tensor, C: Tensor, state: Tensor
) -> tuple[Tensor, Tensor]:
    """Token by token; shapes as :func:`_grouped` gives them, the state as :func:`_start`."""
    decay = log_decay.exp()
    outputs = []
    for t in range(value.shape[3]):
        # S ← a_t S + (dt_t x_t) B_tᵀ, the write added in place into the fresh a_t S.
        state = state.mul(decay[..., t, None, None])
        state = state.addcmul_(value[..., t, :, None], B[..., t, None, :])
        outputs.append(state @ C[..., t, :, None])  # y_t = S_t C_t: (..., head_dim, 1)
    if not outputs:
        return value.new_zeros(value.shape), state
    return torch.cat(outputs, dim=-1).transpose(-1, -2), state


def _chunked(
    x: Tensor,
    dt: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    initial_state: Tensor | None,
    chunk: int,
    work: torch.dtype,
) -> tuple[Tensor, Tensor]:
    """Chunk by chunk: masked attention inside, the state across.

    Takes :func:`mamba2_ssd`'s layouts; returns ``y`` ``(batch, tokens, heads, head_dim)``
    without the skip, and the state ``(batch, heads, head_dim, state)``, in ``work``.

    Inside a chunk that starts from ``S_0``, with ``γ_t`` the sum of ``log a`` up to and
    including position ``t`` of the chunk and ``v = dt · x``:

    ``y_t = e^{γ_t} S_0 C_t + Σ_{s ≤ t} e^{γ_t − γ_s} (C_t · B_s) v_s`` and
    ``S_end = e^{γ_end} S_0 + Σ_s e^{γ_end − γ_s} v_s B_sᵀ``.

    The first term of ``y`` is what the chunks before left; the second is the dual form
    (:func:`mamba2_ssd_dual`) on the chunk alone. As ``transformers`` does, every
    chunk's dual form and every chunk's own contribution to the state are computed at
    once, in a few large batched products (the last chunk padded with tokens of step
    0, which neither decay nor write); only the states at the chunks' starts are
    carried from one chunk to the next, one multiply-add per chunk. The intermediate
    tensors hold a ``chunk × chunk`` mask per head and chunk, as ``transformers``'
    do.

    Arranged for a CPU, where passes over memory cost more than the multiply-adds:
    the heads of a group share ``B`` and ``C``, so the scores ``C_t · B_s`` are computed
    once per group (``transformers`` repeats ``B`` and ``C`` for every head first); the
    state is kept as ``(state, heads_in_group · head_dim)`` per group, so that reading
    it (``C S``) and writing it (``Bᵀ V``) are one matrix product over the whole group;
    and the mask is ``exp(γ_t − γ_s)``, a difference of running sums, not sums of each
    span (:func:`semiseparable_mask`), which cost a cumulative sum over a ``chunk ×
    chunk`` matrix per head. The difference loses a few digits when ``|γ|`` is large,
    as ``transformers``' own ``exp(γ_end − γ_s)`` does.
    """
    batch, tokens, heads, head_dim = x.shape
    groups, size = B.shape[2], B.shape[3]
    per_group = heads // groups
    width = per_group * head_dim
    if initial_state is None:
        state = x.new_zeros(batch, groups, size, width, dtype=work)
    else:  # (batch, heads, head_dim, size) -> (batch, groups, size, per_group · head_dim)
        state = initial_state.to(work).view(batch, groups, per_group, head_dim, size)
        state = state.permute(0, 1, 4, 2, 3).reshape(batch, groups, size, width)
    if not tokens:
        return x.new_zeros(x.shape, dtype=work), _heads_state(state, per_group, head_dim)
    pad = -tokens % chunk
    chunks = (tokens + pad) // chunk
    dt = F.pad(dt.to(work), (0, 0, 0, pad))  # padded steps of 0: no decay, no write
    # v = dt · x and log a = dt · A, heads first: (batch, groups, per_group, chunks, chunk, .)
    value = F.pad(x.to(work), (0, 0, 0, 0, 0, pad)) * dt[..., None]
    value = value.view(batch, chunks, chunk, groups, per_group, head_dim)
    value = value.permute(0, 3, 4, 1, 2, 5)
    log_decay = (dt * A.to(work)).view(batch, chunks, chunk, groups, per_group)
    gamma = log_decay.permute(0, 3, 4, 1, 2).cumsum(dim=-1)  # γ_t within each chunk
    # B and C per group and chunk: (batch, groups, chunks, chunk, size)
    B, C = (
        F.pad(m.to(work), (0, 0, 0, 0, 0, pad))
        .view(batch, chunks, chunk, groups, size)
        .permute(0, 3, 1, 2, 4)
        for m in (B, C)
    )
    # 1. Inside each chunk, the dual form: (L ∘ C Bᵀ) v, the scores once per group.
    scores = (C @ B.mT)[:, :, None]  # (batch, groups, 1, chunks, chunk, chunk)
    mask = gamma[..., :, None] - gamma[..., None, :]  # γ_t − γ_s
    grad = torch.is_grad_enabled() and any(t.requires_grad for t in (value, gamma, scores, state))
    if grad:  # exp's gradient reads its output: nothing written into it
        upper = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).triu(1)
        scores = mask.masked_fill_(upper, -math.inf).exp_() * scores
    else:  # in place; exp above the diagonal may overflow to inf, which tril_ zeroes
        scores = mask.exp_().tril_().mul_(scores)
    inside = scores @ value  # (batch, groups, per_group, chunks, chunk, head_dim)
    # 2. What each chunk writes into the state: Bᵀ (e^{γ_end − γ_s} v_s), per group.
    to_end = (gamma[..., -1:] - gamma).exp()[..., None] * value
    to_end = to_end.permute(0, 1, 3, 4, 2, 5).reshape(batch, groups, chunks, chunk, width)
    written = B.mT @ to_end  # (batch, groups, chunks, size, width)
    # 3. From chunk to chunk, the state: S ← e^{γ_end} S + written.
    decay = gamma[..., -1].exp().transpose(2, 3).repeat_interleave(head_dim, dim=-1)
    starts = []
    for index in range(chunks):
        starts.append(state)
        state = state * decay[:, :, index, None] + written[:, :, index]
    # 4. What the chunks before left: e^{γ_t} C_t S_start, every head of a group at once.
    before = C @ torch.stack(starts, dim=2)  # (batch, groups, chunks, chunk, width)
    before = before.view(batch, groups, chunks, chunk, per_group, head_dim)
    before = before * gamma.exp().permute(0, 1, 3, 4, 2)[..., None]
    y = before + inside.permute(0, 1, 3, 4, 2, 5)  # (batch, groups, chunks, chunk, ., .)
    y = y.permute(0, 2, 3, 1, 4, 5).reshape(batch, tokens + pad, heads, head_dim)
    return y[:, :tokens], _heads_state(state, per_group, head_dim)


def _heads_state(state: Tensor, per_group: int, head_dim: int) -> Tensor:
    """``(batch, groups, size, per_group · head_dim)`` to ``(batch, heads, head_dim, size)``."""
    batch, groups, size, _ = state.shape
    state = state.view(batch, groups, size, per_group, head_dim).permute(0, 1, 3, 4, 2)
    return state.reshape(batch, groups * per_group, head_dim, size)


def mamba2_ssd_dual(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    *,
    D: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The SSD's dual form: masked attention with the 1-semiseparable mask, ``(y, final_state)``.

    ``y = (L ∘ C Bᵀ) (dt · x) + D x`` per head, with ``L`` the
    :func:`~attention.semiseparable_mask` of ``log a = dt · A``: attention whose
    scores are ``C_t · B_s`` (no softmax) and whose causal mask decays. A token ``t``
    also reads ``e^{γ_t} S_0 C_t`` from an initial state ``S_0``, ``γ_t`` the sum of the
    ``log a`` up to ``t``. It builds a ``tokens × tokens`` matrix per head: quadratic
    in the length, as softmax attention is, where :func:`mamba2_ssd` is linear.

    Parameters, returns and errors as :func:`mamba2_ssd` (there is no ``chunk_size``:
    the whole sequence is one chunk).

    Examples
    --------
    One head, one group, a state of size 1 and ``dt = 1``: the scores are ``C_t B_s``,
    the mask the decays', and ``y`` the masked sum of the inputs:

    >>> import torch
    >>> x = torch.tensor([1.0, 2.0, 3.0]).view(1, 3, 1, 1)
    >>> ones = torch.ones(1, 3, 1, 1)
    >>> y, state = mamba2_ssd_dual(x, torch.ones(1, 3, 1), torch.tensor([-0.5]), ones, ones)
    >>> y.flatten()  # y_2 = e^{-1}·1 + e^{-0.5}·2 + 3
    tensor([1.0000, 2.6065, 4.5809])
    >>> state.flatten()  # the state after the last token is y_2, here
    tensor([4.5809])
    """
    owner = "mamba2_ssd_dual"
    _check(owner, x, dt, A, B, C, D, initial_state)
    work = torch.promote_types(x.dtype, torch.float32)
    value, log_decay, B_, C_ = _grouped(x, dt, A, B, C, work)
    state = _start(x, B, initial_state, work)
    if not x.shape[1]:
        return _finish(value.new_zeros(value.shape), x, D, state, x.dtype)
    gamma = log_decay.cumsum(dim=-1)
    attention = (C_ @ B_.mT) * semiseparable_mask(log_decay)  # the masked scores, L ∘ C Bᵀ
    y = attention @ value + (C_ @ state.mT) * gamma.exp()[..., None]
    to_end = (gamma[..., -1:] - gamma).exp()[..., None]
    state = gamma[..., -1, None, None].exp() * state + (to_end * value).mT @ B_
    return _finish(y, x, D, state, x.dtype)


class Mamba2Cache(_FixedStatesBase):
    """What a :class:`~attention.Mamba2` layer keeps between decoding steps: two fixed-size states.

    The short convolution's window and the SSD's state; nothing grows with the tokens
    seen. It implements :class:`~attention.Cache` as
    :class:`~attention.GatedDeltaNetCache` does: ``len(cache)`` is 0 (it holds no
    token's key or value), :attr:`nbytes` stays the same once the first pass has run,
    and :meth:`~.Cache.crop` can go back only to 0 or to ``seen_tokens``.

    The window keeps the last ``conv_size`` inputs of the convolution, as
    ``transformers``' cache (and the atlas's bill, ``Mamba.state_numbers``) does,
    though the next token reads only the last ``conv_size - 1`` of them: the two
    caches then weigh the same.

    Attributes
    ----------
    conv_state : torch.Tensor or None
        ``(batch, channels, conv_size)``: the convolution's last inputs, the inner
        channels then ``B``'s and ``C``'s (zeros before the first token). ``None``
        until the first forward pass.
    ssm_state : torch.Tensor or None
        ``(batch, heads, head_dim, state)``. ``None`` until the first forward pass.
    reindexes_positions : bool
        ``False``: there are no positions to re-index.

    Examples
    --------
    >>> import torch
    >>> layer = Mamba2(8, num_heads=2, head_dim=4, state_size=3)
    >>> cache = Mamba2Cache()
    >>> _ = layer(torch.randn(1, 5, 8), cache)
    >>> cache.seen_tokens, tuple(cache.conv_state.shape), tuple(cache.ssm_state.shape)
    (5, (1, 14, 4), (1, 2, 4, 3))
    >>> _ = layer(torch.randn(1, 1, 8), cache)  # one more token: the same sizes
    >>> cache.seen_tokens, len(cache), cache.nbytes  # (14·4 + 2·4·3) · 4 bytes
    (6, 0, 320)
    """

    _holds = "Mamba-2's convolution and SSM states"
    _layers = ("Mamba2",)

    _states = ("conv_state", "ssm_state")
    _folded = "SSM state"
    conv_state: torch.Tensor | None
    ssm_state: torch.Tensor | None

    def update(self, conv_state: torch.Tensor, ssm_state: torch.Tensor, num_new: int) -> None:
        """Replace both states by those after ``num_new`` more tokens.

        Parameters
        ----------
        conv_state : torch.Tensor, shape (batch, channels, conv_size)
            The convolution's last inputs, the new tokens' included.
        ssm_state : torch.Tensor, shape (batch, heads, head_dim, state)
            The SSD's state after the new tokens.
        num_new : int
            How many tokens the new states took in.
        """
        self._replace(num_new, conv_state=conv_state, ssm_state=ssm_state)


class GatedRMSNorm(nn.Module):
    """Mamba-2's gated RMSNorm: ``y · silu(z)``, RMS-normalised per group of channels, scaled.

    Gated *before* the norm (``mamba_ssm``'s ``norm_before_gate=False``), and normalised
    over each of ``n_groups`` groups of ``dim / n_groups`` channels, not over all
    ``dim``: each group of heads (which share ``B`` and ``C``) keeps its own scale.

    Parameters
    ----------
    dim : int
        Channels (the layer's ``inner``); a multiple of ``n_groups``.
    n_groups : int
    eps : float

    Attributes
    ----------
    weight : nn.Parameter
        ``(dim,)``, applied as is (ones at first).

    Examples
    --------
    >>> import torch
    >>> norm = GatedRMSNorm(4, n_groups=2, eps=1e-6)
    >>> y = torch.tensor([[3.0, 4.0, 1.0, 1.0]])
    >>> norm(y, torch.full_like(y, 30.0)).detach().round(decimals=3)  # silu(30) = 30
    tensor([[0.8490, 1.1310, 1.0000, 1.0000]])
    """

    def __init__(self, dim: int, n_groups: int, eps: float):
        super().__init__()
        owner = type(self).__name__
        dim, self.n_groups = _checks.sizes(owner, dim=dim, n_groups=n_groups)
        _checks.divides(owner, "dim must be a multiple of n_groups", dim=dim, n_groups=n_groups)
        self.eps = _checks.positive_number(owner, "eps", eps)
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``y`` and ``z`` ``(..., dim)`` to ``(..., dim)``."""
        gated = (y * F.silu(z)).unflatten(-1, (self.n_groups, -1))
        normed = gated * torch.rsqrt(gated.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.flatten(-2)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, n_groups={self.n_groups}, eps={self.eps}"


class Mamba2(nn.Module):
    """A Mamba-2 layer: in-projection, short convolution, the SSD, ``D``, gated RMSNorm, out.

    For an input ``x`` of shape ``(batch, tokens, d_in)``:

    1. one projection, ``in_proj``, gives the gate ``z`` (``inner = num_heads ·
       head_dim`` channels), the SSD's input ``x`` (``inner``), ``B`` and ``C``
       (``n_groups · state_size`` each) and the step's logits ``dt`` (one per head);
    2. a causal depthwise convolution of ``conv_size`` taps over ``x``, ``B`` and ``C``,
       then SiLU: each token sees the last few directly;
    3. ``dt = softplus(dt + dt_bias)``, clamped to ``time_step_limit`` when several
       tokens run at once, and ``A = −exp(A_log)``;
    4. :func:`~attention.mamba2_ssd` with the skip ``D`` (chunked for several tokens,
       the scan for one);
    5. the gated RMSNorm: ``y · silu(z)``, normalised over each group of
       ``inner / n_groups`` channels, times ``norm.weight``;
    6. ``out_proj`` back to ``d_in``.

    It computes what ``transformers``' ``Mamba2Mixer``, ``NemotronHMamba2Mixer``,
    ``BambaMixer``, ``GraniteMoeHybridMambaLayer`` and ``Zamba2MambaMixer`` compute on
    their pure-PyTorch path, whose weights it holds under the same names.

    Parameters
    ----------
    d_in : int
        Width of the input and output (``hidden_size``).
    num_heads, head_dim : int
        The SSD's heads and their size (Nemotron-H 47B: 256 of 64).
    state_size : int
        The state's size per channel (``ssm_state_size``, ``mamba_d_state``).
    n_groups : int
        Groups of ``B`` and ``C``; divides ``num_heads``.
    conv_size : int
        Taps of the convolution (``conv_kernel``, ``mamba_d_conv``).
    eps : float
        The gated RMSNorm's epsilon.
    chunk_size : int
        :func:`~attention.mamba2_ssd`'s chunk for more than one token.
    time_step_limit : tuple of two floats
        ``(low, high)``: the clamp of ``dt`` on the chunked path, as ``transformers``
        applies it there (Nemotron-H: ``(time_step_min, inf)``); the one-token step does
        not clamp, as neither ``transformers``' nor ``mamba_ssm``'s does.
    bias, conv_bias : bool
        Biases of the two projections, and of the convolution.

    Attributes
    ----------
    in_proj : nn.Linear
        ``d_in → 2 · inner + 2 · n_groups · state_size + num_heads``: ``z``, ``x``,
        ``B``, ``C``, ``dt``, in that order.
    conv1d : nn.Conv1d
        Depthwise over the ``inner + 2 · n_groups · state_size`` channels of ``x``,
        ``B`` and ``C``.
    dt_bias, A_log, D : nn.Parameter
        ``(num_heads,)`` each.
    norm : GatedRMSNorm
        The gated RMSNorm, its ``weight`` ``(inner,)``.
    out_proj : nn.Linear
        ``inner → d_in``.

    Shapes
    ------
    Input ``(batch, tokens, d_in)``; output the same. With a :class:`~attention.Mamba2Cache`
    the layer continues from the cache's states and updates them. ``padding_mask``, a
    bool ``(batch, tokens)`` that is ``False`` at padding, zeroes the padding's inputs
    and convolved inputs, as ``transformers``' ``apply_mask_to_padding_states`` does.

    Examples
    --------
    Decoding one token at a time with the cache gives the outputs of one pass:

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> layer = Mamba2(8, num_heads=4, head_dim=2, state_size=3, n_groups=2, chunk_size=4)
    >>> x = torch.randn(1, 6, 8)
    >>> full = layer(x)
    >>> cache = Mamba2Cache()
    >>> steps = torch.cat([layer(x[:, :4], cache)] + [layer(x[:, t:t + 1], cache)
    ...                                                for t in (4, 5)], dim=1)
    >>> full.shape, torch.allclose(full, steps, atol=1e-6)
    (torch.Size([1, 6, 8]), True)
    """

    def __init__(
        self,
        d_in: int,
        num_heads: int,
        head_dim: int,
        state_size: int,
        *,
        n_groups: int = 1,
        conv_size: int = 4,
        eps: float = 1e-5,
        chunk_size: int = 256,
        time_step_limit: tuple[float, float] = (0.0, math.inf),
        bias: bool = False,
        conv_bias: bool = True,
    ):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.num_heads, self.head_dim, self.state_size = _checks.sizes(
            owner, d_in=d_in, num_heads=num_heads, head_dim=head_dim, state_size=state_size
        )
        self.n_groups, self.conv_size, self.chunk_size = _checks.sizes(
            owner, n_groups=n_groups, conv_size=conv_size, chunk_size=chunk_size
        )
        what = "num_heads must be a multiple of n_groups (consecutive heads share B and C)"
        _checks.divides(owner, what, num_heads=self.num_heads, n_groups=self.n_groups)
        self.eps = _checks.positive_number(owner, "eps", eps)
        if not (isinstance(time_step_limit, tuple) and len(time_step_limit) == 2):
            raise TypeError(
                f"{owner}: time_step_limit must be a tuple (low, high), got {time_step_limit!r}"
            )
        low, high = (_checks.real_number(owner, v, "time_step_limit must hold two numbers")
                     for v in time_step_limit)  # fmt: skip
        if not 0 <= low <= high:
            raise ValueError(
                f"{owner}: time_step_limit must be (low, high) with 0 <= low <= high, got "
                f"{time_step_limit!r}"
            )
        self.time_step_limit = (low, high)
        bias = _checks.flag(owner, "bias", bias, "biases on the two projections")
        conv_bias = _checks.flag(owner, "conv_bias", conv_bias, "a bias on the convolution")
        self.inner = self.num_heads * self.head_dim
        self.channels = self.inner + 2 * self.n_groups * self.state_size
        self.in_proj = nn.Linear(self.d_in, self.inner + self.channels + self.num_heads, bias=bias)
        self.conv1d = nn.Conv1d(
            self.channels, self.channels, self.conv_size, groups=self.channels, bias=conv_bias
        )
        self.dt_bias = nn.Parameter(torch.ones(self.num_heads))
        # A in 1 .. num_heads, stored as its log, as Mamba-2 initialises it.
        self.A_log = nn.Parameter(torch.arange(1, self.num_heads + 1, dtype=torch.float).log())
        self.D = nn.Parameter(torch.ones(self.num_heads))
        self.norm = GatedRMSNorm(self.inner, self.n_groups, self.eps)
        self.out_proj = nn.Linear(self.inner, self.d_in, bias=bias)

    def extra_repr(self) -> str:
        return (
            f"d_in={self.d_in}, num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"state_size={self.state_size}, n_groups={self.n_groups}, "
            f"conv_size={self.conv_size}, chunk_size={self.chunk_size}"
        )

    def forward(
        self,
        x: torch.Tensor,
        cache: Mamba2Cache | None = None,
        padding_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Run the layer over ``x``, ``(batch, tokens, d_in)``, continuing ``cache`` if given.

        ``padding_mask``, a bool ``(batch, tokens)``, ``False`` at padding (see Shapes).
        """
        owner = type(self).__name__
        _check_cache(self, cache, Mamba2Cache, "a Mamba2Cache")
        x = _checks.module_input(self, x, d_in=self.d_in)
        batch, tokens, _ = x.shape
        real = None
        if padding_mask is not None:
            expected = (
                f"expected padding_mask, a bool tensor that is True at real tokens and "
                f"False at padding, of shape (batch, tokens) = {(batch, tokens)}"
            )
            real = _checks.bool_mask(owner, padding_mask, expected, (batch, tokens))
            real = real[..., None].to(x.dtype)
            x = x * real
        held = None if cache is None or cache.conv_state is None else cache.conv_state.shape[0]
        if held is not None and held != batch:
            raise ValueError(
                f"{owner}: the cache holds a batch of {held} sequences, got an input of "
                f"batch {batch}"
            )
        # 1. One projection: z, then the convolution's channels (x, B, C), then dt.
        z, xbc, dt = self.in_proj(x).split([self.inner, self.channels, self.num_heads], dim=-1)
        # 2. The causal convolution over the held inputs and the new ones.
        xbc = xbc.transpose(1, 2)  # (batch, channels, tokens): Conv1d's layout
        if cache is None or cache.conv_state is None:
            past = xbc.new_zeros(batch, self.channels, self.conv_size)
        else:
            past = cache.conv_state
        window = torch.cat([past, xbc], dim=-1)
        # The oldest held input is not read: conv_size - 1 before the first new token.
        xbc = F.silu(self.conv1d(window[..., 1:])).transpose(1, 2)
        if real is not None:
            xbc = xbc * real
        inputs, B, C = xbc.split([self.inner, *(2 * [self.n_groups * self.state_size])], dim=-1)
        # 3. The step and the decay rate.
        one_step = cache is not None and cache.ssm_state is not None and tokens == 1
        dt = F.softplus(dt + self.dt_bias)
        if not one_step:
            dt = dt.clamp(*self.time_step_limit)
        # 4. The SSD, from the cached state.
        state = None if cache is None else cache.ssm_state
        y, state = mamba2_ssd(
            inputs.unflatten(-1, (self.num_heads, self.head_dim)),
            dt,
            -self.A_log.exp(),
            B.unflatten(-1, (self.n_groups, self.state_size)),
            C.unflatten(-1, (self.n_groups, self.state_size)),
            D=self.D,
            chunk_size=None if tokens == 1 else self.chunk_size,
            initial_state=state,
        )
        if cache is not None:
            cache.update(window[..., window.shape[-1] - self.conv_size :], state, tokens)
        # 5. The gated norm, 6. back to d_in.
        return self.out_proj(self.norm(y.flatten(-2), z))
