"""Reuse mode: re-run a page only when its code, the package, the pins or Python changed.

``nox -s docs`` re-runs every page and script on every build (myst-nb's
``nb_execution_mode = "force"``), so that no cache can hide a change. While writing,
that is minutes per save. So ``nox -s docs -- --reuse`` and ``nox -s docs-live`` set
``ATTENTION_DOCS_CACHE``, and ``conf.py`` then uses myst-nb's documented cache mode
(``nb_execution_mode = "cache"``): jupyter-cache keeps each executed notebook, keyed on
its code, and a page whose code has not changed is not run again.

jupyter-cache knows nothing of what the pages import. So the cache lives in a folder
named after a hash (:func:`source_hash`) of the package's source (``attention/``), the
constraints file (``.ci/constraints.txt``) and the Python version
(:func:`live_cache`): after a change to any of them, the folder is a new one, Sphinx
sees a changed setting and re-reads every page, and each page runs once more.
sphinx-gallery skips a script whose own text has not changed (its ``.md5`` files); with
a new folder, ``conf.py`` has it re-run them all too (``run_stale_examples``).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

PACKAGE = "attention"
CONSTRAINTS = ".ci/constraints.txt"


def source_hash(package: Path, *files: Path, python: str = sys.version) -> str:
    """A hash of every ``.py`` file under ``package`` (their paths and their bytes), of
    ``files`` (those that exist) and of the ``python`` version."""
    digest = hashlib.sha256(python.encode() + b"\0")
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    for path in files:
        digest.update(path.name.encode() + b"\0")
        digest.update((path.read_bytes() if path.is_file() else b"") + b"\0")
    return digest.hexdigest()[:16]


def live_cache(root: Path, build: Path) -> Path:
    """The jupyter-cache folder for the repository at ``root`` as it is, under ``build``.

    Folders made for an earlier state are removed: they can only be used again if the
    package, the constraints and Python return to that state, byte for byte.
    """
    folder = build / "jupyter_cache"
    current = folder / source_hash(root / PACKAGE, root / CONSTRAINTS)
    if folder.is_dir():
        for old in folder.iterdir():
            if old != current:
                shutil.rmtree(old, ignore_errors=True)
    return current
