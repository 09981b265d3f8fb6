"""Test machinery for assignment 11, exercises 4 (not an answer): a scripted clock for timing harnesses.

A timing harness is right when it times the right regions, after a barrier, skips the warm-up step
and reports a median. Real timings cannot show that (they move from run to run), so the tests run
the student's harness in a rank under a *scripted clock*:

- every clock the harness may read (`time.perf_counter`, `time.monotonic`, `time.time` and their
  `_ns` twins, also where the harness's module imported them by name) returns the script's time;
- the compute advances it by the script's cost for that step (DP: the network's forward, which
  the test hooks; TP: `torch.nn.functional.gelu` for the forward and a hook on `x` for the
  backward), the all-reduce by the script's cost for that call;
- the other rank is late: after each piece of local work (and after each all-reduce, and at the
  start) this rank would wait `skew` seconds at its next synchronisation. A `dist.barrier()` or an
  all-reduce pays that wait. Time it inside a timed region (no barrier before the all-reduce, or
  a barrier inside the region) and the region grows by the skew.

Step 0 (the warm-up) is made slow and one timed step is an outlier, so the warm-up timed, a mean
instead of the median, or a missing barrier each give a different number than the script's
median (`expected`). Barriers and work per step are counted as well.

    with CommCounter() as comm, ScriptedClock(DP_SCRIPT, fn=time_dp_step).dp(net) as clock:
        c, m, flat = time_dp_step(net, x, repeats)
    clock.report(comm)      # {"forwards": ..., "backwards": ..., "barriers": ...}
"""
from __future__ import annotations

import time as _time

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn.functional as F

__all__ = ["DP_SCRIPT", "TP_SCRIPT", "ScriptedClock", "expected", "scaled"]

# seconds. Step 0 is the warm-up (slow); one timed step is an outlier. Chosen so that the median of
# the timed steps differs from: the median with the warm-up, the median of steps 0..repeats-1, the
# mean, and any of those plus the skew.
DP_SCRIPT = dict(repeats=5, skew=4e-3,
                 compute=[9e-3, 2e-3, 3e-3, 8e-3, 2.5e-3, 1e-3],
                 comm=[7e-3, 1e-3, 1.5e-3, 6e-3, 1.2e-3, 0.5e-3])
TP_SCRIPT = dict(repeats=5, skew=4e-3,
                 forward=[5e-3, 1e-3, 1.5e-3, 4e-3, 1.25e-3, 0.5e-3],
                 backward=[4e-3, 1e-3, 1.5e-3, 4e-3, 1.25e-3, 0.5e-3],
                 comm=[3e-3, 2e-3, 0.5e-3, 0.25e-3, 0.75e-3, 0.5e-3, 3e-3, 2e-3, 0.5e-3, 0.5e-3, 0.25e-3, 0.25e-3])


def scaled(script: dict, factor: float) -> dict:
    """The same script with every duration times `factor` (hidden cases: the numbers a right
    harness must return are not the public script's)."""
    return {k: (v if k == "repeats" else [float(x) * factor for x in v] if isinstance(v, list) else float(v) * factor)
            for k, v in script.items()}


def expected(script: dict) -> dict:
    """What a right harness returns under `script`, and what the classic slips return instead:
    {"compute_s", "comm_s", plus "..._mean", "..._with_warmup" for the hints}."""
    r = script["repeats"]
    if "compute" in script:
        comp = np.asarray(script["compute"], float)
        comm = np.asarray(script["comm"], float)
    else:
        comp = np.asarray(script["forward"], float) + np.asarray(script["backward"], float)
        c = np.asarray(script["comm"], float)
        comm = c[0::2] + c[1::2]
    return {"compute_s": float(np.median(comp[1:r + 1])), "comm_s": float(np.median(comm[1:r + 1])),
            "compute_mean": float(np.mean(comp[1:r + 1])), "comm_mean": float(np.mean(comm[1:r + 1])),
            "compute_with_warmup": float(np.median(comp[:r + 1])), "comm_with_warmup": float(np.median(comm[:r + 1])),
            "skew": float(script["skew"])}


_CLOCKS = ("perf_counter", "monotonic", "time", "perf_counter_ns", "monotonic_ns", "time_ns")


