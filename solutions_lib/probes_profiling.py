"""Test machinery for assignment 09, exercises 2 (profiling one training step); not an answer.

The notebook's test cells grade trace parsers and a memory measurement on traces and models that
this module makes, so that each cell reads as a few lines of intent:

    fresh = profile_gpt(dict(vocab=40, seq_len=12, layers=3, d_model=32, heads=2), batch=3, seed=5)
    with no_delegation("self_times", *analysis_modules()):   # torch's own analysis is no answer
        got = self_times(load_trace(TRACE_PATH))              # a fresh copy: the answer may mutate it
    model, opt, x, y = gpt_case(cfg, batch, seed)             # a seeded GPT, AdamW and a batch
    gpt_params(V, S, L, h), gpt_activations(V, L, h, a, b, s) # the closed forms the memory is held to

The trace parsers the tests compare with stay in the hidden tests (they are the answers).
"""
from __future__ import annotations

import importlib
import json
import os
import tempfile

import torch

__all__ = ["analysis_modules", "gpt_activations", "gpt_case", "gpt_params", "load_trace", "profile_gpt"]

#: modules whose code an answer may not run: torch's profiler analysis (key_averages, events) and the
#: course's own memory measurement
ANALYSIS = ("torch.autograd.profiler_util", "torch.profiler.profiler", "torch.autograd.profiler", "solutions_lib.memory")


def analysis_modules(names=ANALYSIS) -> tuple:
    """The modules `no_delegation` forbids while an answer of this notebook runs."""
    return tuple(importlib.import_module(m) for m in names)


def load_trace(path: str) -> dict:
    """A fresh copy of the Chrome trace at `path` (each answer gets its own: it may change it)."""
    with open(path) as f:
        return json.load(f)


def gpt_case(cfg: dict, batch: int, seed: int):
    """(model, AdamW, x, y): a seeded `solutions_lib.dist.gpt.GPT(**cfg)`, its optimizer and a batch of
    random token ids, targets shifted by one (both contiguous)."""
    from .dist.gpt import GPT

    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    torch.manual_seed(seed)
    m = GPT(**cfg)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg["vocab"], (batch, cfg["seq_len"] + 1), generator=g)
    return m, torch.optim.AdamW(m.parameters(), lr=1e-3), idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def profile_gpt(cfg: dict, batch: int, seed: int) -> dict:
    """The Chrome trace (as a dict) of one profiled training step of a fresh GPT, after one warm-up
    step, with the notebook's `forward` / `backward` / `optimizer` annotations and shapes recorded."""
    model, opt, x, y = gpt_case(cfg, batch, seed)

    def step():
        with torch.profiler.record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, cfg["vocab"]), y.reshape(-1))
        with torch.profiler.record_function("backward"):
            loss.backward()
        with torch.profiler.record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        return load_trace(path)


def gpt_params(V: int, S: int, L: int, h: int) -> int:
    """P of `solutions_lib.dist.gpt.GPT`: token and position embeddings (the output layer is tied to
    the token embedding), L blocks of 12 h^2 + 13 h, the final LayerNorm."""
    return V * h + S * h + L * (12 * h * h + 13 * h) + 2 * h


def gpt_activations(V: int, L: int, h: int, a: int, b: int, s: int) -> int:
    """Bytes that GPT + cross-entropy save for the backward, fp32 on a CPU (the notebook's 'Reading
    the numbers'): per block 64 sbh, LayerNorm statistics 16 sb and the attention's log-sum-exp
    4 asb; then the final LayerNorm (8 sbh + 8 sb), the log-softmax 4 sbV, the positions 8 s (int64)
    and the loss's normaliser (4)."""
    per_block = 64 * s * b * h + 16 * s * b + 4 * a * s * b
    return L * per_block + 8 * s * b * h + 8 * s * b + 4 * s * b * V + 8 * s + 4


# ------------------------------------------------------------------ the test cells' checks (issue 28)
# The hand-made traces of the visible tests, the harness that calls an answer on copies of each trace
# under no_delegation, and the comparisons. The grader's parsers stay in the hidden tests.

