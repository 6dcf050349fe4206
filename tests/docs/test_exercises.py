"""docs/_ext/exercises.py: every downloaded chapter lets the reader try each exercise
before seeing its solution.

Each chapter is read as myst-nb reads it and passed through ``downloads.for_download``,
the function that makes the notebook a reader downloads. In the result, an empty "your
turn" cell follows each exercise's prompt, and every solution (a ``hide-cell`` code
cell of the Exercises section, or a "Solution" dropdown) comes after the "Solutions"
heading at the end, all of them, in their order.
"""

from pathlib import Path

import nbformat
import pytest
from downloads import for_download
from exercises import PROMPT, SECTION, YOUR_TURN, practice_notebook
from myst_nb.core.read import read_myst_markdown_notebook

CHAPTERS = sorted((Path(__file__).resolve().parents[2] / "docs" / "chapters").glob("*.md"))
SOLUTIONS = "## Solutions"


def read_chapter(path: Path) -> nbformat.NotebookNode:
    return read_myst_markdown_notebook(path.read_text("utf-8"), path=path)


def tags(cell: nbformat.NotebookNode) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def is_your_turn(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and YOUR_TURN in tags(cell)


def exercise_solutions(notebook: nbformat.NotebookNode) -> list[str]:
    """The sources of the solution code cells of a chapter's Exercises section."""
    found, inside = [], False
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.split("\n"):
                if SECTION.match(line):
                    inside = True
                elif line.startswith(("# ", "## ")):
                    inside = False
        elif inside and "hide-cell" in tags(cell):
            found.append(cell.source)
    return found


def prompts_in(cell: nbformat.NotebookNode) -> list[str]:
    if cell.cell_type != "markdown":
        return []
    return [line for line in cell.source.split("\n") if PROMPT.match(line)]


CHAPTERS_WITH_EXERCISES = [
    path for path in CHAPTERS if any(SECTION.match(line) for line in path.read_text().split("\n"))
]


def test_most_chapters_have_exercises():
    assert len(CHAPTERS_WITH_EXERCISES) >= len(CHAPTERS) - 2


@pytest.mark.parametrize("chapter", CHAPTERS_WITH_EXERCISES, ids=lambda path: path.stem)
def test_each_prompt_has_an_empty_cell_and_every_solution_comes_at_the_end(chapter):
    original = read_chapter(chapter)
    hidden = exercise_solutions(original)
    cells = for_download(read_chapter(chapter), "1.0").cells
    end = next(i for i, cell in enumerate(cells) if cell.source.startswith(SOLUTIONS))

    prompts = 0
    for index, cell in enumerate(cells[:end]):
        assert "hide-cell" not in tags(cell) or cell.source not in hidden, (
            f"a solution before the end:\n{cell.source}"
        )
        assert not (cell.cell_type == "markdown" and cell.source.startswith("**Solution"))
        assert ":::{dropdown} Solution" not in cell.source
        if prompts_in(cell):
            prompts += 1
            assert len(prompts_in(cell)) == 1, f"two prompts in one cell:\n{cell.source}"
            # The prompt's own starter code and text may come first, then the cell.
            following = cells[index + 1 : end]
            turn = next(c for c in following if is_your_turn(c) or prompts_in(c))
            assert is_your_turn(turn), f"no 'your turn' cell after:\n{cell.source}"
    turns = [cell for cell in cells[:end] if is_your_turn(cell)]
    assert len(turns) == max(prompts, 1)  # one for a section of one unnumbered exercise
    if not prompts:
        assert not is_your_turn(cells[cells.index(turns[0]) - 1])
    for turn in turns:  # blank: a comment only, nothing that runs
        assert all(line.startswith("#") for line in turn.source.split("\n"))

    moved = [cell.source for cell in cells[end:] if cell.cell_type == "code"]
    assert moved == hidden  # all of them, in their order
    assert hidden, "an Exercises section without a solution the build checks"


def test_a_chapter_without_exercises_is_unchanged():
    page = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("## Background\n\n**1. Not an exercise.**"),
            nbformat.v4.new_code_cell("print(1)", metadata={"tags": ["hide-cell"]}),
        ]
    )
    before = [dict(cell) for cell in page.cells]
    assert [dict(cell) for cell in practice_notebook(page).cells] == before


def test_prompt_like_lines_inside_a_solution_or_code_fence_start_nothing():
    text = (
        "Text before.\n\n## Exercises\n\n"
        "1. **Add.** Two and two.\n"
        "2. **Multiply.** Then:\n\n"
        "   ```python\n**3. not a prompt**\n   ```\n\n"
        "::::{dropdown} Solution notes\n:open:\n**4. not a prompt either**\n\n"
        ":::{note}\nNested.\n:::\n::::\n\n"
        "### Going further\n\nPlain text.\n\n## In short\n\nDone."
    )
    page = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])
    cells = practice_notebook(page).cells
    sources = [cell.source for cell in cells]
    assert sources[0] == "Text before."
    assert [cell.source for cell in cells if is_your_turn(cell)] == [
        "# Your turn: exercise 1.",
        "# Your turn: exercise 2.",
    ]
    further = next(i for i, source in enumerate(sources) if source.startswith("### Going"))
    assert sources.index("# Your turn: exercise 2.") == further - 1
    second = next(source for source in sources if source.startswith("2. **Multiply"))
    assert "**3. not a prompt**" in second
    notes = sources[-1]
    assert notes.startswith("**Solution notes**") and ":open:" not in notes
    assert ":::{note}\nNested.\n:::" in notes and not notes.endswith("::::")
    assert sources[-2] == "### Exercises 1 to 2"
    assert sources.index("## In short\n\nDone.") < sources.index(sources[-3])


def test_starter_code_stays_in_place_and_the_empty_cell_follows_it():
    page = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("## Exercises\n\n**1. Build it.** Start from:"),
            nbformat.v4.new_code_cell("given = 1"),
            nbformat.v4.new_markdown_cell("Then add one."),
            nbformat.v4.new_code_cell("print(given + 1)", metadata={"tags": ["hide-cell"]}),
        ]
    )
    sources = [cell.source for cell in practice_notebook(page).cells]
    assert sources[2:6] == [
        "**1. Build it.** Start from:",
        "given = 1",
        "Then add one.",
        "# Your turn: exercise 1.",
    ]
    assert sources[-2:] == ["### Exercise 1", "print(given + 1)"]
