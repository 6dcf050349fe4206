"""The docs extensions (docs/_ext) import each other by plain name, as Sphinx loads them;
the command-line tools beside them (docs/tools) are imported the same way."""

import sys
from pathlib import Path

import pytest

EXTENSIONS = Path(__file__).resolve().parents[2] / "docs" / "_ext"
TOOLS = EXTENSIONS.parent / "tools"
sys.path[:0] = [str(EXTENSIONS), str(TOOLS)]


@pytest.fixture
def torch_formatting():
    """Restore torch's own tensor formatting and print options after a test."""
    import torch
    from torch import _tensor_str

    original, options = _tensor_str._tensor_str, dict(vars(_tensor_str.PRINT_OPTS))
    yield torch
    _tensor_str._tensor_str = original
    vars(_tensor_str.PRINT_OPTS).update(options)