def _x(cat: str, name: str, tid: int, ts: float, dur: float, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "tid": tid, "ts": ts, "dur": dur, **({"args": args} if args else {})}


def _mem(ts: float, nbytes: int, total: int) -> dict:
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": ts, "args": {"Bytes": nbytes, "Total Allocated": total}}


def call_on_copies(fn, calls, guard) -> list:
    """`fn(*args)` for each args of `calls`, every trace (dict) argument deep-copied first (an answer may
    change what it is given), all calls inside `guard()` (the cell's `no_delegation`)."""
    import copy

    calls = [tuple(copy.deepcopy(a) if isinstance(a, dict) else a for a in args) for args in calls]
    with guard():
        return [fn(*args) for args in calls]


def check_phase_times_visible(phase_times, phases) -> None:
    """Two "forward" annotations of 1500 and 500 µs, one "backward" of 2500 µs; a cpu_op named "forward"
    and an instant event do not count."""
    from .grading import expect_close
    from .probes_data import values_of

    tiny = {"traceEvents": [
        _x("user_annotation", "forward", 1, 0.0, 1500.0), _x("cpu_op", "forward", 1, 10.0, 700.0),
        _x("user_annotation", "backward", 1, 1600.0, 2500.0),
        {"ph": "i", "cat": "cpu_instant_event", "name": "forward", "tid": 1, "ts": 20.0},
        _x("user_annotation", "forward", 1, 5000.0, 500.0)]}
    got = phase_times(tiny)
    print("phase_times(tiny) =", got)
    expect_close(values_of(got, phases, "phase_times(tiny)", hint="One key per label of `labels`, 0.0 for a label that never occurs."),
                 [2.0, 2.5, 0.0],
                 "phase_times of a hand-made trace (forward, backward, optimizer) in ms",
                 hint="Sum the 'dur' (µs) of the user_annotation X events of each name, divide by 1000; "
                      "a label that never occurs is 0.0.")


def check_phase_values(got, labels, want: dict, what: str, keys_what: str | None = None, keys_hint: str = "",
                       measured: bool = False) -> None:
    """The student's phase_times dict `got` against the grader's `want`, label by label (`keys_what`
    and `keys_hint` describe the check that every label is a key)."""
    from .grading import expect_close
    from .probes_data import values_of

    expect_close(values_of(got, labels, keys_what or what, hint=keys_hint), [want[k] for k in labels], what,
                 rtol=1e-9, atol=1e-9, unit="ms", measured=measured)


