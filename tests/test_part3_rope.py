"""RoPE for longer contexts against transformers: rope_frequencies, apply_rope's scaling
and partial_rotary_factor, and the modules' rope_scaling.

How float64 is compared honestly. ``transformers`` computes every RoPE table in
float32: its ``ROPE_INIT_FUNCTIONS`` build their tensors with ``dtype=torch.float``
(or ``torch.float32``), and the rotary embeddings' forward turns positions and speeds
into float32. Two comparisons follow from that:

* **Their formulas, run in float64.** :func:`their_frequencies` calls
  ``ROPE_INIT_FUNCTIONS[rope_type]`` (or the model's ``compute_default_rope_parameters``)
  unchanged, with a config, while the name ``torch`` in their modules is a stand-in
  whose ``float`` and ``float32`` are ``torch.float64`` and which passes everything else
  to torch. Their code runs line for line, each tensor in float64 (the test asserts
  the dtype); scalar arithmetic is Python's float64 anyway. Ours must agree at EXACT
  (rtol 1e-10). Their rotary embeddings' forward is three lines,
  ``cat((p * inv_freq,) * 2).cos() * attention_scaling``; :func:`their_cos_sin` writes
  them in float64 from their float64 ``inv_freq`` and ``attention_scaling``, and the
  attention modules (``LlamaAttention``, ``GPTNeoXAttention``, ``DeepseekV3Attention``,
  ``GptOssAttention``, ``Gemma4TextAttention``, ``Qwen3NextAttention``) take those cos
  and sin as they take their own, with their float32 RMS norms swapped for float64
  ones (``float64_norms``). Module outputs: EXACT.
* **Their code as shipped.** The same functions and rotary embedding modules without
  any patch, in float32: ours within float32's rounding (rtol 1e-5 on speeds; the
  modules at FLOAT32_STEP, 1e-5).
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from helpers import F64, changed
from hf_models import (
    EXACT,
    FLOAT32_STEP,
    causal_4d,
    copy_projections,
    deepseek_attention,
    deepseek_config,
    float64_norms,
    llama_attention,
    qwen3_next_query_gate,
)
from hypothesis import given
from hypothesis import strategies as st
from transformers import DynamicCache, GPTNeoXConfig, LlamaConfig
from transformers import modeling_rope_utils as rope_utils
from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
    DeepseekV3Attention,
    DeepseekV3RotaryEmbedding,
)
from transformers.models.gemma4 import modeling_gemma4
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.gpt_oss import modeling_gpt_oss
from transformers.models.llama import modeling_llama
from transformers.models.qwen3_next import modeling_qwen3_next

from attention import (
    MODELS,
    GroupedQueryAttention,
    KVCache,
    LatentCache,
    MultiHeadLatentAttention,
    Rotary,
    apply_rope,
    apply_rope_interleaved,
    layer_for,
    rope_frequencies,
)
from attention.models import ModelFacts, Sizes

pytestmark = pytest.mark.usefixtures("single_thread")

TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "proportional")
#: Speeds as transformers ships them (float32) against ours: float32's rounding of
#: ``base ** (i / dim)`` is under 1e-6 relative; 0 stays 0 (proportional).
SPEEDS_IN_FLOAT32 = {"rtol": 1e-5, "atol": 0.0}


# ---------------------------------------------------------------------------------------
# transformers' formulas, in float64 and as shipped


class _TorchWithFloat64AsFloat:
    """``torch``, except that ``torch.float`` and ``torch.float32`` are ``torch.float64``."""

    float = torch.float64
    float32 = torch.float64

    def __getattr__(self, name: str) -> object:
        return getattr(torch, name)


@contextlib.contextmanager
def transformers_in_float64():
    """Within: transformers' RoPE code (utils and the models used here) makes float64."""
    modules = (
        rope_utils,
        modeling_llama,
        modeling_qwen3_next,
        modeling_gemma4,
        modeling_gpt_oss,
        modeling_gpt_neox,
    )
    with pytest.MonkeyPatch.context() as patch:
        for module in modules:
            patch.setattr(module, "torch", _TorchWithFloat64AsFloat())
        yield


def rope_config(head_dim: int, base: float, scaling: dict | None) -> LlamaConfig:
    """A config that carries ``head_dim`` and ``scaling`` as ``rope_parameters``.

    ``transformers`` reads dynamic NTK's original context from
    ``max_position_embeddings``; our dict carries it as
    ``original_max_position_embeddings``. The other types get a
    ``max_position_embeddings`` of ``factor`` times their original context, as released
    configs have.
    """
    params = {"rope_type": "default", **(scaling or {}), "rope_theta": base}
    if params["rope_type"] == "dynamic":
        max_positions = params.pop("original_max_position_embeddings")
    else:
        original = params.get("original_max_position_embeddings", 64)
        max_positions = math.ceil(original * params.get("factor", 1.0)) + 1
    return LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=head_dim,
        max_position_embeddings=max_positions,
        rope_parameters=params,
        attn_implementation="sdpa",  # takes the boolean masks of causal_4d
    )


def their_frequencies(
    config, float64: bool, num_tokens: int | None = None, layer_type: str | None = None
) -> tuple[torch.Tensor, float]:
    """``(inv_freq, attention_scaling)`` from transformers' own functions for ``config``.

    ``"default"`` is each model's ``compute_default_rope_parameters``; Qwen3-Next's reads
    a ``partial_rotary_factor``, as the other types' functions do.
    """
    params = config.rope_parameters if layer_type is None else config.rope_parameters[layer_type]
    rope_type = params["rope_type"]
    if rope_type == "default":
        function = modeling_qwen3_next.Qwen3NextRotaryEmbedding.compute_default_rope_parameters
    else:
        function = rope_utils.ROPE_INIT_FUNCTIONS[rope_type]
    kwargs = {"layer_type": layer_type} if layer_type is not None else {}
    with transformers_in_float64() if float64 else contextlib.nullcontext():
        inv_freq, attention_scaling = function(config, None, seq_len=num_tokens, **kwargs)
    assert inv_freq.dtype == (F64 if float64 else torch.float32), inv_freq.dtype
    return inv_freq, attention_scaling


