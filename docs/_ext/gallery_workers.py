"""The processes sphinx-gallery runs its scripts in, when the build runs with ``-j``.

Two things, one on each side:

- In each worker, before each script (a ``reset_modules`` entry in ``conf.py``),
  :func:`freeze_survivors` puts what outlived the last script out of the garbage
  collector's sight. sphinx-gallery runs a full collection before every script, and
  Python more as a script allocates; in a process that has imported torch and
  transformers each one walks hundreds of thousands of objects that will never be
  garbage. After the first script, collections walk only what came since.
- In the build, :func:`stop_workers` ends the workers once every script has run.
  joblib keeps them for reuse for five minutes, each holding what its scripts
  imported; and ``nox -s docs``, which skips Python's teardown, would leave them
  running after the build, holding its output open until they timed out.
"""

from __future__ import annotations

import gc
import sys

from sphinx.application import Sphinx


def freeze_survivors(gallery_conf: dict, fname: str, when: str) -> None:
    """Collect the garbage, then freeze every object left (``gc.freeze``)."""
    gc.collect()
    gc.freeze()


def stop_workers(app: Sphinx | None = None, *args: object) -> None:
    """End joblib's reusable workers, if any were started, and remove their folder."""
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None)
    if executor is None:
        return
    if hasattr(executor, "terminate"):  # joblib's, which sphinx-gallery's Parallel uses
        # It also removes the folder joblib shares arrays through, which would
        # otherwise be reported as leaked when the build ends.
        executor.terminate(kill_workers=True)
    else:
        executor.shutdown(wait=True, kill_workers=True)


def setup(app: Sphinx) -> dict:
    # After sphinx-gallery has run every script, before the pages are read.
    app.connect("env-before-read-docs", stop_workers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
