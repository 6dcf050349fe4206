"""gated_delta_rule against transformers' Qwen3-Next fallbacks, its two forms, and its properties.

References, from ``transformers.models.qwen3_next.modeling_qwen3_next``:

* ``torch_recurrent_gated_delta_rule`` and ``torch_chunk_gated_delta_rule`` as shipped,
  which compute in float32 whatever the input: ``hf_models.FLOAT32_STEP`` (1e-5).
* their float64 copies in ``gated_delta_reference.py`` (the float32 casts made float64):
  ``hf_models.EXACT`` (rtol 1e-10, atol 1e-12) in float64.

Independent of transformers: the chunked form against the recurrence for chunk sizes
that divide the length and ones that do not; splitting a sequence and carrying the
state; ``g = 0, beta = 1`` against the plain delta rule written here; the grouping of
value heads over q/k heads against explicitly repeated heads.

The layer, :class:`GatedDeltaNet`, against ``Qwen3NextGatedDeltaNet`` with the same
weights (copied from it by ``attention.models.from_transformers``): prefill, and
prefill then one-token steps with each side's cache; at ``EXACT`` in float64 with its
float32 steps run in float64 inside the test (:func:`float64_qwen3_next`), and at
``FLOAT32_STEP`` as shipped, in float32.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import pytest
import torch
from gated_delta_reference import (
    torch_chunk_gated_delta_rule_float64,
    torch_recurrent_gated_delta_rule_float64,
)
from helpers import F64, expect
from hf_models import EXACT, FLOAT32_STEP
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F
from transformers import DynamicCache, Qwen3NextConfig
from transformers.models.qwen3_next import modeling_qwen3_next
from transformers.models.qwen3_next.modeling_qwen3_next import (
    Qwen3NextGatedDeltaNet,
    torch_chunk_gated_delta_rule,
    torch_recurrent_gated_delta_rule,
)

from attention import GatedDeltaNet, GatedDeltaNetCache, KVCache, gated_delta_rule
from attention.models import from_transformers

pytestmark = pytest.mark.usefixtures("single_thread")


def inputs(
    batch: int = 2,
    tokens: int = 10,
    heads_k: int = 2,
    heads_v: int = 4,
    dim_k: int = 5,
    dim_v: int = 3,
    *,
    dtype: torch.dtype = F64,
    seed: int = 0,
    with_state: bool = True,
) -> dict:
    """Random arguments of gated_delta_rule: q, k, v, g <= 0, beta in [0, 1], a state."""
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, dtype=F64, generator=gen).to(dtype)

    def rand(*shape):
        return torch.rand(*shape, dtype=F64, generator=gen).to(dtype)

    state = randn(batch, heads_v, dim_k, dim_v) if with_state else None
    return {
        "q": randn(batch, tokens, heads_k, dim_k),
        "k": randn(batch, tokens, heads_k, dim_k),
        "v": randn(batch, tokens, heads_v, dim_v),
        "g": -2.0 * rand(batch, tokens, heads_v),  # decays exp(g) from e^-2 to 1
        "beta": rand(batch, tokens, heads_v),
        "initial_state": state,
    }


def transformers_args(args: dict) -> tuple:
    return args["q"], args["k"], args["v"], args["g"], args["beta"]


def assert_pair_close(actual: tuple, expected: tuple, tolerance: dict) -> None:
    (out, state), (ref_out, ref_state) = actual, expected
    torch.testing.assert_close(out, ref_out, **tolerance)
    torch.testing.assert_close(state, ref_state, **tolerance)


LAYOUTS = pytest.mark.parametrize(
    "layout",
    [
        {"heads_k": 2, "heads_v": 4},  # two value heads per q/k head, as Qwen3-Next
        {"heads_k": 3, "heads_v": 3, "dim_k": 4, "dim_v": 4},
        {"heads_k": 1, "heads_v": 3, "tokens": 1},
    ],
    ids=["grouped", "one-to-one", "one-token"],
)
STATE = pytest.mark.parametrize("with_state", [True, False], ids=["state", "zeros"])


# --- transformers' functions ---------------------------------------------------------


@LAYOUTS
@STATE
def test_recurrence_equals_the_float64_copy_of_transformers(layout, with_state):
    args = inputs(**layout, with_state=with_state)
    expected = torch_recurrent_gated_delta_rule_float64(
        *transformers_args(args), args["initial_state"], True, True
    )
    assert_pair_close(gated_delta_rule(**args), expected, EXACT)


@LAYOUTS
@STATE
@pytest.mark.parametrize("chunk_size", [4, 64])
def test_chunked_form_equals_the_float64_copy_of_transformers(layout, with_state, chunk_size):
    args = inputs(**layout, with_state=with_state)
    expected = torch_chunk_gated_delta_rule_float64(
        *transformers_args(args),
        chunk_size=chunk_size,
        initial_state=args["initial_state"],
        output_final_state=True,
        use_qk_l2norm_in_kernel=True,
    )
    assert_pair_close(gated_delta_rule(**args, chunk_size=chunk_size), expected, EXACT)


@pytest.mark.parametrize("chunk_size", [None, 4], ids=["recurrent", "chunked"])
def test_equals_transformers_as_shipped(chunk_size):
    """float32 inputs; transformers returns its state in float32 too."""
    args = inputs(tokens=13, dtype=torch.float32)
    if chunk_size is None:
        expected = torch_recurrent_gated_delta_rule(
            *transformers_args(args),
            initial_state=args["initial_state"],
            output_final_state=True,
            use_qk_l2norm_in_kernel=True,
        )
    else:
        expected = torch_chunk_gated_delta_rule(
            *transformers_args(args),
            chunk_size=chunk_size,
            initial_state=args["initial_state"],
            output_final_state=True,
            use_qk_l2norm_in_kernel=True,
        )
    assert_pair_close(gated_delta_rule(**args, chunk_size=chunk_size), expected, FLOAT32_STEP)


def test_float64_equals_transformers_as_shipped_at_float32_tolerance():
    """The shipped functions take float64 in and compute in float32."""
    args = inputs(tokens=9)
    expected = torch_chunk_gated_delta_rule(
        *transformers_args(args),
        chunk_size=4,
        initial_state=args["initial_state"],
        output_final_state=True,
        use_qk_l2norm_in_kernel=True,
    )
    out, state = gated_delta_rule(**args, chunk_size=4)
    assert_pair_close((out, state.float()), expected, FLOAT32_STEP)


# --- the two forms ---------------------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 4, 6, 12, 5, 7, 8, 13, 64])
def test_chunked_equals_recurrent_for_dividing_and_other_chunk_sizes(chunk_size):
    """12 tokens: 1, 2, 3, 4, 6 and 12 divide it, 5, 7, 8, 13 and 64 leave a padded tail."""
    args = inputs(tokens=12, seed=1)
    assert_pair_close(
        gated_delta_rule(**args, chunk_size=chunk_size), gated_delta_rule(**args), EXACT
    )


def test_chunked_form_survives_strong_decay():
    """g far below 0 underflows exp(γ) inside a chunk to 0; nothing becomes inf or nan."""
    args = inputs(tokens=20, seed=2)
    args["g"] = args["g"] * 400.0  # down to -800 per token
    chunked = gated_delta_rule(**args, chunk_size=16)
    assert all(torch.isfinite(x).all() for x in chunked)
    assert_pair_close(chunked, gated_delta_rule(**args), EXACT)


@pytest.mark.parametrize("chunk_size", [None, 4], ids=["recurrent", "chunked"])
def test_gradients_equal_transformers_float64_copy(chunk_size):
    """Both forms backpropagate (no in-place step breaks autograd), and their gradients
    with respect to every input and the initial state are the float64 copy's."""
    args = inputs(tokens=9)
    leaves = {name: x.clone().requires_grad_() for name, x in args.items()}
    ours = gated_delta_rule(**leaves, chunk_size=chunk_size)
    theirs = torch_chunk_gated_delta_rule_float64(
        *transformers_args(leaves),
        chunk_size=4,
        initial_state=leaves["initial_state"],
        output_final_state=True,
        use_qk_l2norm_in_kernel=True,
    )
    gen = torch.Generator().manual_seed(1)
    weights = [torch.randn(x.shape, dtype=F64, generator=gen) for x in ours]

    def gradients(outputs: tuple) -> tuple:
        loss = sum((w * x).sum() for w, x in zip(weights, outputs, strict=True))
        return torch.autograd.grad(loss, list(leaves.values()))

    grads, expected = gradients(ours), gradients(theirs)
    for grad, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(grad, want, **EXACT)


