"""Every figure each ``MODELS`` entry gives, as one JSON-ready record per model.

``tests/data/model_facts_snapshot.json`` was written by this script once, from the
flat ``ModelFacts`` of commit 5a74127, before its fields moved into typed groups;
``test_models_facts.py`` recomputes the records from today's table and requires them
equal, so that the move changed no attribute and no figure of any model. It was written
again when Part VII added its encoders and cross-attention models, with their four
attributes and ``cross_cache_bytes`` (the records of the other models only gained those
keys), and when the recipes' ``attention_bias`` and ``rms_norm_eps`` became facts
(every record gained those two keys), when Mixtral 8x7B's cited count was corrected
to its paper's 47B (its record alone changed; new entries add theirs), when the
releases' quantized weights became facts (every record gained ``quantized_dtype`` and
``quantized_parameters``), and when MiMo-V2-Flash brought sinks in the sliding
layers alone and a scale on the values (every record gained those two keys, no
figure changed), when nine models without a whole released file gained the count
their paper or model card cites (those records' two count keys alone changed), and
when DeepSeek-V4's QK-norm was added to its two entries (their ``qk_norm``,
``source`` and ``context_source`` changed) with the RoPE, query latent and grouped
output of its compressed layers (every record gained those four keys). Run it
again only to record a deliberate change to the table::

    python tests/model_facts_snapshot.py
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

PATH = Path(__file__).resolve().parent / "data" / "model_facts_snapshot.json"

#: Every attribute the flat schema had: the fields, then the derived properties; then
#: the flat names of facts added since on which no figure depends. A name that is no
#: longer an attribute is read in its group (``READS``), under its old key.
ATTRIBUTES = [
    "name",
    "checkpoint",
    "year",
    "source",
    "config_class",
    "layers",
    "hidden_size",
    "num_heads",
    "num_kv_heads",
    "max_position_embeddings",
    "trained_context",
    "context_source",
    "positions",
    "head_dim",
    "rope_theta",
    "rope_scaling",
    "local_rope_theta",
    "sliding_window",
    "global_every",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "query_pre_attn_scalar",
    "qk_norm",
    "attn_logit_softcapping",
    "final_logit_softcapping",
    "sinks",
    "output_gate",
    "value_norm",
    "attention_k_eq_v",
    "scale",
    "global_head_dim",
    "num_global_kv_heads",
    "num_kv_shared_layers",
    "partial_rotary_factor",
    "attention_chunk_size",
    "nope_every",
    "attn_temperature_tuning",
    "floor_scale",
    "attn_scale",
    "linear_attention",
    "full_attention_layers",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "index_n_heads",
    "index_head_dim",
    "index_topk",
    "parameters",
    "parameters_source",
    "class_defaults",
    "attention",
    "group_size",
    "layer_types",
    "uses_rope",
    "kv_shared",
    "layer_kv_shapes",
    "receptive_field",
    "bidirectional",
    "cross_attention_layers",
    "max_source_positions",
    "cross_qk_norm",
    "compress_rope_theta",  # DeepSeek-V4's RoPE base for its compressed entries
    "attention_bias",  # the projections' bias and the norms' epsilon, read by the recipes
    "rms_norm_eps",
    "quantized_dtype",  # the weights a release stores in fewer than 16 bits
    "quantized_parameters",
    "sliding_sinks",  # MiMo-V2-Flash's sinks in its sliding layers alone, and its value scale
    "value_scale",
    "compress_rope_scaling",  # DeepSeek-V4's compressed layers: their YaRN, latent, groups
    "compress_q_lora_rank",
    "o_groups",
    "o_lora_rank",
]
#: The flat names ModelFacts no longer has: (group, field, value without the group).
READS = {
    "global_every": ("local", "global_every", None),
    "full_attention_layers": ("local", "full_attention_layers", None),
    "linear_attention": ("local", "mixer", None),
    "nope_every": ("rope", "nope_every", None),
    "qk_norm": ("parts", "qk_norm", None),
    "value_norm": ("parts", "value_norm", False),
    "output_gate": ("parts", "output_gate", False),
    "sinks": ("scores", "sinks", False),
    "scale": ("scores", "scale", None),
    "num_global_kv_heads": ("global_layers", "num_kv_heads", None),
    "parameters": ("weights", "parameters", None),
    "parameters_source": ("weights", "source", ""),
    "cross_qk_norm": ("cross", "qk_norm", None),
    "quantized_dtype": ("quantization", "dtype", None),
    "quantized_parameters": ("quantization", "parameters", None),
    "sliding_sinks": ("local", "sinks", False),
    "value_scale": ("parts", "value_scale", None),
    "compress_rope_scaling": ("compressed", "rope_scaling", None),
    "compress_q_lora_rank": ("compressed", "q_lora_rank", None),
    "o_groups": ("compressed", "o_groups", None),
    "o_lora_rank": ("compressed", "o_lora_rank", None),
}
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "f8": torch.float8_e4m3fn}
TOKENS = (0, 1, 100, 1000, 4096, 8192, 100_000, 128 * 1024, 10**6)


def _plain(value):
    """Tuples as lists, as JSON keeps them."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _read(facts, name: str):
    """The attribute ``name``, or the group field ``READS`` gives for it."""
    if name not in READS:
        return getattr(facts, name)
    group, field, absent = READS[name]
    return getattr(getattr(facts, group), field, absent)


