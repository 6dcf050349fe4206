"""The built site, checked in headless Chromium the way a reader uses it.

Run by ``nox -s site`` after ``nox -s docs``. Every page of the site is opened twice:
at desktop width in the light theme, and at phone width (390x844) in the dark theme.
Each visit records console errors and warnings, failed requests, and requests to any
host but 127.0.0.1 (blocked, and reported); then checks that images load and have
alt text, that MathJax rendered every formula, that internal links and anchors
exist, that the page does not scroll sideways on a phone, and that figures stay
light (readable) in the dark theme. Separate checks cover search, the previous/next
walk through the chapters, the theme switch, the gallery's downloads (fetched from
the server; ``nox -s downloads`` runs them) and reading from ``file://``.

Each check collects every problem it finds and fails once, listing all of them.
Screenshots land in ``docs/_build/screenshots/`` for a person to look at.
"""

from __future__ import annotations

import ast
import html
import io
import json
import os
import re
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

SITE = Path(os.environ["ATTENTION_SITE_DIR"]).resolve()
REPO = Path(__file__).resolve().parents[2]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
NOT_PAGES = {"_static", "_sources", "_downloads", "_images", "jupyter_execute"}
LOCAL_HOST = "127.0.0.1"
TIMEOUT_MS = 20_000


def site_pages() -> list[str]:
    """Every HTML page of the built site, as paths relative to its root."""
    pages = (p.relative_to(SITE) for p in SITE.rglob("*.html"))
    return sorted(p.as_posix() for p in pages if not NOT_PAGES & set(p.parts[:-1]))


def chapter_pages() -> list[str]:
    """The chapters' pages in reading order: the home page's toctrees, which place an
    unnumbered page (chapters/measuring-attention) after the chapter it follows; any
    chapter page they do not list comes last, sorted."""
    built = {p for p in site_pages() if p.startswith("chapters/")}
    toctree = re.findall(r"^(chapters/\S+)$", (REPO / "docs" / "index.md").read_text(), re.M)
    ordered = [page + ".html" for page in toctree if page + ".html" in built]
    return ordered + sorted(built - set(ordered))


def path_pages() -> list[str]:
    """Every page of the Parts in reading order, as the home page's toctrees list them:
    each Part's landing page (parts/), its chapters, its recap."""
    built = set(site_pages())
    toctree = re.findall(
        r"^((?:chapters|parts)/\S+)$", (REPO / "docs" / "index.md").read_text(), re.M
    )
    return [page + ".html" for page in toctree if page + ".html" in built]


def gallery_examples() -> list[str]:
    """The gallery's example pages (not its index, not the execution-times table)."""
    return sorted(
        p
        for p in site_pages()
        if p.startswith("auto_gallery/")
        and Path(p).name not in {"index.html", "sg_execution_times.html"}
    )


def page_title(name: str) -> str:
    """A page's title, as search results and the navigation show it."""
    match = re.search(r"<title>(.*?)</title>", (SITE / name).read_text(encoding="utf-8"), re.S)
    return html.unescape(match.group(1)).split(" \N{EM DASH} ")[0].strip() if match else ""


def soup(name: str):
    from bs4 import BeautifulSoup

    return BeautifulSoup((SITE / name).read_text(encoding="utf-8"), "html.parser")


def report(what: str, problems: list[str]) -> str:
    listing = "\n".join(f"  - {p}" for p in problems)
    return f"{len(problems)} problem(s) with {what}:\n{listing}"


