"""Kernels forked from one warm Python (docs/_ext/kernel_fork.py).

A forked kernel must be an ordinary kernel to the page: the same outputs as Jupyter's
own ``python3`` kernel, in the page's folder and environment, interruptible, and gone
when Jupyter kills it or the build stops the zygote. What the zygote could not import,
or what warned as it imported it, is reported, not hidden.
"""

import asyncio
import os
import signal
import time

import kernel_fork
import nbformat
import pytest
from execute_ahead import Page, imported_modules
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError

pytestmark = pytest.mark.skipif(not kernel_fork.SUPPORTED, reason="forks only on Linux")

CELLS = (
    "import os, sys, warnings\nprint('printed', 6 * 7)",
    "6 * 7",
    "warnings.warn('a warning on stderr')",
    "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0]);",
    "print(os.getcwd(), os.environ.get('FORKED_KERNEL_TEST'))",
    "import json\nprint(json.__name__, 'json' in sys.modules)",
)


def notebook(*sources: str) -> nbformat.NotebookNode:
    cells = [nbformat.v4.new_code_cell(source) for source in sources]
    return nbformat.v4.new_notebook(cells=cells)


def outputs(executed: nbformat.NotebookNode) -> list[list[tuple]]:
    """What each cell showed: its kind, its stream and text, the mime types shown."""
    shown = []
    for cell in executed.cells:
        cell_outputs = []
        for output in cell.outputs:
            data = output.get("data", {})
            text = output.get("text", data.get("text/plain", ""))
            if "UserWarning" in text:  # the warning names the cell's temporary file
                text = text[text.index("UserWarning") :]
            cell_outputs.append((output.output_type, output.get("name"), text, sorted(data)))
        shown.append(cell_outputs)
    return shown


