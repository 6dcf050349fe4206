"""The gallery's worker processes (docs/_ext/gallery_workers.py)."""

import gc
import multiprocessing
import os
import sys
import weakref
from pathlib import Path
from types import SimpleNamespace

import gallery_workers
import joblib.parallel
import pytest
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


def test_the_scripts_imports_are_read_from_their_source(tmp_path):
    (tmp_path / "plot_b.py").write_text("import torch\nfrom attention.figures import heatmap\n")
    (tmp_path / "plot_a.py").write_text(
        '"""import not_code"""\nimport math, torch\nfrom . import local\n'
        "def f():\n    import textwrap\n"
    )
    (tmp_path / "notes.txt").write_text("import ignored")
    assert gallery_workers.script_imports(tmp_path) == [
        "math",
        "torch",
        "textwrap",
        "attention.figures",
    ]


def app_with_gallery(folder, parallel):
    conf = {"parallel": parallel, "examples_dirs": folder.name}
    return SimpleNamespace(config=SimpleNamespace(sphinx_gallery_conf=conf), srcdir=folder.parent)


@pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver here"
)
def test_the_workers_are_forked_from_a_server_that_imported_the_scripts_modules(
    tmp_path, monkeypatch
):
    # A module that notes, as it is imported, which process imported it.
    modules = tmp_path / "modules"
    modules.mkdir()
    imported_by = tmp_path / "imported_by"
    (modules / "noted_on_import.py").write_text(
        f"import os\nwith open({str(imported_by)!r}, 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n"
    )
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.setenv("PYTHONPATH", str(modules))
    gallery = tmp_path / "gallery"
    gallery.mkdir()
    (gallery / "plot_noted.py").write_text("import noted_on_import\n")
    app = app_with_gallery(gallery, 2)
    default_backend = type(joblib.parallel.get_active_backend()[0])

    gallery_workers.fork_from_server(app)
    try:
        workers = set(Parallel(n_jobs=2)(delayed(os.getpid)() for _ in range(4)))
    finally:
        gallery_workers.restore(app)

    importers = set(imported_by.read_text().split())
    assert len(importers) == 1  # one server, not each worker, imported it
    assert importers.isdisjoint(workers | {str(os.getpid())})
    assert os.getpid() not in workers
    assert type(joblib.parallel.get_active_backend()[0]) is default_backend
    assert joblib.parallel.DEFAULT_MP_CONTEXT is None


def test_without_a_parallel_gallery_joblib_is_left_alone():
    app = app_with_gallery(Path("gallery"), False)
    gallery_workers.fork_from_server(app)
    assert getattr(app, "_gallery_workers_saved", None) is None
    gallery_workers.restore(app)
    assert joblib.parallel.DEFAULT_MP_CONTEXT is None
