"""The table of real models: each entry copies a released ``config.json``, cited.

Every number the site gives about a real model is computed from :data:`.MODELS`, never
typed into a page (``tests/test_models_table.py`` lints the pages for it). An entry
says which checkpoint its numbers come from (``source``), and where a number is not
in that file, which paper or model card gives it (``context_source``, the weights'
``source``) or which ``transformers`` config class default supplies it
(``class_defaults``). The schema, its groups and what they compute are in
:mod:`attention.models.facts`.

>>> from attention.models import MODELS
>>> MODELS["gpt-oss-20b"].local
Sliding(window=128, global_every=2)
"""

from __future__ import annotations

from attention.models.facts import (
    CSA,
    FULL,
    HCA,
    MAMBA,
    NO_MIXER,
    SLIDING,
    Chunked,
    Compressed,
    Cross,
    GlobalLayers,
    Indexer,
    Latent,
    LayerParts,
    LinearAttention,
    Mamba,
    ModelFacts,
    Quantization,
    Rope,
    Scores,
    Sliding,
    TemperatureTuning,
    Weights,
)

__all__ = ["MODELS"]


def _hf(checkpoint: str) -> str:
    return f"https://huggingface.co/{checkpoint}/blob/main/config.json"


def _compress_ratios(ratios: list[int], layers: int) -> tuple[str, ...]:
    """DeepSeek-V4's layer kinds from its file's ``compress_ratios``, as
    ``DeepseekV4Config`` reads them: 0 a sliding layer only, 4 compressed sparse
    attention, 128 heavily compressed; the entries past ``layers`` are the
    multi-token-prediction layers', which the model does not run."""
    kinds = {0: SLIDING, 4: CSA, 128: HCA}
    return tuple(kinds[ratio] for ratio in ratios[:layers])


def _hybrid_override_pattern(pattern: str) -> tuple[str, ...]:
    """Nemotron-H's layer kinds from its file's ``hybrid_override_pattern``, as
    ``NemotronHConfig`` reads it: ``M`` a Mamba-2 mixer, ``*`` attention, ``-`` an
    MLP (``E`` a mixture of experts) with no mixer."""
    kinds = {"M": MAMBA, "*": FULL, "-": NO_MIXER, "E": NO_MIXER}
    return tuple(kinds[letter] for letter in pattern)


# DeepSeek-V4-Flash's compress_ratios, 44 of them: its 43 layers' and its MTP layer's.
_DEEPSEEK_V4_FLASH_RATIOS = [0, 0] + [4, 128] * 20 + [4, 0]
# DeepSeek-V4's rope_scaling (both releases), as DeepseekV4Config gives it to the CSA and
# HCA layers: YaRN x16 from 65,536, with the attention factor it sets to 1.
_DEEPSEEK_V4_YARN = {
    "rope_type": "yarn",
    "factor": 16,
    "original_max_position_embeddings": 65536,
    "beta_fast": 32,
    "beta_slow": 1,
    "attention_factor": 1.0,
}
# DeepSeek-V4-Pro's compress_ratios, 62 of them: its 61 layers' and its MTP layer's.
_DEEPSEEK_V4_PRO_RATIOS = [128, 128] + [4, 128] * 29 + [4, 0]
# Nemotron-H-47B-Reasoning-128K's hybrid_override_pattern, one letter per layer.
_NEMOTRON_H_47B_PATTERN = (
    "M-M-M-M-M-M-M-M-M*-M-M-M-M-M-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-M-M---MM---M-M*-"
    "M-M-M-M-M-"
)

# Nemotron 3 Nano 30B's hybrid_override_pattern: 23 Mamba-2, 23 MoE, 6 attention layers.
_NEMOTRON_3_NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"

