"""``nox -s docs-live``: re-run a page only when its code or the package's source changed.

``nox -s docs`` re-runs every page and script on every build (myst-nb's
``nb_execution_mode = "force"``), so that no cache can hide a change. While writing,
that is a minute per save. So ``nox -s docs-live`` sets ``ATTENTION_DOCS_CACHE``, and
``conf.py`` then uses myst-nb's documented cache mode (``nb_execution_mode = "cache"``):
jupyter-cache keeps each executed notebook, keyed on its code, and a page whose code
has not changed is not run again.

jupyter-cache knows nothing of the package the pages import. So the cache lives in a
folder named after a hash of the package's source (:func:`live_cache`): after a change
to ``attention/``, the folder is a new one, Sphinx sees a changed setting and re-reads
every page, and each page runs once more. sphinx-gallery skips a script whose own text
has not changed; with a new folder, ``conf.py`` has it re-run them all too
(``run_stale_examples``).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


def source_hash(package: Path) -> str:
    """A hash of every ``.py`` file under ``package``: their paths and their bytes."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def live_cache(package: Path, build: Path) -> Path:
    """The jupyter-cache folder for ``package``'s current source, under ``build``.

    Folders made for an earlier state of the source are removed: they can only be
    used again if the source returns to that state, byte for byte.
    """
    folder = build / "jupyter_cache"
    current = folder / source_hash(package)
    if folder.is_dir():
        for old in folder.iterdir():
            if old != current:
                shutil.rmtree(old, ignore_errors=True)
    return current