def their_cos_sin(
    inv_freq: torch.Tensor, attention_scaling: float, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rotary embeddings' forward, in float64: ``(batch, num_tokens, 2 * len(inv_freq))``."""
    freqs = positions[..., None].to(F64) * inv_freq.to(F64)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * attention_scaling, emb.sin() * attention_scaling


def vectors(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# ---------------------------------------------------------------------------------------
# rope_frequencies against ROPE_INIT_FUNCTIONS


@st.composite
def scalings(draw: st.DrawFn, rope_type: str | None = None) -> tuple[int, float, dict, int | None]:
    """``(head_dim, base, scaling, num_tokens)``: any type, with its optional keys or not."""
    rope_type = rope_type or draw(st.sampled_from(TYPES))
    head_dim = 2 * draw(st.integers(2, 64))
    base = draw(st.sampled_from([10000.0, 150000.0, 500000.0, 1e6]))
    factor = draw(st.sampled_from([1.0, 2.0, 8.0, 32.0, 40.0]) | st.floats(1.0, 64.0))
    original = draw(st.sampled_from([64, 4096, 8192]) | st.integers(8, 10000))
    scaling: dict = {"rope_type": rope_type}
    if rope_type in ("linear", "dynamic", "yarn", "llama3"):
        scaling["factor"] = factor
    if rope_type in ("dynamic", "yarn", "llama3"):
        scaling["original_max_position_embeddings"] = original
    if rope_type == "yarn":
        options = {
            "beta_fast": st.sampled_from([32.0, 16.0, 64.0]),
            "beta_slow": st.sampled_from([1.0, 0.5, 2.0]),
            "truncate": st.booleans(),
            "attention_factor": st.floats(0.5, 2.0),
            "mscale": st.sampled_from([0.0, 0.707, 1.0]),
            "mscale_all_dim": st.sampled_from([0.0, 0.707, 1.0]),
        }
        for name, values in options.items():
            if draw(st.booleans()):
                scaling[name] = draw(values)
    if rope_type == "llama3":
        scaling["low_freq_factor"] = draw(st.sampled_from([1.0, 2.0]))
        scaling["high_freq_factor"] = scaling["low_freq_factor"] + draw(st.sampled_from([1, 3.0]))
    if rope_type == "proportional":
        scaling["partial_rotary_factor"] = draw(
            st.sampled_from([0.25, 0.5, 1.0]) | st.floats(0.01, 1)
        )
        if draw(st.booleans()):
            scaling["factor"] = factor
    elif draw(st.booleans()):
        fraction = draw(st.sampled_from([0.25, 0.5, 0.75]))
        rotary_dim = int(head_dim * fraction)
        if rotary_dim % 2 == 0 and rotary_dim >= 4:
            scaling["partial_rotary_factor"] = fraction
    num_tokens = None
    if rope_type == "dynamic":
        num_tokens = draw(st.none() | st.integers(1, 4 * original))
    if draw(st.booleans()):
        scaling["rope_theta"] = base
    return head_dim, base, scaling, num_tokens


@given(case=scalings())
def test_rope_frequencies_are_transformers_formulas_run_in_float64(case):
    head_dim, base, scaling, num_tokens = case
    inv_freq, attention_factor = rope_frequencies(head_dim, base, scaling, num_tokens)
    config = rope_config(head_dim, base, scaling)
    theirs, their_factor = their_frequencies(config, float64=True, num_tokens=num_tokens)
    assert inv_freq.dtype == F64 and isinstance(attention_factor, float)
    torch.testing.assert_close(inv_freq, theirs, **EXACT)
    assert attention_factor == pytest.approx(their_factor, rel=1e-12)


@given(case=scalings())
def test_rope_frequencies_match_rope_init_functions_as_shipped(case):
    head_dim, base, scaling, num_tokens = case
    inv_freq, attention_factor = rope_frequencies(head_dim, base, scaling, num_tokens)
    config = rope_config(head_dim, base, scaling)
    theirs, their_factor = their_frequencies(config, float64=False, num_tokens=num_tokens)
    torch.testing.assert_close(inv_freq, theirs.to(F64), **SPEEDS_IN_FLOAT32)
    assert attention_factor == pytest.approx(their_factor, rel=1e-12)


def test_each_type_changes_the_speeds_it_should():
    """A sanity check of the cases the property tests draw, with the released values."""
    default, _ = rope_frequencies(64, 500000.0)
    llama31 = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    scaled, factor = rope_frequencies(64, 500000.0, llama31)
    wavelength = 2 * math.pi / default
    assert factor == 1.0
    fast, slow = wavelength < 8192 / 4, wavelength > 8192
    assert torch.equal(scaled[fast], default[fast]) and fast.any()
    torch.testing.assert_close(scaled[slow], default[slow] / 8, **EXACT)
    between = ~fast & ~slow
    assert between.any() and (scaled[between] < default[between]).all()
    assert (scaled[between] > default[between] / 8).all()


# ---------------------------------------------------------------------------------------
# apply_rope with a scaling, against transformers' rotary embeddings and functions


def test_gpt_oss_yarn_rotation_matches_gpt_oss_rotary_embedding():
    """gpt-oss's released RoPE: yarn, factor 32 over 4096 positions, no truncation."""
    yarn = {
        "rope_type": "yarn",
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
        "original_max_position_embeddings": 4096,
    }
    config = modeling_gpt_oss.GptOssConfig(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=131072,
        rope_parameters={**yarn, "rope_theta": 150000.0},
    )
    q = vectors(0, 2, 4, 7, 16)  # (batch, heads, tokens, head_dim)
    positions = torch.tensor([[0, 1, 2, 3, 4096, 70000, 131071]]).expand(2, -1)
    ours = apply_rope(q, positions[:, None], 150000.0, yarn)
    rotate = modeling_gpt_oss.apply_rotary_pos_emb
    # gpt-oss's cos and sin have head_dim / 2 columns (it splits the head itself)
    inv_freq, scaling = their_frequencies(config, float64=True)
    cos, sin = (t[..., :8] for t in their_cos_sin(inv_freq, scaling, positions))
    torch.testing.assert_close(ours, rotate(q, q, cos, sin)[0], **EXACT)
    assert scaling == pytest.approx(0.1 * math.log(32) + 1)
    # As shipped, float32 angles are within 1e-5 only at small positions (at 131071 they
    # are off by ~1e-2 radians): the first four tokens
    cos, sin = modeling_gpt_oss.GptOssRotaryEmbedding(config)(q, positions[:, :4])
    torch.testing.assert_close(
        ours[..., :4, :], rotate(q[..., :4, :], q[..., :4, :], cos, sin)[0], **FLOAT32_STEP
    )


def gemma4_config() -> modeling_gemma4.Gemma4TextConfig:
    """Gemma 4's layer pattern in miniature: a sliding layer and a global one whose head
    is twice as wide and rotates with proportional RoPE over a quarter of its pairs.
    transformers' default rope_parameters for Gemma 4 are those of the released models.
    """
    return modeling_gemma4.Gemma4TextConfig(
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
        global_head_dim=16,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        intermediate_size=64,
        vocab_size=100,
    )


def test_gemma4_proportional_rotation_matches_gemma4_rotary_embedding():
    config = gemma4_config()
    params = config.rope_parameters["full_attention"]
    assert params["rope_type"] == "proportional" and params["partial_rotary_factor"] == 0.25
    scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    base = params["rope_theta"]
    x = vectors(1, 1, 2, 6, 16)
    positions = torch.tensor([[0, 1, 5, 300, 9000, 250000]])
    ours = apply_rope(x, positions[:, None], base, scaling)
    layer = config.per_layer_config["full_attention"]
    inv_freq, factor = their_frequencies(layer, float64=True, layer_type="full_attention")
    rotate = modeling_gemma4.apply_rotary_pos_emb
    torch.testing.assert_close(
        ours, rotate(x, *their_cos_sin(inv_freq, factor, positions)), **EXACT
    )
    rotary = modeling_gemma4.Gemma4TextRotaryEmbedding(config)
    cos, sin = rotary(x, positions[:, :3], "full_attention")  # float32: small positions
    torch.testing.assert_close(ours[..., :3, :], rotate(x[..., :3, :], cos, sin), **FLOAT32_STEP)
    # Three quarters of the pairs do not turn: numbers 2..7 and 10..15 pass unchanged
    still = torch.cat((torch.arange(2, 8), torch.arange(10, 16)))
    assert torch.equal(ours[..., still], x[..., still])


@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_partial_rotary_matches_qwen3_next_apply_rotary_pos_emb(fraction):
    config = modeling_qwen3_next.Qwen3NextConfig(
        hidden_size=64,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        partial_rotary_factor=fraction,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    assert config.rope_parameters["partial_rotary_factor"] == fraction
    q, k = vectors(2, 1, 2, 5, 32), vectors(3, 1, 1, 5, 32)
    positions = torch.tensor([[0, 3, 17, 1000, 40000]])
    rotate = modeling_qwen3_next.apply_rotary_pos_emb
    inv_freq, factor = their_frequencies(config, float64=True)
    q_theirs, k_theirs = rotate(q, k, *their_cos_sin(inv_freq, factor, positions))
    ours_q = apply_rope(q, positions[:, None], 10000.0, partial_rotary_factor=fraction)
    ours_k = apply_rope(k, positions[:, None], 10000.0, partial_rotary_factor=fraction)
    torch.testing.assert_close(ours_q, q_theirs, **EXACT)
    torch.testing.assert_close(ours_k, k_theirs, **EXACT)
    cos, sin = modeling_qwen3_next.Qwen3NextRotaryEmbedding(config)(q, positions[:, :3])
    small = rotate(q[..., :3, :], k[..., :3, :], cos, sin)[0]  # float32: small positions
    torch.testing.assert_close(ours_q[..., :3, :], small, **FLOAT32_STEP)
    rotary_dim = int(32 * fraction)
    assert torch.equal(ours_q[..., rotary_dim:], q[..., rotary_dim:])


# ---------------------------------------------------------------------------------------
# GroupedQueryAttention with rope_scaling, against LlamaAttention and GPTNeoXAttention

MODULE_SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    # Llama 3.1's shape, over a short original context so that the 16 dims of a head
    # fall in all three regions (kept, blended, divided)
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 256,
    },
    # gpt-oss's shape, over 8 positions
    "yarn": {
        "rope_type": "yarn",
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": False,
        "original_max_position_embeddings": 8,
    },
    "dynamic": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8},
}


