"""Kernels forked from one warm Python: the pages' imports paid once per build.

Every page of the site runs in a fresh Jupyter kernel, and every such kernel starts
by importing what the page imports: torch, matplotlib, the package, and for most of
Parts II to VII a model's module from ``transformers``. On a 2-core AMD EPYC that is
2 s of CPU for torch, 1.5 s more for pyplot and 4 s more for one of ``transformers``'
modeling modules, paid again by each of 31 pages: most of the build's CPU time.

This module starts one Python (the *zygote*) that imports those modules once, then
forks a kernel for each page. A forked kernel is still a fresh process with its own
namespace, its own sockets and the ordinary ``ipykernel`` application: only the
modules it imports are already in memory, as the zygote left them. (The zygote runs
nothing but imports, so torch has started no thread pool to copy.) What the page
prints is then checked as every page is (``verify_outputs``), so a module that
behaved differently when imported early would fail the build, not pass it.

Two programs, both in this file, with nothing but the standard library at the top:

* ``python kernel_fork.py serve SOCKET FD MODULE...`` is the zygote. It imports the
  ``MODULE``\\ s (and ``ipykernel``'s application), then listens on the Unix socket
  ``SOCKET``. For each request it forks a kernel, sends back its pid, and later its
  exit status. It runs no Python thread, so the fork copies no lock that another
  thread holds. Each module it could not import, or that warned as it was imported,
  and any thread an import started, it reports on a line of its own on the file
  descriptor ``FD``, and the build shows the line as a warning: the module stays
  imported, but the page that imports it would no longer show the warning itself.
* ``python kernel_fork.py kernel SOCKET -f CONNECTION_FILE`` is what the kernelspec
  runs in place of ``python -m ipykernel_launcher``: a small process that asks the
  zygote for a kernel with its own working folder, environment and arguments, passes
  on every signal that Jupyter sends it (an interrupt, a termination), and exits with
  the kernel's status. If it is killed, the zygote kills its kernel.

Only on Linux (where ``fork`` is the platform's own way to start a process, and torch
supports forking before it has started any threads); elsewhere the build runs
Jupyter's own ``python3`` kernels.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import sys

#: Whether this platform forks kernels (see the module's docstring).
SUPPORTED = sys.platform.startswith("linux")
#: The signals the client passes on to its kernel.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _send(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _lines(conn: socket.socket):
    """The JSON messages on ``conn``, one a line, until it closes."""
    buffer = b""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line)


# ---------------------------------------------------------------------------- client


def client(path: str, argv: list[str]) -> int:
    """Ask the zygote at ``path`` for a kernel; wait for it; return its exit code."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    _send(conn, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)})
    messages = _lines(conn)
    pid = next(messages)["pid"]
    for signum in FORWARDED:
        signal.signal(signum, lambda signum, frame: os.kill(pid, signum))
    for message in messages:
        return int(message["exit"])
    return 1  # the zygote went away before the kernel ended


# ---------------------------------------------------------------------------- zygote


def modules_imported(tree: ast.AST) -> list[str]:
    """The modules ``tree`` imports by name, in order: what a preload should import.

    ``import a.b`` gives ``a.b``; ``from a.b import c`` gives ``a.b`` (``c`` may be a
    name in it, not a module); relative imports give nothing.
    """
    modules: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(dict.fromkeys(alias.name for alias in node.names))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules[node.module] = None
    return list(modules)


def preload(modules: list[str]) -> list[str]:
    """Import ``modules``; describe each one that failed or warned."""
    import importlib
    import warnings

    # As ipykernel sets it before any page runs, so that matplotlib, imported here,
    # reads the same backend a page's kernel would give it.
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    problems = []
    for name in ["ipykernel.kernelapp", *modules]:
        # Under the filters in force, as a page's kernel would show them.
        with warnings.catch_warnings(record=True) as caught:
            try:
                importlib.import_module(name)
            except Exception as error:  # the page that imports it reports it
                problems.append(f"{name}: not imported ({type(error).__name__}: {error})")
        for warning in caught:
            problems.append(f"{name}: warned as it was imported: {warning.message}")
    # A fork copies only the calling thread: a lock another Python thread holds would
    # stay locked in every kernel. (Native pools, such as OpenBLAS's, which numpy starts
    # as it is imported, restart in the child through their own fork handlers.)
    import threading

    if threading.active_count() > 1:
        names = ", ".join(thread.name for thread in threading.enumerate())
        problems.append(f"Python threads run after the imports ({names}): forking is unsafe")
    return problems


