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
"""
from __future__ import annotations

import statistics
import time as _time
from contextlib import contextmanager

__all__ = ["PATTERN", "WARMUP_SECONDS", "expected_medians", "virtual_clock", "virtual_clock_run"]

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
