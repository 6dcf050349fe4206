"""Offer every chapter as a Jupyter notebook in the page's download menu.

sphinx-book-theme lists a page's ``.ipynb`` only when launch buttons (Binder, Colab)
are configured. A reader who wants to run a chapter locally needs it anyway, so copy
the notebook myst-nb executed during this build next to the page sources and point
the theme's download menu at it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx


def add_ipynb(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if doctree is None or not executed.exists():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app: Sphinx) -> dict:
    # Before the theme builds its header buttons (priority 500).
    app.connect("html-page-context", add_ipynb, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