class ScriptedClock:
    """The scripted clock (see the module docstring). Use `.dp(net)` or `.tp(x)` as a context
    manager inside a rank, around the call of the harness `fn`."""

    def __init__(self, script: dict, fn=None):
        self.script, self.fn = script, fn
        self.now = 100.0
        self.skew = float(script["skew"])
        self.pending = self.skew                 # the ranks do not start at the same instant
        self.forwards = self.backwards = self.allreduces = 0
        self._undo: list = []
        self._mode = None
        self._x = None
        self._hooks: list = []

    # -- the clock and the events
    def _read(self) -> float:
        return self.now

    def _read_ns(self) -> int:
        return int(round(self.now * 1e9))

    def _work(self, seconds: float) -> None:
        self.now += float(seconds)
        self.pending += self.skew

    def _sync(self, seconds: float = 0.0) -> None:
        self.now += self.pending + float(seconds)
        self.pending = self.skew if seconds else 0.0   # after an all-reduce the ranks leave apart again

    def _cost(self, key: str, i: int) -> float:
        costs = self.script[key]
        return float(costs[i]) if i < len(costs) else float(costs[-1])

    # -- patching
    def _set(self, obj, name, value, *, item=False):
        if item:
            self._undo.append((obj, name, obj[name], True))
            obj[name] = value
        else:
            self._undo.append((obj, name, getattr(obj, name), False))
            setattr(obj, name, value)

    def _patch_common(self):
        fakes = {n: (self._read_ns if n.endswith("_ns") else self._read) for n in _CLOCKS}
        real = {getattr(_time, n): fakes[n] for n in _CLOCKS}
        for n in _CLOCKS:
            self._set(_time, n, fakes[n])
        if self.fn is not None:                   # `from time import perf_counter` in the notebook
            g = getattr(self.fn, "__globals__", {})
            for name, value in list(g.items()):
                try:
                    hit = value in real
                except TypeError:
                    hit = False
                if hit:
                    self._set(g, name, real[value], item=True)
        clock = self
        barrier_now, allreduce_now = dist.barrier, dist.all_reduce

        def barrier(*args, **kwargs):
            out = barrier_now(*args, **kwargs)
            clock._sync()
            return out

        def all_reduce(*args, **kwargs):
            out = allreduce_now(*args, **kwargs)
            clock._sync(clock._cost("comm", clock.allreduces))
            clock.allreduces += 1
            return out

        for mod in (dist, c10d):
            if getattr(mod, "barrier", None) is barrier_now:
                self._set(mod, "barrier", barrier)
            if getattr(mod, "all_reduce", None) is allreduce_now:
                self._set(mod, "all_reduce", all_reduce)

    def dp(self, net: torch.nn.Module):
        """Data parallelism: the forward of `net` costs the script's compute of its step."""
        self._mode = "dp"

        def on_forward(module, inputs, output):
            self._work(self._cost("compute", self.forwards))
            self.forwards += 1

        self._hooks.append(net.register_forward_hook(on_forward))
        return self

    def tp(self, x: torch.Tensor):
        """Tensor parallelism: `F.gelu` costs the forward of its step, x's gradient the backward."""
        self._mode = "tp"
        self._x = x
        return self

    def __enter__(self):
        self._patch_common()
        if self._mode == "tp":
            real_gelu = F.gelu
            clock = self

            def gelu(*args, **kwargs):
                out = real_gelu(*args, **kwargs)
                clock._work(clock._cost("forward", clock.forwards))
                clock.forwards += 1
                return out

            self._set(F, "gelu", gelu)
            if self.fn is not None:
                g = getattr(self.fn, "__globals__", {})
                for name, value in list(g.items()):
                    if value is real_gelu:
                        self._set(g, name, gelu, item=True)

            def on_backward(grad):
                self._work(self._cost("backward", self.backwards))
                self.backwards += 1
                return None

            self._hooks.append(self._x.register_hook(on_backward))
        return self

    def __exit__(self, *exc):
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        for obj, name, value, item in reversed(self._undo):
            if item:
                obj[name] = value
            else:
                setattr(obj, name, value)
        self._undo.clear()
        return False

    def report(self, counter=None) -> dict:
        """Plain counts for the notebook: forwards, backwards (TP), all-reduces, barriers (from a
        CommCounter that was active around the clock)."""
        out = {"forwards": int(self.forwards), "allreduces": int(self.allreduces)}
        if self._mode == "tp":
            out["backwards"] = int(self.backwards)
        if counter is not None:
            out["barriers"] = int(counter.calls.get("barrier", 0))
        return out
