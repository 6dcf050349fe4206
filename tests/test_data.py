"""The running examples: the book's sentence and the switch sentence, one 3-D embedding a word."""

from __future__ import annotations

import torch

from attention import INPUTS, SENTENCE, SWITCH_INPUTS, SWITCH_SENTENCE, SWITCH_TOKENS, TOKENS


def test_tokens_are_the_words_of_the_sentences_and_each_has_a_3d_embedding():
    assert tuple(SENTENCE.split()) == TOKENS
    assert tuple(SWITCH_SENTENCE.split()) == SWITCH_TOKENS
    assert INPUTS.shape == SWITCH_INPUTS.shape == (6, 3)
    assert INPUTS.dtype == SWITCH_INPUTS.dtype == torch.float32
