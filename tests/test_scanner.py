"""The submission scanner: every rule fires on a planted example, the solved course notebooks
(every source notebook's solutions, handed in against its release) give no finding."""
from __future__ import annotations

import json

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import solved_version
from solutions_lib.course.scanner import RULES, scan_file, scan_notebook, scan_source

from conftest import ROOT

PLANTED = {
    "ipython_hook": [
        "get_ipython().events.register('post_run_cell', lambda r: None)",
        "ip = get_ipython()\nip.input_transformers_cleanup.append(str.upper)",
        "get_ipython().ast_transformers.append(object())",
        "get_ipython().set_custom_exc((Exception,), lambda *a: None)",
        "from IPython import get_ipython as g\ng().run_cell = print",
        "%load_ext autoreload",
    ],
    "monkeypatch": [
        "import numpy as np\nnp.allclose = lambda *a, **k: True",
        "import math\nmath.isclose = lambda *a, **k: True",
        "import torch\ntorch.Tensor.__eq__ = lambda a, b: True",
        "import solutions_lib.grading as g\ng.expect_close = lambda *a, **k: None",
        "import solutions_lib.grading\nsolutions_lib.grading.expect_close = print",
        "from solutions_lib import grading\nsetattr(grading, 'expect_close', print)",
        "import builtins",
        "__builtins__.abs = lambda x: 0",
        "import sys\nsys.modules['solutions_lib.grading'] = None",
        "def f(): pass\nf.__code__ = (lambda: 0).__code__",
        "import numpy\ndel numpy.isclose",
        "import numpy as np\nvars(np)['isclose'] = None",
    ],
    "process_exit": ["import sys\nsys.exit(0)", "import os\nos._exit(1)", "import os\nos.kill(os.getpid(), 9)",
                     "quit()", "exit()", "raise SystemExit", "import signal\nsignal.alarm(1)"],
    "file_access": [
        "open('/work/main/source/01_optimizers/exercises.ipynb').read()",
        "from pathlib import Path\nPath('..') / 'gradebook.db'",
        "import os\nos.chdir('/tmp')",
        "import shutil\nshutil.copy('release/x.ipynb', 'mine.ipynb')",
        "import shutil\nshutil.rmtree(some_global_folder)",
        "import sqlite3\nsqlite3.connect(db)",
        "db = 'gradebook.db'",
        "from pathlib import Path\nPath('source') / 'a'",
        "open(f'../{name}.ipynb')",
        "%cd ..",
    ],
    "subprocess": ["import subprocess\nsubprocess.run(['ls'])", "import os\nos.system('ls')",
                   "!cat /etc/passwd", "%%bash\nls", "from os import popen\npopen('ls')"],
    "network": ["import socket", "import urllib.request", "import requests", "from http import client"],
    "tracing": ["import sys\nsys.settrace(lambda *a: None)", "import sys\nsys.setprofile(print)",
                "import inspect\nexpected = inspect.currentframe().f_back.f_locals",
                "import sys\nsys._getframe(1)", "import gc\ngc.get_objects()"],
    "dynamic_code": ["exec('x = 1')", "eval('1 + 1')", "__import__('o' + 's')", "import ctypes"],
}


@pytest.mark.parametrize("rule,src", [(r, s) for r, srcs in PLANTED.items() for s in srcs])
def test_every_rule_fires_on_a_planted_example(rule, src):
    found = scan_source(src, "answer")
    assert rule in {f.rule for f in found}, (src, found)
    f = next(f for f in found if f.rule == rule)
    assert f.cell == "answer" and f.line >= 1 and f.snippet


def test_unparseable_cells_use_the_regex_fallback():
    found = scan_source("def f(:\n    get_ipython().events.register('x', f)\nimport os; os._exit(1", "bad")
    assert {"ipython_hook", "process_exit"} <= {f.rule for f in found}
    assert {f.line for f in found if f.rule == "ipython_hook"} == {2}