def rotary_gqa(
    d_in: int,
    d_out: int,
    context_length: int,
    *,
    rope_base: float,
    rope_scaling: dict | None = None,
    partial_rotary_factor: float = 1.0,
    **kwargs,
) -> GroupedQueryAttention:
    """A GroupedQueryAttention whose ``rotary`` part has the scaling and partial factor."""
    head_dim = d_out // kwargs["num_heads"]
    rotary = Rotary(head_dim, rope_base, rope_scaling, partial_rotary_factor)
    return GroupedQueryAttention(d_in, d_out, context_length, rotary=rotary, **kwargs)


def scaled_gqa(scaling: dict | None, seed: int = 0, **kwargs) -> GroupedQueryAttention:
    options = {"num_heads": 4, "num_kv_heads": 2, "rope_base": 10000.0, "out_bias": False}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gqa = rotary_gqa(32, 32, 64, **{**options, **kwargs}, rope_scaling=scaling)
    return gqa.to(F64).eval()


def llama_with(gqa: GroupedQueryAttention, scaling: dict):
    config = rope_config(gqa.head_dim, gqa.rope_base, scaling)
    config.hidden_size, config.num_attention_heads = gqa.d_in, gqa.num_heads
    config.num_key_value_heads = gqa.num_kv_heads
    return llama_attention(gqa, config=config), config


@pytest.mark.parametrize("name", list(MODULE_SCALINGS))
def test_gqa_with_rope_scaling_matches_llama_attention_in_float64(name):
    """A full pass of 20 tokens: past the original context of yarn and dynamic."""
    scaling = MODULE_SCALINGS[name]
    gqa = scaled_gqa(scaling)
    theirs, config = llama_with(gqa, scaling)
    x = vectors(4, 2, 20, 32)
    positions = torch.arange(20)[None]
    inv_freq, factor = their_frequencies(config, float64=True, num_tokens=20)
    expected, _ = theirs(x, their_cos_sin(inv_freq, factor, positions), causal_4d(20, 20))
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    # as shipped: LlamaRotaryEmbedding, float32 angles
    cos_sin = modeling_llama.LlamaRotaryEmbedding(config)(x, positions)
    torch.testing.assert_close(gqa(x), theirs(x, cos_sin, causal_4d(20, 20))[0], **FLOAT32_STEP)


