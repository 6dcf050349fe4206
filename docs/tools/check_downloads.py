"""Run every download of the built site as a reader would, and compare what it prints.

``nox -s downloads`` builds the wheel, makes a fresh virtual environment that has only
that wheel (with its ``plot`` extra) and the notebook runner, then runs::

    python docs/tools/check_downloads.py --site docs/_build/html \\
        --python READER/bin/python --wheels DIST --work WORK

Every downloadable ``.py`` and ``.ipynb`` of the site is copied into an empty folder
and run there with the reader's Python: scripts with ``python``, notebooks with
``jupyter execute``. The runs cannot reach the repository (another folder, no
``PYTHONPATH``), a data file (an empty folder) or the network: pip may install only
from the folder of built wheels (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``), so the
notebooks' install cells are satisfied offline by the local wheel, and HTTP goes to a
closed port. Then what each printed is compared, number by number, with what its page
shows: a chapter notebook's cells with their ``expect``, a gallery script's blocks
and notebook's cells with their ``# Expected output:`` comments. Output marked
unchecked (a random draw, timings) may be anything.

This file runs in the checking environment, never in the reader's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import nbformat

# The checks are the docs build's own, in its extensions (docs/_ext).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
from printed_values import expected_output, explain, matches, normalise, printed_text

VERSION_WARNING = "This example was written for"
TIMEOUT_S = 600


@dataclass
class Result:
    name: str
    seconds: float
    problems: list[str]


def downloads(site: Path) -> list[Path]:
    """Every notebook and script a reader can download from the site."""
    chapters = sorted((site / "_sources").rglob("*.ipynb"))
    gallery = sorted(p for p in (site / "_downloads").glob("*/*") if p.suffix in (".py", ".ipynb"))
    return chapters + gallery


def reader_environment(python: Path, wheels: Path, home: Path) -> dict[str, str]:
    """A reader's shell: their Python first on PATH, and nothing of this repository."""
    home.mkdir(parents=True, exist_ok=True)
    closed = "http://127.0.0.1:9"  # nothing listens there: any download fails at once
    return {
        "PATH": os.pathsep.join([str(python.parent), "/usr/bin", "/bin"]),
        "HOME": str(home),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "HTTP_PROXY": closed,
        "HTTPS_PROXY": closed,
        "ALL_PROXY": closed,
        "HF_HUB_OFFLINE": "1",
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "PYTHONHASHSEED": "0",
    }


def script_expectation(script: str) -> str:
    """What a gallery script prints, block by block; ``...`` for an unchecked block."""
    parts = []
    for block in script.split("\n# %%"):
        expected, unchecked = expected_output(block)
        if unchecked is not None:
            parts.append("...")
        elif expected:
            parts.append(expected)
    return "\n".join(parts)


def run_in(folder: Path, command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``command`` in ``folder`` as the reader's shell would, capturing its output."""
    return subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def check_script(path: Path, python: Path, env: dict[str, str]) -> list[str]:
    run = run_in(path.parent, [str(python), path.name], {**env, "MPLBACKEND": "Agg"})
    if run.returncode:
        return [f"exited with {run.returncode}:\n{run.stderr[-3000:]}"]
    expected, printed = script_expectation(path.read_text("utf-8")), normalise(run.stdout)
    if matches(expected, printed, ellipsis=True):
        return []
    return [f"printed something other than its page:\n{explain(expected, printed)}"]


def check_notebook(path: Path, python: Path, env: dict[str, str]) -> list[str]:
    jupyter = python.parent / "jupyter"
    command = [str(jupyter), "execute", "--inplace", f"--timeout={TIMEOUT_S}", path.name]
    run = run_in(path.parent, command, env)
    if run.returncode:
        return [f"did not run:\n{run.stderr[-3000:]}"]
    problems = []
    cells = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    for index, cell in enumerate(cells, start=1):
        printed = printed_text(cell)
        if "%pip install" in cell.source:  # the install cell: pip talks; the check must not
            if VERSION_WARNING in printed:
                problems.append(f"code cell {index}: {printed}")
            continue
        expected, unchecked = cell.metadata.get("expect"), cell.metadata.get("unchecked")
        if expected is None and unchecked is None:  # a gallery notebook: comments in the code
            expected, unchecked = expected_output(cell.source)
        if unchecked is not None:
            continue
        problem = explain(normalise(expected or ""), printed)
        if problem:
            problems.append(f"code cell {index} printed something other than its page: {problem}")
    return problems


def run_one(path: Path, python: Path, env: dict[str, str]) -> Result:
    start = time.perf_counter()
    check = check_notebook if path.suffix == ".ipynb" else check_script
    try:
        problems = check(path, python, env)
    except subprocess.TimeoutExpired:
        problems = [f"still running after {TIMEOUT_S} s"]
    return Result(path.name, time.perf_counter() - start, problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, required=True, help="the built HTML folder")
    parser.add_argument("--python", type=Path, required=True, help="the reader's Python")
    parser.add_argument("--wheels", type=Path, required=True, help="the folder of built wheels")
    parser.add_argument("--work", type=Path, required=True, help="an empty folder to run in")
    args = parser.parse_args(argv)

    folder = args.work / "downloads"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    copies = []
    for download in downloads(args.site.resolve()):
        copy = folder / download.name
        if copy.exists():
            sys.exit(f"two downloads are called {download.name}")
        shutil.copy2(download, copy)
        copies.append(copy)
    env = reader_environment(args.python.absolute(), args.wheels.resolve(), args.work / "home")
    # One download per core, each with its share of the cores, as the docs build gives
    # its kernels (page_runs.py): a reader runs one at a time, but here two torch thread
    # pools on two cores spin against each other and small training loops run ten times
    # slower (a notebook of chapter 15: 7 s alone, 70 s beside another).
    workers = os.cpu_count() or 1
    env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    print(f"running {len(copies)} downloads in {folder} with {args.python}", flush=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda p: run_one(p, args.python.absolute(), env), copies))
    for result in results:
        status = "ok" if not result.problems else "FAILED"
        print(f"{status:6} {result.seconds:5.1f} s  {result.name}")
        for problem in result.problems:
            print("    " + problem.replace("\n", "\n    "))
    failed = sum(1 for result in results if result.problems)
    ran = len(results) - failed
    print(f"{ran} of {len(results)} downloads ran and printed what their page shows")
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
