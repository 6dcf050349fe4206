"""Every paper and codebase the pages cite is linked: on the page that cites it, and on
the closing page (docs/whats-next.md).

The forms: a paper cited by its authors links its authors, ``[Xiao et al.](https://
arxiv.org/abs/2309.17453)``; a paper named by its arXiv number links the number,
``[arXiv 2508.10925](https://arxiv.org/abs/2508.10925)`` (the model pages' sources,
written by docs/_ext/model_cards.py from the model table).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from model_cards import pages

DOCS = Path(__file__).resolve().parents[2] / "docs"
CLOSING = DOCS / "whats-next.md"
ARXIV_MENTION = re.compile(r"arXiv:? ?(\d{4}\.\d{4,5})")
ARXIV_LINK = re.compile(r"\[arXiv (\d{4}\.\d{4,5})\]\(https://arxiv\.org/abs/(\d{4}\.\d{4,5})\)")
CITED = re.compile(r"\b([A-Z][a-z]+)\s+et\s+al\.")
PAPER_LINK = re.compile(r"\]\((https://(?:arxiv\.org/abs/[\d.]+|github\.com/[\w.-]+/[\w.-]+))\)")


def written_pages() -> dict[str, str]:
    """Every page the site's sources hold, and every model page the build writes."""
    found = {
        str(path.relative_to(DOCS)): path.read_text(encoding="utf-8")
        for path in DOCS.rglob("*.md")
        if not {"_build", "models"} & set(path.relative_to(DOCS).parts)
    }
    found.update({f"models/{name}": text for name, text in pages().items()})
    return found


def chapters() -> list[Path]:
    return sorted((DOCS / "chapters").glob("*.md"))


def test_every_arxiv_number_is_a_link_to_its_abstract() -> None:
    problems = []
    for name, text in written_pages().items():
        mentions = ARXIV_MENTION.findall(text)
        links = ARXIV_LINK.findall(text)
        problems += [f"{name}: link text {a} goes to {b}" for a, b in links if a != b]
        unlinked = len(mentions) - len(links)
        if unlinked:
            problems.append(f"{name}: {unlinked} of {len(mentions)} arXiv numbers unlinked")
    assert not problems


def test_the_model_pages_link_their_arxiv_sources() -> None:
    # The table cites the gpt-oss model card by its number; its pages must link it.
    text = pages()["gpt-oss-20b.md"]
    assert "[arXiv 2508.10925](https://arxiv.org/abs/2508.10925)" in text


@pytest.mark.parametrize("chapter", chapters(), ids=lambda path: path.stem)
def test_every_cited_author_is_linked_in_the_chapter(chapter: Path) -> None:
    text = chapter.read_text(encoding="utf-8")
    unlinked = {
        author
        for author in CITED.findall(text)
        if not re.search(rf"\[{author}\s+et\s+al\.", text)
        and not re.search(rf"\[[^\]]*\b{author}\b[^\]]*\]\(https://", text)
    }
    assert not unlinked, f"{chapter.name} cites {sorted(unlinked)} without a link"


def test_every_paper_a_chapter_links_is_on_the_closing_page() -> None:
    closing = set(PAPER_LINK.findall(CLOSING.read_text(encoding="utf-8")))
    linked = {
        (chapter.stem, url)
        for chapter in chapters()
        for url in PAPER_LINK.findall(chapter.read_text(encoding="utf-8"))
    }
    missing = sorted(f"{stem}: {url}" for stem, url in linked if url not in closing)
    assert linked and not missing
