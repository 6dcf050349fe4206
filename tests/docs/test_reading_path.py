"""The reader's path: every "Next" link leads to the next page, and the strip shows it.

The path is the home page's Part toctrees in order (``docs/_ext/reading_path.py``
reads them): each Part's landing page, its chapters, its recap. Starting at chapter 1,
the "Next" link of each page (a ``## Next`` section, or a paragraph that starts with
``**Next:**``; its first ``{doc}`` link) must lead to the page after it, so that a
reader who only ever follows "Next" reads every page, in order. A skipped page, a link
back, a page with no "Next" or a link to no page fails, naming the page.

The "you are here" strip and the Parts' lists are checked on a small Sphinx project:
three pages in two Parts, built for real.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from reading_path import Part, parts_from_index, short_label

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXTENSIONS = DOCS / "_ext"
FIRST = "chapters/01-attention-without-weights"

NEXT_SECTION = re.compile(r"^## (?:Next|What's next)\n(.*?)(?=^## |\Z)", re.M | re.S)
NEXT_PARAGRAPH = re.compile(r"^\*\*Next:\*\*(.*?)(?=\n\n|\Z)", re.M | re.S)
DOC_LINK = re.compile(r"\{doc\}`(?:[^`<]*<)?([^`>]+)>?`")


def next_link(page: str, text: str) -> str | None:
    """The docname that a page's "Next" points at, or None if it has no "Next" link.

    Examples
    --------
    >>> next_link("chapters/02", "## Next\\n\\nThen {doc}`03-masks` hides the future.\\n")
    'chapters/03-masks'
    >>> next_link("chapters/13", "**Next:** {doc}`the recap <../parts/part-2-recap>`.")
    'parts/part-2-recap'
    """
    found = NEXT_SECTION.search(text) or NEXT_PARAGRAPH.search(text)
    link = DOC_LINK.search(found.group(1)) if found else None
    if link is None:
        return None
    target = link.group(1).strip()
    if target.startswith("/"):
        return target.lstrip("/")
    return posixpath.normpath(posixpath.join(posixpath.dirname(page), target))


def walk(order: list[str], read: Callable[[str], str | None]) -> list[str]:
    """Follow "Next" from ``order[0]``; a message for every step that is not the next page.

    ``read(docname)`` gives a page's source, or None where there is no such page. The
    last page of ``order`` must link to a page that exists, outside the path.
    """
    problems = []
    for here, expected in zip(order, [*order[1:], None], strict=True):
        text = read(here)
        if text is None:
            problems.append(f"{here}: no such page")
            continue
        target = next_link(here, text)
        if target is None:
            problems.append(f"{here}: no 'Next' link (a dead end)")
        elif expected is None:
            if read(target) is None:
                problems.append(f"{here}: 'Next' leads to {target}, which is no page")
        elif target != expected:
            where = f"{order.index(target) + 1}" if target in order else "off the path"
            problems.append(
                f"{here}: 'Next' leads to {target} (page {where}), not to {expected} "
                f"(page {order.index(expected) + 1})"
            )
    return problems


def read_source(docname: str) -> str | None:
    path = DOCS / f"{docname}.md"
    return path.read_text(encoding="utf-8") if path.exists() else None


def site_path() -> list[str]:
    parts = parts_from_index((DOCS / "index.md").read_text(encoding="utf-8"))
    return [page for part in parts for page in part.pages]


def test_the_path_holds_every_chapter_once_from_chapter_1() -> None:
    path = site_path()
    chapters = sorted(f"chapters/{page.stem}" for page in (DOCS / "chapters").glob("*.md"))
    assert path[0] == FIRST
    assert len(path) == len(set(path)), "a page is listed twice"
    assert sorted(page for page in path if page.startswith("chapters/")) == chapters


def test_following_next_from_chapter_1_reads_every_page_in_order() -> None:
    path = site_path()
    problems = walk(path, read_source)
    print(f"{len(path)} pages followed, from {path[0]} to {path[-1]}")
    assert not problems, "\n".join(problems)


PAGES = {
    "a": "# A\n\n## Next\n\nOn to {doc}`b`.\n",
    "b": "# B\n\n**Next:** {doc}`c`, the last.\n",
    "c": "# C\n\n**Next:** {doc}`/outside`.\n",
    "outside": "# Outside\n",
}


def test_the_walk_passes_a_path_that_holds() -> None:
    assert walk(["a", "b", "c"], PAGES.get) == []


def test_the_walk_fails_on_a_skipped_page() -> None:
    skipping = {**PAGES, "a": "# A\n\n## Next\n\nOn to {doc}`c`.\n"}
    assert walk(["a", "b", "c"], skipping.get) == [
        "a: 'Next' leads to c (page 3), not to b (page 2)"
    ]


def test_the_walk_fails_on_a_dead_end_and_a_missing_page() -> None:
    dead_end = {**PAGES, "b": "# B\n\nNo way on.\n", "c": "# C\n\n**Next:** {doc}`nowhere`\n"}
    assert walk(["a", "b", "c"], dead_end.get) == [
        "b: no 'Next' link (a dead end)",
        "c: 'Next' leads to nowhere, which is no page",
    ]


INDEX = """\
# Home

