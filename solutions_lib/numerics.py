"""Numerical stability of low-precision training: number formats, where a value overflows or
underflows, fp32 master weights, loss scaling with torch's GradScaler semantics, and a
loss-spike detector with a trace simulator to grade it.

Sources:
- formats: IEEE 754-2008 binary32/binary16; bfloat16 (Kalamkar et al. 2019, "A Study of
  BFLOAT16 for Deep Learning Training"); FP8 E4M3/E5M2 (Micikevicius et al. 2022, "FP8
  Formats for Deep Learning"). Every number is read from ``torch.finfo`` except the smallest
  subnormal, which is computed as ``smallest_normal * eps`` = 2^(e_min - mantissa_bits).
- mixed precision and loss scaling: Micikevicius et al. 2018, "Mixed Precision Training"
  (fp32 master weights; scale the loss by s so that the gradients s*g fit fp16, unscale
  before the update); the scale update rule is ``torch.amp.GradScaler`` (dynamic scaling:
  skip the step and multiply the scale by ``backoff_factor`` when a scaled gradient is inf or
  nan; multiply it by ``growth_factor`` after ``growth_interval`` consecutive finite steps).
- loss spikes: flag step t when L_t > factor * median(L_{t-k}, ..., L_{t-1}).

Units: values are plain numbers in the units of the quantity stored (a gradient, a weight);
sizes are element counts; bytes are bytes. Bad arguments (an unknown format, a window < 1,
a factor <= 1, a non-positive scale) raise ValueError with the reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from ._checks import count as _count
from ._checks import positive_real as _positive

#: The formats the course compares, by short name. FP8 only where this torch build has it.
FORMATS: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
for _name, _attr in (("fp8_e4m3", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2")):
    if hasattr(torch, _attr):
        FORMATS[_name] = getattr(torch, _attr)
_ALIASES = {"float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16",
            "float8_e4m3fn": "fp8_e4m3", "e4m3": "fp8_e4m3", "float8_e5m2": "fp8_e5m2", "e5m2": "fp8_e5m2"}


def resolve_format(fmt) -> tuple[str, torch.dtype]:
    """(short name, torch dtype) for a name such as "fp16"/"bfloat16" or a torch floating dtype."""
    if isinstance(fmt, torch.dtype):
        for name, dt in FORMATS.items():
            if dt == fmt:
                return name, dt
        raise ValueError(f"format {fmt} is not one of the course formats {sorted(FORMATS)}")
    if isinstance(fmt, str):
        key = _ALIASES.get(fmt.lower(), fmt.lower())
        if key in FORMATS:
            return key, FORMATS[key]
    raise ValueError(f"unknown number format {fmt!r}; use one of {sorted(FORMATS)} or a torch dtype")


# ---------------------------------------------------------------- formats


@dataclass(frozen=True)
class FormatInfo:
    """One floating-point format. `max`: largest finite value; `smallest_normal`: 2^e_min;
    `smallest_subnormal`: 2^(e_min - mantissa_bits); `eps`: gap between 1 and the next value,
    2^-mantissa_bits (the relative rounding error is at most eps/2)."""

    name: str
    dtype: torch.dtype
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float

    @property
    def dynamic_range_decades(self) -> float:
        """log10(max / smallest_subnormal): how many powers of ten the format spans."""
        return math.log10(self.max / self.smallest_subnormal)


def format_info(fmt) -> FormatInfo:
    """The format's limits from torch.finfo; mantissa bits = -log2(eps) (stored bits, without
    the implicit leading 1); exponent bits = bits - 1 - mantissa bits."""
    name, dt = resolve_format(fmt)
    fi = torch.finfo(dt)
    mant = int(round(-math.log2(fi.eps)))
    return FormatInfo(name=name, dtype=dt, bits=fi.bits, exponent_bits=fi.bits - 1 - mant, mantissa_bits=mant,
                      max=float(fi.max), smallest_normal=float(fi.smallest_normal),
                      smallest_subnormal=float(fi.smallest_normal) * float(fi.eps), eps=float(fi.eps))


def format_table(formats=None) -> list[FormatInfo]:
    """format_info for each format (default: every format in FORMATS, widest first)."""
    return [format_info(f) for f in (formats if formats is not None else FORMATS)]


def ieee_limits(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Closed forms of an IEEE-754-style binary format (the top exponent is reserved for inf/nan):

    bias = 2^(E-1) - 1, e_max = bias, e_min = 1 - bias,
    max = (2 - 2^-M) * 2^e_max, smallest_normal = 2^e_min, smallest_subnormal = 2^(e_min - M),
    eps = 2^-M.
    fp32 is (8, 23), fp16 (5, 10), bf16 (8, 7), FP8 E5M2 (5, 2). FP8 E4M3 "fn" is *not* of this
    kind: it has no infinities and reuses the top exponent, so its max is 448, not 240.
    """
    e = _count("exponent_bits", exponent_bits, 2)
    m = _count("mantissa_bits", mantissa_bits, 1)
    if e > 11 or m > 52:
        raise ValueError(f"exponent_bits <= 11 and mantissa_bits <= 52 (float64 arithmetic), got ({e}, {m})")
    bias = 2 ** (e - 1) - 1
    e_min = 1 - bias
    return {"max": (2.0 - 2.0 ** -m) * 2.0 ** bias, "smallest_normal": 2.0 ** e_min,
            "smallest_subnormal": 2.0 ** (e_min - m), "eps": 2.0 ** -m}


