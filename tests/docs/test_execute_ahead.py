"""execute_ahead steps aside on a myst-nb it does not know (docs/_ext/execute_ahead.py).

It runs the pages ahead through myst-nb's reader and environment attributes, which
myst-nb does not document; on a release it was not written against, or one without
that reader, the pages must run as plain myst-nb runs them, with a warning. A whole
build on a faked release is in test_verify_extensions.py.
"""

import importlib.metadata
import sys
from types import ModuleType, SimpleNamespace

import execute_ahead
import pytest


def fake_release(monkeypatch, version: str) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: version if name == "myst-nb" else real(name),
    )


def site_config(keep: bool = False) -> SimpleNamespace:
    """An application and its configuration as the site sets them (conf.py)."""
    config = SimpleNamespace(nb_execution_mode="cache", execute_ahead_keep=keep)
    return SimpleNamespace(config=config)


def test_the_pinned_myst_nb_is_one_it_knows():
    assert execute_ahead.unknown_myst_nb() is None
    app = site_config()
    execute_ahead.step_aside_if_unknown(app, app.config)
    assert app.config.nb_execution_mode == "cache"
    assert not getattr(app, execute_ahead.ASIDE, False)


@pytest.mark.parametrize("version", ["1.5.0", "2.0.0", "1.3.2", "1.40.0"])
def test_another_release_is_unknown(monkeypatch, version):
    fake_release(monkeypatch, version)
    assert execute_ahead.unknown_myst_nb() == (f"myst-nb {version} is not a release it knows (1.4)")


def test_a_release_without_the_reader_it_uses_is_unknown(monkeypatch):
    fake_release(monkeypatch, "1.4.9")
    monkeypatch.setitem(sys.modules, "myst_nb.core.read", ModuleType("myst_nb.core.read"))
    reason = execute_ahead.unknown_myst_nb()
    assert reason == "myst-nb 1.4.9 has no myst_nb.core.read.create_nb_reader"


def test_on_an_unknown_release_every_page_runs_as_plain_myst_nb_runs_it(monkeypatch, caplog):
    fake_release(monkeypatch, "2.0.0")
    app = site_config()
    execute_ahead.step_aside_if_unknown(app, app.config)
    assert "myst-nb 2.0.0 is not a release it knows" in caplog.text
    assert "as plain myst-nb runs them" in caplog.text
    # The cache mode showed every page fresh only because execute_ahead emptied the
    # cache; plain myst-nb runs every page in its force mode.
    assert app.config.nb_execution_mode == "force"
    # Nothing runs ahead and nothing is restored: start and restore_outputs return
    # before they touch the environment (this app has none).
    app.config.nb_execution_mode = "cache"  # even where a later handler sets it back
    execute_ahead.start(app)
    execute_ahead.restore_outputs(app, None)
    assert getattr(app, execute_ahead.AHEAD, None) is None


def test_docs_live_keeps_myst_nbs_own_cache_mode(monkeypatch, caplog):
    fake_release(monkeypatch, "2.0.0")
    app = site_config(keep=True)
    execute_ahead.step_aside_if_unknown(app, app.config)
    assert app.config.nb_execution_mode == "cache"
    assert getattr(app, execute_ahead.ASIDE)
    assert "as plain myst-nb runs them" in caplog.text
