"""Sessions for testing, linting and building the documentation.

Every session installs with the shared constraints file, so all of them get the
same pinned ``torch`` (a CPU build) and the same versions of everything else.

On Linux, PyPI's torch is the CUDA build: several GB of NVIDIA libraries this
project never uses. So torch is installed first, in a pip call of its own, from
PyTorch's CPU wheel index (about 190 MB), unless pip already has a wheel of the
pinned version on this machine (its find-links), which is then used as it is.
``ATTENTION_TORCH_INDEX`` names another index (``pypi`` for PyPI's own build);
on macOS and Windows PyPI's torch is the CPU build already.
"""

import functools
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CONSTRAINTS = str(ROOT / ".ci" / "constraints.txt")
DOCS = ROOT / "docs"
BUILD = DOCS / "_build"
# No MPLBACKEND here: the chapters' Jupyter kernels need their inline backend to show figures.
DOCS_ENV = {"PYDEVD_DISABLE_FILE_VALIDATION": "1", "PYTHONHASHSEED": "0"}

nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint", "docs"]


TORCH_INDEX_ENV = "ATTENTION_TORCH_INDEX"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def pinned(name: str) -> str:
    """The version the constraints file pins for ``name``."""
    text = Path(CONSTRAINTS).read_text(encoding="utf-8")
    return re.search(rf"^{re.escape(name)}==(\S+)$", text, re.MULTILINE).group(1)


def torch_index() -> str | None:
    """Where torch comes from: PyTorch's CPU index on Linux, else pip's own choice."""
    index = os.environ.get(TORCH_INDEX_ENV)
    if index is None:
        index = CPU_INDEX if sys.platform.startswith("linux") else "pypi"
    return None if index in ("", "pypi") else index


def install_torch(session: nox.Session, python: str = "python") -> None:
    """Install the pinned torch, CPU build, in its own pip call (see the module docstring).

    ``python`` is the interpreter of the environment to install into: the session's
    own, or a fresh one a session made (``nox -s downloads``).
    """
    version, index = pinned("torch"), torch_index()
    run = functools.partial(session.run, external=python != "python")

    def installed() -> bool:
        code = "import importlib.metadata as m; print(m.version('torch').split('+')[0])"
        found = run(python, "-c", code, silent=True, success_codes=[0, 1]) or ""
        return found.strip() == version

    if index is None or installed():
        return
    pip = [python, "-m", "pip", "install", "--no-deps", f"torch=={version}"]
    # A wheel of the pinned version that pip can find on this machine comes first.
    run(*pip, "--no-index", silent=True, success_codes=[0, 1])
    if installed():
        return
    try:
        run(*pip, "--index-url", index, "--retries", "2")
    except nox.command.CommandFailed:
        session.error(
            f"could not install torch=={version} from {index}. Set {TORCH_INDEX_ENV} to "
            "another index, or to `pypi` for PyPI's build (on Linux the CUDA build, "
            "several GB)."
        )


def install(session: nox.Session, *args: str) -> None:
    """Install into the session: torch first (CPU build), then ``args``, all pinned."""
    install_torch(session)
    session.install("-c", CONSTRAINTS, *args)


