"""Gather the site's downloadable notebooks into the tree of the ``notebooks`` branch.

The launch buttons (docs/_ext/addresses.py) open ``<page>.ipynb`` on the repository's
``notebooks`` branch: Colab opens a notebook only from GitHub, and Binder builds an
environment from a repository. When the site is published
(``.github/workflows/pages.yml``), this tool copies every chapter's notebook, as a
reader downloads it (``_sources/<page>.ipynb``, with its install cell first), into
a folder at the same path, and adds what Binder installs before it starts (the
package at the site's version, with PyTorch's CPU build) and a README::

    python docs/tools/notebooks_branch.py docs/_build/html OUT

The workflow then commits ``OUT`` as the branch's only commit.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from addresses import NOTEBOOKS_BRANCH, from_pyproject
from downloads import requirement

CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # as noxfile.py installs torch


def pinned(name: str, constraints: Path = ROOT / ".ci" / "constraints.txt") -> str:
    """The version ``.ci/constraints.txt`` pins for ``name``.

    >>> pinned("torch").count(".")
    2
    """
    text = constraints.read_text(encoding="utf-8")
    found = re.search(rf"^{re.escape(name)}==(\S+)$", text, re.MULTILINE)
    if found is None:
        raise ValueError(f"{constraints} pins no {name!r}")
    return found.group(1)


def binder_requirements(version: str, torch: str) -> str:
    """Binder's ``requirements.txt``: the package at ``version``, on PyTorch's CPU build.

    >>> print(binder_requirements("1.2.3", "2.5.0"), end="")
    --extra-index-url https://download.pytorch.org/whl/cpu
    torch==2.5.0+cpu
    attention-step-by-step[plot,transformers]==1.2.3
    """
    return (
        f"--extra-index-url {CPU_INDEX}\n"
        f"torch=={torch}+cpu\n"
        f"{requirement(version, ('plot', 'transformers'))}\n"
    )


def gather(site: Path, out: Path, version: str, torch: str) -> list[str]:
    """Copy ``site``'s chapter notebooks into ``out``; return their paths in ``out``.

    Raises
    ------
    ValueError
        If ``site`` holds no notebook (it is not a built site).
    """
    sources = site / "_sources"
    notebooks = sorted(sources.rglob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"no notebook under {sources}: build the site first (nox -s docs)")
    shutil.rmtree(out, ignore_errors=True)
    written = []
    for notebook in notebooks:
        path = notebook.relative_to(sources)
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(notebook, out / path)
        written.append(path.as_posix())
    (out / "requirements.txt").write_text(binder_requirements(version, torch), "utf-8")
    where = from_pyproject()
    (out / "README.md").write_text(
        f"# The notebooks of {where.site}\n\n"
        f"Written by the site's publishing workflow from {where.repository}: do not edit this\n"
        f"branch ({NOTEBOOKS_BRANCH}), which is replaced each time the site is published.\n"
        "Each notebook is a page of the site, as its download button gives it, and its\n"
        "first cell installs the package it runs on.\n",
        "utf-8",
    )
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the built HTML folder")
    parser.add_argument("out", type=Path, help="the folder to fill (emptied first)")
    args = parser.parse_args(argv)
    import attention

    written = gather(args.site, args.out, attention.__version__, pinned("torch"))
    print(f"{len(written)} notebooks in {args.out} for the {NOTEBOOKS_BRANCH} branch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
