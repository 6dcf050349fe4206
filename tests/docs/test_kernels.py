"""The docs build's Jupyter kernels: an IPython folder of its own, a quick exit, a quiet log."""

import os
import subprocess
import sys
from types import SimpleNamespace

import kernels
import nbformat
import pytest
from nbclient import NotebookClient


def fake_app(tmp_path, parallel=2):
    return SimpleNamespace(outdir=str(tmp_path / "_build" / "html"), parallel=parallel)


@pytest.fixture
def build_environment(monkeypatch):
    """The variables the extension sets, restored after the test."""
    monkeypatch.setenv("IPYTHONDIR", "restored after the test")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def run_notebook(*sources: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    NotebookClient(notebook, timeout=60, kernel_name="python3").execute()
    return notebook


def test_the_exit_handler_skips_only_the_handlers_registered_before_it():
    # Handlers run last-registered first: the chapter's own (registered after the
    # startup file) still run; the kernel's earlier housekeeping is skipped.
    program = (
        "import atexit\n"
        "atexit.register(print, 'registered before the startup file')\n"
        f"exec({kernels.EXIT_FAST!r})\n"
        "atexit.register(print, 'registered by the chapter')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout == "registered by the chapter\n"


def test_each_build_starts_from_a_fresh_ipython_folder(tmp_path, build_environment):
    app = fake_app(tmp_path)
    stale = kernels.add_startup_file(app, "10-from-an-earlier-build.py", "raise SystemExit\n")

    kernels.on_config_inited(app, config=None)

    ipython = kernels.ipython_dir(app)
    startup = kernels.startup_folder(ipython)
    assert not stale.exists()
    assert [path.name for path in startup.iterdir()] == ["00-exit-fast.py"]
    assert (ipython / "profile_default" / "ipython_kernel_config.py").is_file()
    assert os.environ["IPYTHONDIR"] == str(ipython)


def test_a_kernel_of_the_build_runs_its_startup_files_and_the_chapters_exit_handlers(
    tmp_path, build_environment
):
    app = fake_app(tmp_path)
    kernels.on_config_inited(app, config=None)
    kernels.add_startup_file(app, "10-marker.py", "STARTED_BY_THE_BUILD = True\n")
    written = tmp_path / "written-at-exit.txt"

    at_exit = f"atexit.register(pathlib.Path({str(written)!r}).write_text, 'done')"
    notebook = run_notebook("print(STARTED_BY_THE_BUILD)", f"import atexit, pathlib\n{at_exit}")

    assert notebook.cells[0].outputs[0]["text"] == "True\n"
    assert written.read_text() == "done"  # the kernel has exited, its handler ran


LOG_ANOTHER_WARNING = (
    "from ipykernel.kernelapp import IPKernelApp\n"
    "IPKernelApp.instance().log.warning('a warning of the kernel that must be seen')"
)


def test_a_plain_kernel_logs_the_tcp_notice(tmp_path, monkeypatch, capfd):
    # What the build's kernels would print without their configuration: if ipykernel
    # stops printing it, this fails, and the filter in kernels.py can go.
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "plain-ipython"))
    run_notebook("1")
    assert kernels.TCP_NOTICE in capfd.readouterr().err


def test_a_kernel_of_the_build_logs_no_tcp_notice_and_every_other_warning(
    tmp_path, build_environment, capfd
):
    kernels.on_config_inited(fake_app(tmp_path), config=None)
    run_notebook(LOG_ANOTHER_WARNING)
    log = capfd.readouterr().err
    assert kernels.TCP_NOTICE not in log
    assert "WARNING | a warning of the kernel that must be seen" in log


@pytest.mark.parametrize(("cores", "jobs", "threads"), [(2, 2, 1), (8, 2, 4), (2, 1, 2), (2, 4, 1)])
def test_each_kernel_gets_a_jobs_share_of_the_cores(monkeypatch, cores, jobs, threads):
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert kernels.threads_per_job(jobs) == threads


def test_the_kernels_thread_count_is_set_unless_the_environment_has_one(
    tmp_path, build_environment, monkeypatch
):
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    kernels.on_config_inited(fake_app(tmp_path, parallel=2), config=None)
    assert os.environ["OMP_NUM_THREADS"] == "4"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    kernels.on_config_inited(fake_app(tmp_path, parallel=2), config=None)
    assert os.environ["OMP_NUM_THREADS"] == "3"
