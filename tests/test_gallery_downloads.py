"""The gallery's downloads run on their own, as a reader runs them.

These tests need a built site (``nox -s docs`` runs them right after building). In a
plain ``nox -s tests`` run, before any build, they are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOWNLOADS = ROOT / "docs" / "_build" / "html" / "_downloads"
GALLERY = sorted(p.name for p in (ROOT / "gallery").glob("*.py"))

if not DOWNLOADS.is_dir():
    if os.environ.get("ATTENTION_DOCS_BUILT"):
        raise RuntimeError(f"no built site at {DOWNLOADS}: did the docs build fail?")
    pytest.skip("the site is not built; run `nox -s docs`", allow_module_level=True)


def downloads(suffix: str) -> list[Path]:
    return sorted(DOWNLOADS.glob(f"*/*{suffix}"))


def run_env() -> dict[str, str]:
    return {**os.environ, "MPLBACKEND": "Agg"}


def test_every_gallery_script_is_offered_as_py_and_ipynb():
    assert GALLERY, "the gallery/ folder has no scripts"
    assert sorted(p.name for p in downloads(".py")) == GALLERY
    assert sorted(p.stem for p in downloads(".ipynb")) == [Path(n).stem for n in GALLERY]


@pytest.mark.parametrize(("kind", "suffix"), [("python", ".py"), ("jupyter", ".ipynb")])
def test_the_zip_of_all_examples_holds_every_script(kind, suffix):
    (archive,) = [z for z in downloads(".zip") if z.stem.endswith(kind)]
    names = sorted(Path(name).name for name in zipfile.ZipFile(archive).namelist())
    assert names == sorted(str(Path(name).with_suffix(suffix)) for name in GALLERY)


@pytest.mark.parametrize("script", downloads(".py"), ids=lambda p: p.name)
def test_downloaded_script_runs(script, tmp_path):
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=run_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize("notebook", downloads(".ipynb"), ids=lambda p: p.name)
def test_downloaded_notebook_runs(notebook, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, with the traceback, if a cell fails
