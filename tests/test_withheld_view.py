"""The view of solutions_lib that grading kernels import (withheld_view.py): every withheld name
exists in the real package and is a stand-in in the view, the kit stays real, every module of
the view imports, and inside the sandbox the real sources are not there to read."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile

import pytest

from solutions_lib.course.withheld_view import WITHHELD, build_view, withheld_names
from solutions_lib.course.sandbox import DEFAULT_MEMORY_BYTES, _package_dir, bwrap_command, sandbox_available
from solutions_lib.withheld import Withheld, WithheldError


def test_every_withheld_name_is_a_real_reference():
    for name in withheld_names():
        module, _, attr = name.rpartition(".")
        assert callable(getattr(importlib.import_module(module), attr)), name


PROBE = """
import importlib, inspect, pkgutil, sys
import solutions_lib
from solutions_lib.withheld import Withheld
withheld = {withheld!r}
bad = []
for mod in sorted(withheld):
    m = importlib.import_module('solutions_lib.' + mod)
    for n in withheld[mod]:
        if type(getattr(m, n)) is not Withheld:
            bad.append(mod + '.' + n)
for info in pkgutil.walk_packages(solutions_lib.__path__, 'solutions_lib.'):
    if info.name.startswith('solutions_lib.course') or info.name.endswith('__main__'):
        continue
    importlib.import_module(info.name)
from solutions_lib.schedules import torch_lr_trace
from solutions_lib.dist import launch, CommCounter
assert inspect.isfunction(torch_lr_trace) and callable(launch)
print('BAD', bad)
print('FILE', solutions_lib.__file__)
"""


def test_view_withholds_the_answers_and_keeps_the_kit(tmp_path):
    view = build_view(tmp_path)
    src = (view / "schedules.py").read_text()
    assert "def step_decay" not in src and "def torch_lr_trace" in src
    assert not (view / "course").exists()
    p = subprocess.run([sys.executable, "-c", PROBE.format(withheld=dict(WITHHELD))], cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(view.parent)), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "BAD []" in p.stdout and str(view) in p.stdout, p.stdout


def test_withheld_values_refuse_to_be_used():
    w = Withheld("solutions_lib.schedules.wsd")(1, 2.0)
    for use in (float, int, bool, len, list):
        with pytest.raises(WithheldError, match="withheld while grading"):
            use(w)
    assert type(w + 1) is Withheld and type(w[0]) is Withheld and f"{w:.3g}" == "<withheld>"
    a, b = Withheld("solutions_lib.optim.clip_grad_norm")([1.0], 1.0)
    assert type(a) is Withheld and type(b) is Withheld


_ok, _why = sandbox_available()


@pytest.mark.skipif(not _ok, reason=_why or "sandbox unavailable")
def test_inside_the_sandbox_the_real_sources_are_not_there(tmp_path):
    view = build_view(tmp_path / "views")
    work = tempfile.mkdtemp(dir=tmp_path)
    code = ("import solutions_lib.schedules as s, pathlib; "
            "print(type(s.step_decay).__name__, 'def step_decay' in pathlib.Path(s.__file__).read_text(), s.__file__)")
    cmd = bwrap_command([sys.executable, "-c", code], work, work, cpu_seconds=60, memory_bytes=DEFAULT_MEMORY_BYTES,
                        view_binds=[(str(view), _package_dir())])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    kind, has_source, path = p.stdout.split()
    assert kind == "Withheld" and has_source == "False" and path.startswith(_package_dir())


def test_the_view_lives_in_a_private_folder(tmp_path, monkeypatch):
    """Issue 26: the shared view folder in /tmp was reused without an owner check; now it lives in
    `tas-<uid>` (0700), and a folder there that is not private is refused."""
    import os

    from solutions_lib.course import withheld_view as wv

    monkeypatch.setattr(wv.tempfile, "gettempdir", lambda: str(tmp_path))
    d = wv.private_temp()
    assert d.name == f"tas-{os.getuid()}" and oct(d.stat().st_mode & 0o777) == "0o700"
    os.chmod(d, 0o777)
    import pytest
    with pytest.raises(RuntimeError, match="not a private folder"):
        wv.private_temp()
    os.chmod(d, 0o700)
    (tmp_path / "elsewhere").mkdir()
    d.rmdir()
    d.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RuntimeError, match="not a private folder"):
        wv.private_temp()
