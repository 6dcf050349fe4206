"""Chapter kernels forked from a server that has imported torch once (Linux only).

A forked kernel must be indistinguishable, from inside a notebook, from a kernel that
Jupyter starts fresh; and whenever it could differ, the server must hand out a fresh
one instead.
"""

import json
import os
import sys
import time
from types import SimpleNamespace

import kernels
import nbformat
import pytest
from jupyter_client.manager import start_new_kernel
from nbclient import NotebookClient

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel server forks: Linux only"
)

# What a notebook can see of the process it runs in. Values that differ from kernel
# to kernel whichever way it starts (its pid, its connection file) are left out.
PROBE = """\
import json, logging, os, signal, sys, threading, warnings
import matplotlib, torch
print(json.dumps({
    "pid is launched process": os.getppid() == int(os.environ["JPY_PARENT_PID"]),
    "cwd": os.getcwd(),
    "sys.path": sys.path,
    "argv": [os.path.basename(sys.argv[0]), sys.argv[1]],
    "environment": sorted(
        (k, v) for k, v in os.environ.items() if k not in ("JPY_PARENT_PID", "JPY_SESSION_NAME")
    ),
    "session leader": os.getsid(0) == os.getpid(),
    "SIGINT handler": repr(signal.getsignal(signal.SIGINT)),
    "backend": matplotlib.get_backend(),
    "threads": threading.active_count(),
    "warning filters": [repr(f) for f in warnings.filters],
    "torch threads": torch.get_num_threads(),
    "ipykernel imported": "ipykernel.kernelapp" in sys.modules,
    "parallel matmul": (torch.ones(600, 600) @ torch.ones(600, 600)).sum().item(),
}, indent=1))
"""
LOG = "import transformers\ntransformers.logging.get_logger('transformers').warning('logged')"
FIGURE = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);"


