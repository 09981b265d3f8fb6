"""Grader-side test cells (solutions_lib/course/grader_side.py, solutions_lib/_remote.py): the
grader runs a test cell itself and reaches the student's kernel only through proxies that bring
back plain data. Here against a real Jupyter kernel, without nbgrader (test_integrity.py and
test_grading_contract.py grade whole classes with stock autograde)."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from solutions_lib import _remote as R
from solutions_lib.course.grader_side import GraderSideCells, eligible, loaded_names, stored_names
from solutions_lib.course.remote_kernel import CellTimeoutError, KernelDied

STUDENT = '''
import numpy as np, torch, collections, time, os
from solutions_lib import grading as _g
def f(x, y=1):
    print("in f", x)
    if x < 0:
        raise ValueError("negative x")
    return x * 2 + y
class Opt:
    def __init__(self, params, lr):
        self.params, self.lr = list(params), lr
    def step(self):
        with torch.no_grad():
            for p in self.params:
                p -= self.lr * p.grad
def same(x):
    return x
def counts(words):
    return collections.Counter(words)
def draw(gen, n):
    return torch.randn(n, generator=gen)
def softmax_rows(x):
    return torch.softmax(torch.as_tensor(x), dim=1).numpy()
def steps_from_fraction(frac, n):
    return -1
def warm(n):
    return steps_from_fraction(0.1, n) * 2
def slow():
    time.sleep(30)
def dies():
    os._exit(3)
def train(model, batches, lr):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in batches:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        opt.step()
def weights(model):
    return [p for n, p in model.named_parameters() if n.endswith("weight")]
K = 3.5
'''


@pytest.fixture(scope="module")
def kernel():
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", extra_arguments=["--HistoryManager.hist_file=:memory:"])
    kc.execute_interactive(STUDENT, timeout=60)
    yield km
    kc.stop_channels()
    km.shutdown_kernel(now=True)


@pytest.fixture
def cells(kernel, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    c = GraderSideCells(kernel.get_connection_info(session=False), timeout=20)
    yield c
    c.close()


def run(cells, src):
    outs, records = cells.run(src)
    errors = [(o["ename"], o["evalue"]) for o in outs if o["output_type"] == "error"]
    text = "".join(o.get("text", "") for o in outs if o["output_type"] == "stream")
    return records, errors, text


def test_values_exceptions_and_prints_cross_as_plain_data(cells):
    records, errors, text = run(cells, (
        "from solutions_lib.grading import expect_close, expect_raises, expect_accepts, expect_equal\n"
        "expect_close(f(2), 5.0, 'f(2)')\n"
        "expect_raises(lambda: f(-1), ValueError, 'f(-1)')\n"
        "expect_accepts(lambda: f(1), 'f(1)')\n"
        "expect_close(K, 3.5, 'a constant of the kernel')\n"
        "c = counts(['a', 'b', 'a'])\n"
        "expect_equal(isinstance(c, dict) and c['a'], 2, 'a Counter comes back as a dict')\n"))
    assert errors == []
    assert [r["kind"] for r in records] == ["close", "raises", "accepts", "close", "equal"]
    assert "in f 2" in text and "in f -1" in text          # the student's prints, in order


def test_a_failing_check_fails_in_the_grader(cells):
    records, errors, _ = run(cells, "from solutions_lib.grading import expect_close\nexpect_close(f(2), 6.0, 'f(2)')\n")
    assert errors and errors[0][0] == "GradingError" and "expected 6" in errors[0][1]
    _, errors, _ = run(cells, "x = not_defined_anywhere(1)\n")
    assert errors[0][0] == "NameError"


def test_mirrored_tensors_arrays_and_generators_keep_their_identity(cells):
    records, errors, text = run(cells, (
        "import numpy as np, torch\n"
        "w = torch.tensor([1.0, 2.0], requires_grad=True)\n"
        "o = Opt([w], lr=0.1)\n"
        "w.grad = torch.tensor([1.0, 1.0])\n"
        "o.step()\n"                                     # the kernel's optimizer steps the grader's w
        "print('w', [round(v, 4) for v in w.detach().tolist()])\n"
        "a = np.arange(3.0)\n"
        "print('same', same(a) is a, same([a])[0] is a)\n"
        "gen = torch.Generator().manual_seed(3)\n"
        "x1 = draw(gen, 3); x2 = torch.randn(2, generator=gen)\n"   # the generator's state came back
        "ref = torch.Generator().manual_seed(3)\n"
        "print('gen', torch.equal(x1, torch.randn(3, generator=ref)), torch.equal(x2, torch.randn(2, generator=ref)))\n"))
    assert errors == []
    assert "w [0.9, 1.9]" in text and "same True True" in text and "gen True True" in text


def test_a_model_the_test_builds_is_trained_in_the_kernel(cells):
    """torch's and the kit's modules travel by state, their parameters mirrored: the student's
    training in the kernel moves the grader's parameters, and the parameters it returns are the
    grader's own objects."""
    _, errors, text = run(cells, (
        "import copy, torch\n"
        "from solutions_lib import debugging as kit\n"
        "torch.manual_seed(1)\n"
        "m = kit.TinyLM(vocab=16, hidden=16)\n"
        "data = kit.synthetic_tokens(8, 9, vocab=16, seed=5)\n"
        "bs = [(data[4 * s:4 * s + 4, :-1], data[4 * s:4 * s + 4, 1:]) for s in range(2)]\n"
        "m2 = copy.deepcopy(m)\n"
        "train(m, bs, 0.1)\n"
        "opt = torch.optim.SGD(m2.parameters(), lr=0.1)\n"
        "for x, y in bs:\n"
        "    opt.zero_grad()\n"
        "    torch.nn.functional.cross_entropy(m2(x).flatten(0, 1), y.flatten()).backward()\n"
        "    opt.step()\n"
        "print('trained', all(torch.equal(a, b) for a, b in zip(m.parameters(), m2.parameters())))\n"
        "ids = {id(p) for p in m.parameters()}\n"
        "print('same objects', all(id(p) in ids for p in weights(m)), len(weights(m)) > 0)\n"))
    assert errors == [] and "trained True" in text and "same objects True True" in text
    _, errors, _ = run(cells, "import torch\nclass Mine(torch.nn.Module):\n    pass\nweights(Mine())\n")
    assert errors and "cannot be sent" in errors[0][1]     # a class the test defines stays in the grader