def luminance(rgb) -> float:
    """Relative brightness, 0 (black) to 1 (white)."""
    r, g, b = (float(c) / 255 for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


# -- JavaScript run in the pages ---------------------------------------------------

SETTLE_JS = """async () => {
  const timeout = new Promise((resolve) => setTimeout(resolve, 10000));
  for (const img of document.images) if (img.loading === "lazy") img.loading = "eager";
  const images = Promise.all(Array.from(document.images, (img) => img.complete ? null :
    new Promise((resolve) => {
      img.addEventListener("load", resolve, {once: true});
      img.addEventListener("error", resolve, {once: true});
    })));
  const math = (window.MathJax && MathJax.startup && MathJax.startup.promise) || null;
  await Promise.race([Promise.all([images, math]), timeout]);
}"""

PAGE_FACTS_JS = """() => ({
  images: Array.from(document.images, (img) => ({
    src: img.getAttribute("src") || "",
    alt: (img.getAttribute("alt") || "").trim(),
    width: img.naturalWidth,
  })),
  math: Array.from(document.querySelectorAll(".math"))
    .filter((el) => !el.querySelector("mjx-container"))
    .map((el) => el.textContent.trim().slice(0, 60)),
  mathErrors: Array.from(document.querySelectorAll("[data-mjx-error], mjx-merror"),
    (el) => el.getAttribute("data-mjx-error") || el.textContent.slice(0, 60)),
  links: Array.from(document.querySelectorAll("a[href]"), (a) => a.href),
  ids: Array.from(document.querySelectorAll("[id], a[name]"), (el) => el.id || el.name),
  next: document.querySelector("a.right-next") && document.querySelector("a.right-next").href,
  prev: document.querySelector("a.left-prev") && document.querySelector("a.left-prev").href,
})"""

# Only when the page scrolls sideways: name the outermost elements that stick out of
# the viewport without a scrolling (or clipping) container around them.
OVERFLOW_JS = """() => {
  const root = document.documentElement;
  const width = root.clientWidth;
  if (root.scrollWidth <= width + 1) return null;
  const describe = (el) => {
    let name = el.tagName.toLowerCase();
    if (el.id) name += "#" + el.id;
    for (const c of Array.from(el.classList).slice(0, 3)) name += "." + c;
    const text = (el.textContent || "").trim().replace(/\\s+/g, " ").slice(0, 50);
    return text ? `${name} ("${text}")` : name;
  };
  const contained = (el) => {
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement)
      if (getComputedStyle(p).overflowX !== "visible") return true;
    return false;
  };
  const culprits = [];
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1 || contained(el)) continue;
    const parent = el.parentElement;
    if (parent && parent !== document.body && parent.getBoundingClientRect().right > width + 1)
      continue;
    if (getComputedStyle(el).position === "fixed") continue;
    culprits.push(`${describe(el)} reaches ${Math.round(box.right)}px`);
  }
  return {scrollWidth: root.scrollWidth, clientWidth: width, culprits: culprits.slice(0, 6)};
}"""

# The image file itself: its corner pixels (a figure's background), and how many of
# its pixels are not fully opaque.
IMAGE_PIXELS_JS = """(img) => {
  const canvas = document.createElement("canvas");
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const ctx = canvas.getContext("2d", {willReadFrequently: true});
  ctx.drawImage(img, 0, 0);
  const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  let transparent = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] < 255) transparent++;
  const at = (x, y) => Array.from(ctx.getImageData(x, y, 1, 1).data);
  const w = canvas.width - 1, h = canvas.height - 1;
  return {transparent, corners: [at(0, 0), at(w, 0), at(0, h), at(w, h)]};
}"""

# Where an image stops being visible on the right: the edge of the image, of the
# viewport, or of the scrolling box it sits in, whichever comes first.
VISIBLE_RIGHT_JS = """(img) => {
  let right = Math.min(img.getBoundingClientRect().right, innerWidth);
  for (let p = img.parentElement; p && p !== document.body; p = p.parentElement)
    if (getComputedStyle(p).overflowX !== "visible")
      right = Math.min(right, p.getBoundingClientRect().right - p.clientLeft);
  return right;
}"""

# Every figure the page shows (an image hidden by its layout pair is not shown): its
# file, its own width and the width it is drawn at, whether its box (or the page) cuts
# it off on the right, and the cue line its scrolling box shows, if any.
FIGURES_JS = """() => {
  const found = [];
  for (const img of document.querySelectorAll(".bd-article img")) {
    const rect = img.getBoundingClientRect();
    if (rect.width === 0 || img.closest(".sphx-glr-thumbcontainer")) continue;
    let right = Math.min(rect.right, innerWidth), cue = "";
    for (let p = img.parentElement; p && p !== document.body; p = p.parentElement) {
      if (getComputedStyle(p).overflowX === "visible") continue;
      right = Math.min(right, p.getBoundingClientRect().right - p.clientLeft);
      const before = getComputedStyle(p, "::before");
      if (!cue && before.content && before.content !== "none" && before.display !== "none")
        cue = before.content;
    }
    found.push({src: img.getAttribute("src"), url: img.src, natural: img.naturalWidth,
                shown: rect.width, clipped: rect.right > right + 1, cue});
  }
  return found;
}"""

BACKGROUND_JS = """() => {
  for (const el of [document.body, document.documentElement]) {
    const m = getComputedStyle(el).backgroundColor.match(/[\\d.]+/g).map(Number);
    if (m.length < 4 || m[3] > 0) return m.slice(0, 3);
  }
  return [255, 255, 255];
}"""


# -- Opening pages, recording what the browser does --------------------------------


@dataclass
class Recorder:
    """Everything a browser context did, filed under the page being visited.

    Requests to any host but 127.0.0.1 are blocked and listed: the site must work
    with no network.
    """

    current: str = ""
    console: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    third_party: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.console + self.failed + self.third_party

    def attach(self, context) -> None:
        context.route("**/*", self._route)
        context.on("requestfailed", self._request_failed)
        context.on("response", self._response)
        context.on("page", self._page)

    def _page(self, page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.console.append(f"{self.current}: {exc}"))

    @staticmethod
    def _is_third_party(url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in {"http", "https", "ws", "wss"} and parts.hostname != LOCAL_HOST

    def _route(self, route) -> None:
        url = route.request.url
        if self._is_third_party(url):
            self.third_party.append(f"{self.current}: {url}")
            route.abort("blockedbyclient")
        else:
            route.continue_()

    def _request_failed(self, request) -> None:
        # ERR_ABORTED: the page moved on before a late request (say, the favicon)
        # finished. A missing file shows up as an HTTP error in _response instead.
        if not self._is_third_party(request.url) and "ERR_ABORTED" not in str(request.failure):
            self.failed.append(f"{self.current}: {request.url} ({request.failure})")

    def _response(self, response) -> None:
        if response.status >= 400:
            self.failed.append(f"{self.current}: {response.url} (HTTP {response.status})")

    def _console(self, message) -> None:
        if message.type in {"error", "warning"}:
            where = message.location.get("url", "")
            self.console.append(f"{self.current}: [{message.type}] {message.text} ({where})")


def new_context(browser, recorder: Recorder, **options):
    context = browser.new_context(**options)
    context.set_default_timeout(TIMEOUT_MS)
    recorder.attach(context)
    return context


def opened_at(browser, base_url: str, name: str, *, size: str, scheme: str):
    """A new context at ``size`` ("phone" or "desktop") and ``scheme`` with page ``name``
    open in it: ``(recorder, context, page)``."""
    recorder = Recorder()
    phone = size == "phone"
    context = new_context(
        browser,
        recorder,
        viewport=PHONE if phone else DESKTOP,
        color_scheme=scheme,
        has_touch=phone,
        is_mobile=phone,
    )
    page = context.new_page()
    open_page(page, base_url + name, name, recorder)
    return recorder, context, page


def open_page(page, url: str, name: str, recorder: Recorder) -> None:
    """Load a page and wait for its images and math; a page that does not load is a
    problem to report, not a reason to stop checking the others."""
    from playwright.sync_api import Error

    recorder.current = name
    try:
        page.goto(url, wait_until="load")
        page.evaluate(SETTLE_JS)
    except Error as error:
        recorder.failed.append(f"{name}: the page did not load: {error.message.splitlines()[0]}")


def check_figures_in_dark_mode(page, name: str) -> list[str]:
    """The page's figures, on a dark page: as files, an opaque light background
    (gallery thumbnails aside: the theme puts them on white); as drawn, light corners."""
    from PIL import Image

    problems = []
    figures = page.locator(".bd-article img")
    for i in range(figures.count()):
        figure = figures.nth(i)
        src = figure.get_attribute("src")
        if not figure.evaluate("img => img.naturalWidth"):
            continue  # did not load: reported by test_images_load_and_have_alt_text
        if not figure.evaluate("img => img.closest('.sphx-glr-thumbcontainer')"):
            pixels = figure.evaluate(IMAGE_PIXELS_JS)
            if pixels["transparent"]:
                problems.append(f"{name}: {src} has {pixels['transparent']} transparent pixels")
            dark = [c for c in pixels["corners"] if luminance(c) < 0.75]
            if dark:
                problems.append(f"{name}: {src} has a dark background (corner rgba {dark[0]})")
        # As drawn on the dark page, with the theme's image filters applied; the other
        # layout of a figure drawn in two (custom.css's layout-pair) is not drawn here.
        if not figure.is_visible():
            continue
        # Its top corners in view, below the header: a stacked figure may be taller
        # than the screen, and scrolling it into view would centre it.
        figure.evaluate("img => { img.scrollIntoView(); scrollBy(0, -innerHeight / 4); }")
        box = figure.bounding_box()
        if not box or box["width"] < 8 or box["height"] < 8:
            continue
        corners = []
        # A wide figure scrolls inside its own box on a phone: its visible corners.
        right = figure.evaluate(VISIBLE_RIGHT_JS)
        for x, y in ((box["x"] + 2, box["y"] + 2), (right - 5, box["y"] + 2)):
            shot = page.screenshot(clip={"x": x, "y": y, "width": 3, "height": 3})
            corners.append(Image.open(io.BytesIO(shot)).convert("RGB").getpixel((1, 1)))
        if any(luminance(c) < 0.6 for c in corners):
            problems.append(f"{name}: {src} is drawn dark on the dark page: corners {corners}")
    return problems


@dataclass
class Visit:
    name: str
    facts: dict
    overflow: dict | None = None
    dark_figures: list[str] = field(default_factory=list)
    figures: list[dict] = field(default_factory=list)

    @property
    def ids(self) -> set[str]:
        return set(self.facts["ids"])


@dataclass
class Crawl:
    desktop: dict[str, Visit]
    phone: dict[str, Visit]
    recorders: tuple[Recorder, Recorder]

    def recorded(self, kind: str) -> list[str]:
        return sorted({p for r in self.recorders for p in getattr(r, kind)})


@pytest.fixture(scope="session")
def crawl(browser, base_url: str, screenshots: Path) -> Crawl:
    """Open every page at desktop width (light), then at phone width (dark)."""
    pages = site_pages()
    chapters = chapter_pages()
    chapter_shot = chapters[1] if len(chapters) > 1 else (chapters or ["index.html"])[0]
    examples = gallery_examples()
    desktop_shots = {
        "index.html": ("home.png", True),
        chapter_shot: ("chapter.png", False),
        "auto_gallery/index.html": ("gallery-index.png", True),
    }
    if examples:
        desktop_shots[examples[0]] = ("gallery-example.png", True)

    desktop, phone = Recorder(), Recorder()
    context = new_context(browser, desktop, viewport=DESKTOP, color_scheme="light")
    page = context.new_page()
    visits: dict[str, Visit] = {}
    for name in pages:
        open_page(page, base_url + name, name, desktop)
        visits[name] = Visit(name, page.evaluate(PAGE_FACTS_JS))
        if name in desktop_shots:
            path, full = desktop_shots[name]
            page.screenshot(path=screenshots / path, full_page=full)
    context.close()

    # At phone width, in the dark theme the reader's system asks for ("auto" mode).
    context = new_context(
        browser,
        phone,
        viewport=PHONE,
        is_mobile=True,
        has_touch=True,
        device_scale_factor=2,
        color_scheme="dark",
    )
    page = context.new_page()
    phone_visits: dict[str, Visit] = {}
    for name in pages:
        open_page(page, base_url + name, name, phone)
        visit = Visit(name, page.evaluate(PAGE_FACTS_JS), page.evaluate(OVERFLOW_JS))
        theme = page.evaluate("document.documentElement.dataset.theme")
        if theme != "dark":
            visit.dark_figures.append(f"{name}: theme {theme!r} on a system that prefers dark")
        visit.dark_figures += check_figures_in_dark_mode(page, name)
        visit.figures = page.evaluate(FIGURES_JS)
        phone_visits[name] = visit
        if name == "index.html":
            page.evaluate("window.scrollTo(0, 0)")
            page.screenshot(path=screenshots / "phone-dark-home.png")
    context.close()

    # Two light pages at phone width, for people to look at.
    context = new_context(
        browser, Recorder(), viewport=PHONE, is_mobile=True, device_scale_factor=2
    )
    page = context.new_page()
    page.goto(base_url + "index.html", wait_until="load")
    page.screenshot(path=screenshots / "phone-home.png")
    page.goto(base_url + chapter_shot, wait_until="load")
    page.evaluate(SETTLE_JS)
    page.screenshot(path=screenshots / "phone-chapter.png")
    figure = page.locator(".bd-article img:visible").first
    if figure.count():
        figure.scroll_into_view_if_needed()
        page.screenshot(path=screenshots / "phone-chapter-figure.png")
    context.close()
    return Crawl(visits, phone_visits, (desktop, phone))


# -- Every page --------------------------------------------------------------------


def test_site_has_pages():
    pages = site_pages()
    assert "index.html" in pages
    assert len(chapter_pages()) >= 6, f"expected at least 6 chapters, found {chapter_pages()}"


def test_no_console_errors(crawl: Crawl):
    problems = crawl.recorded("console")
    assert not problems, report("console errors and warnings", problems)


def test_no_failed_requests(crawl: Crawl):
    problems = crawl.recorded("failed")
    assert not problems, report("requests that failed", problems)


def test_no_request_leaves_the_site(crawl: Crawl):
    problems = crawl.recorded("third_party")
    assert not problems, report("requests to third-party hosts (blocked)", problems)


def test_no_page_loads_scripts_or_styles_from_elsewhere():
    """The same, read from the HTML files: no src/href to another host for anything
    the browser loads by itself (scripts, styles, icons, images, frames)."""
    tag = re.compile(r"<(script|link|img|iframe|source|video|audio)\b[^>]*>", re.IGNORECASE)
    attr = re.compile(r"""\b(src|href|srcset)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]+)""")
    loaded = re.compile(r"""rel=["']?[^"'>]*\b(stylesheet|preload|modulepreload|icon|manifest)""")
    problems = []
    for name in site_pages():
        text = (SITE / name).read_text(encoding="utf-8")
        for match in tag.finditer(text):
            element = match.group(0)
            if match.group(1).lower() == "link" and not loaded.search(element):
                continue
            problems += [f"{name}: {m.group(2)} in {element[:100]}" for m in attr.finditer(element)]
    assert not problems, report("external resources named in the HTML", problems)


def test_images_load_and_have_alt_text(crawl: Crawl):
    problems = []
    for name, visit in crawl.desktop.items():
        for img in visit.facts["images"]:
            if not img["width"]:
                problems.append(f"{name}: image did not load: {img['src']}")
            if not img["alt"]:
                problems.append(f"{name}: image has no alt text: {img['src']}")
    assert not problems, report("images", problems)


def test_every_img_tag_in_the_html_has_alt_text():
    """The same rule read from the files, so that it holds without a browser too, on
    every generated page: the gallery's thumbnails, search and index pages included."""
    problems = [
        f"{name}: <img src={img.get('src')!r}> has no alt text"
        for name in site_pages()
        for img in soup(name).find_all("img")
        if not (img.get("alt") or "").strip()
    ]
    assert site_pages(), "the site has no pages"
    assert not problems, report("images without alt text", problems)


def test_math_is_rendered(crawl: Crawl):
    problems = []
    for name, visit in crawl.desktop.items():
        unrendered = visit.facts["math"]
        if unrendered:
            first = ", ".join(repr(m) for m in unrendered[:3])
            problems.append(f"{name}: {len(unrendered)} formulas not rendered by MathJax: {first}")
        problems += [f"{name}: MathJax error: {m!r}" for m in visit.facts["mathErrors"]]
    assert not problems, report("math", problems)


def test_internal_links_resolve(crawl: Crawl, base_url: str):
    """Every link within the site points to a file that exists, and to an anchor
    that exists on that page."""
    problems = set()
    for name, visit in crawl.desktop.items():
        for href in visit.facts["links"]:
            if not href.startswith(base_url):
                continue
            parts = urlsplit(href)
            target = unquote(parts.path)[len(urlsplit(base_url).path) :]
            if target == "" or target.endswith("/"):
                target += "index.html"
            if not (SITE / target).is_file():
                problems.add(f"{name}: link to a missing file: {target}")
            elif parts.fragment and target in crawl.desktop:
                anchor = unquote(parts.fragment)
                if anchor not in crawl.desktop[target].ids:
                    problems.add(f"{name}: link to a missing anchor: {target}#{anchor}")
    assert not problems, report("internal links", sorted(problems))


def test_no_sideways_scrolling_on_a_phone(crawl: Crawl):
    """At 390 px wide, only wide content's own container may scroll sideways."""
    problems = []
    for name, visit in crawl.phone.items():
        if visit.overflow:
            o = visit.overflow
            culprits = "; ".join(o["culprits"]) or "no single element found"
            problems.append(
                f"{name}: page is {o['scrollWidth']}px wide in a {o['clientWidth']}px "
                f"viewport; too wide: {culprits}"
            )
        problems += [
            f"{name} (phone): image did not load: {i['src']}"
            for i in visit.facts["images"]
            if not i["width"]
        ]
    assert not problems, report("the phone layout (390x844)", problems)


#: The smallest a figure's label may be drawn on a phone, in CSS pixels.
SMALLEST_LABEL_PX = 8.0


def figure_dpi(url: str) -> float | None:
    """The resolution an image file records (matplotlib writes it in every PNG), or None."""
    from PIL import Image

    path = SITE / unquote(urlsplit(url).path).lstrip("/")
    if not path.is_file() or path.suffix.lower() != ".png":
        return None
    with Image.open(path) as image:
        dpi = image.info.get("dpi")
    return float(dpi[0]) if dpi else None


def test_figures_are_legible_on_a_phone(crawl: Crawl):
    """At 390 px wide, no figure's smallest label is drawn under 8 CSS px, and no figure
    is cut off without a line saying it scrolls.

    A label of p points in a figure drawn at d dots per inch is p * d / 72 pixels of the
    image; shown at ``shown`` of its ``natural`` pixels, it is that times shown / natural
    CSS px. The figures of attention.figures draw no text under SMALLEST_TEXT_POINTS
    (tests/test_figures.py checks every one), so that is p here.
    """
    from attention.figures import SMALLEST_TEXT_POINTS

    problems, counted, scrolling = [], 0, 0
    for name, visit in crawl.phone.items():
        for figure in visit.figures:
            dpi = figure_dpi(figure["url"])
            if dpi is None or not figure["natural"]:
                continue  # not a drawn figure (an icon, a logo), or it did not load
            counted += 1
            label = SMALLEST_TEXT_POINTS / 72 * dpi * figure["shown"] / figure["natural"]
            if label < SMALLEST_LABEL_PX:
                problems.append(
                    f"{name}: {figure['src']}: its smallest label is {label:.1f} px "
                    f"(drawn {figure['shown']:.0f} px wide of {figure['natural']} at {dpi:g} dpi)"
                )
            if figure["clipped"]:
                scrolling += 1
                if not figure["cue"]:
                    problems.append(f"{name}: {figure['src']} is cut off with no cue")
    print(f"{counted} figures at 390 px: {scrolling} scroll sideways, each under a cue")
    assert counted, "no drawn figure found on any page"
    assert not problems, report("figures on a phone (390x844)", problems)


def test_figures_stay_readable_in_dark_mode(crawl: Crawl):
    """In the dark theme, figures keep their light background: black labels on a
    transparent figure would vanish into the page."""
    problems = [p for visit in crawl.phone.values() for p in visit.dark_figures]
    assert not problems, report("figures in the dark theme", problems)


# -- Search --------------------------------------------------------------------------


def test_search_finds_the_chapters_on_softmax(browser, base_url: str, screenshots: Path):
    recorder = Recorder("search.html?q=softmax")
    context = new_context(browser, recorder, viewport=DESKTOP)
    page = context.new_page()
    page.goto(base_url + "search.html?q=softmax", wait_until="load")
    page.wait_for_function(
        """() => {
          const s = document.querySelector("#search-results .search-summary");
          return s && s.textContent.trim().length > 0;
        }"""
    )
    results = page.eval_on_selector_all(
        "#search-results ul.search li > a",
        "links => links.map(a => [a.textContent.trim(), a.getAttribute('href')])",
    )
    page.screenshot(path=screenshots / "search-softmax.png")
    context.close()

    problems = []
    chapters = chapter_pages()
    if chapters and "Attention without trainable weights" not in page_title(chapters[0]):
        problems.append(f"chapter 1 is {page_title(chapters[0])!r}, not the one on softmax")
    for chapter in chapters[:2]:
        title = page_title(chapter)
        hits = [text for text, href in results if href.split("#")[0] == chapter]
        if not hits:
            problems.append(f"no result links to {chapter} ({title})")
        elif title not in hits:
            problems.append(f"the results link to {chapter} as {hits}, not as {title!r}")
    problems += recorder.problems
    summary = "\n".join(f"    {text} -> {href}" for text, href in results) or "    (none)"
    assert not problems, report("search for 'softmax'", problems) + f"\n  results:\n{summary}"


# -- Previous / next -------------------------------------------------------------------


def test_previous_and_next_walk_the_chapters_in_order(crawl: Crawl, browser, base_url: str):
    """From the home page, "next" leads through every page of the Parts in order (each
    Part's landing page, chapters and recap), and "previous" leads back: the links each
    page had, followed, then two real clicks."""
    expected = ["index.html", *path_pages()]

    def walk(start: str, key: str) -> list[str]:
        pages = [start]
        while len(pages) < len(expected):
            href = crawl.desktop[pages[-1]].facts[key]
            if not href or not href.startswith(base_url):
                break
            pages.append(href.removeprefix(base_url).split("#")[0])
        return pages

    problems = []
    forward = walk("index.html", "next")
    if forward != expected:
        problems.append(f"'next' from the home page visits {forward}, expected {expected}")
    back = walk(expected[-1], "prev")
    if back != expected[::-1]:
        problems.append(
            f"'previous' from the last chapter visits {back}, expected {expected[::-1]}"
        )

    recorder = Recorder("index.html")
    context = new_context(browser, recorder, viewport=DESKTOP)
    page = context.new_page()
    page.goto(base_url + "index.html", wait_until="load")
    for selector, target in (("a.right-next", expected[1]), ("a.left-prev", "index.html")):
        recorder.current = target
        with page.expect_navigation(wait_until="load"):
            page.locator(selector).first.click()
        if page.url.split("#")[0] != base_url + target:
            problems.append(f"clicking {selector} led to {page.url}, not {target}")
    context.close()
    assert not problems, report("previous/next navigation", problems + recorder.problems)


# -- The theme switch -------------------------------------------------------------------


def choose_dark(page) -> None:
    """Click the theme switch (pydata-sphinx-theme: a menu, or a button that cycles)."""
    page.locator(".theme-switch-button").first.click()
    item = page.locator(".theme-change-button[data-mode='dark']").first
    if item.count() and item.is_visible():
        item.click()
        return
    for _ in range(2):
        if page.evaluate("document.documentElement.dataset.theme") == "dark":
            return
        page.locator(".theme-switch-button").first.click()


def test_theme_switch_turns_the_site_dark(browser, base_url: str, screenshots: Path):
    recorder = Recorder()
    context = new_context(browser, recorder, viewport=DESKTOP, color_scheme="light")
    page = context.new_page()
    open_page(page, base_url + "index.html", "index.html", recorder)
    problems = []
    before = page.evaluate("document.documentElement.dataset.theme")
    light_bg = page.evaluate(BACKGROUND_JS)
    if before != "light":
        problems.append(f"the home page starts in the {before!r} theme, not 'light'")
    if luminance(light_bg) < 0.7:
        problems.append(f"the light theme has a dark page background: rgb{tuple(light_bg)}")

    choose_dark(page)
    after = page.evaluate("document.documentElement.dataset.theme")
    dark_bg = page.evaluate(BACKGROUND_JS)
    if after != "dark":
        problems.append(f"after choosing dark, the theme is {after!r}")
    if luminance(dark_bg) > 0.3:
        problems.append(f"the dark theme left the page background light: rgb{tuple(dark_bg)}")
    page.keyboard.press("Escape")  # close the menu and its tooltip for the screenshot
    page.mouse.move(DESKTOP["width"] // 2, DESKTOP["height"] - 10)
    page.wait_for_timeout(400)
    page.screenshot(path=screenshots / "dark-home.png")

    # The choice holds on the next page, and its figures stay light.
    chapters = chapter_pages()
    examples = gallery_examples()
    for name, shot in (
        (chapters[2] if len(chapters) > 2 else None, "dark-chapter-figure.png"),
        (examples[0] if examples else None, "dark-gallery-example.png"),
    ):
        if name is None:
            continue
        open_page(page, base_url + name, name, recorder)
        theme = page.evaluate("document.documentElement.dataset.theme")
        if theme != "dark":
            problems.append(f"{name}: theme is {theme!r} after choosing dark on the home page")
        problems += check_figures_in_dark_mode(page, name)
        figure = page.locator(".bd-article img:visible").first
        if figure.count():
            figure.scroll_into_view_if_needed()
        page.screenshot(path=screenshots / shot)
    context.close()
    assert not problems, report("the theme switch", problems + recorder.problems)


# -- Gallery downloads ----------------------------------------------------------------


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, b""


def download_links(name: str, kind: str) -> list[str]:
    """The hrefs of a gallery page's download buttons of one kind (python, jupyter, zip)."""
    selector = f"div.sphx-glr-download-{kind} a.reference.download"
    return [a["href"] for a in soup(name).select(selector)]


def fetch_downloads(example: str, base_url: str) -> list[str]:
    """Fetch an example's .py, .ipynb and .zip from the server, as a reader's browser
    would, and check each is what its button promises. Running them, in an environment
    that has only the built wheel, is ``nox -s downloads``'s job."""
    problems = []
    for kind, suffix in (("python", ".py"), ("jupyter", ".ipynb"), ("zip", ".zip")):
        links = download_links(example, kind)
        if len(links) != 1:
            problems.append(f"{example}: expected one {suffix} download link, found {links}")
            continue
        url = urljoin(base_url + example, links[0])
        status, body = fetch(url)
        if status != 200 or not body.strip():
            problems.append(f"{example}: {url}: HTTP {status}, {len(body)} bytes")
        elif not urlsplit(url).path.endswith(suffix):
            problems.append(f"{example}: the {kind} download is {url}, not a {suffix} file")
        elif suffix == ".py":
            try:
                ast.parse(body.decode("utf-8"))
            except (SyntaxError, UnicodeDecodeError) as error:
                problems.append(f"{example}: the .py download is not Python: {error}")
            if b"pip install" not in body:
                problems.append(f"{example}: the .py download does not say how to install")
        elif suffix == ".ipynb":
            try:
                cells = json.loads(body)["cells"]
            except (ValueError, KeyError):
                problems.append(f"{example}: the .ipynb download is not a notebook")
            else:
                if "%pip install" not in "".join(cells[0]["source"]):
                    problems.append(f"{example}: the notebook does not start with the install cell")
        elif not body.startswith(b"PK"):
            problems.append(f"{example}: the .zip download is not a zip")
    return problems


def test_gallery_index_lists_examples(base_url: str):
    """The gallery exists and has examples (a site built with DOCS_SKIP_GALLERY fails),
    each with a thumbnail, and the zips of all examples are served."""
    index = "auto_gallery/index.html"
    assert (SITE / index).is_file(), f"no {index}: the site was built without the gallery"
    assert gallery_examples(), "the gallery has no example pages"
    page = soup(index)
    linked = {
        urljoin(index, a["href"].split("#")[0])
        for a in page.select(".sphx-glr-thumbcontainer a[href]")
    }
    problems = [f"no thumbnail links to {p}" for p in gallery_examples() if p not in linked]
    zips = [a["href"] for a in page.select(".sphx-glr-download a.reference.download")]
    if len(zips) < 2:
        problems.append(f"expected the .py and .ipynb zips of all examples, found {zips}")
    scripts = sorted(p.stem for p in (REPO / "gallery").glob("*.py"))
    for href in zips:
        status, body = fetch(urljoin(base_url + index, href))
        if status != 200 or not body.startswith(b"PK"):
            problems.append(f"{href}: HTTP {status}, {len(body)} bytes, not a zip")
            continue
        names = zipfile.ZipFile(io.BytesIO(body)).namelist()
        if sorted(Path(name).stem for name in names) != scripts:
            problems.append(f"{href} holds {sorted(names)}, not one file per gallery script")
    assert not problems, report("the gallery index", problems)


@pytest.mark.parametrize("example", gallery_examples())
def test_gallery_downloads_are_served(base_url: str, example: str):
    problems = fetch_downloads(example, base_url)
    assert not problems, report(f"{example}'s downloads", problems)


# -- Offline, from file:// ----------------------------------------------------------------


def test_pages_work_from_the_file_system(browser):
    """A reader who unzips the HTML and opens it from disk gets styles, images and math."""
    recorder = Recorder()
    context = new_context(browser, recorder, viewport=DESKTOP)
    page = context.new_page()
    problems = []
    for name in ["index.html", *chapter_pages()[:2]]:
        open_page(page, (SITE / name).as_uri(), name, recorder)
        facts = page.evaluate(PAGE_FACTS_JS)
        problems += [
            f"{name}: image did not load: {i['src']}" for i in facts["images"] if not i["width"]
        ]
        if facts["math"]:
            problems.append(f"{name}: {len(facts['math'])} formulas not rendered")
        styled = page.evaluate(
            "getComputedStyle(document.documentElement).getPropertyValue('--pst-color-primary')"
        )
        if not styled.strip():
            problems.append(f"{name}: the theme's stylesheet did not load")
    context.close()
    problems += recorder.failed + recorder.third_party
    assert not problems, report("pages opened from file://", problems)
