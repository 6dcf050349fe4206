"""Keep every core busy while ``sphinx-build -j`` executes the chapters.

Sphinx reads documents in parallel in *chunks*: consecutive runs of up to a dozen
documents, in alphabetical order, each chunk read by one process. Here nearly all
the reading time is the executed chapters (5-12 s each, mostly kernel start and
imports), and alphabetical order puts the last seven chapters in one chunk: one core
runs them one after another while the other has long finished.

So this extension hands out one document per task, the longest first (the executed
notebooks, largest source first; a cheap stand-in for their run time), which is the
classic longest-processing-time schedule. Sphinx's own process pool does the rest.
The pages come out the same; only the order of reading changes.
"""

from __future__ import annotations

from pathlib import Path

import sphinx
import sphinx.builders
from sphinx.application import Sphinx

# The name Sphinx's builder calls to split the documents (sphinx/builders/__init__.py).
CHUNKER = "make_chunks"
WRITTEN_FOR = "Sphinx 8-9"


def one_per_chunk(arguments: list, nproc: int, maxbatch: int = 10) -> list[list]:
    """Each document in a chunk of its own, so that no process waits on a long queue.

    >>> one_per_chunk(["a", "b", "c"], 2)
    [['a'], ['b'], ['c']]
    """
    return [[argument] for argument in arguments]


def cost(app: Sphinx, docname: str) -> tuple[int, int]:
    """A stand-in for how long a document takes to read: executed notebooks first."""
    path = Path(app.env.doc2path(docname))
    if not path.exists():
        return (0, 0)
    text = path.read_text(encoding="utf-8", errors="replace")
    executed = "file_format: mystnb" in text[:500]
    return (1 if executed else 0, len(text))


def longest_first(app: Sphinx, env, docnames: list[str]) -> None:
    docnames.sort(key=lambda docname: cost(app, docname), reverse=True)


def setup(app: Sphinx) -> dict:
    if not callable(getattr(sphinx.builders, CHUNKER, None)):
        raise RuntimeError(
            f"parallel_pages was written for {WRITTEN_FOR}, whose builder splits documents "
            f"with sphinx.builders.{CHUNKER}; Sphinx {sphinx.__version__} has no such "
            "function. Remove 'parallel_pages' from conf.py or update it."
        )
    setattr(sphinx.builders, CHUNKER, one_per_chunk)
    app.connect("env-before-read-docs", longest_first)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