def test_own_work_guards_run_in_the_kernel(cells):
    records, errors, _ = run(cells, (
        "import torch\n"
        "from solutions_lib.grading import no_delegation, expect_own\n"
        "expect_own(f, 'f', torch.softmax)\n"
        "with no_delegation('softmax_rows', torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax):\n"
        "    y = softmax_rows([[0.0, 0.0]])\n"))
    assert errors and errors[0][0] == "DelegationError" and "torch" in errors[0][1]
    assert [r["kind"] for r in records] == ["own_work"]


def test_upstream_swaps_reach_the_kernel(cells):
    _, errors, text = run(cells, (
        "from solutions_lib import upstream\n"
        "with upstream.swapped(globals(), steps_from_fraction=upstream.steps_from_fraction):\n"
        "    print('in', warm(100))\n"
        "print('out', warm(100))\n"))
    assert errors == [] and "in 20" in text and "out -2" in text


def test_a_withheld_value_is_refused_at_the_kernels_end(cells, kernel):
    from jupyter_client.blocking import BlockingKernelClient
    kc = BlockingKernelClient()
    kc.load_connection_info(kernel.get_connection_info())
    kc.start_channels()
    kc.execute_interactive("from solutions_lib.withheld import Withheld\ndef cheat(*a):\n    return Withheld('x.y')\n",
                           timeout=30)
    kc.stop_channels()
    _, errors, _ = run(cells, "r = cheat(1)\n")
    assert errors and errors[0][0] == "GradingError" and "withheld" in errors[0][1]


