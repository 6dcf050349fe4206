"""The length of the prose's sentences in Parts II–VII (issue 46): light enough to read.

Every chapter from chapter 8 on (``docs/chapters/NN-*.md`` with NN >= 8, a lettered
chapter such as ``21b-...`` included), every page the toctrees of Parts II–VII in
``docs/index.md`` list, and "Measuring attention" must keep a mean sentence length of at
most 21 words, with no sentence over 45 words. Part I's chapters read at about 19 words a
sentence; the later Parts are held to nearly the same. ``pytest -s`` prints the figures
of every checked chapter: words, sentences, mean and longest.

What counts as prose
--------------------
The paragraphs and list items a reader reads as text, the "At a glance" box and the
dropdowns' text included. Left out: the front matter; everything between code fences
(code cells with their metadata, so figures' alt text too, ``literalinclude``, plain code
blocks); display math (``$$ ... $$``); tables (lines that start with ``|``); quotations
(lines that start with ``>``); headings; labels (``(name)=``); HTML lines; and each
``:::`` directive's opening line (the admonition's or dropdown's title) and its
``:option:`` lines. The chapters have no figure directive: their figures are code cells,
whose alt text is a description for screen readers, not running prose, so it is left
out with the cell.

What a sentence is
------------------
A sentence ends at ``.``, ``!`` or ``?`` (with any closing bracket or quote after it)
followed by white space, unless the word so ending is an abbreviation in
``ABBREVIATIONS`` ("e.g.", "i.e.", "et al.", ...). A paragraph's or a list item's end also
ends a sentence: each item of a list is read as a unit of its own, so a list whose items
end in semicolons counts as one sentence per item. Colons and semicolons do not end a
sentence. The periods inside inline code, inline math, roles and numbers (``3.5``) end
nothing, since no white space follows them there.

What a word is
--------------
A run of characters between white space that holds a letter or a digit, after these
replacements: inline code (``torch.cat``), inline math (``$d_k \\times d_v$``) and a role
without its own text (``{doc}`21-gated-deltanet```, ``{class}`~attention.KVCache```)
count one word each; a role or a link with its own text (``{doc}`Kimi Linear <...>```,
``[Notation](../notation.md)``) counts the words of that text; emphasis marks count
nothing. A number such as 1,024 or 0.25 is one word, as are "e.g.", "float64" and
"top-k"; a dash standing alone is no word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
MAX_MEAN = 21.0
MAX_WORDS = 45
FIRST_CHAPTER = 8  # Part II's first chapter
ALSO_CHECKED = ["measuring-attention"]  # written with Part II's tools, filed under Part I

ABBREVIATIONS = {"e.g.", "i.e.", "etc.", "vs.", "cf.", "al.", "approx.", "no.", "fig."}

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
COLON_FENCE = re.compile(r"^\s*(:{3,})(\{[\w-]+\})?")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
OPTION = re.compile(r"^\s*:[\w-]+:(\s|$)")
LABEL = re.compile(r"^\s*\([\w.:-]+\)=\s*$")

INLINE_CODE = re.compile(r"(`+)(.+?)\1")
ROLE = re.compile(r"\{[\w:-]+\}`([^`]*)`")
INLINE_MATH = re.compile(r"\$[^$]+\$")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
SENTENCE_END = re.compile(r"(?<=[.!?])[)\]\"'”’]*\s+")


def chapters() -> list[Path]:
    """The pages of Parts II–VII, found by name and in the toctrees, in file order."""
    numbered = re.compile(r"^(\d+)[a-z]?-")
    pages = {
        path
        for path in DOCS.glob("chapters/*.md")
        if (match := numbered.match(path.name)) and int(match.group(1)) >= FIRST_CHAPTER
    }
    pages |= {DOCS / "chapters" / f"{name}.md" for name in ALSO_CHECKED}
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for part, body in re.findall(r':caption: "Part ([IV]+):[^"]*"\n(.*?)```', index, re.S):
        if part != "I":
            pages |= {DOCS / f"{page}.md" for page in re.findall(r"^(chapters/\S+)$", body, re.M)}
    return sorted(page for page in pages if page.exists())


def prose_paragraphs(markdown: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of every paragraph and list item a reader reads as prose."""
    lines = markdown.splitlines()
    start = lines.index("---", 1) + 1 if lines and lines[0].strip() == "---" else 0
    paragraphs: list[tuple[int, str]] = []
    current: list[str] = []
    first = 0
    fence = None  # the backticks or tildes that opened the fence we are in
    in_math = False

    def close() -> None:
        nonlocal current
        if current:
            paragraphs.append((first, " ".join(current)))
        current = []

    for number, line in enumerate(lines[start:], start=start + 1):
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        if in_math:
            in_math = not stripped.endswith("$$")
            continue
        if match := FENCE.match(line):
            close()
            fence = match.group(1)
            continue
        if stripped.startswith("$$"):
            close()
            in_math = not (len(stripped) > 2 and stripped.endswith("$$"))
            continue
        skipped = (
            not stripped
            or COLON_FENCE.match(line)
            or OPTION.match(line)
            or LABEL.match(line)
            or stripped.startswith(("#", "|", ">", "<", "+++"))
        )
        if skipped:
            close()
            continue
        if LIST_ITEM.match(line):
            close()
            line = LIST_ITEM.sub("", line, count=1)
        if not current:
            first = number
        current.append(line.strip())
    close()
    return paragraphs


