"""Fail the docs build when a chapter prints something its source does not expect.

Every code cell of a chapter that prints text carries the expected output in its
metadata, next to the code::

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
with its ``expect``. A difference, a printing cell without ``expect``, or an
``expect`` on a cell that prints nothing is a warning naming the file and line, and
``-W`` turns it into a failed build. A cell whose output legitimately differs between
machines (a dropout pattern) says why with ``unchecked: <reason>`` instead, and checks
the properties that must hold with ``assert`` in its own code.

The reader sees the real output of the build; the source holds the expected value.
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path

import nbformat
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def printed_text(cell: nbformat.NotebookNode) -> str:
    """The text a reader sees under a code cell: streams and plain-text results."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream" and output.name == "stdout":
            parts.append(output.text)
        elif output.output_type == "execute_result":
            parts.append(output.data.get("text/plain", "") + "\n")
    return normalise("".join(parts))


def normalise(text: str) -> str:
    """Ignore trailing spaces on each line and blank lines at either end."""
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def source_line(source_lines: list[str], cell_source: str, start: int) -> int:
    """1-based line of the cell's first code line in the page, searching from ``start``."""
    first = next((line for line in cell_source.splitlines() if line.strip()), None)
    if first is None:
        return start + 1
    for number in range(start, len(source_lines)):
        if source_lines[number].rstrip() == first.rstrip():
            return number + 1
    return start + 1


def check_notebook(docname: str, source: Path, executed: Path) -> int:
    """Warn about every cell whose printed output differs from its ``expect``."""
    notebook = nbformat.read(executed, as_version=4)
    source_lines = source.read_text(encoding="utf-8").splitlines()
    problems, line = 0, 0
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for index, cell in enumerate(code_cells, start=1):
        line = source_line(source_lines, cell.source, line)
        location = (docname, line)
        problems += check_figures(cell, index, location)
        actual = printed_text(cell)
        expect, unchecked = cell.metadata.get("expect"), cell.metadata.get("unchecked")
        if unchecked is not None:
            if expect is not None:
                logger.warning(
                    "code cell %d has both 'expect' and 'unchecked'", index, location=location
                )
                problems += 1
            continue
        if expect is None:
            if actual:
                logger.warning(
                    "code cell %d prints output but its metadata has no 'expect'; it printed:\n%s",
                    index,
                    indent(actual),
                    location=location,
                )
                problems += 1
            continue
        expected = normalise(str(expect))
        if actual != expected:
            diff = "\n".join(
                difflib.unified_diff(
                    expected.splitlines(), actual.splitlines(), "expected", "printed", lineterm=""
                )
            )
            logger.warning(
                "code cell %d printed something other than its 'expect':\n%s",
                index,
                diff,
                location=location,
            )
            problems += 1
    return problems


def check_figures(cell: nbformat.NotebookNode, index: int, location: tuple[str, int]) -> int:
    """Every figure needs alt text, and a cell that promises a figure must draw one."""
    images = sum(
        1
        for output in cell.get("outputs", [])
        if output.output_type in ("display_data", "execute_result")
        and any(kind.startswith("image/") for kind in output.get("data", {}))
    )
    alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt")
    if images and not alt:
        logger.warning(
            "code cell %d draws a figure without alt text; add mystnb: image: alt: ... "
            "to its metadata",
            index,
            location=location,
        )
        return 1
    if alt and not images:
        logger.warning(
            "code cell %d has alt text but drew no figure (end the cell with plt.show())",
            index,
            location=location,
        )
        return 1
    return 0


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines()) or "  (nothing)"


def on_doctree_read(app: Sphinx, doctree) -> None:
    docname = app.env.docname
    source = Path(app.env.doc2path(docname))
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    if source.suffix != ".md" or not executed.exists():
        return
    if not hasattr(app.env, "verified_pages"):
        app.env.verified_pages = {}
    app.env.verified_pages[docname] = check_notebook(docname, source, executed)


def on_env_merge_info(app: Sphinx, env, docnames, other) -> None:
    # Parallel builds read pages in worker processes; collect their results.
    if not hasattr(env, "verified_pages"):
        env.verified_pages = {}
    env.verified_pages.update(getattr(other, "verified_pages", {}))


def on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    pages = getattr(app.env, "verified_pages", {})
    if exception is None and pages:
        failed = sum(1 for count in pages.values() if count)
        logger.info(
            "verify_outputs: checked the printed output of %d executed pages, %d with problems",
            len(pages),
            failed,
        )


def merge_streams(outputs: list) -> list:
    """One block per stream, its text exactly as the kernel sent it, on copies."""
    merged, streams = [], {}
    for output in outputs:
        if output["output_type"] == "stream" and output["name"] in streams:
            streams[output["name"]]["text"] += output["text"]
            continue
        output = copy.deepcopy(output)
        if output["output_type"] == "stream":
            streams[output["name"]] = output
        merged.append(output)
    return merged


def keep_saved_outputs_intact() -> None:
    """Replace myst-nb's merging of a cell's printed chunks with :func:`merge_streams`.

    To show one block per cell, myst-nb (1.4) merges the stream outputs it renders by
    appending the later chunks' text to the first chunk *in place* (adding a newline
    after each chunk), yet it saves the notebook with all the chunks. Whenever the
    kernel happened to send a cell's output in several pieces, the saved notebook,
    which this extension reads and readers download, repeated those lines, and a line
    split between two chunks was shown broken in two. Merging copies, without adding
    anything, fixes both.
    """
    from myst_nb.core import render

    if not hasattr(render, "coalesce_streams"):
        raise RuntimeError(
            "verify_outputs: myst_nb.core.render.coalesce_streams is gone; check whether "
            "the installed myst-nb still merges outputs in place and update this patch"
        )
    render.coalesce_streams = merge_streams


def setup(app: Sphinx) -> dict:
    keep_saved_outputs_intact()
    app.connect("doctree-read", on_doctree_read)
    app.connect("env-merge-info", on_env_merge_info)
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
