"""The test machinery of 07 exercises (numerics and attention), so that each test cell of the
notebook reads as a few lines of intent (issue 28).

The cells keep their own inputs: every hidden seed is passed in by the cell (through
`grading.term_seed`), and the calls of the student's functions stay in the cell, inside its
`no_delegation` block (except where a check must watch the call itself: `one_pass_stats`). What lives here: the case generators the hidden cells draw from, oracles
restated in plain torch/numpy or taken from the course kit (never a reference answer), and the
case-by-case comparisons, each one `expect_*` check with the description and hint the cell used
to write out, in the same order.

Most cells that use this module run grader-side (solutions_lib/course/grader_side.py): the
student's names are proxies there, and the functions below only read the plain data they return.
`check_precision_run` is for the precision-run cell, which runs beside the kernel (it sets the
thread count) and passes the notebook's own `precision_task`; `one_pass_stats` (a one-shot stream
and a tensor-op recorder) measures the student's code from inside its process, for the online
softmax cell, which runs beside the kernel too (it records tensor ops itself).

Built on `checks_numerics` (the kit checks written for this notebook) and `checks_cases`.
"""
from __future__ import annotations

import numpy as np

from .checks_cases import expect_each_equal  # noqa: F401  (the crossover cell calls it from here)
from .checks_numerics import (BANNED, as_step, attention_inputs, attention_oracle, benchmark_configs,  # noqa: F401
                              benchmark_metrics, check_precision_run, crossover_pairs, expect_attention_outputs,
                              expect_benchmark_metrics, expect_scaler_traces, expect_softmax_stats, first_bad_step,
                              one_pass_stats, overflow_traces, planted_scores, scaler_streams, scaler_trace,
                              softmax_inputs, softmax_oracle)
from .grading import expect_between, expect_equal, expect_true

__all__ = ["BANNED", "as_step", "attention_inputs", "attention_oracle", "benchmark_configs", "benchmark_metrics",
           "check_precision_run", "crossover_pairs", "expect_attention_outputs", "expect_benchmark_metrics",
           "expect_each_equal", "expect_overflow_steps", "expect_scaler_traces", "expect_softmax_stats",
           "expect_spike_verdicts", "first_bad_step", "one_pass_stats", "overflow_traces", "real_scaler_trace",
           "scaler_streams", "scaler_trace", "softmax_inputs", "softmax_oracle", "spike_edge_traces", "spike_traces"]


# ---------------------------------------------------------------- A1 GradScaler
def real_scaler_trace(grads, kw: dict, extra: dict) -> dict:
    """What a real `torch.amp.GradScaler` does on one case (grads, scaler kwargs, extra kwargs of
    the student's call: `dtype=torch.bfloat16` selects bf16, `keep_fp32` a mask), through the
    course kit's `numerics.torch_grad_scaler_trace` in this process."""
    import torch

    from .numerics import torch_grad_scaler_trace

    fmt = "bf16" if extra.get("dtype") is torch.bfloat16 else "fp16"
    return torch_grad_scaler_trace(grads, **kw, fmt=fmt, keep_fp32=extra.get("keep_fp32"))


# ---------------------------------------------------------------- A2 first overflow step
def expect_overflow_steps(traces, got) -> None:
    """Per hidden trace (losses, max_abs_out, limit): the student's first overflow step (None as
    -1) against the first step with a non-finite loss or output, or an output above the limit."""
    for i, ((losses, outs, limit), step) in enumerate(zip(traces, got)):
        expect_equal(as_step(step), first_bad_step(losses, outs, limit), f"first_overflow_step on hidden trace {i}")