@pytest.mark.parametrize("name", ["llama3", "yarn", "dynamic"])
def test_gqa_decoding_with_rope_scaling_matches_llama_attention_step_by_step(name):
    """Prefill 5 tokens, then decode 9 one at a time, with both caches.

    Dynamic NTK scales for the tokens seen so far: from the 9th token on (past the
    original 8), each step rotates its query and key with speeds for its own length,
    and the cached keys keep the rotation they got; transformers' rotary embedding,
    called with each step's position, does the same.
    """
    scaling = MODULE_SCALINGS[name]
    gqa = scaled_gqa(scaling, seed=1)
    theirs, config = llama_with(gqa, scaling)
    rotary = modeling_llama.LlamaRotaryEmbedding(config)  # keeps its state across steps
    x = vectors(5, 1, 14, 32)
    ours_cache, their_cache, shipped_cache = KVCache(), DynamicCache(), DynamicCache()
    for start, stop in [(0, 5), *((p, p + 1) for p in range(5, 14))]:
        step, positions = x[:, start:stop], torch.arange(start, stop)[None]
        ours = gqa(step, cache=ours_cache)
        inv_freq, factor = their_frequencies(config, float64=True, num_tokens=stop)
        cos_sin = their_cos_sin(inv_freq, factor, positions)
        mask = causal_4d(stop - start, stop)
        expected, _ = theirs(step, cos_sin, mask, their_cache)
        torch.testing.assert_close(ours, expected, **EXACT)
        shipped, _ = theirs(step, rotary(step, positions), mask, shipped_cache)
        torch.testing.assert_close(ours, shipped, **FLOAT32_STEP)


def test_static_scalings_decode_as_one_full_pass_and_dynamic_does_not():
    """Linear, yarn and llama3 speeds do not depend on the length: a cache changes
    nothing. Dynamic NTK's do once past the original context: decoding there differs
    from one pass over all the tokens, whose keys were all rotated for the full length.
    """
    x = vectors(6, 1, 14, 32)
    for name, scaling in MODULE_SCALINGS.items():
        gqa = scaled_gqa(scaling)
        cache = KVCache()
        steps = [gqa(x[:, :5], cache=cache)] + [
            gqa(x[:, p : p + 1], cache=cache) for p in range(5, 14)
        ]
        decoded = torch.cat(steps, dim=1)
        full = gqa(x)
        if name == "dynamic":
            # up to the original 8 tokens: plain RoPE, as a pass over those 8 alone
            torch.testing.assert_close(decoded[:, :8], gqa(x[:, :8]), **EXACT)
            assert not torch.allclose(decoded[:, 8:], full[:, 8:], rtol=1e-6, atol=1e-6)
        else:
            torch.testing.assert_close(decoded, full, **EXACT)


def test_dynamic_decoding_past_the_original_context_grows_no_table():
    gqa = scaled_gqa(MODULE_SCALINGS["dynamic"], seed=2)
    x = vectors(7, 1, 30, 32)
    cache = KVCache()
    gqa(x[:, :8], cache=cache)
    (before,) = [cos.shape for cos, _ in gqa.rotary._tables.values()]
    for p in range(8, 30):
        gqa(x[:, p : p + 1], cache=cache)
    assert [cos.shape for cos, _ in gqa.rotary._tables.values()] == [before]


def neox_attention(gqa: GroupedQueryAttention, fraction: float, scaling: dict | None):
    """transformers' ``GPTNeoXAttention`` (partial rotary) holding ``gqa``'s weights.

    GPT-NeoX fuses the three projections into ``query_key_value``, head by head: the
    rows of head ``h`` are its query, then its key, then its value.
    """
    params = {"rope_type": "default", **(scaling or {}), "rope_theta": gqa.rope_base}
    config = GPTNeoXConfig(
        hidden_size=gqa.d_in,
        num_attention_heads=gqa.num_heads,
        attention_bias=True,
        max_position_embeddings=gqa.context_length,
        rope_parameters={**params, "partial_rotary_factor": fraction},
        attn_implementation="sdpa",
    )
    theirs = modeling_gpt_neox.GPTNeoXAttention(config, layer_idx=0).to(F64).eval()
    heads, head_dim = gqa.num_heads, gqa.head_dim
    with torch.no_grad():
        for part in ("weight", "bias"):
            per_head = [
                getattr(layer, part).view(heads, head_dim, -1)
                for layer in (gqa.W_query, gqa.W_key, gqa.W_value)
            ]
            fused = torch.cat(per_head, dim=1).reshape(3 * heads * head_dim, -1).squeeze(-1)
            getattr(theirs.query_key_value, part).copy_(fused)
        theirs.dense.weight.copy_(gqa.out_proj.weight)
        theirs.dense.bias.copy_(gqa.out_proj.bias)
    return theirs, config


@pytest.mark.parametrize("fraction", [0.25, 0.5])
@pytest.mark.parametrize("scaling", [None, MODULE_SCALINGS["linear"]], ids=["plain", "linear"])
def test_gqa_partial_rotary_matches_gpt_neox_attention(fraction, scaling):
    """GPT-NeoX rotates the first quarter of each head (``rotary_pct`` 0.25)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        gqa = rotary_gqa(
            32, 32, 64, num_heads=2, num_kv_heads=2, qkv_bias=True, rope_base=10000.0,
            rope_scaling=scaling, partial_rotary_factor=fraction,
        ).to(F64).eval()  # fmt: skip
    theirs, config = neox_attention(gqa, fraction, scaling)
    assert theirs.rotary_ndims == int(16 * fraction)
    x = vectors(8, 2, 9, 32)
    positions = torch.arange(9)[None]
    inv_freq, factor = their_frequencies(config, float64=True)
    expected, _ = theirs(
        x, causal_4d(9, 9), position_embeddings=their_cos_sin(inv_freq, factor, positions)
    )
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    rotary = modeling_gpt_neox.GPTNeoXRotaryEmbedding(config)
    shipped, _ = theirs(x, causal_4d(9, 9), position_embeddings=rotary(x, positions))
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


# ---------------------------------------------------------------------------------------
# The released models' recipes (attention.layer_for), with their scaled RoPE: gpt-oss
# (yarn and sinks), Gemma 4's global layers (proportional, QK-norm, value norm, keys as
# values, scale 1) and Qwen3-Next (partial rotary, QK-norm, output gate)


def part3_gqa(seed: int, head_dim: int, facts: ModelFacts) -> GroupedQueryAttention:
    """The first full-attention layer of the model ``facts`` describes, from its recipe,
    float64, with 4 query heads and 2 key/value heads, random norm weights and sinks
    (they start at ones and zeros, which would hide a mix-up). Its bias is the
    model's ``attention_bias``, on all four projections or none."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        sizes = Sizes(
            hidden_size=4 * head_dim,
            num_heads=4,
            num_kv_heads=2,
            head_dim=head_dim,
            max_position_embeddings=64,
        )
        index = facts.layer_types.index("full_attention")
        gqa = layer_for(facts, index, sizes=sizes)
        gqa = gqa.to(F64).eval()
        with torch.no_grad():
            for norm in (gqa.q_norm, gqa.k_norm):
                if norm is not None:
                    norm.weight.uniform_(0.5, 1.5)
            if getattr(gqa, "sinks", None) is not None:
                gqa.sinks.normal_()
    return gqa


