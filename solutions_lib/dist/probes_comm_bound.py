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
  start) this rank would wait `skew` seconds at its next synchronisation. A `dist.barrier()`, a
  one-element all-reduce (a barrier by other means) or the step's all-reduce pays that wait. Time
  it inside a timed region (no synchronisation before the all-reduce, or one inside the region)
  and the region grows by the skew. Where the ranks synchronise is the harness's design: any
  placement that keeps the wait out of both regions gives the script's numbers.

Step 0 (the warm-up) is made slow and one timed step is an outlier, so the warm-up timed, a mean
instead of the median, or a missing barrier each give a different number than the script's
median (`expected`). The work per step (forwards, backwards reaching x) and the size of every
all-reduce are recorded as well.

The notebook's test cells call the whole checks, one line each:

    check_dp_step(time_dp_step, world=2, hidden=8, tokens=5, seed=0)    # gradients, counts, the script's medians
    check_tp_mlp(time_tp_mlp, world=2, hidden=6, tokens=5, seed=0)
    check_dp_trend(time_dp_step, 256, 8, 512)                           # real timings: the trend only
    check_tp_trend(time_tp_mlp, 128, 64, 512)

and `fresh_dp_fits(seed)` / `fresh_tp_fits(seed)` draw the synthetic measurements of the fits'
hidden tests (module `comm_bound_cases`, which runs grader-side).
"""
from __future__ import annotations

import importlib
import time as _time
import timeit as _timeit

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d
import torch.nn.functional as F

__all__ = ["DP_SCRIPT", "TP_SCRIPT", "ScriptedClock", "check_dp_step", "check_dp_trend", "check_tp_mlp",
           "check_tp_trend", "expected", "scaled"]

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


# torch.distributed's own functions, as a harness that did `from torch.distributed import barrier`
# at import time holds them (before any counter or clock wraps them)
_BARRIER, _ALL_REDUCE = dist.barrier, dist.all_reduce

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
        self.sizes: list[int] = []               # elements of every all-reduce the script charged
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
        if getattr(_timeit, "default_timer", None) in real:
            self._set(_timeit, "default_timer", real[_timeit.default_timer])
        clock = self
        barrier_now, allreduce_now = dist.barrier, dist.all_reduce

        def barrier(*args, **kwargs):
            out = barrier_now(*args, **kwargs)
            clock._sync()
            return out

        def all_reduce(*args, **kwargs):
            out = allreduce_now(*args, **kwargs)
            t = kwargs.get("tensor", args[0] if args else None)
            n = int(t.numel()) if isinstance(t, torch.Tensor) else 0
            if n <= 1:                              # a one-element all-reduce: a barrier by other means
                clock._sync()
            else:
                clock._sync(clock._cost("comm", clock.allreduces))
                clock.allreduces += 1
                clock.sizes.append(n)
            return out

        for mod in (dist, c10d):
            if getattr(mod, "barrier", None) is barrier_now:
                self._set(mod, "barrier", barrier)
            if getattr(mod, "all_reduce", None) is allreduce_now:
                self._set(mod, "all_reduce", all_reduce)
        # names the harness's module bound itself: `from time import perf_counter`,
        # `from torch.distributed import barrier, all_reduce`
        swap = dict(real)
        swap.update({barrier_now: barrier, allreduce_now: all_reduce, _BARRIER: barrier, _ALL_REDUCE: all_reduce})
        if self.fn is not None:
            g = getattr(self.fn, "__globals__", {})
            for name, value in list(g.items()):
                try:
                    hit = value in swap
                except TypeError:
                    hit = False
                if hit:
                    self._set(g, name, swap[value], item=True)

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
        CommCounter that was active around the clock, if given). The elements of each charged
        all-reduce are in `self.sizes`."""
        out = {"forwards": int(self.forwards), "allreduces": int(self.allreduces)}
        if self._mode == "tp":
            out["backwards"] = int(self.backwards)
        if counter is not None:
            out["barriers"] = int(counter.calls.get("barrier", 0))
        return out


