"""The reader's path through the Parts: a "you are here" strip, and each Part's lists.

The Parts are the captioned toctrees of the home page, ``index.md`` (``:caption: "Part
II: attention in today's LLMs"``), in their order. Everything here is read from them,
so that a chapter added to a Part's toctree shows up everywhere with no other edit:

- **The strip.** Every page of a Part from :data:`STRIP_FROM` on (Part II, chapter 8)
  opens, under its title, with a one-line strip: the Part's name, linked to its first
  page (its landing page), then one small link per page of the Part, labelled with the
  chapter's number (``8``, ``23``) and the page's title as a tooltip, the current one
  marked; the landing page is "intro", the recap "recap". It is drawn when the page is
  written (``doctree-resolved``), from the titles Sphinx has read, and fits one or two
  lines on a phone.
- ``{part-chapters}`` writes, on a Part's landing page, a list of the Part's chapters,
  each with the "Mechanism" line of its "At a glance" box.
- ``{part-shapes}`` writes, on a Part's recap page, each chapter's "Shapes" line, from
  its "In short" list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

# A Part's toctree on the home page: its caption, then its entries up to the fence.
TOCTREE = re.compile(r':caption: "Part ([IVX]+): ([^"]+)"\n(.*?)^```', re.S | re.M)
ENTRY = re.compile(r"^(?!:)(\S+)\s*$", re.M)
# The strip starts with Part II: Part I's seven chapters have the home page above them.
STRIP_FROM = 2
ROMAN = {"I": 1, "V": 5, "X": 10}
# "- **Mechanism:** ..." in "At a glance", "- Shapes: ..." in "In short": a bullet runs
# on over its indented lines.
MECHANISM = re.compile(r"^- \*\*Mechanism:\*\* (.*?)(?=^\S|^- |\Z)", re.S | re.M)
SHAPES = re.compile(r"^- Shapes: (.*?)(?=^\S|^- |\Z)", re.S | re.M)
# A chapter's number, as its title starts: "8. The KV cache", "23. Mamba-2's SSD".
NUMBER = re.compile(r"^(\d+[a-z]?)\.\s")
DOC_ROLE = re.compile(r"\{doc\}`([^`<]*<)?([^`>]+)(>?)`")


@dataclass(frozen=True)
class Part:
    """One Part of the path: its numeral, its name and its pages in reading order."""

    numeral: str
    name: str
    pages: tuple[str, ...]

    @property
    def number(self) -> int:
        """The numeral as an integer: ``"IV"`` is 4."""
        values = [ROMAN[letter] for letter in self.numeral]
        return sum(-v if v < w else v for v, w in zip(values, [*values[1:], 0], strict=True))

    @property
    def label(self) -> str:
        """``"Part II: attention in today's LLMs"``."""
        return f"Part {self.numeral}: {self.name}"


def parts_from_index(text: str) -> list[Part]:
    """The Parts that the home page's captioned toctrees list, in order.

    Parameters
    ----------
    text : str
        The home page's source (``docs/index.md``).

    Returns
    -------
    list of Part
        One per toctree captioned ``"Part <numeral>: <name>"``, its pages as docnames
        (``chapters/08-kv-cache``), options and blank lines left out.

    Examples
    --------
    >>> index = '```{toctree}\\n:caption: "Part II: today"\\n:hidden:\\n\\nchapters/08\\n```\\n'
    >>> parts_from_index(index)
    [Part(numeral='II', name='today', pages=('chapters/08',))]
    """
    return [
        Part(numeral, name, tuple(ENTRY.findall(body)))
        for numeral, name, body in TOCTREE.findall(text)
    ]


def part_of(parts: list[Part], docname: str) -> Part | None:
    """The Part whose toctree lists ``docname``, or None for a page in none of them."""
    return next((part for part in parts if docname in part.pages), None)


def short_label(title: str, docname: str, part: Part) -> str:
    """A page's label in the strip: its chapter's number, or a word for the others."""
    found = NUMBER.match(title)
    if found:
        return found.group(1)
    if docname == part.pages[0]:
        return "intro"  # the Part's name, linked to the same page, opens the strip
    if docname == part.pages[-1] and "recap" in docname:
        return "recap"
    return title


def read_parts(app: Sphinx) -> list[Part]:
    """The Parts of the project being built, from its ``index.md``."""
    index = Path(app.srcdir, "index.md")
    return parts_from_index(index.read_text(encoding="utf-8")) if index.exists() else []


def add_strip(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Put the "you are here" strip under the title of a page of Part II or later."""
    if app.builder.format != "html":
        return
    part = part_of(read_parts(app), docname)
    if part is None or part.number < STRIP_FROM:
        return
    sections = list(doctree.findall(nodes.section))
    if not sections or not isinstance(sections[0][0], nodes.title):
        return
    strip = nodes.container(classes=["you-are-here"])
    landing = part.pages[0]
    heading = nodes.paragraph(classes=["you-are-here-part"])
    heading += nodes.reference(
        "", part.label, refuri=app.builder.get_relative_uri(docname, landing)
    )
    strip += heading
    steps = nodes.bullet_list(classes=["you-are-here-steps"])
    for page in part.pages:
        title = app.env.titles[page].astext() if page in app.env.titles else page
        item = nodes.list_item(classes=["current"] if page == docname else [])
        label = short_label(title, page, part)
        if page == docname:
            # The current page is marked, not linked: the reader is on it.
            item += nodes.paragraph("", "", nodes.strong(label, label))
        else:
            uri = app.builder.get_relative_uri(docname, page)
            item += nodes.paragraph(
                "", "", nodes.reference(label, label, refuri=uri, reftitle=title)
            )
        steps += item
    strip += steps
    # Right under the title, above the "At a glance" box.
    sections[0].insert(1, strip)


