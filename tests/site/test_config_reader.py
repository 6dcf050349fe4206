"""The calculator's config reader (explorer.html#config-reader), in headless Chromium.

The reader pastes a ``config.json`` or chooses the file; the page starts Pyodide
(served by the site, nothing from elsewhere: the recorder blocks and lists any other
host) and runs the package's own Python on it. Each test compares what the page
shows, the recipe, the strip and the bill per layer kind, with what the package
gives here, from the same file through ``transformers``; a malformed file and a model
type the atlas does not read must give a message, not a blank page. On a phone the
reader must not scroll sideways. Screenshots, light and dark, desktop and phone, land
in ``docs/_build/screenshots/config-reader-*.png``; the first read's time (Pyodide's
start included) is printed.
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import pytest
from test_site import DESKTOP, PHONE, opened_at, report

from attention.models import (
    bill,
    facts_from_config,
    layer_strip,
    recipe,
    released_config,
    released_names,
)
from attention.models.text import format_bytes, kind_name

RELEASED = {name: released_config(name) for name in released_names()}

PAGE = "explorer.html"
READ_TIMEOUT_MS = 120_000  # the first read starts Python in the page
SHOWN_JS = """(box) => ({
  status: box.querySelector(".cr-status").textContent,
  error: box.querySelector(".cr-status").classList.contains("cr-error"),
  hidden: box.querySelector(".cr-result").hidden,
  recipe: box.querySelector(".cr-recipe").textContent,
  strip: box.querySelector(".cr-strip").textContent,
  rows: Array.from(box.querySelectorAll(".cr-bill tbody tr"),
    (tr) => Array.from(tr.cells, (td) => td.textContent)),
  total: box.querySelector(".cr-bill tfoot td").textContent,
})"""


def package_page(config: dict, tokens: int, batch: int, cache: str) -> dict:
    """What the page must show, from the package in this Python."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        facts = facts_from_config(json.loads(json.dumps(config)))
    cost = bill(facts, tokens, batch=batch, cache_dtype=cache)
    return {
        "recipe": recipe(facts),
        "strip": layer_strip(facts),
        "rows": [[kind_name(facts, k), format_bytes(size)] for k, size in cost.per_kind.items()],
        "total": format_bytes(cost.cache),
    }


def reads(box) -> int:
    return int(box.evaluate("(box) => box.dataset.reads || '0'"))


def wait_read(page, box, before: int) -> dict:
    """Wait for the page's next answer (a result or an error); what it shows."""
    page.wait_for_function(
        "([box, before]) => Number(box.dataset.reads || 0) > before",
        arg=[box.element_handle(), before],
        timeout=READ_TIMEOUT_MS,
    )
    return box.evaluate(SHOWN_JS)


def read(page, box, *, text: str | None = None) -> dict:
    """Paste ``text`` (if given), press the button; what the page shows once it answers."""
    if text is not None:
        box.locator(".cr-text").fill(text)
    before = reads(box)
    box.locator(".cr-read").click()
    return wait_read(page, box, before)


def shown_page(shown: dict) -> dict:
    return {key: shown[key] for key in ("recipe", "strip", "rows", "total")}


def opened(browser, base_url: str, scheme: str, size: str):
    recorder, context, page = opened_at(browser, base_url, PAGE, size=size, scheme=scheme)
    return recorder, context, page, page.locator(".config-reader")


def test_a_pasted_file_a_chosen_file_and_bad_files(browser, base_url: str, tmp_path: Path):
    recorder, context, page, box = opened(browser, base_url, "light", "desktop")
    assert box.count() == 1, "the calculator has no config reader"
    llama = RELEASED["Llama 3.1 70B"]
    started = time.perf_counter()
    shown = read(page, box, text=json.dumps(llama))
    print(f"first read, Pyodide's start included: {time.perf_counter() - started:.1f} s")
    assert not shown["error"] and not shown["hidden"], shown["status"]
    assert shown_page(shown) == package_page(llama, 32768, 1, "bf16")

    # Another context, batch and cache type: the same Python, called again.
    # Changing a setting reads again: the cache type last, once the others are set
    # (set without events, so that one read answers for all three).
    box.locator(".cr-tokens").evaluate("(input) => { input.value = '131072'; }")
    box.locator(".cr-batch").evaluate("(input) => { input.value = '4'; }")
    before = reads(box)
    box.locator(".cr-cache").select_option("fp8")
    shown = wait_read(page, box, before)
    assert shown_page(shown) == package_page(llama, 131072, 4, "fp8")

    # A file chosen from the disk: a model with several layer kinds and a state.
    config = RELEASED[next(n for n, c in RELEASED.items() if c["model_type"] == "nemotron_h")]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    before = reads(box)
    box.locator(".cr-file").set_input_files(str(path))
    shown = wait_read(page, box, before)
    assert shown_page(shown) == package_page(config, 131072, 4, "fp8")

    for text, says in [
        ('{"model_type": "llama", "num_hidden_layers": 4,', "not JSON"),
        ('{"model_type": "rwkv", "num_hidden_layers": 4}', "RWKV's recurrence"),
        ('{"hidden_size": 64}', "model_type"),
    ]:
        shown = read(page, box, text=text)
        assert shown["error"] and shown["hidden"], (text, shown["status"])
        assert says in shown["status"], (text, shown["status"])
    context.close()
    assert not recorder.problems, report(
        "the config reader's console and requests", recorder.problems
    )


@pytest.mark.parametrize("size", ["desktop", "phone"])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots_on_phone_and_desktop(
    browser, base_url: str, screenshots: Path, scheme: str, size: str
):
    recorder, context, page, box = opened(browser, base_url, scheme, size)
    config = RELEASED[next(n for n, c in RELEASED.items() if c["model_type"] == "cohere2")]
    shown = read(page, box, text=json.dumps(config, indent=1))
    assert shown_page(shown) == package_page(config, 32768, 1, "bf16")
    box.scroll_into_view_if_needed()
    box.screenshot(path=str(screenshots / f"config-reader-{size}-{scheme}.png"))
    width = page.evaluate("document.scrollingElement.scrollWidth")
    viewport = (PHONE if size == "phone" else DESKTOP)["width"]
    assert width <= viewport, f"the page scrolls sideways: {width} px wide in {viewport}"
    context.close()
    assert not recorder.problems, report(
        "the config reader's console and requests", recorder.problems
    )