def snapshot(facts) -> dict:
    """One model's attributes and the results of every cost function, under the names
    the record was first written with (``kv_bytes_per_token`` for
    ``kv_cache_bytes_per_token``)."""
    from attention.models import (
        cache_bytes,
        cross_cache_bytes,
        indexer_cache_bytes_per_token,
        kv_cache_bytes,
        kv_cache_bytes_per_token,
        layer_kv_cache_bytes_per_token,
        layer_state_bytes,
        state_bytes,
    )

    record = {name: _plain(_read(facts, name)) for name in ATTRIBUTES}
    limit = facts.max_position_embeddings  # None where the config sets none (ALiBi)
    lengths = sorted({*TOKENS, facts.trained_context, *([limit] if limit else [])})
    for label, dtype in DTYPES.items():
        per_layer = layer_kv_cache_bytes_per_token(facts, dtype)
        record[f"layer_kv_bytes_per_token[{label}]"] = list(per_layer)
        record[f"kv_bytes_per_token[{label}]"] = kv_cache_bytes_per_token(facts, dtype)
        record[f"indexer_bytes_per_token[{label}]"] = indexer_cache_bytes_per_token(facts, dtype)
        record[f"cross_cache_bytes[{label}]"] = cross_cache_bytes(facts, dtype)
        for state_label, state_dtype in DTYPES.items():
            pair = f"{label},{state_label}"
            per_layer_state = layer_state_bytes(facts, dtype, state_dtype)
            record[f"layer_state_bytes[{pair}]"] = list(per_layer_state)
            record[f"state_bytes[{pair}]"] = state_bytes(facts, dtype, state_dtype)
        for tokens in lengths:
            record[f"kv_cache_bytes[{tokens},{label}]"] = kv_cache_bytes(facts, tokens, dtype)
            record[f"cache_bytes[{tokens},{label}]"] = cache_bytes(facts, tokens, dtype)
    return record


def dumps(records: dict[str, dict]) -> str:
    """JSON with one line per figure, so that a change shows as a line in a diff."""
    models = []
    for name, record in records.items():
        lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in record.items())
        models.append(f" {json.dumps(name)}: {{\n{lines}\n }}")
    return "{\n" + ",\n".join(models) + "\n}\n"


def snapshots() -> dict[str, dict]:
    from attention import MODELS

    return {name: snapshot(facts) for name, facts in MODELS.items()}


if __name__ == "__main__":
    PATH.parent.mkdir(exist_ok=True)
    PATH.write_text(dumps(snapshots()), encoding="utf-8")
    print(f"wrote {PATH}")
