"""Linear attention: softmax replaced by a feature map, so the past fits in a fixed-size state.

Softmax attention weighs value ``j`` for query ``i`` by ``exp(q_i · k_j)``. Linear
attention (Katharopoulos et al., 2020, "Transformers are RNNs") weighs it by
``φ(q_i) · φ(k_j)`` for a feature map ``φ`` with positive outputs, by default
``elu(x) + 1``. Because a dot product of feature vectors is associative, the sum over
the keys can be taken first:

``out_i = φ(q_i)ᵀ S_i / (φ(q_i)ᵀ z_i)``, with ``S_i = Σ_{j ≤ i} φ(k_j) v_jᵀ`` and
``z_i = Σ_{j ≤ i} φ(k_j)``.

``S_i`` (``dim_φ × dim_v``) and ``z_i`` (``dim_φ``) do not grow with the number of
tokens: they are the state that replaces the KV cache. :func:`~attention.linear_attention`
computes the same numbers two ways: ``form="parallel"`` builds the ``T × T`` matrix of
``φ(q_i) · φ(k_j)``, masks it and normalises its rows (as softmax attention does), and
``form="recurrent"`` walks the tokens, adding ``φ(k_j) v_jᵀ`` to the state. That form
can start from a state and hand its final one back (``initial_state=``,
``return_state=True``), so a sequence can be continued as
:func:`~attention.gated_delta_rule`'s can.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn import functional as F

from attention import _checks

__all__ = ["linear_attention"]

_OWNER = "linear_attention"
_FORMS = ("parallel", "recurrent")


def elu_plus_one(x: torch.Tensor) -> torch.Tensor:
    """``elu(x) + 1``: ``exp(x)`` for ``x < 0`` and ``x + 1`` above, so always positive."""
    return F.elu(x) + 1


def _check_inputs(q: object, k: object, v: object, causal: object, form: object) -> None:
    """Raise an error, naming the argument, for inputs linear_attention cannot take."""
    layout = "(batch, heads, tokens, dim)"
    q, k, v = (
        _checks.float_tensor(_OWNER, name, x, 4, layout)
        for name, x in (("q", q), ("k", k), ("v", v))
    )
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(
            f"{_OWNER}: q, k and v must have one dtype, got {q.dtype}, {k.dtype} and {v.dtype}"
        )
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2]:
        raise ValueError(
            f"{_OWNER}: q, k and v must have the same (batch, heads), got shapes "
            f"q {tuple(q.shape)}, k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if k.shape[2] != v.shape[2]:
        raise ValueError(
            f"{_OWNER}: k and v must have the same number of tokens (one value per key), "
            f"got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if q.shape[3] != k.shape[3]:
        raise ValueError(
            f"{_OWNER}: q and k must have the same last dimension dim_k, got q "
            f"{tuple(q.shape)} and k {tuple(k.shape)}"
        )
    _checks.flag(
        _OWNER, "causal", causal, "each query sees only the keys up to its own position, or all"
    )
    if causal and q.shape[2] != k.shape[2]:
        raise ValueError(
            f"{_OWNER}: with causal=True, q and k must have the same number of tokens "
            f"(query i sees keys 0..i), got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if form not in _FORMS:
        raise ValueError(f"{_OWNER}: form must be 'parallel' or 'recurrent', got {form!r}")


def _check_state(initial_state: object, v: torch.Tensor, dim_phi: int) -> None:
    """Raise unless ``initial_state`` is ``(S, z)`` of the shapes and dtype the inputs need."""
    batch, heads, _, dim_v = v.shape
    shapes = ((batch, heads, dim_phi, dim_v), (batch, heads, dim_phi))
    expected = (
        f"initial_state must be None or a pair (S, z) of {v.dtype} tensors of shapes "
        f"(batch, heads, dim_phi, dim_v) = {shapes[0]} and (batch, heads, dim_phi) = "
        f"{shapes[1]}"
    )
    if not isinstance(initial_state, tuple) or len(initial_state) != 2:
        given = type(initial_state).__name__
        if isinstance(initial_state, tuple):
            given = f"a tuple of {len(initial_state)}"
        raise TypeError(f"{_OWNER}: {expected}, got {given}")
    for name, x, shape in zip(("S", "z"), initial_state, shapes, strict=True):
        _checks.tensor(_OWNER, f"initial_state's {name}", x)
        if tuple(x.shape) != shape or x.dtype != v.dtype:
            raise ValueError(
                f"{_OWNER}: {expected}, got {name} of shape {tuple(x.shape)} and dtype {x.dtype}"
            )


def _features(feature_map: Callable, x: torch.Tensor, name: str) -> torch.Tensor:
    """``feature_map(x)``, checked: a tensor of x's leading shape whose values are >= 0."""
    phi = feature_map(x)
    if not isinstance(phi, torch.Tensor) or phi.shape[:-1] != x.shape[:-1]:
        got = tuple(phi.shape) if isinstance(phi, torch.Tensor) else type(phi).__name__
        raise ValueError(
            f"{_OWNER}: feature_map must return a tensor of shape (batch, heads, tokens, "
            f"dim_phi) for {name} of shape {tuple(x.shape)}, got {got}"
        )
    if phi.numel() and phi.min() < 0:
        raise ValueError(
            f"{_OWNER}: feature_map must return positive values (they weigh the values, "
            f"as exp does in softmax), got a minimum of {phi.min().item():.3g} for {name}"
        )
    return phi


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = True,
    feature_map: Callable[[torch.Tensor], torch.Tensor] | None = None,
    form: str = "parallel",
    initial_state: tuple[torch.Tensor, torch.Tensor] | None = None,
    return_state: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Linear attention: ``out_i = φ(q_i)ᵀ S_i / (φ(q_i)ᵀ z_i)``.

    ``S_i = Σ_j φ(k_j) v_jᵀ`` and ``z_i = Σ_j φ(k_j)``, summed over ``j ≤ i`` with
    ``causal`` and over every ``j`` without. There is no epsilon in the denominator: a
    feature map with positive outputs keeps it positive.

    Parameters
    ----------
    q : torch.Tensor
        Queries, ``(batch, heads, tokens_q, dim_k)``, the layout of
        ``torch.nn.functional.scaled_dot_product_attention``.
    k : torch.Tensor
        Keys, ``(batch, heads, tokens_k, dim_k)``; ``tokens_k == tokens_q`` with ``causal``.
    v : torch.Tensor
        Values, ``(batch, heads, tokens_k, dim_v)``; ``dim_v`` may differ from ``dim_k``.
    causal : bool
        Keyword only, as are the rest. Whether query ``i`` sees only keys ``0..i`` (True)
        or every key (False).
    feature_map : callable or None
        ``φ``, applied to ``q`` and ``k`` over their last dimension; it must return
        positive values of shape ``(batch, heads, tokens, dim_φ)``. ``None`` is
        ``elu(x) + 1`` (Katharopoulos et al., 2020).
    form : {"parallel", "recurrent"}
        ``"parallel"`` builds the ``tokens_q × tokens_k`` matrix of ``φ(q_i) · φ(k_j)``,
        masked and row-normalised; ``"recurrent"`` carries the state ``(S, z)`` token by
        token. Both give the same numbers (up to rounding).
    initial_state : (torch.Tensor, torch.Tensor) or None
        With ``form="recurrent"``: the state ``(S, z)`` before the first key, ``S`` of
        shape ``(batch, heads, dim_φ, dim_v)`` and ``z`` of ``(batch, heads, dim_φ)``,
        in ``v``'s dtype; ``None`` starts from zeros. Pass a previous call's final state
        to continue a sequence, as :func:`~attention.gated_delta_rule` takes its own.
    return_state : bool
        With ``form="recurrent"``: also return the state after the last key.

    Returns
    -------
    output : torch.Tensor
        ``(batch, heads, tokens_q, dim_v)``, in the inputs' dtype.
    final_state : (torch.Tensor, torch.Tensor)
        Only with ``return_state``: ``(S, z)`` after the last key, shaped as
        ``initial_state``.

    Raises
    ------
    TypeError
        For an input that is not a tensor, a ``causal`` that is not a bool, a
        ``feature_map`` that is not callable, or an ``initial_state`` that is not a pair.
    ValueError
        For inputs that are not floating-point 4-D tensors of matching shapes and dtype,
        a ``form`` other than the two, a state with the parallel form, or a
        ``feature_map`` with a negative output.

    Examples
    --------
    The first query sees only the first key, so its output is the first value; the
    two forms agree:

    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> q, k = torch.randn(2, 1, 2, 5, 4).unbind(0)  # (batch, heads, tokens, dim_k)
    >>> v = torch.randn(1, 2, 5, 3)  # dim_v = 3
    >>> out = linear_attention(q, k, v)
    >>> out.shape
    torch.Size([1, 2, 5, 3])
    >>> torch.allclose(out[:, :, 0], v[:, :, 0])
    True
    >>> torch.allclose(out, linear_attention(q, k, v, form="recurrent"), atol=1e-6)
    True

    The recurrent form continues from a state: the first two tokens, then the last
    three from where they left off, give one run's numbers:

    >>> first, state = linear_attention(
    ...     q[:, :, :2], k[:, :, :2], v[:, :, :2], form="recurrent", return_state=True)
    >>> rest = linear_attention(
    ...     q[:, :, 2:], k[:, :, 2:], v[:, :, 2:], form="recurrent", initial_state=state)
    >>> torch.allclose(torch.cat([first, rest], dim=2), out, atol=1e-6)
    True
    """
    _check_inputs(q, k, v, causal, form)
    _checks.flag(_OWNER, "return_state", return_state, "return the final state or not")
    if form != "recurrent" and (initial_state is not None or return_state):
        raise ValueError(
            f"{_OWNER}: initial_state and return_state need form='recurrent' (the parallel "
            f"form keeps no state), got form={form!r}"
        )
    phi = elu_plus_one if feature_map is None else feature_map
    if not callable(phi):
        raise TypeError(
            f"{_OWNER}: feature_map must be a callable or None, got {type(phi).__name__}"
        )
    phi_q = _features(phi, q, "q")  # (batch, heads, tokens_q, dim_phi)
    phi_k = _features(phi, k, "k")  # (batch, heads, tokens_k, dim_phi)
    if phi_q.shape[-1] != phi_k.shape[-1]:
        raise ValueError(
            f"{_OWNER}: feature_map must map q and k to the same dim_phi, got "
            f"{phi_q.shape[-1]} for q and {phi_k.shape[-1]} for k"
        )
    if form == "parallel":
        return _parallel(phi_q, phi_k, v, causal)
    batch, heads, dim_phi, dim_v = *phi_k.shape[:2], phi_k.shape[-1], v.shape[-1]
    if initial_state is None:
        initial_state = (
            v.new_zeros(batch, heads, dim_phi, dim_v),
            v.new_zeros(batch, heads, dim_phi),
        )
    else:
        _check_state(initial_state, v, dim_phi)
    out, final_state = _recurrent(phi_q, phi_k, v, causal, *initial_state)
    return (out, final_state) if return_state else out


def _parallel(
    phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor, causal: bool
) -> torch.Tensor:
    """The quadratic form: weights ``φ(q_i) · φ(k_j)``, masked, divided by their row sums."""
    weights = phi_q @ phi_k.transpose(-2, -1)  # (batch, heads, tokens_q, tokens_k)
    if causal:
        tokens = weights.shape[-1]
        allowed = torch.ones(tokens, tokens, dtype=torch.bool, device=weights.device).tril()
        weights = weights.masked_fill(~allowed, 0.0)
    # Row i's sum is φ(q_i) · z_i: the denominator.
    return (weights @ v) / weights.sum(dim=-1, keepdim=True)


def _recurrent(
    phi_q: torch.Tensor,
    phi_k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    state: torch.Tensor,
    normaliser: torch.Tensor,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """The recurrent form from ``S = state`` (dim_phi × dim_v) and ``z = normaliser`` (dim_phi).

    Returns the outputs and the final ``(S, z)``.
    """
    tokens_k = phi_k.shape[2]
    if not causal:
        # Every query reads the state after the last key.
        for j in range(tokens_k):
            state = state + phi_k[:, :, j, :, None] * v[:, :, j, None, :]  # S += φ(k_j) v_jᵀ
            normaliser = normaliser + phi_k[:, :, j]  # z += φ(k_j)
        numerator = phi_q @ state  # (batch, heads, tokens_q, dim_v)
        return numerator / (phi_q @ normaliser[..., None]), (state, normaliser)
    outputs = []
    for i in range(tokens_k):
        state = state + phi_k[:, :, i, :, None] * v[:, :, i, None, :]
        normaliser = normaliser + phi_k[:, :, i]
        q_i = phi_q[:, :, i]  # (batch, heads, dim_phi)
        numerator = (q_i[..., None] * state).sum(dim=-2)  # φ(q_i)ᵀ S_i: (batch, heads, dim_v)
        denominator = (q_i * normaliser).sum(dim=-1, keepdim=True)  # φ(q_i)ᵀ z_i
        outputs.append(numerator / denominator)
    if not outputs:
        return v.new_zeros(*v.shape[:2], 0, v.shape[-1]), (state, normaliser)
    return torch.stack(outputs, dim=2), (state, normaliser)
