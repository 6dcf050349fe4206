"""Exercises a reader practises on, in the notebooks the site offers for download.

On the site, each exercise's solution sits right under its prompt, collapsed: its
notes in a ``{dropdown}`` whose title starts with "Solution", its code in cells tagged
``hide-cell``. A notebook has no collapsed boxes, so a reader who downloads a chapter
would see every answer before trying. :func:`practice_notebook` rearranges the
notebook's "Exercises" section (the part under a ``## Exercises`` heading, up to the
next heading of its level or above):

* after each prompt (a paragraph that opens with a bold number, ``**2. Title.**``, or
  a list item ``2. **Title.**``, with the text and visible code cells that follow it)
  comes an empty "your turn" code cell, tagged ``your-turn``, holding only a comment;
  a section of one exercise without a number (``## Exercise: spot the bug``) gets
  one, before its solution;
* the solutions (the "Solution" dropdowns and the ``hide-cell`` code cells of the
  section) move, in their order, to a "Solutions" section at the end of the notebook.

The solutions stay in the same notebook rather than a second one beside it: their code
uses the chapter's earlier cells (its inputs, its modules, its helper functions), so a
solutions notebook would have to repeat the whole chapter, or could not run alone.
Moved to the end, they still run in order, after everything they need, and
``nox -s downloads`` checks that they print what the page shows.
"""

from __future__ import annotations

import re

import nbformat

YOUR_TURN = "your-turn"
SOLUTION_CODE = "hide-cell"  # an exercise's code cell hidden on the page is its solution

SECTION = re.compile(r"^##\s+Exercises?\b")
SECTION_START = re.compile(r"^##\s+Exercises?\b", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6})\s")
PROMPT = re.compile(r"^(?:\*\*(\d+)\.|(\d+)\.\s+\*\*)")
FENCE = re.compile(r"^\s*(`{3,}|:{3,})")  # indented in a list item too
SOLUTION_DROPDOWN = re.compile(r"^(:{3,})\{dropdown\}\s*(Solution.*)$")
DIRECTIVE_OPTION = re.compile(r"^:[\w-]+:")

INTRODUCTION = (
    "*In this notebook, each exercise is followed by an empty cell for your code, and "
    "the solutions are at the end. On the site, each solution is collapsed under its "
    "exercise.*"
)
SOLUTIONS_HEADING = (
    "## Solutions\n\n"
    "The solutions of the exercises above, in their order, moved here so that you can "
    "try each one first."
)


def your_turn_cell(number: str) -> nbformat.NotebookNode:
    """The empty cell a reader writes an exercise's answer in."""
    return nbformat.v4.new_code_cell(
        f"# Your turn: exercise {number}.", metadata={"tags": [YOUR_TURN]}
    )


def is_solution_code(cell: nbformat.NotebookNode) -> bool:
    """Whether a code cell of an Exercises section is a solution (hidden on the page)."""
    return cell.cell_type == "code" and SOLUTION_CODE in cell.get("metadata", {}).get("tags", [])


def solution_as_text(lines: list[str]) -> str:
    """A "Solution" dropdown as plain Markdown: its title in bold, then its body.

    >>> print(solution_as_text([":::{dropdown} Solution notes", ":open:", "Why.", ":::"]))
    **Solution notes**
    <BLANKLINE>
    Why.
    """
    title = SOLUTION_DROPDOWN.match(lines[0]).group(2)  # type: ignore[union-attr]
    body = lines[1:-1]
    while body and DIRECTIVE_OPTION.match(body[0]):
        body.pop(0)
    return f"**{title.strip()}**\n\n" + "\n".join(body).strip("\n")


def pieces(markdown: str) -> list[tuple[str, str, str]]:
    """Split an Exercises section's Markdown into ``(kind, text, number)`` pieces.

    ``kind`` is ``"prompt"`` (from a prompt's first line up to the next prompt, solution
    or heading; ``number`` is the exercise's), ``"solution"`` (a whole "Solution"
    dropdown) or ``"text"`` (anything else). Lines inside a fence (code, a directive)
    never start a piece.

    >>> text = "**1. Add.** Two and two.\\n\\n:::{dropdown} Solution notes\\nFour.\\n:::\\n"
    >>> [(kind, number) for kind, _, number in pieces(text)]
    [('prompt', '1'), ('solution', '')]
    """
    found: list[tuple[str, list[str], str]] = []
    fence: str | None = None  # the fence we are inside, closed by the same marks
    solution_fence: str | None = None
    for line in markdown.split("\n"):
        if solution_fence is not None:
            found[-1][1].append(line)
            if line.strip() == solution_fence:
                solution_fence = None
                found.append(("text", [], ""))
            continue
        if fence is None:
            dropdown = SOLUTION_DROPDOWN.match(line)
            prompt = PROMPT.match(line)
            if dropdown:
                solution_fence = dropdown.group(1)
                found.append(("solution", [line], ""))
                continue
            if prompt:
                found.append(("prompt", [line], prompt.group(1) or prompt.group(2)))
                continue
            if HEADING.match(line):
                found.append(("text", [line], ""))
                continue
            opening = FENCE.match(line)
            if opening:
                fence = opening.group(1)
        elif line.strip() == fence:
            fence = None
        if not found:
            found.append(("text", [], ""))
        found[-1][1].append(line)
    return [
        (kind, "\n".join(lines).strip("\n"), number)
        for kind, lines, number in found
        if "\n".join(lines).strip()
    ]


