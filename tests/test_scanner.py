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
        # inside a cell magic that runs Python, an exec'd string, IPython's own entry points
        "%%capture out\nget_ipython().events.register('post_run_cell', f)",
        "%%foo\nwhatever",  # an unknown (custom) cell magic hides its body
        "ip = get_ipython()\nip.run_line_magic('load_ext', 'x')",
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
        # indirect references: dynamic imports, sys.modules, vars/__dict__/globals(), aliases
        'g = __import__("solutions_lib.grading", fromlist=["x"])\nsetattr(g, "expect_close", f)',
        'import solutions_lib.grading as g2\nvars(g2)["expect_close"] = f',
        'import sys\nsys.modules["solutions_lib.grading"].__dict__.update(expect_close=f)',
        'import importlib\ng = importlib.import_module("solutions_lib.grading")\ng.expect_close = f',
        'import sys\nm = sys.modules\nm["solutions_lib.grading"].expect_close = f',
        'import sys\nsys.modules.get("solutions_lib.grading").expect_close = f',
        'b = __import__("builtins")\nb.abs = f',
        'globals()["np"] = fake',
        'globals().update(np=fake)',
        'import numpy as np\nm = np\nm.allclose = f',
        'import numpy as np\na, b = np, 1\na.allclose = f',
        'import numpy as np\n(m := np).allclose = f',
        'import numpy as np\nd = vars(np)\nd["allclose"] = f',
        'import numpy as np\nobject.__setattr__(np, "allclose", f)',
        'import functools\nimport solutions_lib.grading as g\nfunctools.update_wrapper(g.expect_close, f)',
        'from solutions_lib.grading import expect_close\nexpect_close.__code__ = g.__code__',
        'from solutions_lib.grading import expect_close\nexpect_close = lambda *a, **k: None',
        'from solutions_lib.grading import expect_close\ndef expect_close(*a, **k): pass',
        'import sys\nsys.displayhook = f',
        'import sys\nsys.excepthook = f',
        'import threading\nthreading.excepthook = f',
        'exec("import numpy as np; np.allclose = f")',
    ],
    "process_exit": ["import sys\nsys.exit(0)", "import os\nos._exit(1)", "import os\nos.kill(os.getpid(), 9)",
                     "quit()", "exit()", "raise SystemExit", "import signal\nsignal.alarm(1)",
                     "%%time\nimport os\nos._exit(0)", "%time import os; os._exit(0)",
                     "%%timeit -n1 -r1 import os; os._exit(0)\nx = 1", "\n\n  %%capture\n  raise SystemExit",
                     ";exec import os; os._exit(0)", "eval(compile('__import__(\"os\")._exit(0)', 'x', 'eval'))",
                     ">>> import os\n>>> os._exit(0)"],
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
        "%%writefile x.py\nprint(1)",
        "%run x.py",
        "run x.py",  # a one-line cell: IPython's automagic runs it as %run
        "ip = get_ipython()\nip.run_line_magic('run', 'x.py')",
    ],
    "subprocess": ["import subprocess\nsubprocess.run(['ls'])", "import os\nos.system('ls')",
                   "!cat /etc/passwd", "%%bash\nls", "from os import popen\npopen('ls')", "%%!\nls",
                   "%%python\nprint(1)", "%%script python3\nprint(1)", "%%script bash\nls", "files = !ls",
                   "%pip install x", "pip install x", "get_ipython().system('ls')",
                   "get_ipython().run_cell_magic('bash', '', 'ls')", "%%python3\nimport os\nos.system('ls')"],
    "network": ["import socket", "import urllib.request", "import requests", "from http import client",
                "%%script python3\nimport socket", "%%writefile x.py\nimport socket", "%time import socket",
                "x = %timeit -o import socket", "get_ipython().run_cell('import socket')",
                "exec('import ' + 'socket')", "/exec 'import socket'", "__import__('socket')"],
    "tracing": ["import sys\nsys.settrace(lambda *a: None)", "import sys\nsys.setprofile(print)",
                "import inspect\nexpected = inspect.currentframe().f_back.f_locals",
                "import sys\nsys._getframe(1)", "import gc\ngc.get_objects()", "import gc\ngc.get_referrers(x)",
                "import inspect\nf = inspect.currentframe()\nwhile f:\n    f = f.f_back",
                "x = getattr(frame, 'f_' + 'locals')", "g = expect_close.__globals__",
                "c = f.__code__.co_consts", "import traceback\nfor f, _ in traceback.walk_stack(None): pass"],
    "dynamic_code": ["exec('x = 1')", "eval('1 + 1')", "__import__('o' + 's')", "import ctypes",
                     "c = __import__('ctypes')", "import types\nf = types.FunctionType(code, {})",
                     "x = ().__class__.__base__.__subclasses__()",
                     "import solutions_lib.grading as g\nh = getattr(g, 'expect_' + 'close')",
                     "import solutions_lib.grading as g\nh = getattr(g, name)"],
    "background": ["import threading\nthreading.Thread(target=f, daemon=True).start()",
                   "from threading import Thread\nt = Thread(target=f)\nt.start()",
                   "import threading\nthreading.Timer(1, f).start()",
                   "import threading\ndef go():\n    threading.Thread(target=f).start()\ngo()",
                   "import threading\nclass T(threading.Thread):\n    pass",
                   "import signal\nsignal.signal(signal.SIGALRM, h)", "import signal\nsignal.setitimer(0, 0.01)",
                   "import atexit\natexit.register(f)", "import gc\ngc.callbacks.append(f)",
                   "import weakref\nweakref.finalize(obj, f)",
                   "from concurrent.futures import ThreadPoolExecutor\nThreadPoolExecutor().submit(f)"],
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
    "%matplotlib inline\n%time x = sum(range(10))\n%timeit -n 1 -r 1 y = 2",
    "%%time\nimport numpy as np\nz = np.ones(3)",
    "import threading\ndef save(x):\n    t = threading.Thread(target=print, args=(x,))\n    t.start()\n    t.join()",
    "from concurrent.futures import ThreadPoolExecutor\ndef run(fs):\n    with ThreadPoolExecutor(2) as ex:\n"
    "        return list(ex.map(lambda f: f(), fs))",
    "import numpy as np\ndef f(np=None):\n    np = 3\n    return np",  # a local, not the module
    "class Cfg:\n    torch = None",
    "import torch\nfor name in ['weight', 'bias']:\n    setattr(model, name, torch.nn.Parameter(torch.ones(1)))",
    "import torch\nact = getattr(model, 'relu')",
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


