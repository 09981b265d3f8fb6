"""solutions_lib.upstream (the correct earlier answers a test cell swaps in, docs/GRADING.md rule 6)
against the references and torch, and the swap itself."""
import math

import numpy as np

from solutions_lib import batch_scaling as B
from solutions_lib import comms as C
from solutions_lib import schedules as S
from solutions_lib import upstream as U


def test_upstream_equals_the_references():
    rng = np.random.default_rng(15)
    for _ in range(400):
        T = int(rng.integers(1, 10 ** 6))
        f = int(rng.integers(0, 1001)) / 1000
        assert U.steps_from_fraction(T, f) == S.steps_from_fraction(T, f)
    assert U.steps_from_fraction(100, 0.07) == 7 and math.ceil(0.07 * 100) == 8
    for _ in range(300):
        T = int(rng.integers(2, 3000))
        frac = int(rng.integers(0, 60)) / 100
        D = S.steps_from_fraction(T, frac)
        W = int(rng.integers(0, T - D + 1))
        args = (int(rng.integers(0, T + 20)), 1e-3, W, T, frac, float(rng.choice([0.0, 1e-4])), str(rng.choice(["linear", "sqrt"])))
        assert U.wsd(*args) == S.wsd(*args)
    for _ in range(100):
        args = (float(10 ** rng.uniform(-5, -1)), int(rng.integers(1, 5000)), int(rng.integers(1, 10 ** 5)), str(rng.choice(["linear", "sqrt"])))
        assert U.scale_lr(*args) == B.scale_lr(*args)
        budget = (int(rng.integers(10 ** 6, 10 ** 13)), int(rng.integers(1, 2 ** 24)), int(rng.integers(0, 6)) / 100, int(rng.integers(5, 30)) / 100)
        assert U.fit_schedule_to_budget(*budget) == S.fit_schedule_to_budget(*budget)
        small, big = list(rng.uniform(5, 10, 4)), list(rng.uniform(1, 2, 3))
        g2, tr, bs = U.two_batch_noise_scale(small, big, 8, 512)
        assert np.allclose((g2, tr), B.noise_scale_components(small, big, 8, 512), rtol=1e-12)
        assert math.isclose(bs, B.gradient_noise_scale(small, big, 8, 512), rel_tol=1e-12)


def test_comms_upstream_equals_the_references():
    rng = np.random.default_rng(16)
    for _ in range(300):
        args = (int(rng.integers(1, 5000)), float(10 ** rng.uniform(0, 10)), float(10 ** rng.uniform(-7, -3)),
                float(10 ** rng.uniform(8, 12)))
        for name in ("reduce_scatter_time", "all_gather_time", "ring_allreduce_time"):
            assert math.isclose(getattr(U, name)(*args), getattr(C, name)(*args), rel_tol=1e-12), name
    S = np.array([2.0 ** k for k in range(10, 27)])
    for _ in range(50):
        t = (float(10 ** rng.uniform(-6, -3)) + S / float(10 ** rng.uniform(8, 11))) * np.exp(rng.normal(0, 0.1, S.size))
        assert np.allclose(U.fit_alpha_beta(S, t), C.fit_alpha_beta(S, t), rtol=1e-12)
    clamp = S / 1e9 * np.linspace(0.7, 1.0, S.size)        # the free optimum has alpha < 0
    assert U.fit_alpha_beta(S, clamp)[0] == 0.0 and np.allclose(U.fit_alpha_beta(S, clamp), C.fit_alpha_beta(S, clamp))


def test_swapped_binds_and_restores():
    ns = {"steps_from_fraction": "mine"}
    with U.swapped(ns, steps_from_fraction=U.steps_from_fraction, wsd=U.wsd):
        assert ns["steps_from_fraction"] is U.steps_from_fraction and ns["wsd"] is U.wsd
    assert ns == {"steps_from_fraction": "mine"}
    try:
        with U.swapped(ns, steps_from_fraction=None):
            raise KeyError
    except KeyError:
        pass
    assert ns == {"steps_from_fraction": "mine"}
    assert U.forbidden_except(U.wsd) == tuple(f for f in U.ANSWERS if f is not U.wsd)


