"""The calculator's config reader (docs/_ext/config_reader.py, browser_config.py).

* The bundle the site ships is the package's source, byte for byte, and the modules
  it holds import no torch.
* browser_config.build, the browser's stand-in for ``transformers``' config classes,
  gives the facts ``facts_from_config`` gives, on every model type the readers read:
  the class's defaults alone, the tiny config (tests/tiny_configs.py), every released
  config (attention/models/configs/), and variants that make a class compute a field
  (another number of layers, the old ``rope_theta`` and ``rope_scaling``, a window
  pattern), for every type, and each class's own (``TYPE_VARIANTS``: its old names,
  its sub-configs, its pattern's inputs). The cases come from the readers' registry,
  so a type added there is tested here with no edit.
* A type the package refuses by name is refused in the page in the package's words.
* The same, run as the page runs it: Pyodide in Node on the shipped bundle
  (docs/tools/config_reader_node.mjs) gives the recipe, the strip and the bill per
  layer kind that the package gives in CPython, at several contexts, batches and
  dtypes; and a malformed file or a refused type gives a message, not a crash.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import browser_config
import config_reader
import pytest
import transformers

from attention.models import (
    as_config,
    bill,
    facts_from_config,
    facts_from_config_object,
    layer_strip,
    read_model_types,
    recipe,
    released_config,
    released_names,
)
from attention.models.readers import REFUSED
from attention.models.text import format_bytes, kind_name

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from tiny_configs import tiny_fields  # noqa: E402

NODE_RUNNER = config_reader.ROOT / "docs" / "tools" / "config_reader_node.mjs"
#: Fields that make a config class compute another (its layers' kinds, its RoPE dicts).
VARIANTS = {
    "7 layers": {"num_hidden_layers": 7},
    "old RoPE names": {"rope_theta": 12345.0, "rope_scaling": {"type": "linear", "factor": 2.0}},
    "yarn": {
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 1024,
        }
    },
    "window pattern": {
        "use_sliding_window": True,
        "sliding_window": 16,
        "sliding_window_pattern": 3,
    },
}
#: Fields that make one class compute another its own way: each class's old names, its
#: sub-configs, its layer patterns' inputs. A variant transformers refuses is dropped,
#: and ``test_every_type_variant_is_a_case`` fails for it.
TYPE_VARIANTS = {
    "afmoe": [{"global_attn_every_n_layers": 3, "num_hidden_layers": 7}],
    "bamba": [{"attn_layer_indices": [1, 3], "num_hidden_layers": 5}],
    "bart": [{"decoder_layers": 3, "encoder_layers": 5, "decoder_attention_heads": 4}],
    "bailing_hybrid": [{"layer_group_size": 3, "num_hidden_layers": 7, "rope_theta": 5e5}],
    "cohere": [{"use_qk_norm": True}],
    "cohere2_moe": [
        {"first_k_dense_replace": 2, "prefix_dense_sliding_window_pattern": 2},
        {"first_k_dense_replace": 4, "num_hidden_layers": 8},  # dense layers that rotate
    ],
    "cwm": [{"num_hidden_layers": 4, "layer_types": ["full_attention"] * 4}],
    "dbrx": [{"attn_config": {"kv_n_heads": 4}}, {"attn_config": {"clip_qkv": 8.0}}],
    "dots1": [{"max_window_layers": 3, "num_hidden_layers": 7}],
    "exaone4": [
        {"sliding_window_pattern": 3},
        {"sliding_window": None, "num_hidden_layers": 2, "layer_types": ["full_attention"] * 2},
    ],
    "gpt_neo": [{"attention_types": [[["local"], 3], [["global"], 1]], "num_layers": 4}],
    "gpt_neox": [{"rotary_pct": 0.5, "rotary_emb_base": 777.0}],
    "gpt_neox_japanese": [{"rotary_pct": 0.5, "rotary_emb_base": 777.0}],
    "glm4_moe": [{"use_qk_norm": True}],
    "granite_swa": [
        {"rope_theta": 777.0},
        {"num_hidden_layers": 4, "layer_rope_theta": [0.0, 1e4, 1e4, 1e4]},
        {"num_hidden_layers": 4, "layer_rope_theta": [5e5, 1e4, 1e4, 1e4]},
    ],
    "granitemoehybrid": [
        {"layer_types": ["linear_attention", "full_attention"] * 2, "num_hidden_layers": 4}
    ],
    "hrm_text": [{"num_layers_per_stack": 2, "num_hidden_layers": 12}, {"H_cycles": 3}],
    "lfm2": [{"full_attn_idxs": [1, 3], "num_hidden_layers": 5}],
    "longcat_flash": [{"num_layers": 5}],
    "mimo_v2_flash": [{"sliding_window_size": 64}],
    "minicpm3": [{"v_head_dim": None}],
    "modernbert-decoder": [{"global_attn_every_n_layers": 2, "local_attention": 64}],
    "mpt": [{"attn_config": {"alibi": False}}],
    "olmo": [{"clip_qkv": 8.0}],
    "olmoe": [{"clip_qkv": 8.0}],
    "persimmon": [{"qk_layernorm": False}],
    "phi": [{"qk_layernorm": True}],
    "olmo_hybrid": [{"num_hidden_layers": 3}, {"linear_num_key_heads": 6}],
    "qwen2_moe": [{"use_sliding_window": True, "max_window_layers": 5, "num_hidden_layers": 8}],
    "stablelm": [{"qk_layernorm": True}],
    "whisper": [{"decoder_layers": 3, "encoder_layers": 5, "decoder_attention_heads": 4}],
    "zamba": [{"num_hidden_layers": 4, "layers_block_type": ["mamba", "mamba", "hybrid", "mamba"]}],
    "zamba2": [
        {"num_hidden_layers": 3, "layers_block_type": ["mamba", "hybrid", "mamba"]},
        {"use_long_context": True},
    ],
}
#: (tokens, batch, cache dtype, state dtype) the page's bills are compared at.
SETTINGS = [(4096, 1, "bf16", "fp32"), (131_072, 8, "fp8", "bf16"), (1, 3, "int4", "fp32")]


def transformers_reads(config: dict) -> bool:
    """Whether ``transformers`` builds the config at all (a variant may not fit a class)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            as_config(json.loads(json.dumps(config)))
    except Exception:  # whatever a class raises for fields it cannot take
        return False
    return True