# ---------------------------------------------------------------- D loss spikes
def spike_traces(seed, spiky_seeds, smooth_seeds, noisy_seed):
    """The hidden loss traces of the spike detector, drawn with `numerics.simulate_loss_trace`:

    - spiky: one (losses, planted spikes) per seed of `spiky_seeds` (1200-2500 steps, 4-7 spikes
      of height 0.5-2.5 and length 1-5, noise 1-3 %, other warm-ups, start and floor levels);
    - smooth: the losses of one spike-free trace per seed of `smooth_seeds` (2000 steps);
    - noisy: (losses, spikes) of one 1500-step trace at 6 % noise with 5 spikes of height 1-2.

    `seed` draws the trace parameters, in this order."""
    from .numerics import simulate_loss_trace

    rng = np.random.default_rng(seed)
    spiky = [simulate_loss_trace(n_steps=int(rng.integers(1200, 2500)), seed=s, n_spikes=int(rng.integers(4, 8)),
                                 noise=float(rng.uniform(0.01, 0.03)), warmup_steps=int(rng.integers(80, 300)),
                                 initial=float(rng.uniform(9.0, 11.5)), floor=float(rng.uniform(1.2, 5.0)),
                                 spike_height=(0.5, 2.5), spike_length=(1, 5)) for s in spiky_seeds]
    smooth = [simulate_loss_trace(n_steps=2000, seed=s, n_spikes=0, noise=0.02, warmup_steps=int(rng.integers(80, 400)),
                                  floor=float(rng.uniform(1.2, 5.0)))[0] for s in smooth_seeds]
    noisy = simulate_loss_trace(n_steps=1500, seed=noisy_seed, n_spikes=5, noise=0.06, spike_height=(1.0, 2.0), floor=2.0)
    return spiky, smooth, noisy


def spike_edge_traces(smooth) -> tuple[np.ndarray, np.ndarray]:
    """Two edge cases built from the smooth traces: the first 600 steps of `smooth[0]` with an inf
    at step 400, and `smooth[1]` with a 3.5x spike at steps 900-904 and a 1.5x one at step 915
    (ten steps after the first ends)."""
    with_inf = np.r_[smooth[0][:400], np.inf, smooth[0][401:600]]
    close = np.array(smooth[1], dtype=float)
    close[900:905] *= 3.5
    close[915] *= 1.5
    return with_inf, close


def expect_spike_verdicts(spiky, got_spiky, got_smooth, noisy_scores, got_inf, got_close) -> None:
    """The hidden verdicts of the spike detector, in order: precision and recall >= 0.9 over the
    spiky traces, no flag on any smooth trace, precision and recall >= 0.9 (`noisy_scores`, from
    the kit's spike_detection_scores) on the noisy trace run with window=30, factor=1.6, exactly
    step 400 flagged on the trace with an inf, and both close spikes flagged step by step."""
    precision, recall = planted_scores(spiky, got_spiky)
    expect_between(precision, 0.9, None, "precision on 6 hidden traces (share of the flagged steps inside planted spikes)")
    expect_between(recall, 0.9, None, "recall on 6 hidden traces (share of the planted spikes found)")
    for i, flags in enumerate(got_smooth):
        expect_equal([int(t) for t in flags], [], f"flags on hidden smooth trace {i} (warm-up drop, no spike)",
                     hint="A falling loss must never be flagged: compare with the median of earlier losses only.")
    pn, rn = noisy_scores
    expect_between(pn, 0.9, None, "precision on a hidden 6%-noise trace with window=30, factor=1.6",
                   hint="Use the window and factor arguments.")
    expect_between(rn, 0.9, None, "recall on a hidden 6%-noise trace with window=30, factor=1.6",
                   hint="Use the window and factor arguments.")
    expect_true(400 in [int(t) for t in got_inf] and len(got_inf) == 1, f"a trace with one inf at step 400: flagged {got_inf}")
    expect_equal([int(t) for t in got_close], [900, 901, 902, 903, 904, 915],
                 "flags for a 1.5x spike ten steps after a 5-step 3.5x spike",
                 hint="A mean over the window is dragged up by the first spike and hides the second; the median is not.")
