"""Sessions for testing, linting and building the documentation.

Every session installs with the shared constraints file, so all of them get the
same pinned ``torch`` (a CPU build) and the same versions of everything else.
"""

from pathlib import Path

import nox

ROOT = Path(__file__).parent
CONSTRAINTS = str(ROOT / ".ci" / "constraints.txt")

nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint"]


def install(session: nox.Session, *args: str) -> None:
    session.install("-c", CONSTRAINTS, *args)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite and the docstring examples (pytest --doctest-modules)."""
    install(session, "-e", ".[test,plot]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common mistakes with ruff."""
    install(session, "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
