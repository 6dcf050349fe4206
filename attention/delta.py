"""The gated delta rule (Gated DeltaNet): linear attention that corrects and forgets.

Linear attention adds ``k_t v_tᵀ`` to its state ``S`` at every token, so the state only
grows and old associations blur into new ones. The delta rule (Schlag et al., 2021;
DeltaNet, Yang et al., 2024) writes the *error* instead: it reads what the state
already stores under ``k_t``, ``S_{t-1}ᵀ k_t``, and moves it towards ``v_t`` by a step
``β_t`` in [0, 1]. Gated DeltaNet (Yang, Kautz and Hatamizadeh, ICLR 2025) first decays
the whole state by ``α_t = exp(g_t)`` (Mamba-2's gate, ``g_t ≤ 0``). Per token and value
head, with ``S`` of shape ``(dim_k, dim_v)``::

    S ← α_t S                             forget
    S ← S + β_t k_t (v_t − Sᵀ k_t)ᵀ       correct what S returns for k_t
    o_t = Sᵀ q_t                          read

that is ``S_t = α_t (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ``. Qwen3-Next and Qwen3.5
use it in three layers out of four. :func:`~attention.gated_delta_rule` computes it token by token
(``chunk_size=None``) or in chunks (the WY / UT-transform form that hardware prefers: a
triangular solve and matrix products inside each chunk, and the recurrence only from
chunk to chunk). The two agree with ``transformers``' pure-PyTorch fallbacks,
``torch_recurrent_gated_delta_rule`` and ``torch_chunk_gated_delta_rule``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attention import _checks
from attention.cache import _check_cache, _FixedStatesBase
from attention.norms import RMSNorm

__all__ = ["GatedDeltaNet", "GatedDeltaNetCache", "gated_delta_rule"]

_OWNER = "gated_delta_rule"
#: Added to the squared norm before the inverse square root, as transformers' ``l2norm``.
L2NORM_EPS = 1e-6


def l2_normalise(x: torch.Tensor) -> torch.Tensor:
    """``x * rsqrt(sum(x²) + 1e-6)`` over the last dimension, as ``transformers``' ``l2norm``."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + L2NORM_EPS)


