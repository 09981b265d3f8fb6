"""Checks of 03's exercises (memory budgets: activations per layer, the 350M table, the checkpoint
interval, layouts of unequal layers, the measured estimator, the predicted saved bytes, ZeRO), kept
here so that each test cell reads as a few lines of intent.

The visible checks compare a student's functions with closed forms computed here from literals (no
reference answer). The case generators draw a hidden cell's inputs from the seed the cell gives them;
the cell computes the expected values with `solutions_lib.memory` and wraps the student's calls in
`no_delegation` itself (grader-side, that check must run in the student's kernel: docs/GRADING.md).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .grading import expect_between, expect_close, expect_equal, expect_true

# ------------------------------------------------------------------- Part A: the 350M transformer

#: The shape of exercise 26.8 (350M parameters, batch 16, sequence 512, hidden 1024, 24 layers, 16 heads).
SHAPE_26_8 = dict(n_params=350e6, batch=16, seq_len=512, hidden=1024, layers=24, heads=16)


def layer_cases(seed, n=30) -> list[tuple]:
    """(seq_len, batch, hidden, heads, bytes_per_value) with heads dividing hidden."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        a = int(rng.choice([1, 4, 8, 12, 16, 32]))
        cases.append((int(rng.integers(1, 8192)), int(rng.integers(1, 64)), a * int(rng.integers(1, 256)), a, int(rng.choice([2, 4]))))
    return cases


def layer_raises(layer_activation_bytes) -> bool:
    """Whether the student's layer_activation_bytes raises on the 350M model's layer (d = 2 or 4)."""
    try:
        for d in (2, 4):
            float(layer_activation_bytes(512, 16, 1024, 16, d))
    except Exception:  # noqa: BLE001  (any failure: the table is rebuilt with the course's copy)
        return True
    return False


def ch26_08_table(training_memory, fits) -> tuple[dict, dict, int]:
    """(ch26_08, ch26_08_fits, ch26_08_best_k) rebuilt from the student's training_memory and fits."""
    table = {"fp32": training_memory(**SHAPE_26_8, precision="fp32"),
             "amp": training_memory(**SHAPE_26_8, precision="amp"),
             "amp_ckpt4": training_memory(**SHAPE_26_8, precision="amp", checkpoint_every=4)}
    table_fits = {name: fits(m["total"]) for name, m in table.items()}
    best_k = min(range(1, 25), key=lambda k: (training_memory(**SHAPE_26_8, precision="amp", checkpoint_every=k)["activations"], k))
    return table, table_fits, best_k


def check_ch26_08(table, table_fits, best_k, want_gb, want_fits, layer_activation_bytes, gpus) -> None:
    """The state (16 bytes per parameter), each total against `want_gb` or against the state plus the
    activations from the student's own layer_activation_bytes (one slip costs one cell), the verdicts
    for that total, and the best interval."""
    d_of = {"fp32": 4, "amp": 2, "amp_ckpt4": 2}
    sbh = 512 * 16 * 1024

    def total_from_your_layer(name):
        try:
            A = float(layer_activation_bytes(512, 16, 1024, 16, d_of[name]))
        except Exception:  # noqa: BLE001
            return float("nan")
        return 16 * 350e6 + (6 * 2 * sbh + 4 * A if name == "amp_ckpt4" else 24 * A)

    for name, gb in want_gb.items():
        expect_true(name in table, f"ch26_08 has no entry {name!r} (keys: {sorted(table)})")
        m = table[name]
        expect_close(m["weights"] + m["gradients"] + m["optimizer"], 16 * 350e6, f"state of ch26_08[{name!r}]",
                     rtol=1e-9, unit="bytes", hint="AdamW costs 16 bytes per parameter in fp32 and in AMP alike.")
        total = float(m["total"])
        off = float(np.nanmin([abs(total / (gb * 1e9) - 1), abs(total / total_from_your_layer(name) - 1)]))
        expect_close(off, 0.0, f"ch26_08[{name!r}]['total']: relative error against {gb:.4f} GB "
                     "(or against the state plus the activations from your own layer_activation_bytes)", atol=1e-6,
                     hint="fp32 activations use d = 4, AMP d = 2; checkpointing every 4 layers keeps 6 segment inputs of "
                          "2 s b h bytes plus one rebuilt segment of 4 layers.")
        own_fits = {card: total <= cap for card, cap in gpus.items()}
        expect_equal(dict(table_fits[name]) in (want_fits[name], own_fits), True,
                     f"ch26_08_fits[{name!r}] holds the verdicts for the total", hint=f"Expected {want_fits[name]}.")
    expect_equal(int(best_k), 1, "ch26_08_best_k: the interval with the least AMP activation memory",
                 hint="ceil(24 / k) * 2 s b h + k A with A = 74 s b h: k = 1 gives 122 s b h, k = 2 gives 172 s b h.")


