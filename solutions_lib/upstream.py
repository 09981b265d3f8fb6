"""Correct upstream answers for test cells that grade a later answer (docs/GRADING.md rule 6).

One slip costs one cell: when the answer under test calls an earlier answer of the same
notebook (02's `wsd` counts its cooldown with `steps_from_fraction`; `design_pretraining_schedule`
builds on four earlier answers; `linear_scaling_table` calls `scale_lr`), its test cell runs it
with these functions in place of the student's earlier answers::

    with upstream.swapped(globals(), steps_from_fraction=upstream.steps_from_fraction):
        ...  # checks of wsd

A kit module, not withheld (course/withheld_view.py): the test cells forbid calling it from the
answers they grade (`forbidden_except`), so it is no shortcut. Each function is the reference
arithmetic without the argument checks; tests/test_upstream.py compares them with the references.

**The student edition** (course/student_kit.py) ships no copy of the answers in `STUDENT_OWN`:
those are used only in the notebook where the student writes them, so there `upstream.<name>`
is an `OwnAnswer` that calls the student's own `<name>`, and `swapped` leaves the student's own
in place (a slip upstream may then cost more than one cell in the student's own Validate; the
grade, which the instructor's full copy computes, is unaffected). The other copies are used by
later notebooks, which have no answer of that name, and stay (docs/THREAT_MODEL.md).
"""
from __future__ import annotations

import contextlib
import math


#: Copies that only the notebook whose student writes them uses (course/student_kit.py leaves
#: them out of the student edition; tests/test_upstream_edition.py checks that rule).
STUDENT_OWN = ("steps_from_fraction", "wsd", "scale_lr", "fit_schedule_to_budget", "two_batch_noise_scale",
               "bucket_plan", "minhash_signature", "young_interval", "arithmetic_intensity", "chinchilla_optimal",
               "quality_flags", "labels_shifted", "mask_is_causal", "layer_activation_bytes", "zero_table")


class OwnAnswer:
    """The student edition's stand-in for a course copy in `STUDENT_OWN`: calling it calls the
    notebook's own function of that name (the student's answer); `swapped` skips it."""

    def __init__(self, name: str):
        self.__name__ = self.__qualname__ = name

    def __repr__(self):
        return f"<your own {self.__name__}: the student edition has no course copy of it>"

    def __call__(self, *args, **kwargs):
        fn = _notebook_namespace().get(self.__name__)
        if fn is None or isinstance(fn, OwnAnswer) or not callable(fn):
            raise NameError(f"upstream.{self.__name__}: the student edition has no course copy of "
                            f"{self.__name__}; run the cell that defines your own {self.__name__} first "
                            "(the checks use it in place of the course's copy)")
        return fn(*args, **kwargs)


def _notebook_namespace() -> dict:
    """The running notebook's globals (IPython's user namespace), else __main__'s."""
    try:
        from IPython import get_ipython
        ip = get_ipython()
    except ImportError:      # pragma: no cover
        ip = None
    if ip is not None:
        return ip.user_ns
    import __main__
    return vars(__main__)


def steps_from_fraction(total_steps, fraction):
    """ceil(fraction * total_steps), ignoring float noise above a whole number (0.07 * 100)."""
    x = fraction * total_steps
    return int(math.ceil(x - 1e-9 * max(1.0, x)))


def wsd(step, peak_lr, warmup_steps, total_steps, decay_fraction=0.1, min_lr=0.0, shape="linear"):
    """Warmup-stable-decay (the convention of 02's exercise 7)."""
    decay = steps_from_fraction(total_steps, decay_fraction)
    if warmup_steps + decay > total_steps or shape not in ("linear", "sqrt"):
        raise ValueError("warmup and cooldown overlap, or the shape is unknown")
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    start = total_steps - decay
    if step < start:
        return peak_lr
    if step >= total_steps:
        return min_lr
    x = (step - start + 1) / decay
    return min_lr + (peak_lr - min_lr) * ((1.0 - x) if shape == "linear" else (1.0 - math.sqrt(x)))


