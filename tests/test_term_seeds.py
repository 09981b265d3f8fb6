"""This term's hidden cases (issue 25; docs/GRADING.md rule 8): hidden tests draw their inputs
from `grading.term_seed`, which mixes a literal seed with the course's secret. Two secrets give
different hidden inputs and the same verdicts: solved full marks, blank zero."""
from __future__ import annotations

import glob
from pathlib import Path

import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.term_seeds import BEGIN, unconverted
from solutions_lib.grading import term_seed

ROOT = Path(__file__).resolve().parents[1]
A, N = "01_optimizers", "theory.ipynb"


def test_term_seed(monkeypatch):
    monkeypatch.delenv("TAS_TERM_SEED", raising=False)
    assert term_seed(70201) == 70201
    monkeypatch.setenv("TAS_TERM_SEED", "a")
    a = term_seed(70201)
    monkeypatch.setenv("TAS_TERM_SEED", "b")
    assert a != term_seed(70201) and 0 <= a < 2**31 and term_seed(70201) != term_seed(70202)
    for bad in (True, 1.5, "3"):
        with pytest.raises(ValueError, match="int"):
            term_seed(bad)


def test_every_hidden_seed_goes_through_term_seed():
    left = {}
    for path in sorted(glob.glob(str(ROOT / "source" / "*" / "*.ipynb"))):
        for cell in nbs.read(path).cells:
            if cell.cell_type == "code" and BEGIN in cell.source and unconverted(cell.source):
                left.setdefault(Path(path).relative_to(ROOT).as_posix(), []).extend(unconverted(cell.source))
    assert not left, f"run `python -m solutions_lib.course.term_seeds`: {left}"


def _hidden_values(entry) -> list:
    return [(gid, r.get("what"), r.get("expected", r.get("lo"))) for gid, c in sorted(entry["cells"].items())
            for r in c["records"] if "hidden" in str(r.get("what", "")).lower() or r.get("expected") is not None]


def test_two_secrets_give_other_hidden_inputs_and_the_same_scores(tmp_path, monkeypatch):
    from solutions_lib.course.config import term_key
    from solutions_lib.course.grader import Course, make_course, solved_version
    from solutions_lib.course.trusted import trusted_records

    monkeypatch.setenv("TAS_TRUSTED_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TAS_TERM_SEED", "")       # restored (unset) after the test: apply_course_config sets it
    entries = {}
    for secret in ("term-one", "term-two"):
        monkeypatch.setenv("TAS_COURSE_SECRET", secret)
        course = Course(make_course(tmp_path / secret, [A], ROOT))   # apply_course_config sets TAS_TERM_SEED
        import os
        assert os.environ["TAS_TERM_SEED"] == term_key(str(course.root))
        entries[secret] = trusted_records(ROOT / "source" / A / N)
        course.generate(A)
        rel = course.release_notebook(A, N)
        course.submit("solved", A, {N: solved_version(rel, nbs.read(ROOT / "source" / A / N))})
        course.submit("blank", A, {N: rel})
        for s in ("solved", "blank"):
            course.autograde(A, s)
        res = {s: next(n for n in course.results(A, s).notebooks if n.name == N) for s in ("solved", "blank")}
        assert res["solved"].score("tests") == res["solved"].max_score("tests") > 0, secret
        assert res["blank"].score("tests") == 0, secret
    one, two = (_hidden_values(entries[s]) for s in ("term-one", "term-two"))
    assert len(one) == len(two) and one != two, "the hidden cases did not change with the secret"
