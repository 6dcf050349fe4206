"""The docs extensions (docs/_ext) import each other by plain name, as Sphinx loads them."""

import sys
from pathlib import Path

import pytest

EXTENSIONS = Path(__file__).resolve().parents[2] / "docs" / "_ext"
sys.path.insert(0, str(EXTENSIONS))


@pytest.fixture
def torch_formatting():
    """Restore torch's own tensor formatting and print options after a test."""
    import torch
    from torch import _tensor_str

    original, options = _tensor_str._tensor_str, dict(vars(_tensor_str.PRINT_OPTS))
    yield torch
    _tensor_str._tensor_str = original
    vars(_tensor_str.PRINT_OPTS).update(options)