def scale_lr(base_lr, base_batch, new_batch, rule="linear"):
    """Linear or square-root batch-size scaling of a learning rate."""
    ratio = new_batch / base_batch
    if rule == "linear":
        return base_lr * ratio
    if rule == "sqrt":
        return base_lr * math.sqrt(ratio)
    raise ValueError(f"unknown rule {rule!r}")


def fit_schedule_to_budget(token_budget, tokens_per_step, warmup_ratio=0.01, decay_fraction=0.2):
    """The step plan of a token budget (02's exercise 9)."""
    total = -(-int(token_budget) // int(tokens_per_step))
    warmup = steps_from_fraction(total, warmup_ratio)
    decay = steps_from_fraction(total, decay_fraction)
    if warmup + decay > total:
        raise ValueError("warmup and cooldown do not fit in the run")
    return {"total_steps": total, "warmup_steps": warmup, "decay_steps": decay,
            "cooldown_start": total - decay, "tokens_trained": total * int(tokens_per_step)}


def two_batch_noise_scale(sq_norms_small, sq_norms_big, b_small, b_big):
    """(|G|^2, tr Sigma, B_simple) from mean |G_B|^2 at two batch sizes (McCandlish et al. 2018)."""
    small = sum(float(x) for x in sq_norms_small) / len(sq_norms_small)
    big = sum(float(x) for x in sq_norms_big) / len(sq_norms_big)
    g2 = (b_big * big - b_small * small) / (b_big - b_small)
    trace = (small - big) / (1 / b_small - 1 / b_big)
    return g2, trace, trace / g2


def reduce_scatter_time(n, nbytes, alpha, bandwidth):
    """Ring reduce-scatter (05): (n-1) alpha + (n-1)/n * nbytes / bandwidth seconds."""
    return (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


def all_gather_time(n, nbytes, alpha, bandwidth):
    """Ring all-gather of an nbytes output (05): the same cost as the reduce-scatter."""
    return (n - 1) * alpha + (n - 1) / n * nbytes / bandwidth


def ring_allreduce_time(n, nbytes, alpha, bandwidth):
    """Ring all-reduce (05): 2(n-1) alpha + 2 (n-1)/n * nbytes / bandwidth seconds."""
    return reduce_scatter_time(n, nbytes, alpha, bandwidth) + all_gather_time(n, nbytes, alpha, bandwidth)


def fit_alpha_beta(sizes_bytes, seconds):
    """(alpha, bandwidth) minimising sum(((alpha + S b - t) / t)^2), alpha >= 0 (05, C2)."""
    import numpy as np

    S = np.asarray(sizes_bytes, dtype=np.float64).ravel()
    t = np.asarray(seconds, dtype=np.float64).ravel()
    A = np.stack([np.ones_like(S), S], axis=1) / t[:, None]
    (alpha, slope), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    if alpha < 0:
        x = S / t
        alpha, slope = 0.0, float(x.sum() / (x @ x))
    if slope <= 0:
        raise ValueError("the times do not grow with the size")
    return float(alpha), float(1.0 / slope)


def bucket_plan(sizes_bytes, cap_bytes):
    """DDP's bucket rule (10, exercises 1): close a bucket once its bytes reach the cap."""
    if isinstance(cap_bytes, bool) or not isinstance(cap_bytes, (int, float)) or not math.isfinite(cap_bytes) \
            or cap_bytes <= 0:
        raise ValueError(f"cap_bytes must be a number > 0, got {cap_bytes!r}")
    buckets, current, filled = [], [], 0
    for i, s in enumerate(sizes_bytes):
        current.append(i)
        filled += s
        if filled >= cap_bytes:
            buckets.append(current)
            current, filled = [], 0
    return buckets + ([current] if current else [])


def minhash_signature(shingle_set, num_perm=128, seed=0):
    """MinHash of a set of shingles (08): per permutation, min of (a x + b) mod (2^31 - 1) over md5 hashes."""
    import hashlib

    import numpy as np

    p = (1 << 31) - 1
    g = np.random.default_rng(seed)
    a = g.integers(1, p, size=num_perm, dtype=np.int64)
    b = g.integers(0, p, size=num_perm, dtype=np.int64)
    x = np.array([int(hashlib.md5(" ".join(s).encode()).hexdigest(), 16) % p for s in shingle_set], dtype=np.int64)
    return ((a[:, None] * x[None, :] + b[:, None]) % p).min(axis=1)


def _attention_benchmark():
    from .attention import AttentionBenchmark as cls   # kit class, not withheld: 07's C1 answer

    return cls


def quality_flags(text):
    """08's heuristic quality rules (Gopher/C4 style): {rule: True where the rule flags the text}."""
    import string

    words = text.split()
    n = len(words)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    mean_len = sum(len(w) for w in words) / n if n else 0.0
    symbols = text.count("#") + text.count("...") + text.count("\u2026")
    ell = sum(ln.endswith(("...", "\u2026")) for ln in lines) / len(lines) if lines else 0.0
    alpha = sum(any(c.isalpha() for c in w) for w in words) / n if n else 0.0
    stops = sum(w.strip(string.punctuation).lower() in {"the", "be", "to", "of", "and", "that", "have", "with"}
                for w in words)
    dup = len(lines) - len(set(lines))
    return {"word_count": n < 20 or n > 100_000, "mean_word_length": n == 0 or not 3 <= mean_len <= 10,
            "symbol_ratio": n == 0 or symbols / n > 0.1, "ellipsis_lines": ell > 0.3,
            "alphabetic_words": n == 0 or alpha < 0.8, "stop_words": stops < 2,
            "duplicate_lines": (dup / len(lines) if lines else 0.0) > 0.3, "curly_brace": "{" in text or "}" in text}


def labels_shifted(inputs, targets, ignore_index=-100):
    """09: True iff target_i = input_(i+1) wherever the target is known (same shapes)."""
    if inputs.shape != targets.shape:
        return False
    known = targets[:, :-1] != ignore_index
    return bool(((targets[:, :-1] == inputs[:, 1:]) | ~known).all())


def mask_is_causal(mask):
    """09: True iff a (T, T) mask lets query i see key j exactly when j <= i (bool: True =
    allowed; float: 0 = allowed)."""
    import torch

    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        return False
    allowed = mask if mask.dtype == torch.bool else mask == 0
    i = torch.arange(mask.shape[0])
    return bool(torch.equal(allowed, i[None, :] <= i[:, None]))


def layer_activation_bytes(seq_len, batch, hidden, heads, bytes_per_value=2):
    """03: Korthikanti et al.'s per-layer activation bytes, s b h (16 d + 2) + a s^2 b (2 d + 1)
    (masks stay 1 byte; d = 2 gives s b h (34 + 5 a s / h))."""
    if seq_len < 1 or batch < 1 or heads < 1 or hidden % heads:
        raise ValueError("need seq_len, batch, heads >= 1 and heads dividing hidden")
    d = bytes_per_value
    return seq_len * batch * hidden * (16 * d + 2) + heads * seq_len ** 2 * batch * (2 * d + 1)


def zero_table(n_params, world_size, weight_bytes, grad_bytes, optimizer_bytes) -> dict:
    """ZeRO's model-state bytes per GPU by stage 0-3 (03's `zero_table`, Rajbhandari et al. 2020)."""
    P, N, w, g, o = n_params, world_size, weight_bytes, grad_bytes, optimizer_bytes
    return {0: P * (w + g + o), 1: P * (w + g) + P * o / N, 2: P * w + P * (g + o) / N, 3: P * (w + g + o) / N}


def young_interval(checkpoint_cost, mtbf):
    """Young's checkpoint interval sqrt(2 C M) (08)."""
    return math.sqrt(2 * checkpoint_cost * mtbf)


def arithmetic_intensity(m, n, k, bytes_per_element=2):
    """FLOP per byte of C = A B, A (m x k), B (k x n), ideal traffic (06, A.1): 2mnk / (b (mk + kn + mn))."""
    return 2.0 * m * n * k / (bytes_per_element * (m * k + k * n + m * n))


_CHINCHILLA_FITS = {   # (E, A, B, alpha, beta): Hoffmann et al. 2022 eq. 10; Besiroglu et al. 2024 (Epoch AI)
    "hoffmann": (1.69, 406.4, 410.7, 0.34, 0.28),
    "epoch": (1.8172, 482.01, 2085.43, 0.3478, 0.3658),
}


def chinchilla_optimal(compute_flops, fit="hoffmann"):
    """(N_opt, D_opt) minimising E + A/N^alpha + B/D^beta subject to 6 N D = C, closed form (06, C.3)."""
    _, A, B, alpha, beta = _CHINCHILLA_FITS[fit]
    s = alpha + beta
    g = (alpha * A / (beta * B)) ** (1.0 / s)
    n = g * (compute_flops / 6.0) ** (beta / s)
    return n, compute_flops / (6.0 * n)


def layout_memory_per_rank(layout, model):
    """Bytes per GPU of a (dp, tp, pp, cp) layout, {"states", "activations", "total"} (11 theory, 2)."""
    L, h, s, B, b = (model[k] for k in ("layers", "hidden", "seq_len", "global_batch", "micro_batch"))
    d, t, p, c, z = (layout[k] for k in ("dp", "tp", "pp", "cp", "zero"))
    P = 12.0 * h * h * (L // p) / t
    sharded = {0: 0.0, 1: 12.0, 2: 14.0, 3: 16.0}[z]
    states = P * (16.0 - sharded) + P * sharded / (d * c)
    acts = (L // p) * min(p, B // (d * b)) * (s / c) * b * h * ((34.0 / t) if layout["sp"] else (10.0 + 24.0 / t))
    return {"states": states, "activations": acts, "total": states + acts}


def layout_step_time(layout, model, cluster, reshard_after_forward=True):
    """Seconds of one step of a (dp, tp, pp) layout, {"compute", "tp", "pp", "bubble", "dp", "total"} (11 theory, 3).
    ZeRO-2/3 traffic per micro-batch; `reshard_after_forward` (ZeRO-3): all-gather again for the backward."""
    L, h, s, B, b = (model[k] for k in ("layers", "hidden", "seq_len", "global_batch", "micro_batch"))
    d, t, p = layout["dp"], layout["tp"], layout["pp"]
    N, G, F = cluster["n_gpus"], cluster["gpus_per_node"], cluster["flops"]
    intra, inter = cluster["intra"], cluster["inter"]

    def allreduce(n, nbytes, link):
        return 2 * (n - 1) * link[0] + 2 * (n - 1) / n * nbytes / link[1]

    l, m, T = L // p, B // (d * b), b * s
    t_c = 72.0 * h * h * l * T / (t * F)
    t_tp = 4 * l * allreduce(t, T * h * 2.0, intra) if t > 1 else 0.0
    pl = intra if N <= G else inter
    t_pp = 2 * (pl[0] + T * h * 2.0 / pl[1]) if p > 1 else 0.0
    dl = intra if G % (t * d) == 0 else inter
    half = allreduce(d, 12.0 * h * h * l * 2.0 / t, dl) / 2       # a reduce-scatter or an all-gather
    z = layout["zero"]
    t_dp = 0.0 if d == 1 else 2 * half if z <= 1 else (m + 1) * half if z == 2 else \
        m * (3 if reshard_after_forward else 2) * half
    slot = t_c + t_tp + t_pp
    return {"compute": m * t_c, "tp": m * t_tp, "pp": m * t_pp, "bubble": (p - 1) * slot, "dp": t_dp,
            "total": (m + p - 1) * slot + t_dp}


def layout_memory_options(layout, model, chunks=1, recompute="selective"):
    """`layout_memory_per_rank` with interleaved 1F1B (`chunks` v) and a `recompute` choice (11 theory, 5):
    activations L/p x held x bytes per layer, held = min(p, m) (v = 1 or p = 1) or min(p + (p-1)/v, m)."""
    L, h, a, s, B, b = (model[k] for k in ("layers", "hidden", "heads", "seq_len", "global_batch", "micro_batch"))
    d, t, p, c = (layout[k] for k in ("dp", "tp", "pp", "cp"))
    states = layout_memory_per_rank(layout, model)["states"]
    l, m, s1 = L // p, B // (d * b), s / c
    per_layer = {"selective": (34.0 / t) if layout["sp"] else (10.0 + 24.0 / t),
                 "none": ((34.0 / t) if layout["sp"] else (10.0 + 24.0 / t)) + 5.0 * a * s1 / (h * t),
                 "full": (2.0 / t) if layout["sp"] else 2.0}[recompute] * s1 * b * h
    held = min(p + (p - 1) / chunks, m) if (p > 1 and chunks > 1) else min(p, m)
    acts = l * held * per_layer
    return {"states": states, "activations": acts, "total": states + acts}


def layout_step_time_options(layout, model, cluster, reshard_after_forward=True, chunks=1, recompute="selective"):
    """`layout_step_time` with interleaved 1F1B (`chunks` v) and a `recompute` choice (11 theory, 5): full
    recomputation x 4/3 compute and x 3/2 TP traffic; slot t_c + t_tp + v t_pp, (m v + p - 1) slots / v."""
    base = layout_step_time(layout, model, cluster, reshard_after_forward)
    p = layout["pp"]
    m = model["global_batch"] // (layout["dp"] * model["micro_batch"])
    v = chunks if p > 1 else 1
    full = recompute == "full"
    t_c = base["compute"] / m * (4.0 / 3.0 if full else 1.0)
    t_tp = base["tp"] / m * (1.5 if full else 1.0)
    t_pp = base["pp"] / m
    slot = t_c + t_tp + v * t_pp
    return {"compute": m * t_c, "tp": m * t_tp, "pp": m * v * t_pp, "bubble": (p - 1) * slot / v, "dp": base["dp"],
            "total": (m * v + p - 1) * slot / v + base["dp"]}


ANSWERS = (steps_from_fraction, wsd, scale_lr, fit_schedule_to_budget, two_batch_noise_scale,
           reduce_scatter_time, all_gather_time, ring_allreduce_time, fit_alpha_beta, bucket_plan,
           minhash_signature, young_interval, arithmetic_intensity, chinchilla_optimal, quality_flags,
           layout_memory_per_rank, layout_step_time, labels_shifted, mask_is_causal,
           layer_activation_bytes, layout_memory_options, layout_step_time_options, zero_table)


def forbidden_except(*allowed) -> tuple:
    """The functions of this module that an answer may not call, except `allowed` (the
    upstream answers a test cell swaps in): pass them to `grading.no_delegation`. (An
    `OwnAnswer` of the student edition calls the student's own code: nothing to forbid.)"""
    return tuple(f for f in ANSWERS if f not in allowed and not isinstance(f, OwnAnswer))


@contextlib.contextmanager
def swapped(namespace: dict, **replacements):
    """Bind `replacements` in `namespace` (a notebook's globals()) for the block, then restore.
    An `OwnAnswer` (student edition) is skipped: the student's own function stays."""
    replacements = {k: v for k, v in replacements.items() if not isinstance(v, OwnAnswer)}
    missing = object()
    saved = {k: namespace.get(k, missing) for k in replacements}
    namespace.update(replacements)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is missing:
                namespace.pop(k, None)
            else:
                namespace[k] = v


def __getattr__(name):
    if name == "AttentionBenchmark":
        return _attention_benchmark()
    raise AttributeError(name)


_KEPT_SWAPS: list = []   # swap_for_cell outside IPython: the names stay swapped (see its docstring)


def swap_for_cell(namespace: dict, **replacements) -> None:
    """`swapped` for the rest of the running notebook cell: the names are restored when the cell
    ends, also when it fails (an IPython post_run_cell callback). A test cell calls it first::

        upstream.swap_for_cell(globals(), bucket_plan=upstream.bucket_plan)

    Outside IPython the names stay swapped; use `swapped` there.
    """
    ctx = swapped(namespace, **replacements)
    ctx.__enter__()
    try:
        from IPython import get_ipython
    except ImportError:      # pragma: no cover
        get_ipython = lambda: None  # noqa: E731
    ip = get_ipython()
    if ip is None:
        # a suspended generator context restores its names when it is collected: keep it alive
        _KEPT_SWAPS.append(ctx)
        return

    def restore(*_):
        ip.events.unregister("post_run_cell", restore)
        ctx.__exit__(None, None, None)

    ip.events.register("post_run_cell", restore)