@st.composite
def layouts(draw):
    heads_k = draw(st.integers(1, 2))
    return {
        "batch": draw(st.integers(1, 2)),
        "tokens": draw(st.integers(1, 12)),
        "heads_k": heads_k,
        "heads_v": heads_k * draw(st.integers(1, 3)),
        "dim_k": draw(st.integers(1, 5)),
        "dim_v": draw(st.integers(1, 4)),
        "seed": draw(st.integers(0, 2**16)),
        "with_state": draw(st.booleans()),
    }


@given(layout=layouts(), chunk_size=st.integers(1, 14))
def test_any_chunk_size_equals_the_recurrence(layout, chunk_size):
    args = inputs(**layout)
    assert_pair_close(
        gated_delta_rule(**args, chunk_size=chunk_size), gated_delta_rule(**args), EXACT
    )


@given(
    layout=layouts(),
    split=st.floats(0.0, 1.0),
    chunk_size=st.one_of(st.none(), st.integers(1, 5)),
)
def test_splitting_the_sequence_and_carrying_the_state_equals_one_run(layout, split, chunk_size):
    args = inputs(**layout)
    cut = round(split * layout["tokens"])  # 0 and the full length included
    per_token = ("q", "k", "v", "g", "beta")
    first = {name: args[name][:, :cut] for name in per_token}
    second = {name: args[name][:, cut:] for name in per_token}
    out_1, state_1 = gated_delta_rule(
        **first, initial_state=args["initial_state"], chunk_size=chunk_size
    )
    out_2, state_2 = gated_delta_rule(**second, initial_state=state_1, chunk_size=chunk_size)
    assert_pair_close(
        (torch.cat([out_1, out_2], dim=1), state_2),
        gated_delta_rule(**args, chunk_size=chunk_size),
        EXACT,
    )