# The weights a release quantizes, as patterns over transformers' parameter names.
# gpt-oss: its quantization_config converts every module but those it names
# (modules_to_not_convert): the experts' two weight matrices; their biases stay bf16.
_GPT_OSS_EXPERTS = (
    "model.layers.*.mlp.experts.gate_up_proj",
    "model.layers.*.mlp.experts.down_proj",
)
_GPT_OSS_QUANTIZATION = (
    '{"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", '
    '"model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}; the model card '
    "(arXiv 2508.10925), section 2: the MoE weights in MXFP4, 4.25 bits per parameter"
)
# DeepSeek's FP8 release: every linear layer of the attention and the MLPs (the dense
# ones, the shared and the routed experts), one scale per 128 x 128 block; the
# embeddings, the output layer, the router and the norms stay 16-bit.
_DEEPSEEK_FP8 = (
    "model.layers.*.self_attn.q_a_proj.weight",
    "model.layers.*.self_attn.q_b_proj.weight",
    "model.layers.*.self_attn.kv_a_proj_with_mqa.weight",
    "model.layers.*.self_attn.kv_b_proj.weight",
    "model.layers.*.self_attn.o_proj.weight",
    "model.layers.*.mlp.*_proj.weight",
    "model.layers.*.mlp.experts.*_proj",
)
_DEEPSEEK_FP8_SOURCE = (
    '{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", '
    '"weight_block_size": [128, 128]}; which weights: README_WEIGHTS.md of '
    "github.com/deepseek-ai/DeepSeek-V3 (FP8 weights with 128 x 128 block scaling, "
    "weight_scale_inv beside each quantized weight)"
)
_DEEPSEEK_FP8_WEIGHTS = (
    "every linear layer of the attention and the MLPs, the experts' included; the "
    "embeddings, the output layer, the router and the norms in bf16"
)


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
        attention_bias=True,
        rms_norm_eps=None,
        learned_positions=True,
        weights=Weights(
            parameters=124_439_808,
            source="the released weights (embeddings tied to the output layer)",
        ),
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
        attention_bias=True,
        rms_norm_eps=None,
        learned_positions=True,
        weights=Weights(
            parameters=354_823_168,
            source="the released weights (embeddings tied to the output layer)",
        ),
    ),
    ModelFacts(
        name="BLOOM 176B",
        checkpoint="bigscience/bloom",
        year=2022,
        source=_hf("bigscience/bloom") + " (n_layer, hidden_size, n_head; no position field)",
        config_class="BloomConfig",
        layers=70,
        hidden_size=14336,
        num_heads=112,
        num_kv_heads=112,
        max_position_embeddings=None,  # ALiBi: the config sets no limit
        trained_context=2048,
        context_source="the model card, huggingface.co/bigscience/bloom: 'Sequence length "
        "of 2048 tokens used'",
        attention_bias=True,
        rms_norm_eps=None,
        alibi=True,
        weights=Weights(
            parameters=176_000_000_000,
            source="Le Scao et al. 2022 (BLOOM, arXiv 2211.05100), abstract: 'we present BLOOM, a "
            "176B-parameter open-access language model'",
        ),
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
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=10000.0),
        weights=Weights(
            parameters=6_738_415_616,
            source="the released weights (untied embeddings and output layer)",
        ),
        class_defaults=("attention_bias",),
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
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=500000.0),
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
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=10000.0),
        local=Sliding(window=4096),
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
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=10000.0),
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
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(
            theta=1_000_000.0, scaling={"rope_type": "linear", "factor": 8.0}, local_theta=10000.0
        ),
        local=Sliding(window=1024, global_every=6),
        scores=Scores(query_pre_attn_scalar=168),
        parts=LayerParts(qk_norm="head"),
        class_defaults=(
            "rope_theta",
            "local_rope_theta",
            "global_every",
            "max_position_embeddings",
            "attention_bias",
            "rms_norm_eps",
        ),
        weights=Weights(
            parameters=27_000_000_000,
            source="Gemma Team 2025 (Gemma 3 technical report, arXiv 2503.19786), abstract: "
            "'ranging in scale from 1 to 27 billion parameters'; Hugging Face's release post: "
            "'four sizes, 1 billion, 4 billion, 12 billion, and 27 billion parameters'",
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
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(
            theta=10000.0,
            scaling={
                "rope_type": "yarn",
                "factor": 40.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
        ),
        latent=Latent(
            kv_lora_rank=512,
            q_lora_rank=1536,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            v_head_dim=128,
        ),
        weights=Weights(
            parameters=671_000_000_000,
            source="the technical report and model card: 671B in all, 37B active per token",
        ),
        quantization=Quantization(
            dtype="fp8",
            weights=_DEEPSEEK_FP8_WEIGHTS,
            parameters=_DEEPSEEK_FP8,
            source=_hf("deepseek-ai/DeepSeek-V3") + " quantization_config: " + _DEEPSEEK_FP8_SOURCE,
        ),
    ),
    ModelFacts(
        name="Qwen3 8B",
        checkpoint="Qwen/Qwen3-8B",
        year=2025,
        source=_hf("Qwen/Qwen3-8B") + "; QK-norm (q_norm, k_norm over each head) from "
        "Qwen3Attention and Qwen Team 2025 (Qwen3 technical report), section 2",
        config_class="Qwen3Config",
        layers=36,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        trained_context=32768,
        context_source="the model card of Qwen/Qwen3-8B: context length 32,768 natively "
        "(131,072 with YaRN, which the released config leaves off)",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=1_000_000.0),
        parts=LayerParts(qk_norm="head"),
    ),
    ModelFacts(
        name="Qwen3-30B-A3B",
        checkpoint="Qwen/Qwen3-30B-A3B",
        year=2025,
        source=_hf("Qwen/Qwen3-30B-A3B") + " (read from a copy of the whole file, "
        '"transformers_version": "4.51.0"); QK-norm (q_norm, k_norm over each head) from '
        "Qwen3MoeAttention and Qwen Team 2025 (Qwen3 technical report), section 2",
        config_class="Qwen3MoeConfig",
        layers=48,
        hidden_size=2048,
        num_heads=32,
        num_kv_heads=4,
        head_dim=128,
        max_position_embeddings=40960,
        trained_context=32768,
        context_source="the model card of Qwen/Qwen3-30B-A3B: context length 32,768 natively "
        "(131,072 with YaRN, which the released config leaves off)",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=1_000_000.0),
        parts=LayerParts(qk_norm="head"),
        weights=Weights(
            parameters=30_500_000_000,
            source="the model card of Qwen/Qwen3-30B-A3B: 'Number of Parameters: 30.5B in "
            "total and 3.3B activated'",
        ),
    ),
    ModelFacts(
        name="Gemma 2 9B",
        checkpoint="google/gemma-2-9b",
        year=2024,
        source=_hf("google/gemma-2-9b") + "; the 1:1 local:global pattern from Gemma Team "
        "2024 (Gemma 2 technical report), section 2",
        config_class="Gemma2Config",
        layers=42,
        hidden_size=3584,
        num_heads=16,
        num_kv_heads=8,
        head_dim=256,
        max_position_embeddings=8192,
        trained_context=8192,
        context_source="Gemma 2 technical report, section 2: context length 8192, "
        "sliding window 4096 in every other layer",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=10000.0),
        local=Sliding(window=4096, global_every=2),
        scores=Scores(query_pre_attn_scalar=256, softcap=50.0),
        final_logit_softcapping=30.0,
        class_defaults=("global_every",),
    ),
    ModelFacts(
        name="Gemma 4 31B",
        checkpoint="google/gemma-4-31B-it",
        year=2026,
        source=_hf("google/gemma-4-31B-it") + " (text_config); QK-norm, the value norm and "
        "a score scale of 1 from Gemma4TextAttention in transformers",
        config_class="Gemma4TextConfig",
        layers=60,
        hidden_size=5376,
        num_heads=32,
        num_kv_heads=16,
        head_dim=256,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the model card of google/gemma-4-31B-it: context length 256K",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(
            theta=1_000_000.0,
            scaling={"rope_type": "proportional", "partial_rotary_factor": 0.25},
            local_theta=10000.0,
        ),
        local=Sliding(window=1024, global_every=6),
        parts=LayerParts(qk_norm="head", value_norm=True),
        global_layers=GlobalLayers(k_eq_v=True, head_dim=512, num_kv_heads=4),
        scores=Scores(scale=1.0),
        final_logit_softcapping=30.0,
        weights=Weights(
            parameters=30_700_000_000, source="the model card of google/gemma-4-31B-it: 30.7B"
        ),
    ),
    ModelFacts(
        name="Gemma 4 E2B",
        checkpoint="google/gemma-4-E2B-it",
        year=2026,
        source=_hf("google/gemma-4-E2B-it") + " (text_config); QK-norm, the value norm and "
        "a score scale of 1 from Gemma4TextAttention in transformers",
        config_class="Gemma4TextConfig",
        layers=35,
        hidden_size=1536,
        num_heads=8,
        num_kv_heads=1,
        head_dim=256,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card of google/gemma-4-E2B-it: context length 128K",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(
            theta=1_000_000.0,
            scaling={"rope_type": "proportional", "partial_rotary_factor": 0.25},
            local_theta=10000.0,
        ),
        local=Sliding(window=512, global_every=5),
        parts=LayerParts(qk_norm="head", value_norm=True),
        scores=Scores(scale=1.0),
        global_layers=GlobalLayers(head_dim=512),
        num_kv_shared_layers=20,
        final_logit_softcapping=30.0,
        weights=Weights(
            parameters=5_100_000_000,
            source="Google's figures for the release, as model listings quote them (apxml.com, "
            "crafiq.ai): '2.3B effective parameters (5.1B with Per-Layer Embeddings)'; the "
            "effective count leaves the per-layer embedding tables out, the 5.1B keeps them",
        ),
    ),
    ModelFacts(
        name="gpt-oss-120b",
        checkpoint="openai/gpt-oss-120b",
        year=2025,
        source=_hf("openai/gpt-oss-120b") + "; the learned sinks from GptOssAttention in "
        "transformers and OpenAI 2025 (gpt-oss-120b & gpt-oss-20b model card), section 2",
        config_class="GptOssConfig",
        layers=36,
        hidden_size=2880,
        num_heads=64,
        num_kv_heads=8,
        head_dim=64,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="gpt-oss model card (arXiv 2508.10925), section 2: context extended "
        "to 131,072 tokens with YaRN",
        attention_bias=True,
        rms_norm_eps=1e-5,
        rope=Rope(
            theta=150000.0,
            scaling={
                "rope_type": "yarn",
                "factor": 32.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
            },
        ),
        local=Sliding(window=128, global_every=2),
        scores=Scores(sinks=True),
        weights=Weights(
            parameters=116_800_000_000,
            source="gpt-oss model card (arXiv 2508.10925), section 2: 116.8B in all",
        ),
        quantization=Quantization(
            dtype="mxfp4",
            weights="the experts' two weight matrices in every layer (gate_up_proj and "
            "down_proj); their biases, the attention, the router, the embeddings and the "
            "output layer in bf16",
            parameters=_GPT_OSS_EXPERTS,
            source=_hf("openai/gpt-oss-120b") + " quantization_config: " + _GPT_OSS_QUANTIZATION,
        ),
    ),
    ModelFacts(
        name="gpt-oss-20b",
        checkpoint="openai/gpt-oss-20b",
        year=2025,
        source=_hf("openai/gpt-oss-20b") + "; the learned sinks from GptOssAttention in "
        "transformers and OpenAI 2025 (gpt-oss-120b & gpt-oss-20b model card), section 2",
        config_class="GptOssConfig",
        layers=24,
        hidden_size=2880,
        num_heads=64,
        num_kv_heads=8,
        head_dim=64,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="gpt-oss model card (arXiv 2508.10925), section 2: context extended "
        "to 131,072 tokens with YaRN",
        attention_bias=True,
        rms_norm_eps=1e-5,
        rope=Rope(
            theta=150000.0,
            scaling={
                "rope_type": "yarn",
                "factor": 32.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
            },
        ),
        local=Sliding(window=128, global_every=2),
        scores=Scores(sinks=True),
        weights=Weights(
            parameters=20_900_000_000,
            source="gpt-oss model card (arXiv 2508.10925), section 2: 20.9B in all",
        ),
        quantization=Quantization(
            dtype="mxfp4",
            weights="the experts' two weight matrices in every layer (gate_up_proj and "
            "down_proj); their biases, the attention, the router, the embeddings and the "
            "output layer in bf16",
            parameters=_GPT_OSS_EXPERTS,
            source=_hf("openai/gpt-oss-20b") + " quantization_config: " + _GPT_OSS_QUANTIZATION,
        ),
    ),
    ModelFacts(
        name="Llama 4 Scout",
        checkpoint="meta-llama/Llama-4-Scout-17B-16E",
        year=2025,
        source=_hf("meta-llama/Llama-4-Scout-17B-16E") + " (text_config). It writes "
        '"attn_temperature_tuning": 4, which Llama4TextAttention reads as true and '
        "transformers 5's Llama4TextConfig rejects as not a bool",
        config_class="Llama4TextConfig",
        layers=48,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=8,
        head_dim=128,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="Meta 2025, 'The Llama 4 herd' (ai.meta.com/blog/"
        "llama-4-multimodal-intelligence): pre-trained and post-trained with a 256K context",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(
            theta=500000.0,
            scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
            nope_every=4,
        ),
        local=Chunked(size=8192, global_every=4),
        parts=LayerParts(qk_norm="l2"),
        temperature_tuning=TemperatureTuning(floor_scale=8192, attn_scale=0.1),
        weights=Weights(
            parameters=109_000_000_000,
            source="Meta 2025, 'The Llama 4 herd': 109B in all, 17B active per token",
        ),
    ),
    ModelFacts(
        name="SmolLM3 3B",
        checkpoint="HuggingFaceTB/SmolLM3-3B",
        year=2025,
        source=_hf("HuggingFaceTB/SmolLM3-3B") + " (no_rope_layers: every 4th layer 0)",
        config_class="SmolLM3Config",
        layers=36,
        hidden_size=2048,
        num_heads=16,
        num_kv_heads=4,
        max_position_embeddings=65536,
        trained_context=65536,
        context_source="Hugging Face 2025, 'SmolLM3: smol, multilingual, long-context "
        "reasoner' (huggingface.co/blog/smollm3): trained up to 64k, 128k with YaRN",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=5_000_000.0, nope_every=4),
    ),
    ModelFacts(
        name="OLMo 2 7B",
        checkpoint="allenai/OLMo-2-1124-7B",
        year=2024,
        source=_hf("allenai/OLMo-2-1124-7B") + "; QK-norm over the whole projection "
        "(q_norm over num_heads * head_dim) from Olmo2Attention and OLMo et al. 2024 "
        "(2 OLMo 2 Furious), section 3",
        config_class="Olmo2Config",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=4096,
        trained_context=4096,
        context_source="2 OLMo 2 Furious (OLMo et al. 2024), section 3: pretrained on "
        "sequences of 4096 tokens",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=500000.0),
        parts=LayerParts(qk_norm="projection"),
        weights=Weights(
            parameters=7_000_000_000,
            source="Team OLMo 2024 (2 OLMo 2 Furious, arXiv 2501.00656), abstract: 'We release all "
            "OLMo 2 artifacts openly -- models at 7B and 13B scales'",
        ),
    ),
    ModelFacts(
        name="Qwen3-Next 80B-A3B",
        checkpoint="Qwen/Qwen3-Next-80B-A3B-Instruct",
        year=2025,
        source=_hf("Qwen/Qwen3-Next-80B-A3B-Instruct") + " (full_attention_interval 4, "
        "partial_rotary_factor 0.25); the output gate and QK-norm from "
        "Qwen3NextAttention in transformers",
        config_class="Qwen3NextConfig",
        layers=48,
        hidden_size=2048,
        num_heads=16,
        num_kv_heads=2,
        head_dim=256,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the model card of Qwen/Qwen3-Next-80B-A3B-Instruct: context "
        "length 262,144 natively",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=10_000_000.0, partial_rotary_factor=0.25),
        local=LinearAttention(
            mixer="Gated DeltaNet",
            num_key_heads=16,
            num_value_heads=32,
            key_head_dim=128,
            value_head_dim=128,
            conv_kernel_dim=4,
            global_every=4,
        ),
        parts=LayerParts(qk_norm="head", output_gate=True),
        weights=Weights(
            parameters=80_000_000_000,
            source="the model card of Qwen/Qwen3-Next-80B-A3B-Instruct: 'Number of Parameters: 80B "
            "in total and 3B activated'",
        ),
    ),
    ModelFacts(
        name="Qwen3.5 397B-A17B",
        checkpoint="Qwen/Qwen3.5-397B-A17B",
        year=2026,
        source=_hf("Qwen/Qwen3.5-397B-A17B") + " (text_config; full_attention_interval 4, "
        "rope_parameters with partial_rotary_factor 0.25, and mrope_section for images, "
        "which text tokens do not feel); the output gate and QK-norm from "
        "Qwen3_5MoeAttention in transformers",
        config_class="Qwen3_5MoeTextConfig",
        layers=60,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=2,
        head_dim=256,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the model card of Qwen/Qwen3.5-397B-A17B: context length 262,144 "
        "natively, extensible up to 1,010,000 tokens",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=10_000_000.0, partial_rotary_factor=0.25),
        local=LinearAttention(
            mixer="Gated DeltaNet",
            num_key_heads=16,
            num_value_heads=64,
            key_head_dim=128,
            value_head_dim=128,
            conv_kernel_dim=4,
            global_every=4,
        ),
        parts=LayerParts(qk_norm="head", output_gate=True),
        weights=Weights(
            parameters=397_000_000_000,
            source="the model card of Qwen/Qwen3.5-397B-A17B: 397B in all, 17B activated per token",
        ),
    ),
    ModelFacts(
        name="Kimi Linear",
        checkpoint="moonshotai/Kimi-Linear-48B-A3B-Instruct",
        year=2025,
        source=_hf("moonshotai/Kimi-Linear-48B-A3B-Instruct") + " (linear_attn_config: "
        "full_attn_layers 4, 8, ..., 24 and 27, 1-based, the others kda_layers; num_heads "
        "and head_dim of the KDA layers; mla_use_nope: no RoPE, so its rope_theta goes "
        "unused); KimiLinearAttention in transformers applies no rotation",
        config_class="KimiLinearConfig",
        layers=27,
        hidden_size=2304,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=1048576,
        trained_context=1048576,
        context_source="the model card of moonshotai/Kimi-Linear-48B-A3B-Instruct: "
        "context length 1M (model_max_length 1,048,576 in its config.json)",
        attention_bias=False,
        rms_norm_eps=1e-5,
        latent=Latent(kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
        local=LinearAttention(
            mixer="Kimi Delta Attention",
            num_key_heads=32,
            num_value_heads=32,
            key_head_dim=128,
            value_head_dim=128,
            conv_kernel_dim=4,
            full_attention_layers=(3, 7, 11, 15, 19, 23, 26),
        ),
        weights=Weights(
            parameters=48_000_000_000,
            source="the model card of moonshotai/Kimi-Linear-48B-A3B-Instruct: 48B "
            "in all, 3B activated per token",
        ),
    ),
    ModelFacts(
        name="DeepSeek-V3.2",
        checkpoint="deepseek-ai/DeepSeek-V3.2",
        year=2025,
        source=_hf("deepseek-ai/DeepSeek-V3.2") + " (MLA as DeepSeek-V3; the lightning "
        "indexer's index_n_heads, index_head_dim and index_topk; k = 2,048 also in the "
        "technical report, section 2.1.1)",
        config_class="DeepseekV32Config",
        layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=128,
        max_position_embeddings=163840,
        trained_context=131072,
        context_source="DeepSeek-AI 2025 (DeepSeek-V3.2 technical report), section 2.1.1: "
        "continued pre-training on sequences of 128K tokens from DeepSeek-V3.1-Terminus, "
        "whose context length has been extended to 128K",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(
            theta=10000.0,
            scaling={
                "rope_type": "yarn",
                "factor": 40.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
        ),
        latent=Latent(
            kv_lora_rank=512,
            q_lora_rank=1536,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            v_head_dim=128,
        ),
        indexer=Indexer(num_heads=64, head_dim=128, top_k=2048),
        quantization=Quantization(
            dtype="fp8",
            weights=_DEEPSEEK_FP8_WEIGHTS + " (the lightning indexer's projections counted "
            "in bf16 here: no source read here says their type)",
            parameters=_DEEPSEEK_FP8,
            source=_hf("deepseek-ai/DeepSeek-V3.2")
            + " quantization_config, as DeepSeek-V3's: "
            + _DEEPSEEK_FP8_SOURCE,
        ),
    ),
    ModelFacts(
        name="Llama 3.1 70B",
        checkpoint="meta-llama/Llama-3.1-70B",
        year=2024,
        source=_hf("meta-llama/Llama-3.1-70B") + " (rope_scaling: Llama 3's, factor 8 from 8,192)",
        config_class="LlamaConfig",
        layers=80,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card of meta-llama/Llama-3.1-70B: context length 128k",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(
            theta=500000.0,
            scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        ),
    ),
    ModelFacts(
        name="Phi-4",
        checkpoint="microsoft/phi-4",
        year=2024,
        source=_hf("microsoft/phi-4") + " (model_type phi3; rope_scaling and sliding_window null)",
        config_class="Phi3Config",
        layers=40,
        hidden_size=5120,
        num_heads=40,
        num_kv_heads=10,
        max_position_embeddings=16384,
        trained_context=16384,
        context_source="Abdin et al. 2024 (Phi-4 technical report, arXiv 2412.08905): "
        "midtraining extends the context from 4K to 16K tokens",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=250000.0),
        weights=Weights(parameters=14_000_000_000, source="the model card of microsoft/phi-4: 14B"),
    ),
    ModelFacts(
        name="Command A",
        checkpoint="CohereLabs/c4ai-command-a-03-2025",
        year=2025,
        source=_hf("CohereLabs/c4ai-command-a-03-2025") + " (sliding_window_pattern 4, "
        "local layers first); RoPE in the sliding layers only, the full ones NoPE, from "
        "Cohere2Attention in transformers",
        config_class="Cohere2Config",
        layers=64,
        hidden_size=12288,
        num_heads=96,
        num_kv_heads=8,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card of CohereLabs/c4ai-command-a-03-2025: the model "
        "supports a context of 256K, but is configured in Hugging Face for 128K "
        "(max_position_embeddings); the table keeps the configured 128K, as it keeps no "
        "context past the positions the config allows",
        context_claim="configured",
        attention_bias=False,
        rms_norm_eps=None,
        rope=Rope(theta=50000.0, nope_every=4),
        local=Sliding(window=4096, global_every=4),
        weights=Weights(
            parameters=111_000_000_000,
            source="the model card of CohereLabs/c4ai-command-a-03-2025: 111 billion",
        ),
    ),
    ModelFacts(
        name="Mistral Small 3.1 24B",
        checkpoint="mistralai/Mistral-Small-3.1-24B-Instruct-2503",
        year=2025,
        source=_hf("mistralai/Mistral-Small-3.1-24B-Instruct-2503") + " (text_config, read "
        "at revision 68faf511; sliding_window null)",
        config_class="MistralConfig",
        layers=40,
        hidden_size=5120,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card of mistralai/Mistral-Small-3.1-24B-Instruct-2503: "
        "a context window of up to 128k tokens",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=1_000_000_000.0),
        weights=Weights(
            parameters=24_000_000_000,
            source="the model card of mistralai/Mistral-Small-3.1-24B-Instruct-2503: 'With 24 "
            "billion parameters, this model achieves top-tier capabilities in both text and "
            "vision tasks'",
        ),
    ),
    ModelFacts(
        name="Nemotron-H 47B",
        checkpoint="nvidia/Nemotron-H-47B-Reasoning-128K",
        year=2025,
        source=_hf("nvidia/Nemotron-H-47B-Reasoning-128K") + " (hybrid_override_pattern: "
        "M a Mamba-2 layer, * attention, - an MLP; mamba_num_heads, mamba_head_dim, "
        "ssm_state_size, n_groups, conv_kernel); no RoPE, from NemotronHAttention in "
        "transformers",
        config_class="NemotronHConfig",
        layers=98,
        hidden_size=8192,
        num_heads=64,
        num_kv_heads=8,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card of nvidia/Nemotron-H-47B-Reasoning-128K: 128K-token "
        "contexts",
        attention_bias=False,
        rms_norm_eps=None,
        mamba=Mamba(
            mixer="Mamba-2",
            inner_size=256 * 64,
            state_size=256,
            conv_kernel_dim=4,
            num_heads=256,
            n_groups=8,
        ),
        layer_pattern=_hybrid_override_pattern(_NEMOTRON_H_47B_PATTERN),
        weights=Weights(
            parameters=47_000_000_000,
            source="the model card of nvidia/Nemotron-H-47B-Reasoning-128K: 47B",
        ),
    ),
    ModelFacts(
        name="Kimi K2",
        checkpoint="moonshotai/Kimi-K2-Instruct",
        year=2025,
        source=_hf("moonshotai/Kimi-K2-Instruct") + " (read at revision fd1984e2; "
        "model_type kimi_k2, architecture DeepseekV3ForCausalLM: the MLA of DeepSeek-V3, "
        "with 64 heads)",
        config_class="DeepseekV3Config",
        layers=61,
        hidden_size=7168,
        num_heads=64,
        num_kv_heads=64,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card of moonshotai/Kimi-K2-Instruct: context length 128K",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(
            theta=50000.0,
            scaling={
                "rope_type": "yarn",
                "factor": 32.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 1.0,
                "beta_slow": 1.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
            },
        ),
        latent=Latent(
            kv_lora_rank=512,
            q_lora_rank=1536,
            qk_nope_head_dim=128,
            qk_rope_head_dim=64,
            v_head_dim=128,
        ),
        weights=Weights(
            parameters=1_000_000_000_000,
            source="the model card of moonshotai/Kimi-K2-Instruct: 1 trillion in all, 32B "
            "activated per token",
        ),
    ),
    ModelFacts(
        name="MiniMax-M2",
        checkpoint="MiniMaxAI/MiniMax-M2",
        year=2025,
        source=_hf("MiniMaxAI/MiniMax-M2") + " (read at revision 757303d4; rotary_dim 64 of "
        "head_dim 128; use_qk_norm with qk_norm_type per_layer: QK-norm over the whole "
        "projection, q_norm over num_heads * head_dim in MiniMaxM2Attention)",
        config_class="MiniMaxM2Config",
        layers=62,
        hidden_size=3072,
        num_heads=48,
        num_kv_heads=8,
        head_dim=128,
        max_position_embeddings=196608,
        trained_context=196608,
        context_source="the config's max_position_embeddings: no source read here gives "
        "the length MiniMax-M2 was trained on",
        context_claim="configured",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=5_000_000.0, partial_rotary_factor=0.5),
        parts=LayerParts(qk_norm="projection"),
        weights=Weights(
            parameters=230_000_000_000,
            source="the model card of MiniMaxAI/MiniMax-M2: 230B in all, 10B activated",
        ),
        quantization=Quantization(
            dtype="fp8",
            weights="the attention's four projections and the experts' weight matrices; "
            "the router, the embeddings, the output layer and the norms in bf16",
            parameters=(
                "model.layers.*.self_attn.?_proj.weight",
                "model.layers.*.mlp.experts.*_proj",
            ),
            source=_hf("MiniMaxAI/MiniMax-M2") + ' quantization_config: {"quant_method": '
            '"fp8", "fmt": "float8_e4m3fn", "weight_block_size": [128, 128], '
            '"modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}',
        ),
    ),
    ModelFacts(
        name="OLMo 3 7B",
        checkpoint="allenai/Olmo-3-7B-Think",
        year=2025,
        source=_hf("allenai/Olmo-3-7B-Think") + " (read at revision d97e442d; layer_types: 3 "
        "sliding, 1 full; rope_scaling YaRN, which Olmo3Config applies to the full "
        "layers only); QK-norm over the whole projection from Olmo3Attention",
        config_class="Olmo3Config",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=32,
        max_position_embeddings=65536,
        trained_context=65536,
        context_source="OLMo et al. 2025 (Olmo 3, arXiv 2512.13961): the long-context stage "
        "extends the context from 8K to 65K tokens, with YaRN on the full-attention layers "
        "only",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(
            theta=500000.0,
            scaling={
                "rope_type": "yarn",
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "attention_factor": 1.2079441541679836,
            },
            local_theta=500000.0,  # the sliding layers: the same base, not scaled
        ),
        local=Sliding(window=4096, global_every=4),
        parts=LayerParts(qk_norm="projection"),
        weights=Weights(
            parameters=7_000_000_000,
            source="Olmo et al. 2025 (Olmo 3, arXiv 2512.13961), abstract: 'fully-open language "
            "models at the 7B and 32B parameter scales'",
        ),
    ),
    ModelFacts(
        name="GLM-5",
        checkpoint="zai-org/GLM-5",
        year=2026,
        source=_hf("zai-org/GLM-5") + " (read at revision c183ef8c; MLA with the lightning "
        "indexer of DeepSeek-V3.2: index_n_heads, index_head_dim, index_topk; its head_dim "
        "of 64 is the rotary part's)",
        config_class="GlmMoeDsaConfig",
        layers=78,
        hidden_size=6144,
        num_heads=64,
        num_kv_heads=64,
        max_position_embeddings=202752,
        trained_context=202752,
        context_source="GLM-5 Team 2026 (GLM-5 technical report, arXiv 2602.15763): the "
        "context is extended to 200K tokens in mid-training; 202,752 is the config's "
        "max_position_embeddings",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=1_000_000.0),
        latent=Latent(
            kv_lora_rank=512,
            q_lora_rank=2048,
            qk_nope_head_dim=192,
            qk_rope_head_dim=64,
            v_head_dim=256,
        ),
        indexer=Indexer(num_heads=32, head_dim=128, top_k=2048),
        weights=Weights(
            parameters=744_000_000_000,
            source="the model card of zai-org/GLM-5: 744B in all, 40B active",
        ),
    ),
    ModelFacts(
        name="DeepSeek-V4-Flash",
        checkpoint="deepseek-ai/DeepSeek-V4-Flash",
        year=2026,
        source=_hf("deepseek-ai/DeepSeek-V4-Flash") + " (compress_ratios: 0 a sliding "
        "layer, 4 compressed sparse attention, 128 heavily compressed; sliding_window, "
        "compress_rope_theta, rope_scaling, qk_rope_head_dim 64 of head_dim 512, q_lora_rank, "
        "o_groups, o_lora_rank, the indexer's index_n_heads, index_head_dim and index_topk); "
        "the sinks, the key serving as the value and the QK-norm (q_b_norm, kv_norm) from "
        "DeepseekV4Attention in transformers, whose config gives the CSA and HCA layers "
        "base compress_rope_theta with the YaRN of rope_scaling for all they rotate, and "
        "the sliding-only layers base rope_theta unscaled",
        config_class="DeepseekV4Config",
        layers=43,
        hidden_size=4096,
        num_heads=64,
        num_kv_heads=1,
        head_dim=512,
        max_position_embeddings=1048576,
        trained_context=1048576,
        context_source="the model card of deepseek-ai/DeepSeek-V4-Flash, which says the model "
        "supports a context length of 1M tokens (max_position_embeddings 1,048,576 in its "
        "config.json); it gives no length trained on",
        context_claim="supported",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=10000.0, partial_rotary_factor=0.125),
        local=Sliding(window=128),
        compressed=Compressed(
            csa_rate=4,
            hca_rate=128,
            rope_theta=160000.0,
            rope_scaling=_DEEPSEEK_V4_YARN,
            q_lora_rank=1024,
            o_groups=8,
            o_lora_rank=1024,
        ),
        indexer=Indexer(num_heads=64, head_dim=128, top_k=512),
        scores=Scores(sinks=True),
        parts=LayerParts(qk_norm="unscaled_query_head"),
        layer_pattern=_compress_ratios(_DEEPSEEK_V4_FLASH_RATIOS, 43),
        weights=Weights(
            parameters=284_000_000_000,
            source="the model card of deepseek-ai/DeepSeek-V4-Flash: 284B in all, 13B "
            "activated per token",
        ),
    ),
    ModelFacts(
        name="DeepSeek-V4-Pro",
        checkpoint="deepseek-ai/DeepSeek-V4-Pro",
        year=2026,
        source=_hf("deepseek-ai/DeepSeek-V4-Pro") + " (compress_ratios: 4 compressed sparse "
        "attention, 128 heavily compressed, 0 a sliding layer only (its MTP layer's); "
        "sliding_window, compress_rope_theta, rope_scaling, qk_rope_head_dim 64 of head_dim "
        "512, q_lora_rank, o_groups, o_lora_rank, the indexer's index_n_heads, "
        "index_head_dim and index_topk); the sinks, the key "
        "serving as the value and the QK-norm (q_b_norm, kv_norm) from DeepseekV4Attention "
        "in transformers, whose config gives the CSA and HCA layers base "
        "compress_rope_theta with the YaRN of rope_scaling for all they rotate, and the "
        "sliding-only layers base rope_theta unscaled",
        config_class="DeepseekV4Config",
        layers=61,
        hidden_size=7168,
        num_heads=128,
        num_kv_heads=1,
        head_dim=512,
        max_position_embeddings=1048576,
        trained_context=1048576,
        context_source="the config's max_position_embeddings (1,048,576), as "
        "DeepSeek-V4-Flash's: no source read here gives another length",
        context_claim="configured",
        attention_bias=False,
        rms_norm_eps=1e-6,
        rope=Rope(theta=10000.0, partial_rotary_factor=0.125),
        local=Sliding(window=128),
        compressed=Compressed(
            csa_rate=4,
            hca_rate=128,
            rope_theta=160000.0,
            rope_scaling=_DEEPSEEK_V4_YARN,
            q_lora_rank=1536,
            o_groups=16,
            o_lora_rank=1024,
        ),
        indexer=Indexer(num_heads=64, head_dim=128, top_k=1024),
        scores=Scores(sinks=True),
        parts=LayerParts(qk_norm="unscaled_query_head"),
        layer_pattern=_compress_ratios(_DEEPSEEK_V4_PRO_RATIOS, 61),
    ),
    ModelFacts(
        name="Mixtral 8x7B",
        checkpoint="mistralai/Mixtral-8x7B-v0.1",
        year=2023,
        source=_hf("mistralai/Mixtral-8x7B-v0.1") + " (sliding_window null: full attention "
        "in every layer; num_local_experts 8, num_experts_per_tok 2)",
        config_class="MixtralConfig",
        layers=32,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=32768,
        trained_context=32768,
        context_source="Jiang et al. 2024 (Mixtral of Experts, arXiv 2401.04088), section 2: "
        "trained with a context size of 32k tokens",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=1_000_000.0),
        weights=Weights(
            parameters=47_000_000_000,
            source="Jiang et al. 2024 (Mixtral of Experts, arXiv 2401.04088), abstract: "
            "'each token has access to 47B parameters, but only uses 13B active parameters "
            "during inference'",
        ),
    ),
    ModelFacts(
        name="MiMo-V2-Flash",
        checkpoint="XiaomiMiMo/MiMo-V2-Flash",
        year=2025,
        source=_hf("XiaomiMiMo/MiMo-V2-Flash") + " (head_dim 192 for queries and keys, "
        "v_head_dim 128 for values, attention_value_scale 0.707; sliding_window_size 128, "
        "which MiMoV2FlashConfig reads as a window of 129, the 128 tokens before the "
        "query and the query; hybrid_layer_pattern 0 (full) at layers 0, 5, 11, ..., 47; "
        "rope_theta 5000000 for the full layers, swa_rope_theta 10000 for the sliding "
        "ones, partial_rotary_factor 0.334; swa_num_key_value_heads 8 and "
        "add_swa_attention_sink_bias true, which MiMoV2FlashAttention builds into every "
        "sliding layer, num_key_value_heads * 2 heads and sinks). MiMoV2FlashConfig "
        "takes the layer pattern and RoPE from its own defaults, which equal the file's",
        config_class="MiMoV2FlashConfig",
        layers=48,
        hidden_size=4096,
        num_heads=64,
        num_kv_heads=4,
        head_dim=192,
        value_head_dim=128,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the model card of XiaomiMiMo/MiMo-V2-Flash: 'Trained on 27T tokens "
        "using FP8 mixed precision and native 32k seq length. The context window supports "
        "up to 256k length' (the technical report, arXiv 2601.02780: native 32k, then "
        "extended to 256k); 256k is the config's 262,144 positions",
        context_claim="supported",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=5_000_000.0, local_theta=10000.0, partial_rotary_factor=0.334),
        local=Sliding(
            window=129,
            full_attention_layers=(0, 5, 11, 17, 23, 29, 35, 41, 47),
            num_kv_heads=8,
            sinks=True,
        ),
        parts=LayerParts(value_scale=0.707),
        weights=Weights(
            parameters=309_000_000_000,
            source="the model card of XiaomiMiMo/MiMo-V2-Flash: 'a Mixture-of-Experts (MoE) "
            "language model with 309B total parameters and 15B active parameters'",
        ),
        # The file names its epsilon layernorm_epsilon (1e-05), a field MiMoV2FlashConfig
        # does not read: its rms_norm_eps is the class's default, equal to it.
        class_defaults=("rms_norm_eps",),
        # No quantization: the file's quantization_config (fp8, 128 x 128 blocks) names no
        # module it leaves out, and no source read here says which weights it converts.
    ),
    ModelFacts(
        name="GLM-5.1",
        checkpoint="zai-org/GLM-5.1",
        year=2026,
        source=_hf("zai-org/GLM-5.1") + " (every field GLM-5's but transformers_version: "
        "MLA with the lightning indexer of DeepSeek-V3.2, index_n_heads, index_head_dim, "
        "index_topk; its head_dim of 64 is the rotary part's; no indexer_types, so "
        "GlmMoeDsaConfig runs the indexer in every layer)",
        config_class="GlmMoeDsaConfig",
        layers=78,
        hidden_size=6144,
        num_heads=64,
        num_kv_heads=64,
        max_position_embeddings=202752,
        trained_context=202752,
        context_source="the GLM-5.1 guide at docs.z.ai: context length 200K; 202,752 is the "
        "config's max_position_embeddings, as GLM-5's",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(theta=1_000_000.0),
        latent=Latent(
            kv_lora_rank=512,
            q_lora_rank=2048,
            qk_nope_head_dim=192,
            qk_rope_head_dim=64,
            v_head_dim=256,
        ),
        indexer=Indexer(num_heads=32, head_dim=128, top_k=2048),
        # No weights' count: the one source read here that gives one (NVIDIA's NIM card,
        # 754B) counts more than GLM-5's 744B for the same file, likely its MTP layer.
    ),
    ModelFacts(
        name="Nemotron 3 Nano 30B",
        checkpoint="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        year=2025,
        source=_hf("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16") + " (hybrid_override_pattern: "
        "M a Mamba-2 layer, * attention, E a mixture of experts with no mixer; "
        "mamba_num_heads, mamba_head_dim, ssm_state_size, n_groups, conv_kernel; head_dim "
        "128, not hidden_size / num_attention_heads); no RoPE, from NemotronHAttention in "
        "transformers, whatever the file's rope_theta",
        config_class="NemotronHConfig",
        layers=52,
        hidden_size=2688,
        num_heads=32,
        num_kv_heads=2,
        head_dim=128,
        max_position_embeddings=262144,
        trained_context=262144,
        context_source="the config's max_position_embeddings (262,144): the model card and "
        "the technical report (arXiv 2512.20848) say the model supports contexts of up to "
        "1M tokens, past the config's limit; no source read here gives the length it was "
        "trained on",
        context_claim="configured",
        attention_bias=False,
        rms_norm_eps=None,
        mamba=Mamba(
            mixer="Mamba-2",
            inner_size=64 * 64,
            state_size=128,
            conv_kernel_dim=4,
            num_heads=64,
            n_groups=8,
            # The layer's recipe, from the same file: chunk_size, time_step_min,
            # layer_norm_epsilon, use_bias, use_conv_bias
            chunk_size=128,
            time_step_floor=0.001,
            norm_eps=1e-5,
            proj_bias=False,
            conv_bias=True,
        ),
        layer_pattern=_hybrid_override_pattern(_NEMOTRON_3_NANO_PATTERN),
        weights=Weights(
            parameters=30_000_000_000,
            source="the model card of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16: '3.5B "
            "active parameters and 30B parameters in total'",
        ),
    ),
    # -- Part VII: attention that is not decoder-only ----------------------------------
    ModelFacts(
        name="BERT base",
        checkpoint="google-bert/bert-base-uncased",
        year=2018,
        source=_hf("google-bert/bert-base-uncased") + " (num_hidden_layers, hidden_size, "
        "num_attention_heads, max_position_embeddings; position_embedding_type absolute)",
        config_class="BertConfig",
        layers=12,
        hidden_size=768,
        num_heads=12,
        num_kv_heads=12,
        max_position_embeddings=512,
        trained_context=512,
        context_source="Devlin et al. 2018 (BERT), appendix A.2: sequences of 128 tokens "
        "for 90% of the steps, then of 512 for the rest",
        attention_bias=True,
        rms_norm_eps=None,
        learned_positions=True,
        bidirectional=True,
    ),
    ModelFacts(
        name="ModernBERT base",
        checkpoint="answerdotai/ModernBERT-base",
        year=2024,
        source=_hf("answerdotai/ModernBERT-base") + " (global_attn_every_n_layers 3: layers "
        "0, 3, 6, ... global, as ModernBertConfig reads it; local_attention 128, which "
        "ModernBertConfig halves into sliding_window; global_rope_theta and "
        "local_rope_theta)",
        config_class="ModernBertConfig",
        layers=22,
        hidden_size=768,
        num_heads=12,
        num_kv_heads=12,
        max_position_embeddings=8192,
        trained_context=8192,
        context_source="Warner et al. 2024 (ModernBERT): a native sequence length of 8,192 tokens",
        attention_bias=False,
        rms_norm_eps=None,
        rope=Rope(theta=160000.0, local_theta=10000.0),
        local=Sliding(window=64, full_attention_layers=(0, 3, 6, 9, 12, 15, 18, 21)),
        bidirectional=True,
        weights=Weights(
            parameters=149_000_000,
            source="the model card of answerdotai/ModernBERT-base (revision 890363e1): "
            "'ModernBERT-base - 22 layers, 149 million parameters'",
        ),
    ),
    ModelFacts(
        name="Whisper large-v3",
        checkpoint="openai/whisper-large-v3",
        year=2023,
        source=_hf("openai/whisper-large-v3") + " (the decoder's decoder_layers, d_model, "
        "decoder_attention_heads and max_target_positions; max_source_positions, the "
        "encoder's output every decoder layer cross-attends to)",
        config_class="WhisperConfig",
        layers=32,
        hidden_size=1280,
        num_heads=20,
        num_kv_heads=20,
        max_position_embeddings=448,
        trained_context=448,
        context_source="the config's max_target_positions: the decoder's learned position "
        "table has no row further",
        context_claim="configured",
        attention_bias=False,
        rms_norm_eps=None,
        learned_positions=True,
        cross=Cross(context_tokens=1500),
    ),
    ModelFacts(
        name="Llama 3.2 11B Vision",
        checkpoint="meta-llama/Llama-3.2-11B-Vision",
        year=2024,
        source=_hf("meta-llama/Llama-3.2-11B-Vision") + " (text_config, with its "
        "cross_attention_layers; their QK-norm per head from MllamaTextCrossAttention, "
        "which always holds it)",
        config_class="MllamaTextConfig",
        layers=40,
        hidden_size=4096,
        num_heads=32,
        num_kv_heads=8,
        max_position_embeddings=131072,
        trained_context=131072,
        context_source="the model card: context length 128k",
        attention_bias=False,
        rms_norm_eps=1e-5,
        rope=Rope(
            theta=500000.0,
            scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        ),
        cross=Cross(layers=(3, 8, 13, 18, 23, 28, 33, 38), qk_norm="head"),
        weights=Weights(
            parameters=10_600_000_000,
            source="Meta's size for the release as AI Wiki's Llama 3.2 Vision article gives it "
            "from the model card: '11B (10.6B actual)'",
        ),
    ),
)

#: Every model the site names, by the name it uses.
MODELS: dict[str, ModelFacts] = {entry.name: entry for entry in _ENTRIES}