def known_read_types() -> list[str]:
    """The read types whose config class the installed transformers has: a reader for a
    newer release's type is harmless on the pin, and its class is not exported."""
    return [t for t in read_model_types() if t in transformers.CONFIG_MAPPING]


def cases() -> dict[str, dict]:
    """Every config the browser must read as the package does, by a name for the test."""
    found = {f"{t}: the class's defaults": {"model_type": t} for t in known_read_types()}
    for model_type in known_read_types():
        fields = json.loads(json.dumps(tiny_fields(model_type), default=str))
        found[f"{model_type}: tiny"] = {"model_type": model_type, **fields}
    found |= {f"{name}: released": released_config(name) for name in released_names()}
    for model_type in known_read_types():
        for variant, fields in VARIANTS.items():
            config = {"model_type": model_type, **fields}
            if transformers_reads(config):
                found[f"{model_type}: {variant}"] = config
    for model_type, variants in TYPE_VARIANTS.items():
        for fields in variants:
            config = {"model_type": model_type, **fields}
            if transformers_reads(config):
                found[f"{model_type}: {json.dumps(fields)}"] = config
    return found


CASES = cases()


@pytest.fixture(scope="module")
def exported() -> dict:
    """The config classes as the site exports them, through JSON as the page reads them."""
    return json.loads(json.dumps(config_reader.export_config_classes()))


def test_every_type_variant_is_a_case():
    for model_type, variants in TYPE_VARIANTS.items():
        assert model_type in read_model_types()
        for fields in variants:
            assert f"{model_type}: {json.dumps(fields)}" in CASES, (model_type, fields)


def test_cases_cover_every_read_type():
    covered = {config.get("model_type") for config in CASES.values()}
    assert set(known_read_types()) <= covered
    assert len(CASES) > 3 * len(known_read_types())  # the variants were not all refused


def test_the_export_skips_read_types_this_transformers_lacks(exported):
    """Every type the installed transformers knows is exported, and only those: on the
    pin, a reader registered for a newer release's type exports nothing and the page
    names the types it can read, as the package does."""
    assert sorted(exported["types"]) == sorted(known_read_types())
    missing = sorted(set(read_model_types()) - set(known_read_types()))
    for model_type in missing:
        with pytest.raises(ValueError, match=f"got model_type={model_type!r}"):
            browser_config.build({"model_type": model_type}, exported)


