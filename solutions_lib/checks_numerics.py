"""Checks of 07 exercises (numerics and attention), kept here so that each test cell reads as a few
lines of intent.

Oracles are plain torch/numpy restatements of the notebook's text (the precision run's protocol,
attention through `scaled_dot_product_attention`, the first step beyond fp16's range), never the
reference answers; hidden inputs come from the seeds the test cells pass. Functions that measure
the student's code from inside its process (`one_pass_stats`: a one-shot stream and a tensor-op
recorder) are meant for cells that already run beside the kernel (see grader_side.BESIDE).
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from .checks_cases import expect_each_close, expect_each_equal  # noqa: F401  (the cells call them as ck.*)
from .grading import expect_between, expect_close, expect_equal

#: Calls a hand-built softmax or attention may not make.
BANNED = ("softmax", "logsumexp", "scaled_dot_product")


# ---------------------------------------------------------------- A1 GradScaler
def scaler_trace(t) -> tuple[np.ndarray, np.ndarray, float]:
    """(scales as float64, skipped as bool, final_scale) of a trace dict."""
    return np.asarray(t["scales"], dtype=np.float64), np.asarray(t["skipped"], dtype=bool), float(t["final_scale"])


def scaler_streams(seed) -> list[tuple[np.ndarray, dict, dict]]:
    """6 gradient streams (80..200 steps of 6 values over 15 decades, one inf and one nan planted),
    each as (grads, scaler kwargs, {}) and (grads, kwargs, {"dtype": torch.bfloat16})."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(6):
        n = int(rng.integers(80, 200))
        g = (rng.standard_normal((n, 6)) * 10.0 ** rng.uniform(-9, 6, (n, 1))).astype(np.float32)
        g[rng.integers(0, n, 2), int(rng.integers(0, 6))] = [np.inf, np.nan]
        kw = dict(init_scale=float(2.0 ** rng.integers(0, 20)), growth_factor=[2.0, 1.5, 4.0][i % 3],
                  backoff_factor=[0.5, 0.25, 0.7][i % 3], growth_interval=int(rng.integers(1, 9)))
        cases.append((g, kw, {}))
        cases.append((g, kw, {"dtype": torch.bfloat16}))
    return cases


def real_scaler_trace(torch_grad_scaler_trace, grads, kw, extra) -> dict:
    """What a real torch.amp.GradScaler does on the case (`torch_grad_scaler_trace` from the kit)."""
    fmt = "bf16" if extra.get("dtype") is torch.bfloat16 else "fp16"
    return torch_grad_scaler_trace(grads, **kw, fmt=fmt, keep_fp32=extra.get("keep_fp32"))


def expect_scaler_traces(cases, got, real) -> None:
    """Per hidden stream: the scales, the skipped steps and the final scale against the real GradScaler."""
    for i, ((g, kw, extra), (sc, sk, fin), r) in enumerate(zip(cases, got, real)):
        what = f"hidden stream {i} ({len(g)} steps, {kw}, {', '.join(extra) or 'fp16'})"
        expect_close(sc, r["scales"], f"scales of {what} vs the real GradScaler", rtol=0,
                     hint="Round the scale to float32 after every change; grow only after growth_interval good steps in a row.")
        expect_equal(sk.tolist(), r["skipped"].tolist(), f"skipped steps of {what}")
        expect_close(fin, r["final_scale"], f"final_scale of {what}", rtol=0)


