"""Mamba-2's SSD: its three forms, against transformers' pure-PyTorch path, and the layer.

References, from ``transformers`` 5.23's ``modeling_mamba2`` (the same functions are
copied into ``modeling_nemotron_h``, ``modeling_bamba``, ``modeling_granitemoehybrid``
and ``modeling_zamba2``): ``mamba2_chunk_scan`` (the chunked form with
``segment_sum``) and ``mamba2_selective_state_update`` (one token), which
``Mamba2Mixer``'s forward calls when the CUDA kernels are absent, as here. They cast
to float32 with ``Tensor.float()``; in float64 the tests run them with ``float()``
leaving a float64 tensor as it is (:func:`float64_mamba2`), so that the comparison is
exact up to rounding (``EXACT``: rtol 1e-10), and also as shipped at ``FLOAT32_STEP``.

Independent of transformers: the scan, the chunked form and the dual form against
one another (any chunk size, lengths that are not a multiple of it, an initial state);
the 1-semiseparable mask against products of decays; a sequence split in two and
carried through the state.

The layer, :class:`Mamba2`, against ``Mamba2Mixer``, ``NemotronHMamba2Mixer``,
``BambaMixer``, ``GraniteMoeHybridMambaLayer`` and ``Zamba2MambaMixer`` with the same
weights: the full sequence, prefill then one token at a time with each side's cache
(the states and their bytes compared), and a padded batch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from unittest import mock

import pytest
import torch
from helpers import F64, expect
from hf_models import EXACT, FLOAT32_STEP
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F
from transformers import (
    BambaConfig,
    DynamicCache,
    GraniteMoeHybridConfig,
    Mamba2Config,
    NemotronHConfig,
    Zamba2Config,
)
from transformers.models.bamba.modeling_bamba import BambaMixer
from transformers.models.granitemoehybrid.modeling_granitemoehybrid import (
    GraniteMoeHybridMambaLayer,
)
from transformers.models.mamba2.modeling_mamba2 import (
    Mamba2Mixer,
    mamba2_chunk_scan,
    mamba2_selective_state_update,
)
from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer
from transformers.models.zamba2.modeling_zamba2 import Zamba2MambaMixer

from attention import (
    Cache,
    GatedDeltaNetCache,
    Mamba2,
    Mamba2Cache,
    mamba2_ssd,
    mamba2_ssd_dual,
    semiseparable_mask,
)

pytestmark = pytest.mark.usefixtures("single_thread")


def inputs(
    batch: int = 2,
    tokens: int = 10,
    heads: int = 4,
    head_dim: int = 3,
    groups: int = 2,
    state: int = 5,
    *,
    dtype: torch.dtype = F64,
    seed: int = 0,
    with_state: bool = True,
) -> dict:
    """Random arguments of mamba2_ssd: dt > 0, A < 0, a skip D and an initial state."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, dtype=F64, generator=gen).to(dtype)

    def rand(*shape):
        return torch.rand(*shape, dtype=F64, generator=gen).to(dtype)

    return {
        "x": randn(batch, tokens, heads, head_dim),
        "dt": F.softplus(randn(batch, tokens, heads)),
        "A": -(rand(heads) * 3 + 0.1),  # decays exp(dt A) from about e^-10 to 1
        "B": randn(batch, tokens, groups, state),
        "C": randn(batch, tokens, groups, state),
        "D": randn(heads),
        "initial_state": randn(batch, heads, head_dim, state) if with_state else None,
    }


@contextlib.contextmanager
def float64_float() -> Iterator[None]:
    """Within the block, ``Tensor.float()`` leaves a float64 tensor float64."""
    original = torch.Tensor.float

    def keep_float64(x, *args, **kwargs):
        return x if x.dtype == F64 else original(x, *args, **kwargs)

    with mock.patch.object(torch.Tensor, "float", keep_float64):
        yield