def _check(
    q: object,
    k: object,
    v: object,
    g: object,
    beta: object,
    initial_state: object,
    chunk_size: object,
) -> int | None:
    """Check the arguments of :func:`~attention.gated_delta_rule`; return the chunk size or None."""
    qk_layout = "(batch, tokens, heads_k, dim_k)"
    gate_layout = "(batch, tokens, heads_v)"
    q = _checks.float_tensor(_OWNER, "q", q, 4, qk_layout)
    k = _checks.float_tensor(_OWNER, "k", k, 4, qk_layout)
    v = _checks.float_tensor(_OWNER, "v", v, 4, "(batch, tokens, heads_v, dim_v)")
    g = _checks.float_tensor(_OWNER, "g", g, 3, gate_layout)
    beta = _checks.float_tensor(_OWNER, "beta", beta, 3, gate_layout)
    if q.shape != k.shape:
        raise ValueError(
            f"{_OWNER}: q and k must have the same shape {qk_layout}, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}"
        )
    batch, tokens, heads_k, dim_k = k.shape
    if v.shape[:2] != (batch, tokens):
        raise ValueError(
            f"{_OWNER}: v must have the (batch, tokens) of k, {(batch, tokens)}, "
            f"got v of shape {tuple(v.shape)}"
        )
    heads_v, dim_v = v.shape[2], v.shape[3]
    what = (
        "heads_v must be a multiple of heads_k (each q/k head serves heads_v // heads_k "
        "value heads)"
    )
    _checks.divides(_OWNER, what, heads_v=heads_v, heads_k=heads_k)
    for name, x in (("g", g), ("beta", beta)):
        if x.shape != (batch, tokens, heads_v):
            raise ValueError(
                f"{_OWNER}: {name} must have shape {gate_layout} = "
                f"{(batch, tokens, heads_v)} (one per value head), got {tuple(x.shape)}"
            )
    if g.numel() and not bool((torch.isfinite(g) & (g <= 0)).all()):
        raise ValueError(
            f"{_OWNER}: g must be finite and <= 0 (it is the log of the decay exp(g) in "
            f"(0, 1]), got values from {g.min().item():.4g} to {g.max().item():.4g}"
        )
    if beta.numel() and not bool(((beta >= 0) & (beta <= 1)).all()):
        raise ValueError(
            f"{_OWNER}: beta must be in [0, 1] (the write strength), got values from "
            f"{beta.min().item():.4g} to {beta.max().item():.4g}"
        )
    if initial_state is not None:
        layout = "(batch, heads_v, dim_k, dim_v)"
        initial_state = _checks.float_tensor(_OWNER, "initial_state", initial_state, 4, layout)
        expected = (batch, heads_v, dim_k, dim_v)
        if tuple(initial_state.shape) != expected:
            raise ValueError(
                f"{_OWNER}: initial_state must have shape (batch, heads_v, dim_k, dim_v) = "
                f"{expected}, got {tuple(initial_state.shape)}"
            )
    if chunk_size is None:
        return None
    number = _checks.whole_number(_OWNER, chunk_size, "chunk_size must be None or an integer")
    if number < 1:
        raise ValueError(f"{_OWNER}: chunk_size must be at least 1 (or None), got {number}")
    return number


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    *,
    initial_state: torch.Tensor | None = None,
    chunk_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule over a sequence: ``(output, final_state)``.

    Per value head, ``S_t = exp(g_t) (I − β_t k_t k_tᵀ) S_{t-1} + β_t k_t v_tᵀ`` and
    ``o_t = S_tᵀ q_t``, after ``q`` and ``k`` are L2-normalised as ``transformers``'
    ``l2norm`` does (``x * rsqrt(sum(x²) + 1e-6)``) and ``q`` is scaled by
    ``1 / sqrt(dim_k)``: what Qwen3-Next's layer computes
    (``use_qk_l2norm_in_kernel=True``).

    Parameters
    ----------
    q, k : torch.Tensor
        Queries and keys, ``(batch, tokens, heads_k, dim_k)``.
    v : torch.Tensor
        Values, ``(batch, tokens, heads_v, dim_v)``. ``heads_v`` is a multiple of
        ``heads_k``; q/k head ``h`` serves the consecutive value heads
        ``h * r .. h * r + r - 1`` with ``r = heads_v // heads_k``, as
        ``repeat_interleave`` (and ``transformers``) does.
    g : torch.Tensor
        The log decay, ``(batch, tokens, heads_v)``, every entry finite and ``≤ 0``: the
        state is multiplied by ``exp(g_t)`` before token ``t`` writes.
    beta : torch.Tensor
        The write strength, ``(batch, tokens, heads_v)``, in ``[0, 1]``.
    initial_state : torch.Tensor or None
        Keyword only, as is ``chunk_size``. The state before the first token,
        ``(batch, heads_v, dim_k, dim_v)``; ``None`` starts from zeros. Pass a previous
        call's ``final_state`` to continue a sequence.
    chunk_size : int or None
        ``None`` runs the recurrence token by token. An integer ``≥ 1`` runs the chunked
        form, ``chunk_size`` tokens at a time; the last chunk is padded with tokens
        that neither decay nor write, so any length works.

    Returns
    -------
    output : torch.Tensor
        ``(batch, tokens, heads_v, dim_v)``.
    final_state : torch.Tensor
        ``(batch, heads_v, dim_k, dim_v)``, the state after the last token.

    Both come in the dtype of ``q``; float16 and bfloat16 inputs are computed in float32.

    Raises
    ------
    ValueError
        For shapes that do not fit together, ``g > 0``, ``beta`` outside ``[0, 1]``,
        ``heads_v`` not a multiple of ``heads_k``, or a ``chunk_size`` below 1.

    Examples
    --------
    The chunked form gives the recurrence's numbers, and a sequence run in two parts,
    the second from the first's state, gives one run's numbers:

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> q, k = torch.randn(2, 1, 6, 2, 4).unbind(0)  # (batch, tokens, heads_k, dim_k)
    >>> v = torch.randn(1, 6, 4, 3)  # 4 value heads: 2 per q/k head
    >>> g = -torch.rand(1, 6, 4)  # log decay <= 0
    >>> beta = torch.rand(1, 6, 4)
    >>> out, state = gated_delta_rule(q, k, v, g, beta)
    >>> out.shape, state.shape
    (torch.Size([1, 6, 4, 3]), torch.Size([1, 4, 4, 3]))
    >>> chunked, chunked_state = gated_delta_rule(q, k, v, g, beta, chunk_size=4)
    >>> torch.allclose(out, chunked, atol=1e-5), torch.allclose(state, chunked_state, atol=1e-5)
    (True, True)
    >>> first, mid = gated_delta_rule(q[:, :2], k[:, :2], v[:, :2], g[:, :2], beta[:, :2])
    >>> later = (x[:, 2:] for x in (q, k, v, g, beta))
    >>> rest, end = gated_delta_rule(*later, initial_state=mid)
    >>> torch.allclose(torch.cat([first, rest], dim=1), out, atol=1e-6)
    True
    """
    chunk = _check(q, k, v, g, beta, initial_state, chunk_size)
    dtype = q.dtype
    work = torch.promote_types(dtype, torch.float32)  # half precision runs in float32
    batch, _, _, dim_k = k.shape
    heads_v, dim_v = v.shape[2], v.shape[3]
    if initial_state is None:
        state = torch.zeros(batch, heads_v, dim_k, dim_v, dtype=work, device=q.device)
    else:
        state = initial_state.to(work)

    if chunk is None:
        out, state = _recurrent(*_heads_first(q, k, v, g, beta, work), state)
        out = out.transpose(1, 2)  # back to (batch, tokens, heads_v, dim_v)
    else:
        out, state = _chunked(q, k, v, g, beta, state, chunk, work)
    return out.contiguous().to(dtype), state.to(dtype)


def _heads_first(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, work: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Prepare tokens for the delta rule: normalised q and k, every head with its own q/k.

    Takes the layouts of :func:`~attention.gated_delta_rule`, for all its tokens or a
    slice of them (each token is prepared on its own), and returns, in ``work``'s dtype,
    q and k ``(batch, heads_v, tokens, dim_k)``, v ``(batch, heads_v, tokens, dim_v)``,
    g and beta ``(batch, heads_v, tokens)``.
    """
    dim_k = k.shape[-1]
    group = v.shape[2] // k.shape[2]
    # Normalise before repeating the heads: the same numbers, on fewer of them.
    q = l2_normalise(q.to(work)) / dim_k**0.5
    k = l2_normalise(k.to(work))
    # Give every value head its q/k head, consecutive value heads sharing one.
    q, k = (x.repeat_interleave(group, dim=2) if group > 1 else x for x in (q, k))
    return (
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.to(work).transpose(1, 2),
        g.to(work).transpose(1, 2),
        beta.to(work).transpose(1, 2),
    )