def package_facts(config: dict):
    """``facts_from_config``'s facts, or the error it raises: BLOOM's defaults set no
    context, so the package asks for trained_context=; a Gemma 4 config with the old
    ``rope_scaling`` and no base is refused for its missing ``rope_theta``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return facts_from_config(json.loads(json.dumps(config)))
        except (ValueError, KeyError) as error:
            return error


def text_type(config: dict, exported: dict) -> str:
    return browser_config.text_part(config, exported)["model_type"]


def same_facts(config: dict, exported: dict) -> bool:
    """Whether the browser's config object gives the package's facts, or its error."""
    try:
        expected = package_facts(config)
    except (TypeError, AttributeError) as error:  # the package's own reader fails on it
        expected = error
    try:
        built = browser_config.build(json.loads(json.dumps(config)), exported, unfilled=True)
        got = facts_from_config_object(built)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        got = error  # AttributeError: a field the class computes, missing here
    if isinstance(expected, Exception):
        return type(got) is type(expected) and str(got) == str(expected)
    return got == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_browser_config_gives_the_facts_transformers_gives(name, exported):
    config = CASES[name]
    if text_type(config, exported) in browser_config.NOT_FILLED:
        with pytest.raises(ValueError, match=r"python -m attention\.models"):
            browser_config.build(json.loads(json.dumps(config)), exported)
    else:
        assert same_facts(config, exported)


@pytest.mark.parametrize("model_type", sorted(browser_config.NOT_FILLED))
def test_each_type_the_browser_refuses_still_differs(model_type, exported):
    """A type the browser refuses is a read type, and one of its cases still comes out
    differently: once its post-init is written, it leaves the list."""
    assert model_type in read_model_types()
    if model_type not in transformers.CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} has no {model_type!r}")
    its_cases = [c for c in CASES.values() if text_type(c, exported) == model_type]
    assert not all(same_facts(config, exported) for config in its_cases)


@pytest.mark.parametrize("model_type", sorted(REFUSED))
def test_the_browser_refuses_what_the_package_refuses_in_its_words(model_type, exported):
    with pytest.raises(ValueError) as browser:
        browser_config.build({"model_type": model_type}, exported)
    with pytest.raises(ValueError) as package:
        facts_from_config({"model_type": model_type})
    assert str(browser.value) == str(package.value)


def test_the_bundle_is_the_package_source(tmp_path):
    if not (config_reader.PYODIDE / "pyodide.mjs").is_file():
        pytest.skip("no node_modules/pyodide: run `npm ci`")
    manifest = config_reader.write_bundle(tmp_path, exported={"types": {}})
    shipped = [path for path in manifest["python"] if path.startswith("attention/")]
    modules = config_reader.bundle_modules()
    assert shipped == [
        config_reader.module_path(m).relative_to(config_reader.ROOT).as_posix() for m in modules
    ]
    for path in shipped:
        assert (tmp_path / "python" / path).read_bytes() == (config_reader.ROOT / path).read_bytes()
    # What the page calls is in it, and no __init__.py (which imports the layers, torch).
    assert {"attention.models.readers", "attention.models.costs", "attention.models.text"} <= set(
        modules
    )
    assert not any(path.endswith("__init__.py") for path in shipped)


@pytest.mark.parametrize("module", config_reader.bundle_modules())
def test_no_bundled_module_imports_torch_when_imported(module):
    tree = ast.parse(config_reader.module_path(module).read_text(encoding="utf-8"))
    for node in tree.body:  # top level only; `if TYPE_CHECKING:` blocks are ast.If
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] == "torch" for a in node.names), module
        if isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] != "torch", module


def expected_page(config: dict, tokens: int, batch: int, cache: str, state: str) -> dict:
    """What the page must show, computed by the package in CPython with transformers."""
    try:
        facts = package_facts(config)
    except TypeError as error:  # the package's own reader fails on it: the page says so
        return {"error": str(error)}
    if isinstance(facts, KeyError):  # browser_config.read's words for a missing field
        return {"error": f"expected the config to hold the field {facts}, got none"}
    if isinstance(facts, ValueError):
        return {"error": str(facts)}
    cost = bill(facts, tokens, batch=batch, cache_dtype=cache, state_dtype=state)
    return {
        "model_type": facts.name,
        "recipe": recipe(facts),
        "strip": layer_strip(facts),
        "cache": cost.cache,
        "cache_text": format_bytes(cost.cache),
        "per_kind": [
            {"kind": k, "name": kind_name(facts, k), "bytes": size, "text": format_bytes(size)}
            for k, size in cost.per_kind.items()
        ],
    }


BAD_FILES = {
    "{nope": "not JSON",
    "[1, 2]": "expected a JSON object",
    '{"hidden_size": 64}': 'name its "model_type"',
    '{"model_type": "rwkv", "num_hidden_layers": 4}': "RWKV's recurrence",
    '{"model_type": "llama", "num_hidden_layers": "four"}': "num_hidden_layers",
    '{"model_type": "laguna"}': "a softplus gate on each head's output",
    '{"model_type": "lfm2_moe"}': "got layer_types=None",
}


def test_pyodide_in_node_reads_every_case_as_the_package(tmp_path, exported):
    node = shutil.which("node")
    if node is None or not (config_reader.PYODIDE / "pyodide.mjs").is_file():
        pytest.skip("needs node and node_modules/pyodide (`npm ci`)")
    config_reader.write_bundle(tmp_path / "bundle", exported=exported)
    runs, expected = [], []
    exported_types = exported
    for config in CASES.values():
        if text_type(config, exported_types) in browser_config.NOT_FILLED:
            continue
        for tokens, batch, cache, state in SETTINGS:
            runs.append(
                {
                    "text": json.dumps(config),
                    "tokens": tokens,
                    "batch": batch,
                    "cache_dtype": cache,
                    "state_dtype": state,
                }
            )
            expected.append(expected_page(config, tokens, batch, cache, state))
    runs += [{"text": text, "tokens": 16} for text in BAD_FILES]
    done = subprocess.run(
        [node, str(NODE_RUNNER), str(tmp_path / "bundle")],
        input=json.dumps(runs),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    results = json.loads(done.stdout)["results"]
    pages, errors = results[: len(expected)], results[len(expected) :]
    mismatched = [
        (run["text"][:80], run["tokens"], got, want)
        for run, got, want in zip(runs[: len(expected)], pages, expected, strict=True)
        if got != want
    ]
    assert not mismatched, mismatched[:3]
    for (text, wanted), got in zip(BAD_FILES.items(), errors, strict=True):
        assert set(got) == {"error"} and wanted in got["error"], (text, got)
