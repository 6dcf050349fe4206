"""Run the notebook pages as soon as the build starts, side by side with the gallery.

myst-nb runs a notebook page when Sphinx reads it, and sphinx-gallery runs every
script before Sphinx reads anything (at ``builder-inited``). So the scripts and the
pages ran one phase after the other, each leaving cores idle at its end, and Sphinx's
parallel reading, which hands out pages in alphabetical chunks, put the long chapters
on one core.

This extension starts the pages' kernels at ``builder-inited`` instead, just before
sphinx-gallery starts its scripts: as many at a time as ``sphinx-build -j`` asks for,
the longest page first, each in a fresh kernel started by nbclient (its documented
async API, in a thread of the extension's own). Each executed notebook goes into
myst-nb's documented cache (jupyter-cache, ``nb_execution_mode = "cache"``), where
myst-nb finds it when Sphinx reads the page; before reading begins
(``env-before-read-docs``) the extension waits for the last page. Reading then only
parses, and Sphinx's own chunks are fine.

**Every page still runs on every build.** The cache only carries a page from this
extension to myst-nb within one build: the extension empties it first, unless
``execute_ahead_keep`` is set (``nox -s docs-live`` sets it, with a cache keyed on the
package's source: :mod:`live_cache`), and then it runs only the pages not in the cache.

**The saved notebook.** When myst-nb 1.4 takes a page from its cache, it renders the
cached outputs but saves the notebook it read, without them, to ``jupyter_execute/``,
where ``verify_outputs`` checks and ``downloads`` offers it. So right after myst-nb
has read a page (``doctree-read``, before ``verify_outputs``), :func:`restore_outputs`
saves the cached notebook there, merged into the page's as myst-nb merges it
(jupyter-cache's ``merge_match_into_notebook``). A saved notebook that has outputs
(a page myst-nb ran itself) is left alone, so a myst-nb that saves the outputs
itself makes this a no-op.

A page that raises is not cached: myst-nb runs it again when it reads it, and reports
the error as it always does (and ``verify_outputs`` names the cell). Pages with
execution settings of their own (``mystnb`` or ``execution`` in their metadata, or an
``nb_execution_excludepatterns`` match), and every page if ``nb_kernel_rgx_aliases`` is
set, are left to myst-nb.

**On a myst-nb it does not know** (a release other than :data:`KNOWN_MYST_NB`, or one
without the reader this extension uses), it steps aside with a warning
(``execute_ahead.unknown_myst_nb``, which ``suppress_warnings`` can silence): the
pages run as plain myst-nb runs them, when Sphinx reads them, with
``nb_execution_mode = "force"`` in place of ``"cache"`` so that every page still runs
(``execute_ahead_keep`` keeps the cache mode, and myst-nb's own use of it).

List this extension after ``myst_nb`` (whose configuration it reads) and before
``sphinx_gallery.gen_gallery`` in ``conf.py``: handlers of the same event run in the
order their extensions were set up, and the pages must start before the scripts.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import importlib.metadata
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import kernel_fork
import nbformat
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from nbclient import NotebookClient
from sphinx.application import Sphinx
from sphinx.project import Project
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The myst-nb releases (major.minor) whose reader, environment attributes and cache
#: mode this extension is written against and tested with.
KNOWN_MYST_NB = ("1.4",)
#: The attribute set on the Sphinx application when the extension steps aside.
ASIDE = "_execute_ahead_aside"


def unknown_myst_nb() -> str | None:
    """Why the installed myst-nb is not one this extension knows; None if it is."""
    version = importlib.metadata.version("myst-nb")
    if not version.startswith(tuple(f"{known}." for known in KNOWN_MYST_NB)):
        return f"myst-nb {version} is not a release it knows ({', '.join(KNOWN_MYST_NB)})"
    try:
        reader = importlib.import_module("myst_nb.core.read")
    except ImportError:
        reader = None
    if not hasattr(reader, "create_nb_reader"):
        return f"myst-nb {version} has no myst_nb.core.read.create_nb_reader"
    return None


def step_aside_if_unknown(app: Sphinx, config) -> None:
    """On a myst-nb this extension does not know, leave every page to plain myst-nb."""
    reason = unknown_myst_nb()
    if reason is None:
        return
    setattr(app, ASIDE, True)
    forced = config.nb_execution_mode == "cache" and not config.execute_ahead_keep
    if forced:  # an emptied cache was what made every page run: force does it plainly
        config.nb_execution_mode = "force"
    logger.warning(
        "execute_ahead: %s; the pages run as plain myst-nb runs them, when Sphinx reads "
        "them, not ahead beside the gallery%s",
        reason,
        ' (nb_execution_mode = "force")' if forced else "",
        type="execute_ahead",
        subtype="unknown_myst_nb",
    )


@dataclass
class Page:
    """A notebook page to run: where it is, and the notebook myst-nb reads from it."""

    path: Path
    notebook: nbformat.NotebookNode
    seconds: float | None = None  # how long it ran; None if it raised
    error: str = ""


def own_settings(notebook: nbformat.NotebookNode, path: Path, nb_config) -> bool:
    """Whether myst-nb would run this page with settings of its own."""
    posix = PurePosixPath(path.as_posix())
    return (
        nb_config.metadata_key in notebook.metadata
        or "execution" in notebook.metadata
        or bool(nb_config.kernel_rgx_aliases)  # myst-nb renames the kernel first
        or any(posix.match(pattern) for pattern in nb_config.execution_excludepatterns)
    )


def notebook_pages(app: Sphinx) -> list[Page]:
    """Every page myst-nb will execute, read as myst-nb reads it, the longest first."""
    project = Project(app.srcdir, app.config.source_suffix)
    docnames = project.discover(app.config.exclude_patterns, app.config.include_patterns)
    create_nb_reader = importlib.import_module("myst_nb.core.read").create_nb_reader
    pages = []
    for docname in sorted(docnames):
        path = Path(project.doc2path(docname, absolute=True))
        text = path.read_text(encoding="utf-8")
        reader = create_nb_reader(str(path), app.env.myst_config, app.env.mystnb_config, text)
        if reader is None:
            continue
        notebook = reader.read(text)
        if not own_settings(notebook, path, app.env.mystnb_config):
            pages.append(Page(path, notebook))
    # Longest first, the classic schedule for a pool of workers; source size stands in
    # for run time.
    pages.sort(key=lambda page: page.path.stat().st_size, reverse=True)
    return pages


def imported_modules(pages: list[Page]) -> list[str]:
    """Every module the pages' code cells import by name, in the order first seen.

    ``import a.b`` gives ``a.b``; ``from a.b import c`` gives ``a.b`` (``c`` may be a
    name in it, not a module). Cells are read as IPython reads them (magics and all);
    a cell that is not Python is skipped, as its page will report.
    """
    from IPython.core.inputtransformer2 import TransformerManager

    transformer = TransformerManager()
    modules: dict[str, None] = {}
    for page in pages:
        for cell in page.notebook.cells:
            if cell.cell_type != "code":
                continue
            try:
                tree = ast.parse(transformer.transform_cell(cell.source))
            except SyntaxError:
                continue
            modules.update(dict.fromkeys(kernel_fork.modules_imported(tree)))
    return list(modules)


async def run_pages(pages: list[Page], jobs: int, timeout: int | None, kernel_manager=None) -> None:
    """Execute ``pages``, at most ``jobs`` at a time, each in a kernel of its own.

    ``kernel_manager``, if given, is the kernel manager class of each page's kernel (a
    forked kernel's: :meth:`kernel_fork.Zygote.kernel_manager_class`); otherwise
    nbclient starts the page's own kernelspec.
    """
    slots = asyncio.Semaphore(jobs)

    async def run(page: Page) -> None:
        async with slots:
            start = time.perf_counter()
            try:
                options = {"timeout": timeout, "record_timing": False}
                if kernel_manager is not None:
                    options["kernel_manager_class"] = kernel_manager
                    options["kernel_name"] = kernel_fork.Zygote.NAME
                    # nbclient gives only its python3 kernels a history in memory.
                    options["extra_arguments"] = ["--HistoryManager.hist_file=:memory:"]
                client = NotebookClient(page.notebook, **options)
                await client.async_execute(cwd=str(page.path.parent))
            except Exception as error:  # reported by myst-nb, which runs the page again
                page.error = f"{type(error).__name__}"
            else:
                page.seconds = time.perf_counter() - start

    await asyncio.gather(*(run(page) for page in pages))


class Ahead:
    """The pages being run in the background, and the cache they go into."""

    def __init__(self, app: Sphinx) -> None:
        nb_config = app.env.mystnb_config
        self.cache = get_cache(nb_config.execution_cache_path)
        pages = notebook_pages(app)
        self.pages = [page for page in pages if not self.cached(page.notebook)]
        self.unchanged = len(pages) - len(self.pages)  # only with execute_ahead_keep
        self.started = time.perf_counter()
        self.zygote = None
        self.problems: list[str] = []  # what the zygote reported, logged at the end
        if app.config.execute_ahead_fork and self.pages and kernel_fork.SUPPORTED:
            folder = Path(app.outdir).parent
            self.zygote = kernel_fork.Zygote(folder, imported_modules(self.pages))
        jobs = max(1, app.parallel)
        self.thread = threading.Thread(
            target=asyncio.run,
            args=(self.run(jobs, nb_config.execution_timeout),),
            name="execute_ahead",
            daemon=True,
        )
        self.thread.start()

    async def run(self, jobs: int, timeout: int | None) -> None:
        kernel_manager = None
        if self.zygote is not None:
            try:  # the zygote imports while the gallery's scripts start
                self.problems = self.zygote.wait()
                kernel_manager = self.zygote.kernel_manager_class()
            except RuntimeError as error:
                self.problems = [f"{error}; the pages ran in Jupyter's own kernels"]
        await run_pages(self.pages, jobs, timeout, kernel_manager)

    def cached(self, notebook: nbformat.NotebookNode) -> bool:
        try:
            self.cache.match_cache_notebook(notebook)
        except KeyError:
            return False
        return True

    def finish(self) -> None:
        """Wait for every page, and put those that ran to the end into the cache."""
        self.thread.join()
        if self.zygote is not None:
            self.zygote.stop()
        for problem in self.problems:
            logger.warning(
                "execute_ahead: the kernels' zygote: %s",
                problem,
                type="execute_ahead",
                subtype="zygote",
            )
        for page in self.pages:
            if page.seconds is None:
                continue
            data = {"execution_seconds": page.seconds, "executed_by": __name__}
            bundle = CacheBundleIn(page.notebook, str(page.path), data=data)
            self.cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True)
        ran = [page for page in self.pages if page.seconds is not None]
        raised = ", ".join(page.path.name for page in self.pages if page.seconds is None)
        logger.info(
            "execute_ahead: ran %d notebook pages in %.1f s, beside the gallery scripts "
            "(myst-nb's 'Using cached notebook' below: %s)%s",
            len(ran),
            time.perf_counter() - self.started,
            f"these runs, and {self.unchanged} unchanged from earlier builds"
            if self.unchanged
            else "these runs, not an earlier build's",
            f"; left to myst-nb, having raised: {raised}" if raised else "",
        )


def restore_outputs(app: Sphinx, doctree) -> None:
    """Save the outputs myst-nb took from the cache with the notebook it saved."""
    if app.config.nb_execution_mode != "cache" or getattr(app, ASIDE, False):
        return
    saved = Path(app.outdir).parent / "jupyter_execute" / f"{app.env.docname}.ipynb"
    if not saved.exists():
        return
    notebook = nbformat.read(saved, as_version=4)
    if any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"):
        return  # myst-nb ran the page itself, or saved the outputs
    cache = get_cache(app.env.mystnb_config.execution_cache_path)
    try:
        _, merged = cache.merge_match_into_notebook(notebook)
    except KeyError:
        return  # not in the cache: myst-nb ran it, and it printed nothing
    nbformat.write(merged, saved)


AHEAD = "_execute_ahead"


def start(app: Sphinx) -> None:
    if app.config.nb_execution_mode != "cache" or getattr(app, ASIDE, False):
        return  # myst-nb runs the pages itself, when it reads them
    folder = Path(app.env.mystnb_config.execution_cache_path)
    if not app.config.execute_ahead_keep:
        shutil.rmtree(folder, ignore_errors=True)  # every page runs again
    setattr(app, AHEAD, Ahead(app))


def finish(app: Sphinx, env, docnames: list[str]) -> None:
    ahead = getattr(app, AHEAD, None)
    if ahead is not None:
        setattr(app, AHEAD, None)
        ahead.finish()


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    # Keep the cache between builds (nox -s docs-live); by default it is emptied first.
    app.add_config_value("execute_ahead_keep", False, "", types=[bool])
    # Fork each page's kernel from one Python that has imported the pages' modules
    # (kernel_fork.py), where the platform allows it; False: Jupyter's own kernels.
    app.add_config_value("execute_ahead_fork", True, "", types=[bool])
    # Before myst-nb reads its configuration (builder-inited).
    app.connect("config-inited", step_aside_if_unknown)
    app.connect("builder-inited", start)
    app.connect("env-before-read-docs", finish)
    # Before verify_outputs reads the saved notebook (priority 500).
    app.connect("doctree-read", restore_outputs, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
