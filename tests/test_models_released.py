"""The released config.json files the package stores (``attention.models.released``).

Each stored file is cited: the address of the released file of its entry's checkpoint
and the public copy it was read from. Its parameter count, on the meta device, is the
released model's (the class its ``architectures`` names: an encoder's, an
encoder-decoder's, a multimodal release's whole) and agrees with every count the table
cites, to the cited figure's last digit; that each file reads back as its entry is
``test_models_readers.py``'s check.
"""

from __future__ import annotations

import pytest

# transformers: the import marks this file for `nox -s tests-latest` (noxfile.py).
import transformers

from attention import MODELS
from attention.models import (
    parameter_count,
    released_config,
    released_config_source,
    released_counted_class,
    released_names,
    released_parameters,
)
from attention.models.released import _stored

pytestmark = pytest.mark.usefixtures("single_thread")

WHOLE = [name for name in released_names() if "partial" not in _stored()[name]]
PARTIAL = [name for name in released_names() if "partial" in _stored()[name]]
CITED = [name for name in WHOLE if MODELS[name].weights is not None]


@pytest.mark.parametrize("name", released_names())
def test_each_file_cites_the_released_file_of_its_entrys_checkpoint(name) -> None:
    record = _stored()[name]
    checkpoint = MODELS[name].checkpoint
    assert record["checkpoint"] == checkpoint
    assert record["source"].startswith(f"https://huggingface.co/{checkpoint}/blob/")
    assert record["source"].endswith("/config.json")
    assert released_config_source(name) == f"{record['source']} (read from {record['read_from']})"
    assert record["read_from"]  # where the values were read: no file is downloaded


def _unit(cited: int) -> int:
    """The place of a cited figure's last significant digit: 10**8 for 116.8B."""
    return 10 ** (len(str(cited)) - len(str(cited).rstrip("0")))


@pytest.mark.parametrize("name", CITED)
def test_the_count_agrees_with_the_cited_one_to_its_last_digit(name) -> None:
    """A model card's "116.8B" is the count to its last digit (rounded or cut: Phi-4's
    "14B" is 14.7 billion); an exact count is met exactly (Llama 2 7B)."""
    cited = MODELS[name].weights.parameters
    assert abs(released_parameters(name) - cited) < _unit(cited)


def test_the_unit_of_a_cited_figure_is_its_last_digits() -> None:
    assert (_unit(116_800_000_000), _unit(1_000_000_000_000), _unit(6_738_415_616)) == (
        10**8,
        10**12,
        1,
    )


def test_the_count_meets_the_check_only_near_the_cited_figure() -> None:
    """The check can fail: a count off by one unit of the cited figure is refused."""
    cited = MODELS["gpt-oss-120b"].weights.parameters
    assert abs(released_parameters("gpt-oss-120b") + _unit(cited) - cited) >= _unit(cited)


def test_mixtral_counts_the_47b_of_its_paper() -> None:
    """Jiang et al. 2024 (arXiv 2401.04088) give "47B parameters": the file counts
    46.70 billion, which rounds to it."""
    assert MODELS["Mixtral 8x7B"].weights.parameters == 47_000_000_000
    assert round(released_parameters("Mixtral 8x7B"), -9) == 47_000_000_000


def _is_a_text_model(class_name: str) -> bool:
    return class_name.endswith(("ForCausalLM", "LMHeadModel"))


@pytest.mark.parametrize("name", WHOLE)
def test_the_counted_class_is_the_one_the_file_names(name) -> None:
    """Where this transformers has it; else the text model with its output layer."""
    architectures = released_config(name).get("architectures")
    if architectures and hasattr(transformers, architectures[0]):
        assert released_counted_class(name) == architectures[0]
    else:
        assert released_counted_class(name) == "AutoModelForCausalLM"


@pytest.mark.parametrize(
    "name", [name for name in WHOLE if _is_a_text_model(released_counted_class(name))]
)
def test_a_text_only_release_counts_as_its_causal_lm(name) -> None:
    count = released_parameters(name)
    assert count == parameter_count(released_config(name)) > 0


def _is_a_masked_lm(class_name: str) -> bool:
    return class_name.endswith("ForMaskedLM")


@pytest.mark.parametrize(
    "name", [name for name in WHOLE if _is_a_masked_lm(released_counted_class(name))]
)
def test_an_encoders_masked_lm_counts_as_its_causal_lm(name) -> None:
    """BERT's masked-LM class and the causal LM ``parameter_count`` builds hold the same
    encoder and the same prediction head: one count."""
    assert released_parameters(name) == parameter_count(released_config(name)) > 0


