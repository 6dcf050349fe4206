"""A tiny config of each model type the atlas reads: few layers, small sizes, built in
code, so that a test can build the model, run it with a cache and weigh what the cache
keeps. Windows, chunks and compression rates are small enough that a prefill of 5 tokens
and 3 decoding steps cross them."""

from __future__ import annotations

import dataclasses

import transformers

WINDOW = 7  # a sliding window or a chunk: 5 tokens fit in it, 8 do not

BASE = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=32,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=256,
    pad_token_id=0,
    bos_token_id=0,
    eos_token_id=0,
)
_MLA = dict(
    kv_lora_rank=16,
    q_lora_rank=12,
    qk_rope_head_dim=4,
    qk_nope_head_dim=8,
    v_head_dim=8,
    head_dim=4,
    num_key_value_heads=4,
    n_routed_experts=4,
    n_group=1,
    topk_group=1,
    num_experts_per_tok=2,
    first_k_dense_replace=1,
    moe_intermediate_size=16,
)
_INDEXER = dict(index_n_heads=2, index_head_dim=8, index_topk=4)
_LINEAR = dict(
    linear_conv_kernel_dim=3,
    linear_key_head_dim=8,
    linear_value_head_dim=6,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    layer_types=["linear_attention", "full_attention"] * 2,
)
_MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)
_MAMBA2 = dict(
    mamba_n_heads=4,
    mamba_n_groups=1,
    mamba_d_state=4,
    mamba_d_conv=3,
    mamba_chunk_size=4,
)
_ZAMBA = dict(
    head_dim=16,
    layers_block_type=["linear_attention", "hybrid"] * 2,
    mamba_d_state=4,
    mamba_d_conv=3,
)
_SLIDING_3_1 = ["sliding_attention"] * 3 + ["full_attention"]

