"""Escape the gallery figures' alt text, which sphinx-gallery writes into HTML as it is.

sphinx-gallery (0.22) takes a figure's alt text from its title and writes it into the
``alt="..."`` of the page's ``<img>`` unescaped: a title that quotes a word ("journey")
ends the attribute there, so a screen reader hears half the title, and the page is no
longer well-formed XHTML (the EPUB of ``nox -s book``). The alt text is escaped here,
once, in the resolved doctree, before the page is written.
"""

from __future__ import annotations

import html

from docutils import nodes
from sphinx.application import Sphinx
from sphinx_gallery.directives import imgsgnode


def escape_alt(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    for node in doctree.findall(imgsgnode):
        node["alt"] = html.escape(node["alt"], quote=True)


def setup(app: Sphinx) -> dict:
    app.connect("doctree-resolved", escape_alt)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