def cast(values, fmt) -> np.ndarray:
    """`values` rounded to the format (round to nearest even, as torch casts) and returned as
    float64: the number the format really stores."""
    _, dt = resolve_format(fmt)
    t = torch.as_tensor(np.asarray(values, dtype=np.float64))
    return t.to(dt).to(torch.float64).numpy()


def overflow_threshold(fmt) -> float:
    """Smallest magnitude that no longer rounds to a finite value: max + half the spacing at max,
    2^floor(log2 max) * eps / 2 (fp16: 65504 + 16 = 65520; round-to-nearest-even sends the tie
    up, to inf). FP8 E4M3fn has no inf: torch saturates such values to 448 (the OCP spec
    makes them NaN); either way they are reported as overflow."""
    info = format_info(fmt)
    return info.max + 2.0 ** math.floor(math.log2(info.max)) * info.eps / 2


def classify(value, fmt) -> dict:
    """What happens to one number stored in a format.

    Returns {"value", "stored", "category", "relative_error"} with category one of
    "zero" (the input is 0), "overflow" (|value| >= overflow_threshold: becomes inf, or
    saturates in FP8 E4M3; values between max and the threshold round down to max), "underflow" (a non-zero value rounds to 0), "subnormal" (stored below
    smallest_normal, with fewer significant bits), "normal".
    """
    if isinstance(value, bool) or not isinstance(value, Real) or math.isnan(float(value)):
        raise ValueError(f"value must be a real number, got {value!r}")
    info = format_info(fmt)
    x = float(value)
    stored = float(cast([x], info.name)[0])
    if x == 0:
        cat = "zero"
    elif not math.isfinite(stored) or abs(x) >= overflow_threshold(info.name):
        cat = "overflow"
    elif stored == 0:
        cat = "underflow"
    elif abs(stored) < info.smallest_normal:
        cat = "subnormal"
    else:
        cat = "normal"
    rel = abs(stored - x) / abs(x) if x != 0 and math.isfinite(stored) and math.isfinite(x) else (0.0 if x == 0 else math.inf)
    return {"value": x, "stored": stored, "category": cat, "relative_error": rel}


# ---------------------------------------------------------------- mixed precision


