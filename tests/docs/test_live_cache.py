"""nox -s docs-live's cache, keyed on the package's source (docs/_ext/live_cache.py)."""

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


def test_a_change_to_the_package_gives_a_new_folder_and_drops_the_old(tmp_path):
    package, build = make_package(tmp_path), tmp_path / "_build"
    before = live_cache(package, build)
    before.mkdir(parents=True)
    assert live_cache(package, build) == before and before.is_dir()  # kept while unchanged

    (package / "scaled.py").write_text("x = 1 ** 0.25\n")
    after = live_cache(package, build)
    assert after != before and after.parent == before.parent
    assert not before.exists()
