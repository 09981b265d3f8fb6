"""Test machinery for the communication notebooks (05): a timing harness run on a virtual clock.

A harness that times `dist.all_reduce` can be right or wrong in ways no real measurement shows
on a noisy 2-core machine: the mean instead of the median, the warm-up calls timed, or the
whole loop timed and divided by the count give numbers within the noise of a correct one. The
probe replaces the clock: inside one rank, every `dist.all_reduce` still runs for real (so the
ranks stay in step and `CommCounter` still counts), but the clocks of the `time` module
(`perf_counter`, `monotonic`, `time` and their `_ns` forms) read a virtual time that only an
all-reduce advances, by a scripted duration:

* the first `warmup` all-reduces of every size take `WARMUP_SECONDS` each (far longer than
  any timed call, so a harness that times them moves its median);
* the timed ones take `PATTERN[j] * (size index + 1)` seconds, a pattern whose median and mean
  differ by a factor 4.

A harness that follows the notebook's protocol (per size: `warmup` untimed calls, then `repeats`
calls, each timed on its own, the median returned) returns exactly `expected_medians(...)`.

    summary, got, expected = virtual_clock_run(rank, world_size, fn, sizes, repeats, warmup)

returns the rank's `CommCounter` summary, what `fn` returned and the medians it should have
returned; the notebook checks them (ranks report, the notebook checks).
`check_time_allreduce(time_allreduce)` launches both runs, a counted one on the real clock
(`counted_run`) and the virtual-clock one, and makes the test cell's checks.
"""
from __future__ import annotations

import statistics
import time as _time
from contextlib import contextmanager

__all__ = ["PATTERN", "WARMUP_SECONDS", "check_time_allreduce", "counted_run", "expected_medians", "virtual_clock",
           "virtual_clock_run"]

#: Scripted durations of the timed calls of one size (seconds, times the size's index + 1):
#: median 0.03, mean 0.12.
PATTERN = (0.01, 0.5, 0.02, 0.04, 0.03, 0.015, 0.045, 0.035, 0.025)
#: Scripted duration of each warm-up call.
WARMUP_SECONDS = 7.0


def _durations(n_sizes: int, repeats: int, warmup: int) -> list[float]:
    if repeats > len(PATTERN):
        raise ValueError(f"the virtual clock scripts at most {len(PATTERN)} repeats, got {repeats}")
    out = []
    for s in range(n_sizes):
        out += [WARMUP_SECONDS] * warmup
        out += [p * (s + 1) for p in PATTERN[:repeats]]
    return out


def expected_medians(n_sizes: int, repeats: int, warmup: int) -> list[float]:
    """The per-size medians a correct harness reports under the virtual clock."""
    _durations(n_sizes, repeats, warmup)
    return [float(statistics.median(PATTERN[:repeats])) * (s + 1) for s in range(n_sizes)]


