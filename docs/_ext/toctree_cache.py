"""Work out each toctree's entries once while the pages are written, not once a page.

The theme draws the whole site's navigation in every page's sidebar. For that,
Sphinx resolves every toctree of the home page again for each page
(``_resolve_toctree``): it copies the table of contents of every document listed
(the API page's alone has two thousand nodes) only to keep their titles. Those
entries are the same for every page; what differs, which entry is the current
page and the links relative to it, Sphinx adds afterwards, to its own copy.

So while the pages are written (``write-started`` to ``build-finished``) this
extension keeps the entries of each toctree, keyed by everything they are made
from, and hands Sphinx a fresh copy each time. The pages come out byte for byte the
same (``tests/docs/test_toctree_cache.py``); writing them took 11.5 s instead of
17.7 s in a build of this site on the 2-core machine. Sphinx's function is private,
so the extension checks its signature and steps aside, with a note in the log, if a
Sphinx release changes it.
"""

from __future__ import annotations

import inspect

from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment.adapters import toctree as adapter
from sphinx.util import logging

logger = logging.getLogger(__name__)

_ORIGINAL = adapter._entries_from_toctree
# The parameters this cache was written for (Sphinx 7.3 to 9).
EXPECTED = [
    *("env", "prune", "titles_only", "collapse", "includehidden", "tags"),
    *("toctree_ancestors", "included", "excluded", "toctreenode", "parents", "subtree"),
]
_cache: dict[tuple, list] = {}
_ONLY_NODES = True  # whether some table of contents holds an ``only`` node


def _entries(
    env,
    prune,
    titles_only,
    collapse,
    includehidden,
    tags,
    toctree_ancestors,
    included,
    excluded,
    toctreenode,
    parents,
    subtree=False,
):
    args = (env, prune, titles_only, collapse, includehidden, tags, toctree_ancestors)
    rest = (included, excluded, toctreenode, parents, subtree)
    if subtree or parents:  # the recursion inside a top-level call
        return _ORIGINAL(*args, *rest)
    key = (
        tuple(map(tuple, toctreenode["entries"])),
        toctreenode.get("parent"),  # the document a "self" entry names
        prune,
        titles_only,
        collapse,
        includehidden,
        # An entry that is the page or one of its ancestors is copied whole, the
        # others through _toctree_copy (_toctree_standard_entry). The two copies
        # differ only where a table of contents holds an ``only`` node, which
        # _toctree_copy keeps or drops by the tags.
        frozenset(toctree_ancestors) if _ONLY_NODES else None,
    )
    entries = _cache.get(key)
    if entries is None:
        entries = _cache[key] = _ORIGINAL(*args, *rest)
    # Sphinx marks the current page on, and prunes, what it is given: a copy.
    return [entry.deepcopy() for entry in entries]


def start(app: Sphinx, builder=None) -> None:
    parameters = list(inspect.signature(_ORIGINAL).parameters)
    if parameters != EXPECTED:
        logger.info(
            "toctree_cache: Sphinx's _entries_from_toctree takes (%s), not (%s): not cached",
            ", ".join(parameters),
            ", ".join(EXPECTED),
        )
        return
    global _ONLY_NODES
    _ONLY_NODES = any(any(toc.findall(addnodes.only)) for toc in app.env.tocs.values())
    _cache.clear()
    adapter._entries_from_toctree = _entries


def stop(app: Sphinx, exception: BaseException | None = None) -> None:
    adapter._entries_from_toctree = _ORIGINAL
    _cache.clear()


def setup(app: Sphinx) -> dict:
    # Only while writing: nothing about the documents changes any more.
    app.connect("write-started", start)
    app.connect("build-finished", stop)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
