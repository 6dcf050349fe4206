"""The model runner: one packed batch over the paged cache computes what the model computes.

A step packs prefill chunks and decode tokens of several sequences; each sequence's
scores must equal the ``transformers`` model's own forward pass over that sequence
alone (float64, ``EXACT``: 1e-10), whatever the chunking, for Llama and for Qwen3 (its
QK-norms). Chunked prefill must equal a one-shot prefill: the same scores and the
same keys and values in the cache.
"""

from __future__ import annotations

import pytest
import torch
from hf_models import EXACT
from serving_models import VOCAB, shared_model
from transformers import MistralConfig, MistralForCausalLM

from attention.serving import ModelRunner, cu_seqlens_of


def prompts(seed: int, lengths: list[int]) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (n,), generator=generator).tolist() for n in lengths]


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_a_packed_step_of_chunks_and_decode_tokens_equals_the_models_forward(model_type):
    model = shared_model(0, model_type)
    runner = ModelRunner(model, num_blocks=32, block_size=4)
    texts = prompts(1, [11, 6, 9])
    for seq_id in range(3):
        runner.cache.add(seq_id)
    # Step 1: sequence 0 reads 7 tokens, sequence 1 all 6. Step 2: sequence 0 its
    # last 4, sequence 1 one more token (a decode), sequence 2 a first chunk of 5.
    runner.step([0, 1], [texts[0][:7], texts[1]])
    texts[1].append(3)
    logits = runner.step([0, 1, 2], [texts[0][7:], texts[1][6:], texts[2][:5]])
    for row, (text, end) in enumerate(((texts[0], 11), (texts[1], 7), (texts[2], 5))):
        full = model(torch.tensor([text[:end]])).logits[0, -1]
        torch.testing.assert_close(logits[row], full.detach(), **EXACT)
    assert [runner.cache.num_tokens(s) for s in range(3)] == [11, 7, 5]


@pytest.mark.parametrize("chunk", [1, 3, 4, 7])
def test_chunked_prefill_equals_a_one_shot_prefill(chunk):
    model = shared_model(0)
    (text,) = prompts(2, [17])
    one_shot = ModelRunner(model, num_blocks=16, block_size=4)
    one_shot.cache.add(0)
    expected = one_shot.step([0], [text])
    chunked = ModelRunner(model, num_blocks=16, block_size=4)
    chunked.cache.add(0)
    for start in range(0, len(text), chunk):
        last = chunked.step([0], [text[start : start + chunk]])
    torch.testing.assert_close(last, expected, **EXACT)
    for theirs, ours in zip(one_shot.cache.gather(0), chunked.cache.gather(0), strict=True):
        torch.testing.assert_close(ours, theirs, **EXACT)


def test_the_cache_holds_every_layers_keys_in_one_block_table():
    runner = ModelRunner(shared_model(0), num_blocks=8, block_size=4)
    assert runner.cache.num_kv_heads == 2 * 2  # 2 layers of 2 key/value heads
    assert runner.cache_bytes_per_block == 2 * 4 * 4 * 8 * 8  # k and v, f64
    assert cu_seqlens_of([3, 1, 1]) == [0, 3, 4, 5]


def test_bad_models_and_steps_are_refused():
    with pytest.raises(TypeError, match="must be a transformers causal language model"):
        ModelRunner(torch.nn.Linear(2, 2), num_blocks=4, block_size=2)
    config = MistralConfig(
        vocab_size=16, hidden_size=8, intermediate_size=8, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"model_type must be one of \('llama', 'qwen3'\)"):
        ModelRunner(MistralForCausalLM(config), num_blocks=4, block_size=2)
    runner = ModelRunner(shared_model(0), num_blocks=4, block_size=2)
    runner.cache.add(0)
    with pytest.raises(ValueError, match="must be a non-empty list of token ids, got"):
        runner.step([0], [[]])
    with pytest.raises(ValueError, match=f"token {VOCAB} of sequence 0 is not in the vocab"):
        runner.step([0], [[1, VOCAB]])
    with pytest.raises(ValueError, match="seq_ids must be distinct"):
        runner.step([0, 0], [[1], [2]])
    with pytest.raises(ValueError, match="at least one sequence"):
        runner.step([], [])
    assert runner.cache.num_tokens(0) == 0  # nothing was written