def _rebinding_notebook(answer_source, test_sources):
    setup = nbs.code("import numpy as np\nfrom solutions_lib.grading import expect_close", locked=True)
    cells = [setup, nbs.answer("a", "### BEGIN SOLUTION\n" + answer_source + "\n### END SOLUTION")]
    cells += [nbs.tests(f"t{i}", src, 1, ["X"]) for i, src in enumerate(test_sources)]
    return nbs.new_notebook(cells)


def test_a_students_variable_named_like_a_test_cells_own_alias_is_not_flagged():
    """A test cell that imports its module under a short alias rebinds the name when it runs, so
    a student's `ck = ...` or `ref = ...` changes nothing the course reads; `np` and
    `expect_close`, which test cells read from the setup cell, still count."""
    tests_ = ["import solutions_lib.checks_optim as ck\nimport solutions_lib.ref as ref\nexpect_close(np.sum(ck.x), ref.y)"]
    nb = _rebinding_notebook("ref = 3\nck = [1]\nfor ref in range(2):\n    pass\ndef ck():\n    pass", tests_)
    assert scan_notebook(nb, nb) == []
    nb = _rebinding_notebook("np = None\ndef expect_close(*a):\n    pass", tests_)
    assert [(f.line, f.rule) for f in scan_notebook(nb, nb)] == [(2, "monkeypatch"), (3, "monkeypatch")]


def test_a_name_a_later_test_cell_reads_from_an_earlier_one_is_still_protected():
    tests_ = ["import solutions_lib.checks_optim as ck\nexpect_close(ck.x, 1)", "ck.check(np)"]
    nb = _rebinding_notebook("ck = [1]", tests_)
    assert [(f.line, f.rule) for f in scan_notebook(nb, nb)] == [(2, "monkeypatch")]
    nb = _rebinding_notebook("import string as ck", tests_)
    assert [f.rule for f in scan_notebook(nb, nb)] == ["monkeypatch"]


