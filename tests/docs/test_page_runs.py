"""The docs build's Jupyter kernels: an IPython folder of its own, a quiet log
(docs/_ext/page_runs.py)."""

import os
from types import SimpleNamespace

import nbformat
import page_runs as kernels
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


def test_each_build_starts_from_a_fresh_ipython_folder(tmp_path, build_environment):
    app = fake_app(tmp_path)
    stale = kernels.ipython_dir(app) / "profile_default" / "startup" / "10-earlier.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("raise SystemExit\n")

    kernels.on_config_inited(app, config=None)

    ipython = kernels.ipython_dir(app)
    assert not stale.exists()
    assert [path.name for path in (ipython / "profile_default").iterdir()] == [
        "ipython_kernel_config.py"
    ]
    assert os.environ["IPYTHONDIR"] == str(ipython)


LOG_ANOTHER_WARNING = (
    "from ipykernel.kernelapp import IPKernelApp\n"
    "IPKernelApp.instance().log.warning('a warning of the kernel that must be seen')"
)


def test_a_plain_kernel_logs_the_tcp_notice(tmp_path, monkeypatch, capfd):
    # What the build's kernels would print without their configuration: if ipykernel
    # stops printing it, this fails, and the filter in page_runs.py can go.
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