# --- what the rule computes --------------------------------------------------------------


def plain_delta_rule(q, k, v, state):
    """DeltaNet without gates, one head at a time: S ← (I − k kᵀ) S + k vᵀ, o = Sᵀ q.

    q, k (tokens, dim_k) and v (tokens, dim_v) of one head; keys and queries are
    normalised here as the package documents (x / sqrt(|x|² + 1e-6)), q also by
    1/sqrt(dim_k). Returns the outputs (tokens, dim_v) and the last state.
    """
    dim_k = k.shape[-1]
    identity = torch.eye(dim_k, dtype=k.dtype)
    outputs = []
    for q_t, k_t, v_t in zip(q, k, v, strict=True):
        k_t = k_t / torch.sqrt(k_t @ k_t + 1e-6)
        q_t = q_t / torch.sqrt(q_t @ q_t + 1e-6) / dim_k**0.5
        state = (identity - torch.outer(k_t, k_t)) @ state + torch.outer(k_t, v_t)
        outputs.append(state.T @ q_t)
    return torch.stack(outputs), state


@given(layout=layouts(), chunk_size=st.one_of(st.none(), st.integers(1, 5)))
def test_no_decay_and_full_writes_is_the_plain_delta_rule(layout, chunk_size):
    args = inputs(**layout)
    args["g"] = torch.zeros_like(args["g"])
    args["beta"] = torch.ones_like(args["beta"])
    out, state = gated_delta_rule(**args, chunk_size=chunk_size)
    group = layout["heads_v"] // layout["heads_k"]
    start = args["initial_state"]
    for b in range(layout["batch"]):
        for h in range(layout["heads_v"]):
            s0 = torch.zeros_like(state[b, h]) if start is None else start[b, h]
            hk = h // group  # consecutive value heads share a q/k head
            ref_out, ref_state = plain_delta_rule(
                args["q"][b, :, hk], args["k"][b, :, hk], args["v"][b, :, h], s0
            )
            torch.testing.assert_close(out[b, :, h], ref_out, **EXACT)
            torch.testing.assert_close(state[b, h], ref_state, **EXACT)


def test_a_full_write_stores_the_value_under_its_key():
    """With beta = 1 and no decay, reading the state with the key just written returns
    that value (up to the 1e-6 in the key's normalisation)."""
    args = inputs(batch=1, tokens=1, heads_k=1, heads_v=1, dim_k=8, dim_v=4)
    args["g"] = torch.zeros_like(args["g"])
    args["beta"] = torch.ones_like(args["beta"])
    _, state = gated_delta_rule(**args)
    k = args["k"][0, 0, 0]
    k = k / k.norm()
    torch.testing.assert_close(state[0, 0].T @ k, args["v"][0, 0, 0], rtol=0, atol=1e-5)


