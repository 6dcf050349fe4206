"""The chapters' Jupyter kernels, and what a page taken from myst-nb's cache saves.

myst-nb runs each chapter in a fresh Jupyter kernel when Sphinx reads it (in Sphinx's
parallel readers under ``-j``), and logs how long it took ("Executed notebook in
12.34 seconds", naming the page). This extension sets up, through documented settings
only, what those kernels inherit when the build starts (``config-inited``):

* **An IPython folder of the build's own** (``IPYTHONDIR``), made afresh each build,
  so that no startup file or profile in ``~/.ipython`` changes what a page prints.
* **A quiet log.** ipykernel 7.3 and later log "Kernel is running over TCP without
  encryption" as each kernel starts: true, and of no use here (the build and its
  kernels talk over 127.0.0.1; myst-nb has no setting for IPC transport). The folder's
  ``ipython_kernel_config.py`` gives the kernel's log handler a filter, through
  ipykernel's ``logging_config``, that drops exactly that message; every other one
  still reaches the build log, and a reworded one comes back, visible.
* **One job's share of the cores as threads** (``OMP_NUM_THREADS``, at least 1),
  since ``sphinx-build -j`` runs several kernels and scripts side by side. A value set
  in the environment is kept.

**Reuse mode** (``nox -s docs -- --reuse``, ``nox -s docs-live``: myst-nb's cache
mode). When myst-nb 1.4 takes a page from its cache, it renders the cached outputs but
saves the notebook it read, without them, to ``jupyter_execute/``, where
``verify_outputs`` checks and ``downloads`` offers it. So right after myst-nb has read
a page (``doctree-read``, before ``verify_outputs``), :func:`restore_outputs` saves the
cached notebook there, merged into the page's (jupyter-cache's
``merge_match_into_notebook``). A saved notebook that has outputs is left alone.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
from jupyter_cache import get_cache
from sphinx.application import Sphinx

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
    cache = get_cache(app.config.nb_execution_cache_path)
    try:
        _, merged = cache.merge_match_into_notebook(notebook)
    except KeyError:
        return  # not in the cache: myst-nb ran it, and it printed nothing
    nbformat.write(merged, saved)


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    app.connect("config-inited", on_config_inited, priority=300)
    # Before verify_outputs reads the saved notebook (priority 500).
    app.connect("doctree-read", restore_outputs, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