def training_memory_cases(seed, n=25, n_totals=40) -> tuple[list[tuple], list[float]]:
    """(training_memory cases: n_params, batch, seq_len, hidden, layers, heads, precision, checkpoint_every
    (None in about 30 %), totals for fits at least 0.1 % away from every card's capacity)."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        a = int(rng.choice([8, 12, 16, 32]))
        L = int(rng.integers(2, 97))
        ck = None if rng.random() < 0.3 else int(rng.integers(1, L + 1))
        cases.append((float(10 ** rng.uniform(8, 10.5)), int(rng.integers(1, 33)), int(rng.choice([256, 512, 1024, 2048])),
                      a * int(rng.choice([64, 128])), L, a, str(rng.choice(["fp32", "amp"])), ck))
    totals = [float(t) for t in 10 ** rng.uniform(9, 11, size=n_totals) if all(abs(t / c - 1) > 1e-3 for c in (32e9, 40e9, 80e9))]
    return cases, totals


def compare_training_memory(cases, got, expected, totals, got_fits, expected_fits) -> None:
    for c, g, e in zip(cases, got, expected):
        for key in ("weights", "gradients", "optimizer", "activations", "total"):
            expect_close(g[key], e[key], f"training_memory{c}[{key!r}]", rtol=1e-9, unit="bytes")
    for t, g, e in zip(totals, got_fits, expected_fits):
        expect_equal(dict(g), e, f"fits({t:.4g})")


# ------------------------------------------------------------------ Part B: the checkpoint interval


def check_interval(ckpt_memory, ckpt_overhead, epoch_time, best_k_memory, best_k_time, best_time,
                   best_k_time_saturated, best_time_saturated) -> None:
    """The 48-layer numbers of the text: M(k), r(k), T(k) for g = 1, 1.5, 2, and the best intervals."""
    expect_close(ckpt_memory(48, 7, 1.0), 12.0, "ckpt_memory(48, 7, 1.0)", rtol=1e-12)
    expect_close(ckpt_overhead(48, 4), 0.75, "ckpt_overhead(48, 4)", rtol=1e-12,
                 hint="12 of the 48 layers are checkpoints; the other 36 are recomputed.")
    expect_close(ckpt_overhead(48, 1), 0.0, "ckpt_overhead(48, 1): no checkpointing", atol=1e-12)
    expect_close(epoch_time(48, 2), 1 + 0.5 / 3, "epoch_time(48, 2)", rtol=1e-9,
                 hint="M(2) = 25 A: a doubled batch needs 50 A > 48 A, so the batch cannot double.")
    expect_equal(int(best_k_memory), 7, "best_k_memory for 48 layers")
    expect_equal(int(best_k_time), 3, "best_k_time for 48 layers",
                 hint="The recomputation grows with k: the fastest interval is the smallest one that frees enough memory.")
    expect_close(best_time, (1 + (32 / 48) / 3) / 2, "best_time", rtol=1e-9)
    expect_close(epoch_time(48, 3, doubled_step_time=2.0), 1 + (32 / 48) / 3, "epoch_time(48, 3, doubled_step_time=2.0): saturated GPU",
                 rtol=1e-9, hint="A doubled batch that takes twice as long saves no time: only the recomputation is left.")
    expect_close(epoch_time(48, 3, doubled_step_time=1.5), (1 + (32 / 48) / 3) * 0.75, "epoch_time(48, 3, doubled_step_time=1.5)",
                 rtol=1e-9, hint="g / 2 of the steps' time when the batch doubles.")
    expect_equal(int(best_k_time_saturated), 1, "best_k_time_saturated (g = 2)",
                 hint="With nothing to gain from the batch, the fastest choice recomputes nothing.")
    expect_close(best_time_saturated, 1.0, "best_time_saturated (g = 2)", rtol=1e-9)


def interval_cases(seed, n=30) -> list[tuple]:
    """(layers, k, layer_bytes, forward_fraction, doubled_step_time)."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        L = int(rng.integers(1, 120))
        cases.append((L, int(rng.integers(1, L + 1)), float(rng.uniform(1e6, 1e9)), float(rng.uniform(0.2, 0.5)),
                      float(rng.choice([1.0, 2.0, rng.uniform(1.0, 2.0)]))))
    return cases


