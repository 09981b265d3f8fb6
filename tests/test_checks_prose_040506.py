"""The kit checks of 04 parallelism, 05 communication and 06 compute/scaling (issue 28: test cells that
read as a few lines of intent): each accepts the reference's answers, rejects a wrong answer with a
message that names the case, and draws the same hidden cases from the same seed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import solutions_lib.comms as C
import solutions_lib.compute as K
import solutions_lib.parallel as P
import solutions_lib.scaling as S
from solutions_lib import checks_cases as cc, checks_comms as cm, checks_parallelism as cp, checks_scaling as cs
from solutions_lib.grading import GradingError


def test_expect_each_names_the_failing_case():
    cases = [(1, 2), (3, 4)]
    cc.expect_each_close("f", cases, [3.0, 7.0], [3.0, 7.0], rtol=1e-9)
    with pytest.raises(GradingError, match=r"f\(3, 4\)"):
        cc.expect_each_close("f", cases, [3.0, 7.5], [3.0, 7.0], rtol=1e-9)
    with pytest.raises(GradingError, match=r"g\[3\]"):
        cc.expect_each_equal("g", cases, [1.0, 2.0], [1, 3], convert=int, describe=lambda c: f"[{c[0]}]")


def test_case_generators_are_seeded_and_plain():
    for gen in (cs.flops_cases, cs.mfu_cases, cs.run_mfu_cases, cs.attention_share_cases, cs.floor_cases,
                cs.budget_cases, cm.steps_cases, cm.ring_cases, cm.speedup_cases, cm.bus_cases,
                cp.activation_cases, cp.attention_cases, cp.tp_dp_cases, cp.sharding_cases, cp.commbound_cases):
        a, b, other = gen(1234), gen(1234), gen(1235)
        assert repr(a) == repr(b) and repr(a) != repr(other), gen.__name__


def test_scaling_checks_accept_the_reference_and_reject_a_slip():
    cases = cs.run_mfu_cases(6003)
    expected = [K.mfu(d / s, 6 * n, g * p) for n, d, s, g, p in cases]
    cs.expect_each_close("run_mfu", cases, expected, expected, rtol=1e-9)
    wrong = [K.mfu(d / s, 6 * n, p) for n, d, s, g, p in cases]          # forgot the device count
    with pytest.raises(GradingError, match="run_mfu"):
        cs.expect_each_close("run_mfu", cases, wrong, expected, rtol=1e-9)
    fit, grid = S.FITS["hoffmann"], np.logspace(7, 13, 6001)
    budgets = cs.budget_cases(6006)
    best = [cs.best_on_grid(c, grid, fit) for c in budgets]
    cs.expect_grid_optimum(budgets, best, best)
    with pytest.raises(GradingError, match="best D on the grid"):
        cs.expect_grid_optimum(budgets, [(n, c / n) for c, (n, _) in zip(budgets, best)], best)   # D = C / N
    for n, t in cs.reachable_cases(6007, fit):
        assert t > fit.E + fit.A * n ** -fit.alpha
    share = cs.attention_share(K.palm_flops_per_token, 12 * 32 * 4096 ** 2, 32, 4096, 2048)
    assert share == pytest.approx(2048 / (2048 + 6 * 4096), rel=1e-9)


def test_comms_checks_accept_the_reference_and_reject_a_slip():
    sizes = np.array([2 ** k for k in range(10, 27)], dtype=float)
    data = cm.fit_datasets(50516, sizes)
    assert len(data) == 26 and all(len(s) == len(t) for s, t in data)
    fits = [C.fit_alpha_beta(*d) for d in data]
    cm.expect_fits(fits, fits)
    with pytest.raises(GradingError, match="bandwidth of synthetic data set 0"):
        cm.expect_fits([(a, 1 / b) for a, b in fits], fits)                # returned the slope, not the bandwidth
    cases, profiles = cm.amdahl_cases(50514)
    assert len(cases) == 40 and len(profiles) == 30 and all(set(sc) <= set(p) for p, sc, _ in profiles)
    assert {op for op, *_ in cm.bus_cases(50517)} <= set(cm.OPS)


def test_parallelism_checks_accept_the_reference_and_reject_a_slip():
    specs, synthetic, shapes = cp.slots_cases(4611)
    grids = [P.simulate_pipeline(n, m, s, chunks=k).grid() for n, m, s, k in specs] + [synthetic]
    counts = [(g.size, int((g == "").sum()), int((g == "").sum()) / g.size) for g in grids]
    cp.expect_slot_counts(grids, counts)
    with pytest.raises(GradingError, match="idle slots of a fresh grid"):
        cp.expect_slot_counts(grids, [(t, i + 1, f) for t, i, f in counts])
    sim = [cp.grid_counts(P.simulate_pipeline(n, m, "gpipe", t_fwd=tf, t_bwd=tb)) for n, m, tf, tb in shapes]
    assert sim[0][0] == shapes[0][0] * (shapes[0][0] + shapes[0][1] - 1) * (shapes[0][2] + shapes[0][3])
    cases = cp.attention_cases(4711)
    exp = [(P.heads_per_rank(h, t), P.column_parallel_shard(d, 3 * d, t), P.row_parallel_shard(d, d, t)) for d, h, t in cases]
    cp.expect_each_equal("attention_tp_shards", cases, [(np.int64(a), list(b), c) for a, b, c in exp], exp, convert=cp.shards)
    bad = [(h, (d, d), (d // t, d)) for d, h, t in cases]                 # W_QKV not split
    with pytest.raises(GradingError, match="attention_tp_shards"):
        cp.expect_each_equal("attention_tp_shards", cases, bad, exp, convert=cp.shards)
    cb = cp.commbound_cases(4951)
    exp_pp = [P.pp_comm_compute_times(*cp.pp_case(c)) for c in cb]
    cp.expect_comm_compute("pp_times", cb, exp_pp, exp_pp, describe=cp.pp_describe)
    with pytest.raises(GradingError, match=r"pp_times\(.*l="):
        cp.expect_comm_compute("pp_times", cb, [(2 * a, b) for a, b in exp_pp], exp_pp, describe=cp.pp_describe)
    assert [m.__name__ for m in cp.forbidden()] == ["solutions_lib.parallel", "solutions_lib.memory"]


def test_tp_mlp_shards_probe_rejects_rows_for_columns():
    from solutions_lib.dist.probes_tp_mlp import check_shards

    def right(W1, b1, W2, rank, world):
        return W1.chunk(world, 1)[rank], b1.chunk(world)[rank], W2.chunk(world, 0)[rank]

    def rows(W1, b1, W2, rank, world):
        return W1.chunk(world, 0)[rank].reshape(W1.shape[0], -1), b1.chunk(world)[rank], W2.chunk(world, 0)[rank]

    check_shards(right, 0, 8, 2)
    with pytest.raises(GradingError, match="values of W1_shard"):
        check_shards(rows, 0, 8, 2)
    assert torch.is_tensor(right(torch.ones(2, 8), torch.ones(8), torch.ones(8, 2), 0, 2)[0])


def test_scaling_exercise_checks_accept_the_reference_and_reject_a_slip():
    import solutions_lib.roofline as R

    cases = cs.roofline_cases(6104)
    assert cases and all(np.any(i < t) for i, _, t in cases)
    fits = [R.fit_roofline(*c) for c in cases]
    cs.expect_roofline_fits(cases, fits, fits)
    with pytest.raises(GradingError, match="bandwidth of hidden case 0"):
        cs.expect_roofline_fits(cases, [(p, 2 * w) for p, w in fits], fits)
    opt = cs.optimal_cases(6107)
    grid = np.logspace(6, 14, 40_001)
    brute = [cs.best_on_grid(c, grid, S.FITS[fit])[0] for c, fit in opt]
    cs.expect_optimal_on_grid(opt, [(n, c / (6 * n)) for (c, _), n in zip(opt, brute)], brute)
    with pytest.raises(GradingError, match="6 N D for C"):
        cs.expect_optimal_on_grid(opt, [(n, c / n) for (c, _), n in zip(opt, brute)], brute)
    runs = S.synthetic_scaling_runs("hoffmann", noise=0.0)
    h = S.FITS["hoffmann"]
    law = {"E": h.E, "A": h.A, "B": h.B, "alpha": h.alpha, "beta": h.beta}
    assert cs.law_rss(law, runs) == pytest.approx(0.0, abs=1e-12)
    cases, p = cs.cost_cases(6105)
    assert len(cases) == 20 and 1e8 <= p <= 1e11
    assert cs.inference_cases(6109)[-1] == (2.3, 0.0, "epoch")


def test_counted_flops_per_token_is_six_n_for_a_linear_model():
    from solutions_lib.probes_scaling import counted_flops_per_token

    class Lin(torch.nn.Module):
        def __init__(self, vocab, seq_len, d=8):
            super().__init__()
            self.emb, self.out = torch.nn.Embedding(vocab, d), torch.nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            return self.out(self.emb(idx))

    cfg = dict(vocab=16, seq_len=4)
    assert counted_flops_per_token(Lin, cfg, batch=2) == 6 * 8 * 16      # 2N forward + 4N backward, N = d * vocab