def _recurrent(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor
) -> tuple[Tensor, Tensor]:
    """Token by token. Shapes as :func:`_heads_first` returns them; out ``(batch, heads_v,
    tokens, dim_v)``.

    The steps of the module's docstring (forget, correct, read), arranged so that each
    token goes through the state only twice: one small matrix product reads what the
    state before the token returns for q_t and k_t, and one multiply-add writes the
    update. The state, ``dim_k × dim_v`` numbers per head, is the big tensor here; a
    broadcast product such as ``(k_t[..., None] * S).sum(-2)`` would build a
    state-sized temporary for every read, and on a CPU that memory traffic, not the
    arithmetic, sets the time.
    """
    alpha = g.exp()  # the decays α_t = e^{g_t}: (batch, heads_v, tokens)
    qk = torch.stack([q, k], dim=-2)  # (batch, heads_v, tokens, 2, dim_k): q_t, k_t as rows
    q_dot_k = (q * k).sum(dim=-1)  # q_t · k_t
    outputs = []
    for t in range(q.shape[2]):
        a = alpha[:, :, t, None, None]
        # From the state S before token t: α_t q_tᵀS and α_t k_tᵀS, (batch, heads_v, 2, dim_v).
        read = a * (qk[:, :, t] @ state)
        error = beta[:, :, t, None, None] * (v[:, :, t, None] - read[..., 1:, :])  # β (v − (αS)ᵀk)
        # o_t = (α S + k errorᵀ)ᵀ q = α Sᵀq + (q · k) error, without reading the new state.
        outputs.append(read[..., :1, :] + q_dot_k[:, :, t, None, None] * error)
        # S ← α S + k errorᵀ, added in place into the fresh tensor α S: no state-sized
        # temporary for k errorᵀ. (Autograd allows it: nothing saved α S.)
        state = state.mul(a).addcmul_(k[:, :, t, :, None], error)
    if not outputs:
        return v.new_zeros(v.shape), state
    return torch.cat(outputs, dim=2), state


