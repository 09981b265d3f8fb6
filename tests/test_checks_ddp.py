"""solutions_lib.dist.checks_ddp (10 exercises 1): the checks accept the notebook's solution and
reject a wrong answer from the bank with the message that names the slip."""
from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist

from solutions_lib.course import notebooks as nbs
from solutions_lib.dist import launch_graded
from solutions_lib.dist import checks_ddp as C
from solutions_lib.dist.ddp import bucket_plan as ref_plan
from solutions_lib.grading import GradingError

from conftest import ROOT

NB = ROOT / "source" / "10_distributed_lab" / "exercises_1_ddp.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "10_distributed_lab" / "exercises_1_ddp"


def _answer(gid: str, source: str | None = None) -> dict:
    """The namespace of the notebook's answer cell `gid` (or of a wrong answer's `source`)."""
    cell = next(c for c in nbs.read(NB).cells if nbs.nbgrader_md(c).get("grade_id") == gid)
    ns = {"torch": torch, "dist": dist, "math": math}
    exec(nbs.strip_solution_markers(cell.source) if source is None else source, ns)
    return ns


def test_lab_cfg_draws_in_a_fixed_order():
    a = C.draw_lab_cfg(torch.Generator().manual_seed(5))
    b = C.draw_lab_cfg(torch.Generator().manual_seed(5))
    assert a == b and set(a) == {"vocab", "d", "depth", "seed", "frozen_layer", "tied"}
    fixed = C.draw_lab_cfg(torch.Generator().manual_seed(5), frozen_layer=0, tied=False)
    assert (fixed["frozen_layer"], fixed["tied"]) == (0, False) and fixed["vocab"] == a["vocab"]


def test_bucket_cases_come_from_torch_and_accept_the_rule():
    cases = C.torch_bucket_cases(torch.Generator().manual_seed(1), 6, exact=[([25, 75, 50, 50, 12], 400)])
    assert len(cases) == 7 and cases[-1][2] == [[0, 1], [2, 3], [4]]
    C.expect_bucket_plans([ref_plan(s, c) for s, c, _ in cases], cases)
    strict = _answer("bucket_plan", (BANK / "bucket_plan__strict_cap.py").read_text())["bucket_plan"]
    with pytest.raises(GradingError, match=r"bucket_plan\(\[100, 300"):
        C.expect_bucket_plans([strict(s, c) for s, c, _ in cases], cases)


def test_naive_sync_checks_accept_the_solution_and_catch_a_sum():
    good = _answer("sync_gradients")["sync_gradients"]
    out = launch_graded(C.check_naive_sync, 2, args=(good, dict(vocab=13, seed=0), 1, 2, (0,), True))
    C.expect_replicas_agree(out, "sync_gradients")
    launch_graded(C.count_naive_sync, 2, args=(good, dict(vocab=13, seed=0), 2))
    wrong = _answer("sync_gradients", (BANK / "sync_gradients__sum_not_mean.py").read_text())["sync_gradients"]
    with pytest.raises(GradingError, match="differs from gradient accumulation in one process"):
        launch_graded(C.check_naive_sync, 2, args=(wrong, dict(vocab=13, seed=0), 1, 2, (0,), True))
    flat = _answer("sync_gradients", (BANK / "sync_gradients__one_flat_allreduce.py").read_text())["sync_gradients"]
    with pytest.raises(GradingError, match="all_reduce calls in 2 steps"):
        launch_graded(C.count_naive_sync, 2, args=(flat, dict(vocab=13, seed=0), 2))


def test_bucketed_checks_accept_the_solution_and_catch_late_launches():
    ns = _answer("bucket_plan")
    exec(nbs.strip_solution_markers(next(c for c in nbs.read(NB).cells
                                         if nbs.nbgrader_md(c).get("grade_id") == "bucketed_sync").source), ns)
    cfg = dict(vocab=13, seed=0, tied=True, frozen_layer=1)
    launch_graded(C.check_bucketed_sync, 2, args=(ns["BucketedSync"], cfg, 300, 1, 2, (0,), True))
    launch_graded(C.count_bucketed_sync, 2, args=(ns["BucketedSync"], cfg, 300, 2))
    launch_graded(C.check_bad_cap, 2, args=(ns["BucketedSync"], 0))
    late = dict(ns)
    exec((BANK / "bucketed_sync__all_in_finish_counters_claim_overlap.py").read_text(), late)
    with pytest.raises(GradingError, match="before the embedding's gradient"):
        launch_graded(C.count_bucketed_sync, 2, args=(late["BucketedSync"], cfg, 300, 2))


def test_replicas_that_differ_are_named():
    a, b = [torch.zeros(2)], [torch.ones(2)]
    with pytest.raises(GradingError, match="rank 1 ends with parameters different from rank 0; every rank"):
        C.expect_replicas_agree([a, b], "sync_gradients", "; every rank must receive the same averaged gradient")
