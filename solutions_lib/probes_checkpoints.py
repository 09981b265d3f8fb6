"""Test machinery for assignment 08, part 4 (an asynchronous checkpointer); not an answer.

The checks run in the student's kernel (they hand the answer writers that block, fail or count, and
time a training loop around its saves), so that each test cell reads as a few lines of intent:

    check_async_snapshot(AsyncCheckpointer, seed=0)      # save() returns at once; load() gives the snapshot
    check_write_error_raised(AsyncCheckpointer)          # a failed background write raises from wait()
    most, d = saves_in_a_row(AsyncCheckpointer, n=3)     # how many writes were ever in flight at once

Only what the text states is checked: the weights and the whole AdamW state as they were when save()
returned, the background write, wait() finishing it and re-raising its error, one write at a time.
"""
from __future__ import annotations

import copy
import tempfile
import threading
import time

import torch

from .grading import expect_true

__all__ = ["check_async_snapshot", "check_resume", "check_write_error_raised", "resume_cases", "saves_in_a_row"]


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def check_async_snapshot(AsyncCheckpointer, seed: int, n_saves: int = 1):
    """`n_saves` saves of a seeded MLP and its AdamW while training goes on: each save() must return
    before its (gated) write finishes, wait() must finish it, and load() must give back the weights
    and the whole optimizer state as they were when save() returned. Returns the checkpointer."""
    torch.manual_seed(seed)
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)

    def step():
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    step()
    gate, finished = threading.Event(), []

    def slow_writer(obj, path):
        gate.wait(3)
        torch.save(obj, path)
        finished.append(path)
    ck = AsyncCheckpointer(tempfile.mkdtemp(prefix="a08_async_"), writer=slow_writer)
    for s in range(n_saves):
        if s:
            gate.set(); step()
            gate.clear()
        expected = {k: v.clone() for k, v in model.state_dict().items()}
        expected_m = [opt.state[p]["exp_avg"].clone() for p in model.parameters()]
        expected_opt = copy.deepcopy(opt.state_dict())
        ck.save(10 + s, model, opt)
        expect_true(len(finished) == s, "save() returned only after the file was written: it must hand the write "
                    "to a background thread and return at once.")
        for _ in range(3):
            step()  # training goes on and mutates weights and moments in place
        gate.set()
        ck.wait()
        expect_true(len(finished) == s + 1, "after wait() the write must be finished")
        fresh = _mlp()
        fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.05)
        got_step = ck.load(10 + s, fresh, fresh_opt)
        expect_true(int(got_step) == 10 + s, f"load() returned step {got_step!r}, expected {10 + s}")
        for k, v in fresh.state_dict().items():
            expect_true(torch.equal(v, expected[k]), f"loaded weight '{k}' differs from its value when save() returned: "
                        "the background thread wrote tensors that training changed afterwards. Copy every tensor "
                        "(a snapshot) before save() returns.")
        for p, m in zip(fresh.parameters(), expected_m):
            expect_true(torch.equal(fresh_opt.state[p]["exp_avg"], m), "loaded AdamW exp_avg differs from its value when "
                        "save() returned: snapshot the optimizer state too (copy.deepcopy of its state_dict).")
        got_opt = fresh_opt.state_dict()
        expect_true(all(torch.equal(torch.as_tensor(got_opt["state"][i][key]), torch.as_tensor(v))
                        for i, st in expected_opt["state"].items() for key, v in st.items())
                    and got_opt["param_groups"] == expected_opt["param_groups"],
                    "loaded optimizer state (exp_avg, exp_avg_sq, step, param_groups) differs from its value when "
                    "save() returned: a resume needs all of it, as it was at that step.")
    return ck


def check_write_error_raised(AsyncCheckpointer) -> None:
    """A writer that raises OSError in the background thread: wait() must raise, not let it vanish."""
    def broken_writer(obj, path):
        raise OSError("disk full")
    ck = AsyncCheckpointer(tempfile.mkdtemp(prefix="a08_async_"), writer=broken_writer)
    m = torch.nn.Linear(2, 2)
    ck.save(1, m, torch.optim.SGD(m.parameters(), lr=0.1))
    try:
        ck.wait()
        raised = False
    except Exception:
        raised = True
    expect_true(raised, "a write that fails in the background thread must raise from wait(), not vanish")


def saves_in_a_row(AsyncCheckpointer, n: int = 3) -> tuple[int, str]:
    """`n` saves in a row, then wait(), with a writer that takes 0.15 s and counts the writes in flight:
    (the most writes ever in flight at once, the checkpoint directory)."""
    in_flight, most, lock = [0], [0], threading.Lock()

    def counting_writer(obj, path):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.15)
        torch.save(obj, path)
        with lock:
            in_flight[0] -= 1
    d = tempfile.mkdtemp(prefix="a08_async_")
    m = torch.nn.Linear(2, 2)
    ck = AsyncCheckpointer(d, writer=counting_writer)
    for s in range(n):
        ck.save(s, m, torch.optim.SGD(m.parameters(), lr=0.1))
    ck.wait()
    return most[0], d


def check_resume(train_steps, make_run, save_checkpoint, load_checkpoint, seed: int, total: int, stop_at: int) -> None:
    """Train `total` steps of `make_run(seed)` without a break; then again, stopping after `stop_at`, saving,
    restarting in a "new process" (other global seeds, a run built from another seed) and loading: the
    resumed losses must equal the uninterrupted ones, bit for bit."""
    import os
    import random

    import numpy as np

    random.seed(seed); np.random.seed(seed)
    full = train_steps(make_run(seed, total_steps=total), total)
    random.seed(seed); np.random.seed(seed)
    run = make_run(seed, total_steps=total)
    first = train_steps(run, stop_at)
    path = os.path.join(tempfile.mkdtemp(prefix="a08_resume_"), "ckpt.pt")
    save_checkpoint(run, path)
    del run
    random.seed(seed + 99); np.random.seed(seed + 99); torch.manual_seed(seed + 99)  # the restarted process
    run = make_run(seed + 17, total_steps=total)
    load_checkpoint(run, path)
    rest = train_steps(run, total - stop_at)
    resumed = first + rest
    diff = [i for i, (a, b) in enumerate(zip(resumed, full)) if a != b]
    expect_true(resumed == full,
                f"resume (seed {seed}, {total} steps, stopped after {stop_at}): the losses differ from the "
                f"uninterrupted run from step {diff[0] if diff else len(full)} on "
                f"(resumed {resumed[diff[0]] if diff else None!r} vs {full[diff[0]] if diff else None!r}). "
                "Something the next steps depend on was not restored: weights, AdamW moments and step, the "
                "scheduler, the python/numpy/torch RNG streams, or the loader's generator, epoch, permutation and position.")


def resume_cases(seed: int, n: int = 3) -> list[tuple[int, int, int]]:
    """`n` random (seed, total steps, stop after) drawn from `seed`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        total = int(rng.integers(20, 40))
        out.append((int(rng.integers(1, 1000)), total, int(rng.integers(3, total - 2))))
    return out
