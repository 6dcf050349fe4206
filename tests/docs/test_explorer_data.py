"""The attention explorer's data (docs/_ext/explorer_data.py) and its drift check.

The data must be what the chapters print, and the check must notice when it is not:
a changed exported number, a changed number in a chapter, a chapter cell that is
gone. The last test builds a small Sphinx project with the extension and checks that
a planted difference fails the build under ``-W``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from explorer_data import (
    CALCULATOR_DTYPES,
    CHECKS,
    DATA_JS,
    DATA_JSON,
    GLOBAL,
    REPO,
    calculator_bill,
    drift,
    export,
    layer_groups,
    option,
    weights,
)
from tiny_configs import TINY, tiny_config

import attention
from attention import MODELS, causal_mask, chunked_mask, padding_mask, sliding_window_mask
from attention.models import bill, cache_bytes, facts_from_config


@pytest.fixture(scope="module")
def data() -> dict:
    return export()


def copy_sources(top: Path) -> Path:
    """The chapters and gallery script the drift check reads, under ``top``."""
    for path in {check.path for check in CHECKS}:
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, top / path)
    return top


def drift_after_edit(data, top: Path, path: str, old: str, new: str) -> list:
    """``drift`` over a copy of the sources in which ``path`` has ``old`` replaced by ``new``."""
    root = copy_sources(top)
    text = (root / path).read_text(encoding="utf-8")
    assert old in text, f"{path} no longer holds {old!r}"
    (root / path).write_text(text.replace(old, new), encoding="utf-8")
    return drift(data, root)


def test_the_data_agrees_with_every_chapter(data):
    assert drift(data) == []


def test_the_data_survives_json_exactly(data):
    """The page gets the very float32 values the modules computed."""
    again = json.loads(json.dumps(data))
    assert again == data
    scores = torch.tensor(again["views"]["weight-free"]["states"][0]["heads"][0]["scores"])
    assert torch.equal(
        scores, torch.tensor(data["views"]["weight-free"]["states"][0]["heads"][0]["scores"])
    )


def test_every_view_has_square_scores_for_its_tokens(data):
    for name, view in data["views"].items():
        if view.get("kind") in ("masks", "calculator"):
            continue
        n = len(view["tokens"])
        assert 0 <= view["query"] < n, name
        for state in view["states"]:
            for head in state["heads"]:
                assert torch.tensor(head["scores"]).shape == (n, n), name


def test_causal_weights_are_zero_in_the_future_and_rows_sum_to_one(data):
    view = data["views"]["trainable"]
    masked = weights(view, causal=True, temperature=0.5)
    assert torch.all(masked.triu(diagonal=1) == 0)
    torch.testing.assert_close(masked.sum(dim=-1), torch.ones(6))
    assert torch.all(weights(view, causal=False) > 0)


def test_the_trained_head_learns_to_look_at_the_previous_token(data):
    view = data["views"]["trained"]
    before, after = (weights(view, state=s).diagonal(offset=-1) for s in (0, 1))
    assert before.mean() < 0.5 < 0.9 < after.mean()
    assert (
        view["previous_token_weight"]["before"] < 0.5 < 0.9 < view["previous_token_weight"]["after"]
    )


# -- The calculator -----------------------------------------------------------------


def calculator_points(facts) -> list[int]:
    """Contexts to bill a model at: empty, one token, around its window or chunk, the
    slider's stops, its trained context and past it, and odd lengths."""
    points = {0, 1, 2, 3, 1000, 4097, 100_003, facts.trained_context, facts.trained_context + 1}
    points |= {2**p for p in range(10, 21)}
    size = facts.local.tokens_kept if facts.local is not None else None
    if size is not None:  # a window or a chunk
        points |= {size - 1, size, size + 1, 2 * size + 1}
    return sorted(points)