def kernel(request: dict, inherited: list) -> None:
    """The forked child: become an ordinary ipykernel process, then exit."""
    status = 1
    try:
        for resource in inherited:  # the zygote's sockets are not the kernel's
            resource.close()
        os.setsid()  # as Jupyter starts its kernels: a session of their own
        for signum in (*FORWARDED, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if "random" in sys.modules:  # a fresh process would draw its own seed
            sys.modules["random"].seed()
        from ipykernel import kernelapp

        argv = list(request["argv"])
        # ipykernel reads this one from the environment as it is imported, which
        # here was the zygote's: it decides whether the kernel watches its parent
        # and stays quiet on the terminal, as a kernel started by Jupyter does.
        parent = request["env"].get("JPY_PARENT_PID")
        if parent:
            argv.append(f"--IPKernelApp.parent_handle={int(parent)}")
        sys.argv = [kernelapp.__file__, *argv]
        kernelapp.launch_new_instance(argv=argv)
        status = 0
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def serve(path: str, report: int, modules: list[str]) -> None:
    """Import ``modules``, then fork a kernel for every request on ``path``.

    What it could not import, or what warned, goes to the file descriptor ``report``,
    a line each, which it closes once it listens; its output and errors are the
    kernels' (as Jupyter's own kernels write to the build's).
    """
    # As ipykernel_launcher does: the script's own folder is not the kernel's.
    del sys.path[0]
    with os.fdopen(report, "w") as lines:
        for problem in preload(modules):
            print(problem, file=lines)
        # What was imported lives as long as the kernels do: out of the collector's
        # sight, each full collection in a page no longer walks the hundreds of
        # thousands of objects torch and transformers made (run one after another,
        # the pages took 38 s with this, 47 to 53 s without).
        gc.collect()
        gc.freeze()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen()
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    kernels: dict[int, socket.socket] = {}  # pid -> the client that asked for it

    def stop(signum, frame):
        for pid in kernels:
            os.kill(pid, signal.SIGKILL)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        for key, _ in selector.select(timeout=0.01):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                request = next(_lines(conn))
                pid = os.fork()
                if pid == 0:
                    kernel(request, [listener, selector, conn, *kernels.values()])
                kernels[pid] = conn
                _send(conn, {"pid": pid})
                selector.register(conn, selectors.EVENT_READ, pid)
            else:  # a client closed its end: it was killed, so is its kernel
                pid = key.data
                selector.unregister(key.fileobj)
                if pid in kernels:
                    os.kill(pid, signal.SIGKILL)
        while kernels:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = kernels.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(OSError):  # its client may be gone
                _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
            with contextlib.suppress(KeyError):
                selector.unregister(conn)
            conn.close()


if __name__ == "__main__":
    command, path, *rest = sys.argv[1:]
    if command == "serve":
        serve(path, int(rest[0]), rest[1:])
    elif command == "kernel":
        sys.exit(client(path, rest))
    else:
        sys.exit(f"kernel_fork.py: expected 'serve' or 'kernel', got {command!r}")


# ------------------------------------------------------------------- the build's side


class Zygote:
    """A zygote of the build's, and the kernelspec whose kernels it forks.

    ``Zygote(folder, modules)`` starts it; :meth:`wait` waits until it has imported
    them and returns what it reported; :meth:`kernel_manager_class` gives nbclient
    the kernel manager of kernels forked from it; :meth:`stop` ends it and every
    kernel still running.
    """

    NAME = "attention-forked"

    def __init__(self, folder, modules: list[str]) -> None:
        import subprocess
        import tempfile
        from pathlib import Path

        # A Unix socket's path has at most 107 bytes: a short folder of its own.
        self.socket_dir = tempfile.mkdtemp(prefix="kernel-fork-")
        self.socket = os.path.join(self.socket_dir, "zygote")
        self.spec_dir = Path(folder) / "kernelspecs"
        spec = self.spec_dir / self.NAME / "kernel.json"
        spec.parent.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, __file__, "kernel", self.socket, "-f", "{connection_file}"]
        kernelspec = {
            "argv": argv,
            "display_name": "Python 3 (forked from the build's zygote)",
            "language": "python",
            "interrupt_mode": "signal",
            "metadata": {"debugger": False},
        }
        spec.write_text(json.dumps(kernelspec, indent=1), encoding="utf-8")
        read, write = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "serve", self.socket, str(write), *modules],
            pass_fds=(write,),
        )
        os.close(write)
        self.report = os.fdopen(read)

    def wait(self) -> list[str]:
        """Wait until the zygote listens; the problems it reported while importing."""
        problems = self.report.read().splitlines()  # until it closes its end
        self.report.close()
        if not os.path.exists(self.socket):
            status = self.process.wait()
            raise RuntimeError(f"the kernels' zygote ended before it listened ({status})")
        return problems

    def kernel_manager_class(self) -> type:
        """A kernel manager class for nbclient whose kernels this zygote forks.

        nbclient makes one for each page and, having made it, shuts its kernel down
        when the page has run (it leaves a kernel manager it is given alone).
        """
        from jupyter_client import AsyncKernelManager
        from jupyter_client.kernelspec import KernelSpecManager
        from traitlets import default

        spec_dir = str(self.spec_dir)
        name = self.NAME

        class ForkedKernelManager(AsyncKernelManager):
            @default("kernel_name")
            def _default_kernel_name(self) -> str:
                return name

            @default("kernel_spec_manager")
            def _default_kernel_spec_manager(self) -> KernelSpecManager:
                return KernelSpecManager(kernel_dirs=[spec_dir])

        return ForkedKernelManager

    def stop(self) -> None:
        import shutil

        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        shutil.rmtree(self.socket_dir, ignore_errors=True)