# ---------------------------------------------------------------- the notebook's checks, one call per case


def _flat_tensor(value) -> torch.Tensor:
    return torch.as_tensor(value).detach().reshape(-1).double()


def _triple(out, name: str):
    from ..grading import GradingError

    if not isinstance(out, (tuple, list)) or len(out) != 3:
        raise GradingError(f"{name} must return a tuple of 3 (compute_s, comm_s, ...), got {type(out).__name__}"
                           f"{'' if not isinstance(out, (tuple, list)) else f' of {len(out)}'}")
    return out


def _dp_input(hidden: int, tokens: int, seed: int, rank: int) -> torch.Tensor:
    return torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(seed + 1 + rank), dtype=torch.float64)


def _dp_rank(rank, world, fn, hidden, tokens, seed, script):
    from ..grading import no_delegation
    from .comm_bound import dp_layer

    kit = importlib.import_module("solutions_lib.dist.comm_bound")
    net = dp_layer(hidden, seed=seed, dtype=torch.float64)
    x = _dp_input(hidden, tokens, seed, rank)
    with no_delegation("time_dp_step", kit), ScriptedClock(script, fn=fn).dp(net) as clock:
        c, m, flat = _triple(fn(net, x, script["repeats"]), "time_dp_step")
    return [float(c), float(m)], _flat_tensor(flat), dict(clock.report(), sizes=list(clock.sizes))


def _timing_checks(name, times, want, r, case, regions):
    from ..grading import expect_close

    expect_close(times[0], want["compute_s"], f"compute_s on rank {r} ({case}) under the test's clock", rtol=1e-6,
                 unit="s", hint=f"The median over the timed steps of {regions[0]}. A mean gives "
                 f"{want['compute_mean']:g}, the warm-up counted {want['compute_with_warmup']:g}; a wait for the "
                 f"other rank inside the region adds its lateness ({want['skew']:g} s).")
    expect_close(times[1], want["comm_s"], f"comm_s on rank {r} ({case}) under the test's clock", rtol=1e-6,
                 unit="s", hint=f"The median over the timed steps of {regions[1]}. A mean gives {want['comm_mean']:g}, "
                 f"the warm-up counted {want['comm_with_warmup']:g}; an all-reduce that starts before the other rank "
                 f"has caught up also times its lateness ({want['skew']:g} s each).")


def check_dp_step(time_dp_step, world: int, hidden: int, tokens: int, seed: int, scale: float = 1.0) -> None:
    """Grade a `time_dp_step` on `world` gloo ranks in float64, under `scaled(DP_SCRIPT, scale)`:
    the averaged gradient against the mean of one-process gradients, repeats + 1 all-reduces of
    the P gradient values, one forward per step, and the script's medians."""
    from ..grading import expect_close, expect_equal
    from .comm_bound import dp_layer
    from .graded import launch_graded

    script = scaled(DP_SCRIPT, scale)        # hidden cases: other durations than the public script
    repeats, want_t = script["repeats"], expected(script)
    res = launch_graded(_dp_rank, world, args=(time_dp_step, hidden, tokens, seed, script))
    grads = []
    for r in range(world):                   # one process: each rank's gradient, then their mean
        net = dp_layer(hidden, seed=seed, dtype=torch.float64)
        net(_dp_input(hidden, tokens, seed, r)).square().mean().backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    want = torch.stack(grads).mean(0)
    n_params = want.numel()
    case = f"{world} ranks, h={hidden}, {tokens} tokens, repeats={repeats}"
    for r, (times, flat, seen) in enumerate(res):
        expect_equal(seen["sizes"], [n_params] * (repeats + 1),
                     f"elements of each all-reduce (of more than one element) on rank {r} ({case})",
                     hint=f"One all-reduce per step, the warm-up step included, of the whole flat gradient (P = "
                     f"{n_params} values): repeats + 1 in all.")
        expect_close(flat, want, f"averaged gradient on rank {r} ({case}) vs the mean of one-process gradients",
                     rtol=0, atol=1e-10, hint="The all-reduced (SUM) flat gradient divided by the world size, from "
                     "fresh gradients each step, in the order of net.parameters().")
        expect_equal(seen["forwards"], repeats + 1, f"forward passes of the network on rank {r} ({case})",
                     hint="The same work every step: one forward and one backward per step, repeats + 1 steps.")
        _timing_checks("time_dp_step", times, want_t, r, case, ("forward + backward", "the all-reduces"))