def compare_interval(cases, got, exp_mem, exp_over, exp_time) -> None:
    for c, g, em, eo, et in zip(cases, got, exp_mem, exp_over, exp_time):
        expect_close(g[0], em, f"ckpt_memory{c[:3]}", rtol=1e-9, unit="bytes")
        expect_close(g[1], eo, f"ckpt_overhead{c[:2]}", rtol=1e-9, atol=1e-12)
        expect_close(g[2], et, f"epoch_time({c[0]}, {c[1]}, forward_fraction={c[3]:.3f}, doubled_step_time={c[4]:.3f})", rtol=1e-9)


def layout_peak(sizes, kept) -> float:
    """The peak of a layout, counted here: the kept layers' sizes plus the longest run of dropped ones."""
    kept = {int(i) for i in kept}
    run, worst = 0.0, 0.0
    for i, x in enumerate(sizes):
        run = 0.0 if i in kept else run + x
        worst = max(worst, run)
    return sum(sizes[i] for i in kept) + worst


def check_my_layout(my_kept, sizes, best_uniform=39.0) -> None:
    """The student's layout: indices inside the model, and a peak below the best uniform interval's
    (the sizes are whole multiples of A: below 39 A means at most 38 A)."""
    kept = {int(i) for i in my_kept}
    expect_true(kept <= set(range(len(sizes))), f"my_kept_c has indices outside 0..{len(sizes) - 1}")
    expect_between(layout_peak(sizes, kept), None, best_uniform - 1, "the peak of your layout my_kept_c (below the best uniform 39 A)",
                   unit="A", hint="Do not keep the big layers; keep a cheap layer next to each big one so every run stays short.")