def _chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    state: Tensor,
    chunk: int,
    work: torch.dtype,
) -> tuple[Tensor, Tensor]:
    """Chunk by chunk, with the UT transform inside each chunk.

    Takes the arguments of :func:`~attention.gated_delta_rule` as given and returns the
    output as ``(batch, tokens, heads_v, dim_v)``, in ``work``'s dtype.

    Inside a chunk that starts from the state ``S_0``, write ``γ_t`` for the sum of the
    ``g`` up to and including position ``t`` of the chunk, and ``u_s`` for the vector
    that token ``s`` writes (``S`` gains ``k_s u_sᵀ``). Unrolling the recurrence,

    ``S_t = e^{γ_t} S_0 + Σ_{s ≤ t} e^{γ_t − γ_s} k_s u_sᵀ``,

    and ``u_t = β_t (v_t − (α_t S_{t−1})ᵀ k_t)`` becomes the triangular system

    ``u_t + β_t Σ_{s < t} e^{γ_t − γ_s} (k_t · k_s) u_s = β_t (v_t − e^{γ_t} S_0ᵀ k_t)``,

    i.e. ``(I + A) U = β (V − e^γ K S_0)``, ``A`` strictly lower triangular: one
    triangular solve gives every token's write. Then

    ``o_t = e^{γ_t} S_0ᵀ q_t + Σ_{s ≤ t} e^{γ_t − γ_s} (q_t · k_s) u_s`` and
    ``S_C = e^{γ_C} S_0 + Σ_s e^{γ_C − γ_s} k_s u_sᵀ``.

    ``transformers`` (and the fast kernels of flash-linear-attention) instead solve for
    ``W_v = (I + A)⁻¹ β V`` and ``W_k = (I + A)⁻¹ β e^γ K`` for every chunk up front and
    take ``U = W_v − W_k S_0`` in the loop: on a GPU that moves the solves off the
    sequential path. On a CPU every step runs one after the other anyway, and solving
    for ``U`` directly does half the triangular work.

    The chunks are computed one at a time, from preparing their tokens to the output,
    so that the intermediate tensors (``chunk × chunk`` matrices and ``chunk × dim``
    blocks per head) stay small enough for the CPU's caches. Computing every chunk's
    tensors at once costs several passes through main memory over sequence-sized
    tensors, and on a CPU those, not the multiply-adds, took most of the time. The
    last chunk may be shorter: its tokens simply end earlier.
    """
    batch, tokens, heads_v, dim_v = v.shape
    out = torch.empty(batch, tokens, heads_v, dim_v, dtype=work, device=v.device)
    # later[t, s]: s comes after t in the chunk, where the decays e^{γ_t − γ_s} are 0.
    later = torch.ones(chunk, chunk, dtype=torch.bool, device=v.device).triu(1)
    for start in range(0, tokens, chunk):
        part = slice(start, start + chunk)
        # (batch, heads_v, size, dim) and (batch, heads_v, size), size ≤ chunk.
        q_c, k_c, v_c, g_c, beta_c = _heads_first(
            q[:, part], k[:, part], v[:, part], g[:, part], beta[:, part], work
        )
        size = g_c.shape[-1]
        gamma = g_c.cumsum(dim=-1)  # γ_t
        from_start = gamma.exp()[..., None]  # e^{γ_t}, the decay since the chunk began
        # decay[t, s] = e^{γ_t − γ_s} for s ≤ t, 0 above the diagonal: (..., size, size).
        decay = gamma[..., :, None] - gamma[..., None, :]
        decay = decay.masked_fill(later[:size, :size], float("-inf")).exp()
        # A[t, s] = β_t e^{γ_t − γ_s} (k_t · k_s). Only its strictly lower triangle is
        # read: the solve takes the diagonal of I + A as ones (unitriangular).
        system = (k_c @ k_c.mT) * decay * beta_c[..., None]
        # Solve (I + A) U = β (V − e^γ K S_0): what each token writes, (..., size, dim_v).
        right = beta_c[..., None] * (v_c - from_start * (k_c @ state))
        written = torch.linalg.solve_triangular(system, right, upper=False, unitriangular=True)
        # o_t = e^{γ_t} S_0ᵀ q_t + Σ_{s ≤ t} e^{γ_t − γ_s} (q_t · k_s) u_s
        scores = (q_c @ k_c.mT) * decay
        read = from_start * (q_c @ state) + scores @ written
        out[:, part] = read.transpose(1, 2)
        # S ← e^{γ_C} S_0 + Σ_s e^{γ_C − γ_s} k_s u_sᵀ
        to_end = (gamma[..., -1:] - gamma).exp()[..., None]  # e^{γ_C − γ_s}
        state = gamma[..., -1, None, None].exp() * state + (to_end * k_c).mT @ written
    return out, state