def test_zero_write_strength_only_decays_the_state():
    args = inputs(seed=5)
    args["beta"] = torch.zeros_like(args["beta"])
    for chunk_size in (None, 3):
        _, state = gated_delta_rule(**args, chunk_size=chunk_size)
        total = args["g"].sum(dim=1).exp()[..., None, None]  # (batch, heads_v, 1, 1)
        torch.testing.assert_close(state, args["initial_state"] * total, **EXACT)


def test_each_qk_head_serves_consecutive_value_heads():
    """Equal to the same run with q and k repeated head by head (repeat_interleave)."""
    args = inputs(heads_k=2, heads_v=6, seed=6)
    repeated = dict(args)
    repeated["q"] = args["q"].repeat_interleave(3, dim=2)
    repeated["k"] = args["k"].repeat_interleave(3, dim=2)
    for chunk_size in (None, 4):
        assert_pair_close(
            gated_delta_rule(**args, chunk_size=chunk_size),
            gated_delta_rule(**repeated, chunk_size=chunk_size),
            EXACT,
        )


def test_causal_outputs_do_not_depend_on_later_tokens():
    args = inputs(tokens=9, seed=7)
    later = dict(args)
    later["v"] = args["v"].clone()
    later["v"][:, 5:] += 3.0
    for chunk_size in (None, 4):
        out = gated_delta_rule(**args, chunk_size=chunk_size)[0]
        out_later = gated_delta_rule(**later, chunk_size=chunk_size)[0]
        torch.testing.assert_close(out[:, :5], out_later[:, :5], **EXACT)
        assert not torch.allclose(out[:, 5:], out_later[:, 5:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("chunk_size", [None, 4], ids=["recurrent", "chunked"])
def test_returns_the_input_dtype(dtype, chunk_size):
    args = inputs(dtype=dtype)
    out, state = gated_delta_rule(**args, chunk_size=chunk_size)
    assert out.dtype == state.dtype == dtype
    assert out.shape == (2, 10, 4, 3) and state.shape == (2, 4, 5, 3)


@pytest.mark.parametrize("chunk_size", [None, 4], ids=["recurrent", "chunked"])
def test_zero_tokens_return_the_initial_state(chunk_size):
    args = inputs(tokens=0)
    out, state = gated_delta_rule(**args, chunk_size=chunk_size)
    assert out.shape == (2, 0, 4, 3)
    torch.testing.assert_close(state, args["initial_state"], rtol=0, atol=0)


# --- errors ------------------------------------------------------------------------------


def test_errors():
    args = inputs()
    name = "gated_delta_rule: "

    def call(**changes):
        return gated_delta_rule(**{**args, **changes})

    with expect(name + "g must be finite and <= 0"):
        call(g=args["g"] + 0.5)
    with expect(name + "g must be finite and <= 0"):
        call(g=torch.full_like(args["g"], float("-inf")))
    with expect(name + "beta must be in [0, 1] (the write strength), got values from"):
        call(beta=args["beta"] + 1.0)
    with expect(name + "beta must be in [0, 1]"):
        call(beta=-args["beta"])
    with expect(name + "heads_v must be a multiple of heads_k"):
        three_heads = args["k"][:, :, :1].expand(-1, -1, 3, -1)  # 4 value heads
        call(q=three_heads, k=three_heads)
    with expect(name + "chunk_size must be at least 1 (or None), got 0"):
        call(chunk_size=0)
    with expect(name + "chunk_size must be None or an integer, got 2.5", TypeError):
        call(chunk_size=2.5)
    with expect(name + "q and k must have the same shape"):
        call(q=args["q"][..., :3])
    with expect(name + "q must have shape (batch, tokens, heads_k, dim_k), got a 3-D tensor"):
        call(q=args["q"][0])
    with expect(name + "v must have the (batch, tokens) of k"):
        call(v=args["v"][:, :4])
    with expect(name + "g must have shape (batch, tokens, heads_v) = (2, 10, 4)"):
        call(g=args["g"][:, :, :2])
    with expect(name + "beta must have shape (batch, tokens, heads_v)"):
        call(beta=args["beta"][:, :4])
    with expect(name + "initial_state must have shape (batch, heads_v, dim_k, dim_v) = "):
        call(initial_state=args["initial_state"][..., :2])
    with expect(
        name
        + "k must be a floating-point tensor (embeddings are real numbers), got dtype torch.int64"
    ):
        call(k=args["k"].long())
    with expect(name + "beta must be a torch.Tensor, got float", TypeError):
        call(beta=0.5)


# --- the layer: GatedDeltaNet against Qwen3NextGatedDeltaNet --------------------------------

LAYER = {
    "d_in": 12,
    "num_key_heads": 2,
    "num_value_heads": 4,
    "key_head_dim": 5,
    "value_head_dim": 3,
    "conv_size": 4,
    "eps": 1e-6,
}


def make_layer(dtype: torch.dtype = F64, seed: int = 0, **overrides) -> GatedDeltaNet:
    """A GatedDeltaNet with every weight random (the norm's and dt_bias too)."""
    torch.manual_seed(seed)
    layer = GatedDeltaNet(**(LAYER | overrides)).to(dtype)
    with torch.no_grad():
        layer.norm.weight.uniform_(0.5, 1.5)
        layer.dt_bias.normal_()
        layer.conv.weight.mul_(3.0)
    return layer


class Float64GatedNorm(nn.Module):
    """Qwen3NextRMSNormGated's formula without its casts to float32, with its weight."""

    def __init__(self, theirs: nn.Module):
        super().__init__()
        self.weight, self.eps = theirs.weight, theirs.variance_epsilon

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x * F.silu(gate)


def qwen3_next_pair(
    dtype: torch.dtype = F64, seed: int = 0
) -> tuple[GatedDeltaNet, nn.Module, Qwen3NextConfig]:
    """Qwen3NextGatedDeltaNet (layer 0 of one linear-attention layer) at ``LAYER``'s
    sizes, every weight random (its norm's and dt_bias too, its convolution larger),
    and ours from it by ``from_transformers``, which unfuses its projections."""
    config = Qwen3NextConfig(
        hidden_size=LAYER["d_in"],
        linear_num_key_heads=LAYER["num_key_heads"],
        linear_num_value_heads=LAYER["num_value_heads"],
        linear_key_head_dim=LAYER["key_head_dim"],
        linear_value_head_dim=LAYER["value_head_dim"],
        linear_conv_kernel_dim=LAYER["conv_size"],
        rms_norm_eps=LAYER["eps"],
        hidden_act="silu",
        num_hidden_layers=1,
        layer_types=["linear_attention"],
    )
    torch.manual_seed(seed)
    theirs = Qwen3NextGatedDeltaNet(config, layer_idx=0).to(dtype)
    with torch.no_grad():
        theirs.norm.weight.uniform_(0.5, 1.5)
        theirs.dt_bias.normal_()
        theirs.conv1d.weight.mul_(3.0)
    ours = from_transformers(theirs, config=config)
    assert {name: getattr(ours, name) for name in LAYER if name != "eps"} == {
        name: size for name, size in LAYER.items() if name != "eps"
    }
    assert ours.norm.eps == LAYER["eps"] and ours.W_query.weight.dtype == dtype
    return ours, theirs, config


@contextlib.contextmanager
def float64_qwen3_next(theirs: nn.Module) -> Iterator[None]:
    """Within the block, Qwen3NextGatedDeltaNet computes in float64 where it casts to float32.

    Its two delta-rule functions become the float64 copies, its gated norm
    :class:`Float64GatedNorm`, and ``Tensor.float()`` (with which it computes the decay
    ``g`` from ``A_log`` and ``a``) leaves a float64 tensor float64.
    """
    original_norm = theirs.norm
    theirs.norm = Float64GatedNorm(original_norm)
    original_float = torch.Tensor.float

    def keep_float64(x, *args, **kwargs):
        return x if x.dtype == torch.float64 else original_float(x, *args, **kwargs)

    try:
        with (
            mock.patch.object(
                modeling_qwen3_next,
                "torch_chunk_gated_delta_rule",
                torch_chunk_gated_delta_rule_float64,
            ),
            mock.patch.object(
                modeling_qwen3_next,
                "torch_recurrent_gated_delta_rule",
                torch_recurrent_gated_delta_rule_float64,
            ),
            mock.patch.object(torch.Tensor, "float", keep_float64),
        ):
            yield
    finally:
        theirs.norm = original_norm


def layer_input(tokens: int, dtype: torch.dtype = F64, batch: int = 2, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, tokens, LAYER["d_in"], dtype=F64, generator=gen).to(dtype)


@pytest.mark.parametrize("tokens", [1, 3, 70], ids=["one", "shorter-than-conv", "two-chunks"])
def test_layer_prefill_equals_qwen3_next_in_float64(tokens):
    ours, theirs, _ = qwen3_next_pair()
    x = layer_input(tokens)
    with float64_qwen3_next(theirs), torch.no_grad():
        expected = theirs(x)
    torch.testing.assert_close(ours(x), expected, **EXACT)


def test_layer_prefill_equals_qwen3_next_as_shipped():
    ours, theirs, _ = qwen3_next_pair(torch.float32)
    x = layer_input(9, torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), theirs(x), **FLOAT32_STEP)


def decode_both(ours, theirs, config, x, prefill):
    """Prefill ``prefill`` tokens, then one token at a time, with both layers' caches."""
    cache, their_cache = GatedDeltaNetCache(), DynamicCache(config=config)
    outputs, expected = [ours(x[:, :prefill], cache)], [theirs(x[:, :prefill], their_cache)]
    for t in range(prefill, x.shape[1]):
        outputs.append(ours(x[:, t : t + 1], cache))
        expected.append(theirs(x[:, t : t + 1], their_cache))
    return torch.cat(outputs, dim=1), torch.cat(expected, dim=1), cache, their_cache


@pytest.mark.parametrize("prefill", [2, 6], ids=["prefill-2", "prefill-6"])
def test_layer_decoding_equals_qwen3_next_in_float64(prefill):
    ours, theirs, config = qwen3_next_pair(seed=3)
    x = layer_input(10, seed=4)
    with float64_qwen3_next(theirs), torch.no_grad():
        out, expected, cache, their_cache = decode_both(ours, theirs, config, x, prefill)
    torch.testing.assert_close(out, expected, **EXACT)
    torch.testing.assert_close(cache.recurrent_state, their_cache.get_recurrent_state(0), **EXACT)
    # Theirs keeps conv_size inputs, ours the conv_size - 1 the next step needs.
    torch.testing.assert_close(cache.conv_state, their_cache.get_conv_state(0)[..., 1:], **EXACT)
    assert cache.seen_tokens == 10


def test_layer_decoding_equals_qwen3_next_as_shipped():
    ours, theirs, config = qwen3_next_pair(torch.float32, seed=5)
    x = layer_input(8, torch.float32, seed=6)
    with torch.no_grad():
        out, expected, _, _ = decode_both(ours, theirs, config, x, prefill=5)
    torch.testing.assert_close(out, expected, **FLOAT32_STEP)


@given(tokens=st.integers(1, 9), cut=st.integers(0, 9), chunk_size=st.integers(1, 5))
def test_layer_with_a_cache_continues_where_it_left_off(tokens, cut, chunk_size):
    """Any split of the input, the second part from the first's cache, equals one pass."""
    cut = min(cut, tokens)
    layer = make_layer(seed=7, chunk_size=chunk_size)
    x = layer_input(tokens, seed=8)
    cache = GatedDeltaNetCache()
    parts = [layer(part, cache) for part in (x[:, :cut], x[:, cut:]) if part.shape[1]]
    with torch.no_grad():
        torch.testing.assert_close(torch.cat(parts, dim=1), layer(x), **EXACT)
    assert cache.seen_tokens == tokens


def test_layer_cache_does_not_grow():
    layer = make_layer()
    cache = GatedDeltaNetCache()
    layer(layer_input(5), cache)
    size = cache.nbytes
    for _ in range(3):
        layer(layer_input(1), cache)
    channels = 2 * 2 * 5 + 4 * 3  # queries, keys (2 heads of 5), values (4 heads of 3)
    conv, state = channels * (4 - 1), 4 * 5 * 3  # conv_size - 1 inputs; heads_v·dim_k·dim_v
    assert cache.nbytes == size == 8 * 2 * (conv + state)  # float64, batch 2


def test_layer_errors():
    with expect("GatedDeltaNet: num_value_heads must be a multiple of num_key_heads"):
        GatedDeltaNet(8, 2, 3, 4, 4)
    with expect("GatedDeltaNet: conv_size must be at least 1, got 0"):
        GatedDeltaNet(8, 1, 1, 4, 4, conv_size=0)
    layer = make_layer()
    with expect(
        "GatedDeltaNet: cache must be a GatedDeltaNetCache or None, got KVCache", TypeError
    ):
        layer(layer_input(2), KVCache())
    with expect("GatedDeltaNet: expected the last dimension of the input to be d_in=12"):
        layer(torch.randn(1, 2, 5, dtype=F64))
    cache = GatedDeltaNetCache()
    layer(layer_input(2), cache)
    with expect("GatedDeltaNet: the cache holds a batch of 2 sequences, got an input of batch 1"):
        layer(layer_input(1, batch=1), cache)
    real = torch.ones(2, 3, dtype=torch.bool)
    padding = (
        "GatedDeltaNet: expected padding_mask, a bool tensor that is True at real tokens and "
        "False at padding, of shape (batch, tokens) = (2, 3), got "
    )
    with expect(padding + "a tensor of dtype torch.int64; a 0/1 attention_mask becomes"):
        layer(layer_input(3), padding_mask=real.long())
    with expect(padding + "shape (2, 4)"):
        layer(layer_input(3), padding_mask=torch.ones(2, 4, dtype=torch.bool))
    with expect(padding + "list", TypeError):
        layer(layer_input(3), padding_mask=[[True] * 3] * 2)
    # allowed= says which keys a query may attend to: a padding mask has its own name
    with expect("GatedDeltaNet: allowed= is no longer taken; give padding_mask="):
        layer(layer_input(3), allowed=real)


# --- padding ------------------------------------------------------------------------------

#: Sequence 0 padded on the right (5 real tokens), sequence 1 on the left (3 pads).
PADDED = [[True] * 5 + [False] * 2, [False] * 3 + [True] * 4]


@pytest.mark.parametrize("chunk_size", [64, 3], ids=["one-chunk", "chunks-of-3"])
def test_padded_batch_equals_qwen3_next_in_float64(chunk_size):
    """``allowed`` zeroes the padding's inputs, as Qwen3NextGatedDeltaNet does with its
    ``attention_mask`` (1 and 0), outputs and states alike."""
    ours, theirs, config = qwen3_next_pair(seed=9)
    ours.chunk_size = theirs.chunk_size = chunk_size
    x = layer_input(7, seed=10)
    allowed = torch.tensor(PADDED)
    cache, their_cache = GatedDeltaNetCache(), DynamicCache(config=config)
    with float64_qwen3_next(theirs), torch.no_grad():
        expected = theirs(x, their_cache, attention_mask=allowed.long())
        out = ours(x, cache, padding_mask=allowed)
    torch.testing.assert_close(out, expected, **EXACT)
    torch.testing.assert_close(cache.recurrent_state, their_cache.get_recurrent_state(0), **EXACT)


def test_padded_batch_equals_qwen3_next_as_shipped():
    ours, theirs, _ = qwen3_next_pair(torch.float32, seed=11)
    x = layer_input(7, torch.float32, seed=12)
    allowed = torch.tensor(PADDED)
    with torch.no_grad():
        expected = theirs(x, attention_mask=allowed.long())
        torch.testing.assert_close(ours(x, padding_mask=allowed), expected, **FLOAT32_STEP)


@given(pad=st.integers(1, 6), tokens=st.integers(1, 6), chunk_size=st.integers(1, 4))
def test_padding_on_the_left_changes_nothing_for_the_real_tokens(pad, tokens, chunk_size):
    """Zero inputs write nothing and a zero state stays zero under decay: the real
    tokens' outputs, and the states after them, are those of the unpadded batch."""
    layer = make_layer(seed=13, chunk_size=chunk_size)
    x = layer_input(tokens, seed=14)
    padded = torch.cat([layer_input(pad, seed=15), x], dim=1)  # the padding is not zero
    allowed = torch.arange(pad + tokens) >= pad
    cache, padded_cache = GatedDeltaNetCache(), GatedDeltaNetCache()
    with torch.no_grad():
        out = layer(x, cache)
        padded_out = layer(padded, padded_cache, padding_mask=allowed.expand(2, -1))
    torch.testing.assert_close(padded_out[:, pad:], out, **EXACT)
    torch.testing.assert_close(padded_cache.recurrent_state, cache.recurrent_state, **EXACT)
    torch.testing.assert_close(padded_cache.conv_state, cache.conv_state, **EXACT)
