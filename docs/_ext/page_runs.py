"""The chapters' runs: jupyter-cache's parallel executor, before Sphinx reads them.

myst-nb shows each notebook page with the outputs of a run in a fresh Jupyter kernel.
Run when Sphinx reads them, the pages would go in Sphinx's chunks of pages, which put
most chapters in one process, one after another. So when the build starts
(``builder-inited``, before sphinx-gallery runs the scripts), :func:`run_pages` hands
every notebook page to jupyter-cache, myst-nb's cache (``nb_execution_mode =
"cache"``), and runs them with its own ``local-parallel`` executor, one kernel per
core, the longest pages first; each page's seconds go to the log. myst-nb then takes
each page's outputs from the cache as Sphinx reads it. A page that raised is not
cached: myst-nb runs it again and reports the error as always (``verify_outputs``
names the cell), and so would it any page the cache did not match.

**Every page runs on every build**: the cache is emptied first, unless
``page_runs_reuse`` is set (``nox -s docs -- --reuse``, ``nox -s docs-live``: a cache
keyed on the package, the pins and Python, :mod:`live_cache`), which runs only the
pages whose code is not in the cache.

**The saved notebook.** When myst-nb 1.4 takes a page from its cache, it renders the
cached outputs but saves the notebook it read, without them, to ``jupyter_execute/``,
where ``verify_outputs`` checks and ``downloads`` offers it. So right after myst-nb has
read a page (``doctree-read``, before ``verify_outputs``), :func:`restore_outputs` saves
the cached notebook there, merged into the page's (jupyter-cache's
``merge_match_into_notebook``). A saved notebook that has outputs is left alone.

**The kernels** inherit, from ``config-inited`` on, through documented settings only:

* an IPython folder of the build's own (``IPYTHONDIR``), made afresh each build, so
  that no startup file or profile in ``~/.ipython`` changes what a page prints;
* a quiet log: ipykernel 7.3 and later log "Kernel is running over TCP without
  encryption" as each kernel starts, true and of no use here (the build and its
  kernels talk over 127.0.0.1; myst-nb and jupyter-cache have no setting for IPC). The
  folder's ``ipython_kernel_config.py`` gives the kernel's log handler a filter,
  through ipykernel's ``logging_config``, that drops exactly that message; every other
  one still reaches the build log, and a reworded one comes back, visible;
* one job's share of the cores as threads (``OMP_NUM_THREADS``, at least 1), as joblib
  gives the gallery's workers. A value set in the environment is kept.
"""

from __future__ import annotations

import logging as stdlib_logging
import os
import shutil
import time
from pathlib import Path, PurePosixPath

import nbformat
from jupyter_cache import get_cache
from jupyter_cache.executors import load_executor
from myst_nb.core.read import is_myst_markdown_notebook
from sphinx.application import Sphinx
from sphinx.project import Project
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The executor's logger: its warnings (a page that raised) only, and multiprocessing's.
QUIET = stdlib_logging.getLogger("page_runs.jupyter_cache")
QUIET.setLevel(stdlib_logging.WARNING)

#: How jupyter-cache reads a MyST notebook: myst-nb's reader, as myst-nb registers it.
MYST_READER = {"name": "myst_nb_md", "type": "plugin"}

# The start of the message ipykernel logs when a kernel listens on TCP without CurveZMQ keys.
TCP_NOTICE = "Kernel is running over TCP without encryption"

KERNEL_CONFIG = f"""\
# Written by docs/_ext/page_runs.py for the kernels of the docs build only.
import logging


class WithoutTheTcpNotice(logging.Filter):
    def filter(self, record):
        return not record.getMessage().startswith({TCP_NOTICE!r})


c = get_config()  # noqa: F821 (given by the configuration loader)
c.IPKernelApp.logging_config = {{
    "filters": {{"without_tcp_notice": {{"()": WithoutTheTcpNotice}}}},
    "handlers": {{"console": {{"filters": ["without_tcp_notice"]}}}},
}}
"""


def ipython_dir(app: Sphinx) -> Path:
    """The build's own ``IPYTHONDIR``, beside its output folder."""
    return Path(app.outdir).parent / "ipython"


