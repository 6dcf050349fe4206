"""The package's four rooms and the rules between them, read from the source.

* the attention core, flat in ``attention/``;
* :mod:`attention.models`, the model atlas, which imports the core;
* :mod:`attention.serving`, the serving engine, which imports both;
* :mod:`attention.figures`, which imports all three.

The core imports none of the others, ``models`` imports neither ``serving`` nor
``figures``, ``serving`` does not import ``figures``, no
module imports a private name (one with a leading underscore) of another room, and
the imports draw no circle. A private *module* (``attention._checks``) is shared by
design: any room may import it and its names. ``attention/__init__.py`` is the
package's front door: it re-exports what readers use from the core and from
``models``, and belongs to no room. Imports inside functions count as much as those
at the top of a module: a circle through a function is still a circle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "attention"
ORDER = {"core": 0, "models": 1, "serving": 2, "figures": 3}  # a room may import those before it


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def room(module: str) -> str | None:
    """The room a module belongs to; None for the front door and the shared modules."""
    parts = module.split(".")
    if module == "attention" or parts[-1].startswith("_"):
        return None
    if len(parts) > 2 and parts[1] in ("models", "serving", "figures"):
        return parts[1]
    if module in ("attention.models", "attention.serving", "attention.figures"):
        return parts[1]
    return "core"


def resolve(importer: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if MODULES[importer].name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str) -> list[tuple[str, str | None, int]]:
    """``(module imported, name imported from it or None, line)`` for every import."""
    found = []
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = resolve(module, node)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:  # from attention import _checks: the module
                    found.append((submodule, None, node.lineno))
                else:
                    found.append((source, alias.name, node.lineno))
    return [item for item in found if item[0].split(".")[0] == "attention"]


def edges() -> dict[str, set[str]]:
    return {
        module: {target for target, _, _ in imports(module) if target in MODULES}
        for module in MODULES
    }


def test_the_four_rooms_exist_and_hold_the_atlas_the_engine_and_the_figures():
    rooms = {room(module) for module in MODULES}
    assert {"core", "models", "serving", "figures"} <= rooms
    assert room("attention.models.table") == "models"
    assert room("attention.serving.engine") == "serving"
    assert room("attention.serving") == "serving"
    assert room("attention.figures.style") == "figures"
    assert room("attention.gqa") == "core"
    assert room("attention._checks") is None


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_room_imports_a_room_above_it(module):
    mine = room(module)
    if mine is None:
        return
    upward = [
        f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {target}"
        for target, _, line in imports(module)
        if (theirs := room(target)) is not None and ORDER[theirs] > ORDER[mine]
    ]
    # The front door re-exports core and models: a room importing it reaches upward too.
    upward += [
        f"{MODULES[module].relative_to(PACKAGE.parent)}:{line} imports {name} from the "
        "package's front door; import it from its own module"
        for target, name, line in imports(module)
        if target == "attention" and name is not None
    ]
    assert not upward, f"the {mine} room imports upward:\n" + "\n".join(upward)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_crosses_a_room(module):
    mine = room(module)
    crossing = [
        f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}: {target}.{name}"
        for target, name, line in imports(module)
        if name is not None
        and name.startswith("_")
        and not name.startswith("__")
        and room(target) is not None
        and room(target) != mine
    ]
    assert not crossing, "private names imported from another room:\n" + "\n".join(crossing)


def test_the_imports_draw_no_circle():
    graph = edges()
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for target in sorted(graph[module]):
            if target != "attention" and (circle := visit(target, [*path, module])):
                return circle
        done.add(module)
        return None

    for module in sorted(graph):
        circle = visit(module, [])
        assert circle is None, "an import circle: " + " -> ".join(circle)


def test_the_rules_are_read_from_the_source_and_catch_a_violation(tmp_path, monkeypatch):
    """The checks above see an upward import, a private name and a circle when there
    is one: they are run here on a small package written for the purpose."""
    package = tmp_path / "attention"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "gqa.py").write_text("def f():\n    from attention.models.table import X\n")
    (package / "models" / "__init__.py").write_text("")
    (package / "models" / "table.py").write_text(
        "from attention.gqa import _private\nfrom attention.models.facts import Y\nX = 1\n"
    )
    (package / "models" / "facts.py").write_text("from attention.models.table import X\nY = 2\n")
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "PACKAGE", package)
    modules = {module_name(path): path for path in sorted(package.rglob("*.py"))}
    monkeypatch.setattr(this, "MODULES", modules)
    with pytest.raises(AssertionError, match="imports upward"):
        test_no_room_imports_a_room_above_it("attention.gqa")
    with pytest.raises(AssertionError, match=r"attention\.gqa\._private"):
        test_no_private_name_crosses_a_room("attention.models.table")
    with pytest.raises(AssertionError, match="an import circle"):
        test_the_imports_draw_no_circle()
