"""The docs build's Jupyter kernels: an IPython folder of its own, a quick exit."""

import os
import subprocess
import sys
from types import SimpleNamespace

import kernels
import nbformat
from nbclient import NotebookClient


def fake_app(tmp_path):
    return SimpleNamespace(outdir=str(tmp_path / "_build" / "html"))


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


def test_each_build_starts_from_a_fresh_ipython_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("IPYTHONDIR", "restored after the test")
    app = fake_app(tmp_path)
    stale = kernels.add_startup_file(app, "10-from-an-earlier-build.py", "raise SystemExit\n")

    kernels.on_config_inited(app, config=None)

    startup = kernels.startup_folder(kernels.ipython_dir(app))
    assert not stale.exists()
    assert [path.name for path in startup.iterdir()] == ["00-exit-fast.py"]
    assert os.environ["IPYTHONDIR"] == str(kernels.ipython_dir(app))


def test_a_kernel_of_the_build_runs_its_startup_files_and_the_chapters_exit_handlers(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("IPYTHONDIR", "restored after the test")
    app = fake_app(tmp_path)
    kernels.on_config_inited(app, config=None)
    kernels.add_startup_file(app, "10-marker.py", "STARTED_BY_THE_BUILD = True\n")
    written = tmp_path / "written-at-exit.txt"
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("print(STARTED_BY_THE_BUILD)"),
            nbformat.v4.new_code_cell(
                "import atexit, pathlib\n"
                f"atexit.register(pathlib.Path({str(written)!r}).write_text, 'done')"
            ),
        ]
    )
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}

    NotebookClient(notebook, timeout=60, kernel_name="python3").execute()

    assert notebook.cells[0].outputs[0]["text"] == "True\n"
    assert written.read_text() == "done"  # the kernel has exited, its handler ran