def run(tmp_path, *cells):
    """Run ``cells`` in a new kernel named python3; return each cell's outputs."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    NotebookClient(
        notebook,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    return [cell.outputs for cell in notebook.cells]


def seen(outputs):
    """What a page shows of a cell: streams joined by name, images by type only."""
    shown = {}
    for output in outputs:
        if output["output_type"] == "stream":
            shown[output["name"]] = shown.get(output["name"], "") + output["text"]
        else:
            shown.setdefault("display", []).append(sorted(output.get("data", {})))
    return shown


def probed(outputs) -> dict:
    return json.loads(seen(outputs)["stdout"])


def started_by_server(outputs) -> bool:
    return not probed(outputs)["pid is launched process"]


def without_the_build_kernelspec(probe: dict) -> dict:
    """The probe less what differs by design: how it started, the build's JUPYTER_PATH."""
    environment = [pair for pair in probe["environment"] if pair[0] != "JUPYTER_PATH"]
    return probe | {"pid is launched process": None, "environment": environment}


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Start a kernel server as the docs build does; stop it after the test."""
    for variable in ("JUPYTER_PATH", "PYTHONPATH"):
        monkeypatch.setenv(variable, os.environ.get(variable, ""))
    # As docs/conf.py does: transformers' import of tqdm warns in a kernel otherwise.
    monkeypatch.setenv("PYTHONWARNINGS", "ignore:IProgress not found")
    app = SimpleNamespace(outdir=str(tmp_path / "_build" / "html"))
    started = []

    def start(modules=("torch", "matplotlib.pyplot", "transformers")):
        started.append(kernels.KernelServer(app, list(modules)))
        return started[-1]

    yield start
    for running in started:
        if running.process.poll() is None:
            running.stop()


def summary(server):
    server.stop()
    assert server.process.returncode == 0
    return json.loads(server.log.read_text().strip().splitlines()[-1])


def test_a_forked_kernel_shows_a_page_what_a_fresh_kernel_shows(server, tmp_path):
    cells = (PROBE, LOG, FIGURE)
    fresh = run(tmp_path, *cells)
    running = server()
    forked = run(tmp_path, *cells)

    assert not started_by_server(fresh[0])
    assert started_by_server(forked[0])
    assert without_the_build_kernelspec(probed(forked[0])) == without_the_build_kernelspec(
        probed(fresh[0])
    )
    # A message logged through a handler made when transformers was imported (in the
    # server, for the forked kernel) reaches the page, not the build's console.
    assert seen(forked[1]) == seen(fresh[1]) == {"stderr": "[transformers] logged\n"}
    assert seen(forked[2]) == seen(fresh[2])
    assert seen(forked[2])["display"] == [["image/png", "text/plain"]]
    assert summary(running) == {
        "preloaded": ["torch", "matplotlib.pyplot", "transformers"],
        "forked": 1,
        "plain": {},
    }


@pytest.mark.parametrize("module", ["torch", "numpy.random"])
def test_forked_kernels_draw_different_unseeded_numbers_as_fresh_ones_do(server, tmp_path, module):
    server([module])  # the import seeds the module's global generator
    draw = f"import {module}\nprint({module}.rand(2))"
    first, second = run(tmp_path, draw), run(tmp_path, draw)
    assert seen(first[0])["stdout"] != seen(second[0])["stdout"]


def test_a_preload_that_prints_makes_every_kernel_a_fresh_one(server, tmp_path, monkeypatch):
    # A fresh kernel would show what the import prints; a forked one could not.
    (tmp_path / "noisy.py").write_text("import sys\nprint('imported', file=sys.stderr)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    running = server(["noisy"])

    outputs = run(tmp_path, PROBE, "import noisy")

    assert not started_by_server(outputs[0])
    assert seen(outputs[1]) == {"stderr": "imported\n"}
    reasons = summary(running)["plain"]
    assert list(reasons) == ["preloading printed 'imported'"]


def test_a_kernel_whose_environment_changed_since_the_preload_starts_fresh(
    server, tmp_path, monkeypatch
):
    # Modules read the environment when imported; the server imported them under its own.
    running = server(["torch"])
    monkeypatch.setenv("ATTENTION_SET_AFTER_THE_SERVER_STARTED", "1")

    outputs = run(tmp_path, PROBE)

    assert not started_by_server(outputs[0])
    assert summary(running)["plain"] == {
        "the kernel's environment differs in ATTENTION_SET_AFTER_THE_SERVER_STARTED": 1
    }


def test_an_interrupt_reaches_the_forked_kernel(server):
    server(["torch"])
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        request = client.execute("import time; time.sleep(60)")
        time.sleep(1)
        started = time.monotonic()
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=20)
        while reply["parent_header"].get("msg_id") != request:  # start-up's replies
            reply = client.get_shell_msg(timeout=20)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - started < 10
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_killing_the_launcher_ends_its_forked_kernel(server):
    server(["torch"])
    manager, client = start_new_kernel(kernel_name="python3")
    try:
        pid = kernel_pid(client)
        assert pid != manager.provisioner.process.pid  # forked, not the launched process
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)  # SIGKILL to the launcher
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"kernel {pid} still running 10 s after its launcher was killed")


def kernel_pid(client) -> int:
    printed = []
    client.execute_interactive(
        "import os; print(os.getpid())",
        timeout=20,
        output_hook=lambda msg: printed.append(msg["content"].get("text", "")),
    )
    return int("".join(printed))


@pytest.mark.parametrize(
    "platform, environment",
    [("darwin", {}), ("win32", {}), ("linux", {"ATTENTION_PLAIN_KERNELS": "1"})],
)
def test_no_server_off_linux_or_when_turned_off(platform, environment, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "platform", platform)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    app = SimpleNamespace(outdir=str(tmp_path / "_build" / "html"))

    kernels.start_kernel_server(app, SimpleNamespace(kernel_preload=["torch"]))

    assert getattr(app, kernels.SERVER_KEY, None) is None
