"""The processes sphinx-gallery runs its scripts in, when the build runs with ``-j``.

sphinx-gallery hands the scripts to joblib, whose default workers each start a fresh
Python and import torch and matplotlib again. Three things make them cheaper:

- :func:`fork_from_server` (``builder-inited``, before the gallery runs) has joblib
  fork its workers from multiprocessing's *forkserver*, a process that has imported
  what the scripts import (read from their source), so no worker imports it again.
  Where there is no forkserver (Windows), joblib keeps its own workers.
- In each worker, before each script (a ``reset_modules`` entry in ``conf.py``),
  :func:`freeze_survivors` puts what outlived the last script out of the garbage
  collector's sight. sphinx-gallery runs a full collection before every script, and
  Python more as a script allocates; with torch imported each one would walk
  hundreds of thousands of objects that will never be garbage.
- Once every script has run (``env-before-read-docs``), :func:`restore` puts joblib's
  defaults back and :func:`stop_workers` ends any workers joblib kept for reuse
  (its own keep running for five minutes, and ``nox -s docs``, which skips Python's
  teardown, would leave them holding the build's output open until then).
"""

from __future__ import annotations

import ast
import gc
import multiprocessing
import sys
from pathlib import Path

import kernel_fork
from sphinx.application import Sphinx


def freeze_survivors(gallery_conf: dict, fname: str, when: str) -> None:
    """Collect the garbage, then freeze every object left (``gc.freeze``)."""
    gc.collect()
    gc.freeze()


def script_imports(folder: Path) -> list[str]:
    """Every module the scripts in ``folder`` import by name, in the order first seen."""
    modules: dict[str, None] = {}
    for script in sorted(folder.glob("*.py")):
        tree = ast.parse(script.read_text(encoding="utf-8"))
        modules.update(dict.fromkeys(kernel_fork.modules_imported(tree)))
    return list(modules)


_SAVED = "_gallery_workers_saved"


def fork_from_server(app: Sphinx) -> None:
    """Have joblib fork the gallery's workers from a forkserver that imported their modules."""
    conf = getattr(app.config, "sphinx_gallery_conf", None)
    if not isinstance(conf, dict) or not conf.get("parallel"):
        return  # no gallery, or its scripts run in this process
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    import joblib
    import joblib.parallel

    folders = conf.get("examples_dirs", [])
    folders = [folders] if isinstance(folders, str) else folders
    modules = [name for folder in folders for name in script_imports(Path(app.srcdir, folder))]
    context = multiprocessing.get_context("forkserver")
    # The worker's own side too: what runs a script, and this module.
    context.set_forkserver_preload([*dict.fromkeys(modules), "sphinx_gallery.gen_rst", __name__])
    # joblib's multiprocessing pools take their start method from here (as set by
    # JOBLIB_START_METHOD when joblib is imported); sphinx-gallery names no backend,
    # so the one configured here is used.
    previous = joblib.parallel.DEFAULT_MP_CONTEXT
    joblib.parallel.DEFAULT_MP_CONTEXT = context
    config = joblib.parallel_config(backend="multiprocessing")
    setattr(app, _SAVED, (previous, config))


def restore(app: Sphinx, *args: object) -> None:
    """Put back joblib's start method and backend, as they were before the gallery."""
    saved = getattr(app, _SAVED, None)
    if saved is None:
        return
    import joblib.parallel

    previous, config = saved
    config.unregister()
    joblib.parallel.DEFAULT_MP_CONTEXT = previous
    setattr(app, _SAVED, None)


def stop_workers(app: Sphinx | None = None, *args: object) -> None:
    """End joblib's reusable workers, if any were started, and remove their folder."""
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None)
    if executor is None:
        return
    if hasattr(executor, "terminate"):  # joblib's, which its Parallel uses
        # It also removes the folder joblib shares arrays through, which would
        # otherwise be reported as leaked when the build ends.
        executor.terminate(kill_workers=True)
    else:
        executor.shutdown(wait=True, kill_workers=True)


def setup(app: Sphinx) -> dict:
    # Before sphinx-gallery runs the scripts (its builder-inited, at priority 500).
    app.connect("builder-inited", fork_from_server, priority=400)
    # After it has run every script, before the pages are read.
    app.connect("env-before-read-docs", restore)
    app.connect("env-before-read-docs", stop_workers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
