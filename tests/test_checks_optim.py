"""solutions_lib.checks_optim (01 exercises): the checks accept the notebook's solution and reject a
wrong answer from the bank with the message that names the slip."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from solutions_lib import checks_optim as C
from solutions_lib import optim as ref
from solutions_lib.course import notebooks as nbs
from solutions_lib.grading import GradingError

from conftest import ROOT

NB = ROOT / "source" / "01_optimizers" / "exercises.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "01_optimizers" / "exercises"


def _answer(gid: str, wrong: str | None = None) -> dict:
    """The namespace of the notebook's answer cell `gid` (or of the bank's wrong answer `wrong`)."""
    if wrong is None:
        cell = next(c for c in nbs.read(NB).cells if nbs.nbgrader_md(c).get("grade_id") == gid)
        source = nbs.strip_solution_markers(cell.source)
    else:
        source = (BANK / f"{gid}__{wrong}.py").read_text()
    ns = {"np": np, "torch": torch, "math": math}
    exec(source, ns)
    return ns


def test_adamw_checks_accept_the_solution_and_reject_a_slip():
    good = _answer("adamw_step")["adamw_step"]
    C.check_adamw_seed(good)
    C.check_adamw_vs_torch(good)
    cases = C.adamw_cases(3, n=4)
    C.compare_adamw_cases(cases, [good(*a, **kw) for a, kw in cases], [ref.adamw_step(*a, **kw) for a, kw in cases])
    hp, p0, grads = C.adamw_trajectory_cases(4, steps=5)[1]
    C.compare_adamw_trajectory(C.adamw_trajectory(good, p0, grads, hp, check_inputs=True),
                               C.adamw_trajectory(ref.adamw_step, p0, grads, hp), C.torch_adamw_params(p0, grads, hp), hp)
    bad = _answer("adamw_step", "bias_correction_off_by_one")["adamw_step"]
    with pytest.raises(GradingError, match="theta after one step"):
        C.check_adamw_seed(bad)
    bad = _answer("adamw_step", "modifies_inputs")["adamw_step"]
    with pytest.raises(GradingError, match="modified one of its input arrays"):
        C.adamw_trajectory(bad, p0, grads, hp, check_inputs=True)


def test_cases_are_drawn_from_the_seed():
    assert C.adamw_cases(7, n=3) == C.adamw_cases(7, n=3) != C.adamw_cases(8, n=3)
    a, b = C.clip_cases(5, n=4), C.clip_cases(5, n=4)
    assert all(np.array_equal(x, y) for (ga, *_), (gb, *_) in zip(a, b) for x, y in zip(ga, gb))
    assert [c[2] for c in a] == [2.0, math.inf, 2.0, math.inf]


def test_clip_check_against_torch():
    good = _answer("clip_grad_norm")["clip_grad_norm"]
    for gs, c, p in C.clip_cases(2, n=4):
        C.check_clip_case(good, gs, c, p, ref.clip_grad_norm(gs, c, norm_type=p), C.torch_clip(gs, c, p))
    gs, c, p = C.clip_cases(2, n=1)[0]

    def per_array(grads, max_norm, norm_type=2.0):        # clips each array by its own norm
        out = [g * min(1.0, max_norm / (float(np.linalg.norm(g.ravel(), norm_type)) + 1e-6)) for g in grads]
        return out, float(np.linalg.norm(np.concatenate([g.ravel() for g in grads]), norm_type))

    gs = [np.array([3.0, 4.0]), np.array([12.0])]
    with pytest.raises(GradingError, match="clipped array 0"):
        C.check_clip_case(per_array, gs, 5.0, 2.0, ref.clip_grad_norm(gs, 5.0), C.torch_clip(gs, 5.0, 2.0))


def test_lamb_checks_accept_the_course_lamb_and_reject_a_slip():
    C.check_lamb_hand(ref.Lamb)
    C.check_lamb_vs_adamw_oracle(ref.Lamb)
    C.check_lamb_zero_weight(ref.Lamb)
    C.check_lamb_edges(*C.lamb_edge_runs(ref.Lamb))
    cfg, init, grads = C.lamb_group_cases(1, steps=2)[1]
    runs = C.lamb_run(C.two_groups(ref.Lamb, cfg), init, grads)
    C.compare_lamb_runs(runs, runs, cfg)

    class NoTrust(ref.Lamb):                               # Adam's direction without the trust ratio
        @torch.no_grad()
        def step(self, closure=None):
            for g in self.param_groups:
                for w in g["params"]:
                    w.sub_(g["lr"] * torch.sign(w.grad))

    with pytest.raises(GradingError, match="after one LAMB step"):
        C.check_lamb_hand(NoTrust)


def test_experiment_checks_pass_the_protocol_and_catch_a_missing_warmup():
    ns = {"math": math, "np": np, "torch": torch}
    cells = nbs.read(NB).cells
    for c in cells:
        if nbs.nbgrader_md(c).get("grade_id") in ("run_comparison",) or (
                c.cell_type == "code" and "def make_mlp" in c.source):
            exec(nbs.strip_solution_markers(c.source).split("for name_, p_ in")[0], ns)
    ns["Lamb"] = ref.Lamb
    C.check_experiment(ns["run_comparison"], ns, (64, 256), 1, 1, 512, "batch_sizes=(64, 256), epochs=1", shape=True)
    wrong = (BANK / "run_comparison__no_warmup.py").read_text()
    exec(wrong, ns)
    with pytest.raises(GradingError, match="lr of every"):
        C.check_experiment(ns["run_comparison"], ns, (64, 256), 1, 1, 512, "batch_sizes=(64, 256), epochs=1")


def test_param_groups_and_ratios():
    ns = _answer("llm_param_groups")
    model = C.TinyLM()
    groups = C.check_param_groups(ns["llm_param_groups"], model, ["blocks.1.weight", "blocks.3.weight", "head.weight"],
                                  ["emb.weight", "blocks.0.weight", "blocks.0.bias", "blocks.1.bias"], "untied")
    C.check_groups_step(model, groups)
    C.check_update_ratios(ns["update_to_weight_ratios"])
    bad = _answer("llm_param_groups", "tied_weight_twice")
    with pytest.raises(GradingError, match="parameters of the two groups"):
        C.check_param_groups(bad["llm_param_groups"], C.TinyLM(tie=True), ["blocks.1.weight", "blocks.3.weight"],
                             ["emb.weight", "blocks.0.weight", "blocks.0.bias", "blocks.1.bias"], "tied")
