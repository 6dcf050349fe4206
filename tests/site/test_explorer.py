"""The attention explorer (explorer.html), driven in headless Chromium.

Run by ``nox -s site`` after ``nox -s docs``. The page computes its weights in
JavaScript from the scores the build exported (``_static/explorer-data.json``); each
test reads the weights the page shows (as text, 4 decimals, and in full in each
cell's ``data-weight``) and compares them with ``torch.softmax`` of the same exported
scores, computed here. The mask view draws the masks the build exported; its test
reads every cell the page draws, for every pattern and slider value, and compares
them with the package's mask functions, called here. Every test also fails on a
console error, a failed request or a request that leaves the site. Screenshots, light
and dark, desktop and phone, land in ``docs/_build/screenshots/explorer-*.png``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from test_site import DESKTOP, PHONE, Recorder, luminance, new_context, open_page, report

import attention
from attention import MODELS, causal_mask, chunked_mask, padding_mask, sliding_window_mask
from attention.models import bill

SITE = Path(os.environ["ATTENTION_SITE_DIR"]).resolve()
PAGE = "explorer.html"
VIEWS = ("weight-free", "trainable", "multi-head", "trained")  # the views of weights
MASKS = "masks"  # the view of mask patterns
CALCULATOR = "calculator"  # the view that bills a model's cache and weights
OTHERS = 2  # views besides those of weights: the masks and the calculator
TOLERANCE = 1e-6

STATE_JS = """(root) => ({
  query: Number(root.dataset.query),
  temperature: Number(root.dataset.temperature),
  causal: root.dataset.causal === "true",
  state: Number(root.dataset.state),
  pressed: Array.from(root.querySelectorAll(".ae-query"), (b) => b.getAttribute("aria-pressed")),
  cells: Array.from(root.querySelectorAll(".ae-weight"), (c) => ({
    head: Number(c.dataset.head), key: Number(c.dataset.key), text: c.textContent,
    weight: Number(c.dataset.weight), hidden: c.hidden,
  })),
  lines: Array.from(root.querySelectorAll("svg.ae-lines line"), (l) => l.getAttribute("class")),
  summary: root.querySelector(".ae-summary").textContent,
})"""


@pytest.fixture(scope="module")
def data() -> dict:
    path = SITE / "_static" / "explorer-data.json"
    assert path.is_file(), f"{path} is missing: the docs build did not export the explorer's data"
    return json.loads(path.read_text(encoding="utf-8"))


def reference(
    view: dict,
    query: int,
    temperature: float = 1.0,
    causal: bool | None = None,
    state: int = 0,
    head: int = 0,
    dtype=torch.float64,
) -> torch.Tensor:
    """torch.softmax of the exported scores of one query, as the page should show them."""
    scores = torch.tensor(view["states"][state]["heads"][head]["scores"][query], dtype=dtype)
    scaled = scores * view["scale"] / temperature
    if view["causal"] if causal is None else causal:
        scaled[query + 1 :] = -torch.inf
    return torch.softmax(scaled, dim=-1)


def shown(page, view: str) -> dict:
    return page.locator(f"#explorer-{view}").evaluate(STATE_JS)


def weights_of(state: dict, head: int = 0) -> torch.Tensor:
    cells = sorted((c for c in state["cells"] if c["head"] == head), key=lambda c: c["key"])
    return torch.tensor([c["weight"] for c in cells], dtype=torch.float64)


def texts_of(state: dict, head: int = 0) -> list[str]:
    cells = sorted((c for c in state["cells"] if c["head"] == head), key=lambda c: c["key"])
    return [c["text"] for c in cells]


def mismatch(what: str, got: torch.Tensor, want: torch.Tensor) -> list[str]:
    """A problem if the page's weights differ from torch's by more than TOLERANCE, or
    if the 4-decimal text a reader sees is not those weights rounded."""
    problems = []
    worst = (got - want).abs().max().item()
    if worst > TOLERANCE:
        problems.append(
            f"{what}: page shows {got.tolist()}, torch.softmax gives {want.tolist()} "
            f"(off by {worst:.3g})"
        )
    single = (got.to(torch.float32) - want.to(torch.float32)).abs().max().item()
    if single > TOLERANCE:
        problems.append(f"{what}: off by {single:.3g} from float32 torch.softmax")
    return problems


def check_texts(what: str, state: dict, want: torch.Tensor, head: int = 0) -> list[str]:
    texts = texts_of(state, head)
    expected = [f"{w:.4f}" for w in want.tolist()]
    return [] if texts == expected else [f"{what}: the page prints {texts}, expected {expected}"]


@pytest.fixture
def opened(browser, base_url: str):
    """The explorer at desktop size, light theme; fails on anything the recorder saw."""
    recorder = Recorder()
    context = new_context(browser, recorder, viewport=DESKTOP, color_scheme="light")
    page = context.new_page()
    open_page(page, base_url + PAGE, PAGE, recorder)
    ready = page.locator(".attention-explorer.ae-ready").count()
    built = len(VIEWS) + OTHERS
    assert ready == built, f"{ready} of {built} explorer views were built"
    yield page
    context.close()
    assert not recorder.problems, report("the explorer's console and requests", recorder.problems)


def test_hovering_journey_shows_chapter_ones_weights(opened, data):
    page, view = opened, data["views"]["weight-free"]
    root = page.locator("#explorer-weight-free")
    root.locator(".ae-query", has_text="step").click()
    page.mouse.move(0, 0)
    assert shown(page, "weight-free")["query"] == 5
    root.locator(".ae-query", has_text="journey").hover()
    state = shown(page, "weight-free")
    problems = []
    if state["query"] != 1:
        problems.append(f"hovering 'journey' shows query {state['query']}")
    texts = texts_of(state)
    if texts[1] != "0.2379":
        problems.append(f"'journey' attends to itself with {texts[1]}, chapter 1 prints 0.2379")
    problems += mismatch("journey at T=1", weights_of(state), reference(view, 1))
    problems += check_texts("journey at T=1", state, reference(view, 1))
    if "0.2379" not in state["summary"]:
        problems.append(f"the text summary does not give the weight: {state['summary']!r}")
    # Leaving the token brings back the one that was clicked.
    page.mouse.move(0, 0)
    if shown(page, "weight-free")["query"] != 5:
        problems.append("moving the mouse away did not return to the clicked token 'step'")
    assert not problems, report("hovering 'journey'", problems)


@pytest.mark.parametrize("name", ["weight-free", "trainable", "multi-head"])
def test_the_temperature_slider_matches_torch_softmax(opened, data, name):
    page, view = opened, data["views"][name]
    root = page.locator(f"#explorer-{name}")
    slider = root.locator("input[type=range]")
    heads = len(view["states"][0]["heads"])
    n = len(view["tokens"])
    at_one = {q: weights_of(shown_after_click(root, page, name, q)) for q in range(n)}
    problems = []
    for set_to, temperature in (("0.25", 0.25), ("2.5", 2.5), ("key", 1.05)):
        if set_to == "key":
            slider.fill("1")
            slider.focus()
            page.keyboard.press("ArrowRight")
        else:
            slider.fill(set_to)
        label = root.locator("output").text_content()
        if label != f"{temperature:.2f}":
            problems.append(f"{name}: the slider's label says {label} at T={temperature}")
        for q in range(n):
            state = shown_after_click(root, page, name, q)
            if abs(state["temperature"] - temperature) > 1e-12:
                problems.append(
                    f"{name}: the page uses T={state['temperature']}, not {temperature}"
                )
            for h in range(heads):
                want = reference(view, q, temperature, head=h)
                what = f"{name}, query {view['tokens'][q]}, head {h + 1}, T={temperature}"
                problems += mismatch(what, weights_of(state, h), want)
                problems += check_texts(what, state, want, h)
            if q > 0 and torch.allclose(weights_of(state), at_one[q], atol=1e-4):
                problems.append(f"{name}, query {q}: T={temperature} shows the same weights as T=1")
    assert not problems, report("the temperature slider", problems)


def shown_after_click(root, page, name: str, query: int) -> dict:
    root.locator(".ae-query").nth(query).click()
    return shown(page, name)


def test_the_causal_toggle_zeroes_the_future(opened, data):
    page, view = opened, data["views"]["trainable"]
    root = page.locator("#explorer-trainable")
    toggle = root.locator("input[type=checkbox]")
    problems = []
    if not toggle.is_checked():
        problems.append("the causal mask starts switched off")
    for causal in (True, False, True):
        toggle.set_checked(causal)
        for q in range(6):
            state = shown_after_click(root, page, "trainable", q)
            got, want = weights_of(state), reference(view, q, causal=causal)
            what = f"query {view['tokens'][q]}, causal {causal}"
            problems += mismatch(what, got, want) + check_texts(what, state, want)
            future = got[q + 1 :]
            if causal and not torch.all(future == 0):
                problems.append(f"{what}: the future keeps weights {future.tolist()}")
            if not causal and not torch.all(got > 0):
                problems.append(f"{what}: without the mask some weights are 0: {got.tolist()}")
            lines = len(state["lines"])
            if lines != (q + 1 if causal else 6):
                problems.append(f"{what}: {lines} lines drawn")
    assert not problems, report("the causal toggle", problems)


def test_one_column_per_head_and_a_head_selector(opened, data):
    page, view = opened, data["views"]["multi-head"]
    root = page.locator("#explorer-multi-head")
    state = shown_after_click(root, page, "multi-head", 3)
    problems = []
    for h in range(2):
        problems += mismatch(f"head {h + 1}", weights_of(state, h), reference(view, 3, head=h))
    if weights_of(state, 0).tolist() == weights_of(state, 1).tolist():
        problems.append("both columns show the same weights")
    buttons = root.locator("button.ae-head")
    buttons.nth(0).click()  # hide head 1
    state = shown(page, "multi-head")
    if buttons.nth(0).get_attribute("aria-pressed") != "false":
        problems.append("the head 1 button is still pressed after hiding head 1")
    if not all(c["hidden"] for c in state["cells"] if c["head"] == 0):
        problems.append("head 1's column is still shown after hiding it")
    if any("ae-head-0" in line for line in state["lines"]) or len(state["lines"]) != 4:
        problems.append(f"with head 1 hidden, the lines drawn are {state['lines']}")
    buttons.nth(1).click()  # the last head shown stays
    if buttons.nth(1).get_attribute("aria-pressed") != "true":
        problems.append("hiding the last head left no head at all")
    assert not problems, report("the heads", problems)


def test_the_trained_head_before_and_after_training(opened, data):
    page, view = opened, data["views"]["trained"]
    root = page.locator("#explorer-trained")
    problems = []
    for s, label in enumerate(("before training", "after training")):
        root.get_by_label(label).check()
        for q in range(1, len(view["tokens"])):
            state = shown_after_click(root, page, "trained", q)
            want = reference(view, q, state=s)
            problems += mismatch(f"{label}, position {q}", weights_of(state), want)
            previous = weights_of(state)[q - 1].item()
            if s == 1 and previous < 0.9:
                problems.append(f"after training, position {q} puts {previous} on its predecessor")
        if shown(page, "trained")["state"] != s:
            problems.append(f"choosing {label!r} did not switch the weights")
    assert not problems, report("before and after training", problems)


def test_keyboard_tab_and_arrows_move_between_tokens(opened, data):
    page, view = opened, data["views"]["weight-free"]
    root = page.locator("#explorer-weight-free")
    root.locator("input[type=range]").focus()
    problems = []

    def focused() -> tuple[str, dict]:
        return page.evaluate("document.activeElement.textContent"), shown(page, "weight-free")

    def expect(key: str, token: str) -> None:
        page.keyboard.press(key)
        text, state = focused()
        q = view["tokens"].index(token)
        if text != token or state["query"] != q or state["pressed"][q] != "true":
            problems.append(
                f"after {key}: focus on {text!r}, showing query {state['query']}, "
                f"expected {token!r}"
            )
            return
        problems.extend(check_texts(f"focus on {token}", state, reference(view, q)))
        outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        if outline in ("", "none"):
            problems.append(f"focus on {token!r} shows no outline")

    expect("Tab", "Your")
    expect("ArrowDown", "journey")
    expect("ArrowRight", "starts")
    expect("ArrowUp", "journey")
    expect("End", "step")
    expect("Home", "Your")
    expect("Tab", "journey")
    assert not problems, report("keyboard focus", problems)


def test_a_phone_taps_instead_of_hovering(browser, base_url: str, data):
    recorder = Recorder()
    context = new_context(
        browser, recorder, viewport=PHONE, has_touch=True, is_mobile=True, color_scheme="light"
    )
    page = context.new_page()
    open_page(page, base_url + PAGE, PAGE, recorder)
    problems = []
    for name in VIEWS:
        view = data["views"][name]
        root = page.locator(f"#explorer-{name}")
        root.scroll_into_view_if_needed()
        q = len(view["tokens"]) - 2
        root.locator(".ae-query").nth(q).tap()
        state = shown(page, name)
        if state["query"] != q:
            problems.append(f"{name}: tapping token {q} shows query {state['query']}")
        problems += check_texts(f"{name} after a tap", state, reference(view, q))
        box = root.bounding_box()
        if box["x"] < 0 or box["x"] + box["width"] > PHONE["width"]:
            problems.append(f"{name}: the view spans x={box['x']}..{box['x'] + box['width']}")
        for cell in root.locator(".ae-weight").all():
            cell_box = cell.bounding_box()
            if cell_box and cell_box["x"] + cell_box["width"] > box["x"] + box["width"] + 1:
                problems.append(f"{name}: a weight sticks out of the view at {cell_box}")
                break
    root = page.locator(f"#explorer-{MASKS}")
    root.scroll_into_view_if_needed()
    root.locator(".ae-query").nth(2).tap()
    if mask_state(page)["query"] != 2:
        problems.append(f"masks: tapping token 2 shows query {mask_state(page)['query']}")
    box = root.bounding_box()
    if box["x"] < 0 or box["x"] + box["width"] > PHONE["width"]:
        problems.append(f"masks: the view spans x={box['x']}..{box['x'] + box['width']}")
    for part in root.locator(".ae-cell, .ae-count, .ae-col-key, .ae-call, .ae-legend").all():
        part_box = part.bounding_box()
        if part_box and part_box["x"] + part_box["width"] > box["x"] + box["width"] + 1:
            problems.append(f"masks: a part of the grid sticks out of the view at {part_box}")
            break
    wide = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    if wide > 1:
        problems.append(f"the page scrolls sideways by {wide}px on a phone")
    context.close()
    problems += recorder.problems
    assert not problems, report("the explorer on a phone", problems)


# -- The mask view ---------------------------------------------------------------------

PATTERNS = ("causal", "sliding", "chunked", "padding")

MASK_JS = """(root) => ({
  pattern: root.dataset.pattern,
  value: root.dataset.value,
  query: Number(root.dataset.query),
  checked: root.querySelector("input[type=radio]:checked").value,
  sizeHidden: root.querySelector(".ae-size").hidden,
  sizeLabel: root.querySelector(".ae-size label").textContent.trim(),
  sizeShown: root.querySelector(".ae-size output").textContent,
  call: root.querySelector(".ae-call").textContent,
  rule: root.querySelector(".ae-rule").textContent,
  cells: Array.from(root.querySelectorAll(".ae-cell"), (c) => ({
    query: Number(c.dataset.query), key: Number(c.dataset.key), allowed: c.dataset.allowed,
    filled: c.classList.contains("ae-allowed"), hatched: c.classList.contains("ae-masked"),
    row: c.classList.contains("ae-in-row"),
  })),
  counts: Array.from(root.querySelectorAll(".ae-count"), (c) => c.textContent),
  queries: Array.from(root.querySelectorAll(".ae-query"), (b) => b.textContent),
  pressed: Array.from(root.querySelectorAll(".ae-query"), (b) => b.getAttribute("aria-pressed")),
  keys: Array.from(root.querySelectorAll(".ae-col-key"), (k) => k.textContent),
  seen: Array.from(root.querySelectorAll(".ae-col-key"), (k) => k.classList.contains("ae-seen")),
  summary: root.querySelector(".ae-summary").textContent,
})"""


def mask_state(page) -> dict:
    return page.locator(f"#explorer-{MASKS}").evaluate(MASK_JS)


def package_mask(pattern: str, value: int | None) -> torch.Tensor:
    """The mask the package builds for one pattern of the mask view, (6, 6)."""
    if pattern == "causal":
        return causal_mask(6)
    if pattern == "sliding":
        return sliding_window_mask(6, value)
    if pattern == "chunked":
        return chunked_mask(6, value)
    if pattern == "padding":
        return (causal_mask(6) & padding_mask([value, 6], 6)[:, None, :])[0]
    raise AssertionError(f"no package mask for the pattern {pattern!r}")


def drawn(state: dict) -> tuple[torch.Tensor, list[str]]:
    """The mask the page draws, from each cell's data-allowed, and any cell whose fill or
    hatching says otherwise."""
    got = torch.zeros(6, 6, dtype=torch.bool)
    problems = []
    for cell in state["cells"]:
        allowed = cell["allowed"] == "true"
        got[cell["query"], cell["key"]] = allowed
        if (cell["filled"], cell["hatched"]) != (allowed, not allowed):
            problems.append(f"cell {cell['query']},{cell['key']} is drawn otherwise than {allowed}")
    return got, problems


def check_mask(what: str, state: dict, want: torch.Tensor, tokens: list[str]) -> list[str]:
    """The page's grid, counts, labels and summary against the package's mask ``want``."""
    got, problems = drawn(state)
    if len(state["cells"]) != 36:
        problems.append(f"{what}: {len(state['cells'])} cells drawn, not 36")
    if not torch.equal(got, want):
        problems.append(
            f"{what}: the page draws {got.int().tolist()}, the package builds {want.int().tolist()}"
        )
    counts = [str(int(row.sum())) for row in want]
    if state["counts"] != counts:
        problems.append(f"{what}: the page counts {state['counts']} keys, expected {counts}")
    if state["queries"] != tokens or state["keys"] != tokens:
        problems.append(f"{what}: labels {state['queries']} / {state['keys']}, expected {tokens}")
    i = state["query"]
    if state["seen"] != want[i].tolist():
        problems.append(f"{what}: query {i} marks keys {state['seen']} as seen")
    if not all(c["row"] == (c["query"] == i) for c in state["cells"]):
        problems.append(f"{what}: the highlighted row is not query {i}'s")
    if f"{int(want[i].sum())} of 6 keys" not in state["summary"]:
        problems.append(f"{what}: the summary {state['summary']!r} miscounts query {i}'s keys")
    named = [f'"{tokens[j]}"' for j in range(6) if want[i, j]]
    if not all(name in state["summary"] for name in named):
        problems.append(f"{what}: the summary {state['summary']!r} does not name {named}")
    return problems


def test_the_mask_view_draws_the_packages_masks(opened, data):
    """Every cell, for every pattern and every slider value, is the package's mask."""
    page, view = opened, data["views"][MASKS]
    options = {(p["name"], o["value"]): o for p in view["patterns"] for o in p["options"]}
    root = page.locator(f"#explorer-{MASKS}")
    slider = root.locator("input[type=range]")
    problems = []
    state = mask_state(page)
    if (state["pattern"], state["checked"], state["query"]) != ("causal", "causal", 4):
        problems.append(f"the view starts at {state['pattern']}, query {state['query']}")
    compared = 0
    for pattern in PATTERNS:
        root.locator(f"input[type=radio][value={pattern}]").check()
        values = [None] if pattern == "causal" else [1, 2, 3, 4, 5, 6]
        if mask_state(page)["sizeHidden"] != (pattern == "causal"):
            problems.append(f"{pattern}: the slider must show only for a window, chunk or length")
        for value in values:
            if value is not None:
                slider.fill(str(value))
            for query in (0, 4, 5):
                root.locator(".ae-query").nth(query).click()
                state = mask_state(page)
                what = f"{pattern}, value {value}, query {query}"
                if (state["pattern"], state["query"]) != (pattern, query):
                    problems.append(f"{what}: the page shows {state['pattern']}, {state['query']}")
                if state["value"] != ("" if value is None else str(value)):
                    problems.append(f"{what}: the page's value is {state['value']!r}")
                if value is not None and state["sizeShown"] != str(value):
                    problems.append(f"{what}: the slider's label says {state['sizeShown']}")
                exported = options[pattern, value]
                if (state["call"], state["rule"]) != (
                    exported["call"],
                    f"True where {exported['rule']}",
                ):
                    problems.append(f"{what}: the page names {state['call']!r}, {state['rule']!r}")
                tokens = list(attention.TOKENS)
                if pattern == "padding":
                    tokens = tokens[:value] + ["pad"] * (6 - value)
                problems += check_mask(what, state, package_mask(pattern, value), tokens)
                compared += 1
    assert compared == 3 * (1 + 3 * 6)
    assert not problems, report("the mask view", problems)