def test_lab_and_data_upstream_equal_the_references():
    import pytest
    import torch

    from solutions_lib import checkpointing as K
    from solutions_lib import data as D
    from solutions_lib.dist import ddp as R

    rng = np.random.default_rng(17)
    for _ in range(60):
        sizes = [int(x) for x in rng.integers(1, 2000, int(rng.integers(0, 20)))]
        cap = int(rng.integers(1, 5000))
        assert U.bucket_plan(sizes, cap) == [list(b) for b in R.bucket_plan(sizes, cap)]
        numels = [max(1, s // 4) for s in sizes]
        if numels:
            plan, _ = torch.distributed._compute_bucket_assignment_by_size([torch.zeros(n) for n in numels], [cap])
            assert U.bucket_plan([4 * n for n in numels], cap) == [list(b) for b in plan]
    for bad in (0, -1, math.nan, math.inf, True):
        with pytest.raises(ValueError):
            U.bucket_plan([4, 4], bad)
    # 08's MinHash (md5 of the joined shingle): agreement estimates the exact Jaccard similarity
    words = [f"w{i}" for i in range(300)]
    for _ in range(10):
        a = list(rng.choice(words, 80))
        k = int(rng.integers(0, 80))
        b = a[:k] + list(rng.choice(words, 80 - k))
        A, B = D.shingles(" ".join(a), 3), D.shingles(" ".join(b), 3)
        J = len(A & B) / len(A | B)
        est = float(np.mean(U.minhash_signature(A, 512, seed=5) == U.minhash_signature(B, 512, seed=5)))
        assert abs(est - J) < 5 * math.sqrt(max(J * (1 - J), 0.01) / 512)
        assert np.array_equal(U.minhash_signature(A, 64, seed=1), U.minhash_signature(A, 64, seed=1))
    for c, m in [(120.0, 3600.0), (5.0, 1e6)]:
        assert math.isclose(U.young_interval(c, m), K.young_interval(c, m), rel_tol=1e-12)


def test_swap_for_cell_restores_when_the_cell_ends_also_on_error():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["f"] = "mine"
    shell.run_cell("from solutions_lib import upstream\nupstream.swap_for_cell(globals(), f='course')\nseen = f")
    assert shell.user_ns["seen"] == "course" and shell.user_ns["f"] == "mine"
    shell.run_cell("upstream.swap_for_cell(globals(), f='course', g=1)\nseen = f\nraise KeyError")
    assert shell.user_ns["seen"] == "course" and shell.user_ns["f"] == "mine" and "g" not in shell.user_ns
    assert not [cb for cb in shell.events.callbacks["post_run_cell"] if getattr(cb, "__name__", "") == "restore"]


def test_compute_scaling_upstream_equals_the_references():
    from solutions_lib import compute as P
    from solutions_lib import scaling as Z

    rng = np.random.default_rng(18)
    for _ in range(300):
        args = (int(rng.integers(1, 10 ** 4)), int(rng.integers(1, 10 ** 4)), int(rng.integers(1, 10 ** 4)),
                float(rng.choice([1, 2, 4])))
        assert math.isclose(U.arithmetic_intensity(*args), P.gemm_arithmetic_intensity(*args), rel_tol=1e-12)
    assert math.isclose(U.arithmetic_intensity(4096, 4096, 4096), 4096 / 3, rel_tol=1e-12)
    for fit in ("hoffmann", "epoch"):
        for c in 10 ** rng.uniform(15, 28, 50):
            assert np.allclose(U.chinchilla_optimal(float(c), fit), Z.chinchilla_optimal(float(c), fit), rtol=1e-12)
        f = Z.FITS[fit]
        assert U._CHINCHILLA_FITS[fit] == (f.E, f.A, f.B, f.alpha, f.beta)


def test_layout_upstream_equals_the_references():
    from solutions_lib import parallel as P
    rng = np.random.default_rng(17)
    for _ in range(200):
        G = int(rng.choice([4, 8]))
        a = int(rng.choice([8, 16, 32]))
        model = dict(layers=int(rng.choice([8, 12, 24])), hidden=a * int(rng.choice([64, 128])), heads=a,
                     seq_len=int(rng.choice([1024, 2048])), global_batch=int(rng.choice([64, 256])),
                     micro_batch=int(rng.choice([1, 2])))
        cluster = dict(n_gpus=G * int(rng.choice([1, 2, 8])), gpus_per_node=G, flops=float(rng.choice([1e14, 3e14])),
                       memory=40e9, intra=(float(rng.choice([0.0, 5e-6])), 3e11), inter=(1e-5, float(rng.choice([2e9, 2.5e10]))))
        for lay in P.candidate_layouts(model, cluster, zero=int(rng.integers(0, 4)), sp=bool(rng.integers(0, 2))):
            want_m, got_m = P.layout_memory_per_rank(lay, model), U.layout_memory_per_rank(lay, model)
            want_t, got_t = P.layout_step_time(lay, model, cluster), U.layout_step_time(lay, model, cluster)
            assert all(math.isclose(got_m[k], want_m[k], rel_tol=1e-12) for k in want_m)
            assert all(math.isclose(got_t[k], want_t[k], rel_tol=1e-12, abs_tol=1e-18) for k in want_t)


def test_debugging_upstream_agrees_with_the_reference_checks():
    import torch

    from solutions_lib import debugging as G

    g = torch.Generator().manual_seed(9)
    for _ in range(50):
        rows = torch.randint(0, 20, (3, 9), generator=g)
        x, y = rows[:, :-1], rows[:, 1:].clone()
        if bool(torch.randint(0, 2, (1,), generator=g)):
            y[0, int(torch.randint(0, 7, (1,), generator=g))] += 1      # one broken target
        if bool(torch.randint(0, 2, (1,), generator=g)):
            y[1, :3] = -100                                               # ignored targets
        assert U.labels_shifted(x, y) == (G.label_shift_problems(x, y) == [])
    T = 6
    good = torch.ones(T, T, dtype=torch.bool).tril()
    for m in (good, ~good, good.T, torch.zeros(T, T).masked_fill(~good, float("-inf")), good[:, :5],
              good & ~torch.eye(T, dtype=torch.bool)):
        assert U.mask_is_causal(m) == (G.causal_mask_problems(m) == [])


def test_layer_activation_bytes_upstream_equals_korthikanti():
    from solutions_lib import memory as M

    rng = np.random.default_rng(18)
    for _ in range(100):
        a = int(rng.choice([1, 4, 8, 16]))
        args = (int(rng.integers(1, 4096)), int(rng.integers(1, 32)), a * int(rng.integers(1, 128)), a)
        for d in (2, 4):
            assert math.isclose(U.layer_activation_bytes(*args, d), M.activation_bytes_per_layer(*args, bytes_per_value=d),
                                rel_tol=1e-12)


def test_swap_for_cell_outside_ipython_keeps_the_names_swapped():
    """Outside IPython the names stay swapped, as the docstring says (the context used to be
    collected on return, which restored them at once)."""
    import gc

    from solutions_lib import upstream
    ns = {"scale_lr": "mine"}
    upstream.swap_for_cell(ns, scale_lr=upstream.scale_lr)
    gc.collect()
    assert ns["scale_lr"] is upstream.scale_lr
