"""The tree of the ``notebooks`` branch (docs/tools/notebooks_branch.py), which the
launch buttons open: every chapter's notebook as downloaded, at its page's path, and
what Binder installs first."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from notebooks_branch import gather

import attention


def test_every_downloaded_notebook_lands_at_its_pages_path(tmp_path: Path) -> None:
    site, out = tmp_path / "html", tmp_path / "branch"
    for page in ("index", "chapters/01-one", "chapters/02-two"):
        path = site / "_sources" / f"{page}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(page)]), path)
    (out / "stale.ipynb").parent.mkdir()
    (out / "stale.ipynb").write_text("{}")

    written = gather(site, out, "1.2.3", "2.5.0")

    assert written == ["chapters/01-one.ipynb", "chapters/02-two.ipynb", "index.ipynb"]
    assert nbformat.read(out / "chapters/02-two.ipynb", as_version=4).cells[0].source == (
        "chapters/02-two"
    )
    assert not (out / "stale.ipynb").exists()  # the branch holds this build's notebooks only
    requirements = (out / "requirements.txt").read_text().splitlines()
    assert "attention-step-by-step[plot,transformers]==1.2.3" in requirements
    assert "torch==2.5.0+cpu" in requirements


def test_a_folder_without_notebooks_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no notebook under .*: build the site first"):
        gather(tmp_path, tmp_path / "out", attention.__version__, "2.5.0")