@pytest.mark.parametrize("index", range(len(MODELS)))
def test_the_calculator_bills_each_model_as_the_package_does(data, index):
    """The page's computation (calculator_bill mirrors explorer.js) from the exported
    data equals attention.models.bill kind by kind, and costs.cache_bytes in all."""
    view = data["views"]["calculator"]
    facts = list(MODELS.values())[index]
    assert view["models"][index]["name"] == facts.name
    assert sum(g["count"] for g in view["models"][index]["groups"]) == facts.layers
    for tokens in calculator_points(facts):
        for batch in (1, 7):
            for dtype in CALCULATOR_DTYPES:
                got = calculator_bill(view, index, tokens, batch, dtype, dtype)
                want = bill(facts, tokens, batch=batch, cache_dtype=dtype, dtype=dtype)
                assert got["per_kind"] == want.per_kind, (tokens, batch, dtype)
                assert got["weights"] == want.weights
        exact = cache_bytes(facts, tokens, torch.bfloat16, torch.float32)
        assert calculator_bill(view, index, tokens, 1, "bf16", "bf16")["cache"] == exact


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_the_calculator_groups_any_model_the_atlas_reads(data, model_type):
    """A model of every type from_config reads (Mamba hybrids, MLP-only layers,
    DeepSeek-V4's compressed layers), grouped as the calculator groups MODELS' entries,
    bills as the package does."""
    facts = facts_from_config(tiny_config(model_type))
    model = {
        "kinds": [{"kind": k, "label": k} for k in dict.fromkeys(facts.layer_types)],
        "groups": layer_groups(facts),
        "parameters": None,
    }
    view = {**data["views"]["calculator"], "models": [model]}
    for tokens in (0, 1, 5, 6, 7, 8, 9, 31, 100, 1001):
        for dtype in CALCULATOR_DTYPES:
            got = calculator_bill(view, 0, tokens, 2, dtype, dtype)
            assert got["per_kind"] == bill(facts, tokens, batch=2, cache_dtype=dtype).per_kind


