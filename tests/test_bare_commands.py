"""Instructor commands work without an activated virtual environment: a bare `.venv/bin/nbgrader`
on a new gradebook runs `alembic` from PATH, which the course config puts first."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bare_nbgrader_creates_a_gradebook_without_the_venv_on_path(tmp_path):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    nbgrader = Path(sys.executable).parent / "nbgrader"
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "TAS_SANDBOX": "off",
           "PYTHONPATH": str(ROOT)}
    assert shutil.which("alembic", path=env["PATH"]) is None or not str(shutil.which("alembic", path=env["PATH"])).startswith(str(Path(sys.executable).parent))
    p = subprocess.run([str(nbgrader), "db", "student", "list"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "There are 0 students in the database" in p.stdout + p.stderr
    assert (tmp_path / "gradebook.db").is_file()
    os.remove(tmp_path / "gradebook.db")