class GatedDeltaNetCache(_FixedStatesBase):
    """What a :class:`~attention.GatedDeltaNet` keeps between decoding steps: two fixed-size states.

    Unlike a :class:`~attention.KVCache`, nothing here grows with the tokens seen: the
    short convolution needs the last ``conv_size - 1`` inputs it convolved, and the
    delta rule needs its state. The layer reads both, then hands the new ones to
    :meth:`update`. It implements :class:`~attention.Cache`: :attr:`~.Cache.seen_tokens`
    counts the tokens the layer has read, but the cache holds no token's own key or
    value, only the states they were folded into, so ``len(cache)`` is 0 and
    :attr:`nbytes` stays the same whatever it has seen. It cannot go back, since the
    state has folded every token in: :meth:`~.Cache.crop` raises, but to ``seen_tokens``
    (nothing to forget) or 0 (it empties the cache).

    Attributes
    ----------
    conv_state : torch.Tensor or None
        ``(batch, channels, conv_size - 1)``: the last inputs of the convolution, the
        queries', keys' and values' channels side by side (zeros before the first
        token). ``None`` until the first forward pass.
    recurrent_state : torch.Tensor or None
        ``(batch, heads_v, dim_k, dim_v)``, the delta rule's state. ``None`` until the
        first forward pass.
    reindexes_positions : bool
        ``False``: the layer has no positions to re-index.

    Examples
    --------
    >>> import torch
    >>> layer = GatedDeltaNet(8, num_key_heads=1, num_value_heads=2, key_head_dim=4,
    ...                       value_head_dim=3)
    >>> cache = GatedDeltaNetCache()
    >>> _ = layer(torch.randn(1, 5, 8), cache)
    >>> cache.seen_tokens, tuple(cache.conv_state.shape), tuple(cache.recurrent_state.shape)
    (5, (1, 14, 3), (1, 2, 4, 3))
    >>> _ = layer(torch.randn(1, 1, 8), cache)  # one more token: the same sizes
    >>> cache.seen_tokens, len(cache), cache.nbytes
    (6, 0, 264)
    """

    _holds = "Gated DeltaNet's convolution and recurrent states"
    _layers = ("GatedDeltaNet",)

    _states = ("conv_state", "recurrent_state")
    _folded = "recurrent state"
    conv_state: torch.Tensor | None
    recurrent_state: torch.Tensor | None

    def update(self, conv_state: torch.Tensor, recurrent_state: torch.Tensor, num_new: int) -> None:
        """Replace both states by those after ``num_new`` more tokens.

        Parameters
        ----------
        conv_state : torch.Tensor, shape (batch, channels, conv_size - 1)
            The convolution's last inputs, the new tokens' included.
        recurrent_state : torch.Tensor, shape (batch, heads_v, dim_k, dim_v)
            The delta rule's state after the new tokens.
        num_new : int
            How many tokens the new states took in.
        """
        self._replace(num_new, conv_state=conv_state, recurrent_state=recurrent_state)