#: model_type -> the fields that differ from BASE.
TINY: dict[str, dict] = {
    "llama": {},
    "mistral": dict(sliding_window=WINDOW),
    "qwen3": {},
    "qwen3_moe": _MOE,
    "gemma2": dict(sliding_window=WINDOW, query_pre_attn_scalar=8),
    "gemma3_text": dict(
        sliding_window=WINDOW,
        query_pre_attn_scalar=8,
        layer_types=[
            "sliding_attention",
            "sliding_attention",
            "full_attention",
            "sliding_attention",
        ],
    ),
    "gemma4_text": dict(
        sliding_window=WINDOW,
        vocab_size_per_layer_input=64,
        hidden_size_per_layer_input=8,
        global_head_dim=16,
        num_hidden_layers=6,
        num_kv_shared_layers=2,
        layer_types=["sliding_attention", "full_attention"] * 3,
    ),
    "gpt_oss": dict(
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention"] * 2,
    ),
    "llama4_text": dict(
        attention_chunk_size=WINDOW,
        num_local_experts=2,
        intermediate_size_mlp=32,
        no_rope_layers=[1, 1, 1, 0],
    ),
    "olmo2": {},
    "olmo3": dict(sliding_window=WINDOW, layer_types=_SLIDING_3_1),
    "smollm3": dict(no_rope_layer_interval=4),
    "cohere2": dict(sliding_window=WINDOW, layer_types=_SLIDING_3_1),
    # Its NoPE full layers must recur (Rope.nope_every): one every fourth, not the
    # shrunk default's second.
    "kolibri1": dict(sliding_window=WINDOW, layer_types=_SLIDING_3_1),
    "gpt2": dict(vocab_size=64, n_embd=32, n_layer=3, n_head=4, n_positions=64),
    "deepseek_v3": _MLA,
    "deepseek_v32": _MLA | _INDEXER,
    "glm_moe_dsa": _MLA | _INDEXER,
    "kimi_linear": {
        **_MLA,
        "q_lora_rank": None,
        "num_experts": 4,
        "num_experts_per_token": 2,
        "linear_attn_config": dict(
            full_attn_layers=[2, 4],
            kda_layers=[1, 3],
            num_heads=2,
            head_dim=8,
            short_conv_kernel_size=3,
        ),
    },
    "qwen3_next": _LINEAR | _MOE | dict(shared_expert_intermediate_size=16),
    "qwen3_5_text": _LINEAR,
    "minimax_m2": dict(
        num_local_experts=2,
        num_experts_per_tok=1,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,
        },
    ),
    "phi3": dict(sliding_window=WINDOW),
    "minimax": dict(
        num_local_experts=2,
        num_experts_per_tok=1,
        block_size=4,
        layer_types=["linear_attention", "full_attention"] * 2,
    ),
    "falcon_h1": dict(
        mamba_d_ssm=16,
        mamba_n_heads=4,
        mamba_d_head=4,
        mamba_n_groups=1,
        mamba_d_state=4,
        mamba_d_conv=3,
        mamba_chunk_size=4,
    ),
    "nemotron_h": dict(
        layers_block_type=["mamba", "mlp", "attention", "mamba"],
        ssm_state_size=4,
        mamba_num_heads=4,
        mamba_head_dim=4,
        n_groups=2,
        conv_kernel=3,
        chunk_size=4,
        n_routed_experts=2,
        moe_intermediate_size=16,
        moe_shared_expert_intermediate_size=16,
    ),
    "jamba": dict(
        attn_layer_period=2,
        attn_layer_offset=1,
        expert_layer_period=2,
        expert_layer_offset=1,
        num_experts=2,
        mamba_d_state=4,
        mamba_d_conv=3,
        mamba_dt_rank=4,
    ),
    "deepseek_v4": dict(
        num_key_value_heads=1,
        head_dim=16,
        q_lora_rank=12,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        sliding_window=WINDOW,
        compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
        layer_types=[
            "sliding_attention",
            "heavily_compressed_attention",
            "compressed_sparse_attention",
            "compressed_sparse_attention",
        ],
        o_groups=2,
        o_lora_rank=8,
        index_n_heads=2,
        index_head_dim=8,
        index_topk=2,
        qk_rope_head_dim=4,
        hc_mult=2,
        num_nextn_predict_layers=0,
    ),
    # Mamba-2 alone: 4 heads of 16 channels (expand 2 * hidden_size 32), 2 groups
    "mamba2": dict(
        num_heads=4, head_dim=16, expand=2, state_size=4, n_groups=2, conv_kernel=3, chunk_size=4
    ),
    # Mamba-2 hybrids: 4 heads of 16 channels (mamba_expand 2 * hidden_size 32)
    "bamba": _MAMBA2 | dict(attn_layer_indices=[1, 3], mamba_d_head=16),
    "granitemoehybrid": _MAMBA2
    | dict(
        mamba_d_head=16,
        layer_types=["linear_attention", "full_attention"] * 2,
        position_embedding_type="rope",
        num_local_experts=2,
        num_experts_per_tok=1,
        shared_intermediate_size=16,
    ),
    # Zamba's attention reads the hidden state and the embeddings side by side: heads of
    # 2 * hidden_size / heads, which head_dim (attention_head_dim) must give.
    "zamba2": _ZAMBA | dict(n_mamba_heads=4, mamba_ngroups=1, chunk_size=4, use_mem_rope=True),
    "zamba": _ZAMBA | dict(n_mamba_heads=2, mamba_dt_rank=4),
    "olmo_hybrid": _LINEAR,
    "lfm2": dict(conv_L_cache=3, layer_types=["conv", "full_attention"] * 2),
    "lfm2_moe": _MOE
    | dict(conv_L_cache=3, layer_types=["conv", "full_attention"] * 2, num_dense_layers=1),
    "lfm3": dict(
        conv_L_cache=3,
        sliding_window=WINDOW,
        layer_types=["conv", "sliding_attention", "full_attention", "conv"],
    ),
}


#: The sizes a config class's defaults are shrunk to, where the class has the field.
SHRUNK = dict(
    is_decoder=True,  # a causal LM: BERT's LM head attends causally and caches only then
    num_hidden_layers=4,
    decoder_layers=4,
    encoder_layers=2,
    hidden_size=32,
    intermediate_size=32,
    n_inner=32,
    ffn_dim=32,
    decoder_ffn_dim=32,
    encoder_ffn_dim=32,
    d_ff=32,
    num_attention_heads=4,
    decoder_attention_heads=4,
    encoder_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    vocab_size=64,
    max_position_embeddings=256,
    num_experts=4,
    num_local_experts=4,
    n_routed_experts=4,
    num_experts_per_tok=2,
    moe_intermediate_size=16,
    shared_expert_intermediate_size=16,
    moe_shared_expert_intermediate_size=16,
)
#: Sizes shrunk only where the class's default sets them (``None`` turns a part off).
SHRUNK_IF_SET = dict(
    sliding_window=WINDOW,
    attention_chunk_size=WINDOW,
    kv_lora_rank=16,
    q_lora_rank=12,
    qk_rope_head_dim=4,
    qk_nope_head_dim=8,
    v_head_dim=8,
    rotary_dim=4,
)

_ONE_GROUP = dict(n_group=1, topk_group=1)  # 4 experts in 1 group, not 8 groups of none
# Gemma 3n's last 2 of 4 layers reuse the keys and values of earlier ones.
_GEMMA3N = dict(num_kv_shared_layers=2, laurel_rank=4, hidden_size_per_layer_input=8)

