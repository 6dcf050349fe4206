"""The site's trained toy (attention.toy): its task, its model and its training."""

from __future__ import annotations

import pytest
import torch

from attention import KVCache, RecallModel, recall_batch, train_recall_model
from attention.toy import RECALL_FILLERS, RECALL_KEYS, RECALL_LENGTH, RECALL_VALUES


@pytest.fixture(scope="module")
def trained() -> RecallModel:
    return train_recall_model()


def draws(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_each_question_names_the_first_facts_key_and_the_answer_is_its_value():
    tokens, answers = recall_batch(200, facts=3, generator=draws(0))
    keys, values, fillers, questions = tokens.unbind(-1)
    is_fact = keys < RECALL_KEYS
    assert (is_fact[:, :-1].sum(-1) == 3).all()  # three facts before the question
    assert not is_fact[:, -1].any()  # the question is no fact
    assert (questions[:, :-1] == RECALL_KEYS).all()  # and the only question
    asked = keys == questions[:, -1:]  # (n, T): the fact the question names
    assert (asked.sum(-1) == 1).all()  # distinct keys: exactly one fact matches
    assert torch.equal(values[asked], answers)
    # a fact or the question carries no filler; every other token one filler
    assert (fillers[is_fact] == RECALL_FILLERS).all()
    assert (fillers[:, -1] == RECALL_FILLERS).all()
    is_filler = ~is_fact
    is_filler[:, -1] = False
    assert (fillers[is_filler] < RECALL_FILLERS).all()
    assert (values[is_filler] == RECALL_VALUES).all()  # a filler holds no value


def test_fact_at_puts_one_fact_where_asked():
    tokens, answers = recall_batch(50, length=9, fact_at=4, generator=draws(1))
    keys = tokens[..., 0]
    assert ((keys < RECALL_KEYS).sum(-1) == 1).all()
    assert (keys[:, 4] == tokens[:, -1, 3]).all()
    assert torch.equal(tokens[:, 4, 1], answers)
    assert tokens.shape == (50, 9, 4)


def test_the_same_generator_gives_the_same_batch():
    first, first_answers = recall_batch(8, generator=draws(3))
    again, again_answers = recall_batch(8, generator=draws(3))
    other, _ = recall_batch(8, generator=draws(4))
    assert torch.equal(first, again) and torch.equal(first_answers, again_answers)
    assert not torch.equal(first, other)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"n": 2.5}, TypeError, "n must be a positive integer"),
        ({"n": 0}, ValueError, "n must be at least 1"),
        ({"n": 2, "length": 1}, ValueError, "length must be at least 2"),
        ({"n": 2, "facts": RECALL_KEYS + 1}, ValueError, "facts must be at most 8"),
        ({"n": 2, "length": 3, "facts": 3}, ValueError, "facts must be at most 2"),
        ({"n": 2, "length": 5, "fact_at": 4}, ValueError, "fact_at must be a position"),
        ({"n": 2, "fact_at": "1"}, TypeError, "fact_at must be an integer"),
    ],
)
def test_recall_batch_refuses_bad_arguments(arguments, error, message):
    with pytest.raises(error, match=message):
        recall_batch(**arguments)


def test_the_model_refuses_an_odd_width_and_tokens_without_four_parts():
    with pytest.raises(ValueError, match="d must be even"):
        RecallModel(d=7)
    with pytest.raises(TypeError, match="d must be a positive integer"):
        RecallModel(d="32")
    with pytest.raises(ValueError, match=r"shape \(n, T, 4\)"):
        RecallModel().embed(torch.zeros(2, 5, dtype=torch.long))


def test_decoding_with_a_cache_gives_the_full_pass():
    torch.manual_seed(0)
    model = RecallModel().eval()
    tokens, _ = recall_batch(3, generator=draws(5))
    with torch.no_grad():
        full = model(tokens)
        cache = KVCache()
        steps = [model(tokens[:, t : t + 1], cache=cache) for t in range(RECALL_LENGTH)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert full.shape == (3, RECALL_LENGTH, RECALL_VALUES)


def test_the_trained_model_answers_and_looks_at_the_fact(trained):
    tokens, answers = recall_batch(500, generator=draws(6))
    with torch.no_grad():
        right = (trained(tokens)[:, -1].argmax(-1) == answers).float().mean()
        weights = trained.attn.attention_weights(trained.embed(tokens))[:, :, -1]
    assert right > 0.95  # a guess is right one time in 8
    asked = tokens[..., 0] == tokens[:, -1:, 3]  # (n, T): the fact it asks for
    on_fact = (weights * asked[:, None]).sum(-1).mean()  # over both heads
    assert on_fact > 0.8
    assert trained.out.weight.dtype == torch.float32 and not trained.training


def test_an_untrained_model_answers_about_as_well_as_a_guess():
    torch.manual_seed(0)
    tokens, answers = recall_batch(2000, generator=draws(7))
    with torch.no_grad():
        right = (RecallModel()(tokens)[:, -1].argmax(-1) == answers).float().mean()
    assert right < 0.3


def test_training_is_seeded_and_leaves_the_random_state_and_threads_alone(trained):
    torch.manual_seed(42)
    state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    again = train_recall_model()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.get_num_threads() == threads
    for ours, theirs in zip(trained.parameters(), again.parameters(), strict=True):
        assert torch.equal(ours, theirs)
    other = train_recall_model(steps=3, seed=1)
    assert not torch.equal(other.out.weight, trained.out.weight)


def test_train_recall_model_refuses_bad_arguments():
    with pytest.raises(ValueError, match="steps must be at least 1"):
        train_recall_model(steps=0)
    with pytest.raises(TypeError, match="seed must be an integer"):
        train_recall_model(seed=0.5)
