"""The grader's own look at each test cell, outside the student's kernel.

nbgrader scores a test cell by one fact: did its outputs hold an error? Code that runs in the
same kernel can make that fact false without passing anything: an IPython input transformer
that empties later cells, a `post_run_cell` hook, `solutions_lib.grading.expect_close`
replaced by a no-op, `numpy.allclose` patched to say yes. During autograde every check that
passes leaves a *check record* in the cell's outputs (`solutions_lib.grading.RECORD_MIME`).
`VerifyCheckRecords`, an nbgrader preprocessor that runs in the grader process right after the
kernel finished, then fails (adds a `GradingError` output, so nbgrader scores it zero) and
marks (`metadata.tas_integrity`, listed by the grade report) every test cell that:

- calls a check (`expect_*`, `no_delegation`, `launch_graded`) in its source, ran without an
  error, and left no record: its checks did not run as written;
- holds a record that does not hold when the grader recomputes it with its own numpy
  (`close`: |got - expected| <= atol + rtol |expected| for every entry, recorded in full up to
  `RECORD_MAX_VALUES` entries; `equal`: the recorded plain values are equal).

What this cannot catch (docs/THREAT_MODEL.md): code that forges records with the right values,
which needs the expected values, i.e. the student's code running the reference or reading the
hidden test while it runs. That is deliberate tampering; the scanner flags the hooks and
patches it needs for a person to look at.
"""
from __future__ import annotations

import re

import numpy as np
from nbformat.v4 import new_output

from ..grading import RECORD_MIME
from .feedback import is_test_cell

#: Cell metadata key holding the problem found in a test cell (read by report.py).
METADATA_KEY = "tas_integrity"
CHECK_CALL = re.compile(r"\b(expect_\w+|no_delegation|launch_graded)\s*\(")


def records(cell) -> list[dict]:
    return [o["data"][RECORD_MIME] for o in cell.get("outputs", [])
            if o.get("output_type") == "display_data" and RECORD_MIME in o.get("data", {})
            and isinstance(o["data"][RECORD_MIME], dict)]


def calls_a_check(source: str) -> bool:
    code = "\n".join(line for line in source.split("\n") if not line.lstrip().startswith("#"))
    return bool(CHECK_CALL.search(code))


def recheck(rec: dict) -> str | None:
    """None when the record holds; else what is wrong, in words."""
    what = str(rec.get("what", "a check"))
    kind = rec.get("kind")
    if kind == "close" and rec.get("got") is not None and rec.get("expected") is not None:
        try:
            g = np.array(rec["got"], dtype=np.float64)
            e = np.array(rec["expected"], dtype=np.float64)
            rtol, atol = float(rec.get("rtol", 0.0)), float(rec.get("atol", 0.0))
        except (TypeError, ValueError):
            return f"the record of '{what}' is not a pair of numbers"
        if g.shape != e.shape or not np.all(np.isfinite(g)) or np.any(np.abs(g - e) > atol + rtol * np.abs(e)):
            return f"'{what}' passed in the kernel but does not hold when the grader recomputes it"
    elif kind == "equal" and rec.get("got") is not None and rec.get("expected") is not None:
        if rec["got"] != rec["expected"]:
            return f"'{what}' passed in the kernel but the recorded values differ"
    return None


def problem_of(cell) -> str | None:
    """What is wrong with a test cell's run, or None (also for cells that already failed)."""
    if not is_test_cell(cell) or any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
        return None
    recs = records(cell)
    if not recs and calls_a_check(cell.get("source", "")):
        return ("the checks of this test cell left no record of running: the cell was changed, skipped or its "
                "check functions replaced while it ran. It scores zero and is flagged for your instructor.")
    for rec in recs:
        problem = recheck(rec)
        if problem:
            return problem + ". It scores zero and is flagged for your instructor."
    return None


def integrity_flags(nb) -> list[tuple[str, str]]:
    """[(grade_id, problem)] marked in an autograded notebook."""
    out = []
    for cell in nb.cells:
        problem = cell.get("metadata", {}).get(METADATA_KEY)
        if problem:
            out.append(((cell.metadata.get("nbgrader", {}) or {}).get("grade_id", "?"), str(problem)))
    return out


def _preprocessor_class():
    from nbgrader.preprocessors import NbGraderPreprocessor

    class VerifyCheckRecords(NbGraderPreprocessor):
        """Autograde preprocessor (after Execute): see the module docstring."""

        def preprocess_cell(self, cell, resources, index):
            problem = problem_of(cell)
            if problem:
                cell.outputs.append(new_output("error", ename="GradingError", evalue=problem,
                                               traceback=[f"GradingError: {problem}"]))
                cell.metadata[METADATA_KEY] = problem
            return cell, resources

    return VerifyCheckRecords


_CLASS = None


def verify_check_records_class():
    """The preprocessor class (built on first use: nbgrader imports are slow)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _preprocessor_class()
    return _CLASS


def insert_verifier(preprocessors: list) -> list:
    """`preprocessors` (Autograde's list) with the verifier right after the metadata is cleared
    (ClearMetadataPreprocessor would drop its mark) and before the grades are saved."""
    from nbconvert.preprocessors import ClearMetadataPreprocessor
    from nbgrader.preprocessors import SaveAutoGrades

    cls = verify_check_records_class()
    out = [p for p in preprocessors if p is not cls]
    anchor = ClearMetadataPreprocessor if ClearMetadataPreprocessor in out else SaveAutoGrades
    if anchor not in out:
        raise ValueError("Autograde preprocessors have neither ClearMetadataPreprocessor nor SaveAutoGrades")
    i = out.index(anchor) + (1 if anchor is ClearMetadataPreprocessor else 0)
    return out[:i] + [cls] + out[i:]