def chapter_bullet(env_srcdir: Path, page: str, pattern: re.Pattern[str]) -> str | None:
    """The text of a chapter's bullet matched by ``pattern``, its links made absolute."""
    source = env_srcdir / f"{page}.md"
    if not source.exists():
        return None
    found = pattern.search(source.read_text(encoding="utf-8"))
    if not found:
        return None
    text = " ".join(found.group(1).split())
    folder = str(Path(page).parent)

    def absolute(match: re.Match[str]) -> str:
        # {doc} targets are relative to the chapter; the list sits on another page.
        before, target, after = match.group(1) or "", match.group(2), match.group(3)
        if not target.startswith("/"):
            target = "/" + str(Path(folder, target)).replace("\\", "/")
            target = re.sub(r"/[^/]+/\.\./", "/", target)
        return f"{{doc}}`{before}{target}{after}`"

    return DOC_ROLE.sub(absolute, text)


class PartList(SphinxDirective):
    """A list of the current Part's chapters, each with a line read from the chapter."""

    pattern: re.Pattern[str] = MECHANISM
    has_content = False

    def run(self) -> list[nodes.Node]:
        index = Path(self.env.srcdir, "index.md")
        self.env.note_dependency(str(index))
        part = part_of(parts_from_index(index.read_text(encoding="utf-8")), self.env.docname)
        if part is None:
            raise self.error(f"{self.name}: {self.env.docname} is in no Part's toctree")
        lines = []
        for page in part.pages:
            # The Part's own pages (its landing page and recap, in parts/) are no
            # chapters: only the chapters are listed.
            if Path(page).parent == Path(self.env.docname).parent:
                continue
            self.env.note_dependency(str(Path(self.env.srcdir, f"{page}.md")))
            text = chapter_bullet(Path(self.env.srcdir), page, self.pattern)
            lines.append(f"- {{doc}}`/{page}`" + (f": {text}" if text else ""))
        container = nodes.container(classes=[self.name])
        self.state.nested_parse(StringList(lines, source=self.env.docname), 0, container)
        return [container]


class PartShapes(PartList):
    """Each chapter of the current Part, with the "Shapes" line of its "In short"."""

    pattern = SHAPES


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("part-chapters", PartList)
    app.add_directive("part-shapes", PartShapes)
    app.connect("doctree-resolved", add_strip)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
