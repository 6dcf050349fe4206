"""Run chapters in a Jupyter kernel and check them as the docs build does, without a site.

``nox -s tests-latest`` runs the chapters that import transformers this way, against
the newest transformers the ``transformers`` extra allows, so that what a reader's
downloaded notebook meets there is seen here first::

    python docs/tools/run_chapters.py docs/chapters/13-latent-attention.md ...

A chapter fails where ``nox -s docs`` would fail it: a cell that raises, that writes
to stderr (a ``FutureWarning`` about a renamed argument, say: ``nb_output_stderr`` in
``conf.py``), or that prints other values than its ``expect``, number by number
(:func:`verify_outputs.check_notebook`). Each chapter runs in its own kernel, in its
own folder, as myst-nb runs it, with an IPython folder of its own (as ``page_runs.py``).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

# The checks are the docs build's own, in its extensions (docs/_ext).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
from verify_outputs import check_notebook

TIMEOUT_S = 300  # per cell, as nb_execution_timeout in conf.py


def stderr_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """A message for every code cell that wrote to stderr, with what it wrote."""
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    return [
        f"code cell {index} wrote to stderr:\n{output['text'].rstrip()}"
        for index, cell in enumerate(code_cells, start=1)
        for output in cell.get("outputs", [])
        if output["output_type"] == "stream" and output["name"] == "stderr"
    ]


def run_chapter(chapter: Path, work: Path) -> list[str]:
    """Execute ``chapter`` (a MyST notebook) and return what is wrong with it."""
    notebook = read_myst_markdown_notebook(chapter.read_text(encoding="utf-8"), path=chapter)
    # Over IPC, its sockets in ``work``: over TCP (Windows) the kernel warns that its
    # traffic is not encrypted.
    ipc = {"transport": "ipc", "ip": str(work / "kernel")} if os.name == "posix" else {}
    kernel = KernelManager(kernel_name="python3", **ipc)
    client = NotebookClient(
        notebook,
        timeout=TIMEOUT_S,
        km=kernel,
        resources={"metadata": {"path": str(chapter.parent)}},
    )
    try:
        # nbclient leaves a kernel manager it was given running, and its client's
        # channels open unless told (cleanup_kc): both are closed here.
        client.execute(cleanup_kc=True)
    except CellExecutionError:
        pass  # the error is in the cell's outputs; check_notebook names the cell
    finally:
        if kernel.has_kernel:
            kernel.shutdown_kernel()
    executed = work / f"{chapter.stem}.ipynb"
    nbformat.write(notebook, executed)
    return stderr_problems(notebook) + check_notebook(chapter.stem, chapter, executed).problems


def main(argv: list[str]) -> int:
    if not argv:
        sys.exit(__doc__)
    # As conf.py: transformers' import of tqdm warns on stderr in a kernel otherwise.
    os.environ["PYTHONWARNINGS"] = "ignore:IProgress not found"
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        # As page_runs.py: an IPython folder of its own, so that no startup file or profile
        # in ~/.ipython changes what a chapter prints.
        os.environ["IPYTHONDIR"] = str(Path(work) / "ipython")
        for chapter in map(Path, argv):
            start = time.perf_counter()
            problems = run_chapter(chapter.resolve(), Path(work))
            failed += bool(problems)
            status = "FAILED" if problems else "ok"
            print(f"{status:6} {time.perf_counter() - start:5.1f} s  {chapter}", flush=True)
            for problem in problems:
                print("    " + problem.replace("\n", "\n    "), flush=True)
    print(f"{len(argv) - failed} of {len(argv)} chapters ran and printed what they expect")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
