"""Fixtures for the browser checks of the built site, run by ``nox -s site``.

The checks need a built site and a Chromium, so they run only when
``ATTENTION_SITE_DIR`` names the HTML folder (the ``site`` session sets it). In any
other run, a plain ``nox -s tests`` or ``pytest`` among them, this folder's tests are
not even collected.

The site is served from a thread on 127.0.0.1 (an ephemeral port) and driven with
Playwright through the system's Chromium; Playwright never downloads a browser.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SITE_DIR_ENV = "ATTENTION_SITE_DIR"
SCREENSHOTS_ENV = "ATTENTION_SITE_SCREENSHOTS"
CHROMIUM_ENV = "ATTENTION_CHROMIUM"  # another Chromium-based browser, e.g. google-chrome

if not os.environ.get(SITE_DIR_ENV):
    collect_ignore_glob = ["test_*.py"]

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def site_dir() -> Path:
    """The built HTML folder; fails, rather than skips, when it is not there."""
    html = Path(os.environ[SITE_DIR_ENV]).resolve()
    if not (html / "index.html").is_file():
        pytest.fail(f"no built site at {html} (no index.html): run `nox -s docs` first")
    return html


@pytest.fixture(scope="session")
def screenshots(site_dir: Path) -> Path:
    """Where the screenshots go: docs/_build/screenshots beside docs/_build/html."""
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or site_dir.parent / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def base_url(site_dir: Path) -> Iterator[str]:
    """The site, served by http.server from a thread; the URL ends with a slash."""
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium: the system's, never one Playwright would download."""
    from playwright.sync_api import sync_playwright

    chromium = (
        os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if chromium is None:
        pytest.fail("no `chromium` on PATH: install it, e.g. `apt-get install chromium`")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
