"""The released ``config.json`` of each model added to ``MODELS`` with the atlas, as
read, for a second implementation of its entry: ``facts_from_config`` applied to the
file must give the facts the table types by hand (``test_models_readers.py``).

Each dict keeps the file's fields that the attention depends on, spelled as the file
spells them (``rope_scaling`` with its old ``"type"`` key, ``compress_ratios``,
``hybrid_override_pattern``, a multimodal file's ``text_config``), and leaves out the
rest (vocabulary, MLP and expert sizes, token ids, quantization). No file is
downloaded: the values were read from copies of the released files, named above each
one, at the revision given where the copy names it.
"""

from __future__ import annotations

#: Table name -> the fields of its released config.json.
RELEASED: dict[str, dict] = {
    # Qwen/Qwen3-30B-A3B: a copy of the whole file, in a public repository's list of
    # the Qwen3 configs ("transformers_version": "4.51.0").
    "Qwen3-30B-A3B": {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "attention_bias": False,
        "head_dim": 128,
        "hidden_size": 2048,
        "num_hidden_layers": 48,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "max_position_embeddings": 40960,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "use_sliding_window": False,
        "max_window_layers": 48,
    },
    # meta-llama/Llama-3.1-70B (gated): the copy in a public loader's test of the
    # released 70B config, which agrees with other copies on every field here.
    "Llama 3.1 70B": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 8192,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    },
    # microsoft/phi-4: a copy of the whole file ("_name_or_path": "microsoft/phi-4").
    "Phi-4": {
        "architectures": ["Phi3ForCausalLM"],
        "model_type": "phi3",
        "hidden_size": 5120,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 10,
        "max_position_embeddings": 16384,
        "original_max_position_embeddings": 16384,
        "rope_scaling": None,
        "rope_theta": 250000,
        "sliding_window": None,
    },
    # CohereLabs/c4ai-command-a-03-2025 (gated): the bf16 copy mlx-community made of
    # the whole file.
    "Command A": {
        "architectures": ["Cohere2ForCausalLM"],
        "model_type": "cohere2",
        "head_dim": 128,
        "hidden_size": 12288,
        "num_hidden_layers": 64,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
        "order_of_interleaved_layers": "local_attn_first",
        "position_embedding_type": "rope_gptj",
        "rope_scaling": None,
        "rope_theta": 50000,
        "rotary_pct": 1.0,
        "sliding_window": 4096,
        "sliding_window_pattern": 4,
    },
    # mistralai/Mistral-Small-3.1-24B-Instruct-2503 at revision 68faf511 (sha256
    # ce3ec410...), fields as a public provenance ledger of the file lists them.
    "Mistral Small 3.1 24B": {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "text_config": {
            "model_type": "mistral",
            "head_dim": 128,
            "hidden_size": 5120,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "max_position_embeddings": 131072,
            "rope_theta": 1000000000.0,
            "rms_norm_eps": 1e-05,
            "sliding_window": None,
        },
    },
    # nvidia/Nemotron-H-47B-Reasoning-128K: a copy of the whole file.
    "Nemotron-H 47B": {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "attention_head_dim": 128,
        "conv_kernel": 4,
        "expand": 2,
        "hidden_size": 8192,
        "hybrid_override_pattern": "M-M-M-M-M-M-M-M-M*-M-M-M-M-M-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*"
        "-M-M-M-M-M-M-M---MM---M-M*-M-M-M-M-M-",
        "mamba_head_dim": 64,
        "mamba_num_heads": 256,
        "max_position_embeddings": 131072,
        "n_groups": 8,
        "num_attention_heads": 64,
        "num_hidden_layers": 98,
        "num_key_value_heads": 8,
        "sliding_window": None,
        "mamba_d_state": 256,
        "ssm_state_size": 256,
    },
    # moonshotai/Kimi-K2-Instruct at revision fd1984e2 (sha256 8c13ae10...), fields as
    # a public provenance ledger of the file lists them.
    "Kimi K2": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_theta": 50000.0,
        "rope_scaling": {
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
    },
    # MiniMaxAI/MiniMax-M2 at revision 757303d4 (sha256 03d0b726...), fields as a
    # public provenance ledger of the file lists them.
    "MiniMax-M2": {
        "architectures": ["MiniMaxM2ForCausalLM"],
        "model_type": "minimax_m2",
        "head_dim": 128,
        "hidden_size": 3072,
        "num_hidden_layers": 62,
        "num_attention_heads": 48,
        "num_key_value_heads": 8,
        "max_position_embeddings": 196608,
        "qk_norm_type": "per_layer",
        "rope_theta": 5000000,
        "rotary_dim": 64,
        "sliding_window": None,
        "use_qk_norm": True,
    },
    # allenai/Olmo-3-7B-Think at revision d97e442d (sha256 c395e580...), fields as a
    # public provenance ledger of the file lists them.
    "OLMo 3 7B": {
        "architectures": ["Olmo3ForCausalLM"],
        "model_type": "olmo3",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 65536,
        "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 8,
        "rope_scaling": {
            "attention_factor": 1.2079441541679836,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "yarn",
        },
        "rope_theta": 500000,
        "sliding_window": 4096,
        "rms_norm_eps": 1e-06,
    },
    # zai-org/GLM-5 at revision c183ef8c (sha256 308d3cee...), fields as a public
    # provenance ledger of the file lists them; two quantized copies agree.
    "GLM-5": {
        "architectures": ["GlmMoeDsaForCausalLM"],
        "model_type": "glm_moe_dsa",
        "head_dim": 64,
        "hidden_size": 6144,
        "num_hidden_layers": 78,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "index_head_dim": 128,
        "index_n_heads": 32,
        "index_topk": 2048,
        "kv_lora_rank": 512,
        "q_lora_rank": 2048,
        "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64,
        "v_head_dim": 256,
        "max_position_embeddings": 202752,
        "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
    },
    # deepseek-ai/DeepSeek-V4-Flash: copies of the whole file (44 compress_ratios: the
    # 43 layers' and the MTP layer's); the -Base file and the 0731 update agree on
    # every field here.
    "DeepSeek-V4-Flash": {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "head_dim": 512,
        "hidden_size": 4096,
        "num_hidden_layers": 43,
        "num_attention_heads": 64,
        "num_key_value_heads": 1,
        "qk_rope_head_dim": 64,
        "index_head_dim": 128,
        "index_n_heads": 64,
        "index_topk": 512,
        "max_position_embeddings": 1048576,
        "rope_scaling": {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 16,
            "original_max_position_embeddings": 65536,
            "type": "yarn",
        },
        "rope_theta": 10000,
        "sliding_window": 128,
        "compress_rope_theta": 160000,
        "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0],
    },
}
