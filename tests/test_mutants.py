"""The wrong-answer bank (issue 24; solutions_lib/course/mutants.py).

Every bank file names a real answer cell and real test cells, differs from the solution, and
every build-it exercise of the course has at least MIN_PER_EXERCISE wrong answers. A few
headline wrong answers (the shortcuts that skip the idea of an exercise) are graded here with
stock autograde; `python -m solutions_lib bench mutants` grades the whole bank."""
from __future__ import annotations

from pathlib import Path

import pytest

from solutions_lib.course import mutants as mu

ROOT = Path(__file__).resolve().parents[1]
BANK = mu.load_bank(ROOT)

#: graded in the suite: the shortcuts issue 24 found at full marks, each the wrong answer its
#: exercise exists to catch (the whole bank: `python -m solutions_lib bench mutants`)
SUITE = {
    "07_numerics_attention": ["07_numerics_attention/exercises_2_flash_attention/fa2_forward__full_matrix_per_head"],
    "08_data_checkpoints": ["08_data_checkpoints/exercises/dedup__python_hash"],
    "11_model_parallel": [
        "11_model_parallel/exercises_3_fsdp_sharded_optimizer/sharded_optimizer__stage2_allreduce_keeps_full_grad",
        "11_model_parallel/exercises_4_comm_bound/dp_step__no_barriers_mean_warmup_timed",
    ],
}

def test_every_bank_entry_names_real_cells_and_is_wrong():
    assert len(BANK) > 0
    assert mu.check_bank(ROOT, BANK) == []


def test_every_build_it_exercise_has_wrong_answers():
    cover = mu.bank_coverage(ROOT, BANK)
    thin = {k: n for k, n in cover.items() if n < mu.MIN_PER_EXERCISE}
    assert not thin, f"{len(thin)} of {len(cover)} exercises have fewer than {mu.MIN_PER_EXERCISE} wrong answers: {thin}"


def test_a_bank_file_needs_its_header(tmp_path):
    p = tmp_path / "a__b.py"
    p.write_text("def f():\n    return 1\n")
    with pytest.raises(ValueError, match="loses"):
        mu.parse(p, "x", "y.ipynb")
    p.write_text("# loses: t\ndef f():\n    return 1\n")
    with pytest.raises(ValueError, match="why"):
        mu.parse(p, "x", "y.ipynb")
    (tmp_path / "nounderscore.py").write_text("# loses: t\n# why: w\nx = 1\n")
    with pytest.raises(ValueError, match="grade_id"):
        mu.parse(tmp_path / "nounderscore.py", "x", "y.ipynb")


@pytest.mark.parametrize("assignment", sorted(SUITE), ids=sorted(SUITE))
def test_headline_wrong_answers_lose_points(assignment):
    wrong = [w for w in BANK if w.name in SUITE[assignment]]
    assert sorted(w.name for w in wrong) == sorted(SUITE[assignment]), "a headline wrong answer left the bank"
    outcomes = mu.sweep(assignment, wrong, ROOT, workers=1, out=lambda *_: None)
    assert len(outcomes) == len(wrong)
    for o in outcomes:
        assert o.caught, o.line()