def threads_per_job(jobs: int) -> int:
    """Each of ``jobs`` side-by-side processes' share of the cores, at least 1.

    >>> threads_per_job(1) == (os.cpu_count() or 1)
    True
    """
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def on_config_inited(app: Sphinx, config) -> None:
    ipython = ipython_dir(app)
    shutil.rmtree(ipython, ignore_errors=True)  # nothing of an earlier build lingers
    profile = ipython / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text(KERNEL_CONFIG, encoding="utf-8")
    # The kernels inherit the environment, in the parallel readers' processes too.
    os.environ["IPYTHONDIR"] = str(ipython)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_job(app.parallel)))


def cache_folder(app: Sphinx) -> Path:
    """myst-nb's cache: ``nb_execution_cache_path``, else its default beside the output."""
    return Path(app.config.nb_execution_cache_path or Path(app.outdir).parent / ".jupyter_cache")


def notebook_pages(app: Sphinx) -> list[Path]:
    """Every page myst-nb reads as a notebook and executes, the longest first."""
    project = Project(app.srcdir, app.config.source_suffix)
    docnames = project.discover(app.config.exclude_patterns, app.config.include_patterns)
    paths = [Path(project.doc2path(docname, absolute=True)) for docname in docnames]
    excluded = app.config.nb_execution_excludepatterns
    pages = [
        path
        for path in paths
        if path.suffix == ".md"
        and is_myst_markdown_notebook(path.read_text(encoding="utf-8"))
        and not any(PurePosixPath(path.as_posix()).match(pattern) for pattern in excluded)
    ]
    # Longest first, the classic schedule for a pool; source size stands in for run time.
    return sorted(pages, key=lambda path: path.stat().st_size, reverse=True)


def run_pages(app: Sphinx) -> None:
    """Run, with jupyter-cache's parallel executor, every page that its cache lacks."""
    if app.config.nb_execution_mode != "cache":
        return
    folder = cache_folder(app)
    if not app.config.page_runs_reuse:
        shutil.rmtree(folder, ignore_errors=True)  # every page runs again
    start = time.perf_counter()
    cache = get_cache(folder)
    pages = [str(path) for path in notebook_pages(app)]
    for record in cache.list_project_records():
        if record.uri not in pages:  # a page that is gone, or no longer a notebook
            cache.remove_nb_from_project(record.pk)
    for page in pages:
        cache.add_nb_to_project(page, read_data=MYST_READER)
    if not cache.list_unexecuted():
        logger.info("page_runs: all %d notebook pages are in the cache", len(pages))
        return
    executor = load_executor("local-parallel", cache, logger=QUIET)
    result = executor.run_and_cache(timeout=app.config.nb_execution_timeout)
    for uri in result.succeeded:
        record = cache.get_cached_project_nb(uri)
        seconds = record.data.get("execution_seconds", 0.0) if record else 0.0
        logger.info("%s: ran in %.1f s", os.path.relpath(uri, app.srcdir), seconds)
    failed = [*result.excepted, *result.errored]
    logger.info(
        "page_runs: %d notebook pages ran in %.1f s, before the gallery's scripts%s%s",
        len(result.succeeded),
        time.perf_counter() - start,
        f", {len(pages) - len(result.succeeded) - len(failed)} unchanged"
        if app.config.page_runs_reuse
        else "",
        f"; left to myst-nb, having raised: {', '.join(map(os.path.basename, failed))}"
        if failed
        else "",
    )


def restore_outputs(app: Sphinx, doctree) -> None:
    """Save the outputs myst-nb took from its cache with the notebook it saved."""
    if app.config.nb_execution_mode != "cache":
        return
    saved = Path(app.outdir).parent / "jupyter_execute" / f"{app.env.docname}.ipynb"
    if not saved.exists():
        return
    notebook = nbformat.read(saved, as_version=4)
    if any(cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"):
        return  # myst-nb ran the page itself, or saved the outputs
    cache = get_cache(cache_folder(app))
    try:
        _, merged = cache.merge_match_into_notebook(notebook)
    except KeyError:
        return  # not in the cache: myst-nb ran it, and it printed nothing
    nbformat.write(merged, saved)


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    # Keep the cache between builds (reuse mode); by default it is emptied first.
    app.add_config_value("page_runs_reuse", False, "", types=[bool])
    app.connect("config-inited", on_config_inited, priority=300)
    # Before sphinx-gallery runs the scripts (its builder-inited, at priority 500).
    app.connect("builder-inited", run_pages, priority=450)
    # Before verify_outputs reads the saved notebook (priority 500).
    app.connect("doctree-read", restore_outputs, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
