"""The test-cell helpers: messages a student can act on, and delegation guards that see
through aliases, wrappers, subclasses and swallowed exceptions."""
from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest
import torch

from solutions_lib.grading import (DelegationError, GradingError, expect_close, expect_equal, expect_own,
                                   expect_raises, expect_true, no_delegation)

adamw_mod = importlib.import_module("torch.optim.adamw")
adam_mod = importlib.import_module("torch.optim.adam")


def test_expect_close_passes_within_tolerance():
    expect_close(1.0 + 1e-9, 1.0, "x")
    expect_close(np.array([1.0, 2.0]), [1.0, 2.0], "v")
    expect_close(torch.tensor([3.0]), [3.0], "t")


@pytest.mark.parametrize("got,expected,needle", [
    (1.1, 1.0, "expected 1, got 1.1"),
    (None, 1.0, "forget to `return`"),
    ("abc", 1.0, "expected a number"),
    ([1.0, 2.0], [1.0, 2.0, 3.0], "expected shape (3,), got shape (2,)"),
    (float("nan"), 1.0, "non-finite"),
    ([1.0, 5.0], [1.0, 2.0], "at index (1,) expected 2, got 5"),
])
def test_expect_close_messages(got, expected, needle):
    with pytest.raises(GradingError) as e:
        expect_close(got, expected, "what", hint="the hint")
    assert needle in str(e.value) and str(e.value).startswith("what")


def test_expect_equal_true_raises():
    expect_equal((4096, 4096), (4096, 4096), "shape")
    expect_equal(np.int64(3), 3, "count")
    with pytest.raises(GradingError, match="expected 3, got 4"):
        expect_equal(4, 3, "count")
    with pytest.raises(GradingError, match="expected \\(1, 2\\), got \\[1, 2\\]"):
        expect_equal([1, 2], (1, 2), "shape")
    with pytest.raises(GradingError, match="nope"):
        expect_true(False, "nope")


def test_expect_raises():
    expect_raises(lambda: int("x"), ValueError, "parse")
    with pytest.raises(GradingError, match="but it returned 3"):
        expect_raises(lambda: 3, ValueError, "parse")
    with pytest.raises(GradingError, match="got ZeroDivisionError"):
        expect_raises(lambda: 1 / 0, ValueError, "parse")


def _torch_step():
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    torch.optim.AdamW([p], lr=0.1).step()
    return p


def test_no_delegation_catches_direct_aliased_and_swallowed_calls():
    with pytest.raises(DelegationError, match="torch.optim"):
        with no_delegation("AdamW", adam_mod, adamw_mod):
            _torch_step()
    alias = torch.optim.AdamW
    with pytest.raises(DelegationError):
        with no_delegation("AdamW", adam_mod, adamw_mod):
            try:
                p = torch.nn.Parameter(torch.ones(1))
                alias([p]).step()
                raise RuntimeError("hide it")
            except RuntimeError:
                pass


def test_no_delegation_catches_wrapped_function():
    def reference(x):
        return x + 1

    @functools.wraps(reference)
    def wrapper(x):
        return reference(x)

    with pytest.raises(DelegationError, match="reference"):
        with no_delegation("f", reference):
            wrapper(1)


def test_no_delegation_lets_own_code_run():
    with no_delegation("AdamW", adam_mod, adamw_mod, torch.optim.AdamW):
        x = torch.ones(3) * 2
        y = np.sqrt(np.arange(4.0))
    assert float(x.sum()) == 6.0 and y[-1] > 1


def test_expect_own():
    class Mine(torch.optim.Optimizer):
        pass

    expect_own(Mine, "Lamb", torch.optim.AdamW)
    with pytest.raises(DelegationError, match="is torch.optim"):
        expect_own(torch.optim.AdamW, "Lamb", torch.optim.AdamW)

    class Sub(torch.optim.AdamW):
        pass

    with pytest.raises(DelegationError, match="subclass"):
        expect_own(Sub, "Lamb", torch.optim.AdamW)


def test_no_delegation_does_not_blame_a_shared_decorator():
    # Every torch optimizer's step() runs the same `_use_grad` wrapper: using AdamW is not SGD.
    w = torch.nn.Parameter(torch.ones(3))
    w.grad = torch.ones(3)
    with no_delegation("sgd by hand", torch.optim.SGD):
        torch.optim.AdamW([w], lr=0.1).step()
    with pytest.raises(DelegationError, match="SGD"):
        with no_delegation("sgd by hand", torch.optim.SGD):
            torch.optim.SGD([w], lr=0.1).step()


def test_answers_names_a_missing_answer_cell():
    from solutions_lib.grading import answers

    ns = {"answers": answers, "f": len}
    exec("got = answers('f')", ns)
    assert ns["got"] is len
    with pytest.raises(AssertionError, match="`g` is not defined yet: run the answer cell above first"):
        exec("answers('f', 'g')", ns)
    with pytest.raises(ValueError, match="identifiers"):
        answers("not a name")


def test_no_delegation_accepts_an_autograd_function_class():
    """An autograd.Function subclass as a forbidden item: its methods are watched, and the class
    dict's cycle (_backward_cls -> the Function) does not recurse forever."""
    import torch
    from solutions_lib.grading import DelegationError, no_delegation

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return 2 * x

        @staticmethod
        def backward(ctx, g):
            return 2 * g

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(DelegationError):
        with no_delegation("double", Double):
            Double.apply(x)
    with no_delegation("double", Double):
        (2 * x).sum()
