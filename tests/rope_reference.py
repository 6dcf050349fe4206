"""RoPE for longer contexts, as transformers computes it, in float64: the reference the
RoPE tests compare with (``test_rope.py``, ``test_gqa.py``, ``test_latent.py``,
``test_models_recipes.py``), and the scalings they share (:data:`MODULE_SCALINGS`).

How float64 is compared honestly. ``transformers`` computes every RoPE table in
float32: its ``ROPE_INIT_FUNCTIONS`` build their tensors with ``dtype=torch.float``
(or ``torch.float32``), and the rotary embeddings' forward turns positions and speeds
into float32. Two comparisons follow from that:

* **Their formulas, run in float64.** :func:`their_frequencies` calls
  ``ROPE_INIT_FUNCTIONS[rope_type]`` (or the model's ``compute_default_rope_parameters``)
  unchanged, with a config, while the name ``torch`` in their modules is a stand-in
  whose ``float`` and ``float32`` are ``torch.float64`` and which passes everything else
  to torch (:func:`transformers_in_float64`). Their code runs line for line, each tensor
  in float64 (the test asserts the dtype); scalar arithmetic is Python's float64 anyway.
  Ours must agree at EXACT (rtol 1e-10). Their rotary embeddings' forward is three
  lines, ``cat((p * inv_freq,) * 2).cos() * attention_scaling``; :func:`their_cos_sin`
  writes them in float64 from their float64 ``inv_freq`` and ``attention_scaling``, and
  the attention modules (``LlamaAttention``, ``GPTNeoXAttention``,
  ``DeepseekV3Attention``, ``GptOssAttention``, ``Gemma4TextAttention``,
  ``Qwen3NextAttention``) take those cos and sin as they take their own, with their
  float32 RMS norms swapped for float64 ones (``float64_norms``). Module outputs: EXACT.
* **Their code as shipped.** The same functions and rotary embedding modules without
  any patch, in float32: ours within float32's rounding (rtol 1e-5 on speeds; the
  modules at FLOAT32_STEP, 1e-5).
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
from helpers import F64
from transformers import LlamaConfig
from transformers import modeling_rope_utils as rope_utils
from transformers.models.gemma4 import modeling_gemma4
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.gpt_oss import modeling_gpt_oss
from transformers.models.llama import modeling_llama
from transformers.models.qwen3_next import modeling_qwen3_next


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


#: The scalings the modules' tests run, each at a toy size.
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
