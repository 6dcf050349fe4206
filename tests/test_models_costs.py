"""What a model costs to serve (``attention.models.costs``): ``parameter_count`` and
``bill``.

``parameter_count`` of a tiny config is the number of weights transformers builds for
it (and GPT-2's released count); the bill is the weights plus a batch of caches, in
the number types it is given, and refuses what it cannot mean. That each cache's bytes
are those transformers keeps is ``tests/test_models_readers.py``'s check.
"""

from __future__ import annotations

import pytest
import torch
import transformers
from tiny_configs import tiny_config

from attention import MODELS
from attention.models import (
    bill,
    cache_bytes,
    facts_from_config,
    layer_cache_numbers,
    parameter_count,
    selection_cost,
)

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.parametrize("model_type", ["llama", "qwen3_next", "deepseek_v4"])
def test_the_parameter_count_is_that_of_the_built_model(model_type) -> None:
    config = tiny_config(model_type)
    model = transformers.AutoModelForCausalLM.from_config(config)
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())


def test_a_flat_encoder_decoder_counts_its_own_decoder() -> None:
    """Whisper keeps its decoder's sizes under ``decoder_*`` names, which its causal LM
    reads: counted from them, not from the class defaults its text config leaves there."""
    fields = {
        "d_model": 64,
        "decoder_layers": 3,
        "decoder_attention_heads": 4,
        "decoder_ffn_dim": 96,
        "encoder_layers": 1,
        "encoder_attention_heads": 2,
        "encoder_ffn_dim": 32,
        "vocab_size": 100,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 1,
        "decoder_start_token_id": 2,
        "max_target_positions": 32,
        "max_source_positions": 16,
    }
    model = transformers.WhisperForCausalLM(transformers.WhisperConfig(**fields))
    built = sum(p.numel() for p in model.parameters())
    assert parameter_count({"model_type": "whisper", **fields}) == built


def test_the_released_gpt2_counts_as_the_table_says() -> None:
    assert parameter_count({"model_type": "gpt2"}) == MODELS["GPT-2"].weights.parameters


def test_the_bill_is_weights_plus_a_batch_of_caches() -> None:
    qwen = MODELS["Qwen3.5 397B-A17B"]
    b = bill(qwen, 32768, batch=4, dtype="fp8", cache_dtype="bf16")
    parameters = qwen.weights.parameters
    assert b.weights == parameters  # one byte a parameter
    assert b.cache == 4 * cache_bytes(qwen, 32768) == sum(b.per_kind.values())
    assert b.total == b.weights + b.cache
    int4 = bill(qwen, 32768, batch=4, dtype="int4", cache_dtype="int4", state_dtype="int4")
    numbers = sum(a + s for a, s in layer_cache_numbers(qwen, 32768))
    assert (int4.weights, int4.cache) == (parameters // 2, 4 * numbers // 2)
    assert bill(MODELS["Llama 3 8B"], 10).weights is None  # no count in the table


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"dtype": "bf8"}, ValueError),
        ({"cache_dtype": torch.bfloat16}, TypeError),
        ({"batch": 0}, ValueError),
        ({"batch": 1.5}, TypeError),
    ],
)
def test_the_bill_refuses_what_it_cannot_mean(kwargs, error) -> None:
    with pytest.raises(error, match=r"^bill: expected"):
        bill(MODELS["GPT-2"], 10, **kwargs)


def test_only_counts_the_parameters_whose_names_match() -> None:
    config = tiny_config("gpt_oss")
    model = transformers.AutoModelForCausalLM.from_config(config)
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    expert_weights = experts - sum(
        p.numel() for n, p in model.named_parameters() if n.endswith("_proj_bias")
    )
    assert parameter_count(config, only=["*.experts.*"]) == experts
    assert parameter_count(config, only=["*.experts.gate_up_proj", "*.experts.down_proj"]) == (
        expert_weights
    )
    assert parameter_count(config, only=[]) == 0


