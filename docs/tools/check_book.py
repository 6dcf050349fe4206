"""Check the book that ``nox -s book`` made: the EPUB opens and holds every page, and
the PDF is whole.

    python docs/tools/check_book.py BOOK.epub BOOK.pdf

The EPUB, as a reader's app opens it: a zip whose first entry is ``mimetype``, stored
uncompressed; ``META-INF/container.xml`` names the package file; every file the
package lists is in the zip, every page parses as XML (XHTML), every image or style
sheet a page uses is in the zip, and the spine holds every chapter; the formulas are
MathML, not LaTeX source. The PDF: it starts and ends as a PDF does, and has at least
as many pages as the EPUB has chapters (a chapter takes pages of its own).
Each problem is printed; the exit status is the number of problems (at most 1).
"""

from __future__ import annotations

import argparse
import posixpath
import re
import sys
import zipfile
from pathlib import Path
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

OPF = "{http://www.idpf.org/2007/opf}"
CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
XHTML = "{http://www.w3.org/1999/xhtml}"
MATHML = "{http://www.w3.org/1998/Math/MathML}math"


def epub_problems(path: Path) -> tuple[list[str], dict[str, int]]:
    """What is wrong with the EPUB at ``path``, and what it holds."""
    problems: list[str] = []
    with zipfile.ZipFile(path) as book:
        names = set(book.namelist())
        first = book.infolist()[0]
        if first.filename != "mimetype" or first.compress_type != zipfile.ZIP_STORED:
            problems.append("the first entry is not `mimetype`, stored uncompressed")
        if book.read("mimetype") != b"application/epub+zip":
            problems.append("`mimetype` is not application/epub+zip")
        container = ElementTree.fromstring(book.read("META-INF/container.xml"))
        package = container.find(f".//{CONTAINER}rootfile").get("full-path")
        opf = ElementTree.fromstring(book.read(package))
        folder = posixpath.dirname(package)
        manifest = {
            item.get("id"): posixpath.join(folder, unquote(item.get("href")))
            for item in opf.iter(f"{OPF}item")
        }
        problems += [
            f"the package lists {name}, not in the zip"
            for name in sorted(set(manifest.values()) - names)
        ]
        spine = [manifest[ref.get("idref")] for ref in opf.iter(f"{OPF}itemref")]
        chapters = [name for name in spine if re.search(r"chapters/\d\d-", name)]
        pages = [name for name in manifest.values() if name.endswith(".xhtml")]
        images = formulas = latex = 0
        for page in pages:
            try:
                root = ElementTree.fromstring(book.read(page))
            except ElementTree.ParseError as error:
                problems.append(f"{page} is not well-formed XHTML: {error}")
                continue
            formulas += len(root.findall(f".//{MATHML}"))
            latex += sum(
                1
                for element in root.iter()
                if "math" in (element.get("class") or "").split()
                and MATHML not in {child.tag for child in element.iter()}
            )
            for element in root.iter(f"{XHTML}img"):
                images += 1
                problems += missing(page, element.get("src"), names)
            for element in root.iter(f"{XHTML}link"):
                problems += missing(page, element.get("href"), names)
    if len(chapters) < 20:
        problems.append(f"the spine holds {len(chapters)} chapters, fewer than 20")
    if images == 0 or formulas == 0:
        problems.append(f"{images} images and {formulas} MathML formulas: the pages are empty")
    facts = {"pages": len(pages), "chapters": len(chapters), "images": images}
    return problems, {**facts, "formulas": formulas, "latex": latex}


def missing(page: str, reference: str | None, names: set[str]) -> list[str]:
    if not reference or urlsplit(reference).scheme:
        return []
    target = posixpath.normpath(
        posixpath.join(posixpath.dirname(page), unquote(urlsplit(reference).path))
    )
    return [] if target in names else [f"{page} uses {reference}, not in the zip"]


def pdf_pages(path: Path) -> int:
    """The number of pages of the PDF at ``path`` (its page objects, counted)."""
    data = path.read_bytes()
    if not data.startswith(b"%PDF-") or b"%%EOF" not in data[-1024:]:
        raise ValueError(f"{path} does not start and end as a PDF")
    return len(re.findall(rb"/Type\s*/Page[^s]", data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("epub", type=Path)
    parser.add_argument("pdf", type=Path)
    args = parser.parse_args(argv)
    problems, facts = epub_problems(args.epub)
    print(
        f"{args.epub}: {facts['pages']} pages, {facts['chapters']} chapters, "
        f"{facts['images']} images, {facts['formulas']} formulas as MathML, "
        f"{facts['latex']} kept as LaTeX"
    )
    try:
        pages = pdf_pages(args.pdf)
        print(f"{args.pdf}: {pages} pages")
        if pages < facts["chapters"]:
            chapters = facts["chapters"]
            problems.append(f"the PDF has {pages} pages, fewer than the {chapters} chapters")
    except ValueError as error:
        problems.append(str(error))
    for problem in problems:
        print(problem, file=sys.stderr)
    return min(len(problems), 1)


if __name__ == "__main__":
    sys.exit(main())