@contextmanager
def virtual_clock(durations):
    """Inside the block the `time` clocks read a virtual time that each `dist.all_reduce`
    advances by the next entry of `durations` (0 once they run out); the all-reduce itself
    still runs."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    state = {"now": 1000.0, "i": 0}
    script = list(durations)
    real = c10d.all_reduce
    saved_dist, saved_c10d = dist.all_reduce, c10d.all_reduce

    def all_reduce(*args, **kwargs):
        out = real(*args, **kwargs)
        if state["i"] < len(script):
            state["now"] += script[state["i"]]
        state["i"] += 1
        return out

    clocks = {"perf_counter": lambda: state["now"], "monotonic": lambda: state["now"],
              "time": lambda: state["now"], "process_time": lambda: state["now"],
              "perf_counter_ns": lambda: int(state["now"] * 1e9), "monotonic_ns": lambda: int(state["now"] * 1e9),
              "time_ns": lambda: int(state["now"] * 1e9)}
    saved_clocks = {k: getattr(_time, k) for k in clocks}
    dist.all_reduce = all_reduce
    c10d.all_reduce = all_reduce
    for k, f in clocks.items():
        setattr(_time, k, f)
    try:
        yield state
    finally:
        for k, f in saved_clocks.items():
            setattr(_time, k, f)
        dist.all_reduce, c10d.all_reduce = saved_dist, saved_c10d


def virtual_clock_run(rank: int, world_size: int, fn, sizes, repeats: int, warmup: int):
    """Run `fn(rank, world_size, sizes, repeats, warmup)` on the virtual clock, counting its
    collectives. Returns (CommCounter summary, [float(t) for t in fn's result] or None when it
    did not return a sequence of numbers, the expected medians)."""
    from .dist import CommCounter

    expected = expected_medians(len(sizes), repeats, warmup)
    with virtual_clock(_durations(len(sizes), repeats, warmup)):
        with CommCounter() as comm:
            out = fn(rank, world_size, list(sizes), repeats, warmup)
    try:
        got = [float(t) for t in out]
    except (TypeError, ValueError):
        got = None
    return comm.summary(), got, expected


def counted_run(rank: int, world_size: int, fn, sizes, repeats: int, warmup: int):
    """Run `fn(rank, world_size, sizes, repeats, warmup)` on the real clock, counting its collectives
    and watching that it does not call the reference (`solutions_lib.comms`). Returns (CommCounter
    summary, [float(t) for t in fn's result])."""
    import solutions_lib.comms as _ref
    from .dist import CommCounter
    from .grading import no_delegation

    with CommCounter() as comm, no_delegation("time_allreduce", _ref):
        out = fn(rank, world_size, list(sizes), repeats, warmup)
    return comm.summary(), [float(t) for t in out]


def _launched(run, fn, sizes, repeats, warmup, what):
    from .dist import LaunchError, launch
    from .grading import GradingError

    try:
        return launch(run, 2, args=(fn, sizes, repeats, warmup), timeout=60)
    except LaunchError as e:
        raise GradingError(f"running time_allreduce(rank, 2, {list(sizes)}, repeats={repeats}, warmup={warmup}) "
                           f"{what} failed:\n{e}") from None


def check_time_allreduce(time_allreduce) -> None:
    """05 exercises, `time_allreduce` on 2 launched ranks: first counted on the real clock (per size
    warmup + repeats all-reduces of exactly `size` bytes, a barrier per size, one positive time per
    size), then on the virtual clock, where only the notebook's protocol (untimed warm-up, each
    timed call alone, the median) returns `expected_medians`."""
    from .grading import expect_between, expect_close, expect_equal

    sizes = [1024, 65536]
    for rank, (summary, out) in enumerate(_launched(counted_run, time_allreduce, sizes, 3, 1, "on 2 ranks")):
        calls, nbytes = summary.get("all_reduce", (0, 0))
        expect_equal(int(calls), 8, f"all_reduce calls on rank {rank} for 2 sizes, repeats=3, warmup=1",
                     hint="Each size needs warmup + repeats all-reduces: (1 + 3) * 2 = 8.")
        expect_equal(int(nbytes), sum(sizes) * 4, f"bytes all-reduced on rank {rank}",
                     hint="Use a float32 tensor of size // 4 elements, so that it holds `size` bytes.")
        expect_between(summary.get("barrier", (0, 0))[0], 2, None, f"dist.barrier calls on rank {rank} for 2 sizes",
                       hint="Synchronise the ranks before the timed calls of each size.")
        expect_equal(len(out), 2, f"time_allreduce on rank {rank} must return one time per size")
        expect_between(out, 0, None, f"times time_allreduce returned on rank {rank}", unit="s",
                       hint="Return positive times in seconds.")
    vruns = _launched(virtual_clock_run, time_allreduce, sizes, 5, 2, "on a scripted clock")
    for rank, (summary, out, expected) in enumerate(vruns):
        expect_close(out if out is not None and len(out) == len(expected) else [float("nan")] * len(expected), expected,
                     f"time_allreduce on rank {rank} under a scripted clock (warm-up calls 7 s; timed calls with median "
                     f"0.03 s and mean 0.12 s, doubled for the second size)", rtol=1e-6, unit="s",
                     hint="Per size: `warmup` untimed all-reduces, then `repeats` calls each timed on its own "
                          "(dist.barrier(), then time.perf_counter() around the one call), and the median of those times. "
                          "The mean gives 0.12 s, a timed warm-up or a loop timed as a whole another number.")
