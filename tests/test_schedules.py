"""solutions_lib.schedules step by step against torch.optim.lr_scheduler (StepLR, PolynomialLR,
LinearLR, CosineAnnealingLR, CosineAnnealingWarmRestarts, OneCycleLR, ConstantLR chained with
SequentialLR), against the published formulas where torch has no twin, plus the planning
helpers, the pretraining-design checker, the LR-trace debugger and the ValueError cases."""
import math
import warnings

import numpy as np
import pytest
import torch
from torch.optim import lr_scheduler as L

from solutions_lib import schedules as S

torch.set_num_threads(1)


def torch_trace(make, n_steps, lr=1.0):
    """The lr the optimizer uses at each of n_steps updates, scheduler stepped once per update."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SequentialLR's deprecation chatter
        sched = make(opt)
        out = []
        for _ in range(n_steps):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    return np.array(out)


def test_torch_lr_trace_helper_matches_our_loop():
    make = lambda o: L.StepLR(o, 3, 0.5)  # noqa: E731
    np.testing.assert_array_equal(S.torch_lr_trace(make, 20, 0.4), torch_trace(make, 20, 0.4))


def close(ours, theirs, rtol=1e-12):
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-300)


# ---------------------------------------------------------------- torch twins


@pytest.mark.parametrize("base,size,gamma", [(0.1, 7, 0.5), (3e-4, 1, 0.9), (1.0, 30, 0.1), (0.5, 4, 1.5)])
def test_step_decay_matches_steplr(base, size, gamma):
    ours = S.lr_curve(S.step_decay, 80, base_lr=base, step_size=size, gamma=gamma)
    close(ours, torch_trace(lambda o: L.StepLR(o, size, gamma), 80, base))


@pytest.mark.parametrize("base,total,power", [(0.1, 40, 1.0), (1e-3, 25, 2.0), (0.3, 10, 0.5), (1.0, 1, 3.0)])
def test_polynomial_decay_matches_polynomiallr(base, total, power):
    ours = S.lr_curve(S.polynomial_decay, total + 15, base_lr=base, total_steps=total, power=power)
    close(ours, torch_trace(lambda o: L.PolynomialLR(o, total, power), total + 15, base), rtol=1e-10)


def test_polynomial_decay_end_lr_closed_form():
    # torch has no end value: check the TF/Keras form at the ends and (power 1) the midpoint
    assert S.polynomial_decay(0, 1e-3, 100, 2.0, 1e-5) == pytest.approx(1e-3, rel=1e-15)
    assert S.polynomial_decay(100, 1e-3, 100, 2.0, 1e-5) == pytest.approx(1e-5, rel=1e-15)
    assert S.polynomial_decay(10 ** 6, 1e-3, 100, 2.0, 1e-5) == pytest.approx(1e-5, rel=1e-15)
    assert S.polynomial_decay(50, 1e-3, 100, 1.0, 1e-4) == pytest.approx(5.5e-4, rel=1e-14)
    # power 2 falls to half its start at ceil(T (1 - 1/sqrt 2)) = 2929 of 10,000
    lrs = S.lr_curve(S.polynomial_decay, 10_000, base_lr=1e-3, total_steps=10_000, power=2.0)
    assert int(np.argmax(lrs <= 5e-4)) == 2929


@pytest.mark.parametrize("peak,warm", [(3e-4, 100), (1.0, 2), (0.01, 7)])
def test_linear_warmup_matches_linearlr(peak, warm):
    ours = S.lr_curve(S.linear_warmup, warm + 20, peak_lr=peak, warmup_steps=warm)
    close(ours, torch_trace(lambda o: L.LinearLR(o, 1 / warm, 1.0, warm - 1), warm + 20, peak), rtol=1e-12)


def test_linear_warmup_seed_number_tsx03_and_edges():
    assert S.linear_warmup(50, 3e-4, 100) == pytest.approx(1.53e-4, rel=1e-14)
    assert S.linear_warmup(0, 3e-4, 100) == pytest.approx(3e-6, rel=1e-14)
    assert S.linear_warmup(99, 3e-4, 100) == 3e-4
    assert S.linear_warmup(5000, 3e-4, 100) == 3e-4
    assert S.linear_warmup(0, 3e-4, 0) == 3e-4  # no warmup
    assert S.linear_warmup(0, 2.0, 1) == 2.0


@pytest.mark.parametrize("peak,warm,total,min_lr", [(3e-4, 10, 100, 3e-5), (1.0, 1, 50, 0.0), (0.1, 25, 60, 0.01),
                                                   (0.1, 3, 5, 0.0)])
def test_warmup_cosine_matches_sequential_linear_cosine(peak, warm, total, min_lr):
    ours = S.lr_curve(S.warmup_cosine, total, peak_lr=peak, warmup_steps=warm, total_steps=total, min_lr=min_lr)
    theirs = torch_trace(lambda o: L.SequentialLR(o, [L.LinearLR(o, 1 / warm, 1.0, warm - 1),
                                                      L.CosineAnnealingLR(o, total - warm - 1, min_lr)], [warm]),
                         total, peak)
    close(ours, theirs, rtol=1e-9)
    assert ours[-1] == min_lr and ours[warm] == peak


def test_warmup_cosine_without_warmup_matches_cosineannealinglr():
    ours = S.lr_curve(S.warmup_cosine, 64, peak_lr=0.2, warmup_steps=0, total_steps=64, min_lr=0.002)
    close(ours, torch_trace(lambda o: L.CosineAnnealingLR(o, 63, 0.002), 64, 0.2), rtol=1e-9)


def test_warmup_cosine_th03_numbers_and_edges():
    lr = S.lr_curve(S.warmup_cosine, 1000, peak_lr=3e-4, warmup_steps=100, total_steps=1000, min_lr=3e-5)
    assert lr[0] == pytest.approx(3e-6) and lr.max() == pytest.approx(3e-4) and lr[-1] == 3e-5
    mid = 100 + (1000 - 100 - 1) / 2  # halfway through the decay: the average of peak and floor
    assert S.warmup_cosine(int(mid) + 1, 3e-4, 100, 1000, 3e-5) < 1.65e-4 < S.warmup_cosine(int(mid), 3e-4, 100, 1000, 3e-5)
    assert S.warmup_cosine(5000, 3e-4, 100, 1000, 3e-5) == 3e-5  # past the run: stays at the floor
    assert S.warmup_cosine(9, 1.0, 9, 10, 0.25) == 0.25  # a one-step decay is the floor


def _hf_cosine_lambda(num_warmup_steps, num_training_steps, min_lr_rate=0.0, num_cycles=0.5):
    # transformers.optimization._get_cosine_schedule_with_warmup_lr_lambda, from its published
    # definition (get_cosine_schedule_with_warmup; with min_lr_rate: get_cosine_with_min_lr_schedule_with_warmup),
    # written out here because transformers is not a dependency of the course.
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        factor = 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress))
        factor = factor * (1 - min_lr_rate) + min_lr_rate
        return max(0, factor)
    return lr_lambda


@pytest.mark.parametrize("peak,warm,total,min_lr", [(3e-4, 10, 100, 3e-5), (1.0, 1, 50, 0.0), (0.1, 25, 60, 0.01),
                                                   (0.1, 3, 5, 0.0), (0.2, 0, 64, 0.002), (1.0, 9, 10, 0.25)])
def test_warmup_cosine_hf_convention_matches_transformers_lambda(peak, warm, total, min_lr):
    # convention="hf": warmup from 0 (peak * step / W), decay over T - W steps; torch's LambdaLR with
    # transformers' lambda gives the same rates for every step of the run and at step T
    ours = [S.warmup_cosine(s, peak, warm, total, min_lr, convention="hf") for s in range(total + 1)]
    theirs = torch_trace(lambda o: L.LambdaLR(o, _hf_cosine_lambda(warm, total, min_lr / peak)), total + 1, peak)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-15)
    assert ours[0] == (0.0 if warm else peak) and ours[total] == pytest.approx(min_lr)
    assert S.warmup_cosine(total + 7, peak, warm, total, min_lr, convention="hf") == min_lr   # past the run: the floor
    # the course's default is unchanged: warmup from peak/W, the floor at step T - 1
    course = [S.warmup_cosine(s, peak, warm, total, min_lr) for s in range(total)]
    assert course == [S.warmup_cosine(s, peak, warm, total, min_lr, convention="course") for s in range(total)]
    if warm:
        assert course[0] == pytest.approx(peak / warm) and course[warm - 1] == pytest.approx(peak)
    assert course[-1] == min_lr


def test_warmup_cosine_hf_convention_th03_and_bad_name():
    # TH-03 numbers under both conventions: HF's step 0 is 0 and its step 100 (W) the peak; ours is peak/W at step 0
    assert S.warmup_cosine(0, 3e-4, 100, 1000, 3e-5, convention="hf") == 0.0
    assert S.warmup_cosine(50, 3e-4, 100, 1000, 3e-5, convention="hf") == pytest.approx(1.5e-4)
    assert S.warmup_cosine(50, 3e-4, 100, 1000, 3e-5) == pytest.approx(1.53e-4)
    assert S.warmup_cosine(100, 3e-4, 100, 1000, 3e-5, convention="hf") == pytest.approx(3e-4)
    assert S.warmup_cosine(999, 3e-4, 100, 1000, 3e-5, convention="hf") > 3e-5 == S.warmup_cosine(999, 3e-4, 100, 1000, 3e-5)
    with pytest.raises(ValueError, match="convention"):
        S.warmup_cosine(0, 3e-4, 100, 1000, convention="huggingface")


@pytest.mark.parametrize("t0,mult,min_lr", [(10, 2, 1e-4), (7, 3, 0.0), (13, 1, 0.01), (1, 2, 0.0), (5, 1, 0.0)])
def test_cosine_with_restarts_matches_warmrestarts(t0, mult, min_lr):
    ours = S.lr_curve(S.cosine_with_restarts, 400, max_lr=0.1, t0=t0, t_mult=mult, min_lr=min_lr)
    close(ours, torch_trace(lambda o: L.CosineAnnealingWarmRestarts(o, t0, mult, min_lr), 400, 0.1), rtol=1e-12)
    restarts = [i for i in range(1, 400) if ours[i] == 0.1]  # cos(0) = 1 exactly, only at a restart
    assert restarts == S.sgdr_restarts(t0, mult, 400)


def test_sgdr_restarts_examples():
    assert S.sgdr_restarts(10, 2, 200) == [10, 30, 70, 150]
    assert S.sgdr_restarts(10, 1, 45) == [10, 20, 30, 40]
    assert S.sgdr_restarts(50, 2, 50) == []
    assert S.cosine_with_restarts(30, 1.0, 10, 2) == 1.0  # at a restart: max_lr


@pytest.mark.parametrize("total,pct,div,final", [(1000, 0.3, 25.0, 1e4), (37, 0.25, 10.0, 100.0), (10, 0.25, 25.0, 1e4),
                                                (100, 0.5, 4.0, 1.0), (7, 0.9, 25.0, 1e4)])
def test_one_cycle_matches_onecyclelr(total, pct, div, final):
    ours = S.lr_curve(S.one_cycle, total, max_lr=0.1, total_steps=total, pct_start=pct, div_factor=div,
                      final_div_factor=final)
    theirs = torch_trace(lambda o: L.OneCycleLR(o, 0.1, total_steps=total, pct_start=pct, anneal_strategy="cos",
                                                div_factor=div, final_div_factor=final, three_phase=False,
                                                cycle_momentum=False), total, 0.1)
    close(ours, theirs, rtol=1e-12)


def test_one_cycle_landmarks():
    lr = S.lr_curve(S.one_cycle, 1000, max_lr=0.1, total_steps=1000)
    assert int(np.argmax(lr)) == 299 and lr[299] == pytest.approx(0.1, rel=1e-15)
    assert lr[0] == pytest.approx(0.1 / 25) and lr[-1] == pytest.approx(0.1 / 25 / 1e4, rel=1e-12)


def test_inverse_sqrt_matches_vaswani_formula():
    d, w = 512, 4000
    for step in [0, 1, 999, 3998, 3999, 4000, 15_999, 100_000]:
        n = step + 1  # the paper counts from 1
        assert S.inverse_sqrt(step, d, w) == pytest.approx(d ** -0.5 * min(n ** -0.5, n * w ** -1.5), rel=1e-15)
    lr = S.lr_curve(S.inverse_sqrt, 20_000, d_model=d, warmup_steps=w)
    assert int(np.argmax(lr)) == 3999
    assert S.inverse_sqrt_peak(d, w) == (3999, pytest.approx(6.9877e-4, rel=1e-4))
    assert lr[15_999] == pytest.approx(lr[3999] / 2, rel=1e-12)  # 4x the warmup: half the peak


@pytest.mark.parametrize("warm,total,frac,min_lr", [(5, 100, 0.2, 0.1), (10, 60, 0.5, 0.0), (1, 30, 0.1, 0.05),
                                                   (3, 17, 0.3, 0.0)])
def test_wsd_linear_matches_sequential_linear_constant_linear(warm, total, frac, min_lr):
    decay = S.wsd_decay_steps(total, frac)
    m = min_lr / 1.0
    theirs = torch_trace(lambda o: L.SequentialLR(o, [L.LinearLR(o, 1 / warm, 1.0, warm - 1), L.ConstantLR(o, 1.0, 1),
                                                      L.LinearLR(o, 1 - (1 - m) / decay, m, decay - 1)],
                                                  [warm, total - decay]), total, 1.0)
    ours = S.lr_curve(S.wsd, total, peak_lr=1.0, warmup_steps=warm, total_steps=total, decay_fraction=frac, min_lr=min_lr)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    assert ours[-1] == pytest.approx(min_lr, abs=1e-15)


def test_wsd_sqrt_matches_hagele_formula():
    peak, total, frac, floor = 2e-3, 1000, 0.2, 2e-4
    start = total - 200
    for step in range(total):
        got = S.wsd(step, peak, 50, total, frac, floor, "sqrt")
        if step < 50:
            want = peak * (step + 1) / 50
        elif step < start:
            want = peak
        else:
            want = floor + (peak - floor) * (1 - math.sqrt((step - start + 1) / 200))
        assert got == pytest.approx(want, rel=1e-14, abs=1e-18)
    assert S.wsd(5000, peak, 50, total, frac, floor, "sqrt") == floor
    # the 1-sqrt cooldown stays below the linear one at every cooldown step but the last
    lin = S.lr_curve(S.wsd, total, peak_lr=peak, warmup_steps=50, total_steps=total, decay_fraction=frac)
    sq = S.lr_curve(S.wsd, total, peak_lr=peak, warmup_steps=50, total_steps=total, decay_fraction=frac, shape="sqrt")
    assert np.all(sq[start:-1] < lin[start:-1]) and np.all(sq[:start] == lin[:start])


# ---------------------------------------------------------------- planning helpers


def test_steps_from_fraction_rounds_up_but_ignores_float_noise():
    assert 0.1 * 30 == 3.0  # exact in IEEE double: no pitfall there (issue 19)
    assert 0.07 * 100 == 7.000000000000001 and math.ceil(0.07 * 100) == 8  # a real one
    assert S.steps_from_fraction(100, 0.07) == 7
    assert 0.55 * 100 > 55 and S.steps_from_fraction(100, 0.55) == 55
    assert S.steps_from_fraction(30, 0.1) == 3
    assert S.steps_from_fraction(12_000, 0.03) == 360
    assert S.steps_from_fraction(9537, 0.01) == 96
    assert S.steps_from_fraction(10, 0.0) == 0
    assert S.steps_from_fraction(7, 1.0) == 7
    assert S.warmup_steps_from_ratio is S.steps_from_fraction


def test_tokens_before_cooldown_and_budget_fit():
    assert S.tokens_before_cooldown(50_000, 0.2, 1_048_576) == 40_000 * 1_048_576
    plan = S.fit_schedule_to_budget(20_000_000_000, 2_097_152, warmup_ratio=0.01, decay_fraction=0.2)
    assert plan == {"total_steps": 9537, "warmup_steps": 96, "decay_steps": 1908, "cooldown_start": 7629,
                    "tokens_trained": 9537 * 2_097_152}
    assert S.fit_schedule_to_budget(4096, 1024)["total_steps"] == 4  # exact fit: no extra step
    rng = np.random.default_rng(3)
    for _ in range(200):
        budget, tps = int(rng.integers(1, 10 ** 12)), int(rng.integers(1, 10 ** 7))
        t = S.fit_schedule_to_budget(budget, tps, 0.0, 0.0)["total_steps"]
        assert t * tps >= budget > (t - 1) * tps


def test_reference_design_meets_rules_on_random_problems():
    rng = np.random.default_rng(11)
    for _ in range(15):
        problem = S.random_pretraining_problem(rng)
        assert S.check_pretraining_design(S.design_pretraining_schedule(problem), problem) == []


def test_design_checker_accepts_the_extreme_fractions_rounded_up():
    # issue 15: warmup 5 % and cooldown 25 %, rounded up by steps_from_fraction, are allowed, one more step is not
    rng = np.random.default_rng(12)
    seen_above = 0
    for _ in range(30):
        problem = S.random_pretraining_problem(rng)
        good = S.design_pretraining_schedule(problem)
        T = good["total_steps"]
        W, D = S.steps_from_fraction(T, 0.05), S.steps_from_fraction(T, 0.25)
        seen_above += (W > 0.05 * T) + (D > 0.25 * T)
        peak, floor = good["peak_lr"], good["min_lr"]
        edge = {**good, "warmup_steps": W, "decay_steps": D,
                "lr_at": lambda s, W=W, T=T, peak=peak, floor=floor: S.wsd(s, peak, W, T, 0.25, floor, "sqrt")}
        assert S.check_pretraining_design(edge, problem) == []
        assert any("warmup_steps" in v for v in S.check_pretraining_design({**edge, "warmup_steps": W + 1}, problem))
        assert any("decay_steps" in v for v in S.check_pretraining_design({**edge, "decay_steps": D + 1}, problem))
        assert any("warmup_steps" in v for v in S.check_pretraining_design(
            {**edge, "warmup_steps": S.steps_from_fraction(T, 0.01) - 1}, problem))
    assert seen_above > 10  # the old check (W / T <= 0.05) would have refused these


def test_design_checker_names_each_broken_rule():
    problem = {"token_budget": 20_000_000_000, "seq_len": 2048, "n_gpus": 64, "max_micro_batch": 8,
               "max_batch_tokens": 4 * 2 ** 20, "ref_lr": 3e-4, "ref_batch": 256}
    good = S.design_pretraining_schedule(problem)
    assert good["tokens_per_step"] <= 4 * 2 ** 20 and good["micro_batch"] <= 8
    assert S.check_pretraining_design(good, problem) == []

    def broken(**changes):
        return S.check_pretraining_design({**good, **changes}, problem)

    assert any("memory" in v for v in broken(micro_batch=16))
    assert any("global_batch" in v for v in broken(global_batch=good["global_batch"] + 1))
    assert any("ceil" in v for v in broken(total_steps=good["total_steps"] - 1))
    assert any("warmup_steps=1 must" in v for v in broken(warmup_steps=1))
    assert any("decay_steps=1 must" in v for v in broken(decay_steps=1))
    assert any("square-root rule" in v for v in broken(peak_lr=good["peak_lr"] * 2))
    assert any("min_lr" in v for v in broken(min_lr=good["peak_lr"] / 2))
    assert any("peak_lr" in v for v in broken(lr_at=lambda s: good["peak_lr"]))  # no warmup, no cooldown
    assert any("last step" in v for v in broken(lr_at=lambda s: good["lr_at"](min(s, good["total_steps"] - 2))))
    assert any("missing" in v for v in S.check_pretraining_design({"micro_batch": 1}, problem))
    assert any("failed" in v for v in broken(lr_at=lambda s: 1 / 0))


# ---------------------------------------------------------------- LR traces


def test_trace_debugger_names_every_bug_on_fresh_traces():
    rng = np.random.default_rng(2024)
    for bug in S.TRACE_BUGS:
        for _ in range(12):
            tr = S.simulate_lr_trace(rng, bug)
            assert S.diagnose_lr_trace(tr["logged"], tr["intended"], tr["grad_accum"]) == bug


def test_trace_debugger_handcrafted_cases():
    intended = S.lr_curve(S.warmup_cosine, 200, peak_lr=1e-3, warmup_steps=20, total_steps=200, min_lr=1e-4)
    assert S.diagnose_lr_trace(intended.astype(np.float32), intended, 4) == "ok"
    assert S.diagnose_lr_trace(intended * 4, intended, 1) == "not_scaled"
    fast = [S.warmup_cosine(min(4 * s, 10 ** 6), 1e-3, 20, 200, 1e-4) for s in range(200)]
    assert S.diagnose_lr_trace(fast, intended, 4) == "per_microbatch"
    cold = S.lr_curve(S.warmup_cosine, 200, peak_lr=1e-3, warmup_steps=0, total_steps=200, min_lr=1e-4)
    assert S.diagnose_lr_trace(cold, intended, 4) == "no_warmup"
    sgdr = S.lr_curve(S.cosine_with_restarts, 200, max_lr=1e-3, t0=40, t_mult=2)
    late = S.lr_curve(S.cosine_with_restarts, 200, max_lr=1e-3, t0=50, t_mult=2)
    assert S.diagnose_lr_trace(late, sgdr, 1) == "wrong_restart"
    assert S.diagnose_lr_trace(intended[::-1], intended, 1) == "unknown"


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("call", [
    lambda: S.step_decay(-1, 0.1, 10, 0.5),
    lambda: S.step_decay(2.5, 0.1, 10, 0.5),
    lambda: S.step_decay(0, 0.1, 0, 0.5),
    lambda: S.step_decay(0, 0.1, 10, 0.0),
    lambda: S.step_decay(0, -0.1, 10, 0.5),
    lambda: S.polynomial_decay(0, 0.1, 0),
    lambda: S.polynomial_decay(0, 0.1, 10, end_lr=0.2),
    lambda: S.polynomial_decay(0, 0.1, 10, power=0.0),
    lambda: S.linear_warmup(0, 1e-3, -1),
    lambda: S.linear_warmup(-3, 1e-3, 10),
    lambda: S.warmup_cosine(0, 1e-3, 100, 100),
    lambda: S.warmup_cosine(0, 1e-3, 200, 100),
    lambda: S.warmup_cosine(0, 1e-3, 10, 0),
    lambda: S.warmup_cosine(0, 1e-3, 10, 100, min_lr=1e-2),
    lambda: S.cosine_with_restarts(0, 0.1, 0),
    lambda: S.cosine_with_restarts(0, 0.1, 10, t_mult=1.5),
    lambda: S.cosine_with_restarts(0, 0.1, 10, t_mult=0),
    lambda: S.one_cycle(100, 0.1, 100),
    lambda: S.one_cycle(0, 0.1, 3, pct_start=0.3),
    lambda: S.one_cycle(0, 0.1, 100, pct_start=0.0),
    lambda: S.one_cycle(0, 0.1, 100, div_factor=0.0),
    lambda: S.inverse_sqrt(0, 512, 0),
    lambda: S.inverse_sqrt(-1, 512, 10),
    lambda: S.wsd(0, 1e-3, 50, 100, decay_fraction=0.6),
    lambda: S.wsd(0, 1e-3, 10, 100, shape="cosine"),
    lambda: S.wsd(0, 1e-3, 10, 100, decay_fraction=1.5),
    lambda: S.steps_from_fraction(0, 0.1),
    lambda: S.fit_schedule_to_budget(0, 1024),
    lambda: S.fit_schedule_to_budget(10, 1, 0.6, 0.6),
    lambda: S.diagnose_lr_trace([1.0, 2.0], [1.0, 2.0, 3.0]),
    lambda: S.simulate_lr_trace(np.random.default_rng(0), "typo"),
    lambda: S.design_pretraining_schedule({"token_budget": 10}),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_value_error_messages_say_why():
    with pytest.raises(ValueError, match="shorter than the run"):
        S.warmup_cosine(0, 1e-3, 200, 100)
    with pytest.raises(ValueError, match="do not fit"):
        S.wsd(0, 1e-3, 50, 100, decay_fraction=0.6)
    with pytest.raises(ValueError, match="past the end"):
        S.one_cycle(100, 0.1, 100)
    with pytest.raises(ValueError, match=">= 0"):
        S.step_decay(-1, 0.1, 10, 0.5)
