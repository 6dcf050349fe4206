"""Start the chapters' kernels by forking a process that has already imported torch.

Every chapter runs in a fresh Jupyter kernel, and a fresh kernel spends most of its
life importing before the first cell runs (on a 2-core Xeon: 1.1 s for torch, 0.3 s
for matplotlib, 2 s more for transformers' model code, besides starting the kernel).
This file is two small programs that do that work once per build:

``serve`` (started by ``kernels.py`` when the build starts)
    Imports the modules named in ``kernel_preload`` once, then waits on a Unix socket.
    For each kernel asked for, it forks: the child takes over the asker's standard
    streams, working folder, environment and arguments, and becomes an ordinary
    ipykernel. Fork copies memory, so torch is already imported in the child.
``launch`` (the build's ``python3`` kernelspec runs it)
    What Jupyter starts as "the kernel": it asks the server for a forked kernel and
    stays beside it, passing on signals (an interrupt reaches the kernel) and ending
    with it. Killing it kills the forked kernel.

A forked kernel must print what a freshly started one prints. So the server answers
``plain`` instead, and the launcher replaces itself with a normal
``python -m ipykernel_launcher`` (exactly what Jupyter's own kernelspec runs), when:

* the preload wrote anything to stdout or stderr (a warning printed at import would
  be on the page with a fresh kernel and missing with a forked one), failed, started
  a Python thread (threads do not survive a fork), or imported matplotlib's inline
  backend (which hooks into the running IPython when imported, and there is none yet);
* the kernel's environment differs from the one the server imported under (beyond
  the variables Jupyter sets per kernel), since modules read it when imported.

The server never imports ipykernel itself: its classes read the environment
(``JPY_PARENT_PID``) when imported, so each child imports it after taking on its
kernel's environment (about 0.1 s). Two more things are restored by hand in each
child: ``logging`` handlers created at import time hold the stream that was
``sys.stderr`` then; in a fresh kernel that is the notebook's stream, so they are
pointed at it once the kernel has made it. And torch's and NumPy's global random
states, which a fresh process seeds from the operating system, are reseeded.

Linux only (``kernels.py`` checks): forking a process that has loaded system
frameworks is unsafe on macOS, and Windows has no fork.

Only the standard library is imported at the top: the launcher must start fast.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import struct
import sys

# Set by Jupyter for each kernel it starts: they may differ from the server's.
PER_KERNEL_VARIABLES = {"JPY_PARENT_PID", "JPY_SESSION_NAME"}
# What ipykernel sets when it starts, if the environment has no value of its own.
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
HEADER = struct.Struct("!I")  # the length of the JSON request that follows


def kill(pid: int, signum: int) -> None:
    """Send ``signum`` to ``pid`` unless it has already ended."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def plain_kernel(argv: list[str]) -> None:
    """Become the kernel Jupyter's own kernelspec starts; never returns."""
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *argv])


# -- The launcher -----------------------------------------------------------------


def launch(address: str, argv: list[str]) -> None:
    """Ask the server at ``address`` for a kernel started with ``argv``; wait for it."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(address)
        request = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        socket.send_fds(client, [HEADER.pack(len(request))], [0, 1, 2])
        client.sendall(request)
        reply = client.makefile("r", encoding="utf-8")
        answer = reply.readline().split(maxsplit=1)
    except OSError:  # no server: the build's kernels start as usual
        plain_kernel(argv)
    if not answer or answer[0] != "pid":  # the server said why in its summary
        plain_kernel(argv)
    kernel = int(answer[1])

    def forward(signum, frame):
        kill(kernel, signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, forward)
    # The next line is the kernel's exit status. If the server goes first, end the
    # kernel rather than leave it running unwatched.
    ending = reply.readline().split()
    if len(ending) != 2 or ending[0] != "exit":
        forward(signal.SIGKILL, None)
        sys.exit(1)
    code = int(ending[1])
    if code < 0:  # killed by a signal: end the same way, as the kernel did
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


# -- The server -------------------------------------------------------------------


def preload(modules: list[str]) -> str | None:
    """Import ``modules`` as a kernel would; return why not to fork, or None.

    The environment is the kernels', as ipykernel sets it before any cell runs.
    """
    import importlib
    import importlib.util
    import tempfile
    import threading
    import traceback

    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    # Catch what the imports write, down to the file descriptors (C libraries too).
    with tempfile.TemporaryFile() as captured:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(captured.fileno(), 1)
        os.dup2(captured.fileno(), 2)
        failure = None
        try:
            for name in modules:
                # A module this environment lacks would fail in a fresh kernel too.
                if importlib.util.find_spec(name.partition(".")[0]) is not None:
                    importlib.import_module(name)
        except BaseException:
            failure = traceback.format_exc(limit=-1).strip().splitlines()[-1]
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        captured.seek(0)
        printed = captured.read().decode(errors="replace").strip()
    if failure:
        return f"preloading failed: {failure}"
    if printed:
        return f"preloading printed {printed.splitlines()[0][:200]!r}"
    if threading.active_count() != 1:
        return f"preloading started threads: {threading.enumerate()}"
    if INLINE_BACKEND.removeprefix("module://") in sys.modules:
        return "preloading imported matplotlib's inline backend"
    return None


def differences(env: dict[str, str], expected: dict[str, str]) -> list[str]:
    """The variables (names only) whose values differ between two environments."""
    names = (set(env) | set(expected)) - PER_KERNEL_VARIABLES
    return sorted(name for name in names if env.get(name) != expected.get(name))


def read_request(conn: socket.socket) -> tuple[dict, list[int]]:
    conn.settimeout(10)
    header, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    if len(header) != HEADER.size or len(fds) != 3:
        raise OSError(f"malformed request: {len(header)} header bytes, {len(fds)} fds")
    (size,) = HEADER.unpack(header)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise OSError("request cut short")
        body += chunk
    conn.settimeout(None)
    return json.loads(body), fds


def rebind_log_handlers(old_out, old_err) -> None:
    """Point handlers made at import at the kernel's streams, as in a fresh kernel."""
    import logging

    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    for logger in loggers:
        for handler in logger.handlers:
            stream = getattr(handler, "stream", None)
            if stream is old_err:
                handler.setStream(sys.stderr)
            elif stream is old_out:
                handler.setStream(sys.stdout)


