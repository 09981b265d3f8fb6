"""Secure by default (issue 26): stock `nbgrader autograde` on a machine where the sandbox
cannot run (here: bubblewrap not on PATH) refuses to grade, saying how to install bubblewrap or
opt out, and grades with TAS_SANDBOX=off; the course's own grading tool refuses before it starts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURE, write_fixture_course
from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, solved_version

VENV_BIN = str(Path(sys.executable).parent)


def _course(tmp_path: Path) -> Path:
    root = write_fixture_course(tmp_path / "course")
    course = Course(root)
    course.generate(FIXTURE)
    names = sorted(p.name for p in (root / "source" / FIXTURE).glob("*.ipynb"))
    course.submit("s1", FIXTURE, {n: solved_version(course.release_notebook(FIXTURE, n),
                                                    nbs.read(root / "source" / FIXTURE / n)) for n in names})
    return root


def _run(root: Path, mode: str | None, *cmd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TAS_SANDBOX"}
    env["PATH"] = VENV_BIN                 # no bwrap, no prlimit: the sandbox cannot run
    if mode:
        env["TAS_SANDBOX"] = mode
    return subprocess.run(list(cmd), cwd=root, env=env, capture_output=True, text=True, timeout=600)


def test_grading_refuses_without_the_sandbox_unless_told(tmp_path):
    root = _course(tmp_path)
    nbgrader = str(Path(VENV_BIN) / "nbgrader")
    p = _run(root, None, nbgrader, "autograde", FIXTURE, "--force")
    out = p.stdout + p.stderr
    assert "the grading sandbox cannot run on this machine" in out and "TAS_SANDBOX=off" in out, out[-3000:]
    assert not list((root / "autograded").glob("s1/*/*.ipynb")), "a notebook was graded unsandboxed"
    p = _run(root, None, sys.executable, "-m", "solutions_lib", "autograde", FIXTURE, "--root", str(root))
    assert p.returncode == 2 and "apt-get install -y bubblewrap" in p.stderr, p.stdout + p.stderr
    p = _run(root, "off", nbgrader, "autograde", FIXTURE, "--force")
    assert sorted(x.name for x in (root / "autograded" / "s1" / FIXTURE).glob("*.ipynb")), p.stdout + p.stderr