def split_at_section(markdown: str) -> tuple[str, str, str]:
    """``markdown`` cut into what comes before an Exercises section, the section, and
    what follows it (from the next heading of level 2 or above); the section is empty
    where the cell has no start of one.

    >>> split_at_section("Intro.\\n## Exercises\\n**1. A.** B.\\n## In short\\nC.")
    ('Intro.', '## Exercises\\n**1. A.** B.', '## In short\\nC.')
    """
    lines = markdown.split("\n")
    start = next((i for i, line in enumerate(lines) if SECTION.match(line)), None)
    if start is None:
        return markdown, "", ""
    stop = section_end(lines[start + 1 :])
    stop = len(lines) if stop is None else start + 1 + stop
    return "\n".join(lines[:start]), "\n".join(lines[start:stop]), "\n".join(lines[stop:])


def section_end(lines: list[str]) -> int | None:
    """The index of the first heading of level 1 or 2 in ``lines``, outside fences."""
    fence = None
    for index, line in enumerate(lines):
        if fence is None:
            heading = HEADING.match(line)
            if heading and len(heading.group(1)) <= 2:
                return index
            opening = FENCE.match(line)
            if opening:
                fence = opening.group(1)
        elif line.strip() == fence:
            fence = None
    return None


def practice_notebook(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``notebook`` with a "your turn" cell after each exercise and the solutions last.

    Notebooks without an Exercises section come back unchanged.

    Examples
    --------
    >>> page = nbformat.v4.new_notebook(cells=[
    ...     nbformat.v4.new_markdown_cell("## Exercises\\n\\n**1. Add.** Two and two."),
    ...     nbformat.v4.new_code_cell("print(2 + 2)", metadata={"tags": ["hide-cell"]}),
    ...     nbformat.v4.new_markdown_cell("**2. Why?**\\n\\n## In short\\n\\nFour."),
    ... ])
    >>> for cell in practice_notebook(page).cells:
    ...     print(cell.cell_type, repr(cell.source.split("\\n")[0][:30]))
    markdown '## Exercises'
    markdown '*In this notebook, each exerci'
    markdown '**1. Add.** Two and two.'
    code '# Your turn: exercise 1.'
    markdown '**2. Why?**'
    code '# Your turn: exercise 2.'
    markdown '## In short'
    markdown '## Solutions'
    markdown '### Exercise 1'
    code 'print(2 + 2)'
    """
    cells: list[nbformat.NotebookNode] = []
    solutions: list[nbformat.NotebookNode] = []
    inside = False
    waiting: str | None = None  # the prompt whose "your turn" cell is still to come
    since_last_solution: list[str] = []  # the prompts the next solutions answer
    unnumbered = False  # in a section with no numbered prompt so far

    def markdown(text: str) -> None:
        if text.strip():
            cells.append(nbformat.v4.new_markdown_cell(text.strip("\n")))

    def close_prompt() -> None:
        nonlocal waiting
        if waiting is not None:
            cells.append(your_turn_cell(waiting))
            waiting = None

    def add_solution(cell: nbformat.NotebookNode) -> None:
        nonlocal waiting, unnumbered
        if unnumbered:  # a section of one exercise, its prompt the text under its heading
            waiting, unnumbered = "1", False
            since_last_solution.append("1")
        close_prompt()
        if since_last_solution:
            numbers = since_last_solution
            label = (
                f"### Exercise {numbers[0]}"
                if len(numbers) == 1
                else f"### Exercises {numbers[0]} to {numbers[-1]}"
            )
            solutions.append(nbformat.v4.new_markdown_cell(label))
            since_last_solution.clear()
        solutions.append(cell)

    def section(text: str) -> None:
        nonlocal waiting, unnumbered
        for kind, piece, number in pieces(text):
            if kind == "solution":
                add_solution(nbformat.v4.new_markdown_cell(solution_as_text(piece.split("\n"))))
            elif kind == "prompt":
                close_prompt()
                markdown(piece)
                waiting, unnumbered = number, False
                since_last_solution.append(number)
            else:
                if HEADING.match(piece):
                    close_prompt()
                markdown(piece)
                if SECTION.match(piece):
                    markdown(INTRODUCTION)
                    unnumbered = True

    found = False
    for cell in notebook.cells:
        if cell.cell_type == "code":
            if inside and is_solution_code(cell):
                add_solution(cell)
            else:
                cells.append(cell)
            continue
        if cell.cell_type != "markdown" or not (inside or SECTION_START.search(cell.source)):
            cells.append(cell)  # untouched, with its metadata
            continue
        found = True
        rest = cell.source
        while rest:
            if not inside:
                before, rest, after = split_at_section(rest)
                markdown(before)
                if not rest:
                    break
                inside = True
                rest = rest + ("\n" + after if after else "")
            lines = rest.split("\n")
            stop = section_end(lines[1:] if SECTION.match(lines[0]) else lines)
            if stop is None:
                section(rest)
                break
            stop += 1 if SECTION.match(lines[0]) else 0
            section("\n".join(lines[:stop]))
            close_prompt()
            inside = unnumbered = False
            rest = "\n".join(lines[stop:])
    close_prompt()
    if not found:
        return notebook
    solved = [nbformat.v4.new_markdown_cell(SOLUTIONS_HEADING), *solutions] if solutions else []
    notebook.cells = [*cells, *solved]
    return notebook
