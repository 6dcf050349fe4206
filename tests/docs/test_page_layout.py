"""Two changes to how a chapter shows its code: excerpts without checks, checks in dropdowns.

- ``source_excerpts``: a ``literalinclude`` of the package's source leaves out the
  statements that only check arguments (``_checks``), on every excerpt the chapters
  show, read as Sphinx reads it.
- ``dropdown_cells``: the ``hide-cell`` cells after a ``{dropdown}`` go inside it; every
  such cell of the chapters follows a dropdown, so none is left outside.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docutils import nodes
from dropdown_cells import gather_hidden_cells
from source_excerpts import only_checks, without_checks
from sphinx.config import Config
from sphinx.directives.code import LiteralIncludeReader

DOCS = Path(__file__).resolve().parents[2] / "docs"
CHAPTERS = sorted((DOCS / "chapters").glob("*.md"))
INCLUDE = re.compile(r"```\{literalinclude\} (\S+)\n((?::[^\n]*\n)*)")
SHOWN = ("language", "caption", "emphasize-lines", "name")  # not the reader's options


def excerpts():
    """(chapter, object or lines, the code Sphinx would show) for every excerpt."""
    config = Config({}, {})
    config.source_encoding = "utf-8"
    for chapter in CHAPTERS:
        for found in INCLUDE.finditer(chapter.read_text(encoding="utf-8")):
            options = {
                key: value or None
                for key, value in re.findall(r":([\w-]+):[ \t]*(.*)", found.group(2))
                if key not in SHOWN
            }
            path = (chapter.parent / found.group(1)).resolve()
            code, _ = LiteralIncludeReader(str(path), options, config).read()
            where = options.get("pyobject") or options.get("lines") or path.name
            yield chapter.name, where, code


def test_statements_that_only_check_are_recognised() -> None:
    assert only_checks("from attention import _checks")
    assert only_checks("_checks.flag(owner, 'causal', causal, 'a flag')")
    assert only_checks("x, n = _checks.pair(owner, x, n)")
    assert not only_checks("x, num_cached = _checks.cached_input(self, x, cache)")
    assert not only_checks("lengths = _checks.sequence_lengths(owner, cu_seqlens)")
    assert not only_checks("scores = q @ k.T")
    assert not only_checks("if _checks.flag(owner, 'a', a, 'b'):")


def test_a_check_over_several_lines_goes_whole_and_the_rest_stays() -> None:
    code = (
        "def f(self, x, cache=None):\n"
        "    # project\n"
        "    x = _checks.module_input(\n"
        "        self, x, d_in=self.d_in\n"
        "    )\n"
        '    text = "_checks.flag(a)"\n'
        "    size = _checks.dtype_bytes(owner, dtype)\n"
        "    return x * size\n"
    )
    assert without_checks(code) == (
        "def f(self, x, cache=None):\n"
        "    # project\n"
        '    text = "_checks.flag(a)"\n'
        "    size = _checks.dtype_bytes(owner, dtype)\n"
        "    return x * size\n"
    )


def test_an_unreadable_fragment_comes_back_unchanged() -> None:
    fragment = '    x = 1\n  _checks.flag(a)\n    """open'
    assert without_checks(fragment) == fragment


@pytest.mark.parametrize(("chapter", "where", "code"), list(excerpts()))
def test_no_excerpt_shows_a_statement_that_only_checks(chapter, where, code) -> None:
    shown = without_checks(code)
    left = [line.strip() for line in shown.splitlines() if "_checks" in line]
    # What stays computes a value the excerpt goes on to use.
    for line in left:
        assert re.match(r"[\w, ]+ = _checks\.\w+\(", line), f"{chapter} ({where}): {line}"
        assert not only_checks(line), f"{chapter} ({where}): {line}"


def test_the_chapters_excerpts_lose_their_checks() -> None:
    cut = {chapter for chapter, _, code in excerpts() if without_checks(code) != code}
    print(f"{len(cut)} chapters show excerpts with checks cut: {sorted(cut)}")
    assert len(cut) >= 10


def dropdown(*children: nodes.Node) -> nodes.container:
    return nodes.container("", *children, design_component="dropdown")


def cell(hide_mode: str | None = "all") -> nodes.container:
    node = nodes.container(nb_element="cell_code")
    if hide_mode:
        node["hide_mode"] = hide_mode
    return node


def test_hidden_cells_after_a_dropdown_go_inside_it_without_their_toggle() -> None:
    section = nodes.section()
    checks = dropdown(nodes.rubric(text="Checked"), nodes.paragraph(text="what"))
    first, second, shown, later = cell(), cell(), cell(None), cell()
    section.extend([checks, first, second, shown, later])
    assert gather_hidden_cells(section) == 2
    assert checks.children[2:] == [first, second]
    assert "hide_mode" not in first and "hide_mode" not in second
    # A visible cell ends the run: the hidden cell after it is not the dropdown's.
    assert section.children == [checks, shown, later]
    assert later["hide_mode"] == "all"


def test_a_cell_hiding_only_its_input_stays_where_it_is() -> None:
    section = nodes.section()
    input_only = cell("input")
    section.extend([dropdown(), input_only])
    assert gather_hidden_cells(section) == 0
    assert section.children[1] is input_only


def blocks(text: str):
    """The page's top-level blocks: ("cell", hidden?), ("dropdown", None), ("text", None)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(:{3,})\{dropdown\}", line)
        if line.startswith("```{code-cell}"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            head = "\n".join(lines[i:end]).split("\n---\n", 2)
            hidden = len(head) > 1 and "hide-cell" in head[1]
            yield "cell", hidden
            i = end + 1
        elif fence:
            i = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == fence[1]) + 1
            yield "dropdown", None
        else:
            if line.strip():
                yield "text", None
            i += 1


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda path: path.stem)
def test_every_hidden_cell_sits_beside_a_dropdown(chapter: Path) -> None:
    """Right before or after one, through other hidden cells: the build moves it in."""
    found = list(blocks(chapter.read_text(encoding="utf-8")))
    stray = []
    for number, (kind, hidden) in enumerate(found):
        if kind != "cell" or not hidden:
            continue
        neighbours = []
        for step in (-1, 1):
            other = number + step
            while 0 <= other < len(found) and found[other] == ("cell", True):
                other += step
            neighbours.append(found[other][0] if 0 <= other < len(found) else None)
        if "dropdown" not in neighbours:
            stray.append(number)
    assert not stray, f"hidden cells beside no dropdown, blocks {stray}"


def test_hidden_cells_before_a_dropdown_go_in_under_its_title() -> None:
    section = nodes.section()
    title = nodes.rubric(text="Solution notes")
    notes = dropdown(title, nodes.paragraph(text="why"))
    solution, check = cell(), cell()
    section.extend([nodes.paragraph(text="1. Build it."), solution, check, notes])
    assert gather_hidden_cells(section) == 2
    assert notes.children[:3] == [title, solution, check]
    assert len(section.children) == 2


def test_a_run_between_two_dropdowns_stays_with_the_one_above() -> None:
    section = nodes.section()
    above, below, between = dropdown(), dropdown(), cell()
    section.extend([above, between, below])
    assert gather_hidden_cells(section) == 1
    assert above.children == [between] and below.children == []
