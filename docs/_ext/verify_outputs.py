"""Fail the docs build when a page prints something its source does not expect.

**Chapters.** Every code cell of a chapter that prints text carries the expected
output in its metadata, next to the code::

    ```{code-cell} ipython3
    ---
    expect: |
      tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
    ---
    scores_for_query(INPUTS[1], INPUTS)
    ```

myst-nb executes the page and writes the executed notebook to ``jupyter_execute/``;
right after that (Sphinx's ``doctree-read`` event) this extension compares each
cell's real text output (stdout and the value of the last expression, not figures)
with its ``expect``.

**Gallery scripts** (:mod:`verify_gallery`) write the expected output as a comment
right after the code that prints it, and are checked the same way.

**Prose.** A number written with two or more decimals in a page's text restates a
computed value, so it must be one the page printed (see :func:`printed_values.unprinted`).

Outputs are compared number by number (:mod:`printed_values`): the text around the
numbers must match, each number only to 1.5 units in its last printed digit, so the
last-bit differences between CPUs do not fail the build. A difference, a printing
cell without ``expect``, an ``expect`` on a cell that prints nothing, or a number in
the prose that the page never printed is a warning naming the file and line, and
``-W`` turns it into a failed build. A cell whose output legitimately differs between
runs (a dropout pattern) says why with ``unchecked: <reason>`` instead, and checks the
properties that must hold with ``assert`` in its own code.

The reader sees the real output of the build; the source holds the expected value.

**Another CPU.** With ``ATTENTION_OTHER_CPU`` set (``nox -s docs-other-cpu``), every
output that matches is compared again as another CPU may print it
(:func:`printed_values.shifted`): each printed float one unit of its last digit up,
then down, and a whole number ``1.`` as ``1.0001`` and ``0.9999``. So an expected
value that passes only because this machine's last digit happens to agree with it is
reported, while every expectation written as this machine prints it passes. (The
prose is checked as without it: see docs/contributing.md.)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from docutils import nodes
from printed_values import explain, normalise, numbers, printed_text, shifted, unprinted
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Set (to anything but the empty string) to check as on another CPU: nox -s docs-other-cpu.
OTHER_CPU = "ATTENTION_OTHER_CPU"
#: How another CPU may print what this one printed: its last digits one unit away.
ANOTHER_CPU = "on another CPU (every printed float one unit up or down in its last digit)"


def other_cpus() -> tuple[int, ...]:
    """The shifts of the last printed digit to check besides none: (1, -1) with
    ``ATTENTION_OTHER_CPU`` set, else none."""
    return (1, -1) if os.environ.get(OTHER_CPU) else ()


@dataclass
class Tally:
    """What one page or script had checked, and how many problems were found."""

    outputs: int = 0
    values: int = 0
    prose: int = 0
    problems: list[str] = field(default_factory=list)


def source_line(source_lines: list[str], cell_source: str, start: int) -> int:
    """1-based line of the cell's first code line in the page, searching from ``start``."""
    first = next((line for line in cell_source.splitlines() if line.strip()), None)
    if first is None:
        return start + 1
    for number in range(start, len(source_lines)):
        if source_lines[number].rstrip() == first.rstrip():
            return number + 1
    return start + 1


def check_output(
    tally: Tally, what: str, actual: str, expect: str | None, unchecked: str | None, warn
) -> None:
    """Compare one cell's or code block's printed text with what its source expects."""
    if unchecked is not None:
        if expect is not None:
            warn(f"{what} has both an expected output and 'unchecked'")
        return
    if expect is None:
        if actual:
            warn(f"{what} prints output but has no expected output; it printed:\n{indent(actual)}")
        return
    expected = normalise(expect)
    if expected and not actual:
        warn(f"{what} expects output but printed nothing")
        return
    tally.outputs += 1
    tally.values += len(numbers(expected))
    problem = explain(expected, actual)
    if problem:
        warn(f"{what} printed something other than its expected output: {problem}")
        return
    for units in other_cpus():
        problem = explain(expected, shifted(actual, units))
        if problem:
            where = f"its expected output {ANOTHER_CPU}"
            warn(f"{what} would print something other than {where}: {problem}")
            return


def check_notebook(docname: str, source: Path, executed: Path) -> Tally:
    """Warn about every cell whose printed output differs from its ``expect``."""
    notebook = nbformat.read(executed, as_version=4)
    source_text = source.read_text(encoding="utf-8")
    source_lines = source_text.splitlines()
    tally, line, printed = Tally(), 0, []
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for index, cell in enumerate(code_cells, start=1):
        line = source_line(source_lines, cell.source, line)
        location = (docname, line)

        def warn(message: str, location: tuple[str, int] = location) -> None:
            logger.warning(message, location=location)
            tally.problems.append(message)

        error = next((out for out in cell.get("outputs", []) if out.output_type == "error"), None)
        if error is not None:  # the cells after it did not run: nothing more to compare
            rest = ""
            if index < len(code_cells):
                later = (
                    f"cell {index + 1}" if index + 1 == len(code_cells) else "the cells after it"
                )
                rest = f"; {later} did not run"
            warn(f"code cell {index} raised {error.ename}: {error.evalue}{rest}")
            break

        for problem in figure_problems(cell, index):
            warn(problem)
        actual = printed_text(cell)
        printed.append(actual)
        meta = cell.metadata
        check_output(
            tally, f"code cell {index}", actual, meta.get("expect"), meta.get("unchecked"), warn
        )
    else:
        line = len(source_lines) + 1
    # Only the text above the last cell that ran: later text may restate what never ran.
    prose = [(number, text) for number, text in prose_lines(source_text) if number < line]
    check_prose(tally, prose, printed, lambda line: (docname, line))
    return tally


