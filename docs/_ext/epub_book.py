"""The EPUB of ``nox -s book``: formulas as MathML, and every file in the zip.

**Formulas.** EPUB 3 readers display MathML without a script.

On the site, MathJax typesets every formula in the browser. An EPUB carries no
scripts (Sphinx's EPUB builder leaves them out, and most readers would not run them),
so there a formula would stay LaTeX source. This extension registers a math renderer,
``mathml``, that writes each formula as MathML with docutils' own LaTeX-to-MathML
converter, and makes it the EPUB builder's (``epub_math_renderer``, which Sphinx reads
for the ``epub`` builder before ``html_math_renderer``); the site keeps MathJax
(``html_math_renderer = "mathjax"`` in ``conf.py``). A formula the converter cannot
read is kept as its LaTeX source, in a ``code`` element, and named in the build's log.

**Files.** The EPUB builder writes its zip when the pages are written, before the build's
end, where myst-nb writes its style sheet (``mystnb.<hash>.css``, which every page
links). So the EPUB's package and zip are written again once every extension has
written its files (:func:`write_again`).
"""

from __future__ import annotations

import html
import re

from docutils import nodes
from docutils.utils.math import MathError
from docutils.utils.math.latex2mathml import tex2mathml
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)
RENDERER = "mathml"
# XHTML knows only XML's five named entities; docutils may write others (&ApplyFunction;).
NAMED_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
XML_ENTITIES = {"amp", "lt", "gt", "quot", "apos"}


def numeric_entities(markup: str) -> str:
    """``markup`` with every named entity but XML's own written as a number.

    >>> numeric_entities("<mo>&ApplyFunction;</mo><mo>&lt;</mo>")
    '<mo>&#x2061;</mo><mo>&lt;</mo>'
    """

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in XML_ENTITIES:
            return match.group(0)
        text = html.unescape(match.group(0))
        return "".join(f"&#x{ord(char):x};" for char in text)

    return NAMED_ENTITY.sub(number, markup)


def mathml(latex: str, block: bool) -> str | None:
    """``latex`` as a MathML element, or None if docutils cannot read it.

    >>> print(mathml("x_i", block=False))
    <math xmlns="http://www.w3.org/1998/Math/MathML">
      <msub>
        <mi>x</mi>
        <mi>i</mi>
      </msub>
    </math>
    >>> mathml(r"\\unknowncommand{x}", block=False) is None
    True
    """
    try:
        return numeric_entities(tex2mathml(latex, as_block=block))
    except MathError:
        return None


def render(translator, node: nodes.Element, block: bool) -> None:
    latex = node.astext()
    markup = mathml(latex, block)
    if markup is None:
        logger.info("epub_book: kept as LaTeX, docutils cannot read %r", latex, location=node)
        tag = "pre" if block else "code"
        markup = f'<{tag} class="math">{html.escape(latex)}</{tag}>'
    if block:
        translator.body.append(translator.starttag(node, "div", CLASS="math"))
        translator.body.append(markup + "</div>\n")
    else:
        translator.body.append(markup)
    raise nodes.SkipNode


def visit_math(translator, node: nodes.math) -> None:
    render(translator, node, block=False)


def visit_math_block(translator, node: nodes.math_block) -> None:
    render(translator, node, block=True)


def write_again(app: Sphinx, exception: Exception | None) -> None:
    """Write the EPUB's package (its list of files) and its zip again, now complete."""
    if exception is None and app.builder.name == "epub":
        app.builder.handle_finish()


def setup(app: Sphinx) -> dict:
    app.add_html_math_renderer(
        RENDERER, inline_renderers=(visit_math, None), block_renderers=(visit_math_block, None)
    )
    app.add_config_value("epub_math_renderer", RENDERER, "", str)
    app.connect("build-finished", write_again, priority=900)  # after myst-nb's (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
