"""House style of the pages' code: lines of at most 80 columns (docs/contributing.md).

A wider line scrolls sideways on the site and in a narrow notebook window. Only the
code of ``{code-cell}`` blocks counts: not the cell's metadata (the YAML between its
two ``---`` lines, where alt text and expected outputs may run long), and not the
prose or the plain code blocks of the page.
"""

from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = [
    *sorted(DOCS.glob("chapters/*.md")),
    *sorted(DOCS.glob("parts/*.md")),
    DOCS / "index.md",
    DOCS / "which-model-uses-what.md",
]
WIDTH = 80


def code_lines(text: str):
    """``(line number, line)`` for every line of code in the page's code cells."""
    fence = None  # the backticks that opened the code cell we are in
    state = None  # None outside a cell, then "first", "metadata" or "code"
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is None:
            stripped = line.lstrip()
            if stripped.startswith("```") and "{code-cell}" in stripped:
                fence = stripped[: len(stripped) - len(stripped.lstrip("`"))]
                state = "first"
            continue
        if line.strip().startswith(fence) and not line.strip().strip("`"):
            fence = state = None
            continue
        if state == "first":
            state = "metadata" if line.strip() == "---" else "code"
            if state == "metadata":
                continue
        elif state == "metadata":
            if line.strip() == "---":
                state = "code"
            continue
        yield number, line


def test_code_lines_skip_the_metadata_and_the_prose():
    long = "x" * (WIDTH + 1)
    page = "\n".join(
        [
            long,  # prose
            "```{code-cell} ipython3",
            "---",
            f"expect: {long}",
            "---",
            "a = 1",
            "```",
            "```python",
            long,  # a plain code block
            "```",
            "```{code-cell} ipython3",
            "b = 2",
            "```",
        ]
    )
    assert list(code_lines(page)) == [(6, "a = 1"), (12, "b = 2")]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(DOCS).as_posix())
def test_code_lines_are_at_most_80_columns(page):
    name = f"docs/{page.relative_to(DOCS).as_posix()}"
    too_wide = [
        f"{name}:{number}: {len(line)} columns"
        for number, line in code_lines(page.read_text(encoding="utf-8"))
        if len(line) > WIDTH
    ]
    assert not too_wide, f"code lines wider than {WIDTH} columns:\n" + "\n".join(too_wide)