def plain(text: str) -> str:
    """The paragraph as a reader counts it: each code, math or bare role one word."""
    text = ROLE.sub(lambda m: _role_text(m.group(1)), text)
    text = INLINE_CODE.sub("CODE", text)
    text = INLINE_MATH.sub("MATH", text)
    text = LINK.sub(r"\1", text)
    return re.sub(r"(\*\*|__|(?<!\w)[*_]|[*_](?!\w))", "", text)


def _role_text(target: str) -> str:
    explicit = re.match(r"(.*\S)\s*<[^>]*>$", target, re.S)
    return explicit.group(1) if explicit else "ROLE"


def sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph (of its plain text, see ``plain``)."""
    found, start = [], 0
    text = plain(paragraph)
    for end in SENTENCE_END.finditer(text):
        last_word = text[start : end.start()].split()[-1:] or [""]
        if last_word[0].lower().lstrip("(\"'") in ABBREVIATIONS:
            continue
        found.append(text[start : end.start()].strip())
        start = end.end()
    found.append(text[start:].strip())
    return [sentence for sentence in found if word_count(sentence)]


def word_count(sentence: str) -> int:
    return sum(1 for token in sentence.split() if re.search(r"\w", token))


@dataclass
class Figures:
    words: int
    sentences: int
    longest: int

    @property
    def mean(self) -> float:
        return self.words / self.sentences if self.sentences else 0.0


def long_sentences(markdown: str) -> list[tuple[int, int, str]]:
    """``(line, words, sentence)`` for every sentence over ``MAX_WORDS`` words."""
    return [
        (line, word_count(sentence), sentence)
        for line, paragraph in prose_paragraphs(markdown)
        for sentence in sentences(paragraph)
        if word_count(sentence) > MAX_WORDS
    ]


def figures(markdown: str) -> Figures:
    counts = [
        word_count(sentence)
        for _, paragraph in prose_paragraphs(markdown)
        for sentence in sentences(paragraph)
    ]
    return Figures(sum(counts), len(counts), max(counts, default=0))


def test_the_counter_skips_what_is_not_prose_and_counts_what_is():
    page = "\n".join(
        [
            "---",
            "file_format: mystnb",
            "---",
            "# A heading of many words that is not a sentence",
            "",
            ":::{admonition} At a glance title",
            ":class: tip",
            "- **Mechanism:** one item, e.g. this one. Two sentences here!",
            "- and a second item;",
            ":::",
            "",
            "(a-label)=",
            "The cache holds 1,024 tokens (see {doc}`08-kv-cache`), and `torch.cat`",
            "copies it at Qwen3.5's size. {doc}`Kimi Linear <../models/kimi-linear>` and",
            "$d_k \\times d_v$ are [the notation](../notation.md) et al. here.",
            "",
            "```{code-cell} ipython3",
            "---",
            "alt: A long alt text. With sentences.",
            "---",
            "print('Not prose. At all.')",
            "```",
            "",
            "$$",
            "S = k v^T. Not prose.",
            "$$",
            "",
            "| a table | of words. |",
            "> A quotation. Of two sentences.",
        ]
    )
    found = [
        (line, sentence)
        for line, paragraph in prose_paragraphs(page)
        for sentence in sentences(paragraph)
    ]
    assert found == [
        (8, "Mechanism: one item, e.g. this one."),
        (8, "Two sentences here!"),
        (9, "and a second item;"),
        (13, "The cache holds 1,024 tokens (see ROLE), and CODE copies it at Qwen3.5's size."),
        (13, "Kimi Linear and MATH are the notation et al. here."),
    ]
    assert [word_count(sentence) for _, sentence in found] == [6, 3, 4, 14, 10]
    assert figures(page) == Figures(words=37, sentences=5, longest=14)


def test_every_later_chapter_is_checked_by_its_name_alone():
    names = [page.stem for page in chapters()]
    assert names[0].startswith("08-") and "measuring-attention" in names
    assert not any(name.startswith(("01-", "07-")) for name in names)


@pytest.fixture(scope="module", autouse=True)
def print_the_figures():
    """With ``pytest -s``: the figures of every checked chapter, as a table."""
    yield
    print(f"\n{'chapter':40} {'words':>6} {'sentences':>9} {'mean':>5} {'longest':>7} {'>45':>4}")
    for page in chapters():
        text = page.read_text(encoding="utf-8")
        counted = figures(text)
        print(
            f"{page.stem:40} {counted.words:6} {counted.sentences:9} {counted.mean:5.1f} "
            f"{counted.longest:7} {len(long_sentences(text)):4}"
        )


@pytest.mark.parametrize("page", chapters(), ids=lambda page: page.stem)
def test_sentences_average_at_most_21_words(page):
    counted = figures(page.read_text(encoding="utf-8"))
    assert counted.mean <= MAX_MEAN, (
        f"docs/chapters/{page.name}: {counted.mean:.1f} words a sentence "
        f"({counted.words} words in {counted.sentences} sentences), over {MAX_MEAN:g}"
    )


@pytest.mark.parametrize("page", chapters(), ids=lambda page: page.stem)
def test_no_sentence_is_over_45_words(page):
    too_long = long_sentences(page.read_text(encoding="utf-8"))
    assert not too_long, f"docs/chapters/{page.name}: sentences over {MAX_WORDS} words:\n" + (
        "\n".join(f"  line {line}, {words} words: {sentence}" for line, words, sentence in too_long)
    )
