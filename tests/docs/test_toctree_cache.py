"""toctree_cache: the pages come out the same, and each toctree is worked out once."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import toctree_cache
from sphinx.environment.adapters import toctree as adapter

EXTENSIONS = Path(__file__).resolve().parents[2] / "docs" / "_ext"
SPHINX = [sys.executable, "-m", "sphinx", "-q", "-W", "-E", "-b", "html"]

PAGES = {
    "index.rst": """Home
====

.. toctree::
   :caption: Part one

   part/index
   part/b

.. toctree::
   :caption: More
   :hidden:

   self
   other
   https://example.org/
""",
    "part/index.rst": """Part
====

.. toctree::
   :hidden:

   a
""",
    "part/a.rst": """Page A
======

First
-----

Deeper
^^^^^^

.. only:: html

   Only in HTML
   ------------
""",
    "part/b.rst": "Page B\n======\n\nA section\n---------\n",
    "other.rst": "Other\n=====\n\nText.\n",
}


def build(top: Path, extensions: list[str]) -> Path:
    """Build the little project in the book theme with ``extensions``; the html folder."""
    docs = top / "docs"
    for name, text in PAGES.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
    (docs / "conf.py").write_text(
        f"extensions = {extensions!r}\nhtml_theme = 'sphinx_book_theme'\n"
    )
    html = docs / "_build" / "html"
    subprocess.run(
        [*SPHINX, "-j", "2", str(docs), str(html)],
        env={**os.environ, "PYTHONPATH": str(EXTENSIONS)},
        check=True,
    )
    return html


def pages(html: Path) -> list[str]:
    return sorted(str(path.relative_to(html)) for path in html.rglob("*.html"))


def test_every_page_is_the_same_with_the_cache_as_without(tmp_path):
    plain = build(tmp_path / "plain", [])
    cached = build(tmp_path / "cached", ["toctree_cache"])
    names = pages(plain)
    assert names == pages(cached) and "part/a.html" in names
    _, mismatch, errors = filecmp.cmpfiles(plain, cached, names, shallow=False)
    assert (mismatch, errors) == ([], [])
    sidebar = (cached / "part" / "a.html").read_text()
    assert "Page B" in sidebar and "Other" in sidebar  # the whole site's navigation


NOTE_ENTRIES = """
from sphinx.environment.adapters import toctree as adapter

_worked_out = adapter._toctree_entry


def _noted(title, ref, *args):
    with open({log!r}, "a") as log:
        log.write(ref + "\\n")
    return _worked_out(title, ref, *args)


adapter._toctree_entry = _noted
"""


def entries_worked_out(top: Path, extensions: list[str]) -> list[str]:
    """Build the project, one page after another; every toctree entry worked out.

    Without its ``only`` block, for which the cache keeps the entries a page apiece.
    """
    docs = top / "docs"
    for name, text in PAGES.items():
        text = text.split(".. only::")[0]
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
    log = top / "entries"
    (docs / "conf.py").write_text(
        f"extensions = {extensions!r}\nhtml_theme = 'sphinx_book_theme'\n"
        + NOTE_ENTRIES.format(log=str(log))
    )
    subprocess.run(
        [*SPHINX, str(docs), str(docs / "_build" / "html")],
        env={**os.environ, "PYTHONPATH": str(EXTENSIONS)},
        check=True,
    )
    return log.read_text().split()


def test_each_toctree_is_worked_out_once_for_all_pages(tmp_path):
    plain = entries_worked_out(tmp_path / "plain", [])
    cached = entries_worked_out(tmp_path / "cached", ["toctree_cache"])
    # Each entry at most twice with the cache: for every page's sidebar, and for the
    # list the home page itself shows. Without it, for each of the five pages and more.
    assert set(cached) == set(plain)
    assert max(Counter(cached).values()) <= 2
    assert min(Counter(plain).values()) >= len(PAGES)


def test_a_changed_sphinx_function_is_left_alone(monkeypatch):
    monkeypatch.setattr(toctree_cache, "EXPECTED", ["something", "else"])
    toctree_cache.start(SimpleNamespace(env=SimpleNamespace(tocs={})))
    assert adapter._entries_from_toctree is toctree_cache._ORIGINAL


@pytest.fixture(autouse=True)
def sphinx_function_restored():
    yield
    adapter._entries_from_toctree = toctree_cache._ORIGINAL