# ---------------------------------------------------------------- hostile notebooks


def _nb(cells, major=4):
    return {"cells": cells, "metadata": {}, "nbformat": major, "nbformat_minor": 5}


def _code(src, md=None):
    return {"cell_type": "code", "source": src, "metadata": md if md is not None else {}, "outputs": [],
            "execution_count": None, "id": "x"}


HOSTILE = {  # name: (file content, what the finding says)
    "plus800": (_nb([_code("x = " + "+".join(["1"] * 800))]), None),
    "plus5000": (_nb([_code("x = " + "+".join(["1"] * 5000))]), "nested too deeply"),
    "parens": (_nb([_code("x = " + "(" * 300 + "1" + ")" * 300)]), "nested too deeply"),
    "lists": (_nb([_code("x = " + "[" * 1000 + "]" * 1000)]), "nested too deeply"),
    "calls": (_nb([_code("x = a" + "()" * 20000)]), "nested too deeply"),
    "attrs": (_nb([_code("x = a" + ".b" * 20000)]), "nested too deeply"),
    "nots": (_nb([_code("x = " + "not " * 5000 + "1")]), "nested too deeply"),
    "ifs": (_nb([_code("".join("    " * i + "if x:\n" for i in range(99)) + "    " * 99 + "pass")]), None),
    "nul": (_nb([_code("x = 1\x00\nimport os")]), "NUL byte"),
    "surrogate": (_nb([_code("x = '\ud800'")]), "UnicodeEncodeError"),
    "int_source": (_nb([_code(123)]), "source is a number"),
    "list_of_ints": (_nb([_code([1, 2])]), "source is an array"),
    "no_source": (_nb([{"cell_type": "code", "metadata": {}}]), None),
    "cell_is_list": (_nb([[1, 2]]), "cell is an array"),
    "cell_is_null": (_nb([None]), "cell is null"),
    "cells_is_dict": ({"cells": {"a": 1}, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, "'cells' is an object"),
    "cell_type_int": (_nb([{"cell_type": 5, "source": "x", "metadata": {}}]), "cell_type is a number"),
    "metadata_list": (_nb([_code("x = 1", [1])]), "metadata is not an object"),
    "nbgrader_str": (_nb([_code("x = 1", {"nbgrader": "yes"})]), "nbgrader metadata is not an object"),
    "grade_id_dict": (_nb([_code("import os\nos._exit(0)", {"nbgrader": {"grade_id": {"a": 1}, "solution": True}})]),
                      None),
    "json_list": ([1, 2, 3], "not a notebook (an array)"),
    "json_str": ("hello", "not a notebook (a string)"),
    "json_dict": ({"a": 1}, "not a notebook"),
    "nbformat_3": ({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": [
        {"cell_type": "code", "input": "import os\nos._exit(0)", "language": "python", "outputs": []}]}]}, None),
    "nbformat_5": (_nb([_code("x = 1")], major=5), "nbformat 5 is not supported"),
    "nbformat_str": (_nb([_code("x = 1")], major="4"), "not a notebook"),
    "many_cells": (_nb([_code("x = 1") for _ in range(6000)]), "6000 cells"),
    "long_cell": (_nb([_code("x = '" + "a" * 300_000 + "'")]), "300006 characters"),
    "deep_json": ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    "empty": (b"", "not JSON"),
    "bom": (b"\xef\xbb\xbf" + json.dumps(_nb([_code("x = 1")])).encode(), "not JSON"),
    "latin1": (json.dumps(_nb([_code("x = 1")])).encode().replace(b"x = 1", b"x = \xff"), "not UTF-8"),
    "escapes": (_nb([_code("import os\nos._exit(0)  # \x1b[2J\u202e", {"nbgrader": {"grade_id": "a\nb\x1b[31m"}})]),
                None),
}