def reorder_warning_filters(filters: tuple[list, list]) -> None:
    """Put the preload's warning filters after the kernel's, as a fresh kernel has them.

    ``filters`` is (the filters at start, the filters after preloading). New filters
    go first, so a fresh kernel has (chapter's imports + kernel's + initial); a forked
    one starts as (kernel's + preload's + initial). The first filter that matches wins.
    """
    import warnings

    initial, preloaded = filters
    current = warnings.filters
    if not initial or preloaded[-len(initial) :] != initial:
        return
    if current[len(current) - len(preloaded) :] != preloaded:
        return
    kernel = current[: len(current) - len(preloaded)]
    current[:] = preloaded[: len(preloaded) - len(initial)] + kernel + initial
    warnings._filters_mutated()


def become_kernel(request: dict, fds: list[int], kernel_path: list[str], warning_filters) -> None:
    """In the forked child: turn into the kernel the launcher asked for; never returns."""
    from importlib.util import find_spec

    code = 1
    try:
        # A fresh Python's signal handling, not the server's.
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()  # its own session, as Jupyter starts kernels
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[:] = kernel_path
        sys.argv = [find_spec("ipykernel_launcher").origin, *request["argv"]]
        # A fresh process seeds these from the OS; the forked copies would share one.
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        if "torch" in sys.modules:
            sys.modules["torch"].seed()
        from ipykernel import kernelapp

        streams = sys.stdout, sys.stderr
        initialize = kernelapp.IPKernelApp.initialize

        def initialize_as_if_fresh(app, argv=None):
            initialize(app, argv)
            rebind_log_handlers(*streams)
            reorder_warning_filters(warning_filters)

        kernelapp.IPKernelApp.initialize = initialize_as_if_fresh
        try:
            kernelapp.launch_new_instance()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        # What the interpreter of a fresh kernel does next: run the exit handlers.
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def serve(listener_fd: int, modules: list[str]) -> None:
    """Preload ``modules``, then fork a kernel for each launcher that connects."""
    # Ctrl-C in the terminal is for sphinx-build; the server ends when its stdin closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    environment = dict(os.environ)
    # As ipykernel_launcher does: the script's own folder is not on a kernel's path.
    del sys.path[0]
    kernel_path = list(sys.path)
    import warnings

    initial_filters = list(warnings.filters)
    refusal = preload(modules)
    warning_filters = initial_filters, list(warnings.filters)
    listener = socket.socket(fileno=listener_fd)

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    kernels: dict[int, socket.socket] = {}  # pid -> its launcher's connection
    forked = 0
    plain: dict[str, int] = {}

    def refuse(conn: socket.socket, reason: str) -> None:
        plain[reason] = plain.get(reason, 0) + 1
        with contextlib.suppress(OSError):  # the launcher may be gone
            conn.sendall(f"plain {reason}\n".encode())
        conn.close()

    def reap() -> None:
        while kernels:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            conn = kernels.pop(pid, None)
            if conn is not None:
                if conn in selector.get_map():  # its launcher is still there
                    selector.unregister(conn)
                with contextlib.suppress(OSError):
                    conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()

    running = True
    while running:
        for key, _ in selector.select():
            if key.data == "stdin":
                running = bool(os.read(0, 1024))
            elif key.data == "child":
                with contextlib.suppress(BlockingIOError):  # drained
                    while os.read(wake_read, 1024):
                        pass
                reap()
            elif key.data == "listener":
                conn, _ = listener.accept()
                try:
                    request, fds = read_request(conn)
                except (OSError, ValueError) as error:
                    refuse(conn, f"unreadable request ({error})")
                    continue
                changed = differences(request["env"], environment)
                reason = refusal or (
                    changed and f"the kernel's environment differs in {', '.join(changed)}"
                )
                if reason:
                    for fd in fds:
                        os.close(fd)
                    refuse(conn, reason)
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    for other in (listener, conn, *kernels.values()):
                        other.close()
                    for fd in (wake_read, wake_write):
                        os.close(fd)
                    become_kernel(request, fds, kernel_path, warning_filters)
                for fd in fds:
                    os.close(fd)
                forked += 1
                kernels[pid] = conn
                conn.sendall(f"pid {pid}\n".encode())
                selector.register(conn, selectors.EVENT_READ, pid)
            else:
                # A launcher went away (killed): its kernel goes with it.
                if not key.fileobj.recv(1024):
                    selector.unregister(key.fileobj)
                    kill(key.data, signal.SIGKILL)
    for pid in kernels:
        kill(pid, signal.SIGKILL)
    summary = {"preloaded": modules, "forked": forked, "plain": plain}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "serve":
        serve(int(arguments[0]), arguments[1:])
    elif command == "launch":
        launch(arguments[0], arguments[1:])
    else:
        sys.exit(f"usage: {sys.argv[0]} serve FD MODULE... | launch SOCKET KERNEL-ARGS...")
