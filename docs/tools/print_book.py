"""Print the whole site, built as one page (Sphinx's ``singlehtml``), to a PDF.

``nox -s book`` runs it after building the site as one page::

    python docs/tools/print_book.py docs/_build/book/singlehtml/index.html BOOK.pdf

The page is opened from its folder (``file://``) in the system's Chromium, driven by
Playwright, which never downloads a browser (``ATTENTION_CHROMIUM`` names another
Chromium-based browser, as for ``nox -s site``). Once MathJax has typeset every formula
and every image has loaded, Chromium prints the page with its print style sheet
(``docs/_static/custom.css``: no sidebars or buttons, tables and figures kept whole
where they fit), A4, with page numbers in the footer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

CHROMIUM_ENV = "ATTENTION_CHROMIUM"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
# How long the page may take to load and typeset: the whole site is one page of some
# thousands of formulas.
TIMEOUT_MS = 15 * 60 * 1000

READY = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await Promise.all(Array.from(document.images, (image) => image.decode().catch(() => null)));
  const unrendered = document.querySelectorAll("span.math:not(:has(mjx-container)), "
    + "div.math:not(:has(mjx-container))").length;
  return {images: document.images.length, unrendered};
}"""

FOOTER = (
    '<div style="font-size: 8px; width: 100%; text-align: center; color: #555;">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)


def chromium() -> str:
    """The browser to print with: ``ATTENTION_CHROMIUM``, else ``chromium`` on PATH."""
    found = (
        os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if found is None:
        raise SystemExit("no `chromium` on PATH: install it (Debian: `apt-get install chromium`)")
    return found


def print_pdf(page: Path, pdf: Path) -> dict:
    """Print ``page`` (an HTML file) to ``pdf``; return what was waited for, and the time."""
    from playwright.sync_api import sync_playwright

    if not page.is_file():
        raise SystemExit(f"no page at {page}: build the site as one page first (nox -s book)")
    start = time.perf_counter()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page()
            tab.set_default_timeout(TIMEOUT_MS)
            tab.emulate_media(media="print", color_scheme="light")
            tab.goto(page.resolve().as_uri(), wait_until="load")
            ready = tab.evaluate(READY)
            loaded = time.perf_counter()
            pdf.parent.mkdir(parents=True, exist_ok=True)
            tab.pdf(
                path=str(pdf),
                format="A4",
                print_background=True,
                margin={"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"},
                display_header_footer=True,
                header_template="<span></span>",
                footer_template=FOOTER,
                outline=True,  # the PDF's bookmarks, from the headings
                tagged=True,
            )
        finally:
            browser.close()
    return {
        **ready,
        "load_s": round(loaded - start, 1),
        "print_s": round(time.perf_counter() - loaded, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="the site built as one page: its index.html")
    parser.add_argument("pdf", type=Path, help="the PDF to write")
    args = parser.parse_args(argv)
    facts = print_pdf(args.page, args.pdf)
    size = args.pdf.stat().st_size / 2**20
    print(
        f"{args.pdf}: {size:.1f} MiB, {facts['images']} images; loaded and typeset in "
        f"{facts['load_s']} s, printed in {facts['print_s']} s"
    )
    if facts["unrendered"]:
        print(f"{facts['unrendered']} formulas were not typeset by MathJax", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