def _tp_input(hidden: int, tokens: int, seed: int) -> torch.Tensor:
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
    return x.requires_grad_(True)


def _tp_rank(rank, world, fn, hidden, tokens, seed, script):
    from ..grading import GradingError, no_delegation
    from .comm_bound import tp_shards

    kit = importlib.import_module("solutions_lib.dist.comm_bound")
    w1, w2, _, _ = tp_shards(hidden, rank, world, seed=seed, dtype=torch.float64)
    x = _tp_input(hidden, tokens, seed)
    with no_delegation("time_tp_mlp", kit), ScriptedClock(script, fn=fn).tp(x) as clock:
        c, m, grads = _triple(fn(w1, w2, x, script["repeats"]), "time_tp_mlp")
    if not isinstance(grads, dict) or not {"w1", "w2", "x"} <= set(grads):
        raise GradingError(f"time_tp_mlp's third value must be a dict with keys 'w1', 'w2', 'x', got {grads!r:.80}")
    return [float(c), float(m)], {k: torch.as_tensor(grads[k]).detach().double() for k in ("w1", "w2", "x")}, \
        dict(clock.report(), sizes=list(clock.sizes))


def check_tp_mlp(time_tp_mlp, world: int, hidden: int, tokens: int, seed: int, scale: float = 1.0) -> None:
    """Grade a `time_tp_mlp` on `world` gloo ranks in float64, under `scaled(TP_SCRIPT, scale)`:
    every shard's gradients and the input gradient against the unsharded MLP in one process,
    2 all-reduces of T h values per step, one gelu and one backward reaching x per step, and the
    script's medians."""
    import torch.nn.functional as F_

    from ..grading import expect_close, expect_equal
    from .comm_bound import tp_shards
    from .graded import launch_graded

    script = scaled(TP_SCRIPT, scale)
    repeats, want_t = script["repeats"], expected(script)
    res = launch_graded(_tp_rank, world, args=(time_tp_mlp, hidden, tokens, seed, script))
    _, _, W1, W2 = tp_shards(hidden, 0, world, seed=seed, dtype=torch.float64)
    W1, W2 = W1.clone().requires_grad_(True), W2.clone().requires_grad_(True)
    x = _tp_input(hidden, tokens, seed)
    (F_.gelu(x @ W1.T) @ W2.T).square().mean().backward()     # one process, unsharded
    k = 4 * hidden // world
    case = f"{world} ranks, h={hidden}, {tokens} tokens, repeats={repeats}"
    for r, (times, grads, seen) in enumerate(res):
        expect_equal(seen["sizes"], [tokens * hidden] * (2 * (repeats + 1)),
                     f"elements of each all-reduce (of more than one element) on rank {r} ({case})",
                     hint="Two per step, the warm-up step included: the output y forward and the input gradient "
                     "backward, tokens x h values each.")
        expect_close(grads["w1"], W1.grad[r * k:(r + 1) * k], f"w1 gradient on rank {r} ({case}) vs one process",
                     rtol=0, atol=1e-10, hint="The gradient of mean(y^2) with y the ALL-REDUCED output.")
        expect_close(grads["w2"], W2.grad[:, r * k:(r + 1) * k], f"w2 gradient on rank {r} ({case}) vs one process",
                     rtol=0, atol=1e-10)
        expect_close(grads["x"], x.grad, f"x gradient on rank {r} ({case}) vs one process", rtol=0, atol=1e-10,
                     hint="Each rank's backward gives only its shard's part of x's gradient: the sum over the ranks "
                     "is the full one.")
        expect_equal((seen["forwards"], seen["backwards"]), (repeats + 1, repeats + 1),
                     f"(gelu forwards, backwards reaching x) on rank {r} ({case})",
                     hint="The same work every step: one forward (torch.nn.functional.gelu) and one backward per step.")
        _timing_checks("time_tp_mlp", times, want_t, r, case,
                       ("the local forward + the local backward", "the two all-reduces together"))