def check_self_times_visible(self_times) -> None:
    """Three hand-made traces: nesting on one thread with a sibling that starts when its neighbour ends
    and another thread; the tie rules at equal starts; a child that ends with its parent at real (1.7e12 µs)
    timestamps."""
    import math

    from .grading import expect_close, expect_equal

    # linear [0, 100) calls t [5, 15) and addmm [20, 90), which calls resolve_conj [30, 40); then add_
    # [100, 110) (a sibling, not a child). Thread 2 runs mm [50, 80). The annotation and the instant do not count.
    tiny = {"traceEvents": [
        _x("cpu_op", "aten::addmm", 1, 20.0, 70.0), _x("cpu_op", "aten::linear", 1, 0.0, 100.0),
        _x("cpu_op", "aten::t", 1, 5.0, 10.0), _x("user_annotation", "forward", 1, 0.0, 200.0),
        _x("cpu_op", "aten::resolve_conj", 1, 30.0, 10.0), _x("cpu_op", "aten::add_", 1, 100.0, 10.0),
        _x("cpu_op", "aten::mm", 2, 50.0, 30.0),
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "tid": 1, "ts": 25.0, "args": {"Bytes": 64}}]}
    want = {"aten::linear": 0.020, "aten::t": 0.010, "aten::addmm": 0.060, "aten::resolve_conj": 0.010,
            "aten::add_": 0.010, "aten::mm": 0.030}
    got = self_times(tiny)
    print("self_times(tiny) =", {k: round(v, 6) for k, v in dict(got).items()})
    expect_equal(sorted(dict(got)), sorted(want), "operator names in self_times of the hand-made trace",
                 hint="Only cpu_op X events count; a user_annotation or an instant event is not an operator.")
    expect_close([got[k] for k in sorted(want)], [want[k] for k in sorted(want)],
                 "self times (ms) of the hand-made trace, in name order", rtol=1e-9, atol=1e-12,
                 hint="linear: 100 - 10 (t) - 70 (addmm) = 20 µs, addmm: 70 - 10 = 60 µs; add_ starts when linear "
                      "ends, so it is not its child; the mm on thread 2 is nobody's child.")
    # The tie rules: sort by (ts, -dur), then keep the trace's order. aten::empty [20, 25) is listed before
    # aten::copy_ [20, 50): same start, so the longer copy_ is the parent. aten::view and aten::as_strided both
    # cover [60, 70): same start and duration, so the one listed first (view) is the parent.
    ties = {"traceEvents": [
        _x("cpu_op", "aten::empty", 7, 20.0, 5.0), _x("cpu_op", "aten::copy_", 7, 20.0, 30.0),
        _x("cpu_op", "aten::view", 7, 60.0, 10.0), _x("cpu_op", "aten::as_strided", 7, 60.0, 10.0)]}
    want_ties = {"aten::as_strided": 0.010, "aten::copy_": 0.025, "aten::empty": 0.005, "aten::view": 0.0}
    got = self_times(ties)
    print("self_times(ties) =", {k: round(v, 6) for k, v in dict(got).items()})
    expect_close([dict(got).get(k, math.nan) for k in sorted(want_ties)], [want_ties[k] for k in sorted(want_ties)],
                 "self times (ms) of a trace with equal starts, in name order (as_strided, copy_, empty, view)",
                 rtol=1e-9, atol=1e-12,
                 hint="Sort by (ts, -dur): at equal starts the longer event is the parent (copy_ 30 - 5 = 25 µs). At equal "
                      "start and duration keep the trace's order (a stable sort): view, listed first, is the parent.")
    # At real timestamps (µs since boot, about 1.7e12) a child that ends with its parent has a computed end,
    # ts + dur, 0.00024 µs past the parent's: nesting decided by comparing ends loses the child.
    late = {"traceEvents": [_x("cpu_op", "aten::linear", 3, 1732770000683.244, 25.878),
                            _x("cpu_op", "aten::addmm", 3, 1732770000683.277, 25.845)]}
    got = dict(self_times(late))
    expect_close([got.get("aten::addmm", math.nan), got.get("aten::linear", math.nan)], [0.025845, 0.000033],
                 "self times (ms) at real timestamps of a child that ends with its parent (addmm, linear)",
                 rtol=1e-6, atol=1e-9, hint="Inside or not is decided by the start alone, ts_P <= ts < ts_P + dur_P: "
                 "the child's computed end rounds past its parent's.")


def check_self_times(got, want: dict, what: str, measured: bool) -> None:
    """The student's self_times `got` against the grader's `want`: no extra names, every time within 1e-6."""
    import math

    from .grading import expect_close, expect_equal

    got = dict(got)
    names = sorted(want)
    expect_equal(sorted(set(got) - set(want)), [], f"{what}: names that are not cpu_op events of the trace")
    expect_close([float(got.get(k, math.nan)) for k in names], [want[k] for k in names],
                 f"{what}: self time per operator, in name order", rtol=1e-6, atol=1e-6, unit="ms",
                 measured=measured, hint="A missing name shows as nan. Nest per thread, by start time.")


