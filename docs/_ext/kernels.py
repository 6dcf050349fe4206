"""The Jupyter kernels that run the chapters: an IPython folder of the build's own.

myst-nb runs each chapter in a fresh Jupyter kernel (Jupyter's own ``python3``
kernelspec) and, once the last cell has run, asks it to shut down and waits for its
process to end. This extension points every such kernel at an IPython folder
(``IPYTHONDIR``, IPython's documented variable) that belongs to the build, beside its
output folder, and writes only what is below into it:

* **Nothing of the reader's runs in the pages.** A startup file or profile setting in
  ``~/.ipython`` could change what a page prints; the build's folder is made afresh
  at every build.
* **A kernel ends as soon as the chapter is done.** A Python that has imported torch,
  matplotlib and transformers then spends 1 to 3 s of CPU tearing its modules down
  before the process ends (measured on a 2-core AMD EPYC: 1.1 s for Part I's imports,
  2.4 s with transformers; 0.1 s with this file), and the build waits for it. So the
  first startup file registers :func:`os._exit` (a documented function, despite its
  name) as an :mod:`atexit` handler. Handlers run last-registered first, so the ones
  registered by the chapter's own imports still run before it; only the kernel's own
  housekeeping (its history database, its sockets) is skipped. Every output has
  reached the build before the shutdown request is even sent.
* **A quiet log.** ipykernel 7.3 and later log "Kernel is running over TCP without
  encryption" as each kernel starts. It is true and of no use here: the build and its
  kernels talk over 127.0.0.1, and myst-nb offers no setting for IPC transport or
  encryption. The kernel configuration file (``ipython_kernel_config.py``) gives the
  kernel's log handler a filter, through ipykernel's documented ``logging_config``
  setting, that drops exactly that message; every other message the kernel logs still
  reaches the build log. Should ipykernel reword it, the message comes back: visible,
  never hidden.

* **One core's share of threads.** The build runs as many kernels side by side as
  ``sphinx-build -j`` asks for, besides the gallery's scripts, so each kernel gets
  ``OMP_NUM_THREADS`` = cores / jobs (1 on two cores), as joblib gives the gallery's
  worker processes. torch's second thread mostly waits for a core that another
  process holds: on a busy 2-core AMD EPYC, a whole build took 96 s of CPU time with
  one thread per process and 116 s without.
  A value set in the environment is kept.

Other extensions may add startup files with :func:`add_startup_file`.
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

# The start of the message ipykernel logs when a kernel listens on TCP without CurveZMQ keys.
TCP_NOTICE = "Kernel is running over TCP without encryption"

KERNEL_CONFIG = f"""\
# Written by docs/_ext/kernels.py for the kernels of the docs build only.
import logging


class WithoutTheTcpNotice(logging.Filter):
    \"\"\"Every record but ipykernel's notice that the kernel listens on TCP.\"\"\"

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
    kernel_config = ipython / "profile_default" / "ipython_kernel_config.py"
    kernel_config.write_text(KERNEL_CONFIG, encoding="utf-8")
    # The kernels inherit the environment, in the parallel readers' processes too.
    os.environ["IPYTHONDIR"] = str(ipython)
    os.environ.setdefault("OMP_NUM_THREADS", str(threads_per_job(app.parallel)))


def threads_per_job(jobs: int) -> int:
    """Each of ``jobs`` side-by-side processes' share of the cores, at least 1.

    >>> threads_per_job(1) == (os.cpu_count() or 1)
    True
    """
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def setup(app: Sphinx) -> dict:
    # Before the extensions that add startup files of their own (priority 400 and up).
    app.connect("config-inited", on_config_inited, priority=300)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
