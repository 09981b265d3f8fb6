"""The checks of 11 ex1 parts A-D (`solutions_lib.dist.probes_tp_layers`) accept the notebook's
own solution cells and reject wrong answers from the bank with a message that says what was
measured.

The answers run in a namespace built from the notebook's setup cell and solution cells (markers
stripped), as in the student's kernel; the wrong answers are the bank's files
(tests/wrong_answers/11_model_parallel/exercises_1_tensor_sequence/). Small cases on 2 gloo ranks."""
from __future__ import annotations

from pathlib import Path

import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.dist import probes_tp_layers as kit
from solutions_lib.grading import GradingError

pytestmark = pytest.mark.xdist_group("dist_tp")

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "source" / "11_model_parallel" / "exercises_1_tensor_sequence.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "11_model_parallel" / "exercises_1_tensor_sequence"
ANSWERS = ("conjugate_ops", "parallel_linear", "tp_block", "sp_ops", "sync_replicated", "sp_entry")


def _namespace(**wrong: str) -> dict:
    """The setup cell and every answer cell of the solution, with the bank files `wrong`
    ({answer grade_id: file stem}) in place of their answer cells."""
    cells = nbs.read(NB).cells
    ns: dict = {"__name__": "ex1_under_test"}
    exec(compile(next(c for c in cells if c.cell_type == "code").source, "setup", "exec"), ns)
    for c in cells:
        gid = nbs.nbgrader_md(c).get("grade_id")
        if gid in ANSWERS:
            src = ((BANK / f"{gid}__{wrong[gid]}.py").read_text() if gid in wrong
                   else nbs.strip_solution_markers(c.source))
            exec(compile(src, gid, "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def ns():
    return _namespace()


def test_the_solution_passes_every_check(ns):
    kit.check_copy_to_tp(ns["CopyToTP"], 2, 0, (3, 4))
    kit.check_reduce_from_tp(ns["ReduceFromTP"], 2, 0, (3, 4))
    kit.check_column(ns["ColumnParallelLinear"], ns, 2, 0, [6, 8], 2, seq=4, sp=True)
    kit.check_row(ns["RowParallelLinear"], ns, 2, 0, [8, 5], 3, bias=False)
    kit.check_mlp(ns["ColumnParallelLinear"], ns["RowParallelLinear"], ns, 2, 0, [6, 8, 4], 3)
    kit.check_block(ns["TensorParallelBlock"], ns, 2, dict(seed=0))
    kit.check_block_sp(ns["TensorParallelBlock"], ns, 2, dict(seed=0))
    kit.check_block_comm(ns["TensorParallelBlock"], ns, 2, dict(seed=0))
    kit.check_gather_from_sp(ns["GatherFromSP"], 2, 0, 2, 6, 3)
    kit.check_scatter_to_sp(ns["ScatterToSP"], 2, 0, 2, 6, 3)
    kit.check_sp_block(ns["sync_replicated_grads"], ns, 2, dict(seed=0))
    kit.check_sync_comm(ns["sync_replicated_grads"], ns, 2, dict(seed=0))
    kit.check_sp_entry_grads(ns["SPColumnLinear"], 2, seed=0, sizes=[6, 8], batch=2, seq=4)
    kept, naive = kit.check_sp_entry_saved(ns["SPColumnLinear"], 2, seed=0, sizes=[6, 8], batch=2, seq=4)
    assert 0 < kept <= naive / 2


def test_layernorm_bytes_are_measured():
    import torch
    case = dict(seed=0, hidden=16, heads=4, batch=2, seq_len=8, dtype=torch.float32)
    full, split = (kit.layernorm_bytes_measured(2, sp, case) for sp in (False, True))
    assert full == 2 * (2 * 8 * 16 + 2 * 2 * 8) * 4 and split == full // 2


@pytest.mark.parametrize("answer, wrong, check, message", [
    ("conjugate_ops", "f_backward_identity",
     lambda ns: kit.check_copy_to_tp(ns["CopyToTP"], 2, 0, (3, 4)), "f backward on rank 0 of 2"),
    ("parallel_linear", "row_bias_before_reduce",
     lambda ns: kit.check_row(ns["RowParallelLinear"], ns, 2, 0, [8, 5], 3), "output on rank 0 vs the full layer"),
    ("tp_block", "three_column_layers",
     lambda ns: kit.check_block_comm(ns["TensorParallelBlock"], ns, 2, dict(seed=0)), "collectives (forward, backward)"),
    ("sp_ops", "gather_backward_slices",
     lambda ns: kit.check_gather_from_sp(ns["GatherFromSP"], 2, 0, 2, 6, 3), "backward = this rank.s tokens"),
    ("sync_replicated", "averages",
     lambda ns: kit.check_sp_block(ns["sync_replicated_grads"], ns, 2, dict(seed=0)), "do not average"),
])
def test_a_wrong_answer_fails_with_what_was_measured(answer, wrong, check, message):
    with pytest.raises(GradingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check(_namespace(**{answer: wrong}))