def test_gpt_oss_attention_with_its_yarn_matches_in_float64():
    """gpt-oss's attention as released: yarn (factor 32, no truncation) and sinks.

    Over an original context of 8 positions here, so that 20 tokens reach past it.
    """
    yarn = {**MODULE_SCALINGS["yarn"]}
    gpt_oss = changed(MODELS["gpt-oss-120b"], rope={"scaling": yarn})  # its bias, as released
    gqa = part3_gqa(6, 8, gpt_oss)
    assert gqa.rope_base == 150000.0 and gqa.sinks is not None
    config = modeling_gpt_oss.GptOssConfig(
        attention_bias=True,  # as released
        hidden_size=gqa.d_in,
        num_attention_heads=gqa.num_heads,
        num_key_value_heads=gqa.num_kv_heads,
        head_dim=gqa.head_dim,
        max_position_embeddings=256,
        rope_parameters={**yarn, "rope_theta": 150000.0},
        layer_types=["full_attention"],
        num_hidden_layers=1,
        attn_implementation="eager",  # the kernel with the sinks
    )
    theirs = modeling_gpt_oss.GptOssAttention(config, layer_idx=0).to(F64).eval()
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.sinks.copy_(gqa.sinks)
    x = vectors(14, 2, 20, gqa.d_in)
    positions = torch.arange(20)[None]
    mask = torch.zeros(1, 1, 20, 20, dtype=F64).masked_fill(~causal_4d(20, 20), float("-inf"))
    inv_freq, factor = their_frequencies(config, float64=True)
    cos, sin = (t[..., : gqa.head_dim // 2] for t in their_cos_sin(inv_freq, factor, positions))
    # gpt-oss's eager kernel keeps the logits' dtype: float64 throughout
    expected, weights = theirs(x, (cos, sin), mask)
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    torch.testing.assert_close(gqa.attention_weights(x), weights, **EXACT)
    shipped, _ = theirs(x, modeling_gpt_oss.GptOssRotaryEmbedding(config)(x, positions), mask)
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


def test_gemma4_global_attention_with_proportional_rope_matches_in_float64():
    """A global layer of Gemma 4: its head rotates a quarter of its pairs."""
    proportional = {"rope_type": "proportional", "partial_rotary_factor": 0.25}
    gqa = part3_gqa(7, 16, MODELS["Gemma 4 31B"])
    assert gqa.rotary.scaling == proportional and gqa.rope_base == 1e6 and gqa.scale == 1.0
    config = modeling_gemma4.Gemma4TextConfig(
        attention_bias=False,
        hidden_size=gqa.d_in,
        num_attention_heads=gqa.num_heads,
        num_key_value_heads=gqa.num_kv_heads,
        head_dim=8,  # the sliding layer's, unused here
        global_head_dim=gqa.head_dim,
        num_global_key_value_heads=gqa.num_kv_heads,
        attention_k_eq_v=True,
        rms_norm_eps=gqa.q_norm.eps,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        attn_implementation="sdpa",
    )
    assert config.rope_parameters["full_attention"] == {**proportional, "rope_theta": 1e6}
    theirs = modeling_gemma4.Gemma4TextAttention(config, layer_idx=1).to(F64).eval()
    assert theirs.head_dim == gqa.head_dim and theirs.v_proj is None
    copy_projections(gqa, theirs)
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight)
    x = vectors(15, 2, 9, gqa.d_in)
    positions = torch.arange(9)[None]
    layer = config.per_layer_config["full_attention"]
    inv_freq, factor = their_frequencies(layer, float64=True, layer_type="full_attention")
    cos_sin = their_cos_sin(inv_freq, factor, positions)
    rotary = modeling_gemma4.Gemma4TextRotaryEmbedding(config)
    shipped_cos_sin = rotary(x, positions, "full_attention")
    shipped, _ = theirs(x, shipped_cos_sin, causal_4d(9, 9), shared_kv_states={})
    exact = float64_norms(theirs, ("q_norm", "k_norm", "v_norm"))  # swaps them in place
    expected, _ = exact(x, cos_sin, causal_4d(9, 9), shared_kv_states={})
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


def test_qwen3_next_attention_with_partial_rotary_matches_in_float64():
    """Qwen3-Next's attention as released: a quarter of each head rotates, QK-norm
    (zero-centred: its weight is ours minus 1) and the output gate."""
    gqa = part3_gqa(8, 16, MODELS["Qwen3-Next 80B-A3B"])
    assert gqa.rope_base == 1e7 and gqa.rotary.partial_rotary_factor == 0.25
    config = modeling_qwen3_next.Qwen3NextConfig(
        attention_bias=False,
        hidden_size=gqa.d_in,
        num_attention_heads=gqa.num_heads,
        num_key_value_heads=gqa.num_kv_heads,
        head_dim=gqa.head_dim,
        partial_rotary_factor=0.25,
        rope_parameters={"rope_type": "default", "rope_theta": 1e7},
        rms_norm_eps=gqa.q_norm.eps,
        layer_types=["full_attention"],
        num_hidden_layers=1,
        attn_implementation="sdpa",
    )
    assert config.rope_parameters["partial_rotary_factor"] == 0.25
    theirs = modeling_qwen3_next.Qwen3NextAttention(config, layer_idx=0).to(F64).eval()
    copy_projections(gqa, theirs, query_weight=qwen3_next_query_gate(gqa))
    with torch.no_grad():
        theirs.q_norm.weight.copy_(gqa.q_norm.weight - 1.0)
        theirs.k_norm.weight.copy_(gqa.k_norm.weight - 1.0)
    x = vectors(16, 2, 9, gqa.d_in)
    positions = torch.arange(9)[None]
    inv_freq, factor = their_frequencies(config, float64=True)
    assert len(inv_freq) == 2  # a rotary dim of 4 in a head of 16
    cos_sin = their_cos_sin(inv_freq, factor, positions)
    shipped_cos_sin = modeling_qwen3_next.Qwen3NextRotaryEmbedding(config)(x, positions)
    shipped, _ = theirs(x, shipped_cos_sin, causal_4d(9, 9))
    exact = float64_norms(theirs, ("q_norm", "k_norm"))
    expected, _ = exact(x, cos_sin, causal_4d(9, 9))
    torch.testing.assert_close(gqa(x), expected, **EXACT)
    torch.testing.assert_close(gqa(x), shipped, **FLOAT32_STEP)


# ---------------------------------------------------------------------------------------
# MultiHeadLatentAttention with DeepSeek-V3's YaRN

#: DeepSeek-V3's released rope_parameters (config.json), with a short original context.
DEEPSEEK_YARN = {
    "rope_type": "yarn",
    "factor": 40.0,
    "original_max_position_embeddings": 8,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}


def deepseek_yarn_attention(mla: MultiHeadLatentAttention, scaling: dict):
    """``DeepseekV3Attention`` with ``mla``'s weights and a yarn ``rope_parameters``.

    It reads ``mscale_all_dim`` when it is built, for its softmax scale, so the module
    is built from a yarn config and given the weights of ``deepseek_attention``'s.
    """
    config = deepseek_config(mla)
    config.rope_parameters = {**scaling, "rope_theta": mla.rope_base}
    config.max_position_embeddings = 320
    theirs = DeepseekV3Attention(config, layer_idx=0).to(F64).eval()
    theirs.load_state_dict(deepseek_attention(mla).state_dict())
    return theirs, config


@pytest.mark.parametrize("interleave", [True, False], ids=["interleaved", "half-split"])
@pytest.mark.parametrize(
    "scaling",
    [DEEPSEEK_YARN, {**DEEPSEEK_YARN, "mscale": 0.707, "mscale_all_dim": 0.0}],
    ids=["deepseek-v3", "attention-factor-only"],
)
def test_mla_yarn_matches_deepseek_v3_attention(interleave, scaling):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(4)
        mla = MultiHeadLatentAttention(
            32, 32, 40, num_heads=3, q_lora_rank=12, kv_lora_rank=8, qk_nope_head_dim=6,
            qk_rope_head_dim=8, v_head_dim=5, rope_interleave=interleave, rope_scaling=scaling,
        ).to(F64).eval()  # fmt: skip
    theirs, config = deepseek_yarn_attention(mla, scaling)
    mscale = 0.1 * scaling["mscale_all_dim"] * math.log(40.0) + 1.0
    assert theirs.scaling == pytest.approx(14**-0.5 * mscale**2)
    x = vectors(9, 2, 24, 32)
    positions = torch.arange(24)[None]
    inv_freq, factor = their_frequencies(config, float64=True)
    cos_sin = their_cos_sin(inv_freq, factor, positions)
    expected, _ = float64_norms(theirs)(x, cos_sin, causal_4d(24, 24))
    torch.testing.assert_close(mla(x), expected, **EXACT)
    # As shipped: its own rotary embedding and norms (float32), the eager path
    theirs, _ = deepseek_yarn_attention(mla, scaling)
    theirs.config._attn_implementation = "eager"
    mask = torch.zeros(1, 1, 24, 24, dtype=F64).masked_fill(~causal_4d(24, 24), float("-inf"))
    shipped, weights = theirs(x, DeepseekV3RotaryEmbedding(config)(x, positions), mask)
    torch.testing.assert_close(mla(x), shipped, **FLOAT32_STEP)
    torch.testing.assert_close(mla.attention_weights(x), weights, **FLOAT32_STEP)
    # Decoding with the latent cache gives the same outputs
    cache = LatentCache()
    steps = [mla(x[:, :10], cache=cache)] + [
        mla(x[:, p : p + 1], cache=cache) for p in range(10, 24)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), mla(x), **EXACT)