class GatedDeltaNet(nn.Module):
    """Qwen3-Next's Gated DeltaNet layer: projections, a short convolution, gates, the delta rule.

    For an input ``x`` of shape ``(batch, tokens, d_in)``:

    1. project ``x`` to queries and keys (``num_key_heads × key_head_dim`` each),
       values and the output gate ``z`` (``num_value_heads × value_head_dim`` each),
       and per value head the write strength's and the decay's logits ``b`` and ``a``;
    2. run a causal depthwise convolution of ``conv_size`` taps over the queries', keys'
       and values' channels, then SiLU (each token sees the last few tokens directly);
    3. ``beta = sigmoid(b)`` and ``g = −exp(A_log) · softplus(a + dt_bias)`` (Mamba-2's
       discretised decay, ``g ≤ 0``);
    4. :func:`~attention.gated_delta_rule` (chunked for several tokens, token by token to decode);
    5. per value head, the gated RMSNorm ``RMSNorm(o) · weight · silu(z)``;
    6. the output projection back to ``d_in``.

    Parameters
    ----------
    d_in : int
        Width of the input and the output (``hidden_size``).
    num_key_heads, num_value_heads : int
        Heads of the queries and keys, and of the values; ``num_value_heads`` is a
        multiple of ``num_key_heads`` (Qwen3-Next: 16 and 32).
    key_head_dim, value_head_dim : int
        Qwen3-Next: 128 and 128.
    conv_size : int
        Taps of the causal convolution (``linear_conv_kernel_dim``, 4).
    eps : float
        The gated RMSNorm's epsilon (``rms_norm_eps``).
    chunk_size : int
        The chunk size of :func:`~attention.gated_delta_rule` for more than one token (64, as
        ``transformers``).

    Attributes
    ----------
    W_query, W_key, W_value, W_gate : nn.Linear
        No bias. ``W_gate`` gives ``z``, the gate of the output norm.
    W_beta, W_decay : nn.Linear
        ``d_in → num_value_heads``, no bias: the logits ``b`` and ``a``.
    conv : nn.Conv1d
        Depthwise, no bias, over the ``2 · num_key_heads · key_head_dim +
        num_value_heads · value_head_dim`` channels of the queries, keys and values in
        that order.
    A_log, dt_bias : nn.Parameter
        ``(num_value_heads,)`` each: the decay rate's log and the time step's bias.
    norm : RMSNorm
        Over ``value_head_dim``, with its ``weight`` (applied as is, not as ``1 + w``).
    out_proj : nn.Linear
        ``num_value_heads · value_head_dim → d_in``, no bias.

    Shapes
    ------
    Input ``(batch, tokens, d_in)``; output the same. With a :class:`~attention.GatedDeltaNetCache`
    the layer continues from the cache's states and updates them in place.
    ``padding_mask``, a bool ``(batch, tokens)`` that is ``False`` at padding (as
    :func:`~attention.padding_mask` gives it), zeroes the padding's inputs before
    anything else: a mask over the inputs, not the attention layers' ``allowed``, which
    says which keys a query may attend to. It is done as ``transformers``'
    ``apply_mask_to_padding_states`` does in Qwen3-Next. Padding on the left then
    changes nothing for the real tokens: zero inputs write nothing, and a decayed zero
    state stays zero.

    Examples
    --------
    Decoding one token at a time with the cache gives the outputs of one pass:

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> layer = GatedDeltaNet(8, num_key_heads=2, num_value_heads=4, key_head_dim=4,
    ...                       value_head_dim=3)
    >>> x = torch.randn(1, 6, 8)
    >>> full = layer(x)
    >>> cache = GatedDeltaNetCache()
    >>> steps = torch.cat([layer(x[:, :4], cache)] + [layer(x[:, t:t + 1], cache)
    ...                                                for t in (4, 5)], dim=1)
    >>> full.shape, torch.allclose(full, steps, atol=1e-6)
    (torch.Size([1, 6, 8]), True)

    Two tokens of padding on the left leave the real tokens' outputs as they were:

    >>> padded = torch.cat([torch.randn(1, 2, 8), x], dim=1)
    >>> real = torch.tensor([[False] * 2 + [True] * 6])
    >>> torch.allclose(layer(padded, padding_mask=real)[:, 2:], full, atol=1e-6)
    True
    """

    def __init__(
        self,
        d_in: int,
        num_key_heads: int,
        num_value_heads: int,
        key_head_dim: int,
        value_head_dim: int,
        *,
        conv_size: int = 4,
        eps: float = 1e-6,
        chunk_size: int = 64,
    ):
        super().__init__()
        owner = type(self).__name__
        self.d_in, self.num_key_heads, self.num_value_heads = _checks.sizes(
            owner, d_in=d_in, num_key_heads=num_key_heads, num_value_heads=num_value_heads
        )
        self.key_head_dim, self.value_head_dim = _checks.sizes(
            owner, key_head_dim=key_head_dim, value_head_dim=value_head_dim
        )
        self.conv_size, self.chunk_size = _checks.sizes(
            owner, conv_size=conv_size, chunk_size=chunk_size
        )
        what = (
            "num_value_heads must be a multiple of num_key_heads (each query/key head serves "
            "num_value_heads // num_key_heads value heads)"
        )
        _checks.divides(
            "GatedDeltaNet", what, num_value_heads=num_value_heads, num_key_heads=num_key_heads
        )
        key_width = self.num_key_heads * self.key_head_dim
        value_width = self.num_value_heads * self.value_head_dim
        self.W_query = nn.Linear(self.d_in, key_width, bias=False)
        self.W_key = nn.Linear(self.d_in, key_width, bias=False)
        self.W_value = nn.Linear(self.d_in, value_width, bias=False)
        self.W_gate = nn.Linear(self.d_in, value_width, bias=False)
        self.W_beta = nn.Linear(self.d_in, self.num_value_heads, bias=False)
        self.W_decay = nn.Linear(self.d_in, self.num_value_heads, bias=False)
        self.channels = 2 * key_width + value_width
        self.conv = nn.Conv1d(
            self.channels, self.channels, self.conv_size, groups=self.channels, bias=False
        )
        self.dt_bias = nn.Parameter(torch.ones(self.num_value_heads))
        # Decay rates A in [1, 16), stored as their log, as Mamba-2 initialises them.
        self.A_log = nn.Parameter(torch.empty(self.num_value_heads).uniform_(1, 16).log())
        self.norm = RMSNorm(self.value_head_dim, eps)
        self.out_proj = nn.Linear(value_width, self.d_in, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cache: GatedDeltaNetCache | None = None,
        padding_mask: torch.Tensor | None = None,
        **removed: object,
    ) -> torch.Tensor:
        """Run the layer over ``x``, ``(batch, tokens, d_in)``, continuing ``cache`` if given.

        ``padding_mask``, a bool ``(batch, tokens)``, ``False`` at padding: those inputs
        are zeroed first (see the class's Shapes).
        """
        owner = type(self).__name__
        what = "give padding_mask=, True at real tokens (allowed= is the attention layers')"
        _checks.refuse_removed(owner, removed, {"allowed": what})
        _check_cache(self, cache, GatedDeltaNetCache, "a GatedDeltaNetCache")
        x = _checks.module_input(self, x, d_in=self.d_in)
        batch, tokens, _ = x.shape
        if padding_mask is not None:
            expected = (
                f"expected padding_mask, a bool tensor that is True at real tokens and "
                f"False at padding, of shape (batch, tokens) = {(batch, tokens)}"
            )
            real = _checks.bool_mask(owner, padding_mask, expected, (batch, tokens))
            # Zero the padding's inputs, as transformers' apply_mask_to_padding_states.
            x = x * real[..., None].to(x.dtype)
        held = None if cache is None or cache.conv_state is None else cache.conv_state.shape[0]
        if held is not None and held != batch:
            raise ValueError(
                f"{owner}: the cache holds a batch of {held} sequences, got an input of "
                f"batch {batch}"
            )
        key_width = self.num_key_heads * self.key_head_dim

        # 1. Projections. qkv: (batch, channels, tokens), the layout of Conv1d.
        qkv = torch.cat([self.W_query(x), self.W_key(x), self.W_value(x)], dim=-1).transpose(1, 2)
        # 2. Causal depthwise convolution over the previous conv_size - 1 inputs and these.
        if cache is None or cache.conv_state is None:
            past = qkv.new_zeros(batch, self.channels, self.conv_size - 1)
        else:
            past = cache.conv_state
        window = torch.cat([past, qkv], dim=-1)  # (batch, channels, conv_size - 1 + tokens)
        qkv = F.silu(self.conv(window)).transpose(1, 2)  # (batch, tokens, channels)
        q, k, v = qkv.split([key_width, key_width, qkv.shape[-1] - 2 * key_width], dim=-1)
        q = q.unflatten(-1, (self.num_key_heads, self.key_head_dim))
        k = k.unflatten(-1, (self.num_key_heads, self.key_head_dim))
        v = v.unflatten(-1, (self.num_value_heads, self.value_head_dim))
        # 3. Gates, per value head: (batch, tokens, num_value_heads).
        beta = torch.sigmoid(self.W_beta(x))
        g = -self.A_log.exp() * F.softplus(self.W_decay(x) + self.dt_bias)
        # 4. The delta rule, from the cached state.
        state = None if cache is None else cache.recurrent_state
        chunk = None if tokens == 1 else self.chunk_size
        out, state = gated_delta_rule(q, k, v, g, beta, initial_state=state, chunk_size=chunk)
        if cache is not None:  # the last conv_size - 1 inputs, and the new state
            cache.update(window[..., window.shape[-1] - (self.conv_size - 1) :], state, tokens)
        # 5. Gated RMSNorm per value head, 6. back to d_in.
        z = self.W_gate(x).unflatten(-1, (self.num_value_heads, self.value_head_dim))
        out = self.norm(out) * F.silu(z)  # (batch, tokens, num_value_heads, value_head_dim)
        return self.out_proj(out.flatten(-2))