def accumulate_updates(w0, updates, fmt="bf16", master_fmt=None) -> float:
    """Apply w <- w + u for each u in `updates` and return the final working weight.

    master_fmt=None: the weight lives in `fmt` and is rounded after every addition (pure
    low-precision training). master_fmt="fp32": an fp32 master copy receives the updates and
    the working weight is the master rounded to `fmt` (Micikevicius et al. 2018). With bf16
    (eps = 2^-7) an update smaller than about w * 2^-9 is lost entirely without a master copy.
    """
    _, dt = resolve_format(fmt)
    u = np.asarray(updates, dtype=np.float64).ravel()
    if not np.all(np.isfinite(u)) or not math.isfinite(float(w0)):
        raise ValueError("w0 and the updates must be finite numbers")
    if master_fmt is None:
        w = torch.tensor(float(w0), dtype=dt)
        for x in torch.as_tensor(u).to(dt):
            w = w + x
        return float(w)
    _, mdt = resolve_format(master_fmt)
    master = torch.tensor(float(w0), dtype=mdt)
    for x in torch.as_tensor(u).to(mdt):
        master = master + x
    return float(master.to(dt))


def kahan_bf16_step(param: torch.Tensor, comp: torch.Tensor, update: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One Kahan-compensated update of bf16 weights: (param + update, compensation), both bf16.

    Kahan (1965) summation with the running error kept in a second bf16 tensor, as in bf16-only
    training without an fp32 master copy (Zamirai et al. 2020, "Revisiting BFloat16 Training"):

        y = update - comp;   t = bf16(param + y);   comp = bf16((t - param) - y);   param = t

    `comp` holds what the last rounding lost (with the sign Kahan's algorithm gives it), and the
    next update pays it back, so small updates that plain bf16 rounds away accumulate. The
    arithmetic of each line runs in fp32; only the stored state is bf16 (2 + 2 bytes per weight
    instead of 2 + 4 for a bf16 copy plus an fp32 master).
    """
    for name, t in (("param", param), ("comp", comp)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.bfloat16:
            raise ValueError(f"{name} must be a bfloat16 tensor, got {getattr(t, 'dtype', type(t).__name__)}")
    if not isinstance(update, torch.Tensor) or not update.is_floating_point():
        raise ValueError(f"update must be a floating-point tensor, got {type(update).__name__}")
    if param.shape != comp.shape or param.shape != update.shape:
        raise ValueError(f"param, comp and update must have one shape, got {tuple(param.shape)}, "
                         f"{tuple(comp.shape)}, {tuple(update.shape)}")
    p32, y = param.float(), update.float() - comp.float()
    t = (p32 + y).to(torch.bfloat16)
    new_comp = ((t.float() - p32) - y).to(torch.bfloat16)
    return t, new_comp


def stochastic_round_bf16(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Round fp32 values to bf16 up or down at random, unbiased: E[result] = x.

    A bf16 number is the top 16 bits of an fp32 one. Adding a uniform random integer in
    [0, 2^16) to the fp32 bit pattern and truncating the low 16 bits rounds up with probability
    (x - lo) / (hi - lo), where lo, hi are the bf16 neighbours of x (Gupta et al. 2015, "Deep
    Learning with Limited Numerical Precision"; the bit trick as in bf16 optimizers). Values
    already in bf16 come back unchanged. Draws come from `generator` only, so a seeded generator
    gives the same rounding every time.
    """
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float32:
        raise ValueError(f"x must be a float32 tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if not torch.isfinite(x).all():
        raise ValueError("x must be finite")
    bits = x.contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, x.shape, generator=generator, dtype=torch.int32)
    rounded = (bits + noise) & -65536  # 0xFFFF0000 as a signed int32
    return rounded.view(torch.float32).to(torch.bfloat16)


# ---------------------------------------------------------------- loss scaling


def scaled_roundtrip(grads, scale, fmt="fp16") -> np.ndarray:
    """The gradient the optimizer sees after loss scaling: fmt(fp32(g) * s) / s, in float64.

    The backward pass produces the scaled gradient s*g in `fmt`; GradScaler divides by s in
    fp32 before the step. Entries that underflow come back as 0, entries that overflow as inf.
    """
    s = _positive("scale", scale)
    _, dt = resolve_format(fmt)
    g = torch.as_tensor(np.asarray(grads, dtype=np.float32))
    return (g * torch.tensor(s, dtype=torch.float32)).to(dt).to(torch.float64).numpy() / s


def underflow_overflow_fractions(grads, scale, fmt="fp16") -> tuple[float, float]:
    """(fraction of the non-zero gradients that become 0, fraction that become inf or nan)
    after scaling by `scale` and casting to `fmt`."""
    g = np.asarray(grads, dtype=np.float64).ravel()
    out = scaled_roundtrip(g, scale, fmt).ravel()
    nz = (g != 0) & np.isfinite(g)
    if not nz.any():
        raise ValueError("grads has no non-zero finite entry")
    lost = float(np.mean(out[nz] == 0))
    over = float(np.mean(~np.isfinite(out[nz])))
    return lost, over


def _scaler_args(init_scale, growth_factor, backoff_factor, growth_interval):
    init_scale = _positive("init_scale", init_scale)
    if _positive("growth_factor", growth_factor) <= 1:
        raise ValueError(f"growth_factor must be > 1, got {growth_factor}")
    if not 0 < _positive("backoff_factor", backoff_factor) < 1:
        raise ValueError(f"backoff_factor must lie in (0, 1), got {backoff_factor}")
    return init_scale, float(growth_factor), float(backoff_factor), _count("growth_interval", growth_interval, 1)


def _grad_matrix(grads, keep_fp32):
    g = np.asarray(grads, dtype=np.float32)
    if g.ndim == 1:
        g = g[:, None]
    if g.ndim != 2 or g.shape[0] < 1 or g.shape[1] < 1:
        raise ValueError(f"grads must be a (steps, values) array with at least one step, got shape {np.shape(grads)}")
    mask = None
    if keep_fp32 is not None:
        mask = np.asarray(keep_fp32, dtype=bool).ravel()
        if mask.shape != (g.shape[1],):
            raise ValueError(f"keep_fp32 must have one flag per gradient value ({g.shape[1]}), got shape {np.shape(keep_fp32)}")
    return g, mask


def _scaled_cast(g_row: torch.Tensor, scale: float, dt: torch.dtype, mask) -> torch.Tensor:
    """fp32 scaled gradient cast to the backward dtype, except the entries kept in fp32."""
    scaled = g_row * torch.tensor(scale, dtype=torch.float32)
    out = scaled.to(dt).to(torch.float32)
    if mask is not None:
        out = torch.where(mask, scaled, out)
    return out


def simulate_grad_scaler(grads, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                         growth_interval=2000, fmt="fp16", keep_fp32=None) -> dict:
    """Dynamic loss scaling with torch.amp.GradScaler's exact rule, driven by known gradients.

    `grads` is a (steps, values) array of the *true* (unscaled) gradients of each step.
    At step t with scale s: the backward produces fmt(fp32(g_t) * s) (entries flagged in
    `keep_fp32` stay fp32: an op kept in fp32 under autocast). If any entry is inf or nan, the
    optimizer step is skipped, s <- s * backoff_factor and the growth counter resets; otherwise
    the counter grows and, when it reaches growth_interval, s <- s * growth_factor (only if
    the result is finite in fp32) and the counter resets. The scale is an fp32 number, updated
    as fp32(s * factor).

    Returns {"scales": scale used at each step, "skipped": bool per step, "final_scale": scale
    after the last update, "underflow": per step, the fraction of non-zero finite gradients
    that came back as exactly 0 after unscaling}.
    """
    init_scale, gf, bf, gi = _scaler_args(init_scale, growth_factor, backoff_factor, growth_interval)
    _, dt = resolve_format(fmt)
    g, mask = _grad_matrix(grads, keep_fp32)
    mask_t = None if mask is None else torch.as_tensor(mask)
    gt = torch.as_tensor(g)
    scale = float(np.float32(init_scale))
    tracker = 0
    scales, skipped, underflow = [], [], []
    for row in gt:
        scales.append(scale)
        out = _scaled_cast(row, scale, dt, mask_t)
        finite = bool(torch.isfinite(out).all())
        nz = (row != 0) & torch.isfinite(row)
        lost = ((out * torch.tensor(1.0 / scale, dtype=torch.float32)) == 0) & nz
        underflow.append(float(lost.sum()) / max(1, int(nz.sum())))
        skipped.append(not finite)
        if finite:
            tracker += 1
            if tracker == gi:
                with np.errstate(over="ignore"):
                    grown = float(np.float32(scale * gf))
                if math.isfinite(grown):
                    scale = grown
                tracker = 0
        else:
            scale = float(np.float32(scale * bf))
            tracker = 0
    return {"scales": np.array(scales), "skipped": np.array(skipped, dtype=bool), "final_scale": scale,
            "underflow": np.array(underflow)}


def torch_grad_scaler_trace(grads, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                            growth_interval=2000, fmt="fp16", keep_fp32=None) -> dict:
    """The same experiment with a real ``torch.amp.GradScaler("cpu")``: an fp32 parameter
    whose .grad is set each step to the scaled gradient after the round trip through `fmt`.
    Returns {"scales", "skipped", "final_scale"} (the oracle for simulate_grad_scaler)."""
    init_scale, gf, bf, gi = _scaler_args(init_scale, growth_factor, backoff_factor, growth_interval)
    _, dt = resolve_format(fmt)
    g, mask = _grad_matrix(grads, keep_fp32)
    mask_t = None if mask is None else torch.as_tensor(mask)
    p = torch.nn.Parameter(torch.zeros(g.shape[1]))
    opt = _StepCounter([p])
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=gf, backoff_factor=bf,
                                  growth_interval=gi)
    scales, skipped = [], []
    for row in torch.as_tensor(g):
        scaler.scale(torch.ones(()))  # initialises the scale tensor, as scaler.scale(loss) does
        s = scaler.get_scale()
        n_taken = opt.steps
        p.grad = _scaled_cast(row, s, dt, mask_t)
        scaler.step(opt)  # unscales, checks for inf/nan, calls opt.step() only if all finite
        scaler.update()
        scales.append(s)
        skipped.append(opt.steps == n_taken)
    return {"scales": np.array(scales), "skipped": np.array(skipped, dtype=bool), "final_scale": scaler.get_scale()}


class _StepCounter:
    """The part of an optimizer GradScaler uses (param_groups, step); counts the steps taken.
    (Building a torch.optim optimizer would do the same but its first use imports the compiler
    stack, which costs seconds on a small CPU.)"""

    def __init__(self, params):
        self.param_groups = [{"params": list(params)}]
        self.steps = 0

    def step(self):
        self.steps += 1


def unstable_gradient_stream(n_steps=3000, n_values=64, seed=0, onset=2000, growth=0.02, lr_scale=1.0,
                             critical_lr_scale=0.5, n_unstable=4, base_log10=-5.5, spread_log10=1.0,
                             unstable_start=1e-2, bad_batches=()) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic gradient stream for the fp16 loss-scale collapse (a toy, not a model).

    Healthy values: random signs, |g| = 10^(base_log10 + spread_log10 * N(0, 1)) (log-normal,
    a few decades wide, so the smallest ones underflow fp16 without scaling). From step
    `onset` on, `n_unstable` entries (the gradient of an op whose logits keep growing, e.g. an
    attention or output logit) grow like unstable_start * exp(rate * (t - onset)), with
    rate = growth * (lr_scale - critical_lr_scale) / (1 - critical_lr_scale) when lr_scale
    exceeds the critical value, and 0 otherwise: below a critical learning rate the toy
    instability does not take off (the qualitative finding of Wortsman et al. 2023 on logit
    growth). `bad_batches`: steps whose gradient holds an inf (one bad batch).

    Returns (grads as a float32 (n_steps, n_values) array, mask of the unstable entries).
    """
    n_steps = _count("n_steps", n_steps)
    n_values = _count("n_values", n_values)
    n_unstable = _count("n_unstable", n_unstable, 0)
    if n_unstable > n_values:
        raise ValueError(f"n_unstable={n_unstable} exceeds n_values={n_values}")
    onset = _count("onset", onset, 0)
    _positive("lr_scale", lr_scale)
    if not 0 <= critical_lr_scale < 1:
        raise ValueError(f"critical_lr_scale must lie in [0, 1), got {critical_lr_scale}")
    rng = np.random.default_rng(seed)
    mag = 10.0 ** (base_log10 + spread_log10 * rng.standard_normal((n_steps, n_values)))
    g = mag * rng.choice([-1.0, 1.0], size=(n_steps, n_values))
    mask = np.zeros(n_values, dtype=bool)
    mask[:n_unstable] = True
    rate = growth * max(0.0, lr_scale - critical_lr_scale) / (1 - critical_lr_scale)
    t = np.arange(n_steps)
    amp = np.where(t >= onset, unstable_start * np.exp(rate * np.maximum(t - onset, 0)), 0.0)
    jitter = np.exp(0.1 * rng.standard_normal((n_steps, n_unstable)))
    g[:, :n_unstable] = np.where(amp[:, None] > 0, amp[:, None] * jitter * np.sign(g[:, :n_unstable]),
                                 g[:, :n_unstable])
    for b in bad_batches:
        b = _count("bad batch step", b, 0)
        if b < n_steps:
            g[b, -1] = np.inf
    with np.errstate(over="ignore"):
        return g.astype(np.float32), mask


# ---------------------------------------------------------------- loss spikes


def _losses(losses) -> np.ndarray:
    x = np.asarray(losses, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"losses must be a 1-D sequence, got shape {x.shape}")
    if np.any(np.isfinite(x) & (x < 0)):
        raise ValueError("losses must be >= 0 (a ratio to the median needs a positive scale)")
    return x


def trailing_median(losses, window: int) -> np.ndarray:
    """m_t = median of the finite losses among L_{t-window}, ..., L_{t-1} (step t excluded);
    nan where there is no finite earlier loss (t = 0)."""
    x = _losses(losses)
    k = _count("window", window)
    out = np.full(len(x), np.nan)
    for t in range(1, len(x)):
        prev = x[max(0, t - k):t]
        prev = prev[np.isfinite(prev)]
        if prev.size:
            out[t] = np.median(prev)
    return out


def detect_loss_spikes(losses, window: int = 50, factor: float = 1.3, warmup: int | None = None) -> list[int]:
    """Steps t with L_t > factor * median(L_{t-window}, ..., L_{t-1}).

    The window holds the `window` losses *before* t (t excluded, so a spike cannot raise its
    own threshold; non-finite losses are left out of every window). Steps t < warmup are not
    judged (default warmup = window: the first full window), except that a non-finite loss
    (inf or nan) is flagged at any step. A median is robust: one spike inside the window does
    not lift the threshold for the next steps, and a falling loss (the warm-up drop) never
    crosses it.
    """
    x = _losses(losses)
    k = _count("window", window)
    if isinstance(factor, bool) or not isinstance(factor, Real) or not math.isfinite(float(factor)) or factor <= 1:
        raise ValueError(f"factor must be a finite number > 1 (a spike is a loss above factor x median), got {factor!r}")
    w = k if warmup is None else _count("warmup", warmup, 1)
    med = trailing_median(x, k)
    flagged = []
    for t in range(len(x)):
        if not np.isfinite(x[t]):
            flagged.append(t)
        elif t >= w and np.isfinite(med[t]) and x[t] > factor * med[t]:
            flagged.append(t)
    return flagged


def simulate_loss_trace(n_steps=2000, seed=0, n_spikes=6, initial=10.5, floor=None, warmup_steps=150,
                        noise=0.02, spike_height=(0.5, 2.0), spike_length=(1, 4), first_spike=None,
                        min_gap=120) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """A pretraining loss trace with planted spikes, for grading detectors on unseen traces.

    Smooth part: L(t) = floor + 1.5 (1 + t/300)^-0.5 + (initial - floor - 1.5) exp(-t / (warmup_steps/4)):
    a fast drop during warm-up, then a slow power-law decline; multiplied by exp(noise * N(0,1)).
    Spike i starts at a random step, lasts 1..spike_length[1] steps and multiplies the loss by
    (1 + h), h uniform in spike_height. Spikes are at least `min_gap` steps apart and start
    after `first_spike` (default warmup_steps + 50). `floor` defaults to a random value in
    [1.5, 4.0]. n_spikes=0 gives a smooth trace.

    Returns (losses, [(start, length), ...] sorted by start).
    """
    n_steps = _count("n_steps", n_steps, 10)
    n_spikes = _count("n_spikes", n_spikes, 0)
    rng = np.random.default_rng(seed)
    floor = float(rng.uniform(1.5, 4.0)) if floor is None else _positive("floor", floor)
    if initial <= floor + 1.5:
        raise ValueError(f"initial={initial} must exceed floor + 1.5 = {floor + 1.5}")
    t = np.arange(n_steps)
    tau = max(1.0, warmup_steps / 4)
    smooth = floor + 1.5 * (1 + t / 300.0) ** -0.5 + (initial - floor - 1.5) * np.exp(-t / tau)
    losses = smooth * np.exp(noise * rng.standard_normal(n_steps))
    start = warmup_steps + 50 if first_spike is None else _count("first_spike", first_spike, 0)
    spikes: list[tuple[int, int]] = []
    tries = 0
    while len(spikes) < n_spikes:
        tries += 1
        if tries > 10000:
            raise ValueError(f"cannot place {n_spikes} spikes {min_gap} steps apart after step {start} in {n_steps} steps")
        s0 = int(rng.integers(start, n_steps - spike_length[1]))
        if all(abs(s0 - s) >= min_gap for s, _ in spikes):
            spikes.append((s0, int(rng.integers(spike_length[0], spike_length[1] + 1))))
    for s0, length in spikes:
        losses[s0:s0 + length] *= 1 + rng.uniform(*spike_height)
    return losses, sorted(spikes)


def spike_detection_scores(flagged, spikes) -> tuple[float, float]:
    """(precision, recall) of flagged steps against planted spikes [(start, length), ...].

    precision = flagged steps that fall inside a planted spike / flagged steps (1.0 if none
    flagged); recall = planted spikes with at least one flagged step / planted spikes (1.0 if
    none planted)."""
    f = [int(x) for x in flagged]
    inside = [any(s <= x < s + n for s, n in spikes) for x in f]
    precision = sum(inside) / len(f) if f else 1.0
    recall = sum(any(s <= x < s + n for x in f) for s, n in spikes) / len(spikes) if spikes else 1.0
    return precision, recall


# ---------------------------------------------------------------- instrumentation


class TensorOpRecorder(TorchFunctionMode):
    """Records every torch function or tensor method called inside the ``with`` block (by name:
    "softmax", "matmul", "scaled_dot_product_attention", ...) and the largest tensor any of them
    returns (in elements). Used to show, and check, that tiled attention never builds the full
    score matrix and that an answer does not call a softmax kernel. (A torch-function mode, not
    a dispatch mode: entering a dispatch mode imports torch's compiler stack, seconds on a small
    CPU.)"""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops.append(getattr(func, "__name__", str(func)))
        if isinstance(out, torch.Tensor):
            self.largest = max(self.largest, out.numel())
        elif isinstance(out, (tuple, list, dict)):
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    self.largest = max(self.largest, t.numel())
        return out

    def called(self, *fragments: str) -> list[str]:
        """The recorded names that contain any of `fragments` (e.g. "softmax")."""
        return sorted({op for op in self.ops if any(f in op for f in fragments)})
