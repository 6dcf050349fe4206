"""Check what every gallery script prints against the expected output written in it.

A gallery script writes what a ``print`` shows as a comment right after the code,
so that a reader who downloads the script can compare too::

    print(weights.sum(dim=-1))
    # Expected output:
    # tensor([1., 1., 1., 1., 1., 1.])

The expected outputs of one code block (the code between two ``# %%`` text blocks)
are joined in order and compared, number by number (:mod:`printed_values`), with
what sphinx-gallery captured when it ran that block. A block whose output is random
says so with ``# Unchecked output: <reason>`` and asserts what must hold. A block
that prints with no expected output, expects output and prints nothing, or a number
with two or more decimals in the text blocks that the script never printed, is a
warning naming the script and line; ``-W`` fails the build.

sphinx-gallery runs the scripts and writes one reST page each, marking every block
with ``.. GENERATED FROM PYTHON SOURCE LINES a-b``; this extension reads the script
with sphinx-gallery's own parser, takes each block's output from that page (Sphinx's
``source-read`` event), and removes the expected-output comments from the code shown
on the page, where the real output stands right below it. The downloads keep them.

It also gives each thumbnail on the gallery's index the alt text of the figure it
shows (sphinx-gallery leaves it empty): :func:`thumbnail_alts`.
"""

from __future__ import annotations

import re
from pathlib import Path

from printed_values import EXPECTED, UNCHECKED, expected_output, without_expectations
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx_gallery.py_source_parser import split_code_and_text_blocks
from verify_outputs import Tally, check_output, check_prose, record

logger = logging.getLogger(__name__)

GENERATED = re.compile(r"^\.\. GENERATED FROM PYTHON SOURCE LINES (\d+)-(\d+)$", re.MULTILINE)
OUTPUT = re.compile(r"^\.\. rst-class:: sphx-glr-script-out\n\n \.\. code-block:: none\n\n", re.M)


def first_line(lineno: int, code: str, prefixes: tuple[str, ...]) -> int:
    """The script line of the first line of ``code`` (starting at ``lineno``) with a prefix."""
    lines = code.splitlines()
    for offset, line in enumerate(lines):
        if line.strip().startswith(prefixes):
            return lineno + offset
    return lineno + next((i for i, line in enumerate(lines) if line.strip()), 0)


def block_outputs(rst: str) -> dict[int, str]:
    """What each code block printed, keyed by its first line in the script."""
    outputs = {}
    markers = list(GENERATED.finditer(rst))
    for marker, following in zip(markers, [*markers[1:], None], strict=True):
        section = rst[marker.end() : following.start() if following else len(rst)]
        found = OUTPUT.search(section)
        text = ""
        if found:
            lines = []
            for line in section[found.end() :].splitlines():
                if line.strip() and not line.startswith("    "):
                    break
                lines.append(line[4:])
            text = "\n".join(lines)
        outputs[int(marker.group(1))] = "\n".join(s.rstrip() for s in text.strip("\n").splitlines())
    return outputs


def check_script(script: Path, rst: str, shown_as: str) -> Tally:
    """Compare every code block's output with its expectation, and the prose with both."""
    tally, printed = Tally(), []
    _, blocks = split_code_and_text_blocks(str(script))
    outputs = block_outputs(rst)

    def warner(line: int):
        def warn(message: str) -> None:
            logger.warning(message, location=f"{shown_as}:{line}")
            tally.problems.append(message)

        return warn

    prose = []
    for block in blocks:
        if block.type == "text":
            prose += [(block.lineno + i, text) for i, text in enumerate(block.content.splitlines())]
            continue
        actual = outputs.get(block.lineno, "")
        printed.append(actual)
        expect, unchecked = expected_output(block.content)
        line = first_line(block.lineno, block.content, (EXPECTED, UNCHECKED, "print("))
        check_output(tally, "this code block", actual, expect, unchecked, warner(line))
    check_prose(tally, prose, printed, lambda line: f"{shown_as}:{line}")
    return tally


THUMBNAIL = re.compile(
    r"^(?P<indent> *)\.\. image:: /(?P<dir>[^\n]+)/images/thumb/sphx_glr_(?P<name>\w+)_thumb\.png\n"
    r"(?P=indent)  :alt:[ \t]*$",
    re.MULTILINE,
)
THUMBNAIL_NUMBER = re.compile(r"^# sphinx_gallery_thumbnail_number = (\d+)", re.MULTILINE)


def figure_alt(rst: str, name: str, number: int) -> str | None:
    """The alt text of figure ``number`` (from 1) on an example's generated page."""
    image = re.escape(f"sphx_glr_{name}_{number:03d}.png")
    # Indented when a code block draws several figures (sphinx-gallery lists them).
    found = re.search(rf"^ *\.\. image-sg:: \S*{image}\n +:alt: (.+)$", rst, re.MULTILINE)
    return found.group(1).strip() if found else None


def thumbnail_alts(index: str, folder: Path, scripts: Path) -> str:
    """The gallery index with each thumbnail's empty alt replaced by its figure's alt.

    A thumbnail is a small copy of one of the example's figures (the first, or the one
    ``# sphinx_gallery_thumbnail_number`` names), so it says what that figure says. A
    thumbnail whose figure has no alt text keeps the empty one, which the site check
    reports.
    """

    def fill(match: re.Match) -> str:
        name = match.group("name")
        page, script = folder / f"{name}.rst", scripts / f"{name}.py"
        if not page.exists():
            return match.group(0)
        chosen = THUMBNAIL_NUMBER.search(script.read_text("utf-8")) if script.exists() else None
        alt = figure_alt(page.read_text("utf-8"), name, int(chosen.group(1)) if chosen else 1)
        return f"{match.group(0).rstrip()} {alt}" if alt else match.group(0)

    return THUMBNAIL.sub(fill, index)


def on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    if "sphinx_gallery_conf" not in app.config:  # a build without the gallery
        return
    conf = app.config.sphinx_gallery_conf
    gallery_dir = conf["gallery_dirs"]
    if docname == f"{gallery_dir}/index":
        folder = Path(app.srcdir, gallery_dir)
        source[0] = thumbnail_alts(source[0], folder, Path(app.srcdir, conf["examples_dirs"]))
        return
    if not docname.startswith(f"{gallery_dir}/") or docname.endswith("/index"):
        return
    name = docname.removeprefix(f"{gallery_dir}/")
    script = Path(app.srcdir, conf["examples_dirs"], f"{name}.py").resolve()
    if not script.exists():
        return
    shown_as = str(script.relative_to(Path(app.srcdir).parent))
    record(app, shown_as, check_script(script, source[0], shown_as))
    source[0] = strip_expectations(source[0])


CODE = re.compile(r"^\.\. code-block:: Python\n\n((?:    .*\n|\n)+)", re.MULTILINE)


def strip_expectations(rst: str) -> str:
    """Remove the expected-output comments from every code block of a generated page."""

    def strip(match: re.Match) -> str:
        return ".. code-block:: Python\n\n" + without_expectations(match.group(1)) + "\n"

    return CODE.sub(strip, rst)


def setup(app: Sphinx) -> dict:
    app.setup_extension("verify_outputs")
    app.connect("source-read", on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