def install_site_packages(session: nox.Session) -> None:
    """Install what the site ships besides Python, pinned by package-lock.json: Pyodide,
    which the calculator's config reader runs in the page (docs/_ext/config_reader.py)."""
    if shutil.which("npm") is None:
        session.error("no `npm` on PATH: install Node.js (20 or newer), which brings it")
    session.run("npm", "ci", "--no-audit", "--no-fund", external=True)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite and the docstring examples (pytest --doctest-modules).

    The docs extensions are tested too (tests/docs/), on a small Sphinx project that
    this session builds, so it installs the documentation tools as well.
    """
    install(session, "-e", ".[test,plot,docs]")
    install_site_packages(session)  # tests/docs/test_config_reader.py runs Pyodide in Node
    session.run("pytest", *session.posargs, env={"PYDEVD_DISABLE_FILE_VALIDATION": "1"})


@nox.session(name="tests-latest")
def tests_latest(session: nox.Session) -> None:
    """The tests and chapters that use transformers, on its newest release the extras allow.

    The other sessions pin transformers (.ci/constraints.txt); a reader who installs the
    `transformers` extra gets its newest release in the extra's range. This session
    lifts the pins of transformers and of what it pulls in (their block of the
    constraints file), keeps every other pin (torch's among them), and runs the test
    files that import transformers with warnings as errors (pyproject.toml), then the
    chapters that import it (docs/tools/run_chapters.py: a cell that writes to stderr or
    prints other values than its page fails, as in `nox -s docs`), so that a renamed or
    deprecated argument fails here before a reader's download meets it.
    """
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    # The extra's range, as a reader's pip sees it (pyproject.toml).
    wanted = extras["project"]["optional-dependencies"]["transformers"]
    lines = Path(CONSTRAINTS).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("transformers=="))
    pins = re.compile(r"[\w.-]+==")
    end = next((i for i in range(start, len(lines)) if not pins.match(lines[i])), len(lines))
    lifted = Path(session.create_tmp()) / "constraints-latest.txt"
    lifted.write_text("\n".join(lines[:start] + lines[end:]) + "\n", encoding="utf-8")
    install_torch(session)
    session.install("-c", str(lifted), "--upgrade", "-e", ".[test,plot,docs]", *wanted)
    uses = re.compile(r"^(from|import) (transformers|hf_models)\b", re.MULTILINE)

    def using_transformers(paths) -> list[str]:
        return [
            str(path.relative_to(ROOT))
            for path in sorted(paths)
            if uses.search(path.read_text(encoding="utf-8"))
        ]

    version = session.run(
        "python", "-c", "import transformers; print(transformers.__version__)", silent=True
    ).strip()
    session.log(f"testing transformers {version} (the other sessions: {pinned('transformers')})")
    # The decode race compares with LlamaAttention too; it loads benchmarks/decode.py.
    benchmark = ["tests/test_decode_benchmark.py", "benchmarks/decode.py"]
    session.run(
        "pytest", *using_transformers(ROOT.glob("tests/test_*.py")), *benchmark, *session.posargs
    )
    # The chapters that use it, as a reader's download runs them: no warning, same values.
    chapters = using_transformers(DOCS.glob("chapters/*.md"))
    session.run("python", "docs/tools/run_chapters.py", *chapters, env=DOCS_ENV)
    session.log(f"passed with transformers {version}")


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common mistakes with ruff, then the package's types with mypy.

    mypy ([tool.mypy] in pyproject.toml) checks every function body in attention/, so a
    misspelled attribute fails here. It reads what the package imports, so the session
    installs the package with torch (the CPU build), numpy, matplotlib and transformers.
    """
    install(session, "-e", ".[lint,plot,transformers]", "numpy")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


REUSE = "--reuse"


def build_docs(session: nox.Session, html: Path, env: dict[str, str]) -> None:
    """A clean, verifying build: every page and script re-run, any warning fails.

    With ``--reuse`` first among the session's arguments, the build is not clean: it
    keeps what an earlier build made, Sphinx re-reads only the pages that changed, and
    a page or script runs again only when its code, the package (attention/), the
    constraints file or the Python version has changed (docs/_ext/live_cache.py).
    """
    install(session, "-e", ".[docs]")
    install_site_packages(session)
    args = list(session.posargs)
    reuse = args[:1] == [REUSE]
    if reuse:
        args.pop(0)
        env = {**env, "ATTENTION_DOCS_CACHE": "1"}
    else:
        # Nothing from an earlier build may stand in for re-running an example.
        shutil.rmtree(html.parent, ignore_errors=True)
        shutil.rmtree(DOCS / "auto_gallery", ignore_errors=True)
    session.run(
        "sphinx-build",
        "-W",
        "--keep-going",
        "-n",
        *([] if reuse else ["-E", "-a"]),
        # As many gallery scripts side by side (sphinx-gallery's `parallel`), and Sphinx's
        # readers and writers; the pages run before, a kernel per core (page_runs.py).
        # One process more than cores: when Sphinx writes the pages, its main process
        # only hands them out (it writes with -j minus one workers).
        "-j",
        str((os.cpu_count() or 1) + 1),
        "-b",
        "html",
        str(DOCS),
        str(html),
        *args,
        env={**DOCS_ENV, **env},
    )


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site from scratch, re-running and verifying every example.

    Fails on any warning, on an example that raises, on any printed value that
    differs from the one written in the page or script, and on a number in the prose
    that the page never printed (see docs/contributing.md). `nox -s downloads` then
    runs every download of the built site as a reader would.

    `nox -s docs -- --reuse` is the quick rebuild while writing: it keeps the last
    build, and re-runs a page or script only when its code, the package's source
    (attention/), the constraints file or the Python version has changed (myst-nb's
    cache mode, sphinx-gallery's own staleness check: docs/_ext/live_cache.py). It
    verifies only what it re-runs: `nox -s docs` is the check.
    """
    build_docs(session, BUILD / "html", {})


@nox.session(name="docs-other-cpu")
def docs_other_cpu(session: nox.Session) -> None:
    """The same build, checking every output as another CPU may print it.

    The expected outputs were written on one machine; this checks that they still
    pass where another CPU prints the last digit of any float one unit up or down,
    and a whole number `1.` as `1.0000` (docs/_ext/verify_outputs.py, with
    ATTENTION_OTHER_CPU set). It builds into docs/_build/other-cpu/, leaving
    `nox -s docs`'s site alone.
    """
    build_docs(session, BUILD / "other-cpu" / "html", {"ATTENTION_OTHER_CPU": "1"})


@nox.session
def downloads(session: nox.Session) -> None:
    """Run every download of the built site as a reader with only the download would.

    Needs `nox -s docs` first. Builds the sdist and wheel (`twine check` must pass, the
    wheel must hold py.typed and the licence), makes a fresh virtual environment with
    only that wheel, its `plot` and `transformers` extras and the notebook runner,
    copies every `.py` and `.ipynb` the site offers into an empty folder, and runs each
    there, offline: the
    notebooks' install cells are satisfied by the local wheel. Each must print what
    its page shows (docs/tools/check_downloads.py).
    """
    html = BUILD / "html"
    if not (html / "index.html").is_file():
        session.error(f"no built site at {html}: run `nox -s docs` first")
    session.install("-c", CONSTRAINTS, "build", "setuptools", "twine", "nbformat")
    session.install("-c", CONSTRAINTS, "pytest-doctestplus")  # the number-aware comparison
    work = Path(session.create_tmp()).resolve() / "downloads"
    shutil.rmtree(work, ignore_errors=True)
    dist = work / "dist"
    session.run("python", "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT))
    session.run("twine", "check", "--strict", *map(str, sorted(dist.iterdir())))
    wheel = next(dist.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("attention/py.typed", ".dist-info/licenses/LICENSE"):
        if not any(name.endswith(needed) for name in names):
            session.error(f"{wheel.name} has no {needed}")

    reader = work / "reader"
    session.run("python", "-m", "venv", str(reader))
    python = str(reader / ("Scripts" if sys.platform == "win32" else "bin") / "python")
    install_torch(session, python)
    session.run(
        python,
        "-m",
        "pip",
        "install",
        "-c",
        CONSTRAINTS,
        # Every extra a download's install cell may ask for (downloads.extras_for).
        f"attention-step-by-step[plot,transformers] @ {wheel.as_uri()}",
        "nbclient",
        "ipykernel",
        external=True,
    )
    session.run(
        "python",
        str(DOCS / "tools" / "check_downloads.py"),
        "--site",
        str(html),
        "--python",
        python,
        "--wheels",
        str(dist),
        "--work",
        str(work),
    )


BOOK = BUILD / "book"
BOOK_NAME = "attention-step-by-step"  # conf.py's epub_basename
# Where the site offers the book (docs/whats-next.md links to both files).
BOOK_ON_SITE = BUILD / "html" / "book"


@nox.session
def book(session: nox.Session) -> None:
    """Build the whole site as a book to read offline: an EPUB and a PDF.

    The EPUB is Sphinx's own `epub` builder. The PDF is the site built as one page
    (Sphinx's `singlehtml`) and printed by the system's Chromium through Playwright
    (docs/tools/print_book.py), with the page's print style sheet. Why not LaTeX: the
    site already needs Debian's chromium for `nox -s site`, while Sphinx's LaTeX
    builder needs TeX Live (xelatex for the pages' Unicode, several hundred MB of
    Debian packages a fresh CI machine would install each run), and the figures, the
    executed outputs' HTML tables and the MathJax formulas then print as the site
    shows them. Needs a `chromium` on PATH, as `nox -s site` does.

    The executed pages are not run again: both builds use the cache of `nox -s docs`
    (reuse mode, docs/_ext/live_cache.py), and a page runs only if its code, the package,
    the pins or Python changed since; the gallery's scripts likewise (their .md5 files).
    Both builds fail on any warning. The files land in docs/_build/book/ and, when the
    site is built, in docs/_build/html/book/, where the closing page links to them.
    """
    browser = os.environ.get("ATTENTION_CHROMIUM")
    if not (browser or shutil.which("chromium") or shutil.which("chromium-browser")):
        session.error("no `chromium` on PATH: install it (Debian: `apt-get install chromium`)")
    install(session, "-e", ".[docs,site]")
    install_site_packages(session)
    env = {**DOCS_ENV, "ATTENTION_DOCS_CACHE": "1", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    common = ["-W", "--keep-going", "-n", "-j", str((os.cpu_count() or 1) + 1)]
    # The two builders share one set of doctrees: the pages are read once.
    common += ["-d", str(BOOK / "doctrees")]
    for builder in ("epub", "singlehtml"):
        shutil.rmtree(BOOK / builder, ignore_errors=True)
        session.run("sphinx-build", *common, "-b", builder, str(DOCS), str(BOOK / builder), env=env)
    epub = BOOK / f"{BOOK_NAME}.epub"
    shutil.copyfile(BOOK / "epub" / epub.name, epub)
    pdf = BOOK / f"{BOOK_NAME}.pdf"
    session.run(
        "python", "docs/tools/print_book.py", str(BOOK / "singlehtml" / "index.html"), str(pdf)
    )
    session.run("python", "docs/tools/check_book.py", str(epub), str(pdf))
    if (BUILD / "html" / "index.html").is_file():
        BOOK_ON_SITE.mkdir(exist_ok=True)
        for made in (epub, pdf):
            shutil.copyfile(made, BOOK_ON_SITE / made.name)
        session.log(f"the site offers them in {BOOK_ON_SITE}")


@nox.session(name="docs-live")
def docs_live(session: nox.Session) -> None:
    """Serve the site on http://127.0.0.1:8000 and rebuild it as you edit.

    As `nox -s docs -- --reuse`, it re-runs a chapter or gallery script only when its
    code, the package's source (attention/), the constraints file or the Python version
    has changed (myst-nb's cache mode and sphinx-gallery's staleness check, in a cache
    keyed on those: docs/_ext/live_cache.py).
    """
    install(session, "-e", ".[docs]", "sphinx-autobuild")
    session.run(
        "sphinx-autobuild",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--watch",
        str(ROOT / "attention"),
        "--watch",
        str(ROOT / "gallery"),
        "--ignore",
        str(DOCS / "auto_gallery"),
        # What each build writes beside its output: the executed notebooks, the kernels'
        # IPython folder, the cache. Watching it, every build would start the next one.
        "--ignore",
        str(BUILD),
        str(DOCS),
        str(BUILD / "html"),
        *session.posargs,
        env={**DOCS_ENV, "ATTENTION_DOCS_CACHE": "1"},
    )


@nox.session
def site(session: nox.Session) -> None:
    """Check the built site in headless Chromium, the way a reader uses it.

    Needs `nox -s docs` and `nox -s book` first (the closing page links the book's
    files), and a `chromium` on PATH (Debian: `apt-get install chromium`); Playwright
    drives it and never downloads a browser. Every page is
    served from 127.0.0.1 and checked for console errors, failed or third-party
    requests, broken images and links, and sideways scrolling on a phone; then
    search, previous/next, dark mode and the gallery's downloads. Screenshots land in
    docs/_build/screenshots/. Check another build with `nox -s site -- PATH/TO/html`
    (or ATTENTION_SITE_DIR=PATH/TO/html); drive another Chromium-based browser with
    ATTENTION_CHROMIUM=PATH (e.g. google-chrome).
    """
    import os

    session.env["PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD"] = "1"
    args = list(session.posargs)  # [HTML_DIR] [pytest options]
    html = args.pop(0) if args and not args[0].startswith("-") else None
    html = Path(html or os.environ.get("ATTENTION_SITE_DIR") or BUILD / "html").resolve()
    if not (html / "index.html").is_file():
        session.error(f"no built site at {html}: run `nox -s docs` first")
    browser = os.environ.get("ATTENTION_CHROMIUM")  # e.g. google-chrome; else chromium
    if not (browser or shutil.which("chromium") or shutil.which("chromium-browser")):
        session.error("no `chromium` on PATH: install it (Debian: `apt-get install chromium`)")
    install(session, "-e", ".[docs,test,site]")
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "tests/site",
        *args,
        env={
            **DOCS_ENV,
            "ATTENTION_SITE_DIR": str(html),
            "ATTENTION_SITE_SCREENSHOTS": str(html.parent / "screenshots"),
            "MPLBACKEND": "Agg",
            "JUPYTER_PLATFORM_DIRS": "1",
        },
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Run the benchmarks in benchmarks/: the variants side by side, the decode race, Part IV,
    packed against padded prefill and the paged cache's memory and decode step (Part V),
    FlashAttention's backward pass, split-KV decoding and ring attention (Part VI), and the
    serving engine against transformers' generate_batch and generate (attention.serving).

    Every argument goes to benchmarks/variants.py (`nox -s bench -- --help`); `--quick`
    goes to benchmarks/decode.py, part4.py, packing.py, serving.py, flash.py and engine.py
    too, whose JSON lands beside the variants' results.
    """
    install(session, "-e", ".[plot,transformers]")
    args = list(session.posargs)
    session.run("python", "benchmarks/variants.py", *args)
    out = args[args.index("--out") + 1] if "--out" in args[:-1] else "bench-results"
    quick = ["--quick"] if "--quick" in args else []
    session.run("python", "benchmarks/decode.py", *quick, "--out", str(Path(out) / "decode.json"))
    session.run("python", "benchmarks/part4.py", *quick, "--out", str(Path(out) / "part4.json"))
    session.run("python", "benchmarks/packing.py", *quick, "--out", str(Path(out) / "packing.json"))
    session.run("python", "benchmarks/serving.py", *quick, "--out", str(Path(out) / "serving.json"))
    session.run("python", "benchmarks/flash.py", *quick, "--out", str(Path(out) / "flash.json"))
    session.run("python", "benchmarks/engine.py", *quick, "--out", str(Path(out) / "engine.json"))