@pytest.mark.parametrize("src", [
    "import tempfile, shutil\ntmp = tempfile.mkdtemp()\nshutil.rmtree(tmp)",
    "import tempfile, os\nwith tempfile.TemporaryDirectory() as d:\n    open(os.path.join(d, 'x'), 'w')",
    "import shutil, os\ndef save(path):\n    tmp = str(path) + '.tmp'\n    shutil.rmtree(tmp, ignore_errors=True)\n    os.replace(tmp, path)",
    "import torch\ntorch.backends.cudnn.deterministic = True\nmodel.eval()\nx = torch.compile(f)",
    "import numpy as np\nrng = np.random.default_rng(0)\nnp.set_printoptions(precision=3)",
    "import torch.distributed as dist\nfrom solutions_lib.dist import launch\nprint('tokens/s', 3 / 2)",
    "open('results.json', 'w').write('{}')",
])
def test_legitimate_code_is_not_flagged(src):
    assert scan_source(src, "answer") == []


def _solved_pairs():
    for path in sorted((ROOT / "source").glob("*/*.ipynb")):
        rel_path = ROOT / "release" / path.parent.name / path.name
        yield path, nbs.read(path), nbformat.read(rel_path, as_version=4)


def test_solved_course_notebooks_give_no_findings():
    n = 0
    for path, src, rel in _solved_pairs():
        solved = solved_version(rel, src)
        assert scan_notebook(solved, rel) == [], path
        assert scan_notebook(solved) == [], path  # also without the release (every unlocked code cell)
        n += 1
    assert n >= 10


def test_edited_locked_cell_and_added_cell_are_flagged(tmp_path):
    path, src, rel = next(_solved_pairs())
    nb = solved_version(rel, src)
    test_cell = next(c for c in nb.cells if nbs.nbgrader_md(c).get("grade"))
    test_cell.source = "pass  # tests removed"
    nb.cells.append(nbformat.v4.new_code_cell("import os\nos._exit(0)"))
    found = scan_notebook(nb, rel)
    assert {(f.cell, f.rule) for f in found} == {
        (nbs.nbgrader_md(test_cell)["grade_id"], "edited_locked_cell"), (f"cell {len(nb.cells) - 1}", "process_exit")}
    # through a file in a course layout (release/ found next to submitted/)
    (tmp_path / "release" / path.parent.name).mkdir(parents=True)
    nbformat.write(rel, tmp_path / "release" / path.parent.name / path.name)
    sub = tmp_path / "submitted" / "s" / path.parent.name / path.name
    sub.parent.mkdir(parents=True)
    nbformat.write(nb, sub)
    assert {f.rule for f in scan_file(sub, root=tmp_path)} == {"edited_locked_cell", "process_exit"}
    bad = sub.with_name("broken.ipynb")
    bad.write_text('{"cells": [')
    assert [f.rule for f in scan_file(bad, root=tmp_path)] == ["unreadable"]


def test_rules_list_is_complete():
    assert set(PLANTED) | {"edited_locked_cell", "unreadable"} == set(RULES)


def test_cli(tmp_path, capsys):
    from solutions_lib.__main__ import main

    nb = nbs.new_notebook([nbs.answer("a", "### BEGIN SOLUTION\nimport os\nos.system('ls')\n### END SOLUTION")])
    nbformat.write(nb, tmp_path / "x.ipynb")
    assert main(["scan", str(tmp_path)]) == 1
    assert "subprocess" in capsys.readouterr().out
    assert main(["scan", "--json", str(tmp_path / "x.ipynb")]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [f["rule"] for f in out[str(tmp_path / "x.ipynb")]] == ["subprocess"]


def test_module_rebound_to_a_name_is_still_protected():
    found = scan_source("import solutions_lib\ng = solutions_lib.grading\ng.expect_close = print", "a")
    assert [(f.line, f.rule) for f in found] == [(3, "monkeypatch")]
