"""Checks of 04 parallelism (exercises), kept here so that each test cell reads as a few lines of
intent.

The case generators draw a hidden test's inputs from the seed the test cell passes (the cell keeps
its own `term_seed(...)` literal); the cell computes the expected values with the reference
(`solutions_lib.parallel`, or a closed form it states) and runs the student's functions under
`expect_own` / `no_delegation` itself (those look inside the kernel); the `expect_*` helpers here
compare case by case, so a failure names the inputs. Nothing here knows an answer.
"""
from __future__ import annotations

import importlib

import numpy as np

from .checks_cases import expect_each_close, expect_each_equal  # noqa: F401  (the cells call them as ck.*)
from .grading import expect_close, expect_equal

SCHEDULES = ("gpipe", "1f1b", "interleaved")
STRATEGIES = ("NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD", "HYBRID_SHARD")


def forbidden(*names: str) -> list:
    """What an answer of 04 may not call: the modules `solutions_lib.<name>` (default: the reference
    `parallel`, and `memory` where it is importable)."""
    if names:
        return [importlib.import_module(f"solutions_lib.{m}") for m in names]
    mods = [importlib.import_module("solutions_lib.parallel")]
    try:
        mods.append(importlib.import_module("solutions_lib.memory"))
    except ImportError:
        pass
    return mods


# ---------------------------------------------------------------- A.1-A.3 pipelines
def slots_cases(seed) -> tuple[list[tuple], np.ndarray, list[tuple]]:
    """8 pipeline schedules (n_stages, m, schedule, chunks), a 5 x 17 synthetic grid (30% idle "")
    and 12 GPipe shapes (n_stages, m, t_fwd, t_bwd), drawn from one generator in that order."""
    rng = np.random.default_rng(seed)
    specs = []
    for _ in range(8):
        sched = str(rng.choice(list(SCHEDULES)))
        n = int(rng.integers(1, 7))
        m = n * int(rng.integers(1, 4)) if sched == "interleaved" else int(rng.integers(1, 13))
        specs.append((n, m, sched, 2 if sched == "interleaved" else 1))
    synthetic = np.where(rng.random((5, 17)) < 0.3, "", "F1").astype(object)
    shapes = [(int(rng.integers(1, 10)), int(rng.integers(1, 40)), int(rng.integers(1, 3)), int(rng.integers(1, 4)))
              for _ in range(12)]
    return specs, synthetic, shapes


def grid_counts(timeline) -> list[int]:
    """[total, idle] time units of a simulated timeline: its grid's slots times the slot length."""
    g, slot = timeline.grid(), float(timeline.slot())
    return [round(g.size * slot), round(int((g == "").sum()) * slot)]


def expect_slot_counts(grids, got) -> None:
    """count_slots(grid) against the grid itself: total slots, idle ("") slots, idle fraction."""
    for g, counts in zip(grids, got):
        tot, idle = g.size, int((g == "").sum())
        expect_equal(int(counts[0]), tot, "count_slots: total slots of a fresh grid")
        expect_equal(int(counts[1]), idle, "count_slots: idle slots of a fresh grid")
        expect_close(counts[2], idle / tot, "count_slots: idle fraction of a fresh grid", rtol=1e-9)


def bubble_cases(seed) -> tuple[list[tuple[int, float]], list[tuple[int, int]]]:
    """30 (n_stages, bubble target) for min_micro_batches, then 30 (n_stages, m) for gpipe_bubble."""
    rng = np.random.default_rng(seed)
    cases = [(int(rng.integers(1, 65)), float(rng.choice([0.5, 0.3, 0.25, 0.2, 0.1, 0.05, 0.02, 0.01]))) for _ in range(30)]
    pairs = [(int(rng.integers(1, 65)), int(rng.integers(1, 300))) for _ in range(30)]
    return cases, pairs