# ---------------------------------------------------------------- A2 precision runs
def oracle_run(precision_task, fmt, peak_lr, steps=300, warmup=100, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """The protocol of the exercise in plain torch: per-step loss and max |out| of the cast output."""
    dt = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[fmt]
    x, y, model = precision_task(seed)
    losses, max_abs = [], []
    for t in range(steps):
        out = model(x)
        out = out if dt is None else out.to(dt).float()
        loss = F.mse_loss(out, y)
        losses.append(float(loss.detach()))
        max_abs.append(float(out.detach().abs().max()))
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= peak_lr * min(1.0, (t + 1) / warmup) * p.grad
    return np.array(losses), np.array(max_abs)


def first_bad_step(losses, max_abs=None, limit: float = 65504.0) -> int:
    """The first step with a non-finite loss, or (given max_abs) a non-finite output or one above
    `limit`; -1 if none."""
    losses = np.asarray(losses, dtype=float)
    bad = ~np.isfinite(losses)
    if max_abs is not None:
        max_abs = np.asarray(max_abs, dtype=float)
        bad = bad | ~np.isfinite(max_abs) | (np.nan_to_num(max_abs, nan=np.inf) > limit)
    return int(np.argmax(bad)) if bad.any() else -1


def check_precision_run(got, precision_task, fmt, peak_lr, steps, warmup, seed, what) -> None:
    """A run `got` = {"loss", "max_abs_out"} against the oracle run with the same seed: shapes, the
    calm first warmup/2 steps, and (12 steps of slack) the first step beyond fp16 and the first
    non-finite loss."""
    want_l, want_o = oracle_run(precision_task, fmt, peak_lr, steps, warmup, seed)
    got_l = np.asarray(got["loss"], dtype=float)
    got_o = np.asarray(got["max_abs_out"], dtype=float)
    expect_equal([got_l.shape, got_o.shape], [(steps,), (steps,)], f"shapes of loss and max_abs_out ({what})",
                 hint="One value per step, from step 0 (before the first update).")
    calm = warmup // 2
    expect_close(got_l[:calm], want_l[:calm], f"loss of the first {calm} steps ({what})", rtol=2e-3,
                 hint="x, y, model = precision_task(seed); cast the output through the format; F.mse_loss in fp32; "
                 "lr_t = peak_lr * min(1, (t + 1) / warmup); p -= lr_t * p.grad.")
    expect_close(got_o[:calm], want_o[:calm], f"max |out| of the first {calm} steps ({what})", rtol=2e-3,
                 hint="The largest absolute value of the (cast) output of each step, recorded before the update.")
    expect_close(first_bad_step(got_l, got_o), first_bad_step(want_l, want_o),
                 f"first step beyond the fp16 range, -1 if none ({what})", rtol=0, atol=12,
                 hint="Cast the output through the format at every step and keep training after it overflows.")
    expect_close(first_bad_step(got_l), first_bad_step(want_l), f"first step with a non-finite loss, -1 if none ({what})",
                 rtol=0, atol=12, hint="Only fp16 overflows to inf (65504 is its largest finite value); bf16 and fp32 "
                 "stay finite. No loss scaling, no skipped steps.")


def as_step(s) -> int:
    """A step or None, as an int (None shown as -1)."""
    return -1 if s is None else int(s)


def overflow_traces(seed, n: int = 8) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(losses, max_abs_out, limit) traces: an inf loss, a nan output, an output of 1.5 x 65504
    planted in turn, and every fourth trace clean, with limits 65504, 65504, 1e4, 3e4 in turn."""
    rng = np.random.default_rng(seed)
    inf, nan = float("inf"), float("nan")
    traces = []
    for i in range(n):
        k = int(rng.integers(5, 60))
        losses, outs = rng.uniform(0.01, 2.0, k), 10.0 ** rng.uniform(-1, 4.5, k)
        if i % 4 != 3:
            at = int(rng.integers(0, k))
            [losses, outs, outs][i % 4][at] = [inf, nan, 65504.0 * 1.5][i % 4]
        traces.append((losses, outs, [65504.0, 65504.0, 1e4, 3e4][i % 4]))
    return traces


# ---------------------------------------------------------------- B online softmax and FlashAttention
def one_pass_stats(online_softmax_stats, x, width, what):
    """Feed the columns of x to `online_softmax_stats` as a one-shot stream of blocks of `width`
    (an int or a list of widths); check the one-pass rules (no softmax/logsumexp call, at most two
    blocks alive, no tensor larger than two blocks) and return its (m, l). Runs in the kernel."""
    from .numerics import TensorOpRecorder
    from .probes_attention import OneShotBlocks

    stream = OneShotBlocks(x, width)
    with TensorOpRecorder() as rec:
        m, l = online_softmax_stats(stream)
    expect_equal(rec.called(*BANNED), [], f"softmax/logsumexp calls inside online_softmax_stats ({what})",
                 hint="Build the running max and sum yourself from max, exp and sum.")
    expect_between(stream.max_alive, None, 2, f"blocks online_softmax_stats still held when it asked for the next one ({what})",
                   hint="Read the blocks in one pass and let each go: no list of blocks, no second pass.")
    widest = x[..., :max(width) if isinstance(width, (list, tuple)) else width].numel()
    expect_between(rec.largest, None, 2 * widest, f"elements of the largest tensor online_softmax_stats created ({what})",
                   hint=f"At most two blocks ({2 * widest} elements); a copy of the whole rows means two passes.")
    return m, l


def softmax_inputs(gen) -> tuple[list[torch.Tensor], list]:
    """Float64 inputs of shapes (1,), (5,), (4, 33), (2, 3, 40), (3, 1, 2, 9) at magnitudes 0.1..1e4,
    a row with -inf at both ends, and rows that open with a block of -inf; with the block widths to use."""
    xs = [torch.randn(*shape, generator=gen, dtype=torch.float64) * float(10 ** torch.empty(1).uniform_(-1, 4, generator=gen))
          for shape in [(1,), (5,), (4, 33), (2, 3, 40), (3, 1, 2, 9)]]
    xs.append(torch.tensor([[-math.inf, 0.0, 2.0, -math.inf]], dtype=torch.float64))
    xs.append(torch.cat([torch.full((3, 6), -math.inf, dtype=torch.float64),
                         torch.randn(3, 7, generator=gen, dtype=torch.float64) * 50], -1))
    return xs, [1, 2, 5, 3, [2, 1, 4], 1, 3]


def softmax_oracle(x) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(row max m, sum of exp(x - m), torch.softmax) of x."""
    return x.amax(-1), torch.exp(x - x.amax(-1, keepdim=True)).sum(-1), torch.softmax(x, -1)


def expect_softmax_stats(xs, widths, got, soft, expected) -> None:
    """Per hidden input: m exactly, l and the softmax to 1e-10."""
    for x, w, (m, l), s, (em, el, es) in zip(xs, widths, got, soft, expected):
        what = f"hidden {tuple(x.shape)} input of magnitude {float(x[torch.isfinite(x)].abs().max()):.3g}, blocks of {w}"
        expect_close(m, em, f"m on a {what}", rtol=0, atol=0)
        expect_close(l, el, f"l on a {what}", rtol=1e-10, atol=1e-13, hint="A block of -inf at the start must not give nan.")
        expect_close(s, es, f"online_softmax on a {what}", rtol=1e-10, atol=1e-13)


def attention_oracle(q, k, v, causal, scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, row logsumexp) of attention, through torch's scaled_dot_product_attention and a
    top-left-aligned causal mask."""
    sc = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * sc
    if causal:
        s = s.masked_fill(torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).triu(1), -math.inf)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale), torch.logsumexp(s, -1)


def attention_inputs(gen, cases) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(q, k, v) for each case ((B, h, s_q, s_k, d, d_v), block, causal, scale); q is 6x larger
    where scale = 2.5 (scores far from 0)."""
    data = []
    for (B, h, sq, sk, d, dv), _, _, scale in cases:
        qq = torch.randn(B, h, sq, d, generator=gen) * (6.0 if scale == 2.5 else 1.0)
        kk, vv = torch.randn(B, h, sk, d, generator=gen), torch.randn(B, h, sk, dv, generator=gen)
        data.append((qq, kk, vv))
    return data


def expect_attention_outputs(cases, got, expected) -> None:
    """Per hidden case: the output's shape, the output and the lse against the oracle."""
    for (shape, bs, causal, scale), (o, lse), (eo, el) in zip(cases, got, expected):
        what = f"hidden case (B, h, s_q, s_k, d, d_v) = {shape}, block {bs}, causal={causal}, scale={scale}"
        expect_equal(tuple(o.shape), tuple(eo.shape), f"output shape for {what}")
        expect_close(o, eo, f"output for {what}", rtol=1e-5, atol=2e-5)
        expect_close(lse, el, f"lse for {what}", rtol=1e-5, atol=2e-5)


# ---------------------------------------------------------------- C attention memory
BENCH_METRICS = ("saved standard", "saved flash", "backward standard", "backward flash", "ratio forward", "ratio saved",
                 "ratio backward")


def benchmark_configs(seed, n: int = 12) -> list[tuple[int, int, int, int, float]]:
    """(batch, seq_len, d_model, heads, bytes per element) with heads dividing d_model."""
    rng = np.random.default_rng(seed)
    configs = []
    for _ in range(n):
        hh = int(rng.choice([1, 2, 4, 8, 12, 16, 32]))
        configs.append((int(rng.integers(1, 16)), int(rng.integers(1, 9000)), hh * int(rng.choice([16, 32, 64, 80, 128])), hh,
                        float(rng.choice([1, 2, 4]))))
    return configs


def benchmark_metrics(bench) -> list:
    """An AttentionBenchmark's numbers in BENCH_METRICS order."""
    return ([bench.saved_bytes(m) for m in ("standard", "flash")] + [bench.backward_bytes(m) for m in ("standard", "flash")]
            + [bench.savings_ratio(p) for p in ("forward", "saved", "backward")])


def expect_benchmark_metrics(configs, got, expected) -> None:
    for cfg, g, e in zip(configs, got, expected):
        for name, gv, ev in zip(BENCH_METRICS, g, e):
            expect_close(gv, ev, f"{name} for (batch, seq_len, d_model, heads, bytes) = {cfg}", rtol=1e-9)


def crossover_pairs(seed, n: int = 10) -> list[tuple[int, int]]:
    """(d_model, heads): four edge pairs, then n with heads dividing d_model."""
    rng = np.random.default_rng(seed)
    pairs = [(1536, 24), (64, 1), (96, 96), (3072, 3)]
    for _ in range(n):
        hh = int(rng.integers(1, 65))
        pairs.append((hh * int(rng.integers(1, 300)), hh))
    return pairs


# ---------------------------------------------------------------- D loss spikes
def planted_scores(spiky, flagged) -> tuple[float, float]:
    """(precision, recall) over traces with planted spikes [(start, length), ...]: the share of the
    flagged steps inside a planted spike, and the share of the planted spikes with a flag inside."""
    tp = sum(any(s <= int(x) < s + n for s, n in sp) for (_, sp), fl in zip(spiky, flagged) for x in fl)
    n_flag = sum(len(fl) for fl in flagged)
    found = sum(any(s <= int(x) < s + n for x in fl) for (_, sp), fl in zip(spiky, flagged) for s, n in sp)
    n_spikes = sum(len(sp) for _, sp in spiky)
    return (tp / n_flag if n_flag else 0.0), found / n_spikes
