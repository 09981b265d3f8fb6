"""The course's default configuration: a course-local exchange when none is configured (the
Formgrader then opens without its "exchange directory does not exist" warning), an
instructor's exchange always wins; TAS_DB_URL reaches the course roots TAS_DB_URL_ROOT names,
and only the repository without it."""
from __future__ import annotations

import os
import stat

import pytest
from traitlets.config import Config

from solutions_lib.course import config
from solutions_lib.course.config import apply_course_config, gradebook_url


@pytest.fixture
def no_default_exchange(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "DEFAULT_EXCHANGE", str(tmp_path / "no" / "such" / "exchange"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter-config"))  # a user config of our own
    monkeypatch.setattr(config, "_exchange_configured_elsewhere", lambda: False)


def test_course_local_exchange_by_default(no_default_exchange, tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    c = Config()
    apply_course_config(c, str(root))
    ex = root / "exchange"
    assert c.Exchange.root == str(ex)
    assert ex.is_dir() and stat.S_IMODE(ex.stat().st_mode) == 0o1777


def test_instructor_exchange_wins(no_default_exchange, tmp_path):
    c = Config()
    c.Exchange.root = "/srv/nbgrader/exchange"  # set before apply_course_config
    apply_course_config(c, str(tmp_path))
    assert c.Exchange.root == "/srv/nbgrader/exchange" and not (tmp_path / "exchange").exists()
    c = Config()
    apply_course_config(c, str(tmp_path))
    c.Exchange.root = "/srv/nbgrader/exchange"  # after it, as the README says: a later assignment wins
    assert c.Exchange.root == "/srv/nbgrader/exchange"


def test_exchange_named_in_a_jupyter_config_file_wins(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "DEFAULT_EXCHANGE", str(tmp_path / "missing"))
    cfg_dir = tmp_path / "jupyter-config"
    cfg_dir.mkdir()
    (cfg_dir / "nbgrader_config.py").write_text("c.Exchange.root = '/srv/nbgrader/exchange'\n")
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(cfg_dir))
    c = Config()
    apply_course_config(c, str(tmp_path))
    assert "root" not in c.Exchange


def test_existing_default_exchange_is_kept(monkeypatch, tmp_path):
    default = tmp_path / "usr-local-share-exchange"
    default.mkdir()
    monkeypatch.setattr(config, "DEFAULT_EXCHANGE", str(default))
    monkeypatch.setattr(config, "_exchange_configured_elsewhere", lambda: False)
    c = Config()
    apply_course_config(c, str(tmp_path / "course"))
    assert "root" not in c.Exchange


def test_formgrader_api_sees_the_exchange(no_default_exchange, fixture_course):
    """What the Formgrader's assignment page asks (NbGraderAPI.exchange_missing)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    c = Config()
    apply_course_config(c, str(fixture_course))
    api = NbGraderAPI(CourseDirectory(config=c), config=c)
    assert not api.exchange_missing and api.exchange_root == str(fixture_course / "exchange")


def test_db_url_root(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    monkeypatch.delenv("TAS_DB_URL_ROOT", raising=False)
    monkeypatch.delenv("TAS_DB_URL", raising=False)
    assert gradebook_url(a) == "sqlite:///" + os.path.join(str(a), "gradebook.db")
    monkeypatch.setenv("TAS_DB_URL", "postgresql+psycopg2://u@h/gb")
    assert gradebook_url(a).startswith("sqlite:///")           # a temporary course: its own file
    assert gradebook_url(config._REPO_ROOT) == "postgresql+psycopg2://u@h/gb"  # the default
    monkeypatch.setenv("TAS_DB_URL_ROOT", os.pathsep.join([str(a), str(b)]))
    assert gradebook_url(a) == gradebook_url(b) == "postgresql+psycopg2://u@h/gb"
    assert gradebook_url(tmp_path / "c").startswith("sqlite:///")
    assert gradebook_url(config._REPO_ROOT).startswith("sqlite:///")  # only the roots it names
