"""The numbers a figure's alt text gives are the numbers its figure draws.

Alt text is written by hand in a cell's metadata, and no build compares it with the
picture. A figure cell marked ``alt_drawn: true`` promises that every number in its
alt text is drawn in its figure, which is computed from the package and ``MODELS``.
This test draws each such figure and holds it to that promise, so an alt text cannot
keep a number the table or the drawing no longer gives. The lint against typed model
facts (``tests/test_models_table.py``) leaves those alt texts to this test.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import pytest
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(
    [
        *DOCS.glob("chapters/*.md"),
        *DOCS.glob("parts/*.md"),
        DOCS / "index.md",
        DOCS / "which-model-uses-what.md",
    ]
)
# 7,168 or 7168 or 0.25; not the digits inside a word such as "W_dkv2" or "Qwen3"
NUMBER = re.compile(
    r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])"
)


def drawn_cells(path: Path) -> list[tuple[int, str, str]]:
    """(line, alt text, code) of every code cell marked ``alt_drawn: true``."""
    text = path.read_text(encoding="utf-8")
    cells = re.finditer(r"^```\{code-cell\}[^\n]*\n---\n(.*?)\n---\n(.*?)^```", text, re.M | re.S)
    found = []
    for cell in cells:
        meta = yaml.safe_load(cell.group(1)) or {}
        if meta.get("alt_drawn"):
            alt = meta["mystnb"]["image"]["alt"]
            found.append((text[: cell.start()].count("\n") + 1, alt, cell.group(2)))
    return found


CELLS = [
    pytest.param(code, alt, id=f"{path.name}:{line}")
    for path in PAGES
    for line, alt, code in drawn_cells(path)
]


YEARS = range(1990, 2031)


def numbers(text: str) -> set[float]:
    """The numbers in a text, years left out (a figure need not draw its date)."""
    found = {float(match.replace(",", "")) for match in NUMBER.findall(text)}
    return {number for number in found if number not in YEARS}


def drawn_text(figure: plt.Figure) -> str:
    """Every string the figure shows: texts, titles, tick labels, legends."""
    return "\n".join(
        artist.get_text() for artist in figure.findobj(matplotlib.text.Text) if artist.get_visible()
    )


def test_the_pages_have_figures_marked_alt_drawn() -> None:
    assert len(CELLS) >= 5


@pytest.mark.parametrize(("code", "alt"), CELLS)
def test_every_number_in_the_alt_text_is_drawn(code: str, alt: str, monkeypatch) -> None:
    plt.close("all")
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    exec(compile(code, "<figure cell>", "exec"), {"__name__": "__figure__"})
    drawn = "\n".join(drawn_text(plt.figure(number)) for number in plt.get_fignums())
    plt.close("all")
    missing = sorted(numbers(alt) - numbers(drawn))
    assert not missing, f"the alt text says {missing}, which the figure does not draw"


def test_a_number_the_figure_does_not_draw_is_caught(monkeypatch) -> None:
    code = "import matplotlib.pyplot as plt\nplt.figure().text(0, 0, 'a latent of 512')\n"
    with pytest.raises(AssertionError, match="576"):
        test_every_number_in_the_alt_text_is_drawn(code, "512 + 64 = 576", monkeypatch)
