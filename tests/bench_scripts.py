"""The scripts in benchmarks/, imported as they import each other.

Run as ``python benchmarks/NAME.py``, a script has its own folder first on ``sys.path``
and imports ``harness`` and ``workload`` from it; a test puts the folder there too and
imports the script by its name, as pytest's doctest collection does.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str) -> ModuleType:
    """``benchmarks/{name}.py`` as the module ``name``."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    return importlib.import_module(name)
