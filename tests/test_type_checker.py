"""The type checker that `nox -s lint` runs is strict enough to catch a misspelled attribute.

mypy, with the project's settings ([tool.mypy] in pyproject.toml), checks a small module
that builds a package class and reads one attribute misspelled, inside a function with
no annotations: mypy skips such a body unless ``check_untyped_defs`` is on. The module
reads the same attribute spelled right too, which must pass. Skipped where mypy is not
installed (it comes with the ``test`` and ``lint`` extras).

The class is a cache, not a layer: ``torch.nn.Module`` declares ``__getattr__`` (for its
parameters, buffers and submodules), so to a type checker every name on a layer exists,
a ``Tensor | Module``; a misspelled layer attribute is caught only where that type does
not fit its use.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODULE = textwrap.dedent(
    """\
    from attention import KVCache


    def window():  # no annotations: checked only with check_untyped_defs
        cache = KVCache(window=4)
        return cache.window, cache.windw
    """
)


def test_mypy_catches_a_misspelled_attribute(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    module = tmp_path / "misspelled.py"
    module.write_text(MODULE, encoding="utf-8")
    # From the repository's root, so that mypy reads `attention` from the source tree
    # (it cannot follow an editable install's import hook).
    monkeypatch.chdir(ROOT)
    config = str(ROOT / "pyproject.toml")
    cache = str(tmp_path / "mypy_cache")
    # Errors in this module only: the package's own are `nox -s lint`'s to report.
    options = ["--config-file", config, "--cache-dir", cache, "--follow-imports", "silent"]
    stdout, stderr, status = api.run([*options, str(module)])
    errors = [line for line in stdout.splitlines() if ": error: " in line]
    assert status == 1, stdout + stderr
    assert len(errors) == 1, stdout
    assert errors[0].startswith(f"{module}:6: error: ")
    assert '"KVCache" has no attribute "windw"' in errors[0]
    assert errors[0].endswith("[attr-defined]")