@pytest.mark.parametrize("only", ["*.experts.*", [1], ("*", None)])
def test_only_must_be_a_sequence_of_patterns(only) -> None:
    with pytest.raises(TypeError, match="expected only to be a sequence of str patterns"):
        parameter_count({"model_type": "gpt2"}, only=only)


def test_mxfp4_weights_count_their_shared_scale() -> None:
    """4-bit numbers and one 8-bit scale per 32: 17 bytes per 32 numbers."""
    gpt_oss = MODELS["gpt-oss-20b"]
    assert bill(gpt_oss, 0, dtype="mxfp4", parameters=32).weights == 17
    assert bill(gpt_oss, 0, dtype="mxfp4", parameters=64 * 1024).weights == 34 * 1024


# -- selection_cost ------------------------------------------------------------------------


def _selection_facts(model_type: str, **fields):
    return facts_from_config(transformers.CONFIG_MAPPING[model_type](**fields))


def test_token_top_k_scores_every_key_and_reads_its_top_k():
    v32 = MODELS["DeepSeek-V3.2"]
    cost = selection_cost(v32, 100_000)
    per_key = (v32.latent.kv_lora_rank + v32.latent.qk_rope_head_dim) * 2
    assert (cost.selects, cost.scored, cost.kept) == ("tokens", 100_000, v32.indexer.top_k)
    assert cost.bytes_read == 100_000 * v32.indexer.head_dim * 2 + v32.indexer.top_k * per_key
    assert cost.index_multiply_adds == 100_000 * v32.indexer.num_heads * v32.indexer.head_dim
    assert selection_cost(v32, 1000).kept == 1000  # fewer keys than top_k: all of them


def test_block_top_k_reads_its_blocks_whole():
    facts = _selection_facts(
        "minimax_m3_vl_text", layer_types=["minimax_m3_sparse"] * 2, num_hidden_layers=2
    )
    indexer = facts.indexer
    cost = selection_cost(facts, 50_000, dtype=1)
    assert cost.selects == "blocks" and cost.scored == 50_000
    assert cost.kept == indexer.top_k * indexer.block_size
    assert cost.bytes_read == 50_000 * indexer.head_dim + cost.kept * 2 * 4 * 128


def test_qsa_scores_one_key_per_complete_block_and_reads_budget_and_tail():
    facts = _selection_facts(
        "qwen4_exp_text",
        head_dim=8,  # RoPE's dimensions fit the indexer's head
        indexer_n_heads=2,
        indexer_kv_heads=1,
        indexer_head_dim=8,
        indexer_budget=4,
        indexer_compress_ratio=2,
    )
    cost = selection_cost(facts, 7)  # blocks 0-1, 2-3, 4-5 and the tail, token 6
    assert (cost.selects, cost.scored, cost.kept) == ("compressed blocks", 3, 4 + 1)
    assert selection_cost(facts, 3).kept == 3  # one block and its tail: all 3 tokens


def test_compressed_sparse_attention_reads_its_top_k_entries_and_its_window():
    v4 = MODELS["DeepSeek-V4-Flash"]
    cost = selection_cost(v4, 1_000_000)
    assert cost.selects == "compressed entries"
    assert cost.scored == 1_000_000 // v4.compressed.csa_rate
    assert cost.kept == v4.indexer.top_k + v4.local.tokens_kept
    assert cost.bytes_read == cost.scored * v4.indexer.head_dim * 2 + cost.kept * v4.head_dim * 2


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((MODELS["Llama 3 8B"], 100), ValueError, "select keys with an indexer"),
        ((MODELS["DeepSeek-V3.2"], 0), ValueError, "tokens must be at least 1"),
        (("DeepSeek-V3.2", 100), TypeError, "expected a ModelFacts"),
    ],
)
def test_selection_cost_refuses_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        selection_cost(*args)
