"""solutions_lib.dist.checks_zero_fsdp (10 exercises 2): the checks accept the notebook's solutions
and reject wrong answers from the bank with the message that names the slip."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from solutions_lib.course import notebooks as nbs
from solutions_lib.dist import launch_graded
from solutions_lib.dist import checks_zero_fsdp as C
from solutions_lib.dist.zero import mlp, reference_adamw_training, regression_micro_batches
from solutions_lib.grading import GradingError

from conftest import ROOT

NB = ROOT / "source" / "10_distributed_lab" / "exercises_2_zero_fsdp.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "10_distributed_lab" / "exercises_2_zero_fsdp"
HP = dict(lr=3e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
DIMS = [6, 10, 2]


def _answer(gid: str, name: str, wrong: str | None = None):
    """The class `name` of the notebook's answer cell `gid`, or of the bank's wrong answer `wrong`."""
    cell = next(c for c in nbs.read(NB).cells if nbs.nbgrader_md(c).get("grade_id") == gid)
    ns = {"torch": torch, "dist": dist, "F": F, "nn": nn}
    exec(nbs.strip_solution_markers(cell.source) if wrong is None else (BANK / wrong).read_text(), ns)
    return ns[name]


@pytest.fixture(scope="module")
def case():
    batches = regression_micro_batches(2, 2, 6, 2, seed=1)
    return batches, reference_adamw_training(mlp(DIMS, seed=0), batches, **HP)


def test_zero_checks_accept_the_solution(case):
    batches, expected = case
    opt = _answer("zero1_optimizer", "MyZeroAdamW")
    assert launch_graded(C.check_zero_equivalence, 2, args=(opt, DIMS, 0, batches, HP, expected)) == [True, True]
    held = launch_graded(C.check_zero_bytes_and_comm, 2, args=(opt, DIMS, 0, batches, HP, expected))
    assert sum(held) == expected["state_bytes"] == 736


def test_zero_checks_catch_a_full_flat_buffer_and_a_sum(case):
    batches, expected = case
    keeps = _answer("zero1_optimizer", "MyZeroAdamW", "zero1_optimizer__keeps_full_flat_buffer.py")
    with pytest.raises(GradingError, match="tensors of the whole model's size kept by the optimizer"):
        launch_graded(C.check_zero_bytes_and_comm, 2, args=(keeps, DIMS, 0, batches, HP, expected))
    summed = _answer("zero1_optimizer", "MyZeroAdamW", "zero1_optimizer__sum_not_mean.py")
    hp = dict(HP, eps=1e-3)   # an eps that makes the gradient's scale matter (Adam is scale-free without it)
    expected = reference_adamw_training(mlp(DIMS, seed=0), batches, **hp)
    with pytest.raises(GradingError, match="differs from torch AdamW on one process"):
        launch_graded(C.check_zero_equivalence, 2, args=(summed, DIMS, 0, batches, hp, expected))


def test_model_sized_tensors_finds_a_copy_in_a_list():
    p = nn.Parameter(torch.zeros(10))
    holder = type("Opt", (), {})()
    holder.params, holder.buffers = [p], [torch.zeros(3), torch.zeros(12)]
    assert C.model_sized_tensors(holder, [p], 10) == [(12,)]


def test_fsdp_checks_accept_the_solution_and_catch_a_kept_copy(case):
    batches, expected = case
    fsdp = _answer("fsdp_by_hand", "MyFSDP")
    assert launch_graded(C.check_fsdp_equivalence, 2, args=(fsdp, DIMS, 0, batches, HP, expected)) == [True, True]
    assert launch_graded(C.check_fsdp_memory, 2, args=(fsdp, DIMS, 0, batches, HP)) == [184, 184]
    kept = _answer("fsdp_by_hand", "MyFSDP", "fsdp_by_hand__keeps_gathered_copy.py")
    with pytest.raises(GradingError, match="rank 0: "):
        launch_graded(C.check_fsdp_memory, 2, args=(kept, DIMS, 0, batches, HP))
