"""The attention-relevant config of every real model this site names, with its source.

Every number the site gives about a real model (its layers, heads, window, RoPE base,
context, bytes of cache) is computed from this one table, never typed into a page.
Each entry copies the fields of a released ``config.json`` and says which checkpoint
it comes from; where a number is not in that file (the context a model was trained
with, a field the file leaves to its ``transformers`` config class's default), the
entry names its source too.

Two numbers are easy to confuse. ``max_position_embeddings`` is how many positions the
config allows; ``trained_context`` is the longest text the model was trained on, which
its authors give as its context. Mistral 7B v0.1 allows 32,768 positions but was
trained on 8,192 tokens.

>>> from attention import MODELS
>>> llama = MODELS["Llama 3 8B"]
>>> llama.num_heads, llama.num_kv_heads, llama.head_dim, llama.attention
(32, 8, 128, 'GQA')
>>> llama.kv_bytes_per_token()  # 16-bit numbers: 2 * 32 layers * 8 heads * 128 * 2 bytes
131072
>>> MODELS["Mistral 7B"].kv_cache_bytes(100_000) / 2**30  # its window caps the cache
0.5
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from attention.kv_cache import kv_cache_bytes_per_token
from attention.latent import latent_cache_bytes_per_token

__all__ = ["MODELS", "ModelFacts"]

FULL, SLIDING = "full_attention", "sliding_attention"  # transformers' layer_types


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """One released model's attention, as its ``config.json`` and its authors give it.

    Field names follow ``transformers``' config classes where they have one
    (``num_key_value_heads`` becomes ``num_kv_heads``, as in the package's modules).

    Attributes
    ----------
    name, checkpoint, year : str, str, int
        The name the site uses, the checkpoint whose ``config.json`` the numbers come
        from, and the year the model was released.
    source : str
        Where the numbers come from: the ``config.json`` and, for what it does not
        hold, a paper or a model card.
    layers, hidden_size, num_heads, num_kv_heads : int
        ``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``,
        ``num_key_value_heads``.
    head_dim : int
        The config's ``head_dim``, or ``hidden_size // num_heads`` where it has none
        (for latent attention, ``qk_nope_head_dim + qk_rope_head_dim``).
    max_position_embeddings : int
        Positions the config allows.
    trained_context : int
        The longest context the model was trained with, from ``context_source``.
    positions : str
        ``"learned"`` (a position embedding table) or ``"rope"``.
    rope_theta, rope_scaling, local_rope_theta : float, dict, float or None
        RoPE's base for the global (full-attention) layers, its scaling in
        ``transformers``' ``rope_parameters`` form, and the base of the sliding layers
        where they have their own.
    sliding_window : int or None
        Tokens a sliding layer sees, the query included.
    global_every : int or None
        With a ``sliding_window``: one full-attention layer every ``global_every``
        layers, the others sliding (Gemma's ``sliding_window_pattern``). ``None``: every
        layer slides.
    kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim : int or None
        Multi-head latent attention's sizes (DeepSeek).
    query_pre_attn_scalar : int or None
        Where the scores are scaled by ``query_pre_attn_scalar ** -0.5`` instead of
        ``head_dim ** -0.5`` (Gemma).
    qk_norm : bool
        RMSNorm on each head's queries and keys before RoPE.
    parameters : int or None
        Weights of the whole model, from ``parameters_source``.
    config_class : str
        The ``transformers`` config class that reads the ``config.json``.
    class_defaults : tuple of str
        Attributes whose values the released ``config.json`` leaves out, so that they
        are the defaults of ``config_class``; the tests check those defaults.
    """

    name: str
    checkpoint: str
    year: int
    source: str
    config_class: str
    layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    max_position_embeddings: int
    trained_context: int
    context_source: str
    positions: str = "rope"
    head_dim: int | None = None
    rope_theta: float | None = None
    rope_scaling: dict | None = None
    local_rope_theta: float | None = None
    sliding_window: int | None = None
    global_every: int | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    query_pre_attn_scalar: int | None = None
    qk_norm: bool = False
    parameters: int | None = None
    parameters_source: str = ""
    class_defaults: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.head_dim is None:
            if self.kv_lora_rank is not None:  # latent attention: a query's or key's size
                head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
            else:
                head_dim = self.hidden_size // self.num_heads
            object.__setattr__(self, "head_dim", head_dim)

    @property
    def attention(self) -> str:
        """``"MLA"``, ``"MHA"`` (a key/value head per query head), ``"MQA"`` or ``"GQA"``."""
        if self.kv_lora_rank is not None:
            return "MLA"
        if self.num_kv_heads == self.num_heads:
            return "MHA"
        return "MQA" if self.num_kv_heads == 1 else "GQA"

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head."""
        return self.num_heads // self.num_kv_heads

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's attention, ``"full_attention"`` or ``"sliding_attention"``."""
        if self.sliding_window is None:
            return (FULL,) * self.layers
        if self.global_every is None:
            return (SLIDING,) * self.layers
        return tuple(
            FULL if (i + 1) % self.global_every == 0 else SLIDING for i in range(self.layers)
        )

    @property
    def receptive_field(self) -> int | None:
        """Positions back the last layer can draw on, if every layer slides; else ``None``.

        Each sliding layer reaches ``sliding_window - 1`` positions further back.
        """
        if self.sliding_window is None or FULL in self.layer_types:
            return None
        return self.layers * (self.sliding_window - 1)

    def kv_bytes_per_token(self, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes the cache of all layers grows by per token, in ``dtype`` numbers.

        ``2 * layers * num_kv_heads * head_dim * bytes``, or for latent attention
        ``layers * (kv_lora_rank + qk_rope_head_dim) * bytes``.
        """
        if self.kv_lora_rank is not None:
            return latent_cache_bytes_per_token(
                self.layers, self.kv_lora_rank, self.qk_rope_head_dim, dtype
            )
        return kv_cache_bytes_per_token(self.layers, self.num_kv_heads, self.head_dim, dtype)

    def kv_cache_bytes(self, tokens: int, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes of cache for one sequence of ``tokens`` tokens.

        A sliding layer keeps at most ``sliding_window`` tokens; a full one keeps all.
        """
        per_layer = self.kv_bytes_per_token(dtype) // self.layers
        kept = (
            min(tokens, self.sliding_window) if kind == SLIDING else tokens
            for kind in self.layer_types
        )
        return per_layer * sum(kept)


def _hf(checkpoint: str) -> str:
    return f"https://huggingface.co/{checkpoint}/blob/main/config.json"


_ENTRIES = (
    ModelFacts(
        name="GPT-2",
        checkpoint="openai-community/gpt2",
        year=2019,
        source=_hf("openai-community/gpt2") + " (n_layer, n_embd, n_head, n_positions)",
        config_class="GPT2Config",
        layers=12,
        hidden_size=768,
        num_heads=12,
        num_kv_heads=12,
        max_position_embeddings=1024,
        trained_context=1024,
        context_source="Radford et al. 2019, section 2.3: a context of 1024 tokens",
        positions="learned",
        parameters=124_439_808,
        parameters_source="the released weights (embeddings tied to the output layer)",
    ),
    ModelFacts(
        name="GPT-2 medium",
        checkpoint="openai-community/gpt2-medium",
        year=2019,
        source=_hf("openai-community/gpt2-medium") + " (n_layer, n_embd, n_head, n_positions)",
        config_class="GPT2Config",
        layers=24,
        hidden_size=1024,
        num_heads=16,
        num_kv_heads=16,
        max_position_embeddings=1024,
        trained_context=1024,
        context_source="Radford et al. 2019, section 2.3: a context of 1024 tokens",
        positions="learned",
        parameters=354_823_168,
        parameters_source="the released weights (embeddings tied to the output layer)",
    ),
    ModelFacts(
        name="Llama 2 7B",
        checkpoint="meta-llama/Llama-2-7b-hf",
        year=2023,
        source=_hf("meta-llama/Llama-2-7b-hf"),
        config_class="LlamaConfig",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=4096,
        trained_context=4096,
        context_source="Touvron et al. 2023 (Llama 2), table 1: context length 4k",
        rope_theta=10000.0,
        parameters=6_738_415_616,
        parameters_source="the released weights (untied embeddings and output layer)",
    ),
    ModelFacts(
        name="Llama 3 8B",
        checkpoint="meta-llama/Meta-Llama-3-8B",
        year=2024,
        source=_hf("meta-llama/Meta-Llama-3-8B"),
        config_class="LlamaConfig",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=8192,
        trained_context=8192,
        context_source="the model card: context length 8k",
        rope_theta=500000.0,
    ),
    ModelFacts(
        name="Mistral 7B",
        checkpoint="mistralai/Mistral-7B-v0.1",
        year=2023,
        source=_hf("mistralai/Mistral-7B-v0.1"),
        config_class="MistralConfig",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=32768,
        trained_context=8192,
        context_source="Jiang et al. 2023 (Mistral 7B), table 1: context_len 8192",
        rope_theta=10000.0,
        sliding_window=4096,
    ),
    ModelFacts(
        name="Gemma 2B",
        checkpoint="google/gemma-2b",
        year=2024,
        source=_hf("google/gemma-2b"),
        config_class="GemmaConfig",
        layers=18,
        hidden_size=2048,
        num_heads=8,
        num_kv_heads=1,
        head_dim=256,
        max_position_embeddings=8192,
        trained_context=8192,
        context_source="Gemma Team 2024 (Gemma), table 1: context length 8192",
        rope_theta=10000.0,
    ),
    ModelFacts(
        name="Gemma 3 27B",
        checkpoint="google/gemma-3-27b-it",
        year=2025,
        source=_hf("google/gemma-3-27b-it")
        + " (text_config); the local:global pattern and QK-norm from Gemma Team 2025 "
        "(Gemma 3 technical report), section 2",
        config_class="Gemma3TextConfig",
        layers=62,
        hidden_size=5376,
        num_heads=32,
        num_kv_heads=16,
        head_dim=128,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="Gemma 3 technical report, section 2.2: 128K tokens, RoPE rescaled "
        "by 8 on the global layers",
        rope_theta=1_000_000.0,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
        local_rope_theta=10000.0,
        sliding_window=1024,
        global_every=6,
        query_pre_attn_scalar=168,
        qk_norm=True,
        class_defaults=(
            "rope_theta",
            "local_rope_theta",
            "global_every",
            "max_position_embeddings",
        ),
    ),
    ModelFacts(
        name="DeepSeek-V3",
        checkpoint="deepseek-ai/DeepSeek-V3",
        year=2024,
        source=_hf("deepseek-ai/DeepSeek-V3"),
        config_class="DeepseekV3Config",
        layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=128,
        max_position_embeddings=163840,
        trained_context=131072,
        context_source="DeepSeek-AI 2024 (DeepSeek-V3 technical report), section 4.3: "
        "extended to 32K, then to 128K, with YaRN",
        rope_theta=10000.0,
        rope_scaling={
            "rope_type": "yarn",
            "factor": 40.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        parameters=671_000_000_000,
        parameters_source="the technical report and model card: 671B in all, 37B active per token",
    ),
)

#: Every model the site names, by the name it uses.
MODELS: dict[str, ModelFacts] = {entry.name: entry for entry in _ENTRIES}
