"""Sandboxed grading (prototype, solutions_lib/course/sandbox.py): a class of hostile submissions
graded by one stock `nbgrader autograde` batch with the sandbox enabled in nbgrader_config.py.
Every attack fails inside the kernel, its cell errors, the other cells score as they deserve,
and a solved submission gets full marks. Skipped where bubblewrap cannot run."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, read_results, solved_version
from solutions_lib.course.cgroups import cgroup_support
from solutions_lib.course.sandbox import sandbox_available

from conftest import FIXTURE

_ok, _why = sandbox_available()
pytestmark = [pytest.mark.nbgrader, pytest.mark.skipif(not _ok, reason=_why or "sandbox unavailable")]

CPU_S = 120
MEM = 3 * 2**30
GROUP_MEM = 2**30
TASKS = 64
_cg_ok, _cg_why = cgroup_support()


def _answer(nb, gid):
    return next(c for c in nb.cells if nbs.nbgrader_md(c).get("grade_id") == gid)


def _attacks(root: Path, port: int) -> dict[str, tuple[str, str]]:
    """student -> (code prepended to the `square` answer cell, expected error name)."""
    r = str(root)
    return {
        "read_source": (f"print(open({r!r} + '/source/{FIXTURE}/exercises.ipynb').read()[:100])", "FileNotFoundError"),
        "read_gradebook": (f"import sqlite3\nsqlite3.connect('file:' + {r!r} + '/gradebook.db?mode=ro', uri=True)"
                           ".execute('select * from grade').fetchall()", "OperationalError"),
        # the autograded copy in the kernel's own folder already holds the hidden tests
        "read_own_copy": ("print(open('exercises.ipynb').read()[:100])", "PermissionError"),
        "other_students": (f"import os\nprint(os.listdir({r!r} + '/submitted'), os.listdir({r!r} + '/source'))",
                           "FileNotFoundError"),
        "write_root": ("open('../../../pwned.txt', 'w').write('x')", "OSError"),
        "internet": ("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)", "OSError"),
        "localhost": (f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)",
                      "ConnectionRefusedError"),
        "memory": (f"b = bytearray({MEM + 2**30})", "MemoryError"),
        # nbgrader interrupts the cell at the timeout (by a control-channel message here)
        "spin": ("while True:\n    pass", "KeyboardInterrupt"),
    }


def _cgroup_attacks() -> dict[str, tuple[str, str]]:
    """Attacks that the per-process limits alone would let through: forking."""
    return {
        # each child gets its own RLIMIT_NPROC-free, RLIMIT_AS-sized budget; pids.max stops them
        "fork_bomb": ("import os, time\nfor _ in range(4 * %d):\n    if os.fork() == 0:\n"
                      "        time.sleep(30)\n        os._exit(0)" % TASKS, "BlockingIOError"),
        # 3 x 500 MB resident at once, each well under RLIMIT_AS, over the group's 1 GiB: the
        # OOM killer stops a child (status 9)
        "fork_memory": ("import os, time, numpy as np\npids = []\nfor _ in range(3):\n"
                        "    pid = os.fork()\n    if pid == 0:\n        a = np.ones(500 * 2**20 // 8)\n"
                        "        time.sleep(1)\n        os._exit(0)\n    pids.append(pid)\n"
                        "status = [os.waitpid(p, 0)[1] for p in pids]\n"
                        "assert all(s == 0 for s in status), f'children killed: {status}'", "AssertionError"),
    }


PROBE = ("import os, resource\n"
         f"assert resource.getrlimit(resource.RLIMIT_CPU)[0] == {CPU_S}, resource.getrlimit(resource.RLIMIT_CPU)\n"
         f"assert resource.getrlimit(resource.RLIMIT_AS)[0] == {MEM}\n"
         "assert 'TAS_DB_URL' not in os.environ, 'grader environment leaked'\n"
         "assert os.getcwd().endswith('/autograded/probe/00_fixture'), os.getcwd()\n"
         "open('scratch.txt', 'w').write('the own folder is writable')\n")


def test_hostile_class_is_contained_and_graded(fixture_course, monkeypatch):
    root = fixture_course
    with open(root / "nbgrader_config.py", "a") as f:
        f.write("from solutions_lib.course.sandbox import enable_sandbox\n"
                f"enable_sandbox(c, c.CourseDirectory.root, cpu_seconds={CPU_S}, memory_bytes={MEM}, "
                f"group_memory_bytes={GROUP_MEM}, max_tasks={TASKS})\n")
    course = Course(root, cell_timeout=8)
    course.generate(FIXTURE)
    rel = {n: course.release_notebook(FIXTURE, n) for n in ("exercises.ipynb", "theory.ipynb")}
    solved = {n: solved_version(rel[n], nbs.read(root / "source" / FIXTURE / n)) for n in rel}

    def prepend(code):
        sub = {n: nbformat.from_dict(json.loads(json.dumps(nb))) for n, nb in solved.items()}
        cell = _answer(sub["exercises.ipynb"], "square")
        cell.source = code + "\n" + cell.source
        return sub

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    attacks = _attacks(root, listener.getsockname()[1])
    if _cg_ok:  # elsewhere only the per-process limits apply (docs/limitations.md)
        attacks.update(_cgroup_attacks())
    course.submit("good", FIXTURE, solved)
    course.submit("probe", FIXTURE, prepend(PROBE))
    for student, (code, _) in attacks.items():
        course.submit(student, FIXTURE, prepend(code))

    env = dict(os.environ, TAS_DB_URL="postgresql://grader:s3cret@db/gradebook")
    try:
        proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", FIXTURE, "--force"],
                              cwd=root, capture_output=True, text=True, timeout=300, env=env)
    finally:
        listener.close()
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]

    def auto(student):
        return {n.name: (n.status, n.score("tests")) for n in read_results(root, FIXTURE, student).notebooks}

    full = {"exercises.ipynb": ("graded", 5.0), "theory.ipynb": ("graded", 1.0)}
    assert auto("good") == full, log[-3000:]
    assert auto("probe") == full, read_results(root, FIXTURE, "probe").notebooks[0].cells
    # the kernel wrote into a scratch copy of its folder, deleted with it (issue 14)
    assert not (root / "autograded" / "probe" / FIXTURE / "scratch.txt").exists()
    failed_attack = {"exercises.ipynb": ("graded", 3.0), "theory.ipynb": ("graded", 1.0)}
    for student, (_, ename) in attacks.items():
        assert auto(student) == failed_attack, (student, auto(student))
        graded = nbformat.read(root / "autograded" / student / FIXTURE / "exercises.ipynb", as_version=4)
        errors = [o for o in _answer(graded, "square").outputs if o.get("output_type") == "error"]
        assert errors, f"{student}: the attack did not fail"
        if ename == "OSError":  # read-only file system, network unreachable
            assert errors[0].ename == "OSError" and any(w in errors[0].evalue for w in ("Read-only", "unreachable")), \
                (student, errors[0].ename, errors[0].evalue)
        else:
            assert ename in {e.ename for e in errors}, (student, [(e.ename, e.evalue) for e in errors])
    assert not (root / "pwned.txt").exists() and not (root / "autograded" / "pwned.txt").exists()


def test_tas_sandbox_switches_the_course_config(monkeypatch, tmp_path):
    from traitlets.config import Config

    from solutions_lib.course.config import apply_course_config
    from solutions_lib.course.sandbox import get_sandbox_execute

    def preprocessors(mode):
        monkeypatch.setenv("TAS_SANDBOX", mode)
        c = Config()
        apply_course_config(c, str(tmp_path))
        return list(c.Autograde.autograde_preprocessors) if "autograde_preprocessors" in c.Autograde else []

    assert get_sandbox_execute() in preprocessors("required")
    assert get_sandbox_execute() in preprocessors("on")
    from nbgrader.preprocessors import Execute

    from solutions_lib.course.execute import CourseExecute
    off = preprocessors("off")  # the output cap applies without the sandbox too
    assert CourseExecute in off and Execute not in off and get_sandbox_execute() not in off
    assert issubclass(get_sandbox_execute(), CourseExecute)
    with pytest.raises(ValueError, match="TAS_SANDBOX must be"):
        preprocessors("yes")


@pytest.mark.skipif(not _cg_ok, reason=_cg_why)
def test_kernel_cgroup_limits_what_it_forks_and_is_removed():
    from solutions_lib.course.cgroups import KernelCgroup

    group = KernelCgroup.create(memory_bytes=2**30, max_tasks=16)
    folders = list(group.folders)
    code = ("import os, time\nn = 0\ntry:\n    for _ in range(64):\n        if os.fork() == 0:\n"
            "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)")
    try:
        out = subprocess.run(group.wrap([sys.executable, "-c", code]), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert 0 < int(out.stdout) < 16, out.stdout
    finally:
        group.remove()
    assert not any(os.path.exists(d) for d in folders)
    with pytest.raises(ValueError, match="positive"):
        KernelCgroup.create(memory_bytes=0, max_tasks=16)


def test_stale_kernel_cgroups_are_swept(tmp_path):
    """A grader killed before its clean-up leaves an empty cgroup; the next kernel's start
    removes it once it is old, never a young one (another grader's kernel may be starting) nor
    one that still holds a process (rmdir fails; a file stands in for it here)."""
    import time as _time

    from solutions_lib.course.cgroups import PREFIX, STALE_AFTER_S, sweep_stale

    for name in ("old", "young", "busy"):
        (tmp_path / (PREFIX + name)).mkdir()
    (tmp_path / "someone-else").mkdir()
    (tmp_path / (PREFIX + "busy") / "cgroup.procs").write_text("123")
    past = _time.time() - 2 * STALE_AFTER_S
    for name in ("old", "busy"):
        os.utime(tmp_path / (PREFIX + name), (past, past))
    os.utime(tmp_path / "someone-else", (past, past))
    assert sweep_stale(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([PREFIX + "busy", PREFIX + "young", "someone-else"])


def test_sandbox_command_says_what_applies():
    out = subprocess.run([sys.executable, "-m", "solutions_lib", "sandbox"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "bubblewrap" in out.stdout and "per process: 1800 s CPU" in out.stdout
    assert ("cgroup v" in out.stdout) == _cg_ok