def activation_cases(seed, n: int = 16) -> list[tuple[int, int, float, str]]:
    """(n_stages, m, activation GB per micro-batch, "gpipe" or "1f1b")."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, 9)), int(rng.integers(1, 25)), float(rng.uniform(0.1, 4.0)), str(rng.choice(["gpipe", "1f1b"])))
            for _ in range(n)]


# ---------------------------------------------------------------- B tensor parallelism
def attention_cases(seed, n: int = 25) -> list[tuple[int, int, int]]:
    """(d_model, heads, tp) with tp dividing heads."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        tp = int(rng.choice([1, 2, 4, 8]))
        heads = tp * int(rng.integers(1, 9))
        cases.append((heads * int(rng.choice([16, 32, 64, 128])), heads, tp))
    return cases


def shards(got) -> tuple:
    """attention_tp_shards' answer as plain ints: (heads per rank, W_QKV shard shape, W_O shard shape)."""
    return int(got[0]), tuple(int(v) for v in got[1]), tuple(int(v) for v in got[2])


def tp_dp_cases(seed, n: int = 20) -> list[tuple[int, int, int, int, int]]:
    """(batch, seq, hidden, tp, bytes per element)."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, 65)), int(rng.choice([128, 512, 2048, 8192])), int(rng.choice([512, 1024, 2560, 8192])),
             int(rng.choice([1, 2, 4, 8])), int(rng.choice([2, 4]))) for _ in range(n)]


def tp_case(c) -> str:
    return f"{c[:4]}, bytes_per_element={c[4]}"


def dp_case(c) -> str:
    return f"({c[2]}, {c[3]}, {c[4]})"


# ---------------------------------------------------------------- C memory and sharding
def state_cases(seed, n: int = 20) -> tuple[list[tuple[float, int]], list[tuple[int, int, int, int]]]:
    """(parameters, bytes per parameter) for state_gb, then (height, width, channels, bytes) for feature_map_gb."""
    rng = np.random.default_rng(seed)
    cases = [(float(rng.uniform(1e6, 1e11)), int(rng.choice([2, 4, 12, 16, 18]))) for _ in range(n)]
    maps = [(int(rng.integers(1, 5000)), int(rng.integers(1, 5000)), int(rng.integers(1, 513)), int(rng.choice([1, 2, 4])))
            for _ in range(n)]
    return cases, maps


def sharding_cases(seed, n: int = 24) -> list[tuple[int, int, str, int | None]]:
    """(parameters, world_size, strategy, shard_group or None), the group dividing the world."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        strat = str(rng.choice(list(STRATEGIES)))
        group = int(rng.choice([1, 2, 4, 8]))
        world = group * int(rng.integers(1, 65))
        cases.append((int(rng.integers(10**8, 2 * 10**11)), world, strat, group if strat == "HYBRID_SHARD" else None))
    return cases


# ---------------------------------------------------------------- D comm-bound
def commbound_cases(seed, n: int = 20) -> list[tuple]:
    """(tokens, hidden, ranks, alpha, bandwidth, peak FLOP/s, bytes per element)."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(1, 10 ** 5)), int(rng.choice([256, 1024, 2048, 4096, 8192, 12288])),
             int(rng.choice([1, 2, 4, 8, 64, 512])), float(rng.choice([0.0, 2e-6, 1e-5])), float(rng.choice([1e10, 2.5e10, 3e11])),
             float(rng.choice([1e14, 312e12, 989e12])), int(rng.choice([2, 4]))) for _ in range(n)]


def pp_case(c) -> tuple:
    """A comm-bound case as pp_times takes it: the rank count becomes layers per stage, 1..8."""
    return (c[0], c[1], max(1, c[2] % 9), *c[3:])


def pp_describe(c) -> str:
    return f"{c[:2]}, l={max(1, c[2] % 9)}, {c[3:]}"


def expect_comm_compute(name: str, cases, got, expected, describe=None) -> None:
    """Each (comm, compute) pair against the expected pair, in seconds."""
    expect_each_close(name, cases, [list(g) for g in got], [[e[0], e[1]] for e in expected], rtol=1e-9, atol=1e-15,
                      unit="s", describe=describe)