def _write(path, content):
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str) and content.startswith("["):
        path.write_text(content)
    else:
        path.write_text(json.dumps(content))


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_notebook_never_crashes_the_scan(tmp_path, name):
    content, says = HOSTILE[name]
    path = tmp_path / f"{name}.ipynb"
    _write(path, content)
    found = scan_file(path, root=tmp_path)
    cannot = [f for f in found if f.rule == "unreadable"]
    if says:
        assert cannot and all(f.snippet.startswith("cannot analyse: ") for f in cannot), found
        assert any(says in f.snippet for f in cannot), found
    else:
        assert not cannot, found
    for f in found:  # printable and encodable: no surrogates, no terminal escapes
        text = str(f)
        text.encode("utf-8")
        assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 or c == "\u202e" for c in text), text


def test_process_exits_are_found_in_odd_but_readable_notebooks(tmp_path):
    for name in ("grade_id_dict", "nbformat_3", "escapes"):
        _write(tmp_path / f"{name}.ipynb", HOSTILE[name][0])
        assert "process_exit" in {f.rule for f in scan_file(tmp_path / f"{name}.ipynb", root=tmp_path)}, name


def test_a_hostile_class_is_scanned_to_the_end(tmp_path, capsys):
    """Every hostile notebook of a class, plus links, a FIFO, a 100 MB cell: one finding each,
    and the honest student after them is still scanned."""
    import os

    from solutions_lib.course.scanner import main

    sub = tmp_path / "submitted"
    for name, (content, _) in HOSTILE.items():
        (sub / name / "a").mkdir(parents=True)
        _write(sub / name / "a" / "nb.ipynb", content)
    (sub / "huge" / "a").mkdir(parents=True)
    with open(sub / "huge" / "a" / "nb.ipynb", "w") as f:
        f.write('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code", '
                '"metadata": {}, "outputs": [], "source": "')
        for _ in range(100):
            f.write("x = 1\\n" * (2**20 // 7))
        f.write('"}]}')
    (sub / "fifo" / "a").mkdir(parents=True)
    os.mkfifo(sub / "fifo" / "a" / "nb.ipynb")
    (sub / "link" / "a").mkdir(parents=True)
    os.symlink("/dev/zero", sub / "link" / "a" / "nb.ipynb")
    os.symlink(sub, sub / "loop")  # a link to a folder is not followed
    (sub / "zz_honest" / "a").mkdir(parents=True)
    nbformat.write(nbs.new_notebook([nbs.answer("q", "### BEGIN SOLUTION\nimport os\nos.system('ls')\n"
                                                     "### END SOLUTION")]), sub / "zz_honest" / "a" / "nb.ipynb")
    assert main([str(sub)], as_json=True) == 1
    out = json.loads(capsys.readouterr().out)
    assert len(out) == len(HOSTILE) + 4
    for student in ("huge", "fifo", "link"):
        (f,) = out[str(sub / student / "a" / "nb.ipynb")]
        assert f["rule"] == "unreadable" and f["snippet"].startswith("cannot analyse: the file is"), f
    assert [f["rule"] for f in out[str(sub / "zz_honest" / "a" / "nb.ipynb")]] == ["subprocess"]


def test_the_work_per_notebook_is_bounded(monkeypatch, tmp_path):
    import time

    from solutions_lib.course import scanner

    # many cells near the size limit: the notebook's code budget stops the scan, with a finding
    monkeypatch.setattr(scanner, "MAX_CODE_CHARS", 400_000)
    nb = _nb([_code("x = [" + "1, " * 60_000 + "]") for _ in range(40)])
    _write(tmp_path / "big.ipynb", nb)
    t = time.monotonic()
    found = scan_file(tmp_path / "big.ipynb", root=tmp_path)
    assert time.monotonic() - t < scanner.SCAN_SECONDS
    assert [f.snippet for f in found if f.rule == "unreadable"] == [
        f"cannot analyse: more than {scanner.MAX_CODE_CHARS} characters of code; the rest of the notebook is not "
        "analysed"]
    # out of time: the findings so far are kept, the rest is reported as not analysed
    _write(tmp_path / "slow.ipynb", _nb([_code("import os\nos._exit(0)")] + [_code("x = 1\n" * 2000)] * 50))
    found = scan_file(tmp_path / "slow.ipynb", root=tmp_path, seconds=0.05)
    assert found[0].rule == "process_exit"
    assert found[-1].rule == "unreadable" and "the scan took over" in found[-1].snippet