#: model_type -> fields set on top of the shrunk defaults, where shrinking alone does
#: not give a config the class accepts or a model that runs.
_QSA = dict(
    indexer_n_heads=2,
    indexer_kv_heads=1,
    indexer_head_dim=8,
    indexer_budget=4,
    indexer_compress_ratio=2,
)
ADJUSTED: dict[str, dict] = {
    # a block indexer on two of the four layers, blocks of 2 keys, 2 of them read
    "minimax_m3_vl_text": dict(
        layer_types=["full_attention", "minimax_m3_sparse"] * 2,
        index_n_heads=2,
        index_head_dim=8,
        index_block_size=2,
        index_topk_blocks=2,
        index_local_blocks=1,
    ),
    # QSA's sizes have no defaults: a budget of 4 tokens in blocks of 2
    "qwen4_exp_text": _QSA,
    "qwen4_exp": dict(text_config=_QSA),
    "gpt_neo": dict(attention_types=[[["global", "local"], 2]], window_size=WINDOW),
    "zaya": dict(num_experts_per_tok=1),  # "ZAYA currently supports num_experts_per_tok=1"
    "mimo_v2_flash": dict(v_head_dim=6),  # values narrower than keys, as released
    "dots1": dict(n_shared_experts=1),  # Dots1MoE multiplies by it; its default is None
    "bailing_hybrid": _ONE_GROUP,
    "axk1": _ONE_GROUP,
    "gemma3n_text": _GEMMA3N,
    "gemma3n": dict(text_config=_GEMMA3N),  # merged into the shrunk text config
}


def declared(config_class) -> set[str]:
    """The field names a config class declares, with those its ``attribute_map`` maps."""
    return {f.name for f in dataclasses.fields(config_class)} | set(config_class.attribute_map)


def _shrunk_layer_types(kinds: list[str], layers: int) -> list[str]:
    """``layers`` of the kinds, each kind at least once, in the order they first come."""
    if set(kinds[:layers]) == set(kinds):
        return list(kinds[:layers])
    firsts = list(dict.fromkeys(kinds))
    return (firsts + [kinds[0]] * layers)[:layers]


def shrunk_fields(config_class) -> dict:
    """The fields that shrink a config class's defaults: its sizes, windows and experts,
    and those of the configs it holds (a vision tower's)."""
    default = config_class()
    names = declared(config_class)
    fields = {name: value for name, value in SHRUNK.items() if name in names}
    for name, value in SHRUNK_IF_SET.items():
        if name in names and getattr(default, name, None) is not None:
            fields[name] = value
    for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(default, name, None)
        if isinstance(value, list) or (isinstance(value, int) and value >= SHRUNK["vocab_size"]):
            fields[name] = 0
    if "kv_lora_rank" in fields:  # latent attention: a key/value head per query head
        fields["num_key_value_heads"] = fields["num_attention_heads"]
        if "head_dim" in fields:  # the rotary part's
            fields["head_dim"] = fields["qk_rope_head_dim"]
    cross = getattr(default, "cross_attention_layers", None)
    if cross:  # Llama 3.2 Vision's: the last of the tiny model's layers
        fields["cross_attention_layers"] = [SHRUNK["num_hidden_layers"] - 1]
    kinds = getattr(default, "layer_types", None)
    if "layer_types" in names and isinstance(kinds, list | tuple) and kinds:
        fields["layer_types"] = _shrunk_layer_types(list(kinds), SHRUNK["num_hidden_layers"])
    for name, value in vars(default).items():
        inner = (
            shrunk_fields(type(value)) if isinstance(value, transformers.PretrainedConfig) else {}
        )
        if inner:  # a config that holds sizes (a vision tower's, not DBRX's attn_config)
            fields[name] = type(value)(**inner).to_dict()
    return fields


def tiny_fields(model_type: str) -> dict:
    """The fields of ``model_type``'s tiny config: the hand-written ones of ``TINY``, else
    its config class's defaults shrunk (``shrunk_fields``, ``ADJUSTED``)."""
    if model_type in TINY:
        return TINY[model_type] if model_type == "gpt2" else BASE | TINY[model_type]
    fields = shrunk_fields(transformers.CONFIG_MAPPING[model_type])
    for name, value in ADJUSTED.get(model_type, {}).items():
        inner = fields.get(name)  # a config it holds, shrunk: adjusted in part
        fields[name] = inner | value if isinstance(inner, dict) else value
    return fields


def tiny_config(model_type: str):
    """The transformers config of ``model_type``'s tiny model (:func:`tiny_fields`)."""
    return transformers.CONFIG_MAPPING[model_type](**tiny_fields(model_type))