def check_op_counts_edges(op_counts) -> None:
    """The window is [ts, ts + dur): an op that starts exactly when the annotation starts counts, one that
    starts exactly when it ends does not. Two "forward" annotations: [100, 200), [300, 350)."""
    from .grading import expect_equal

    edges = {"traceEvents": [
        _x("user_annotation", "forward", 1, 100.0, 100.0), _x("user_annotation", "backward", 1, 200.0, 100.0),
        _x("user_annotation", "forward", 1, 300.0, 50.0), _x("cpu_op", "aten::t", 1, 99.0, 1.0),
        _x("cpu_op", "aten::mm", 1, 100.0, 5.0), _x("cpu_op", "aten::add_", 2, 199.5, 3.0),
        _x("cpu_op", "aten::relu", 1, 200.0, 2.0), _x("cpu_op", "aten::mm", 1, 300.0, 9.0),
        _x("cpu_op", "aten::sum", 1, 350.0, 1.0)]}
    got_edges = {k: int(v) for k, v in dict(op_counts(edges, "forward")).items()}
    print("op_counts(edges, 'forward') =", got_edges)
    expect_equal(got_edges, {"aten::mm": 2, "aten::add_": 1}, "op_counts of a hand-made trace at the window edges, 'forward'",
                 hint="Count a cpu_op when ts_phase <= ts < ts_phase + dur_phase, for every annotation of the phase: "
                      "the ops at 100 and 300 count, the ones at 200 and 350 (the ends) and at 99 do not.")


def check_gpt_op_counts(op_counts, trace: dict, cfg: dict, steps: int, phases) -> None:
    """(aten::addmm, aten::mm) calls per phase of `steps` profiled steps of the notebook's GPT: forward one
    addmm per nn.Linear (4 per block) and one mm for the tied output layer; backward two mm per forward
    matmul; none in the optimizer."""
    from .grading import expect_equal

    L = cfg["layers"]
    want = {"forward": (4 * L, 1), "backward": (0, 2 * (4 * L + 1)), "optimizer": (0, 0)}   # (addmm, mm) per step
    for phase in phases:
        got = op_counts(trace, phase)
        pair = (int(got.get("aten::addmm", 0)), int(got.get("aten::mm", 0)))
        print(f"{phase:<10} (addmm, mm) = {pair}, predicted {steps} x {want[phase]}")
        expect_equal(pair, (steps * want[phase][0], steps * want[phase][1]),
                     f"(aten::addmm, aten::mm) calls in '{phase}' over {steps} steps of a {L}-block GPT",
                     hint="Forward: one addmm per nn.Linear (4 per block) and one mm for the tied output layer; "
                          "backward: two mm per forward matmul. Count the cpu_ops that START inside each annotation.")


#: mm of (4 x 3)(3 x 5) in 2 µs and addmm of bias 6, (2 x 7)(7 x 6) in 3 µs; an aten::bmm is not in
#: MATMUL_OPS and does not count
MATMUL_TINY = {"traceEvents": [
    _x("cpu_op", "aten::mm", 1, 0.0, 2.0, **{"Input Dims": [[4, 3], [3, 5]]}),
    _x("cpu_op", "aten::addmm", 1, 5.0, 3.0, **{"Input Dims": [[6], [2, 7], [7, 6], [], []]}),
    _x("cpu_op", "aten::bmm", 1, 9.0, 1.0, **{"Input Dims": [[2, 3, 3], [2, 3, 3]]})]}


def check_matmul_flops_visible(matmul_flops, trace: dict, cfg: dict, steps: int, batch: int) -> None:
    """MATMUL_TINY (2mkn per product, FLOP/s over the GEMMs' total duration), then the notebook's trace
    against 6 (b s)(12 L h^2 + V h) per step."""
    import copy

    from .grading import expect_close, expect_equal

    f, r = matmul_flops(copy.deepcopy(MATMUL_TINY))
    print(f"matmul_flops(tiny) = ({f}, {r:.4g})")
    expect_equal(int(f), 2 * 4 * 3 * 5 + 2 * 2 * 7 * 6, "FLOPs of the hand-made trace (2mkn per product)",
                 hint="mm's matrices are inputs 0 and 1; addmm's are 1 and 2 (input 0 is the bias).")
    expect_close(r, (120 + 168) / 5e-6, "FLOP/s of the hand-made trace (FLOPs / the GEMMs' total duration)", rtol=1e-9)
    h, L, V, s = cfg["d_model"], cfg["layers"], cfg["vocab"], cfg["seq_len"]
    f, r = matmul_flops(trace)
    print(f"your trace: {int(f)} FLOPs over {steps} steps; 6 * b*s * (12 L h^2 + V h) per step = {6 * batch * s * (12 * L * h * h + V * h)}")
    expect_equal(int(f), steps * 6 * batch * s * (12 * L * h * h + V * h),
                 f"GEMM FLOPs of the notebook's trace: {steps} x 6 * (b s) * (12 L h^2 + V h)",
                 hint="Each weight matrix is used once forward and twice backward; check which inputs are the matrices.")


