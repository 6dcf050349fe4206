"""Write what pages and gallery scripts print into their expected outputs.

For authors. A chapter: write its cells, build the docs once, then run::

    python docs/tools/fill_expected.py docs/chapters/02-trainable-weights.md

Every code cell that printed something and has neither ``expect`` nor ``unchecked``
gets an ``expect`` with what it printed. A gallery script needs no build: ::

    python docs/tools/fill_expected.py gallery/plot_causal_mask_steps.py

runs the script one top-level statement at a time and writes a ``# Expected
output:`` comment after each statement that printed something (a loop's output goes
after the loop). With ``--update``, existing expected outputs are replaced too (after
a deliberate change to the package). Review the diff before committing: the point of
an expected output is that a person checked each value (against the book, or by
reasoning), not that the build agrees with itself.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import os
import re
import sys
from pathlib import Path

import nbformat
import yaml

# The checks are the docs build's own, in its extensions (docs/_ext).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
from printed_values import EXPECTED, UNCHECKED, normalise, printed_text

FENCE = re.compile(r"^(`{3,})\{code-cell\}")


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


def fill(page: Path, executed: Path, update: bool) -> int:
    cells = [c for c in nbformat.read(executed, as_version=4).cells if c.cell_type == "code"]
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    index = changed = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        if not FENCE.match(line):
            continue
        cell = cells[index]
        index += 1
        meta: dict = {}
        if i < len(lines) and lines[i].strip() == "---":
            end = lines.index("---", i + 1)
            meta = yaml.safe_load("\n".join(lines[i + 1 : end])) or {}
            block_end = end + 1
        else:
            block_end = i
            while block_end < len(lines) and lines[block_end].startswith(":"):
                key, _, value = lines[block_end][1:].partition(":")
                meta[key.strip()] = yaml.safe_load(value.strip())
                block_end += 1
        actual = printed_text(cell)
        wants = "unchecked" not in meta and actual and ("expect" not in meta or update)
        if not wants or meta.get("expect") == actual + "\n":
            out.extend(lines[i:block_end])
        else:
            meta["expect"] = actual + "\n"
            dumped = yaml.dump(meta, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
            out.extend(["---", *dumped.rstrip("\n").splitlines(), "---"])
            changed += 1
        i = block_end
    if index != len(cells):
        sys.exit(f"{page}: found {index} code cells but the executed notebook has {len(cells)}")
    page.write_text("\n".join(out) + "\n", encoding="utf-8")
    return changed


def statement_outputs(script: Path) -> list[tuple[ast.stmt, str]]:
    """Run ``script`` one top-level statement at a time; what each one printed."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    tree = ast.parse(script.read_text(encoding="utf-8"), str(script))
    namespace = {"__name__": "__main__", "__file__": str(script)}
    outputs = []
    for statement in tree.body:
        code = compile(ast.Module([statement], type_ignores=[]), str(script), "exec")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(code, namespace)
        outputs.append((statement, normalise(printed.getvalue())))
    return outputs


def fill_script(script: Path, update: bool) -> int:
    """Write each statement's output after it as a ``# Expected output:`` comment."""
    lines = script.read_text(encoding="utf-8").splitlines()
    insertions: dict[int, list[str]] = {}  # after line number -> comment lines
    removals: set[int] = set()
    changed = 0
    for statement, printed in statement_outputs(script):
        end = statement.end_lineno  # 1-based, the statement's last line
        existing = end  # the existing comment, if any, occupies lines end+1 .. existing
        if existing < len(lines) and lines[existing].strip() == EXPECTED:
            existing += 1
            while existing < len(lines) and lines[existing].startswith("#"):
                existing += 1
        has_comment = existing > end
        body = [f"# {line}".rstrip() for line in printed.splitlines()]
        start = max((i for i in range(end) if lines[i].startswith("# %%")), default=0)
        stop = next((i for i in range(end, len(lines)) if lines[i].startswith("# %%")), None)
        unchecked = any(line.startswith(UNCHECKED) for line in lines[start:stop])
        if not printed or unchecked or (has_comment and not update):
            continue
        if has_comment and lines[end + 1 : existing] == body:
            continue
        removals.update(range(end, existing))
        insertions[end] = [EXPECTED, *body]
        changed += 1
    out = []
    for number, line in enumerate(lines):
        if number not in removals:
            out.append(line)
        out.extend(insertions.get(number + 1, []))
    script.write_text("\n".join(out) + "\n", encoding="utf-8")
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--update", action="store_true", help="replace existing expect values")
    parser.add_argument("--build", type=Path, default=Path("docs/_build"))
    args = parser.parse_args()
    docs = Path(__file__).resolve().parent.parent
    for page in args.pages:
        if page.suffix == ".py":
            print(f"{page}: {fill_script(page, args.update)} statements updated")
            continue
        docname = page.resolve().relative_to(docs).with_suffix("")
        executed = args.build / "jupyter_execute" / f"{docname}.ipynb"
        print(f"{page}: {fill(page, executed, args.update)} cells updated")


if __name__ == "__main__":
    main()
