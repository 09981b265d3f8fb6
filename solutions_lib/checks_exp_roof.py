"""Checks of 07 exercises 2, Exercise D4 (attention's exponential roof), kept here so that each test
cell reads as a few lines of intent. The visible checks compare a student's functions with the closed
forms of the text, computed here from literals (no reference answer); the case generators draw the
hidden inputs, whose expected values the test cell takes from `solutions_lib.attention_roofs`.
"""
from __future__ import annotations

import numpy as np

from .grading import expect_close, expect_equal

KEYS = ("matmul", "memory", "exp", "time")
H100_BF16, H100_FP8, H100_EXP, H100_BW = 989e12, 1979e12, 3.9e12, 3.35e12


def _roofs(r, what):
    missing = sorted(set(KEYS + ("bound",)) - set(r))
    expect_equal(missing, [], f"{what}: keys missing from the returned dict (extra keys are allowed)",
                 hint="The dict needs at least the keys matmul, memory, exp, time and bound.")
    return [r[k] for k in KEYS], r["bound"]


def check_roofs_visible(attention_time_roofs) -> None:
    """One head's forward on an H100 SXM (989 TFLOP/s BF16, 3.35 TB/s, 3.9e12 exp/s), and ties."""
    for n, d, nbytes, causal, bound, why in [
        (4096, 128, 4 * 4096 * 128 * 2, False, "matmul", "d = 128 > F/(4E) = 63.4: the matmuls take twice the exponentials"),
        (4096, 32, 4 * 4096 * 32 * 2, False, "exp", "d = 32 < 63.4: the exponentials take longer than the matmuls"),
        (1024, 64, 4 * 1024 * 64, True, "matmul", "causal, FP8 traffic: N (N + 1) / 2 scores, the diagonal included"),
        (4096, 64, 2 * (4 * 4096 * 64 + 4 * 4096 ** 2), False, "memory", "standard attention's bytes: memory-bound"),
    ]:
        scores = n * (n + 1) // 2 if causal else n * n
        want = [4 * d * scores / H100_BF16, nbytes / H100_BW, scores / H100_EXP]
        what = f"attention_time_roofs(N = {n}, d = {d}, {nbytes} bytes, H100 SXM BF16, causal = {causal})"
        got, b = _roofs(attention_time_roofs(n, d, nbytes, H100_BF16, H100_BW, H100_EXP, causal=causal), what)
        expect_close(got, want + [max(want)], f"{what}: [matmul, memory, exp, time] seconds", rtol=1e-9, unit="s",
                     hint="matmul = 4 d S / peak, memory = bytes / bandwidth, exp = S / exp rate, time = the largest; "
                          "S = N^2 scores, N (N + 1) / 2 causal; one exponential per score.")
        expect_equal(b, bound, f"{what}['bound']: {why}")
    # exact ties (powers of two): 2^20 scores, 2^28 FLOPs at 2^40 FLOP/s = 2^28 bytes at 2^40 B/s = 2^20 exps at 2^32 /s
    _, b = _roofs(attention_time_roofs(1024, 64, 2 ** 28, 2.0 ** 40, 2.0 ** 40, 2.0 ** 32), "three equal roofs")
    expect_equal(b, "matmul", "attention_time_roofs with all three roofs equal: the tie goes to 'matmul'",
                 hint="Ties go to the first of ('matmul', 'memory', 'exp'): at the ridge a kernel is not memory-bound.")


def roof_cases(seed, n=6) -> list[tuple]:
    """(seq_len, head_dim, hbm_bytes, peak_flops, bandwidth, exp_per_second, causal), plus an exact
    memory = exp tie above the matmul roof (the tie goes to 'memory')."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n):
        N, d = int(rng.integers(100, 40_000)), int(rng.choice([32, 48, 64, 96, 128, 256]))
        cases.append((N, d, float(rng.uniform(1e5, 1e10)), float(rng.choice([312e12, 989e12, 1979e12])),
                      float(rng.choice([1.555e12, 3.35e12])), float(rng.uniform(1e12, 8e12)), bool(i % 2)))
    k = int(rng.integers(8, 12))
    cases.append((2 ** k, 16, float(2 ** (2 * k + 4)), 2.0 ** 48, 2.0 ** 40, 2.0 ** 36, False))   # exp = memory > matmul
    return cases


def check_head_dim_visible(largest_exp_bound_head_dim) -> None:
    for F, E, want, what, hint in [
        (H100_BF16, H100_EXP, 63, "H100 SXM, BF16 (989 TFLOP/s, 3.9e12 exp/s): F/(4E) = 63.4", ""),
        (H100_FP8, H100_EXP, 126, "H100 SXM, FP8 (1979 TFLOP/s): F/(4E) = 126.9", "Round down, not to the nearest."),
        (2.0 ** 38, 2.0 ** 30, 63, "F/(4E) = 64 exactly: at d = 64 the roofs tie, so 63",
         "Strictly longer: at d = F/(4E) the exponentials and the matmuls take the same time."),
        (1e12, 1e12, 0, "F/(4E) = 0.25: no head dim is exp-bound", "Return 0 when even d = 1 is matmul-bound."),
    ]:
        expect_equal(int(largest_exp_bound_head_dim(F, E)), want, f"largest_exp_bound_head_dim, {what}",
                     hint=hint or "exp time S/E > matmul time 4 d S/F  <=>  d < F/(4E).")


def head_dim_cases(seed, n=6) -> list[tuple]:
    """(peak_flops, exp_per_second) with F/(4E) at least 0.05 from a whole number, and one exact
    whole ratio (a tie at d = F/(4E))."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        k = int(rng.integers(1, 400)) + float(rng.uniform(0.05, 0.95))
        E = float(rng.uniform(1e12, 2e13))
        cases.append((4 * k * E, E))
    w = int(rng.integers(3, 200))
    cases.append((float(w) * 2.0 ** 42, 2.0 ** 40))
    return cases
