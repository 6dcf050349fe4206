"""The reuse mode's cache, keyed on the package's source, the constraints file and the
Python version (docs/_ext/live_cache.py)."""

from live_cache import live_cache, source_hash


def make_package(root):
    package = root / "attention"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from attention.scaled import x\n")
    (package / "scaled.py").write_text("x = 1 ** 0.5\n")
    (package / "sub" / "more.py").write_text("y = 2\n")
    (package / "notes.txt").write_text("not source\n")
    return package


def test_the_hash_follows_every_python_file_and_nothing_else(tmp_path):
    package = make_package(tmp_path)
    first = source_hash(package)
    assert source_hash(package) == first
    (package / "notes.txt").write_text("changed, but not source\n")
    assert source_hash(package) == first

    (package / "sub" / "more.py").write_text("y = 3\n")  # a change deep inside
    changed = source_hash(package)
    assert changed != first
    (package / "sub" / "more.py").rename(package / "sub" / "renamed.py")
    assert source_hash(package) not in (first, changed)
    (package / "sub" / "renamed.py").rename(package / "sub" / "more.py")
    assert source_hash(package) == changed  # the same source, the same key


def test_the_hash_follows_the_constraints_and_the_python_version(tmp_path):
    package, pins = make_package(tmp_path), tmp_path / "constraints.txt"
    first = source_hash(package, pins, python="3.12.1")
    pins.write_text("torch==2.0\n")
    pinned = source_hash(package, pins, python="3.12.1")
    assert pinned != first
    pins.write_text("torch==2.1\n")
    assert source_hash(package, pins, python="3.12.1") not in (first, pinned)
    newer = source_hash(package, pins, python="3.13.0")
    assert newer != source_hash(package, pins, python="3.12.1")


def test_a_change_gives_a_new_folder_and_drops_the_old(tmp_path):
    package, build = make_package(tmp_path), tmp_path / "_build"
    before = live_cache(tmp_path, build)
    before.mkdir(parents=True)
    assert live_cache(tmp_path, build) == before and before.is_dir()  # kept while unchanged

    (package / "scaled.py").write_text("x = 1 ** 0.25\n")
    after = live_cache(tmp_path, build)
    assert after != before and after.parent == before.parent
    assert not before.exists()
    after.mkdir()
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "constraints.txt").write_text("torch==2.0\n")  # a new pin
    assert live_cache(tmp_path, build) != after and not after.exists()