```{toctree}
:caption: "Part I: one head"
:hidden:

one
```

```{toctree}
:caption: "Part II: today"
:maxdepth: 1
:hidden:

parts/part-2
chapters/08-kv
chapters/09-gqa
parts/part-2-recap
```
"""

CHAPTER = """\
# {title}

:::{{admonition}} At a glance
- **Mechanism:** {mechanism}
- **Cost:** nothing.
:::

## In short

- Shapes: `{shape}`.
"""


def test_parts_are_read_from_the_home_page_with_a_new_chapter_included() -> None:
    with_new = INDEX.replace("chapters/09-gqa\n", "chapters/09-gqa\nchapters/09b-new\n")
    assert parts_from_index(with_new) == [
        Part("I", "one head", ("one",)),
        Part(
            "II",
            "today",
            (
                "parts/part-2",
                "chapters/08-kv",
                "chapters/09-gqa",
                "chapters/09b-new",
                "parts/part-2-recap",
            ),
        ),
    ]
    assert [Part("VII", "x", ()).number, Part("IV", "x", ()).number] == [7, 4]


def test_the_strip_labels_chapters_by_number() -> None:
    part = Part("II", "today", ("parts/part-2", "chapters/21b-ssd", "parts/part-2-recap"))
    assert short_label("21b. Mamba-2's SSD", "chapters/21b-ssd", part) == "21b"
    assert short_label("Part II: today", "parts/part-2", part) == "intro"
    assert short_label("Part II in short", "parts/part-2-recap", part) == "recap"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-Part project with a landing page and a recap, built to HTML."""
    src = tmp_path_factory.mktemp("path")
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(EXTENSIONS)!r})\n"
        'extensions = ["myst_parser", "reading_path"]\nhtml_theme = "basic"\n'
    )
    (src / "index.md").write_text(INDEX)
    (src / "one.md").write_text("# 1. One head\n")
    (src / "chapters").mkdir()
    (src / "chapters" / "08-kv.md").write_text(
        CHAPTER.format(
            title="8. The KV cache", mechanism="keep keys; see {doc}`09-gqa`.", shape="k (b, T)"
        )
    )
    (src / "chapters" / "09-gqa.md").write_text(
        CHAPTER.format(title="9. Grouped heads", mechanism="share heads.", shape="q (b, h)")
    )
    (src / "parts").mkdir()
    (src / "parts" / "part-2.md").write_text("# Part II: today\n\n```{part-chapters}\n```\n")
    (src / "parts" / "part-2-recap.md").write_text("# Part II in short\n\n```{part-shapes}\n```\n")
    out = src / "_build"
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", str(src), str(out)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    return out


def strip_of(html: str) -> str:
    found = re.search(r'<div class="you-are-here[^"]*">(.*?)</ul>', html, re.S)
    assert found, "no strip on the page"
    return found.group(1)


def test_a_chapter_opens_with_its_part_and_its_place_in_it(built: Path) -> None:
    html = (built / "chapters" / "09-gqa.html").read_text()
    strip = strip_of(html)
    assert html.index("you-are-here") > html.index("<h1>")  # under the title
    assert html.index("you-are-here") < html.index("At a glance")
    assert "Part II: today" in strip
    assert re.search(r'href="08-kv.html" title="8. The KV cache">8</a>', strip)
    assert re.search(r'<li class="current"><p><strong>9</strong>', strip)
    assert re.search(r'href="../parts/part-2-recap.html"[^>]*>recap</a>', strip)


def test_part_i_has_no_strip(built: Path) -> None:
    assert "you-are-here" not in (built / "one.html").read_text()


def test_the_landing_page_lists_each_chapter_with_its_mechanism(built: Path) -> None:
    html = (built / "parts" / "part-2.html").read_text()
    listing = html.split('class="part-chapters', 1)[1].split("</ul>", 1)[0]
    listed = re.findall(r'href="([^"]+)"', listing)
    # chapter 8, then the link in its mechanism, made absolute, then chapter 9
    assert listed == [
        "../chapters/08-kv.html",
        "../chapters/09-gqa.html",
        "../chapters/09-gqa.html",
    ]
    assert "keep keys; see" in listing and "share heads." in listing
    assert "recap" not in listing  # the Part's own pages are no chapters


def test_the_recap_lists_each_chapters_shapes(built: Path) -> None:
    html = (built / "parts" / "part-2-recap.html").read_text()
    listing = html.split('class="part-shapes', 1)[1].split("</ul>", 1)[0]
    text = re.sub(r"<[^>]+>", "", listing)
    assert "8. The KV cache: k (b, T)." in text
    assert "9. Grouped heads: q (b, h)." in text