def _dp_point(rank, world, fn, hidden, tokens, repeats):
    from .comm_bound import dp_layer

    net = dp_layer(hidden)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(rank))
    c, m, _ = _triple(fn(net, x, repeats), "time_dp_step")
    return float(c), float(m)


def check_dp_trend(time_dp_step, hidden: int, small: int, large: int, repeats: int = 7, tries: int = 3) -> None:
    """Real timings on 2 ranks (float32), `small` and `large` tokens per rank: compute grows at
    least 3-fold and at least twice as fast as the all-reduce (the slower rank's medians; a miss
    is measured again, up to `tries` times: another process may have slowed a step)."""
    from ..grading import expect_between
    from .launch import launch

    for _ in range(tries):
        pts = {T: launch(_dp_point, 2, args=(time_dp_step, hidden, T, repeats)) for T in (small, large)}
        c = {T: max(r[0] for r in v) for T, v in pts.items()}
        m = {T: max(r[1] for r in v) for T, v in pts.items()}
        grow_c, grow_m = c[large] / c[small], m[large] / m[small]
        if grow_c >= 3 and grow_c / grow_m >= 2:
            break
    print(f"h = {hidden}: compute {c[small] * 1e3:.2f} -> {c[large] * 1e3:.2f} ms, "
          f"all-reduce {m[small] * 1e3:.2f} -> {m[large] * 1e3:.2f} ms")
    expect_between(grow_c, 3, None, f"h = {hidden}: compute time at {large} tokens / at {small} tokens",
                   hint="compute_s times the forward and backward only: they grow with the tokens.")
    expect_between(grow_c / grow_m, 2, None,
                   f"h = {hidden}: growth of the compute time / growth of the all-reduce time, {small} -> {large} tokens",
                   hint="comm_s times the all-reduce only, with the ranks caught up: it moves P values whatever "
                   "the batch.")


def _tp_point(rank, world, fn, hidden, tokens, repeats):
    from .comm_bound import tp_shards

    w1, w2, _, _ = tp_shards(hidden, rank, world)
    x = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    c, m, _ = _triple(fn(w1, w2, x, repeats), "time_tp_mlp")
    return float(c), float(m)


def check_tp_trend(time_tp_mlp, tokens: int, narrow: int, wide: int, repeats: int = 7, tries: int = 3) -> None:
    """Real timings on 2 ranks (float32) at widths `narrow` and `wide`: communication over compute
    falls at least 2-fold (the slower rank's medians; measured again up to `tries` times)."""
    from ..grading import expect_between
    from .launch import launch

    for _ in range(tries):
        ratio = {}
        for h in (narrow, wide):
            res = launch(_tp_point, 2, args=(time_tp_mlp, h, tokens, repeats))
            ratio[h] = max(r[1] for r in res) / max(r[0] for r in res)
        if ratio[narrow] / ratio[wide] >= 2:
            break
    print(f"{tokens} tokens: comm / compute {ratio[narrow]:.3f} at h = {narrow}, {ratio[wide]:.3f} at h = {wide}")
    expect_between(ratio[narrow] / ratio[wide], 2, None,
                   f"{tokens} tokens: (comm/compute at h = {narrow}) / (comm/compute at h = {wide})",
                   hint="Compute = the two local matmul parts, comm = the two all-reduces with the ranks caught up.")