def test_the_mask_view_keeps_each_patterns_value_and_moves_by_keyboard(opened):
    page = opened
    root = page.locator(f"#explorer-{MASKS}")
    slider = root.locator("input[type=range]")
    problems = []
    root.get_by_label("sliding window").check()
    slider.fill("2")
    root.get_by_label("chunked").check()
    slider.fill("4")
    slider.focus()
    page.keyboard.press("ArrowLeft")  # chunk 3
    state = mask_state(page)
    if state["value"] != "3" or state["call"] != "chunked_mask(6, 3)":
        problems.append(f"ArrowLeft from chunk 4 shows {state['value']}, {state['call']!r}")
    problems += check_mask(
        "chunk 3 by keyboard", state, package_mask("chunked", 3), list(attention.TOKENS)
    )
    root.get_by_label("sliding window").check()
    state = mask_state(page)
    if state["value"] != "2" or state["sizeShown"] != "2" or state["sizeLabel"] != "window":
        problems.append(
            f"back to the sliding window: value {state['value']}, "
            f"label {state['sizeLabel']!r} {state['sizeShown']}"
        )
    problems += check_mask(
        "window 2 again", state, package_mask("sliding", 2), list(attention.TOKENS)
    )
    root.locator(".ae-query").nth(1).focus()
    for key, query in (("ArrowDown", 2), ("End", 5), ("ArrowUp", 4), ("Home", 0)):
        page.keyboard.press(key)
        state = mask_state(page)
        if state["query"] != query or state["pressed"][query] != "true":
            problems.append(f"after {key}: query {state['query']}, expected {query}")
    page.locator(f"#explorer-{MASKS} .ae-query").nth(3).hover()
    if mask_state(page)["query"] != 3:
        problems.append("hovering query 3 does not show its row")
    page.mouse.move(0, 0)
    if mask_state(page)["query"] != 0:
        problems.append("leaving query 3 does not return to the chosen query 0")
    assert not problems, report("the mask view's controls", problems)