def layout_cases(seed, n=30) -> list[tuple[list, list]]:
    """(sizes of 1-59 layers between 0.1 and 20, sorted kept indices)."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        L = int(rng.integers(1, 60))
        sizes = [float(x) for x in rng.uniform(0.1, 20.0, size=L)]
        kept = sorted({int(i) for i in rng.integers(0, L, size=int(rng.integers(0, L + 1)))})
        cases.append((sizes, kept))
    return cases


# ------------------------------------------------------------- Part C: the measured estimator

KEYS = ("parameter_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes", "total_bytes")
HINTS = {"optimizer_bytes": "Count every tensor in optimizer.state after one step, the `step` counters included.",
         "activation_bytes": "Key each saved tensor by its storage's data_ptr, size it with storage nbytes, and skip "
                             "parameters, buffers and the input batch.",
         "gradient_bytes": "Run one backward pass of out.sum() and add up every p.grad."}


def compare_estimate(got, want, what) -> None:
    """Every key of the estimate against `want` (a dict of bytes)."""
    expect_true(isinstance(got, dict), f"{what}: expected a dict with keys {KEYS}, got {type(got).__name__}")
    for key in KEYS:
        expect_true(key in got, f"{what}: the result has no key {key!r}")
        expect_close(got[key], want[key], f"{what}[{key!r}]", rtol=1e-9, unit="bytes", hint=HINTS.get(key, ""))


def check_estimator(estimate_memory_consumption) -> None:
    """A two-tower model (its parameters and activations counted here, then every key against
    the course's measurement), and a transformer with and without checkpointing against
    its own count of saved bytes; the caller's flag left as it was."""
    from .memory import estimate_memory_consumption as reference
    from .models import CheckpointedTransformer, TwoTowerModel

    tower = TwoTowerModel(user_dim=32, item_dim=24, hidden=64, embed_dim=16, seed=0)
    tb = tower.example_batch(batch=64)
    pbytes = sum(p.numel() * p.element_size() for p in tower.parameters())
    got = estimate_memory_consumption(tower, tb)
    expect_close(got["parameter_bytes"], pbytes, "TwoTowerModel parameter_bytes", rtol=1e-12, unit="bytes")
    expect_close(got["activation_bytes"], 8 * 64 * (64 + 16), "TwoTowerModel activation_bytes", rtol=1e-12, unit="bytes",
                 hint="Per tower the ReLU output (B x hidden) and the embedding (B x embed_dim), in fp32; not the input features.")
    compare_estimate(got, reference(tower, tb).as_dict(), "estimate_memory_consumption(TwoTowerModel)")
    gpt = CheckpointedTransformer(vocab=64, hidden=64, heads=4, layers=6, max_seq=32, checkpoint_every=2, seed=0)
    gb = gpt.example_batch(batch=4)
    off, on = estimate_memory_consumption(gpt, gb), estimate_memory_consumption(gpt, gb, checkpointing=True)
    expect_close(off["activation_bytes"], gpt.saved_bytes(4, 32, checkpointing=False), "transformer activations, no checkpointing",
                 rtol=1e-9, unit="bytes", hint=HINTS["activation_bytes"])
    expect_close(on["activation_bytes"], gpt.saved_bytes(4, 32, checkpointing=True), "transformer activations, checkpointing",
                 rtol=1e-9, unit="bytes", hint="With the flag set on your copy, only the segment inputs reach your hook.")
    expect_between(off["activation_bytes"] - on["activation_bytes"], 1, None,
                   "activation bytes saved by checkpointing (without minus with)", unit="bytes",
                   hint="Checkpointing should reduce the activation bytes.")
    expect_equal(gpt.checkpointing, False, "the caller's model.checkpointing after your call",
                 hint="Change the flag on a copy.deepcopy of the model, not on the caller's model.")


def estimator_models(seed, make_unseen) -> list[tuple]:
    """(model, batch) pairs: a random CheckpointedTransformer, a TwoTowerModel, and `make_unseen()`
    (a module of the test's own with a buffer and a `checkpointing` flag) on a random input."""
    from .models import CheckpointedTransformer, TwoTowerModel

    rng = np.random.default_rng(seed)
    models = []
    for i in range(1):
        H = int(rng.choice([24, 40, 48]))
        a = int(rng.choice([d for d in (2, 3, 4, 8) if H % d == 0]))
        S = int(rng.integers(6, 20))
        m = CheckpointedTransformer(vocab=int(rng.integers(20, 90)), hidden=H, heads=a, layers=int(rng.integers(2, 6)),
                                    max_seq=S, mlp_ratio=int(rng.integers(1, 5)), checkpoint_every=int(rng.integers(1, 3)),
                                    seed=int(rng.integers(0, 1000)))
        models.append((m, m.example_batch(int(rng.integers(1, 5)), S, seed=i)))
    tw = TwoTowerModel(user_dim=7, item_dim=13, hidden=int(rng.integers(10, 50)), embed_dim=9, seed=5)
    models.append((tw, tw.example_batch(int(rng.integers(3, 30)), seed=2)))
    unseen = make_unseen()
    models.append((unseen, torch.randn(int(rng.integers(3, 17)), 12, generator=torch.Generator().manual_seed(4))))
    return models


def check_caller_untouched(m) -> None:
    """The caller's model after the student's call: its checkpointing flag off, no gradients."""
    expect_equal(getattr(m, "checkpointing", False), False, "the caller's checkpointing flag after your call")
    expect_true(all(p.grad is None for p in m.parameters()), "your function left gradients on the caller's model; "
                "work on copy.deepcopy(model)")


# ------------------------------------------------------------- Part D: predict, then measure

PREDICTION_HINT = ("Within 10% of the measurement is required. Per block: which tensors of B x S x H (and B x S x mH) "
                   "are saved, the softmax output (a x S x S per sequence), and the final LayerNorm and head input.")


def measured_saved_bytes(B, S, H, a, L, m, ck, k) -> int:
    """What autograd saves in one fp32 forward pass of the course's CheckpointedTransformer, measured
    with saved-tensor hooks (memory.saved_activation_bytes)."""
    from .memory import saved_activation_bytes
    from .models import CheckpointedTransformer

    model = CheckpointedTransformer(vocab=40, hidden=H, heads=a, layers=L, max_seq=S, mlp_ratio=m, checkpoint_every=k)
    model.checkpointing = ck
    return saved_activation_bytes(model, model.example_batch(B, S))


def prediction_cases(seed, n=10) -> list[tuple]:
    """(batch, seq_len, hidden, heads, layers, mlp_ratio, checkpointing, checkpoint_every); every third checkpointed."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(n):
        a = int(rng.choice([1, 2, 4, 8]))
        H = a * int(rng.choice([4, 8, 16]))
        L = int(rng.integers(1, 6))
        ck = bool(i % 3 == 2)
        cases.append((int(rng.integers(1, 5)), int(rng.integers(4, 65)), H, a, L, int(rng.integers(1, 5)), ck, int(rng.integers(1, L + 1))))
    return cases


# --------------------------------------------------------------------- Part E: ZeRO


def zero_cases(seed, n=25) -> tuple[list[tuple], list[tuple]]:
    """(zero_table cases: n_params, world_size, weight, grad and optimizer bytes; (capacity, activation bytes) per case)."""
    rng = np.random.default_rng(seed)
    cases = [(float(10 ** rng.uniform(8, 11.5)), int(rng.choice([1, 2, 4, 8, 16, 64, 256])), int(rng.choice([2, 4])),
              int(rng.choice([2, 4])), int(rng.choice([8, 12]))) for _ in range(n)]
    caps = [(float(rng.choice([16e9, 24e9, 40e9, 80e9, 141e9])), float(rng.uniform(0, 30e9))) for _ in cases]
    return cases, caps


def compare_zero(cases, caps, got_t, exp_t, got_s, exp_s) -> None:
    for c, g, e in zip(cases, got_t, exp_t):
        for s in range(4):
            expect_close(g[s], e[s], f"zero_table{c}[{s}]", rtol=1e-9, unit="bytes")
    for c, (cap, act), g, e in zip(cases, caps, got_s, exp_s):
        expect_equal(g, e, f"min_stage{c[:2]} with capacity {cap:.3g} and activations {act:.3g}")


def check_ch26_18(ch26_18_gb, ch26_18_stage, min_stage, want) -> None:
    """The 7B fp32 run on 8 GPUs: GB per stage against `want`, the stage for 40 GB cards, and min_stage on 80 and 20 GB."""
    for name, gb in want.items():
        expect_true(name in ch26_18_gb, f"ch26_18_gb has no key {name!r} (keys: {sorted(ch26_18_gb)})")
        expect_close(ch26_18_gb[name], gb, f"ch26_18_gb[{name!r}]", rtol=1e-9, unit="GB",
                     hint="fp32 Adam: 4 + 4 + 8 bytes per parameter; ZeRO-1 shards the 8, ZeRO-2 also the gradients' 4.")
    expect_equal(ch26_18_stage, 3, "ch26_18_stage for 40 GB cards with 15 GB of activations",
                 hint="ZeRO-2 needs 38.5 + 15 = 53.5 GB.")
    expect_equal(min_stage(7e9, 8, 80e9, 15e9, 4, 4, 8), 1, "min_stage on 80 GB cards")
    expect_equal(min_stage(7e9, 8, 20e9, 15e9, 4, 4, 8), None, "min_stage on 20 GB cards (nothing fits)")
