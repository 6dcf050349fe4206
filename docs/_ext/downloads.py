"""Make every download from the site run for a reader who has only the download.

A reader downloads a chapter or a gallery example and runs it in Jupyter, Colab or a
terminal, where the package it imports is not installed yet. So every download says
how to get the package, at the version the site was built with, and checks it:

* Chapters are offered as ``.ipynb`` (the notebook myst-nb executed during this build):
  sphinx-book-theme lists a page's notebook only when launch buttons are configured,
  so this extension copies it next to the page sources and points the theme's download
  menu at it. Its first cell is the :func:`install_cell`. A cell tagged ``site-only``
  (one that reads a file kept with the site, such as saved benchmark results) becomes a
  short note in the download, because the reader has only the notebook. Each exercise
  is followed by an empty "your turn" cell, and the solutions move to the notebook's
  end (:func:`exercises.practice_notebook`).
* sphinx-gallery's notebooks get the same first cell (``first_notebook_cell``, set in
  ``conf.py`` from :func:`install_cell`).
* sphinx-gallery's ``.py`` downloads, alone and in the zips, start with a comment giving
  the same command, and check the version right after their docstring
  (:func:`with_install_header`).

None of this appears on the rendered pages, which run against the package the build
installed. ``nox -s downloads`` runs every download in a fresh environment that has
only the built wheel, as a reader would.
"""

from __future__ import annotations

import ast
import re
import shutil
import zipfile
from pathlib import Path

import nbformat
from addresses import of  # docs/_ext, on the path as Sphinx loads the extensions
from exercises import practice_notebook  # docs/_ext, as Sphinx loads it
from sphinx.application import Sphinx

from attention._version import DISTRIBUTION

GALLERY = "auto_gallery"  # conf.py's gallery_dirs: where the scripts' pages are

# The package's extras a download needs: matplotlib always (``plot``), and Hugging Face
# transformers (``transformers``) where an example compares with its modules.
IMPORTS_NEEDING_EXTRA = {"transformers": "transformers"}


def extras_for(source: str) -> tuple[str, ...]:
    """The extras to install for code that imports ``source``'s modules.

    >>> extras_for("import torch")
    ('plot',)
    >>> extras_for("from transformers import LlamaConfig")
    ('plot', 'transformers')
    """
    imported = set(re.findall(r"^\s*(?:from|import)\s+(\w+)", source, re.MULTILINE))
    needed = [extra for module, extra in IMPORTS_NEEDING_EXTRA.items() if module in imported]
    return ("plot", *needed)


def requirement(version: str, extras: tuple[str, ...] = ("plot",)) -> str:
    """What to ``pip install`` for the package at ``version``, with its extras."""
    return f"{DISTRIBUTION}[{','.join(extras)}]=={version}"


def install_cell(version: str, extras: tuple[str, ...] = ("plot",), page: str | None = None) -> str:
    """The first cell of every downloaded notebook: install, import, check the version.

    ``page`` is the hosted address of the page the notebook comes from, named first.

    >>> print(install_cell("1.2.3", page="https://ada.github.io/attention/x.html"))
    # From https://ada.github.io/attention/x.html
    # The package these examples run on (import name: attention); pip skips it if
    # it is installed already.
    %pip install --quiet "attention-step-by-step[plot]==1.2.3"
    import attention
    <BLANKLINE>
    attention.check_version("1.2.3")
    """
    return (
        (f"# From {page}\n" if page else "")
        + "# The package these examples run on (import name: attention); pip skips it if\n"
        "# it is installed already.\n"
        f'%pip install --quiet "{requirement(version, extras)}"\n'
        "import attention\n"
        "\n"
        f'attention.check_version("{version}")'
    )


def with_install_header(script: str, version: str, page: str | None = None) -> str:
    """A gallery script as downloaded: the install command first, the version check next.

    ``page`` is the hosted address of the script's page, named first.

    >>> page = "https://ada.github.io/attention/auto_gallery/plot_x.html"
    >>> print(with_install_header("'Title.'\\n\\nimport torch\\n", "1.2.3", page))
    # From https://ada.github.io/attention/auto_gallery/plot_x.html
    # Runs on attention-step-by-step 1.2.3 (import name: attention). Install it with
    #     pip install "attention-step-by-step[plot]==1.2.3"
    'Title.'
    <BLANKLINE>
    import attention
    <BLANKLINE>
    attention.check_version("1.2.3")  # prints a line if you have another version
    <BLANKLINE>
    import torch
    <BLANKLINE>
    """
    tree = ast.parse(script)
    docstring = ast.get_docstring(tree, clean=False) is not None
    after = tree.body[0].end_lineno if docstring else 0
    lines = script.splitlines()
    header = [
        *([f"# From {page}"] if page else []),
        f"# Runs on {DISTRIBUTION} {version} (import name: attention). Install it with",
        f'#     pip install "{requirement(version, extras_for(script))}"',
    ]
    check = [
        "import attention",
        "",
        f'attention.check_version("{version}")  # prints a line if you have another version',
        "",
    ]
    body = lines[after:]
    while body and not body[0].strip():
        body.pop(0)
    return "\n".join([*header, *lines[:after], "", *check, *body]) + "\n"


