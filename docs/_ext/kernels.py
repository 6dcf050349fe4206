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

**Kernels forked from a preloaded server** (Linux). With ``kernel_preload`` set in
``conf.py``, the build also starts ``kernel_server.py``, which imports those modules
once, and gives the kernels a ``python3`` kernelspec of the build's own that asks it
for a forked kernel: each chapter then starts with torch (and the rest) already
imported. The server hands out a plain kernel instead whenever a forked one could
print something different (see ``kernel_server.py``). ``ATTENTION_PLAIN_KERNELS=1``
turns the server off; macOS and Windows never use it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)
SERVER = Path(__file__).with_name("kernel_server.py")

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


class KernelServer:
    """The running ``kernel_server.py serve`` and what the build needs to stop it."""

    def __init__(self, app: Sphinx, modules: list[str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="attention-kernels-"))  # a short path
        address = self.folder / "server.sock"  # Unix socket paths are at most 107 bytes
        jupyter = Path(app.outdir).parent / "jupyter"
        shutil.rmtree(jupyter, ignore_errors=True)
        spec = jupyter / "kernels" / "python3"
        spec.mkdir(parents=True)
        launch = [sys.executable, str(SERVER), "launch", str(address)]
        kernel = {
            "argv": [*launch, "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel, forked from the build's kernel server)",
            "language": "python",
            "metadata": {"debugger": True},
        }
        (spec / "kernel.json").write_text(json.dumps(kernel, indent=1), encoding="utf-8")
        # Jupyter looks in JUPYTER_PATH first: this spec stands in for the usual
        # python3 one, so the notebooks (and their downloads) keep their kernel name.
        paths = [str(jupyter), os.environ.get("JUPYTER_PATH")]
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, paths))
        self.log = Path(app.outdir).parent / "kernel-server.log"
        # The socket exists before the first kernel asks; the server inherits it.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(address))
        listener.listen(64)
        with listener, self.log.open("w", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER), "serve", str(listener.fileno()), *modules],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[listener.fileno()],
                # As Jupyter passes it to kernels: os.environ, not the C library's
                # environment, which readline (for one) changes behind its back.
                env=dict(os.environ),
            )

    def stop(self) -> None:
        """End the server and report how many kernels it forked."""
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
        lines = self.log.read_text(encoding="utf-8").strip().splitlines()
        try:
            summary = json.loads(lines[-1])
        except (IndexError, ValueError):
            summary = None
        if summary is None or len(lines) > 1:
            logger.warning(
                "the kernel server did not end cleanly; its log, %s, says:\n%s",
                self.log,
                "\n".join(lines[-20:]),
            )
            return
        plain = "; ".join(f"{count} because {why}" for why, count in summary["plain"].items())
        logger.info(
            "chapter kernels: %d forked from the kernel server%s",
            summary["forked"],
            f", started plain: {plain}" if plain else "",
        )


SERVER_KEY = "_attention_kernel_server"


def start_kernel_server(app: Sphinx, config) -> None:
    modules = list(config.kernel_preload)
    if not modules or os.environ.get("ATTENTION_PLAIN_KERNELS"):
        return
    if not sys.platform.startswith("linux"):
        return  # fork is Linux-only here (see kernel_server.py)
    setattr(app, SERVER_KEY, KernelServer(app, modules))


def stop_kernel_server(app: Sphinx, exception) -> None:
    server = getattr(app, SERVER_KEY, None)
    if server is not None:
        server.stop()
        setattr(app, SERVER_KEY, None)


def setup(app: Sphinx) -> dict:
    # Modules each chapter kernel imports, to import once in a server and fork from.
    app.add_config_value("kernel_preload", [], "", types=[list])
    # Before the extensions that add startup files of their own (priority 400 and up).
    app.connect("config-inited", on_config_inited, priority=300)
    # After every extension has set the environment the kernels will inherit.
    app.connect("config-inited", start_kernel_server, priority=900)
    app.connect("build-finished", stop_kernel_server)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