# ---------------------------------------------------------------------------------------
# Properties: factor 1 is plain RoPE, defaults change nothing, partial rotary, the cache


@given(case=scalings(), seed=st.integers(0, 2**16))
def test_a_factor_of_one_is_plain_rope(case, seed):
    head_dim, base, scaling, _ = case
    scaling = {**scaling, "factor": 1.0}
    if scaling["rope_type"] == "default":
        del scaling["factor"]
    if scaling["rope_type"] == "proportional":
        scaling["partial_rotary_factor"] = 1.0
    if scaling["rope_type"] == "yarn":  # an explicit attention factor is not scaling
        scaling.pop("attention_factor", None)
    fraction = scaling.pop("partial_rotary_factor", 1.0)
    x = vectors(seed, 5, head_dim)
    positions = torch.tensor([0, 1, 7, 4000, 100000])
    if scaling["rope_type"] == "dynamic":
        # transformers' dynamic NTK still stretches past the original context with a
        # factor of 1: base * (num_tokens / original) ** (dim / (dim - 2)). Within it:
        positions = positions.clamp(max=scaling["original_max_position_embeddings"] - 1)
    plain = apply_rope(x, positions, base, partial_rotary_factor=fraction)
    scaled = apply_rope(x, positions, base, scaling, partial_rotary_factor=fraction)
    # YaRN's blend x * (1 - k) + x * k and llama3's may round the speed by an ulp, which
    # at position 100000 moves the angle by ~1e-11: hence 1e-10, not bit for bit.
    torch.testing.assert_close(scaled, plain, rtol=1e-10, atol=1e-10)
    if fraction == 1.0:
        plain = apply_rope_interleaved(x, positions, base)
        interleaved = apply_rope_interleaved(x, positions, base, scaling)
        torch.testing.assert_close(interleaved, plain, rtol=1e-10, atol=1e-10)