def check_memory_peak_visible(memory_peak) -> None:
    """The peak of 300 bytes is reached first at ts = 100, the first instant of 'backward'."""
    from .grading import expect_equal

    tiny = {"traceEvents": [
        _x("user_annotation", "forward", 1, 0.0, 100.0), _x("user_annotation", "backward", 1, 100.0, 100.0),
        _mem(150.0, -50, 250), _mem(10.0, 100, 100), _mem(100.0, 200, 300), _mem(250.0, 50, 300)]}
    got = memory_peak(tiny)
    print("memory_peak(tiny) =", got)
    expect_equal((int(got[0]), got[1]), (300, "backward"), "memory_peak of a hand-made trace",
                 hint="The peak of 300 is reached first at ts = 100, which is the first instant of 'backward' "
                      "(forward covers [0, 100)).")


def step_memory_runs(step_memory, cases, guard, contiguous: bool = False) -> tuple[list, dict]:
    """step_memory on a seeded GPT per (cfg, batch, seed, tokens) of `cases` (the batch cut to `tokens`
    per row) and on the MLP Linear(12, 40), GELU, Linear(40, 7) with AdamW and a batch of 5 (torch seeded
    with 3), all inside `guard()` (the cell's no_delegation)."""
    results = []
    with guard():
        for cfg, batch, seed, t in cases:
            m, o, x, y = gpt_case(cfg, batch, seed)
            x, y = x[:, :t], y[:, :t]
            if contiguous:
                x, y = x.contiguous(), y.contiguous()
            results.append(step_memory(m, o, x, y))
        torch.manual_seed(3)
        mlp = torch.nn.Sequential(torch.nn.Linear(12, 40), torch.nn.GELU(), torch.nn.Linear(40, 7))
        mlp_got = step_memory(mlp, torch.optim.AdamW(mlp.parameters(), lr=1e-3), torch.randn(5, 12),
                              torch.randint(0, 7, (5,)))
    return results, mlp_got


#: the hints of the visible step_memory state checks (parameters, gradients, optimizer)
STATE_HINTS = ("fp32: 4 bytes per parameter; the tied output layer is the token embedding (count it once).",
               "Every parameter gets a .grad of its own size.",
               "exp_avg and exp_avg_sq (4 bytes per parameter each) plus one 4-byte 'step' per parameter tensor.")


def check_state_bytes(got, expected, whats, hints=("", "", "")) -> None:
    """Parameter, gradient and AdamW state bytes of one step_memory result against `expected`
    (weights, gradients, optimizer bytes), described by `whats`."""
    from .grading import expect_close, expect_equal

    expect_close(got["parameters"], expected[0], whats[0], rtol=0, hint=hints[0])
    expect_close(got["gradients"], expected[1], whats[1], rtol=0, hint=hints[1])
    expect_equal(int(got["optimizer"]), expected[2], whats[2], hint=hints[2])


__all__ += ["call_on_copies", "check_gpt_op_counts", "check_matmul_flops_visible", "check_memory_peak_visible",
            "check_op_counts_edges", "check_phase_times_visible", "check_phase_values", "check_self_times",
            "check_self_times_visible", "check_state_bytes", "step_memory_runs"]
