"""Put the hidden code cells that follow a dropdown inside it.

A page proves a chapter's module against ``transformers`` (or gives an exercise's
solution) in a collapsed ``{dropdown}`` that says what is checked, followed by the code
cells that check it, each tagged ``hide-cell``. A MyST notebook cannot nest a code cell
inside a directive, so on the page the cells came after the dropdown, each behind a
"Show code cell" toggle of its own: seven toggles in a row under chapter 9's dropdown.

Once a page is read (``doctree-read``), this moves every run of ``hide-cell`` code
cells that directly follows a dropdown into it, after its text, and a run that directly
precedes one (an exercise's solution, then its notes) into it under its title, and
takes off each cell's own toggle: opening the dropdown shows the explanation and
every cell that checks it, code and output. The downloaded notebooks are not touched:
their cells keep their tags.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx


def is_dropdown(node: nodes.Node) -> bool:
    """sphinx-design's ``{dropdown}``, before it becomes HTML."""
    return isinstance(node, nodes.container) and node.get("design_component") == "dropdown"


def is_hidden_cell(node: nodes.Node) -> bool:
    """A myst-nb code cell tagged ``hide-cell`` (its code and output hidden)."""
    return (
        isinstance(node, nodes.container)
        and node.get("nb_element") == "cell_code"
        and node.get("hide_mode") == "all"
    )


def gather_hidden_cells(doctree: nodes.Node) -> int:
    """Move the hidden cells beside each dropdown into it; return how many moved.

    The cells right after a dropdown go in after its text; a run of cells right before
    one (an exercise's solution, then its notes) goes in first, under its title. A run
    between two dropdowns belongs to the one above it.

    Examples
    --------
    >>> from docutils import nodes
    >>> section = nodes.section()
    >>> dropdown = nodes.container(design_component="dropdown")
    >>> cells = [nodes.container(nb_element="cell_code", hide_mode="all") for _ in "ab"]
    >>> section.extend([dropdown, *cells, nodes.paragraph(text="after")])
    >>> gather_hidden_cells(section)
    2
    >>> [type(child).__name__ for child in section.children], len(dropdown.children)
    (['container', 'paragraph'], 2)
    """
    moved = 0
    for dropdown in list(doctree.findall(is_dropdown)):
        parent = dropdown.parent
        if parent is None:
            continue
        position = parent.index(dropdown) + 1
        while position < len(parent.children) and is_hidden_cell(parent[position]):
            cell = parent[position]
            parent.remove(cell)
            # Inside a closed dropdown a second toggle would only be one more click.
            del cell["hide_mode"]
            dropdown.append(cell)
            moved += 1
        # The run just above, unless a dropdown above it has taken it already.
        position = parent.index(dropdown) - 1
        before = []
        while position >= 0 and is_hidden_cell(parent[position]):
            before.insert(0, parent[position])
            position -= 1
        if position >= 0 and is_dropdown(parent[position]):
            continue
        titled = 1 if dropdown.children and isinstance(dropdown[0], nodes.rubric) else 0
        for offset, cell in enumerate(before):
            parent.remove(cell)
            del cell["hide_mode"]
            dropdown.insert(titled + offset, cell)
            moved += 1
    return moved


def on_doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    gather_hidden_cells(doctree)


def setup(app: Sphinx) -> dict[str, object]:
    # After myst-nb has read the page and page_runs and verify_outputs have seen its
    # cells where they were written (priorities 400 and 500).
    app.connect("doctree-read", on_doctree_read, priority=700)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