MASK_CONTRAST_JS = """(root) => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  return {
    background: rgb(getComputedStyle(root).backgroundColor),
    query: rgb(getComputedStyle(root.querySelector(".ae-query")).color),
    key: rgb(getComputedStyle(root.querySelector(".ae-col-key.ae-seen")).color),
    count: rgb(getComputedStyle(root.querySelector(".ae-count.ae-in-row")).color),
  };
}"""


CONTRAST_JS = """(root) => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const cell = root.querySelector(".ae-weight:not(.ae-masked)");
  const line = root.querySelector("svg.ae-lines line");
  return {
    background: rgb(getComputedStyle(root).backgroundColor),
    text: rgb(getComputedStyle(cell).color),
    line: rgb(getComputedStyle(line).stroke),
    theme: document.documentElement.dataset.theme,
  };
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_screenshots_and_colours_in_light_and_dark(
    browser, base_url: str, screenshots: Path, scheme: str, size: str
):
    """The explorer follows the theme; text and lines stand out from its background."""
    recorder = Recorder()
    viewport = DESKTOP if size == "desktop" else PHONE
    context = new_context(
        browser,
        recorder,
        viewport=viewport,
        color_scheme=scheme,
        has_touch=size == "phone",
        is_mobile=size == "phone",
    )
    page = context.new_page()
    open_page(page, base_url + PAGE, PAGE, recorder)
    problems = []
    for name in VIEWS:
        colours = page.locator(f"#explorer-{name}").evaluate(CONTRAST_JS)
        if colours["theme"] != scheme:
            problems.append(f"the page is in the {colours['theme']} theme, not {scheme}")
        back = luminance(colours["background"])
        if (back < 0.5) != (scheme == "dark"):
            problems.append(f"{name}: background rgb{tuple(colours['background'])} in {scheme}")
        for part in ("text", "line"):
            if abs(luminance(colours[part]) - back) < 0.3:
                problems.append(
                    f"{name}: {part} rgb{tuple(colours[part])} on "
                    f"rgb{tuple(colours['background'])} is hard to see ({scheme})"
                )
    masks = page.locator(f"#explorer-{MASKS}")
    colours = masks.evaluate(MASK_CONTRAST_JS)
    back = luminance(colours["background"])
    for part in ("query", "key", "count"):
        if abs(luminance(colours[part]) - back) < 0.3:
            problems.append(
                f"masks: {part} text rgb{tuple(colours[part])} on "
                f"rgb{tuple(colours['background'])} is hard to see ({scheme})"
            )
    page.locator("#explorer-trained").get_by_label("after training").check()
    page.mouse.move(0, 0)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=screenshots / f"explorer-{size}-{scheme}.png")
    for name in VIEWS:
        view = page.locator(f"#explorer-{name}")
        view.scroll_into_view_if_needed()
        view.screenshot(path=screenshots / f"explorer-{size}-{scheme}-{name}.png")
    calculator = page.locator(f"#explorer-{CALCULATOR}")
    calculator.scroll_into_view_if_needed()
    calculator.screenshot(path=screenshots / f"explorer-{size}-{scheme}-{CALCULATOR}.png")
    masks.scroll_into_view_if_needed()
    for pattern in PATTERNS:
        masks.locator(f"input[type=radio][value={pattern}]").check()
        page.mouse.move(0, 0)
        masks.screenshot(path=screenshots / f"explorer-{size}-{scheme}-masks-{pattern}.png")
    context.close()
    problems += recorder.problems
    assert not problems, report(f"the explorer ({size}, {scheme})", problems)


# -- The calculator ---------------------------------------------------------------------

CALCULATOR_JS = """(root) => {
  const bytes = (row) => {
    const cell = root.querySelector(`tr.${row} td.ae-bytes`);
    return cell.dataset.bytes === undefined ? null : Number(cell.dataset.bytes);
  };
  return {
    model: root.dataset.model,
    tokens: Number(root.dataset.tokens),
    batch: Number(root.dataset.batch),
    kinds: Object.fromEntries(Array.from(root.querySelectorAll("tr.ae-kind"), (tr) =>
      [tr.dataset.kind, Number(tr.querySelector("td.ae-bytes").dataset.bytes)])),
    cache: bytes("ae-cache"),
    weights: bytes("ae-weights"),
    summary: root.querySelector(".ae-summary").textContent,
  };
}"""


def set_number(root, control: str, value: int) -> None:
    """Type a number into one of the calculator's boxes, as a reader does."""
    box = root.locator(f"#ae-{CALCULATOR}-{control}")
    box.fill(str(value))
    box.press("Enter")
    box.dispatch_event("change")


