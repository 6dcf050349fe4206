"""viewcode_backlinks: every [docs] link of a highlighted source page lands on an anchor."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXTENSIONS = Path(__file__).resolve().parents[2] / "docs" / "_ext"

# A package whose module ``facts`` has a class the package re-exports and one it does
# not: the API page documents the first as ``pkg.Facts``, the second as
# ``pkg.facts.Group``, as docs/api.md does with ModelFacts and models.facts.Rope.
PACKAGE = {
    "__init__.py": "from pkg.facts import Facts\n",
    "facts.py": '''
class Facts:
    """What a model is."""

    def total(self):
        """The sum."""


class Group:
    """One group of facts."""

    def size(self):
        """Its size."""
''',
}
INDEX = """API
===

.. autoclass:: pkg.Facts
   :members:

.. autoclass:: pkg.facts.Group
   :members:
"""


def build(top: Path, extensions: list[str]) -> Path:
    """Build the little project with ``extensions`` and autodoc; return the html folder."""
    for name, text in PACKAGE.items():
        (top / "pkg").mkdir(exist_ok=True)
        (top / "pkg" / name).write_text(text)
    docs = top / "docs"
    docs.mkdir()
    (docs / "conf.py").write_text(f"extensions = {['sphinx.ext.autodoc', *extensions]!r}\n")
    (docs / "index.rst").write_text(INDEX)
    html = docs / "_build" / "html"
    path = os.pathsep.join((str(top), str(EXTENSIONS)))
    subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "-E", "-b", "html", str(docs), str(html)],
        env={**os.environ, "PYTHONPATH": path},
        check=True,
    )
    return html


def backlinks(html: Path) -> list[str]:
    """The anchors the [docs] links of pkg.facts's source page point at in index.html."""
    page = (html / "_modules" / "pkg" / "facts.html").read_text()
    return re.findall(r'class="viewcode-back" href="../../index.html#([^"]+)"', page)


def anchors(html: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', (html / "index.html").read_text()))


def test_viewcode_alone_links_the_unexported_class_to_a_missing_anchor(tmp_path):
    """The problem: one prefix per source module, that of its first documented object."""
    html = build(tmp_path, ["sphinx.ext.viewcode"])
    assert set(backlinks(html)) - anchors(html) == {"pkg.Group", "pkg.Group.size"}


@pytest.fixture(scope="module")
def fixed(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("fixed"), ["viewcode_backlinks"])


def test_every_backlink_lands_on_the_signature_of_its_object(fixed):
    expected = ["pkg.Facts", "pkg.Facts.total", "pkg.facts.Group", "pkg.facts.Group.size"]
    assert backlinks(fixed) == expected
    assert set(expected) <= anchors(fixed)


def test_the_source_links_still_land_on_the_source_blocks(fixed):
    index, source = (fixed / "index.html").read_text(), fixed / "_modules/pkg/facts.html"
    for name in ("Facts", "Facts.total", "Group", "Group.size"):
        assert f'href="_modules/pkg/facts.html#{name}"' in index
        assert f'<div class="viewcode-block" id="{name}">' in source.read_text()
