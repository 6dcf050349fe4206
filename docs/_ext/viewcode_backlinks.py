"""``sphinx.ext.viewcode``, with every ``[docs]`` link of its source pages on an anchor.

viewcode puts a ``[source]`` link on each documented object and, on the highlighted
source page of its module (``_modules/...``), a ``[docs]`` link back. It writes that
link as ``<page>#<prefix>.<name>``, with one ``<prefix>`` per source module: the path
the module's first documented object was documented under. The API page documents
some objects under the package (``attention.models.ModelFacts``, re-exported there) and
others of the same module under the module (``attention.models.Rope``, which the
package does not export), so with viewcode alone the second kind link to anchors that
do not exist (``api.html#attention.Rope``), and the site check fails.

This extension notes, for each ``[source]`` link viewcode adds to a signature, the
anchor of that signature, and writes it into the matching ``[docs]`` link when the
source page is written. It relies on viewcode's ``viewcode_anchor`` node (whose
``reftarget`` is the source page and ``refid`` the object's name there) and on the
markup of its ``[docs]`` links (``<div class="viewcode-block" id="NAME">`` followed by
``<a class="viewcode-back" href="PAGE#...">``); if either changes, the links are left
as viewcode made them, and the site check (``tests/site``) names the broken ones.
"""

from __future__ import annotations

import re

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.ext.viewcode import OUTPUT_DIRNAME, viewcode_anchor

BACKLINK = re.compile(
    r'(?P<head><div class="viewcode-block" id="(?P<name>[^"]+)">\s*'
    r'<a class="viewcode-back" href="(?P<page>[^"#]*)#)(?P<anchor>[^"]*)"'
)


def _anchors(env: BuildEnvironment) -> dict[str, dict[tuple[str, str], str]]:
    """Per document: (source page, name) -> the anchor of the signature documenting it."""
    if not hasattr(env, "viewcode_backlinks"):
        env.viewcode_backlinks = {}
    return env.viewcode_backlinks


def note_anchors(app: Sphinx, doctree) -> None:
    """After viewcode's own ``doctree-read``: each ``[source]`` link's signature anchor."""
    found = _anchors(app.env)[app.env.docname] = {}
    for link in doctree.findall(viewcode_anchor):
        ids = link.parent.get("ids")
        if ids:
            found[link["reftarget"], link["refid"]] = ids[0]


def purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    _anchors(env).pop(docname, None)


def merge(app: Sphinx, env: BuildEnvironment, docnames: set[str], other) -> None:
    """A parallel build's documents, read in another process."""
    theirs = _anchors(other)
    _anchors(env).update((name, theirs[name]) for name in docnames if name in theirs)


def point_backlinks(app: Sphinx, pagename: str, templatename, context: dict, doctree) -> None:
    """On a source page, aim each ``[docs]`` link at its object's anchor."""
    if not pagename.startswith(OUTPUT_DIRNAME + "/") or "body" not in context:
        return
    anchors = _anchors(app.env)

    def aim(match: re.Match) -> str:
        for docname, found in anchors.items():
            anchor = found.get((pagename, match["name"]))
            if anchor and app.builder.get_relative_uri(pagename, docname) == match["page"]:
                return match["head"] + anchor + '"'
        return match[0]

    context["body"] = BACKLINK.sub(aim, context["body"])


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx.ext.viewcode")
    app.connect("doctree-read", note_anchors, priority=600)  # after viewcode's (500)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.connect("html-page-context", point_backlinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
