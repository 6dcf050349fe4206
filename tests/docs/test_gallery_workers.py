"""The gallery's worker processes (docs/_ext/gallery_workers.py)."""

import gc
import sys
import weakref

import gallery_workers
from joblib import Parallel, delayed


class Node:
    pass


def test_freezing_keeps_what_survived_and_still_frees_later_cycles():
    survivor = Node()
    before = gc.get_freeze_count()
    try:
        gallery_workers.freeze_survivors({}, "plot_example.py", "before")
        assert gc.get_freeze_count() > before
        first, second = Node(), Node()
        first.other, second.other = second, first
        alive = weakref.ref(first)
        del first, second
        gc.collect()
        assert alive() is None
        assert survivor is not None
    finally:
        gc.unfreeze()


def test_the_workers_are_ended_once_the_scripts_have_run():
    # As sphinx-gallery runs its scripts with -j: joblib's Parallel, which keeps them.
    assert Parallel(n_jobs=2)(delayed(pow)(6, n) for n in range(3)) == [1, 6, 36]
    executor = sys.modules["joblib.externals.loky.reusable_executor"]._executor
    workers = list(executor._processes.values())
    assert workers and all(worker.is_alive() for worker in workers)
    gallery_workers.stop_workers()
    for worker in workers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in workers)


def test_ending_the_workers_when_none_were_started_does_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "joblib.externals.loky.reusable_executor", raising=False)
    gallery_workers.stop_workers()
