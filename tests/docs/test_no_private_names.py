"""The docs build and the package use only the public names of the tools they build on.

A private name (one with a leading underscore, not a dunder) of Sphinx, myst-nb,
jupyter's packages, ipykernel, joblib or torch may change or go in any release, without
notice. This reads ``docs/_ext/*.py``, ``docs/tools/*.py``, ``docs/conf.py``,
``noxfile.py`` and every module of ``attention/`` with :mod:`ast` and fails, naming
file and line, on an import of such a name (``from torch._tensor_str import
printoptions``) or an attribute access that
reaches one through a name bound to the library (``torch._C``, ``toctree._entries``
after ``from sphinx.environment.adapters import toctree``, ``app._x`` where a function
takes ``app: Sphinx``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

LIBRARIES = frozenset(
    (
        *("sphinx", "sphinx_gallery", "docutils", "myst_nb", "myst_parser"),
        *("jupyter_cache", "jupyter_client", "jupyter_core", "nbclient", "nbformat"),
        *("ipykernel", "IPython", "traitlets", "joblib", "torch"),
    )
)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def library_of(dotted: str) -> str | None:
    top = dotted.split(".")[0]
    return top if top in LIBRARIES else None


def private_part(dotted: str) -> str | None:
    return next((part for part in dotted.split(".") if is_private(part)), None)


def private_names(source: str, filename: str = "<source>") -> list[str]:
    """``filename:line: ...`` for each use of a library's private name in ``source``."""
    tree = ast.parse(source, filename)
    found: list[str] = []

    def report(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{node.lineno}: {what}")

    bound: dict[str, str] = {}  # a name in the file -> the library object it stands for

    def bind_imports(node: ast.AST, names: dict[str, str]) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if library_of(alias.name):
                    if private_part(alias.name):
                        report(node, f"imports {alias.name}")
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        names[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and library_of(node.module):
            if private_part(node.module):
                report(node, f"imports from {node.module}")
            for alias in node.names:
                if is_private(alias.name):
                    report(node, f"imports {node.module}.{alias.name}")
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    for node in ast.walk(tree):
        bind_imports(node, bound)

    def dotted(node: ast.expr, names: dict[str, str]) -> str | None:
        """The library name ``node`` stands for (``a.b.c``), if it starts at a bound name."""
        if isinstance(node, ast.Name):
            return names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = dotted(node.value, names)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def check(scope: ast.AST, names: dict[str, str]) -> None:
        for node in ast.iter_child_nodes(scope):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                local = dict(names)
                arguments = node.args
                for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                    kind = arg.annotation and dotted(arg.annotation, names)
                    if kind:  # app: Sphinx
                        local[arg.arg] = kind
                    else:
                        local.pop(arg.arg, None)
                check(node, local)
                continue
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                base = dotted(node.value, names)
                if base is not None:
                    report(node, f"uses {base}.{node.attr}")
            check(node, names)

    check(tree, bound)
    return sorted(set(found), key=lambda line: int(line.split(":")[1]))


def scanned() -> list[Path]:
    return [
        *sorted((REPO / "docs" / "_ext").glob("*.py")),
        *sorted((REPO / "docs" / "tools").glob("*.py")),
        REPO / "docs" / "conf.py",
        REPO / "noxfile.py",
        *sorted((REPO / "attention").rglob("*.py")),
    ]


def test_no_private_name_of_the_tools_is_used():
    problems = [
        problem
        for path in scanned()
        for problem in private_names(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert problems == [], "private names of the tools:\n" + "\n".join(problems)


def test_the_scan_reads_every_file_it_should():
    names = {path.relative_to(REPO).as_posix() for path in scanned()}
    assert {"docs/conf.py", "noxfile.py", "attention/__init__.py"} <= names
    assert any(name.startswith("docs/_ext/") for name in names)


PLANTED = """\
import torch
import torch.nn.functional as F
import joblib.parallel
from torch._tensor_str import printoptions
from sphinx.environment.adapters import toctree as adapter
from sphinx.application import Sphinx
from mypackage import _ours

x = torch._C
y = F._canonical_mask
z = adapter._entries_from_toctree
w = joblib.parallel._backend
ok = torch.__version__, _ours._private, torch.nn.functional.softmax


def handler(app: Sphinx, other) -> None:
    app._private
    other._private  # not known to be a library's
"""


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (4, "imports from torch._tensor_str"),
        (9, "uses torch._C"),
        (10, "uses torch.nn.functional._canonical_mask"),
        (11, "uses sphinx.environment.adapters.toctree._entries_from_toctree"),
        (12, "uses joblib.parallel._backend"),
        (17, "uses sphinx.application.Sphinx._private"),
    ],
)
def test_the_scan_names_file_and_line_of_each_private_name(line, what):
    assert f"planted.py:{line}: {what}" in private_names(PLANTED, "planted.py")


def test_the_scan_reports_nothing_else():
    assert len(private_names(PLANTED, "planted.py")) == 6