@pytest.mark.parametrize(
    "name",
    [
        name
        for name in WHOLE
        if not _is_a_text_model(released_counted_class(name))
        and not _is_a_masked_lm(released_counted_class(name))
    ],
)
def test_a_release_with_more_than_a_decoder_counts_more_than_its_text_model(name) -> None:
    """A multimodal release counts its vision or audio encoder too: the causal LM that
    ``parameter_count`` builds from its text config is only a part of it."""
    assert released_parameters(name) > parameter_count(released_config(name))


@pytest.mark.parametrize("name", PARTIAL)
def test_a_partial_copy_counts_nothing(name) -> None:
    """A copy that kept the attention fields only cannot say the vocabulary or the MLP:
    no count rather than a count of the class's defaults."""
    assert released_parameters(name) is None
    assert "vocab_size" not in released_config(name)


def test_a_copy_is_fresh_each_call() -> None:
    config = released_config("Mixtral 8x7B")
    config["num_local_experts"] = 1
    assert released_config("Mixtral 8x7B")["num_local_experts"] == 8


def test_a_model_without_a_file_has_no_count() -> None:
    """Gemma 3 27B's page cites its count from the model card: no file is stored."""
    assert "Gemma 3 27B" not in released_names()
    assert released_parameters("Gemma 3 27B") is None


@pytest.mark.parametrize("function", [released_config, released_config_source, released_parameters])
def test_a_name_must_be_a_str(function) -> None:
    with pytest.raises(TypeError, match=r"expected a model's name as a str, got int"):
        function(7)


@pytest.mark.parametrize("function", [released_config, released_config_source])
def test_an_unknown_name_is_refused_with_the_known_ones(function) -> None:
    with pytest.raises(ValueError, match=r"stored \(one of .*Mixtral 8x7B.*\), got 'Mixtral'"):
        function("Mixtral")


def test_mimo_v2_flash_file_agrees_with_the_defaults_its_config_class_reads_instead() -> None:
    """MiMoV2FlashConfig reads neither the file's hybrid_layer_pattern nor its RoPE fields,
    its layernorm_epsilon or its swa_* sizes: its own defaults and MiMoV2FlashAttention
    supply them. The entry, read through the class, is the file's model only where those
    agree with what the file says."""
    released = released_config("MiMo-V2-Flash")
    fields = {key: value for key, value in released.items() if key != "model_type"}
    config = transformers.AutoConfig.for_model(released["model_type"], **fields)
    facts = MODELS["MiMo-V2-Flash"]
    kinds = [
        "full_attention" if sliding == 0 else "sliding_attention"
        for sliding in released["hybrid_layer_pattern"]
    ]
    assert list(config.layer_types) == kinds == list(facts.layer_types)
    rope = config.rope_parameters
    assert rope["full_attention"]["rope_theta"] == released["rope_theta"] == facts.rope.theta
    assert rope["sliding_attention"]["rope_theta"] == released["swa_rope_theta"]
    assert released["swa_rope_theta"] == facts.rope.local_theta
    shares = {each["partial_rotary_factor"] for each in rope.values()}
    assert shares == {released["partial_rotary_factor"], facts.rope.partial_rotary_factor}
    assert config.rms_norm_eps == released["layernorm_epsilon"] == facts.rms_norm_eps
    # sliding_window_size tokens before the query, and the query: transformers' window
    assert config.sliding_window == released["sliding_window_size"] + 1 == facts.local.window
    assert released["swa_num_key_value_heads"] == 2 * released["num_key_value_heads"]
    assert released["swa_num_key_value_heads"] == facts.local.num_kv_heads
    assert released["swa_num_attention_heads"] == released["num_attention_heads"]
    assert (released["swa_head_dim"], released["swa_v_head_dim"]) == (
        facts.head_dim,
        facts.value_head_dim,
    )
    assert released["add_swa_attention_sink_bias"] is facts.local.sinks is True
    assert released["add_full_attention_sink_bias"] is False
    assert facts.scores is None  # the full layers hold no sinks


def test_glm_5_1_file_is_glm_5s_but_for_its_transformers_version() -> None:
    """GLM-5.1's entry says its file holds GLM-5's every field; so it counts as many
    parameters (its cited 754B, left out, would not)."""
    glm_5, glm_5_1 = released_config("GLM-5"), released_config("GLM-5.1")
    differing = {key for key in glm_5.keys() | glm_5_1.keys() if glm_5.get(key) != glm_5_1.get(key)}
    assert differing == {"transformers_version"}
    assert released_parameters("GLM-5.1") == released_parameters("GLM-5")
