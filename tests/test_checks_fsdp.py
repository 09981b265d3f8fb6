"""The harness of 11 ex3 (`solutions_lib.dist.probes_fsdp`) accepts the notebook's reference classes
and rejects wrong answers from the bank with a message that says what was measured.

The reference `MyShardedOptimizer` / `MyFSDP` are the notebook's own solution cells, run in the
namespace of its setup cell; the wrong answers are the bank's files (tests/wrong_answers/...).
Small cases on 2 gloo ranks keep each check to a few seconds."""
from __future__ import annotations

from pathlib import Path

import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.dist import probes_fsdp as kit
from solutions_lib.grading import DelegationError, GradingError

pytestmark = pytest.mark.xdist_group("dist_fsdp_kit")

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "source" / "11_model_parallel" / "exercises_3_fsdp_sharded_optimizer.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "11_model_parallel" / "exercises_3_fsdp_sharded_optimizer"


def _setup_namespace() -> dict:
    nb = nbs.read(NB)
    ns: dict = {"__name__": "ex3_under_test"}
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    exec(compile(first_code.source, "setup", "exec"), ns)
    return ns


def _answer(grade_id: str, bank_file: str | None = None):
    """The class defined by the answer cell `grade_id` (the reference), or by a bank file."""
    ns = _setup_namespace()
    if bank_file is None:
        cell = next(c for c in nbs.read(NB).cells if nbs.nbgrader_md(c).get("grade_id") == grade_id)
        src = nbs.strip_solution_markers(cell.source)
    else:
        src = (BANK / bank_file).read_text()
    exec(compile(src, grade_id, "exec"), ns)
    return ns["MyShardedOptimizer" if grade_id == "sharded_optimizer" else "MyFSDP"]


@pytest.fixture(scope="module")
def sharded():
    return _answer("sharded_optimizer")


@pytest.fixture(scope="module")
def fsdp():
    return _answer("fsdp_layers")


SMALL = dict(world=2, dims=[4, 6, 2], seed=3)
BLOCKS = dict(world=2, depth=2, d=8, heads=2, seed=5)


def test_sharded_checks_accept_the_reference(sharded):
    kit.check_sharded_step(sharded, "SGD-momentum", steps=2, **SMALL)
    kit.check_sharded_state(sharded, "AdamW", **SMALL)
    kit.check_sharded_resume(sharded, "Adagrad", steps=3, cut=1, **SMALL)
    kit.check_sharded_stage2(sharded, "AdamW", steps=2, **SMALL)


def test_sharded_step_rejects_a_sum_without_the_mean():
    wrong = _answer("sharded_optimizer", "sharded_optimizer__sum_not_mean.py")
    with pytest.raises(GradingError, match=r"parameters of rank 0 after 2 steps"):
        kit.check_sharded_step(wrong, "SGD-momentum", steps=2, **SMALL)   # Adam is blind to the scale


def test_sharded_state_rejects_an_optimizer_on_full_parameters():
    wrong = _answer("sharded_optimizer", "sharded_optimizer__optimizer_on_full_params.py")
    with pytest.raises(GradingError, match=r"optimizer-state bytes of rank 0"):
        kit.check_sharded_state(wrong, "AdamW", **SMALL)


def test_stage2_rejects_a_kept_full_gradient():
    wrong = _answer("sharded_optimizer", "sharded_optimizer__stage2_keeps_p_grad.py")
    with pytest.raises(GradingError, match=r"left allocated on rank 0"):
        kit.check_sharded_stage2(wrong, "AdamW", steps=2, **SMALL)


def test_resume_rejects_an_ignored_state_dict():
    wrong = _answer("sharded_optimizer", "sharded_optimizer__load_state_dict_ignored.py")
    with pytest.raises(GradingError, match=r"saved after step 1, reloaded"):
        kit.check_sharded_resume(wrong, "AdamW", steps=3, cut=1, **SMALL)


def test_sharded_checks_refuse_delegation():
    from torch.distributed.optim import ZeroRedundancyOptimizer

    class Delegating(ZeroRedundancyOptimizer):
        pass

    with pytest.raises(DelegationError):
        kit.check_sharded_state(Delegating, "AdamW", **SMALL)


def test_fsdp_checks_accept_the_reference(fsdp):
    kit.check_fsdp_training(fsdp, steps=2, **BLOCKS)
    kit.check_fsdp_memory(fsdp, steps=2, **BLOCKS)
    kit.check_fsdp_mixed_precision(fsdp, steps=2, **BLOCKS)


def test_fsdp_memory_rejects_a_unit_kept_after_its_forward():
    wrong = _answer("fsdp_layers", "fsdp_layers__no_free_after_forward.py")
    with pytest.raises(GradingError, match=r"bytes autograd holds after the forward beyond the activations"):
        kit.check_fsdp_memory(wrong, steps=2, **BLOCKS)


def test_fsdp_training_rejects_a_missing_divide():
    wrong = _answer("fsdp_layers", "fsdp_layers__no_divide_by_n.py")
    with pytest.raises(GradingError, match=r"losses of rank 0, step by step"):
        kit.check_fsdp_training(wrong, steps=2, **BLOCKS)


def test_mixed_precision_rejects_a_cast_after_the_gather():
    wrong = _answer("fsdp_layers", "fsdp_layers__bf16_cast_after_gather.py")
    with pytest.raises(GradingError, match=r"bytes per all-gather"):
        kit.check_fsdp_mixed_precision(wrong, steps=2, **BLOCKS)


def test_whole_tensors_per_rank_keep_the_numbers_but_lose_the_traffic_and_the_state():
    wrong = _answer("sharded_optimizer", "sharded_optimizer__partition_whole_tensors.py")
    with pytest.raises(GradingError, match=r"reduce-scatter bytes per step\(\) on rank 0"):
        kit.check_sharded_step(wrong, "AdamW", world=2, dims=[6, 16, 16, 2], seed=0, steps=2)
    with pytest.raises(GradingError, match="optimizer-state bytes of rank"):
        kit.check_sharded_state(wrong, "AdamW", world=2, dims=[6, 16, 16, 2], seed=0)


def test_the_whole_model_gathered_up_front_trains_right_but_loses_the_memory_cell():
    wrong = _answer("fsdp_layers", "fsdp_layers__whole_model_gathered_up_front.py")
    kit.check_fsdp_training(wrong, steps=2, **BLOCKS)
    with pytest.raises(GradingError, match="beyond the activations|peak_param_bytes|all-gather bytes"):
        kit.check_fsdp_memory(wrong, steps=2, **BLOCKS)