def check_prose(tally: Tally, lines: list[tuple[int, str]], printed: list[str], where) -> None:
    """Every number with two or more decimals in the prose must be one the page printed."""
    values = [number.text for text in printed for number in numbers(text)]
    for line, text in lines:
        found, missing = unprinted(text, values)
        tally.prose += found
        for number in missing:
            message = (
                f"the prose says {number}, but the page printed no value within 1.5 units "
                "of its last digit; restate a printed value (or round it), or print the value"
            )
            logger.warning(message, location=where(line))
            tally.problems.append(message)


FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def prose_lines(markdown: str) -> list[tuple[int, str]]:
    """The lines of a MyST page that a reader reads as text: no front matter, no code."""
    lines = markdown.splitlines()
    prose, fence, start = [], None, 0
    if lines and lines[0].strip() == "---":
        start = lines.index("---", 1) + 1
    for number, line in enumerate(lines[start:], start=start + 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            prose.append((number, line))
    return prose


def figure_problems(cell: nbformat.NotebookNode, index: int) -> list[str]:
    """Every figure needs alt text, and a cell that promises a figure must draw one."""
    images = sum(
        1
        for output in cell.get("outputs", [])
        if output.output_type in ("display_data", "execute_result")
        and any(kind.startswith("image/") for kind in output.get("data", {}))
    )
    alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
    if images and not alt:
        return [
            f"code cell {index} draws a figure without alt text; add mystnb: image: alt: ... "
            "to its metadata"
        ]
    if alt and not images:
        return [f"code cell {index} has alt text but drew no figure (end the cell with plt.show())"]
    return []


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines()) or "  (nothing)"


def record(app: Sphinx, name: str, tally: Tally) -> None:
    if not hasattr(app.env, "verified_outputs"):
        app.env.verified_outputs = {}
    app.env.verified_outputs[name] = tally


def on_doctree_read(app: Sphinx, doctree) -> None:
    docname = app.env.docname
    source = Path(app.env.doc2path(docname))
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    if source.suffix != ".md" or not executed.exists():
        return
    join_printed_chunks(doctree)
    record(app, docname, check_notebook(docname, source, executed))


def on_env_merge_info(app: Sphinx, env, docnames, other) -> None:
    # Parallel builds read pages in worker processes; collect their results.
    if not hasattr(env, "verified_outputs"):
        env.verified_outputs = {}
    env.verified_outputs.update(getattr(other, "verified_outputs", {}))


def on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    tallies = getattr(app.env, "verified_outputs", {})
    if exception is None and tallies:
        total = Tally()
        for tally in tallies.values():
            total.outputs += tally.outputs
            total.values += tally.values
            total.prose += tally.prose
        failed = sum(1 for tally in tallies.values() if tally.problems)
        logger.info(
            "verify_outputs: %d pages and scripts; %d printed outputs (%d numbers) and %d "
            "numbers in the prose checked; %d with problems",
            len(tallies),
            total.outputs,
            total.values,
            total.prose,
            failed,
        )


def is_printed_block(node: nodes.Node) -> bool:
    """Whether ``node`` is a block of a cell's printed text (stdout) on a myst-nb page."""
    return isinstance(node, nodes.literal_block) and {"output", "stream"} <= set(node["classes"])


def join_printed_chunks(doctree: nodes.document) -> int:
    """Show the text a cell printed as one block, joined exactly; return how many were joined.

    The kernel sends what a cell prints in chunks, whenever its output buffer is
    flushed (every 0.2 s while the cell runs), and myst-nb renders one block per chunk.
    Its own merging (``nb_merge_streams``) would join them, but myst-nb 1.4 does so by
    rewriting the notebook's outputs in place (stripping and adding newlines), and then
    saves that notebook: the one this extension checks and readers download repeated
    the later chunks' lines, and a line split between two chunks was shown broken in
    two. So ``conf.py`` leaves it off, the saved notebook keeps the kernel's chunks as
    they came, and the page's blocks are joined here, on Sphinx's ``doctree-read``.
    """
    joined = 0
    for block in list(doctree.findall(is_printed_block)):
        parent = block.parent
        after = parent.index(block) + 1
        if after == len(parent) or not is_printed_block(parent[after]):
            continue
        following = parent[after]
        text = block.astext() + following.astext()
        following.rawsource = text
        following.children = []
        following += nodes.Text(text)
        parent.remove(block)
        joined += 1
    return joined


def on_config_inited(app: Sphinx, config) -> None:
    if config.nb_merge_streams:
        logger.warning(
            "verify_outputs: nb_merge_streams makes myst-nb 1.4 rewrite the outputs of the "
            "notebook it saves (see verify_outputs.join_printed_chunks); leave it off, this "
            "extension joins a cell's printed chunks on the page"
        )


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    app.connect("config-inited", on_config_inited)
    app.connect("doctree-read", on_doctree_read)
    app.connect("env-merge-info", on_env_merge_info)
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