SITE_ONLY = "site-only"
SITE_ONLY_NOTE = (
    "*On the site, a cell here reads a file that is kept with the site, not with this "
    "notebook, and shows what it holds. See the page for its output.*\n\n"
    "```python\n{source}\n```"
)


def for_download(
    notebook: nbformat.NotebookNode, version: str, page: str | None = None
) -> nbformat.NotebookNode:
    """The executed notebook as a reader downloads it.

    The install cell comes first (naming ``page``, the hosted address of the page it
    comes from), each ``site-only`` cell becomes a note that shows its code without
    running it, and the exercises get their "your turn" cells, with the solutions at
    the end (:func:`exercises.practice_notebook`).

    >>> page = nbformat.v4.new_notebook(cells=[
    ...     nbformat.v4.new_code_cell("print(1)"),
    ...     nbformat.v4.new_code_cell("load()", metadata={"tags": ["site-only"]}),
    ... ])
    >>> [cell.cell_type for cell in for_download(page, "1.0").cells]
    ['code', 'code', 'markdown']
    """
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    cells = [nbformat.v4.new_code_cell(install_cell(version, extras_for(code), page))]
    for cell in practice_notebook(notebook).cells:
        if SITE_ONLY in cell.get("metadata", {}).get("tags", []):
            cell = nbformat.v4.new_markdown_cell(SITE_ONLY_NOTE.format(source=cell.source))
        cells.append(cell)
    for index, cell in enumerate(cells):
        cell.id = f"cell-{index}"  # unique ids, as nbformat 4.5 requires
    notebook.cells = cells
    return notebook


def executed_notebook(app: Sphinx, pagename: str) -> Path:
    """Where myst-nb saved the page's executed notebook."""
    return Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"


def add_ipynb(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Offer the page's notebook in the theme's download menu (written by write_ipynb)."""
    if (
        doctree is not None
        and executed_notebook(app, pagename).exists()
        and app.builder.name == "html"
    ):
        context["ipynb_source"] = f"{pagename}.ipynb"


def write_ipynb(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """Write the notebook a reader downloads, after the theme's launch buttons, which copy
    the executed notebook, as it is, to the same place."""
    executed = executed_notebook(app, pagename)
    if doctree is None or not executed.exists() or app.builder.name != "html":
        return  # the site's pages offer notebooks; the book (nox -s book) does not
    page = of(app.config).page(pagename)
    notebook = for_download(nbformat.read(executed, as_version=4), app.config.release, page)
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)


def add_script_headers(app: Sphinx, exception: Exception | None) -> None:
    """Rewrite the gallery's ``.py`` downloads, and the zip of them, with the header."""
    downloads = Path(app.outdir) / "_downloads"
    if exception is not None or not downloads.is_dir():
        return
    version, where = app.config.release, of(app.config)

    def page(path: Path) -> str:
        return where.page(f"{GALLERY}/{Path(path).stem}")

    for script in downloads.glob("*/plot_*.py"):
        text = with_install_header(script.read_text("utf-8"), version, page(script))
        script.write_text(text, "utf-8")
    # sphinx-gallery gives every notebook the same first cell (conf.py); this one names
    # its page, and the transformers extra where the notebook needs it.
    for path in downloads.glob("*/plot_*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        code = "\n".join(cell.source for cell in notebook.cells[1:] if cell.cell_type == "code")
        notebook.cells[0].source = install_cell(version, extras_for(code), page(path))
        nbformat.write(notebook, path)
    for archive in downloads.glob("*/*.zip"):  # each example's zip, and the gallery's
        rewritten = archive.with_suffix(".tmp")
        with zipfile.ZipFile(archive) as old, zipfile.ZipFile(rewritten, "w") as new:
            for member in old.infolist():
                data = old.read(member)
                if Path(member.filename).match("plot_*.py"):
                    text = with_install_header(data.decode("utf-8"), version, page(member.filename))
                    data = text.encode("utf-8")
                new.writestr(member, data, compress_type=zipfile.ZIP_DEFLATED)
        shutil.move(rewritten, archive)


def setup(app: Sphinx) -> dict:
    # Before the theme builds its header buttons (priority 500).
    app.connect("html-page-context", add_ipynb, priority=400)
    app.connect("html-page-context", write_ipynb, priority=520)  # after the theme's (501)
    app.connect("build-finished", add_script_headers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
