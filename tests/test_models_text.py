"""A model's attention in words (``attention.models.text``) and the command
``python -m attention.models`` (``attention.models.__main__``).

The recipe names each mechanism a model has, and only those, and the cache per token
that grows; the strip has a letter per layer and a legend; the command prints the
recipe, the strip and the bill for a name or a ``config.json``, and names what it
cannot read.
"""

from __future__ import annotations

import json
import math

import pytest

# tiny_config builds a transformers config, whose weights the command counts with
# transformers: the import marks this file for `nox -s tests-latest` (noxfile.py).
import transformers  # noqa: F401
from tiny_configs import tiny_config

from attention import MODELS
from attention.models import (
    BITS,
    INDEXED,
    SLIDING,
    STRIP_LETTERS,
    Chunked,
    LinearAttention,
    Sliding,
    bill,
    facts_from_config,
    format_bytes,
    layer_kv_cache_bytes_per_token,
    layer_strip,
    parameter_count,
    recipe,
    state_bytes,
)
from attention.models.__main__ import main

pytestmark = pytest.mark.usefixtures("single_thread")


# -- the recipe and the strip ------------------------------------------------------------


@pytest.mark.parametrize("facts", MODELS.values(), ids=list(MODELS))
def test_the_recipe_names_each_mechanism_the_model_has(facts) -> None:
    text = recipe(facts)
    assert text == recipe(facts) and text.startswith(f"{facts.name}: {facts.layers} layers")
    rope, local, scores, parts = facts.rope, facts.local, facts.scores, facts.parts
    sliding = isinstance(local, Sliding)
    present = {
        "sliding (window": sliding and not facts.bidirectional and SLIDING in facts.layer_types,
        # DeepSeek-V4's compressed layers each keep a window too (V4-Pro has no other)
        "tokens, window": sliding and facts.compressed,
        "positions each side": sliding and facts.bidirectional,
        "chunked (chunk": isinstance(local, Chunked),
        "MLA": facts.latent,
        "DeepSeek Sparse Attention": INDEXED in facts.layer_types,  # not V4's CSA layers
        "sinks": (scores and scores.sinks) or (sliding and local.sinks),
        "output gate": parts and parts.output_gate,
        "QK-norm": (parts and parts.qk_norm) or (facts.cross and facts.cross.qk_norm),
        "NoPE": (rope and rope.nope_every) or facts.positions == "none",
        "YaRN": ((rope and rope.scaling) or {}).get("rope_type") == "yarn"
        # DeepSeek-V4: YaRN in its compressed layers only
        or ((facts.compressed and facts.compressed.rope_scaling) or {}).get("rope_type") == "yarn",
        "learned positions": facts.learned_positions,
        "ALiBi": facts.alibi,
        "of fixed state": state_bytes(facts),
        "capped": local and local.tokens_kept and not facts.bidirectional,
        "an encoder: attends both ways, no cache": facts.bidirectional,
        "cross-attention in": facts.cross,
        "reuse earlier layers' keys": facts.num_kv_shared_layers,
    }
    for words, has in present.items():
        assert (words in text) == bool(has), words
    if isinstance(local, LinearAttention):
        assert local.mixer in text


@pytest.mark.parametrize(
    "config, words",
    [
        ({"model_type": "olmo", "clip_qkv": 8.0}, "queries, keys and values clamped to ±8"),
        ({"model_type": "persimmon"}, "QK-norm, a LayerNorm per head"),
        ({"model_type": "hunyuan_v1_dense"}, "QK-norm per head, after RoPE"),
        ({"model_type": "nanochat"}, "QK-norm without scale, after RoPE"),
    ],
)
def test_the_recipe_names_the_parts_a_config_gives(config, words) -> None:
    """The QK-norm and the clamp that only configs give (no table model has them)."""
    assert words in recipe(facts_from_config(config))
    off = {"olmo": {}, "persimmon": {"qk_layernorm": False}}.get(config["model_type"])
    if off is not None:  # the same type without the part: no clause for it
        assert words not in recipe(facts_from_config({"model_type": config["model_type"], **off}))


def test_the_recipe_gives_the_cache_per_token_that_grows() -> None:
    gemma = MODELS["Gemma 2 9B"]  # 21 full layers grow, 21 sliding are capped
    full_layers = gemma.layer_types.count("full_attention")
    per_token = full_layers * layer_kv_cache_bytes_per_token(gemma)[1]
    assert f"cache per token: {format_bytes(per_token)} growing" in recipe(gemma)


def test_the_strip_has_a_letter_per_layer_and_a_legend() -> None:
    gemma = MODELS["Gemma 4 E2B"]
    letters, legend = layer_strip(gemma).split("\n")
    assert len(letters) == gemma.layers
    expected = [
        STRIP_LETTERS[k].lower() if shared else STRIP_LETTERS[k]
        for k, shared in zip(gemma.layer_types, gemma.kv_shared, strict=True)
    ]
    assert list(letters) == expected
    assert "lower case" in legend and f"window {gemma.local.window}" in legend
    assert len(layer_strip(MODELS["DeepSeek-V3"], width=10).split("\n")) == 8  # 61 layers


# -- the command -------------------------------------------------------------------------


def test_the_command_prints_recipe_strip_and_bill_for_a_name(capsys) -> None:
    facts = MODELS["gpt-oss-20b"]
    assert main(["gpt-oss-20b", "--tokens", "1000", "--batch", "2", "--cache-dtype", "fp8"]) == 0
    out = capsys.readouterr().out
    expected = bill(facts, 1000, batch=2, cache_dtype="fp8")
    assert out.startswith(recipe(facts) + "\n\n" + layer_strip(facts) + "\n")
    assert f"cache (fp8, states fp32): {format_bytes(expected.cache)}" in out
    assert f"total: {format_bytes(expected.total)}" in out


def test_the_command_reads_a_config_file_and_counts_its_weights(tmp_path, capsys) -> None:
    config = tiny_config("llama")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict()), encoding="utf-8")
    assert main([str(path), "--tokens", "64", "--dtype", "int4"]) == 0
    out = capsys.readouterr().out
    parameters = parameter_count(config)
    assert f"({parameters:,} parameters)" in out
    assert f"weights (int4): {format_bytes(math.ceil(parameters * BITS['int4'] / 8))}" in out


def test_the_command_names_what_it_cannot_read(capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["no such model"])
    assert caught.value.code == 2
    assert "expected a config.json path or a name from MODELS" in capsys.readouterr().err
