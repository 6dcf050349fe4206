"""Test-wide settings for a two-core machine, and the fixtures the test files share.

The shapes drawn are tiny, so a few dozen examples per property cover the corner
cases (one token, one head, a full context) without slowing the suite down. Choose
a bigger run with ``pytest --hypothesis-profile=thorough``.
"""

import pytest
import torch
from hypothesis import HealthCheck, settings

# The contracts' property tests (tests/contracts.py) are methods that pytest calls on a
# new instance of their class for each module under test, which Hypothesis would report
# as "differing executors"; the classes keep no state, so the check is off.
SHARED = {"deadline": None, "suppress_health_check": [HealthCheck.differing_executors]}
settings.register_profile("quick", max_examples=25, **SHARED)
settings.register_profile("thorough", max_examples=500, **SHARED)
settings.load_profile("quick")


@pytest.fixture(scope="module")
def single_thread():
    """Run a test module on one intra-op thread, then restore the previous count.

    On tensors of a few dozen numbers, waking a thread pool costs more than the
    arithmetic, and on a busy two-core machine it more than doubles the CPU time.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def seeded():
    """Seed the global generator like the book, and restore it afterwards."""
    with torch.random.fork_rng(devices=[]):
        yield torch.manual_seed