def test_the_calculator_bills_every_model_as_the_package_does(opened):
    """Each model, at its trained context and at an odd one, with a batch and every
    cache and weight type: the bytes the page shows per kind of layer are
    attention.models.bill's."""
    root = opened.locator(f"#explorer-{CALCULATOR}")
    problems = []
    settings = [("bf16", "bf16"), ("fp8", "int4"), ("int8", "fp8"), ("int4", "int8")]
    for index, facts in enumerate(MODELS.values()):
        root.locator("select").select_option(str(index))
        for step, tokens in enumerate((facts.trained_context, 100_003)):
            cache, weights = settings[(index + step) % len(settings)]
            batch = 1 + 2 * step
            set_number(root, "tokens", tokens)
            set_number(root, "batch", batch)
            root.locator(f"#ae-{CALCULATOR}-cache-{cache}").check()
            root.locator(f"#ae-{CALCULATOR}-weights-{weights}").check()
            state = root.evaluate(CALCULATOR_JS)
            want = bill(facts, tokens, batch=batch, cache_dtype=cache, dtype=weights)
            what = f"{facts.name}, {batch} x {tokens} tokens, cache {cache}, weights {weights}"
            shown_as = (state["model"], state["tokens"], state["batch"])
            if shown_as != (facts.name, tokens, batch):
                problems.append(f"{what}: the page shows {shown_as}")
            if state["kinds"] != want.per_kind or state["cache"] != want.cache:
                problems.append(f"{what}: the page bills {state['kinds']}, bill {want.per_kind}")
            if state["weights"] != want.weights:
                problems.append(f"{what}: weights {state['weights']}, bill {want.weights}")
    slider = root.locator(f"#ae-{CALCULATOR}-tokens-slider")
    slider.fill(slider.get_attribute("max"))
    if root.evaluate(CALCULATOR_JS)["tokens"] != 2**20:
        problems.append("the context slider's last stop is not 1,048,576 tokens")
    assert not problems, report("the calculator", problems)


def test_the_explorer_works_from_the_file_system(browser, data):
    """A downloaded copy of the site, opened from disk: the data loads without fetch()."""
    recorder = Recorder()
    context = new_context(browser, recorder, viewport=DESKTOP)
    page = context.new_page()
    open_page(page, (SITE / PAGE).as_uri(), PAGE, recorder)
    problems = []
    ready = page.locator(".attention-explorer.ae-ready").count()
    if ready != len(VIEWS) + OTHERS:
        problems.append(f"{ready} of {len(VIEWS) + OTHERS} views were built from file://")
    else:
        view = data["views"]["weight-free"]
        problems += check_texts("from file://", shown(page, "weight-free"), reference(view, 1))
    context.close()
    problems += recorder.problems
    assert not problems, report("the explorer from file://", problems)