def their_chunked(args: dict, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' mamba2_chunk_scan, dt given after its softplus (dt_softplus=False)."""
    return mamba2_chunk_scan(
        args["x"],
        args["dt"],
        args["A"],
        args["B"],
        args["C"],
        chunk_size,
        D=args["D"],
        initial_states=args["initial_state"],
        return_final_states=True,
    )


def their_scan(args: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' one-token update, token after token, in its (heads, head_dim) layout."""
    x, dt, A = args["x"], args["dt"], args["A"]
    batch, tokens, heads, head_dim = x.shape
    state_size = args["B"].shape[-1]
    state = args["initial_state"]
    state = x.new_zeros(batch, heads, head_dim, state_size) if state is None else state.clone()
    outputs = []
    for t in range(tokens):
        outputs.append(
            mamba2_selective_state_update(
                state,  # updated in place
                x[:, t],
                dt[:, t, :, None].expand(-1, -1, head_dim),
                A[:, None, None].expand(-1, head_dim, state_size),
                args["B"][:, t],
                args["C"][:, t],
                args["D"][:, None].expand(-1, head_dim),
            )
        )
    return torch.stack(outputs, dim=1), state


def assert_pair_close(actual: tuple, expected: tuple, tolerance: dict) -> None:
    torch.testing.assert_close(actual[0], expected[0], **tolerance)
    torch.testing.assert_close(actual[1], expected[1], **tolerance)


LAYOUTS = pytest.mark.parametrize(
    "layout",
    [
        {"heads": 4, "groups": 2},  # two heads per group of B and C
        {"heads": 3, "groups": 3, "tokens": 13},
        {"heads": 2, "groups": 1, "tokens": 1},
    ],
    ids=["grouped", "one-head-a-group", "one-token"],
)
STATE = pytest.mark.parametrize("with_state", [True, False], ids=["state", "zeros"])


# --- against transformers' functions ---------------------------------------------------


@LAYOUTS
@STATE
@pytest.mark.parametrize("chunk_size", [4, 5, 16], ids=["chunk-4", "chunk-5", "chunk-16"])
def test_chunked_form_equals_transformers_chunk_scan_in_float64(layout, with_state, chunk_size):
    args = inputs(**layout, with_state=with_state)
    with float64_float():
        expected = their_chunked(args, chunk_size)
    assert_pair_close(mamba2_ssd(**args, chunk_size=chunk_size), expected, EXACT)


@LAYOUTS
@STATE
def test_scan_equals_transformers_state_update_in_float64(layout, with_state):
    args = inputs(**layout, with_state=with_state)
    with float64_float():
        expected = their_scan(args)
    assert_pair_close(mamba2_ssd(**args), expected, EXACT)


def test_float64_equals_transformers_as_shipped_at_float32_tolerance():
    """As shipped, transformers computes the chunked form in float32 whatever comes in."""
    args = inputs(tokens=11)
    out, state = their_chunked(args, 4)
    ours = mamba2_ssd(**args, chunk_size=4)
    assert_pair_close(ours, (out.to(F64), state.to(F64)), FLOAT32_STEP)


# --- the three forms ---------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    tokens=st.integers(0, 11),
    chunk_size=st.integers(1, 6),
    groups=st.sampled_from([1, 2]),
    per_group=st.integers(1, 2),
    with_state=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_scan_chunked_and_dual_forms_agree(tokens, chunk_size, groups, per_group, with_state, seed):
    """Any length, any chunk size (dividing the length or not), with or without a state."""
    args = inputs(
        batch=1,
        tokens=tokens,
        heads=groups * per_group,
        groups=groups,
        state=3,
        seed=seed,
        with_state=with_state,
    )
    scan = mamba2_ssd(**args)
    assert_pair_close(mamba2_ssd(**args, chunk_size=chunk_size), scan, EXACT)
    assert_pair_close(mamba2_ssd_dual(**args), scan, EXACT)


@pytest.mark.parametrize("split", [1, 4, 9])
@pytest.mark.parametrize("chunk_size", [None, 3], ids=["scan", "chunk-3"])
def test_splitting_the_sequence_and_carrying_the_state_equals_one_run(split, chunk_size):
    args = inputs(tokens=10)
    whole = mamba2_ssd(**args, chunk_size=chunk_size)
    sequence = ("x", "dt", "B", "C")
    first = {**args, **{k: args[k][:, :split] for k in sequence}}
    y1, middle = mamba2_ssd(**first, chunk_size=chunk_size)
    second = {**args, **{k: args[k][:, split:] for k in sequence}, "initial_state": middle}
    y2, end = mamba2_ssd(**second, chunk_size=chunk_size)
    assert_pair_close((torch.cat([y1, y2], dim=1), end), whole, EXACT)


def test_the_dual_form_is_masked_attention_with_the_semiseparable_mask():
    """One head and group: y = (L ∘ C Bᵀ)(dt x) + D x, written out with the mask."""
    args = inputs(batch=1, tokens=6, heads=1, groups=1, with_state=False)
    x, dt, B, C = (args[k][0, :, 0] for k in ("x", "dt", "B", "C"))
    mask = semiseparable_mask(dt * args["A"])
    expected = (mask * (C @ B.T)) @ (dt[:, None] * x) + args["D"] * x
    y, _ = mamba2_ssd_dual(**args)
    torch.testing.assert_close(y[0, :, 0], expected, **EXACT)


def test_semiseparable_mask_holds_products_of_the_decays_after_each_token():
    decay = torch.tensor([0.9, 0.5, 0.8, 0.25, 1.0], dtype=F64)
    mask = semiseparable_mask(decay.log())
    for t in range(5):
        for s in range(5):
            expected = math.prod(decay[s + 1 : t + 1].tolist()) if s <= t else 0.0
            assert mask[t, s].item() == pytest.approx(expected, rel=1e-12)


def test_semiseparable_mask_survives_long_strong_decay():
    """Sums of their own terms: no ∞ − ∞, and tiny entries underflow to 0, not NaN."""
    mask = semiseparable_mask(torch.full((2, 300), -5.0, dtype=F64))
    assert torch.isfinite(mask).all()
    assert mask[0, 299, 298].item() == pytest.approx(math.exp(-5.0))
    assert torch.equal(mask.diagonal(dim1=-2, dim2=-1), torch.ones(2, 300, dtype=F64))


def test_chunked_form_survives_strong_decay():
    args = inputs(tokens=40)
    args["A"] = args["A"] * 30  # decays down to e^-300 in a token
    scan = mamba2_ssd(**args)
    assert torch.isfinite(scan[0]).all()
    assert_pair_close(mamba2_ssd(**args, chunk_size=16), scan, EXACT)


def test_each_group_serves_consecutive_heads():
    """Two groups over four heads equal four groups with each group's B and C repeated."""
    args = inputs(heads=4, groups=2)
    repeated = {**args, **{k: args[k].repeat_interleave(2, dim=2) for k in ("B", "C")}}
    assert_pair_close(mamba2_ssd(**args, chunk_size=4), mamba2_ssd(**repeated), EXACT)


def test_zero_steps_keep_the_state_and_read_it():
    args = inputs(tokens=3)
    args["dt"] = torch.zeros_like(args["dt"])
    y, state = mamba2_ssd(**args)
    torch.testing.assert_close(state, args["initial_state"], **EXACT)
    read = torch.einsum("bhpn,bthn->bthp", args["initial_state"], args["C"].repeat_interleave(2, 2))
    torch.testing.assert_close(y, read + args["D"][:, None] * args["x"], **EXACT)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("chunk_size", [None, 4], ids=["scan", "chunk-4"])
def test_returns_the_input_dtype(dtype, chunk_size):
    y, state = mamba2_ssd(**inputs(dtype=dtype), chunk_size=chunk_size)
    assert y.dtype == state.dtype == dtype


@pytest.mark.parametrize("form", ["scan", "chunked", "dual"])
def test_zero_tokens_return_the_initial_state(form):
    args = inputs(tokens=0)
    if form == "dual":
        y, state = mamba2_ssd_dual(**args)
    else:
        y, state = mamba2_ssd(**args, chunk_size=4 if form == "chunked" else None)
    assert y.shape == (2, 0, 4, 3)
    torch.testing.assert_close(state, args["initial_state"], **EXACT)


def test_gradients_flow_to_every_input():
    args = {k: v.requires_grad_() for k, v in inputs(tokens=5).items()}
    y, state = mamba2_ssd(**args, chunk_size=2)
    (y.sum() + state.sum()).backward()
    assert all(v.grad is not None and v.grad.abs().sum() > 0 for v in args.values())


def test_errors():
    args = inputs()
    name = "mamba2_ssd: "

    def call(**changes):
        return mamba2_ssd(**{**args, **changes})

    with expect(name + "dt must be finite and >= 0 (the step, after the softplus)"):
        call(dt=-args["dt"])
    with expect(name + "A must be finite and <= 0 (the decay rate -exp(A_log))"):
        call(A=-args["A"])
    with expect(name + "heads must be a multiple of groups"):
        three = args["B"][:, :, :1].expand(-1, -1, 3, -1)
        call(B=three, C=three)
    with expect(name + "chunk_size must be at least 1 (or None), got 0"):
        call(chunk_size=0)
    with expect(name + "chunk_size must be None or an integer, got 2.5", TypeError):
        call(chunk_size=2.5)
    with expect(name + "x must have shape (batch, tokens, heads, head_dim), got a 3-D"):
        call(x=args["x"][0])
    with expect(name + "dt must have shape (batch, tokens, heads) = (2, 10, 4)"):
        call(dt=args["dt"][:, :, :2])
    with expect(name + "A must have shape (heads,) = (4,), got (3,)"):
        call(A=args["A"][:3])
    with expect(name + "B and C must have the same shape (batch, tokens, groups, state)"):
        call(C=args["C"][..., :2])
    with expect(name + "D must have shape (heads,) = (4,)"):
        call(D=args["D"][:2])
    with expect(name + "initial_state must have shape (batch, heads, head_dim, state) = "):
        call(initial_state=args["initial_state"][..., :2])
    with expect(name + "B must be a torch.Tensor, got list", TypeError):
        call(B=[1.0])
    with expect("mamba2_ssd_dual: dt must be finite and >= 0"):
        mamba2_ssd_dual(**{**args, "dt": -args["dt"]})
    with expect("semiseparable_mask: log_decay must be finite and <= 0"):
        semiseparable_mask(torch.tensor([0.5]))
    with expect("semiseparable_mask: log_decay must be a torch.Tensor, got list", TypeError):
        semiseparable_mask([0.5])


# --- the layer ---------------------------------------------------------------------------

SIZES = {"d_in": 6, "num_heads": 4, "head_dim": 3, "state_size": 5, "n_groups": 2}


def make_layer(dtype: torch.dtype = F64, seed: int = 0, **overrides) -> Mamba2:
    """A Mamba2 layer with every weight random (the norm's, dt_bias, A_log, D too)."""
    torch.manual_seed(seed)
    kwargs = {**SIZES, "conv_size": 4, "eps": 1e-5, "chunk_size": 4} | overrides
    layer = Mamba2(**kwargs).to(dtype)
    with torch.no_grad():
        for parameter in (layer.norm.weight, layer.D):
            parameter.uniform_(0.5, 1.5)
        layer.dt_bias.normal_()
        layer.A_log.uniform_(-1.0, 1.0)
        layer.conv1d.weight.mul_(3.0)
    return layer.eval()


def mixer_config(kind: str, layer: Mamba2):
    """A transformers config of one Mamba-2 layer with ``layer``'s sizes."""
    inner = layer.num_heads * layer.head_dim
    shared = {"hidden_size": layer.d_in, "num_hidden_layers": 1}
    if kind == "Mamba2Mixer":
        return Mamba2Config(
            **shared,
            num_heads=layer.num_heads,
            head_dim=layer.head_dim,
            expand=inner // layer.d_in,
            state_size=layer.state_size,
            n_groups=layer.n_groups,
            conv_kernel=layer.conv_size,
            chunk_size=layer.chunk_size,
            layer_norm_epsilon=layer.eps,
        )
    if kind == "NemotronHMamba2Mixer":
        return NemotronHConfig(
            **shared,
            layers_block_type=["mamba"],
            mamba_num_heads=layer.num_heads,
            mamba_head_dim=layer.head_dim,
            ssm_state_size=layer.state_size,
            n_groups=layer.n_groups,
            conv_kernel=layer.conv_size,
            chunk_size=layer.chunk_size,
            layer_norm_epsilon=layer.eps,
            # the clamp: time_step_min's up to transformers 5.23, time_step_limit's after
            time_step_min=layer.time_step_limit[0],
            time_step_limit=layer.time_step_limit,
        )
    mamba = {
        "mamba_d_state": layer.state_size,
        "mamba_d_conv": layer.conv_size,
        "mamba_expand": inner // layer.d_in,
        "mamba_chunk_size": layer.chunk_size,
    }
    if kind == "Zamba2MambaMixer":
        return Zamba2Config(
            **shared,
            **mamba,
            layers_block_type=["mamba"],
            n_mamba_heads=layer.num_heads,
            mamba_headdim=layer.head_dim,
            mamba_ngroups=layer.n_groups,
            rms_norm_eps=layer.eps,
            time_step_min=layer.time_step_limit[0],
        )
    if kind == "BambaMixer":  # its layers' kinds follow attn_layer_indices (none here)
        return BambaConfig(
            **shared,
            **mamba,
            mamba_n_heads=layer.num_heads,
            mamba_d_head=layer.head_dim,
            mamba_n_groups=layer.n_groups,
            rms_norm_eps=layer.eps,
        )
    return GraniteMoeHybridConfig(
        **shared,
        **mamba,
        layers_block_type=["mamba"],
        mamba_n_heads=layer.num_heads,
        mamba_d_head=layer.head_dim,
        mamba_n_groups=layer.n_groups,
        rms_norm_eps=layer.eps,
    )


MIXERS = {
    "Mamba2Mixer": Mamba2Mixer,
    "NemotronHMamba2Mixer": NemotronHMamba2Mixer,
    "BambaMixer": BambaMixer,
    "GraniteMoeHybridMambaLayer": GraniteMoeHybridMambaLayer,
    "Zamba2MambaMixer": Zamba2MambaMixer,
}
#: The dt clamp of each mixer's chunked path: (0, inf) by default, (time_step_min, inf)
#: in Nemotron-H and Zamba2 (``self.time_step_limit = (config.time_step_min, inf)``).
CLAMPED = {"NemotronHMamba2Mixer", "Zamba2MambaMixer"}


def their_layer(kind: str, ours: Mamba2) -> tuple[nn.Module, object]:
    """``kind``'s mixer with ``ours``' weights (the same names), and its config."""
    config = mixer_config(kind, ours)
    theirs = MIXERS[kind](config, layer_idx=0).to(ours.D.dtype).eval()
    theirs.load_state_dict(ours.state_dict())
    return theirs, config


class Float64GatedNorm(nn.Module):
    """transformers' gated RMSNorm (gate, then the norm per group) without its float32 casts."""

    def __init__(self, theirs: nn.Module):
        super().__init__()
        self.weight, self.eps, self.group = theirs.weight, theirs.variance_epsilon, None
        self.group = theirs.group_size

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        x = (x * F.silu(gate)).unflatten(-1, (-1, self.group))
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.flatten(-2)


@contextlib.contextmanager
def float64_mixer(theirs: nn.Module) -> Iterator[None]:
    """Within the block, the mixer computes in float64 where it casts to float32."""
    original = theirs.norm
    theirs.norm = Float64GatedNorm(original)
    try:
        with float64_float():
            yield
    finally:
        theirs.norm = original


def layer_input(tokens: int, dtype: torch.dtype = F64, batch: int = 2, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, tokens, SIZES["d_in"], dtype=F64, generator=gen).to(dtype)


def limit_for(kind: str) -> dict:
    return {"time_step_limit": (0.5, math.inf)} if kind in CLAMPED else {}


@pytest.mark.parametrize("kind", list(MIXERS))
@pytest.mark.parametrize("tokens", [1, 3, 11], ids=["one", "shorter-than-conv", "three-chunks"])
def test_layer_equals_the_mixers_in_float64(kind, tokens):
    ours = make_layer(**limit_for(kind))
    theirs, _ = their_layer(kind, ours)
    x = layer_input(tokens)
    with float64_mixer(theirs), torch.no_grad():
        expected = theirs(x)
        torch.testing.assert_close(ours(x), expected, **EXACT)


def test_layer_equals_mamba2_mixer_as_shipped():
    ours = make_layer(torch.float32)
    theirs, _ = their_layer("Mamba2Mixer", ours)
    x = layer_input(9, torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), **FLOAT32_STEP)


def decode_both(ours, theirs, config, x, prefill):
    """Prefill ``prefill`` tokens, then one token at a time, with both layers' caches."""
    cache, their_cache = Mamba2Cache(), DynamicCache(config=config)
    outputs, expected = [ours(x[:, :prefill], cache)], [theirs(x[:, :prefill], their_cache)]
    sizes = [(cache.nbytes, their_bytes(their_cache))]
    for t in range(prefill, x.shape[1]):
        outputs.append(ours(x[:, t : t + 1], cache))
        expected.append(theirs(x[:, t : t + 1], their_cache))
        sizes.append((cache.nbytes, their_bytes(their_cache)))
    return torch.cat(outputs, dim=1), torch.cat(expected, dim=1), cache, their_cache, sizes


def their_bytes(cache: DynamicCache) -> int:
    """Bytes of the one layer's convolution and recurrent states transformers keeps."""
    conv, ssm = cache.get_conv_state(0), cache.get_recurrent_state(0)
    return conv.nbytes + ssm.nbytes


@pytest.mark.parametrize("kind", ["Mamba2Mixer", "NemotronHMamba2Mixer"])
@pytest.mark.parametrize("prefill", [2, 6], ids=["prefill-2", "prefill-6"])
def test_layer_decoding_equals_the_mixers_in_float64(kind, prefill):
    ours = make_layer(seed=3, **limit_for(kind))
    theirs, config = their_layer(kind, ours)
    x = layer_input(10, seed=4)
    with float64_mixer(theirs), torch.no_grad():
        out, expected, cache, their_cache, sizes = decode_both(ours, theirs, config, x, prefill)
    torch.testing.assert_close(out, expected, **EXACT)
    torch.testing.assert_close(cache.ssm_state, their_cache.get_recurrent_state(0), **EXACT)
    torch.testing.assert_close(cache.conv_state, their_cache.get_conv_state(0), **EXACT)
    # The same bytes after the prefill and after every step: neither grows.
    channels = 4 * 3 + 2 * 2 * 5  # inner, then B and C (2 groups of 5)
    assert sizes == [(8 * 2 * (channels * 4 + 4 * 3 * 5),) * 2] * len(sizes)
    assert cache.seen_tokens == 10


def test_layer_decoding_equals_mamba2_mixer_as_shipped():
    ours = make_layer(torch.float32, seed=5)
    theirs, config = their_layer("Mamba2Mixer", ours)
    x = layer_input(8, torch.float32, seed=6)
    with torch.no_grad():
        out, expected, *_ = decode_both(ours, theirs, config, x, prefill=5)
    torch.testing.assert_close(out, expected, **FLOAT32_STEP)


@settings(max_examples=20, deadline=None)
@given(tokens=st.integers(1, 9), cut=st.integers(0, 9), chunk_size=st.integers(1, 5))
def test_layer_with_a_cache_continues_where_it_left_off(tokens, cut, chunk_size):
    """Any split of the input, the second part from the first's cache, equals one pass."""
    cut = min(cut, tokens)
    layer = make_layer(seed=7, chunk_size=chunk_size)
    x = layer_input(tokens, seed=8)
    cache = Mamba2Cache()
    with torch.no_grad():
        parts = [layer(part, cache) for part in (x[:, :cut], x[:, cut:]) if part.shape[1]]
        torch.testing.assert_close(torch.cat(parts, dim=1), layer(x), **EXACT)
    assert cache.seen_tokens == tokens


@pytest.mark.parametrize("kind", ["Mamba2Mixer", "NemotronHMamba2Mixer"])
def test_padded_batch_equals_the_mixer_in_float64(kind):
    """Left padding, given to both as a mask: the same outputs, and padding changes nothing."""
    ours = make_layer(seed=11, **limit_for(kind))
    theirs, _ = their_layer(kind, ours)
    x = layer_input(7, seed=12)
    real = torch.ones(2, 7, dtype=torch.bool)
    real[1, :3] = False
    with float64_mixer(theirs), torch.no_grad():
        expected = theirs(x, attention_mask=real.long())
        padded = ours(x, padding_mask=real)
        torch.testing.assert_close(padded, expected, **EXACT)
        alone = ours(x[1:, 3:])
    # Nemotron-H's clamp keeps a padded token's dt at its floor, so its zero input still
    # decays the (zero) state: nothing is written, and the real tokens see the same.
    torch.testing.assert_close(padded[1:, 3:], alone, **EXACT)


def test_cache_is_a_cache_of_fixed_size_that_goes_back_only_to_zero():
    layer = make_layer()
    cache = Mamba2Cache()
    assert isinstance(cache, Cache) and cache.nbytes == 0
    with torch.no_grad():
        layer(layer_input(5), cache)
        size = cache.nbytes
        layer(layer_input(1), cache)
    assert (cache.seen_tokens, len(cache), cache.nbytes) == (6, 0, size)
    cache.crop(6)  # nothing to forget
    with expect("Mamba2Cache: cannot crop to 3 tokens: the SSM state has folded all 6"):
        cache.crop(3)
    cache.crop(0)
    assert (cache.seen_tokens, cache.nbytes, cache.conv_state) == (0, 0, None)


def test_layer_errors():
    with expect("Mamba2: num_heads must be a multiple of n_groups"):
        Mamba2(8, 3, 4, 2, n_groups=2)
    with expect("Mamba2: time_step_limit must be (low, high) with 0 <= low <= high"):
        Mamba2(8, 2, 4, 2, time_step_limit=(1.0, 0.5))
    with expect("Mamba2: time_step_limit must be a tuple (low, high)", TypeError):
        Mamba2(8, 2, 4, 2, time_step_limit=0.5)
    with expect("Mamba2: bias must be True or False", TypeError):
        Mamba2(8, 2, 4, 2, bias=1)
    layer = make_layer()
    with expect("Mamba2: cache must be a Mamba2Cache or None, got GatedDeltaNetCache", TypeError):
        layer(layer_input(2), GatedDeltaNetCache())
    cache = Mamba2Cache()
    layer(layer_input(2, batch=2), cache)
    with expect("Mamba2: the cache holds a batch of 2 sequences, got an input of batch 1"):
        layer(layer_input(1, batch=1), cache)
    with expect("Mamba2: expected padding_mask, a bool tensor that is True at real tokens"):
        layer(layer_input(2), padding_mask=torch.ones(2, 3, dtype=torch.bool))
    with expect("Mamba2: expected the last dimension of the input to be d_in=6"):
        layer(torch.zeros(1, 2, 3, dtype=F64))
