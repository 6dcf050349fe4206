"""The compare view (docs/models/compare.md, docs/_static/compare.js) and the model pages'
key numbers, in Chromium: the numbers it shows are the package's, picking another
model redraws them, and it reads on a phone, light and dark. Screenshots land in
``docs/_build/screenshots/compare-*.png`` and ``key-numbers-*.png``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_site import luminance, open_page, opened_at, report

from attention import MODELS
from attention.models import bill, recipe, released_parameters

PAGE = "models/compare.html"


def opened(browser, base_url: str, *, size: str = "desktop", scheme: str = "light"):
    recorder, context, page = opened_at(browser, base_url, PAGE, size=size, scheme=scheme)
    return context, page, recorder


def test_picking_two_models_shows_their_recipes_and_caches(browser, base_url: str):
    context, page, recorder = opened(browser, base_url)
    try:
        root = page.locator("#model-compare")
        pickers = root.locator("select")
        assert pickers.count() == 2
        pickers.nth(0).select_option(label="gpt-oss-20b")
        pickers.nth(1).select_option(label="Qwen3-30B-A3B")
        recipes = root.locator("table.mc-recipe tbody tr")
        assert recipes.count() == 5
        cells = recipes.nth(0).locator("td").all_inner_texts()
        gpt, qwen = MODELS["gpt-oss-20b"], MODELS["Qwen3-30B-A3B"]
        assert recipe(gpt).split(": ", 1)[1].startswith(cells[0])
        assert recipe(qwen).split(": ", 1)[1].startswith(cells[1])
        assert cells[2] == "≠ differs"
        lines = root.locator("svg.mc-plot polyline")
        assert [lines.nth(i).get_attribute("data-model") for i in range(2)] == [
            "gpt-oss-20b",
            "Qwen3-30B-A3B",
        ]
        label = root.locator("svg.mc-plot").get_attribute("aria-label")
        # The plot's contexts double from 1k while its config's positions allow.
        longest = max(2**p for p in range(10, 21) if 2**p <= qwen.max_position_embeddings)
        last = bill(qwen, longest).cache / 2**30
        assert f"Qwen3-30B-A3B reaches {last:.2f} GiB at {longest // 1024}k tokens" in label
        key = root.locator("table.mc-key").inner_text()
        assert f"({released_parameters('gpt-oss-20b'):,})" in key  # counted, to the last
        problems = recorder.console + recorder.failed + recorder.third_party
        assert not problems, report("the compare page", problems)
    finally:
        context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_compare_view_and_key_numbers_read_in_light_and_dark(
    browser, base_url: str, screenshots: Path, size: str, scheme: str
):
    context, page, recorder = opened(browser, base_url, size=size, scheme=scheme)
    try:
        problems = []
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > page.viewport_size["width"]:
            problems.append(f"the page scrolls sideways: {width} px wide")
        colours = page.locator("#model-compare .mc-axis").first.evaluate(
            "e => [getComputedStyle(e).fill, getComputedStyle(document.body).backgroundColor]"
        )
        text, back = (
            [int(float(c)) for c in colour[colour.index("(") + 1 : -1].split(",")[:3]]
            for colour in colours
        )
        if abs(luminance(text) - luminance(back)) < 0.3:
            problems.append(f"the plot's labels rgb{tuple(text)} on rgb{tuple(back)}")
        page.screenshot(path=screenshots / f"compare-{size}-{scheme}.png", full_page=True)
        card = "models/gpt-oss-20b.html"
        open_page(page, base_url + card, card, recorder)
        box = page.locator(".admonition.key-numbers")
        if box.count() != 1 or "parameters" not in box.inner_text():
            problems.append("the gpt-oss-20b page has no key numbers with its parameters")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > page.viewport_size["width"]:
            problems.append(f"the model page scrolls sideways: {width} px wide")
        box.screenshot(path=screenshots / f"key-numbers-{size}-{scheme}.png")
        problems += recorder.console + recorder.failed + recorder.third_party
        assert not problems, report(f"the compare view ({size}, {scheme})", problems)
    finally:
        context.close()
