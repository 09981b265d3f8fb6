"""Grades a submission cannot harm (issue 14): nothing the grading kernel writes is trusted, and
no submission can stop the class.

A class of hostile submissions next to honest ones, graded with stock `nbgrader autograde`
(and `generate_feedback`, and the grade report) in a temporary course:

- `h_planter`'s kernel plants links in its working folder, named like the next notebook (to
  another student's files and the gradebook) and like a data file (to a 0600 secret): the
  kernel runs in a scratch copy, so nbgrader never writes, chmods or copies through them;
- `h_fifo`, `h_link`, `h_big`, `h_ts` hand in a FIFO, links, a huge file, a FIFO timestamp:
  refused at intake (reported, with the reason), the rest graded, nothing blocks;
- `h_disk` writes a file past the sandbox's file-size limit: the write fails (EFBIG);
- `h_flood` prints 16 times the output cap: the grader keeps the cap, the cell gets an
  `OutputTooLarge` error, a failing test after the flood still fails.

Each scores what it deserves; the honest students' files and gradebook rows do not change.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, read_results, solved_version
from solutions_lib.course.nbgrader_cmd import command, stock_executable
from solutions_lib.course.sandbox import sandbox_available

from conftest import FIXTURE, write_fixture_course

_ok, _why = sandbox_available()
pytestmark = [pytest.mark.nbgrader, pytest.mark.xdist_group("hostile_files")]

CAP = 2**20              # output kept per notebook in these courses
FILE_BYTES = 8 * 2**20   # largest file a sandboxed process may write here
FULL = {"exercises.ipynb": ("graded", 5.0), "theory.ipynb": ("graded", 1.0)}


def _answer(nb, gid):
    return next(c for c in nb.cells if nbs.nbgrader_md(c).get("grade_id") == gid)


def _nbgrader(root: Path, *args: str, env=None, timeout: int = 240, stock: bool = False) -> subprocess.CompletedProcess:
    """`nbgrader ARGS --force` in the course root (`stock`: the `nbgrader` script itself, else
    the same nbgrader main through the quicker launcher, nbgrader_cmd.py)."""
    argv = [stock_executable(), *args] if stock else command(*args)
    return subprocess.run([*argv, "--force"], cwd=root, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _tree_hashes(*folders: Path) -> dict[str, str]:
    out = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not p.is_symlink():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
    return out


def _grade_rows(root: Path, like: str) -> list[tuple]:
    con = sqlite3.connect(f"file:{root / 'gradebook.db'}?mode=ro", uri=True)
    try:
        return con.execute(
            "SELECT sa.student_id, sn.id, g.id, g.auto_score, g.manual_score, g.needs_manual_grade "
            "FROM grade g JOIN submitted_notebook sn ON g.notebook_id = sn.id "
            "JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
            "WHERE sa.student_id LIKE ? ORDER BY g.id", (like,)).fetchall()
    finally:
        con.close()


def _auto(root: Path, student: str) -> dict:
    return {n.name: (n.status, n.score("tests")) for n in read_results(root, FIXTURE, student).notebooks}


@pytest.fixture(scope="module")
def hostile_course(tmp_path_factory):
    """One course (the fixture assignment, generated once) for both tests, which grade disjoint
    students; the sandbox (with a small file-size limit) unless TAS_SANDBOX=off."""
    root = write_fixture_course(tmp_path_factory.mktemp("hostile") / "course")
    with open(root / "nbgrader_config.py", "a") as f:
        f.write(f"c.CourseExecute.output_cap_bytes = {CAP}\n"
                "if __import__('os').environ.get('TAS_SANDBOX') != 'off':\n"
                "    from solutions_lib.course.sandbox import enable_sandbox\n"
                f"    enable_sandbox(c, c.CourseDirectory.root, file_bytes={FILE_BYTES})\n")
    mp = pytest.MonkeyPatch()
    mp.setenv("TAS_COURSE_ROOT", str(root))
    course = Course(root, cell_timeout=10)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    solved = {n: solved_version(rel[n], nbs.read(root / "source" / FIXTURE / n)) for n in rel}
    yield root, course, solved
    mp.undo()


def _with(solved, code: str = "", cube_wrong: bool = False, only: str | None = None) -> dict:
    sub = {n: nbformat.from_dict(json.loads(json.dumps(nb))) for n, nb in solved.items() if n in (only or n)}
    cell = _answer(sub["exercises.ipynb"], "square")
    cell.source = code + "\n" + cell.source
    if cube_wrong:
        _answer(sub["exercises.ipynb"], "cube").source = "def cube(x):\n    return 0"
    return sub


FLOOD = f"for _ in range({16 * CAP // 2**20}):\n    print('x' * 2**20)"


def _check_flood(root: Path, student: str) -> None:
    """The flooding cell kept at most the cap and says why; the test after it still failed."""
    path = root / "autograded" / student / FIXTURE / "exercises.ipynb"
    assert path.stat().st_size < CAP + 2**19, path.stat().st_size
    nb = nbformat.read(path, as_version=4)
    errors = [o for o in _answer(nb, "square").outputs if o.get("output_type") == "error"]
    assert [e.ename for e in errors] == ["OutputTooLarge"], errors
    assert "MB per notebook" in errors[0].evalue
    cube_errors = [o for o in _answer(nb, "cube_tests").outputs if o.get("output_type") == "error"]
    assert cube_errors, "a failing test after the flood lost its error"


def _hostile_intake(course: Course, root: Path, solved) -> None:
    """h_fifo, h_link, h_big, h_ts: submissions nbgrader must not open as they are."""
    d = course.submit("h_fifo", FIXTURE, {"exercises.ipynb": solved["exercises.ipynb"]})
    os.mkfifo(d / "theory.ipynb")
    os.mkfifo(d / "data.bin")
    d = course.submit("h_link", FIXTURE, {"theory.ipynb": solved["theory.ipynb"]})
    os.symlink(root / "submitted" / "ok_a" / FIXTURE / "exercises.ipynb", d / "exercises.ipynb")
    os.symlink(root / "source" / FIXTURE / "exercises.ipynb", d / "notes.txt")  # would reach the kernel
    d = course.submit("h_big", FIXTURE, {"exercises.ipynb": solved["exercises.ipynb"]})
    for name in ("theory.ipynb", "big.bin"):  # sparse: huge to stat, nothing on disk
        with open(d / name, "wb") as f:
            f.truncate(60 * 2**20)
    d = course.submit("h_ts", FIXTURE, solved)
    (d / "timestamp.txt").unlink()
    os.mkfifo(d / "timestamp.txt")


def _check_intake(root: Path, log: str) -> None:
    assert _auto(root, "h_fifo")["exercises.ipynb"] == ("graded", 5.0)
    assert _auto(root, "h_link")["theory.ipynb"] == ("graded", 1.0)
    assert _auto(root, "h_big")["exercises.ipynb"] == ("graded", 5.0)
    for student, nb, why in [("h_fifo", "theory.ipynb", "FIFO"), ("h_link", "exercises.ipynb", "symbolic link"),
                             ("h_big", "theory.ipynb", "over the 50 MB limit"),
                             ("h_ts", "exercises.ipynb", "timestamp.txt is a FIFO"),
                             ("h_ts", "theory.ipynb", "timestamp.txt is a FIFO")]:
        res = {n.name: n for n in read_results(root, FIXTURE, student).notebooks}[nb]
        assert res.status == "failed" and "refused at intake" in res.detail and why in res.detail, \
            (student, nb, res.status, res.detail)
    for line in ("theory.ipynb: is a FIFO", "data.bin: is a FIFO", "notes.txt: is a symbolic link",
                 "big.bin: is 60.0 MB", "timestamp.txt is a FIFO"):
        assert line in log, (line, log[-3000:])
    auto = root / "autograded"
    assert not (auto / "h_link" / FIXTURE / "notes.txt").exists()
    assert not (auto / "h_fifo" / FIXTURE / "data.bin").exists()
    assert not (auto / "h_big" / FIXTURE / "big.bin").exists()
    # the grade report reads it all without blocking, and says why
    code = ("import csv, sys; from solutions_lib.course.report import write_report; "
            f"write_report({str(root)!r})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(Path(__file__).resolve().parents[1]))
    assert out.returncode == 0, out.stderr[-2000:]
    rows = list(__import__("csv").DictReader(open(root / "grades_by_question.csv")))
    fifo_rows = [r for r in rows if r["student"] == "h_fifo" and r["notebook"] == "theory.ipynb"]
    assert fifo_rows and all(r["status"] == "failed_to_run" and r["points"] == "" and "FIFO" in r["detail"]
                             for r in fifo_rows), fifo_rows


@pytest.mark.skipif(not _ok, reason=_why or "sandbox unavailable")
def test_hostile_files_cannot_harm_the_class(hostile_course):
    root, course, solved = hostile_course
    course.submit("ok_a", FIXTURE, solved)
    course.submit("ok_b", FIXTURE, _with(solved, cube_wrong=True, only="exercises.ipynb"))
    first = _nbgrader(root, "autograde", FIXTURE, "--student=ok_*")
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    assert _auto(root, "ok_a") == FULL and _auto(root, "ok_b")["exercises.ipynb"] == ("graded", 2.0)

    secret = root / "secret.txt"
    secret.write_text("instructor only")
    secret.chmod(0o600)
    (root / "gradebook.db").chmod(0o600)
    honest = [root / "submitted" / "ok_a", root / "submitted" / "ok_b", root / "autograded" / "ok_a",
              root / "autograded" / "ok_b", root / "source", root / "release"]
    before = _tree_hashes(*honest), _grade_rows(root, "ok_%")

    targets = {"theory.ipynb": root / "autograded" / "ok_a" / FIXTURE / "exercises.ipynb",
               "next.ipynb": root / "submitted" / "ok_b" / FIXTURE / "theory.ipynb",
               "leak.txt": secret, "leak2.txt": root / "source" / FIXTURE / "exercises.ipynb",
               "gb.db": root / "gradebook.db"}
    plant = "import os\n" + "".join(f"os.symlink({str(t)!r}, {n!r})\n" for n, t in targets.items())
    plant += "os.symlink('/', 'rootlink')\nopen('kept.txt', 'w').write('scratch')\n"
    course.submit("h_planter", FIXTURE, _with(solved, plant))
    course.submit("h_disk", FIXTURE, _with(solved, f"open('fill.bin', 'wb').write(b'x' * {2 * FILE_BYTES})",
                                           only="exercises.ipynb"))
    course.submit("h_flood", FIXTURE, _with(solved, FLOOD, cube_wrong=True, only="exercises.ipynb"))
    _hostile_intake(course, root, solved)

    run = _nbgrader(root, "autograde", FIXTURE, "--student=h_*", stock=True)
    log = run.stdout + run.stderr
    assert run.returncode == 1, log[-3000:]  # the refusals make it fail, after grading everyone
    fb = _nbgrader(root, "generate_feedback", FIXTURE)
    fb_log = fb.stdout + fb.stderr

    assert _auto(root, "h_planter") == FULL, log[-3000:]
    mine = root / "autograded" / "h_planter" / FIXTURE
    assert sorted(p.name for p in mine.iterdir()) == ["exercises.ipynb", "theory.ipynb", "timestamp.txt"]
    assert not any(p.is_symlink() for p in (root / "feedback").rglob("*")), fb_log[-2000:]
    assert not list((root / "feedback" / "h_planter").rglob("leak*"))
    assert _auto(root, "h_disk")["exercises.ipynb"] == ("graded", 3.0)
    disk = nbformat.read(root / "autograded" / "h_disk" / FIXTURE / "exercises.ipynb", as_version=4)
    assert any("File too large" in o.get("evalue", "") for o in _answer(disk, "square").outputs), \
        _answer(disk, "square").outputs
    assert _auto(root, "h_flood")["exercises.ipynb"] == ("graded", 2.0)
    _check_flood(root, "h_flood")
    _check_intake(root, log)

    # nothing of the honest students changed; the link targets kept their content and mode
    after = _tree_hashes(*honest), _grade_rows(root, "ok_%")
    assert after == before
    assert secret.read_text() == "instructor only" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "gradebook.db").stat().st_mode) == 0o600
    assert _auto(root, "ok_a") == FULL


def test_output_cap_and_intake_without_the_sandbox(hostile_course):
    """TAS_SANDBOX=off: the same Execute (output cap) and the same intake check apply."""
    root, course, solved = hostile_course
    course.submit("off_ok", FIXTURE, _with(solved, only="exercises.ipynb"))
    course.submit("off_flood", FIXTURE, _with(solved, FLOOD, cube_wrong=True, only="exercises.ipynb"))
    d = course.submit("off_fifo", FIXTURE, {"exercises.ipynb": solved["exercises.ipynb"]})
    os.mkfifo(d / "theory.ipynb")
    env = dict(os.environ, TAS_SANDBOX="off")
    run = _nbgrader(root, "autograde", FIXTURE, "--student=off_*", env=env, stock=True)
    log = run.stdout + run.stderr
    assert run.returncode == 1 and "refused at intake" in log, log[-3000:]
    assert _auto(root, "off_ok")["exercises.ipynb"] == ("graded", 5.0)
    assert _auto(root, "off_flood")["exercises.ipynb"] == ("graded", 2.0)
    _check_flood(root, "off_flood")
    res = {n.name: n for n in read_results(root, FIXTURE, "off_fifo").notebooks}
    assert res["exercises.ipynb"].status == "graded" and res["theory.ipynb"].status == "failed"
    assert "FIFO" in res["theory.ipynb"].detail
    # the feedback step opens no link or FIFO either (say one left in an autograded folder by
    # an older grader): refused and reported, the rest of the class gets its feedback
    auto = root / "autograded"
    os.symlink(root / "source" / FIXTURE / "exercises.ipynb", auto / "off_ok" / FIXTURE / "leak.txt")
    os.mkfifo(auto / "off_flood" / FIXTURE / "theory.ipynb")
    fb = _nbgrader(root, "generate_feedback", FIXTURE, "--student=off_*", env=env, timeout=120)
    fb_log = fb.stdout + fb.stderr
    assert fb.returncode == 1 and "leak.txt: is a symbolic link" in fb_log and "theory.ipynb: is a FIFO" in fb_log, \
        fb_log[-2000:]
    feedback = root / "feedback"
    for student in ("off_ok", "off_flood", "off_fifo"):
        assert (feedback / student / FIXTURE / "exercises.html").is_file(), (student, fb_log[-2000:])
    assert not (feedback / "off_ok" / FIXTURE / "leak.txt").exists()
    assert not (feedback / "off_flood" / FIXTURE / "theory.html").exists()


# ---------------------------------------------------------------- unit tests (fast, no kernel)


def test_intake_problem_sees_every_unsafe_kind_before_opening(tmp_path):
    import socket

    from solutions_lib.course.intake import folder_problem, intake_problem, scan_folder

    (tmp_path / "ok.ipynb").write_text("{}")
    os.symlink(tmp_path / "ok.ipynb", tmp_path / "link.ipynb")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.txt")
    os.mkfifo(tmp_path / "fifo.ipynb")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(3 * 2**20)
    (tmp_path / "sub").mkdir()
    os.mkfifo(tmp_path / "sub" / "deep.txt")
    try:
        assert intake_problem(tmp_path / "ok.ipynb") is None
        assert intake_problem(tmp_path / "missing.ipynb") is None
        assert intake_problem(tmp_path / "link.ipynb") == "is a symbolic link"
        assert intake_problem(tmp_path / "fifo.ipynb") == "is a FIFO (named pipe)"
        assert intake_problem(tmp_path / "sock") == "is a socket"
        assert intake_problem("/dev/null") == "is a device"
        assert intake_problem(tmp_path / "sub") == "is a folder, not a file"
        assert intake_problem(tmp_path / "big.bin", max_bytes=2**20) == "is 3.0 MB, over the 1 MB limit"
        assert intake_problem(tmp_path / "big.bin", max_bytes=0) is None
        found = scan_folder(str(tmp_path), 2**20)
        assert sorted(os.path.relpath(p, tmp_path) for p in found) == \
            ["big.bin", "dangling.txt", "fifo.ipynb", "link.ipynb", "sock", "sub/deep.txt"]
        # the submission folder itself, its student folder, its timestamp
        sub = tmp_path / "submitted" / "s" / "A"
        sub.mkdir(parents=True)
        assert folder_problem(sub) is None
        os.mkfifo(sub / "timestamp.txt")
        assert folder_problem(sub) == "timestamp.txt is a FIFO (named pipe)"
        os.symlink(sub, tmp_path / "submitted" / "s" / "B")
        assert folder_problem(tmp_path / "submitted" / "s" / "B").endswith("is a symbolic link")
    finally:
        sock.close()


def test_scratch_copy_holds_regular_files_only(tmp_path):
    from solutions_lib.course.sandbox import bwrap_command, copy_scratch, remove_tree

    src, dest = tmp_path / "real", tmp_path / "scratch"
    (src / "data").mkdir(parents=True)
    (src / "data" / "x.csv").write_text("1,2")
    (src / "notes.txt").write_text("n")
    (src / "exercises.ipynb").write_text("{}")
    os.symlink("/etc/passwd", src / "link.txt")
    os.mkfifo(src / "pipe")
    copy_scratch(str(src), str(dest))
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert got == ["data", "data/x.csv", "notes.txt"], got
    (dest / "data").chmod(0)  # what a kernel may leave behind
    remove_tree(str(dest))
    assert not dest.exists()
    cmd = bwrap_command(["python"], str(src), str(tmp_path), cpu_seconds=5, memory_bytes=2**30,
                        file_bytes=2**20, scratch=str(dest))
    assert "--fsize=1048576" in cmd
    i = cmd.index("--bind", cmd.index(str(tmp_path)) + 1)
    assert cmd[i:i + 3] == ["--bind", str(dest), str(src)]  # the scratch, at the real folder's path
    assert ["--bind", str(src), str(src)] not in [cmd[j:j + 3] for j in range(len(cmd))]


def _msg(kind: str, content: dict, parent: str = "p") -> dict:
    return {"msg_type": kind, "header": {"msg_type": kind}, "parent_header": {"msg_id": parent},
            "content": content}


def test_output_cap_keeps_the_cap_and_every_error():
    from solutions_lib.course.execute import CourseExecute, output_size

    ex = CourseExecute(output_cap_bytes=1000, cell_reserve_bytes=100)
    ex.reset_execution_trackers()
    ex.clear_before_next_output = False  # (set by nbclient when a cell starts)
    ex._kept_total, ex._kept_cell, ex._over, ex._cell_now = 0, {}, set(), None
    flood, later = [], []
    for _ in range(50):
        ex.output(flood, _msg("stream", {"name": "stdout", "text": "x" * 100}), None, 0)
    assert sum(len(o["text"]) for o in flood) == 1000 and ex._over == {0}
    # a later cell keeps its reserve (a check record, a test's message), and always its error
    ex.output(later, _msg("stream", {"name": "stdout", "text": "y" * 80}), None, 1)
    ex.output(later, _msg("stream", {"name": "stdout", "text": "y" * 80}), None, 1)
    ex.output(later, _msg("error", {"ename": "GradingError", "evalue": "e" * 10**6, "traceback": ["t" * 10**6]}),
              None, 1)
    assert [o["output_type"] for o in later] == ["stream", "stream", "error"]
    assert [len(o["text"]) for o in later[:2]] == [80, 20]  # the head of what did not fit
    assert len(later[2]["evalue"]) < 20_000 and sum(map(len, later[2]["traceback"])) < 20_000
    assert ex._over == {0, 1}
    cell = nbformat.v4.new_code_cell("print()")
    cell.outputs = later
    ex.on_cell_executed(cell=cell, cell_index=1, execute_reply={"content": {"status": "ok"}})
    assert cell.outputs[-1]["ename"] == "OutputTooLarge"
    assert output_size({"data": {"text/plain": "abc"}}) == len("text/plain") + 3
