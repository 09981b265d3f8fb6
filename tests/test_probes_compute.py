"""solutions_lib.probes_compute: the scripted machines that grade 06's timing harnesses.

A correct harness, written in several honest ways, reads the scripted time exactly; each classic
slip (no warm-up, one call per trial, operands made inside the timing, the warm-up step timed,
no backward, no optimizer step) reads something else by far more than the tests' 5%.
"""
from __future__ import annotations

import time

import pytest
import torch

from solutions_lib.probes_compute import ScriptedGemmMachine, ScriptedTrainingModel


def _doubling(m, n, k, min_time=0.01, trials=3):                     # the model answer's scheme
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.mm(a, b)
    best, repeats = float("inf"), 1
    for _ in range(trials):
        while True:
            start = time.perf_counter()
            for _ in range(repeats):
                torch.mm(a, b)
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
            repeats *= 2
        best = min(best, elapsed / repeats)
    return best


def _until_min_time(m, n, k, min_time=0.01, trials=3):                # correct, written differently: count calls
    a = torch.randn(m, k)
    b = torch.randn(k, n)
    _ = a @ b
    times = []
    for _ in range(trials):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < min_time:
            _ = a @ b
            calls += 1
        times.append((time.perf_counter() - start) / calls)
    return min(times)


def _ns_clock(m, n, k, min_time=0.01, trials=3):                      # correct: perf_counter_ns, torch.matmul
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.matmul(a, b)
    best = None
    for _ in range(trials):
        reps = 1
        while True:
            t0 = time.perf_counter_ns()
            for _ in range(reps):
                torch.matmul(a, b)
            dt = (time.perf_counter_ns() - t0) / 1e9
            if dt >= min_time:
                break
            reps *= 10
        best = dt / reps if best is None else min(best, dt / reps)
    return best


def _no_warmup(m, n, k, min_time=0.01, trials=3):
    a, b = torch.randn(m, k), torch.randn(k, n)
    best, repeats = float("inf"), 1
    for _ in range(trials):
        while True:
            start = time.perf_counter()
            for _ in range(repeats):
                torch.mm(a, b)
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
            repeats *= 2
        best = min(best, elapsed / repeats)
    return best


def _one_call(m, n, k, min_time=0.01, trials=3):
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(trials):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return best


def _operands_inside(m, n, k, min_time=0.01, trials=3):
    torch.mm(torch.randn(m, k), torch.randn(k, n))
    best, repeats = float("inf"), 1
    for _ in range(trials):
        while True:
            start = time.perf_counter()
            for _ in range(repeats):
                torch.mm(torch.randn(m, k), torch.randn(k, n))
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
            repeats *= 2
        best = min(best, elapsed / repeats)
    return best


def _run(fn, machine, *args, **kwargs):
    g = fn.__globals__
    saved = {k: g[k] for k in ("time", "torch")}
    g.update(machine.modules())
    try:
        return fn(*args, **kwargs)
    finally:
        g.update(saved)


@pytest.mark.parametrize("fn", [_doubling, _until_min_time, _ns_clock])
@pytest.mark.parametrize("trials,shape", [(1, (64, 64, 64)), (3, (96, 32, 128))])
def test_correct_harnesses_read_the_scripted_time(fn, trials, shape):
    m = ScriptedGemmMachine()
    got = _run(fn, m, *shape, min_time=0.05, trials=trials)
    assert got == pytest.approx(m.seconds_per_call(*shape), rel=0.05)


@pytest.mark.parametrize("fn", [_no_warmup, _one_call, _operands_inside])
def test_classic_slips_read_something_else(fn):
    m = ScriptedGemmMachine()
    got = _run(fn, m, 64, 64, 64, min_time=0.05, trials=1)
    assert not got == pytest.approx(m.seconds_per_call(64, 64, 64), rel=0.2)


def _tps(model, batch_size, seq_len, vocab, steps=3, warmup_steps=1, slip=None):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, vocab, (batch_size, seq_len + 1))

    def step():
        loss = torch.nn.functional.cross_entropy(model(data[:, :-1]).reshape(-1, vocab), data[:, 1:].reshape(-1))
        if slip == "forward_only":
            return
        model.zero_grad()
        loss.backward()
        if slip != "no_step":
            opt.step()

    if slip == "warmup_timed":
        start = time.perf_counter()
    for _ in range(warmup_steps):
        step()
    if slip != "warmup_timed":
        start = time.perf_counter()
    for _ in range(steps):
        step()
    return batch_size * seq_len * steps / (time.perf_counter() - start)


@pytest.mark.parametrize("slip", [None, "forward_only", "no_step", "warmup_timed"])
def test_training_throughput_on_the_scripted_model(slip):
    torch.manual_seed(0)
    model = ScriptedTrainingModel(16)
    g = _tps.__globals__
    saved = g["time"]
    g.update(model.modules())
    try:
        with model.timing():
            got = _tps(model, 2, 8, 16, steps=3, warmup_steps=1, slip=slip)
    finally:
        g["time"] = saved
    ok = got == pytest.approx(model.tokens_per_second(2, 8), rel=0.05)
    assert ok if slip is None else not ok


def test_the_step_hook_is_removed_and_ignores_other_optimizers():
    model = ScriptedTrainingModel(8)
    other = torch.nn.Linear(2, 2)
    with model.timing():
        before = model._clock.offset
        torch.optim.SGD(other.parameters(), lr=0.1).step()
        assert model._clock.offset == before
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.step()
    assert model._clock.offset == before