def test_a_slow_answer_times_out_and_the_kernel_stays_usable(kernel, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    c = GraderSideCells(kernel.get_connection_info(session=False), timeout=2)
    try:
        _, errors, _ = run(c, "slow()\n")
        assert errors and errors[0][0] == "CellTimeoutError"
        _, errors, text = run(c, "print(f(1))\n")
        assert errors == [] and "3" in text
    finally:
        c.close()


def test_a_dead_kernel_fails_the_cell_with_a_reason(monkeypatch):
    from jupyter_client.manager import start_new_kernel

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    km, kc = start_new_kernel(kernel_name="python3")
    kc.execute_interactive(STUDENT, timeout=60)
    c = GraderSideCells(km.get_connection_info(session=False), timeout=30)
    try:
        _, errors, _ = run(c, "dies()\n")
        assert errors and errors[0][0] == "KernelDied" and "died" in errors[0][1]
    finally:
        c.close()
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert issubclass(KernelDied, RuntimeError) and issubclass(CellTimeoutError, TimeoutError)


def test_the_kernel_can_only_send_data_and_handles():
    from solutions_lib.course.remote_kernel import RemoteKernel

    k = RemoteKernel.__new__(RemoteKernel)
    k.handles, k.mirrors = {}, {}
    with pytest.raises(R.RemoteDataError):
        k.decode({"t": "qualname", "module": "os", "qualname": "system"})   # no grader object by name
    with pytest.raises(R.RemoteDataError):
        k.decode({"t": "module", "name": "subprocess"})                      # only the listed modules
    assert k.decode({"t": "module", "name": "numpy.linalg"}) is np.linalg
    with pytest.raises(R.RemoteDataError):
        k.decode({"t": "ndarray", "p": {"dtype": "|O", "shape": [1], "data": ""}})   # no object arrays


@pytest.mark.parametrize("value", [
    None, True, 3, 2 ** 80, -0.0, float("inf"), 1.5 + 2j, "s", b"\x00b", [1, (2.5, "x")], {"a": [1], 2: None},
    {1, 2}, frozenset({3}), slice(1, None, 2), range(2, 9, 3), np.arange(6.0).reshape(2, 3), np.float32(1.25),
    np.int64(7), np.dtype("float16"), torch.arange(4, dtype=torch.bfloat16), torch.Size([2, 3]), torch.float8_e4m3fn,
    torch.zeros(0, 3)])
def test_plain_data_round_trips_exactly(value):
    back = R.decode(R.encode(value, handle=lambda x: pytest.fail(f"{x!r} is plain data")))
    assert type(back) is type(value)
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    elif isinstance(value, torch.Tensor):
        assert back.dtype == value.dtype and torch.equal(back, value)
    elif isinstance(value, float) and value == 0:
        assert str(back) == str(value)
    else:
        assert back == value


def test_which_cells_may_run_grader_side():
    assert eligible("from solutions_lib.grading import expect_close\nexpect_close(f(1), 2, 'f')")
    assert eligible("with swapped(globals(), a=upstream.a):\n    g()")
    for beside in ("rec = TensorOpRecorder()", "launch_graded(check, 2)", "h = m.register_forward_hook(fn)",
                   "t0 = time.perf_counter()", "import solutions_lib.probes_attention as P", "g = globals()",
                   "sys.settrace(fn)", "inspect.signature(f)", "import solutions_lib.grading as G\nG.no_delegation('x')"):
        assert not eligible(beside), beside
    assert loaded_names("x = f(y)\ndef g():\n    return h(z)\n") == ["f", "y", "h", "z"]
    assert stored_names("import numpy as np\nx, y = 1, 2\nfor i in r: pass\ndef g(): pass") >= {"np", "x", "y", "i", "g"}
    assert os.environ.get("TAS_GRADER_SIDE", "on") in ("on", "off")


def test_an_argparse_exit_is_an_exception_of_the_cell(cells, kernel):
    from jupyter_client.blocking import BlockingKernelClient
    kc = BlockingKernelClient()
    kc.load_connection_info(kernel.get_connection_info())
    kc.start_channels()
    kc.execute_interactive("import argparse\ndef parse(argv):\n    p = argparse.ArgumentParser()\n"
                           "    p.add_argument('--amp', choices=('none', 'bf16'))\n    return vars(p.parse_args(argv))\n",
                           timeout=30)
    kc.stop_channels()
    records, errors, _ = run(cells, "from solutions_lib.grading import expect_raises\n"
                                    "expect_raises(lambda: parse(['--amp', 'fp8']), SystemExit, 'a bad choice')\n"
                                    "parse(['--amp', 'fp8'])\n")
    assert [r["kind"] for r in records] == ["raises"]
    assert errors and errors[0][0] == "SystemExit"      # the cell's error; the grader did not exit


def test_a_seed_the_test_sets_reaches_the_students_code(cells, kernel):
    from jupyter_client.blocking import BlockingKernelClient
    kc = BlockingKernelClient()
    kc.load_connection_info(kernel.get_connection_info())
    kc.start_channels()
    kc.execute_interactive("def init(n):\n    return torch.randn(n)\ndef npinit(n):\n    return np.random.rand(n)\n", timeout=30)
    kc.stop_channels()
    _, errors, text = run(cells, "import torch, numpy as np\n"
                                 "torch.manual_seed(5); a = init(3); torch.manual_seed(5); b = torch.randn(3)\n"
                                 "np.random.seed(7); c = npinit(2); np.random.seed(7); d = np.random.rand(2)\n"
                                 "print('seeded', torch.equal(a, b), bool((c == d).all()))\n")
    assert errors == [] and "seeded True True" in text