@given(seed=st.integers(0, 2**16), num_tokens=st.integers(1, 12))
def test_default_arguments_keep_todays_modules_exactly(seed, num_tokens):
    """The same seed, the same weights, the same outputs bit for bit."""
    x = vectors(seed, 1, num_tokens, 32)
    plain = scaled_gqa(None, seed)
    explicit = scaled_gqa(
        {"rope_type": "default", "rope_theta": 10000.0}, seed, partial_rotary_factor=1.0
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        before = GroupedQueryAttention(
            32, 32, 64, num_heads=4, num_kv_heads=2, rope_base=10000.0, out_bias=False
        )  # rope_base makes a plain Rotary
    before = before.to(F64).eval()
    assert list(plain.state_dict()) == list(before.state_dict())
    for name, tensor in before.state_dict().items():
        assert torch.equal(plain.state_dict()[name], tensor)
    assert torch.equal(plain(x), before(x)) and torch.equal(explicit(x), before(x))
    mla_kwargs = {
        "num_heads": 2,
        "kv_lora_rank": 4,
        "qk_nope_head_dim": 3,
        "qk_rope_head_dim": 4,
        "v_head_dim": 3,
    }
    mlas = []
    for scaling in (None, {"rope_type": "default"}):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            mlas.append(
                MultiHeadLatentAttention(32, 32, 64, **mla_kwargs, rope_scaling=scaling).to(F64)
            )
    assert mlas[0]._scale is None and torch.equal(mlas[0](x), mlas[1](x))


@given(
    seed=st.integers(0, 2**16),
    half=st.integers(1, 8),
    extra=st.integers(1, 12),
    scaling=st.sampled_from([None, MODULE_SCALINGS["yarn"], MODULE_SCALINGS["llama3"]]),
)
def test_partial_rotary_rotates_the_first_dims_as_a_head_of_their_own(seed, half, extra, scaling):
    """The first rotary_dim numbers turn as apply_rope turns a head of that size; the
    others pass unchanged."""
    rotary_dim, head_dim = 2 * half, 2 * half + extra
    fraction = rotary_dim / head_dim
    if int(head_dim * fraction) != rotary_dim:  # float rounding of the ratio
        return
    x = vectors(seed, 2, 6, head_dim)
    positions = torch.tensor([0, 2, 9, 33, 500, 7000])
    rotated = apply_rope(x, positions, 10000.0, scaling, partial_rotary_factor=fraction)
    expected = apply_rope(x[..., :rotary_dim], positions, 10000.0, scaling)
    assert torch.equal(rotated[..., :rotary_dim], expected)
    assert torch.equal(rotated[..., rotary_dim:], x[..., rotary_dim:])


@given(
    seed=st.integers(0, 2**16),
    shift=st.integers(-50, 5000),
    name=st.sampled_from(["linear", "yarn", "llama3"]),
)
def test_static_scalings_keep_scores_relative(seed, shift, name):
    scaling = MODULE_SCALINGS[name]
    q, k = vectors(seed, 6, 16), vectors(seed + 1, 6, 16)
    positions = torch.arange(6) * 11 + 40
    scores = apply_rope(q, positions, scaling=scaling) @ apply_rope(k, positions, scaling=scaling).T
    shifted = (
        apply_rope(q, positions + shift, scaling=scaling)
        @ apply_rope(k, positions + shift, scaling=scaling).T
    )
    torch.testing.assert_close(shifted, scores, rtol=1e-9, atol=1e-9)


def test_each_scaling_gets_its_own_table():
    """Each module's cos/sin table is its own: its scaling's and its rotary dim's."""
    x = vectors(10, 2, 12, 32)
    results = {}
    for name, scaling in [("plain", None), *MODULE_SCALINGS.items()]:
        for fraction in (1.0, 0.5):
            gqa = scaled_gqa(scaling, seed=5, partial_rotary_factor=fraction)
            results[name, fraction] = gqa(x)
    assert len({tuple(out.flatten().tolist()) for out in results.values()}) == len(results)
    # and each equals a module built afresh
    for (name, fraction), out in results.items():
        scaling = None if name == "plain" else MODULE_SCALINGS[name]
        assert torch.equal(scaled_gqa(scaling, seed=5, partial_rotary_factor=fraction)(x), out)


def test_dynamic_apply_rope_scales_for_the_largest_position():
    """apply_rope's dynamic NTK uses max(positions) + 1, as transformers' forward does."""
    scaling = MODULE_SCALINGS["dynamic"]
    x = vectors(11, 3, 16)
    for positions in ([0, 1, 2], [3, 4, 20], [100, 5, 6]):
        length = max(positions) + 1
        inv_freq, _ = rope_frequencies(16, 10000.0, scaling, num_tokens=length)
        angles = torch.tensor(positions, dtype=F64)[:, None] * inv_freq
        cos, sin = angles.cos(), angles.sin()
        expected = torch.cat((x[:, :8] * cos - x[:, 8:] * sin, x[:, 8:] * cos + x[:, :8] * sin), -1)
        torch.testing.assert_close(apply_rope(x, positions, scaling=scaling), expected, **EXACT)
    # without positions: the number of tokens
    long = vectors(12, 20, 16)
    assert torch.equal(
        apply_rope(long, scaling=scaling), apply_rope(long, torch.arange(20), scaling=scaling)
    )


# ---------------------------------------------------------------------------------------
# Errors

LLAMA3 = MODULE_SCALINGS["llama3"]
YARN = MODULE_SCALINGS["yarn"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"scaling": {"rope_type": "nope"}},
            r"scaling\['rope_type'\] must be one of 'default', 'linear'.*got 'nope'",
        ),
        ({"scaling": {"rope_type": "longrope", "factor": 2.0}}, r"must be one of .*got 'longrope'"),
        ({"scaling": {"factor": 2.0}}, r"needs a 'rope_type' key.*got the keys \['factor'\]"),
        (
            {"scaling": {"rope_type": "linear", "factor": 0.5}},
            r"scaling\['factor'\] must be a number >= 1 .*got 0.5",
        ),
        (
            {"scaling": {"rope_type": "linear"}},
            r"rope_type 'linear' needs the keys \['factor'\], missing \['factor'\]",
        ),
        (
            {"scaling": {"rope_type": "yarn", "factor": 4.0}},
            r"missing \['original_max_position_embeddings'\]",
        ),
        (
            {"scaling": {**LLAMA3, "high_freq_factor": 1.0}},
            r"high_freq_factor'\] must be a number greater than "
            r"scaling\['low_freq_factor'\]=1.0, got 1.0",
        ),
        (
            {"scaling": {**YARN, "beta_fast": 0.5}},
            r"beta_fast'\].*must be at least scaling\['beta_slow'\], "
            r"got beta_fast=0.5 and beta_slow=1.0",
        ),
        (
            {"scaling": {**YARN, "original_max_position_embeddings": 0}},
            r"original_max_position_embeddings'\] must be at least 1, got 0",
        ),
        (
            {"scaling": {**YARN, "low_freq_factor": 1.0}},
            r"rope_type 'yarn' takes the keys \[.*\], got unknown keys \['low_freq_factor'\]",
        ),
        (
            {"scaling": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}},
            r"scaling\['rope_theta'\]=500000.0 differs from base=10000.0",
        ),
        ({"partial_rotary_factor": 0.3}, r"rotary dimension must be even.*int\(16 \* 0.3\) = 4"),
        (
            {"partial_rotary_factor": 0.2},
            r"rotary dimension must be even and at least 2, "
            r"got int\(head_dim \* partial_rotary_factor\) = int\(16 \* 0.2\) = 3",
        ),
        (
            {"partial_rotary_factor": 0.0},
            r"partial_rotary_factor must be a number in \(0, 1\], got 0.0",
        ),
        (
            {"partial_rotary_factor": 1.5},
            r"partial_rotary_factor must be a number in \(0, 1\], got 1.5",
        ),
        (
            {"scaling": {"rope_type": "default", "partial_rotary_factor": 0.5}},
            r"scaling\['partial_rotary_factor'\]=0.5 differs from partial_rotary_factor=1.0",
        ),
        (
            {
                "scaling": {"rope_type": "proportional", "partial_rotary_factor": 0.25},
                "partial_rotary_factor": 0.5,
            },
            r"proportional RoPE rotates the whole head",
        ),
        (
            {
                "scaling": {
                    "rope_type": "dynamic",
                    "factor": 2.0,
                    "original_max_position_embeddings": 8,
                },
                "partial_rotary_factor": 0.125,
            },
            r"dynamic NTK.*at least 4, got 2",
        ),
    ],
)
def test_bad_scalings_name_what_was_expected_and_given(kwargs, message):
    x = vectors(0, 3, 16)
    if kwargs.get("partial_rotary_factor") == 0.3:  # 4.8 -> 4 is even: accepted
        assert apply_rope(x, **kwargs).shape == x.shape
        return
    with pytest.raises(ValueError, match=message):
        apply_rope(x, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"scaling": [("rope_type", "linear")]},
            r"scaling must be a dict in transformers' rope_parameters form.*got list",
        ),
        (
            {"scaling": {"rope_type": "linear", "factor": True}},
            r"scaling\['factor'\] must be a number.*got True",
        ),
        ({"scaling": {**YARN, "truncate": 1}}, r"truncate'\] must be True or False"),
        ({"base": "10000"}, r"base must be a number greater than 1, got '10000' of type str"),
    ],
)
def test_scalings_of_a_wrong_type_raise_a_type_error(kwargs, message):
    with pytest.raises(TypeError, match=message):
        apply_rope(vectors(0, 3, 16), **kwargs)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: rope_frequencies(0), r"rope_frequencies: head_dim must be at least 1, got 0"),
        (
            lambda: rope_frequencies(7),
            r"rotary dimension must be even and at least 2, got .* = int\(7 \* 1.0\) = 7",
        ),
        (lambda: rope_frequencies(8, num_tokens=0), r"num_tokens must be at least 1, got 0"),
        (lambda: rope_frequencies(8, base=1.0), r"base must be a number greater than 1, got 1.0"),
        (
            lambda: GroupedQueryAttention(8, 8, 4, num_heads=2, num_kv_heads=1, rope_scaling=YARN),
            r"GroupedQueryAttention: rope_scaling= is no longer taken; give rotary=Rotary",
        ),
        (
            lambda: Rotary(8, 10.0, partial_rotary_factor=0.125),
            r"Rotary: RoPE rotates pairs.* = int\(8 \* 0.125\) = 1",
        ),
        (
            lambda: Rotary(8, 10.0, {"rope_type": "nope"}),
            r"Rotary: scaling\['rope_type'\] must be one of .*got 'nope'",
        ),
        (
            lambda: MultiHeadLatentAttention(
                8,
                8,
                4,
                num_heads=1,
                kv_lora_rank=2,
                qk_nope_head_dim=2,
                qk_rope_head_dim=4,
                v_head_dim=2,
                rope_scaling={**YARN, "rope_theta": 50.0},
            ),
            r"Rotary: scaling\['rope_theta'\]=50.0 differs from base=10000.0",
        ),
        (
            lambda: apply_rope_interleaved(
                torch.zeros(2, 8),
                scaling={"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5},
            ),
            r"apply_rope_interleaved: scaling\['partial_rotary_factor'\]=0.5 differs from "
            r"partial_rotary_factor=1.0",
        ),
    ],
)
def test_bad_arguments_elsewhere_name_what_was_expected_and_given(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_an_optional_key_given_as_none_is_absent_as_in_transformers():
    spelled_out = {**YARN, "attention_factor": None, "mscale": None, "beta_fast": None}
    absent = {k: v for k, v in YARN.items() if k != "beta_fast"}
    ours = rope_frequencies(16, 10000.0, spelled_out)
    assert torch.equal(ours[0], rope_frequencies(16, 10000.0, absent)[0])
    assert ours[1] == rope_frequencies(16, 10000.0, absent)[1]
    config = rope_config(16, 10000.0, spelled_out)
    theirs, factor = their_frequencies(config, float64=True)
    torch.testing.assert_close(ours[0], theirs, **EXACT)
    assert ours[1] == pytest.approx(factor, rel=1e-12)
    with pytest.raises(TypeError, match=r"scaling\['factor'\] must be a number >= 1.*got None"):
        rope_frequencies(16, 10000.0, {**YARN, "factor": None})


def test_odd_head_dim_with_an_even_rotary_part_is_accepted():
    """transformers allows an odd head_dim when the rotated part is even (Phi-style)."""
    x = vectors(13, 4, 9)
    rotated = apply_rope(x, partial_rotary_factor=0.5)  # int(4.5) = 4 rotate
    assert torch.equal(rotated[..., 4:], x[..., 4:])
    gqa = rotary_gqa(
        18, 18, 4, num_heads=2, num_kv_heads=1, rope_base=100.0, partial_rotary_factor=0.5
    )
    assert gqa(torch.zeros(1, 4, 18)).shape == (1, 4, 18)
