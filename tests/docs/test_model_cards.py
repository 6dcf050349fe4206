"""The model cards (docs/_ext/model_cards.py): generated from MODELS, every number on
them read back and compared with the package's own bill, every link checked.

The cards are plain Markdown, not notebooks, so the build does not run them; their
numbers are computed by the generator, and this file is their verification: it
regenerates the pages and reads each number back against
:func:`~attention.models.cache_bytes` and :func:`attention.models.bill`, computed
here, at every context a card gives.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import re
from pathlib import Path

import model_cards
import pytest
import torch
import transformers
from model_cards import (
    CACHE_DTYPES,
    COMPARISONS,
    FOLDER,
    STRIPS,
    TOPICS,
    WEIGHT_DTYPES,
    Parameters,
    attention_classes,
    card,
    compare_data,
    compare_name,
    config_fields,
    contexts,
    key_numbers,
    link_recipe,
    linked,
    pages,
    recipe_topics,
    size,
    slug,
    unusual,
    write,
)
from tiny_configs import TINY, tiny_config

from attention import MODELS
from attention.models import (
    BITS,
    LinearAttention,
    bill,
    cache_bytes,
    facts_from_config,
    layer_cache_bytes,
    parameter_count,
    recipe,
    released_config,
    released_parameters,
    state_bytes,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"
UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
TORCH = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "fp32": torch.float32}


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return pages()


def read_size(text: str) -> tuple[float, float]:
    """``"3.00 GiB"`` -> (its bytes, half a unit of its last digit, in bytes)."""
    value, unit = text.replace(",", "").split()
    decimals = len(value.partition(".")[2])
    return float(value) * UNITS[unit], 0.5 * 10**-decimals * UNITS[unit]


def assert_bytes(text: str, exact: int) -> None:
    """The printed size is ``exact`` bytes, to the digits it prints."""
    shown, half = read_size(text)
    assert abs(shown - exact) <= half * 1.0001, (text, exact)


def table(page: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header line starts with ``header``."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_every_model_has_a_page_and_the_index_lists_them_all(generated):
    assert set(generated) == {
        "index.md",
        "compare.md",
        *(f"{slug(name)}.md" for name in MODELS),
        *(f"{compare_name(names)}.md" for names in COMPARISONS),
    }
    index = generated["index.md"]
    toctree = index.split("```{toctree}")[1]
    assert [line for line in toctree.splitlines()[4:] if line and line != "```"] == [
        slug(name) for name in MODELS
    ]
    for facts in MODELS.values():
        assert f"{{doc}}`{facts.name} <{slug(facts.name)}>`" in index


def test_the_pages_do_not_change_between_two_runs(generated):
    assert pages() == generated


@pytest.mark.parametrize("name", list(MODELS))
def test_the_cache_table_is_the_bill_to_the_printed_digit(name, generated):
    """Each cell, read back, is costs.cache_bytes in that type, and bill's cache."""
    facts = MODELS[name]
    if facts.bidirectional:
        assert "so it keeps no cache" in generated[f"{slug(name)}.md"]
        assert cache_bytes(facts, facts.trained_context) == 0
        return
    rows = table(generated[f"{slug(name)}.md"], "| tokens |")
    assert [int(row[0].split()[0].replace(",", "")) for row in rows] == contexts(facts)
    assert facts.trained_context in contexts(facts)
    for row in rows:
        tokens = int(row[0].split()[0].replace(",", ""))
        for dtype, cell in zip(CACHE_DTYPES, row[1:], strict=True):
            exact = cache_bytes(facts, tokens, TORCH[dtype], torch.float32)
            assert bill(facts, tokens, cache_dtype=dtype).cache == exact
            assert_bytes(cell, exact)
            assert cell == size(exact)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_cache_by_kind_of_layer_adds_up_to_the_bill(name, generated):
    facts = MODELS[name]
    page = generated[f"{slug(name)}.md"]
    kinds = set(facts.layer_types)
    if len(kinds) == 1 or facts.bidirectional:
        assert "by kind of layer" not in page
        return
    rows = table(page, "| layers | how many |")
    assert sum(int(row[1]) for row in rows) == facts.layers
    per_layer = layer_cache_bytes(facts, facts.trained_context)
    for row, kind in zip(rows, dict.fromkeys(facts.layer_types), strict=True):
        exact = sum(b for k, b in zip(facts.layer_types, per_layer, strict=True) if k == kind)
        assert int(row[1]) == facts.layer_types.count(kind)
        assert_bytes(row[2], exact)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_fixed_state_and_the_weights_are_the_facts(name, generated):
    facts = MODELS[name]
    page = generated[f"{slug(name)}.md"]
    state = state_bytes(facts, torch.bfloat16, torch.float32)
    if state:
        found = re.search(r"the fixed state is ([\d.,]+ \w+) \(bf16\) and ([\d.,]+ \w+)", page)
        assert found, "no fixed state on a card of a model that keeps one"
        assert_bytes(found.group(1), state)
        assert_bytes(found.group(2), state_bytes(facts, TORCH["fp8"], torch.float32))
    else:
        assert "fixed state" not in page
    parameters = counted(facts)
    assert parameters is not None, "every model has a count, counted or cited"
    assert "cites no parameter count" not in page
    weights = page.split("## Its weights")[1].split("##")[0]
    assert f"{parameters:,} parameters" in weights
    # A count no stored file gives is the table's cited one, and the card says so.
    cited = released_parameters(name) is None
    assert (f"{parameters:,} parameters (cited, not counted: " in weights) == cited
    for dtype in WEIGHT_DTYPES:
        found = re.search(rf"([\d.,]+ \w+) in {dtype}\b", weights)
        assert_bytes(found.group(1), parameters * BITS[dtype] // 8)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_card_gives_the_recipe_and_links_each_clause(name, generated):
    facts = MODELS[name]
    page = generated[f"{slug(name)}.md"]
    assert recipe(facts) in page
    clauses = re.findall(r"^- (.*)$", page.split("## Layer by layer")[0], re.M)
    # Unlinked, the clauses give back the recipe.
    plain = [re.sub(r"\{(?:ref|doc)\}`([^`<]*?) <[^`]*>`", r"\1", c) for c in clauses]
    assert "; ".join(plain) == recipe(facts).removeprefix(f"{facts.name}: ")
    assert any("{ref}" in c or "{doc}" in c for c in clauses)


def test_the_recipe_links_each_mechanism_once_and_only_its_words():
    text = "12 sliding (window 128) and 12 full; GQA, 64 query heads; RoPE (base 10)"
    assert link_recipe(text) == (
        "12 {ref}`sliding (window 128) <local-global-layers>` and 12 full; "
        "{ref}`GQA <gqa>`, 64 query heads; {doc}`RoPE </chapters/11-rope>` (base 10)"
    )
    assert link_recipe("LongRoPE ×4") == "{doc}`LongRoPE </chapters/14-longer-contexts>` ×4"


def labels() -> set[str]:
    """Every ``(label)=`` of the site's pages."""
    found = set()
    for path in DOCS.rglob("*.md"):
        if FOLDER in path.relative_to(DOCS).parts[:1]:
            continue
        found |= set(re.findall(r"^\((\S+)\)=$", path.read_text(encoding="utf-8"), re.M))
    return found


def glossary_terms() -> set[str]:
    text = (DOCS / "glossary.md").read_text(encoding="utf-8")
    terms = set()
    for block in re.findall(r"```\{glossary\}\n(.*?)```", text, re.S):
        terms |= set(re.findall(r"^(\w+)$", block, re.M))
    return terms


def test_every_link_of_the_cards_has_its_target(generated):
    """The build checks these too; here without a build: labels, glossary terms, pages."""
    known, terms = labels(), glossary_terms()
    for name, page in generated.items():
        for label in re.findall(r"\{ref\}`[^`<]*<([^>]+)>`", page):
            assert label in known, (name, label)
        for term in re.findall(r"\{term\}`(?:[^`<]*<)?(\w+)>?`", page):
            assert term in terms, (name, term)
        for doc in re.findall(r"\{doc\}`[^`<]*</([^>]+)>`", page):
            assert (DOCS / f"{doc}.md").is_file(), (name, doc)


def test_the_glossary_has_every_field_the_issue_names():
    wanted = {
        "num_key_value_heads",
        "head_dim",
        "sliding_window",
        "layer_types",
        "rope_parameters",
        "rope_scaling",
        "partial_rotary_factor",
        "query_pre_attn_scalar",
        "attn_logit_softcapping",
        "attention_chunk_size",
        "no_rope_layers",
        "num_kv_shared_layers",
        "attention_k_eq_v",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "index_topk",
        "linear_key_head_dim",
        "mamba_d_state",
        "compress_rates",
    }
    assert wanted <= glossary_terms()
    text = (DOCS / "glossary.md").read_text(encoding="utf-8")
    for label in re.findall(r"\{ref\}`([^`]+)`", text):
        assert label in labels(), label


@pytest.mark.parametrize("name", list(MODELS))
def test_the_config_fields_are_the_facts(name):
    facts = MODELS[name]
    rows = {field: value for field, _, value in config_fields(facts)}
    assert rows["num_hidden_layers"] == f"{facts.layers:,}"
    assert rows["num_attention_heads"] == f"{facts.num_heads:,}"
    assert rows.get("sliding_window") == (
        None if facts.sliding_window is None else f"{facts.sliding_window:,}"
    )
    assert rows.get("kv_lora_rank") == (
        None if facts.kv_lora_rank is None else f"{facts.kv_lora_rank:,}"
    )
    assert rows.get("index_topk") == (None if facts.index_topk is None else f"{facts.index_topk:,}")
    assert set(rows) <= glossary_terms()


@pytest.mark.parametrize("name", list(MODELS))
def test_the_attention_classes_named_are_transformers_own(name):
    facts = MODELS[name]
    classes = attention_classes(facts.config_class, cross=facts.cross is not None)
    assert classes, f"no attention class found for {facts.config_class}"
    config = getattr(transformers, facts.config_class)
    module = importlib.import_module(config.__module__.replace(".configuration_", ".modeling_"))
    for cls in classes:
        assert isinstance(getattr(module, cls), type), cls
    if isinstance(facts.local, LinearAttention):
        assert len(classes) == 2  # the attention layers' and the linear layers'


def test_what_is_unusual_says_the_issue_s_three_examples():
    gpt_oss = " ".join(unusual(MODELS["gpt-oss-20b"]))
    assert f"only {MODELS['gpt-oss-20b'].local.window:,} tokens" in gpt_oss
    assert "sink" in gpt_oss
    gemma = " ".join(unusual(MODELS["Gemma 3 27B"]))
    assert f"{MODELS['Gemma 3 27B'].scores.query_pre_attn_scalar}^-0.5" in gemma
    kimi = " ".join(unusual(MODELS["Kimi Linear"]))
    assert "no position encoding at all (NoPE)" in kimi


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_a_card_for_every_model_type_the_atlas_reads(model_type):
    """A model of any type from_config reads gets a card (the models the table will
    hold next: Mamba hybrids, DeepSeek-V4's compressed layers), with its bill."""
    facts = facts_from_config(tiny_config(model_type), name=f"tiny {model_type}")
    page = card(facts)
    assert recipe(facts) in page
    if facts.bidirectional:
        return
    for row in table(page, "| tokens |"):
        tokens = int(row[0].split()[0].replace(",", ""))
        assert row[1] == size(cache_bytes(facts, tokens))


def test_the_tables_of_which_model_uses_what_link_every_model_to_its_card():
    text = (DOCS / "which-model-uses-what.md").read_text(encoding="utf-8")
    for facts in MODELS.values():
        link = f"[{facts.name}](models/{slug(facts.name)}.md)"
        assert text.count(link) == 4, (facts.name, text.count(link))


def test_writing_twice_rewrites_nothing_and_removes_what_is_gone(tmp_path):
    stale = tmp_path / FOLDER / "gone.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("a model no longer in the table")
    written, drawn = write(tmp_path)
    assert written == len(MODELS) + 2 + len(COMPARISONS) and not stale.exists()
    assert drawn == len(list((tmp_path / FOLDER / STRIPS).glob("*.png")))
    assert write(tmp_path) == (0, 0)


def counted(facts) -> int | None:
    """The model's parameters: counted from its released file where the package keeps
    the whole of it, else the count the table cites."""
    found = released_parameters(facts.name)
    if found is None and facts.weights is not None:
        found = facts.weights.parameters
    return found


def key_rows(page: str) -> dict[str, str]:
    """The key-numbers box of a card: what -> how much."""
    box = page.split(":::{admonition} Key numbers")[1].split(":::")[0]
    return {row[0]: row[1] for row in table(box, "|  | bytes or count |")}


@pytest.mark.parametrize("name", list(MODELS))
def test_the_key_numbers_open_the_card_and_are_the_bill(name, generated):
    """Above the recipe, every card gives its parameters, its weights, its cache at 8k,
    32k, 128k and its context (named as its source gives it: trained, supported or
    configured), and the total, each the bill's to its digit."""
    facts = MODELS[name]
    page = generated[f"{slug(name)}.md"]
    assert page.index("Key numbers") < page.index("## Its attention")
    rows = key_rows(page)
    parameters = counted(facts)
    if parameters is None:
        assert rows["parameters"] == "not in the table yet"
        assert not any(what.startswith(("weights", "total")) for what in rows)
    else:
        assert rows["parameters"].endswith(f"({parameters:,})")
        assert_bytes(rows["weights, all in bf16"], parameters * 2)
        if facts.quantization is not None and released_parameters(name) is not None:
            only = facts.quantization.parameters
            quantized = parameter_count(released_config(name), only=only)
            bits = BITS[facts.quantization.dtype]
            exact = math.ceil(quantized * bits / 8) + (parameters - quantized) * 2
            dtype = {"fp8": "FP8", "mxfp4": "MXFP4"}[facts.quantization.dtype]
            assert_bytes(rows[f"weights as released ({dtype} and bf16)"], exact)
    cache = {}
    for what, shown in rows.items():
        found = re.match(r"cache at ([\d,]+) ", what)
        if found:
            cache[int(found.group(1).replace(",", ""))] = shown
    if facts.bidirectional:
        assert cache == {}
        return
    assert sorted(cache) == contexts(facts)
    for tokens, shown in cache.items():
        assert_bytes(shown, bill(facts, tokens).cache)
    assert f"cache at {facts.trained_context:,}" in page
    assert any(what.endswith(f", its {facts.context_claim} context") for what in rows)
    if parameters is not None:
        total = rows[f"total: weights in bf16 and the cache at its {facts.context_claim} context"]
        exact = bill(facts, facts.trained_context, parameters=parameters)
        assert_bytes(total, exact.weights + exact.cache)


def test_the_key_numbers_give_the_released_weights_first_when_the_split_is_known(
    monkeypatch,
):
    """gpt-oss with a split of its parameters: its MXFP4 experts at 4.25 bits, the
    rest in bf16, above the all-bf16 weights, and a total for each."""
    facts = MODELS["gpt-oss-20b"]
    total, experts = 20_000_000_000, 18_000_000_000
    split = Parameters(total, experts, "a split for the test")
    monkeypatch.setattr(model_cards, "parameters_of", lambda f: split)
    rows = dict(key_numbers(facts))
    whats = list(rows)
    released = "weights as released (MXFP4 and bf16)"
    assert whats.index(released) < whats.index("weights, all in bf16")
    exact = experts * 17 // 32 + (total - experts) * 2
    assert_bytes(rows[released], exact)
    cache = bill(facts, facts.trained_context).cache
    context = "the cache at its trained context"
    assert_bytes(rows[f"total: weights as released and {context}"], exact + cache)
    assert_bytes(rows[f"total: weights in bf16 and {context}"], total * 2 + cache)
    page = card(facts)
    assert "As released, its weights are not all 16-bit: MXFP4 for the experts'" in page
    assert "4.25 bits a number, its shared 8-bit scale per 32 numbers included" in page


@pytest.mark.parametrize("name", [n for n, m in MODELS.items() if m.quantization])
def test_a_quantized_release_says_which_weights_and_cites_its_config(name, generated):
    facts = MODELS[name]
    weights = generated[f"{slug(name)}.md"].split("## Its weights")[1].split("\n## ")[0]
    assert facts.quantization.weights in weights
    assert linked(facts.quantization.source) in weights  # its addresses as links


def test_every_comparison_has_its_page_listed_on_the_compare_page(generated):
    compare = generated["compare.md"]
    for names in COMPARISONS:
        assert f"{compare_name(names)}.md" in generated
        assert f"<{compare_name(names)}>`" in compare
    toctree = compare.split("```{toctree}")[1]
    assert [line for line in toctree.splitlines()[4:] if line and line != "```"] == [
        compare_name(names) for names in COMPARISONS
    ]
    issue = {("Llama 3.1 70B", "Qwen3-Next 80B-A3B"), ("gpt-oss-20b", "Qwen3-30B-A3B")}
    assert issue <= set(COMPARISONS)
    assert ("DeepSeek-V3", "DeepSeek-V3.2", "DeepSeek-V4-Flash") in COMPARISONS


@pytest.mark.parametrize("names", COMPARISONS, ids=compare_name)
def test_a_comparison_s_numbers_are_the_bill_and_its_differences_the_recipes(names, generated):
    page = generated[f"{compare_name(names)}.md"]
    facts = [MODELS[n] for n in names]
    rows = {row[0]: row[1:] for row in table(page, "|  | " + " | ".join(names))}
    for tokens in (8192, 32768, 131072):
        cells = rows[f"cache at {tokens:,} ({tokens // 1024}k)"]
        for m, cell in zip(facts, cells, strict=True):
            if m.max_position_embeddings is not None and tokens > m.max_position_embeddings:
                assert cell == "–"
            else:
                assert_bytes(cell, bill(m, tokens).cache)
    for m, cell in zip(facts, rows["cache at that context"], strict=True):
        assert_bytes(cell, bill(m, m.trained_context).cache)
    for m, cell in zip(facts, rows["context (as its source gives it)"], strict=True):
        assert cell.endswith(f", {m.context_claim}")
    recipes = table(page, "|  | " + " | ".join(names) + " |  |")
    assert [row[0] for row in recipes] == list(TOPICS.values())
    for row, topic in zip(recipes, TOPICS, strict=True):
        said = [recipe_topics(m)[topic] for m in facts]
        assert row[-1] == ("same" if len(set(said)) == 1 else "**differs**")
    for m in facts:
        # The topics, in order, give back the whole recipe.
        joined = "; ".join(t for t in recipe_topics(m).values() if t != "–")
        assert joined == recipe(m).removeprefix(f"{m.name}: ")
        assert layer_strip_text(m) in page
    assert f"_strips/{compare_name(names)}-cache.png" in page


def layer_strip_text(facts) -> str:
    from attention.models import layer_strip

    return layer_strip(facts)


def test_the_compare_view_s_data_is_the_bill_at_each_context():
    data = compare_data()
    names = [m["name"] for m in data["models"]]
    assert names == [n for n, m in MODELS.items() if not m.bidirectional]
    for model in data["models"]:
        facts = MODELS[model["name"]]
        tokens = [t for t, _ in model["cache"]]
        assert facts.trained_context in tokens and tokens == sorted(tokens)
        for t, cache in model["cache"]:
            assert cache == bill(facts, t).cache
        assert model["key"] == [list(row) for row in key_numbers(facts)]
    assert all(name in names for pair in data["pairs"] for name in pair)


def test_the_compare_page_embeds_its_data_safely(generated):
    compare = generated["compare.md"]
    embedded = compare.split('id="model-compare-data">')[1].split("</script>")[0]
    assert "</" not in embedded
    assert json.loads(embedded.replace("<\\/", "</")) == json.loads(json.dumps(compare_data()))


@pytest.mark.parametrize("name", ["DeepSeek-V4-Flash", "Llama 3 8B", "MiniMax-M2"])
def test_a_card_names_the_context_as_its_source_gives_it(name, generated):
    """DeepSeek-V4-Flash's card says its 1M tokens are supported, not trained, as its
    release says; Llama 3's 8k is trained; MiniMax-M2's is its config's limit. The word
    comes from the entry's ``context_claim``, never from the model's name."""
    facts = MODELS[name]
    page = generated[f"{slug(name)}.md"]
    claim = {"DeepSeek-V4-Flash": "supported", "Llama 3 8B": "trained"}.get(name, "configured")
    assert facts.context_claim == claim
    assert f"its {claim} context" in page and f"- The {claim} context: " in page
    others = {"trained", "supported", "configured"} - {claim}
    assert not any(f"its {other} context" in page for other in others)
    # The same card from the same facts with another claim says the other word
    changed = dataclasses.replace(facts, context_claim=sorted(others)[0])
    assert f"its {sorted(others)[0]} context" in card(changed)


@pytest.mark.parametrize("name", [n for n, m in MODELS.items() if m.compressed is not None])
def test_a_deepseek_v4_page_links_chapter_22b_for_each_compressed_kind_and_draws_its_strip(
    name, generated
):
    """Issue 43: each of DeepSeek-V4's compressed layer kinds (CSA, HCA) links the chapter
    that builds it, in the layer list and the notes, and the page draws the strip of its
    layers, every kind coloured (``layer_strips`` knows them), and spells it as text."""
    facts = MODELS[name]
    page = generated[f"{slug(name)}.md"]
    chapter = "</chapters/25-compressed-attention>`"
    layers = next(line for line in page.splitlines() if line.startswith(f"- {facts.layers} layers"))
    for kind, label in (
        ("compressed_sparse_attention", "compressed sparse"),
        ("heavily_compressed_attention", "heavily compressed"),
    ):
        count = facts.layer_types.count(kind)
        assert count and f"{count} {{doc}}`{label} {chapter}" in layers, (kind, layers)
    notes = page.split("## What is unusual about it")[1].split("\n## ")[0]
    assert f"{{doc}}`compressed attention {chapter}" in notes
    assert model_cards.can_draw(facts)
    assert f":::{{figure}} {STRIPS}/{slug(name)}.png" in page
    strip = page.split("```text\n")[1].split("\n")[0]
    assert len(strip) == facts.layers and set(strip) <= {"S", "K", "X"} and {"K", "X"} <= set(strip)
