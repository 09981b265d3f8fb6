"""The trusted-run cache is authenticated (issue 26): an entry carries an HMAC with the grader's
key (0600, beside the cache); a changed entry stops grading with a message, an entry of an
older format is run again, and the key file must be the grader's own."""
from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURE, write_fixture_course
from solutions_lib.course import trusted


@pytest.fixture
def cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TAS_TRUSTED_CACHE", str(tmp_path / "cache" / "trusted"))
    root = write_fixture_course(tmp_path / "course")
    src = root / "source" / FIXTURE / "exercises.ipynb"
    entry = trusted.trusted_records(src, timeout=30)
    return src, entry, trusted.cache_dir() / f"{trusted.fingerprint(src)}.json"


def test_a_changed_entry_stops_grading(cached):
    src, entry, path = cached
    assert entry["cells"], "the fixture has test cells"
    assert trusted.trusted_records(src) == entry                       # read back, verified
    assert oct(os.stat(trusted.cache_dir().parent / trusted.KEY_FILE).st_mode & 0o777) == "0o600"
    wrapped = json.loads(path.read_text())
    cell = next(iter(wrapped["entry"]["cells"].values()))
    cell["records"] = []                                               # "this cell checks nothing"
    path.write_text(json.dumps(wrapped))
    with pytest.raises(trusted.TrustedRunError, match="changed after the grader wrote it"):
        trusted.trusted_records(src)
    wrapped["mac"] = "0" * 64
    path.write_text(json.dumps(wrapped))
    with pytest.raises(trusted.TrustedRunError, match="changed after the grader wrote it"):
        trusted.trusted_records(src)


def test_an_old_format_entry_is_run_again(cached):
    src, entry, path = cached
    path.write_text(json.dumps({**entry, "format": 2}))                 # an unsigned entry, as before
    assert trusted.trusted_records(src, timeout=30) == entry
    assert json.loads(path.read_text())["format"] == trusted.FORMAT


def test_the_key_must_be_private(cached):
    key = trusted.cache_dir().parent / trusted.KEY_FILE
    os.chmod(key, 0o644)
    with pytest.raises(trusted.TrustedRunError, match="mode 0600"):
        trusted.trusted_records(cached[0])