NODE_BILLS = """
global.window = {};
global.document = { readyState: "complete", querySelectorAll: () => [] };
require(process.argv[1]);
const view = JSON.parse(require("fs").readFileSync(0, "utf8"));
const bills = view.points.map(([model, tokens, batch, cache, weights]) =>
  window.attentionExplorer.calculatorBill(view, model, tokens, batch, cache, weights));
process.stdout.write(JSON.stringify(bills));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run explorer.js")
def test_the_calculator_page_code_bills_as_the_package_does(data):
    """explorer.js's own calculatorBill, run in Node, at every model's points: the bill
    of attention.models.bill, byte for byte, kind by kind."""
    view = dict(data["views"]["calculator"])
    points = []
    for index, facts in enumerate(MODELS.values()):
        for tokens in calculator_points(facts):
            for batch, cache, weight in (
                (1, "bf16", "int4"),
                (3, "fp8", "bf16"),
                (5, "int4", "int8"),
            ):
                points.append((index, tokens, batch, cache, weight))
    view["points"] = points
    result = subprocess.run(
        ["node", "-e", NODE_BILLS, str(REPO / "docs" / "_static" / "explorer.js")],
        input=json.dumps(view),
        capture_output=True,
        text=True,
        check=True,
    )
    bills = json.loads(result.stdout)
    models = list(MODELS.values())
    for (index, tokens, batch, cache, weight), got in zip(points, bills, strict=True):
        want = bill(models[index], tokens, batch=batch, cache_dtype=cache, dtype=weight)
        assert got["per_kind"] == want.per_kind, (models[index].name, tokens, batch, cache)
        assert got["cache"] == want.cache and got["weights"] == want.weights


def chunked_by_definition(num_tokens: int, chunk: int) -> torch.Tensor:
    """Query i may attend key j when j <= i and i // chunk == j // chunk, pair by pair."""
    return torch.tensor(
        [
            [j <= i and i // chunk == j // chunk for j in range(num_tokens)]
            for i in range(num_tokens)
        ]
    )


def package_mask(pattern: str, value: int | None) -> torch.Tensor:
    """The mask the package builds for one pattern of the explorer's mask view."""
    if pattern == "causal":
        return causal_mask(6)
    if pattern == "sliding":
        return sliding_window_mask(6, value)
    if pattern == "chunked":
        return chunked_mask(6, value)
    if pattern == "padding":
        return (causal_mask(6) & padding_mask([value, 6], 6)[:, None, :])[0]
    raise AssertionError(f"no package mask for the pattern {pattern!r}")


def test_every_mask_of_the_mask_view_is_the_packages(data):
    view = data["views"]["masks"]
    assert view["tokens"] == list(attention.TOKENS)
    assert [p["name"] for p in view["patterns"]] == ["causal", "sliding", "chunked", "padding"]
    compared = 0
    for pattern in view["patterns"]:
        values = [o["value"] for o in pattern["options"]]
        assert values == ([None] if pattern["parameter"] is None else [1, 2, 3, 4, 5, 6])
        assert pattern["value"] in values  # the slider's starting value has a mask
        for chosen in pattern["options"]:
            allowed = torch.tensor(chosen["allowed"])
            assert allowed.dtype == torch.bool
            want = package_mask(pattern["name"], chosen["value"])
            assert torch.equal(allowed, want), (pattern["name"], chosen["value"])
            compared += 1
    assert compared == 1 + 3 * 6
    for length in range(1, 7):
        real = torch.tensor(option(view, "padding", length)["real"])
        assert torch.equal(real, padding_mask([length, 6], 6))


def test_each_masks_rule_as_printed_gives_that_mask(data):
    """The rule the page prints beside a mask, read as Python, marks the same cells."""
    for pattern in data["views"]["masks"]["patterns"]:
        for chosen in pattern["options"]:
            rule = chosen["rule"].replace("\u2264", "<=").replace("\u2212", "-")
            rule = rule.replace(" = ", " == ")
            ruled = [[eval(rule, {}, {"i": i, "j": j}) for j in range(6)] for i in range(6)]
            assert ruled == chosen["allowed"], (pattern["name"], chosen["value"], rule)


def test_the_mask_patterns_meet_where_they_should(data):
    """A window or a chunk of 6 is the causal mask, a chunk of 1 the diagonal, and a
    padded text of length 6 has no padding; shorter windows and chunks see less; the
    chunks follow Llama 4's definition, pair by pair."""
    view = data["views"]["masks"]

    def mask(pattern: str, value: int | None = None) -> torch.Tensor:
        return torch.tensor(option(view, pattern, value)["allowed"])

    causal = mask("causal")
    assert torch.equal(causal, torch.ones(6, 6, dtype=torch.bool).tril())
    for same in (mask("sliding", 6), mask("chunked", 6), mask("padding", 6)):
        assert torch.equal(same, causal)
    for chunk in range(1, 7):
        assert torch.equal(mask("chunked", chunk), chunked_by_definition(6, chunk)), chunk
    assert torch.equal(mask("chunked", 1), torch.eye(6, dtype=torch.bool))
    assert torch.equal(mask("sliding", 1), torch.eye(6, dtype=torch.bool))
    for pattern in ("sliding", "chunked", "padding"):
        seen = [int(mask(pattern, v).sum()) for v in range(1, 7)]
        assert seen == sorted(seen) and len(set(seen)) == 6, (pattern, seen)
    # Chunks of 4: "one" (4) and "step" (5) see each other's chunk only.
    assert mask("chunked", 4)[5].tolist() == [False] * 4 + [True, True]
    # A padded text of 2 tokens: no query sees keys 2..5.
    assert not mask("padding", 2)[:, 2:].any()


def test_a_changed_exported_mask_is_reported_at_chapter_11(data):
    changed = json.loads(json.dumps(data))
    option(changed["views"]["masks"], "sliding", 3)["allowed"][3][0] = True
    [(location, message)] = drift(changed)
    path, line = location.rsplit(":", 1)
    assert path == "docs/chapters/12-masks.md"
    text = (REPO / path).read_text(encoding="utf-8").splitlines()[int(line) - 1 :]
    assert any("window = sliding_window_mask(6, 3)" in t for t in text[:12])
    assert "False" in message and "True" in message


def test_a_changed_exported_score_is_reported_at_the_chapter_cell(data):
    changed = json.loads(json.dumps(data))
    changed["views"]["weight-free"]["states"][0]["heads"][0]["scores"][1][1] += 0.002
    problems = drift(changed)
    locations = [location for location, _ in problems]
    chapter = "docs/chapters/01-attention-without-weights.md:"
    # The scores cell, the "journey" weights cell and the all-weights cell all differ.
    assert len(locations) == 3 and all(loc.startswith(chapter) for loc in locations)
    assert "expected 1.4950, printed 1.4970" in problems[0][1]


def test_a_changed_number_in_a_chapter_is_reported(data, tmp_path):
    root = copy_sources(tmp_path)
    chapter = root / "docs/chapters/03-causal-attention.md"
    text = chapter.read_text(encoding="utf-8")
    assert text.count("[0.5517, 0.4483,") == 2  # renormalised, then the causal softmax
    chapter.write_text(text.replace("[0.5517, 0.4483,", "[0.5527, 0.4473,"), encoding="utf-8")
    [(location, message)] = drift(data, root)
    path, line = location.rsplit(":", 1)
    assert path == "docs/chapters/03-causal-attention.md"
    cell = text.splitlines()[int(line) - 1 :]
    assert cell[0].startswith("```{code-cell}")
    assert any("causal_weights = torch.softmax(" in c for c in cell[:15])
    assert "expected 0.5527, printed 0.5517" in message


def test_a_changed_expectation_in_the_gallery_is_reported(data, tmp_path):
    script = "gallery/plot_train_previous_token.py"
    edit = ("before training: 0.22,", "before training: 0.25,")
    [(location, message)] = drift_after_edit(data, tmp_path, script, *edit)
    assert location.startswith("gallery/plot_train_previous_token.py:")
    assert "expected 0.25, printed 0.22" in message


def test_a_cell_that_is_gone_is_reported(data, tmp_path):
    chapter = "docs/chapters/04-multi-head-attention.md"
    edit = ("print(queries[0, 1])  # 4 features", "print(queries[0, 1])")
    [(location, message)] = drift_after_edit(data, tmp_path, chapter, *edit)
    assert location == "docs/chapters/04-multi-head-attention.md"
    assert "found no expected output" in message


PAGE = """\
# Explorer

```{attention-explorer} weight-free
```
"""


def sphinx_build(root: Path, source_root: Path) -> tuple[int, str]:
    conf = (
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'docs' / '_ext')!r})\n"
        'extensions = ["myst_parser", "explorer_data"]\n'
        f"attention_explorer_root = {str(source_root)!r}\n"
        'html_theme = "basic"\n'
    )
    root.mkdir()
    (root / "conf.py").write_text(conf)
    (root / "index.md").write_text(PAGE)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-q",
            "-W",
            "--keep-going",
            "-b",
            "html",
            str(root),
            str(root / "_build"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, result.stderr


def test_the_build_writes_the_data_and_loads_it_on_the_page(tmp_path):
    code, stderr = sphinx_build(tmp_path / "site", REPO)
    assert code == 0, stderr
    static = tmp_path / "site" / "_build" / "_static"
    data = json.loads((static / DATA_JSON).read_text(encoding="utf-8"))
    script = (static / DATA_JS).read_text(encoding="utf-8")
    assert f"window.{GLOBAL} = {json.dumps(data, separators=(',', ':'))};" in script
    page = (tmp_path / "site" / "_build" / "index.html").read_text(encoding="utf-8")
    assert 'class="attention-explorer" data-view="weight-free"' in page
    assert page.index(f"_static/{DATA_JS}") < page.index("_static/explorer.js")


def test_a_drift_fails_the_build(tmp_path):
    sources = copy_sources(tmp_path / "sources")
    chapter = sources / "docs/chapters/01-attention-without-weights.md"
    text = chapter.read_text(encoding="utf-8")
    chapter.write_text(
        text.replace("[0.1385, 0.2379, 0.2333,", "[0.1385, 0.2399, 0.2333,"), encoding="utf-8"
    )
    code, stderr = sphinx_build(tmp_path / "site", sources)
    assert code != 0
    assert "01-attention-without-weights.md" in stderr
    assert "expected 0.2399, printed 0.2379" in stderr