@pytest.fixture
def zygote(tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    started = kernel_fork.Zygote(tmp_path / "build", ["json", "matplotlib.pyplot"])
    yield started
    started.stop()


def run(executed, zygote=None, timeout=60, cwd=None):
    options = {"timeout": timeout, "record_timing": False}
    if zygote is None:
        options["kernel_name"] = "python3"
    else:
        options["kernel_manager_class"] = zygote.kernel_manager_class()
        options["kernel_name"] = kernel_fork.Zygote.NAME
        options["extra_arguments"] = ["--HistoryManager.hist_file=:memory:"]
    NotebookClient(executed, **options).execute(cwd=cwd)
    return executed


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie the zygote has not reaped yet counts as ended.
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(") ")[1][0] != "Z"


def wait_until(condition, seconds=10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_forked_kernel_shows_what_jupyters_own_kernel_shows(zygote, tmp_path, monkeypatch):
    monkeypatch.setenv("FORKED_KERNEL_TEST", "the page's environment")
    assert zygote.wait() == []
    forked = run(notebook(*CELLS), zygote, cwd=str(tmp_path))
    plain = run(notebook(*CELLS), cwd=str(tmp_path))
    assert outputs(forked) == outputs(plain)
    assert outputs(forked)[4][0][2] == f"{tmp_path} the page's environment\n"
    assert outputs(forked)[3][-1][3] == ["image/png", "text/plain"]


def test_each_page_gets_a_process_of_its_own(zygote):
    zygote.wait()
    first = run(notebook("import os\nvalue = 1\nprint(os.getpid(), 'value' in dir())"), zygote)
    second = run(notebook("import os\nprint(os.getpid(), 'value' in dir())"), zygote)
    first_pid, first_sees = first.cells[0].outputs[0].text.split()
    second_pid, second_sees = second.cells[0].outputs[0].text.split()
    assert len({first_pid, second_pid, str(zygote.process.pid)}) == 3
    assert (first_sees, second_sees) == ("True", "False")


def test_what_the_zygote_imported_is_frozen_and_a_page_still_collects_its_garbage(zygote):
    zygote.wait()
    cells = (
        "import gc, json\nprint(gc.get_freeze_count() > 0, gc.is_tracked(json.JSONDecoder))",
        "import gc, weakref\n"
        "class Node: pass\n"
        "a, b = Node(), Node()\n"
        "a.other, b.other = b, a  # a cycle: only the collector frees it\n"
        "alive = weakref.ref(a)\n"
        "del a, b\n"
        "gc.collect()\n"
        "print(alive() is None)",
    )
    executed = run(notebook(*cells), zygote)
    assert [cell.outputs[0].text for cell in executed.cells] == ["True True\n", "True\n"]


def test_a_cell_that_runs_too_long_is_interrupted(zygote):
    zygote.wait()
    with pytest.raises(CellTimeoutError):
        run(notebook("import time\ntime.sleep(60)"), zygote, timeout=2)


async def start_kernel(manager) -> int:
    """Start ``manager``'s kernel; the pid the kernel itself reports."""
    await manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=30)
        reply = await client.execute("import os; print(os.getpid())", reply=True)
        assert reply["content"]["status"] == "ok"
        message = await client.get_iopub_msg(timeout=10)
        while message["msg_type"] != "stream":
            message = await client.get_iopub_msg(timeout=10)
        return int(message["content"]["text"])
    finally:
        client.stop_channels()


def test_a_killed_client_takes_its_kernel_with_it(zygote):
    zygote.wait()
    manager = zygote.kernel_manager_class()()

    async def start_and_kill() -> int:
        pid = await start_kernel(manager)
        os.kill(manager.provisioner.process.pid, signal.SIGKILL)  # as kill_kernel does
        await manager.shutdown_kernel(now=True)  # reaps the client, frees the sockets
        return pid

    kernel_pid = asyncio.run(start_and_kill())
    assert wait_until(lambda: not alive(kernel_pid))


def test_stopping_the_zygote_ends_its_kernels(zygote):
    zygote.wait()
    manager = zygote.kernel_manager_class()()
    kernel_pid = asyncio.run(start_kernel(manager))
    client = manager.provisioner.process
    zygote.stop()
    assert wait_until(lambda: not alive(kernel_pid))
    assert wait_until(lambda: client.poll() is not None)
    asyncio.run(manager.shutdown_kernel(now=True))


def test_a_module_that_warns_or_fails_as_it_is_imported_is_reported(tmp_path, monkeypatch):
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "warns_on_import.py").write_text("import warnings\nwarnings.warn('hello')\n")
    (modules / "fails_on_import.py").write_text("raise RuntimeError('no luck')\n")
    monkeypatch.setenv("PYTHONPATH", str(modules))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    started = kernel_fork.Zygote(tmp_path / "build", ["warns_on_import", "fails_on_import"])
    try:
        assert started.wait() == [
            "warns_on_import: warned as it was imported: hello",
            "fails_on_import: not imported (RuntimeError: no luck)",
        ]
    finally:
        started.stop()


def test_a_zygote_that_ends_before_it_listens_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    started = kernel_fork.Zygote(tmp_path / "build", [])
    started.process.kill()
    with pytest.raises(RuntimeError, match="ended before it listened"):
        started.wait()
    started.stop()


def test_the_zygote_imports_what_the_pages_import(tmp_path):
    cells = [
        "%matplotlib inline\nimport torch\nfrom attention.masks import causal_mask",
        "import matplotlib.pyplot as plt, json\nfrom . import nothing",
        "def f():\n    import textwrap",
        "this is not Python",
    ]
    page = Page(tmp_path / "page.md", notebook(*cells))
    page.notebook.cells.append(nbformat.v4.new_markdown_cell("import markdown_only"))
    assert imported_modules([page]) == [
        "torch",
        "attention.masks",
        "matplotlib.pyplot",
        "json",
        "textwrap",
    ]


def test_torch_runs_on_several_threads_in_a_forked_kernel(tmp_path, monkeypatch):
    # The zygote imports torch but runs nothing: its thread pool starts in the kernel.
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    started = kernel_fork.Zygote(tmp_path / "build", ["torch"])
    try:
        assert started.wait() == []
        cell = "import torch\nx = torch.ones(512, 512)\nprint(torch.get_num_threads(), x.T @ x)"
        executed = run(notebook(cell), started, timeout=60)
        assert executed.cells[0].outputs[0].text.startswith("2 tensor([[512., 512.,")
    finally:
        started.stop()
