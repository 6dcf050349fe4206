"""The Jupyter kernels that run the chapters: a profile of the build's own, and a quick exit.

myst-nb runs each chapter in a Jupyter kernel of its own and, once the last cell has
run, asks the kernel to shut down and waits for its process to end. This extension
points every such kernel at an IPython folder (``IPYTHONDIR``) that belongs to the
build, for two reasons:

* **Nothing of the reader's runs in the pages.** A startup file or profile setting in
  ``~/.ipython`` could change what a page prints; the build's folder has only the
  startup files written here.
* **A kernel ends as soon as the chapter is done.** A Python that has imported torch,
  matplotlib and transformers then spends 1 to 3 s of CPU tearing its modules down
  before the process ends (measured on a 2-core AMD EPYC: 1.1 s for Part I's imports,
  2.4 s with transformers; 0.1 s with this file), and the build waits for it. So
  the first startup file registers
  ``os._exit(0)`` as an exit handler. Exit handlers run last-registered first, so the
  ones registered by the chapter's own imports still run before it; only the
  kernel's own housekeeping (its history database, its sockets) is skipped. Every
  output has reached the build before the shutdown request is even sent.

Other extensions add startup files with :func:`add_startup_file` (``perturb_prints``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sphinx.application import Sphinx

EXIT_FAST = """\
# Written by docs/_ext/kernels.py for the kernels of the docs build only.
import atexit as _atexit
import os as _os

_atexit.register(_os._exit, 0)  # skip the interpreter's teardown (see kernels.py)
del _atexit, _os
"""


def ipython_dir(app: Sphinx) -> Path:
    """The build's own ``IPYTHONDIR``, beside its output folder."""
    return Path(app.outdir).parent / "ipython"


def startup_folder(ipython: Path) -> Path:
    return ipython / "profile_default" / "startup"


def add_startup_file(app: Sphinx, name: str, code: str) -> Path:
    """Run ``code`` at the start of every kernel of this build (files run in name order)."""
    path = startup_folder(ipython_dir(app)) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code, encoding="utf-8")
    return path


def on_config_inited(app: Sphinx, config) -> None:
    ipython = ipython_dir(app)
    # A fresh folder every build: no startup file of an earlier build may linger.
    shutil.rmtree(ipython, ignore_errors=True)
    add_startup_file(app, "00-exit-fast.py", EXIT_FAST)
    # The kernels inherit the environment, in the parallel readers' processes too.
    os.environ["IPYTHONDIR"] = str(ipython)


def setup(app: Sphinx) -> dict:
    # Before the extensions that add startup files of their own (priority 400 and up).
    app.connect("config-inited", on_config_inited, priority=300)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
