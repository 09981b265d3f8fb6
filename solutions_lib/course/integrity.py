"""The grader decides each test cell itself, outside the student's kernel.

nbgrader scores a test cell from its outputs: an error or any stderr output scores 0, the
first `execute_result` is read as partial credit, anything else is full marks. Every one of
those facts can be steered by code in the student's kernel (a thread that writes a number
into the running cell, a hook that swallows the error, a warning printed by a correct answer).
`DecideTestCells`, an nbgrader preprocessor that runs in the grader process right after the
kernel finished (wired into `Autograde.autograde_preprocessors` by config.py), replaces that
heuristic with the course's rule:

**A test cell passes iff it ran without an error and every check it must run left a record
whose value the grader verifies itself.**

- *Which checks* come from the trusted run of the instructor's solution (trusted.py), never
  from the kernel: a cell that skipped, emptied or hid (a cell magic, an input transformer)
  any of its checks fails.
- *Values*: a record carries what the student's code returned; the grader compares it with
  the trusted run's expected value, tolerance, unit and hint (the kernel's own expected
  value, if any, is ignored; at grading time the references are withheld from the kernel, so
  it has none). A range predicate (`expect_between`) is evaluated here with the trusted run's
  bounds. Checks that are claims (`expect_true`, `expect_raises`, `expect_accepts`, the
  own-work guards, the ranks of a distributed check) count when they ran; their limits are in
  docs/THREAT_MODEL.md.
- *Output kinds* neither award nor cost points: in test cells, stderr becomes an ordinary
  stream (a harmless warning costs nothing), `execute_result` becomes display data (no
  partial credit from a number a thread wrote), and the records are removed. Then nbgrader's
  own rule sees exactly one fact: an error output, present iff the cell failed.

A failure the student's kernel could not have produced honestly (a check that did not run
although the cell raised nothing, a value that passed in the kernel but not here, records out
of order) is also marked in `metadata.tas_integrity`; the grade report lists it in `flags.csv`
as `check_records`. An ordinary wrong answer is just a failed cell with its message.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
from nbformat.v4 import new_output

from ..grading import RECORD_MIME, between_failure, close_failure, same_value
from .cell_source import same_source as _same_source
from .trusted import records_of, trusted_records

#: Cell metadata key holding the problem found in a test cell (read by report.py).
METADATA_KEY = "tas_integrity"
CHECK_CALL = re.compile(r"\b(expect_\w+|no_delegation|launch_graded)\s*\(")
CLAIMS = ("true", "raises", "accepts", "own_work", "ranks")


def records(cell) -> list[dict]:
    return records_of(cell)


def calls_a_check(source: str) -> bool:
    code = "\n".join(line for line in source.split("\n") if not line.lstrip().startswith("#"))
    return bool(CHECK_CALL.search(code))


def _is_test_cell(cell) -> bool:
    md = (cell.get("metadata", {}) or {}).get("nbgrader", {}) or {}
    return cell.get("cell_type") == "code" and bool(md.get("grade")) and not md.get("solution")


def _array(values, shape) -> np.ndarray | None:
    try:
        a = np.array(values, dtype=np.float64)
        shape = tuple(int(s) for s in shape)
        return a.reshape(shape) if a.size == int(np.prod(shape, dtype=np.int64)) else a
    except (TypeError, ValueError, OverflowError):
        return None


def _normal(x):
    """Plain data as the records carry it (JSON: tuples become lists)."""
    return json.loads(json.dumps(x, allow_nan=True))


#: Limits of a grader-side recomputation (issue 26): the kernel chooses its arguments (its own
#: measurement), so it runs in a child process with a time and memory bound, and only a
#: reference that the test cell's own (trusted) source names may be called.
REDO_SECONDS = 30
REDO_MEMORY_BYTES = 2 << 30
REDO_DATA_BYTES = 8 << 20


def _names_in(source: str) -> set[str]:
    """The withheld references that a test cell's source names (`ref.fit_alpha_beta(...)`)."""
    import re

    from .withheld_view import withheld_names
    return {n for n in withheld_names() if re.search(rf"\b{re.escape(n.rpartition('.')[2])}\b", source or "")}


def redo_reference(calls, allowed: set[str] | None = None):
    """The expected value of a measured check: the withheld reference calls the kernel recorded
    (on its own measurement), redone by the grader with the real references, in a child process
    bounded by REDO_SECONDS and REDO_MEMORY_BYTES; only references in `allowed` (those the test
    cell names; None: any withheld one). None when they cannot be redone within the bounds."""
    import subprocess
    import sys

    try:
        payload = json.dumps({"calls": calls, "allowed": sorted(allowed) if allowed is not None else None})
    except (TypeError, ValueError):
        return None
    if len(payload) > REDO_DATA_BYTES:
        return None

    def limits():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (REDO_MEMORY_BYTES, REDO_MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (REDO_SECONDS, REDO_SECONDS))

    try:
        p = subprocess.run([sys.executable, "-m", "solutions_lib.course.redo"], input=payload,
                           capture_output=True, text=True, timeout=REDO_SECONDS, preexec_fn=limits,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    except (subprocess.TimeoutExpired, OSError):
        return None
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout)["value"]
    except (ValueError, KeyError, TypeError):
        return None


def verify(student: dict, trusted: dict, allowed: set[str] | None = None) -> tuple[str | None, bool]:
    """(problem, tampering) for one matched pair of records; (None, False) when it holds.
    `allowed`: the references a measured check may be recomputed with (redo_reference)."""
    kind = trusted.get("kind")
    what = str(trusted.get("what", "a check"))
    if kind == "close":
        t_shape = trusted.get("expected_shape", trusted.get("shape", []))
        if trusted.get("measured"):
            if student.get("withheld"):
                e = redo_reference(student.get("calls"), allowed)
                if e is None:
                    return f"{what}: the grader could not recompute the reference on your measurement", True
                e = np.asarray(e, dtype=np.float64)
            elif student.get("expected") is not None:
                e = _array(student["expected"], student.get("expected_shape", student.get("shape", [])))
            else:
                return f"{what}: the measured expected value was not recorded", True
        else:
            e = _array(trusted.get("expected"), t_shape)
        g = _array(student.get("got"), student.get("shape", []))
        if g is None or e is None:
            return f"{what}: the value your code returned could not be read", True
        if bool(student.get("sampled")) != bool(trusted.get("sampled")) and g.shape == e.shape:
            return f"{what}: the value your code returned could not be read", True
        problem = close_failure(g, e, what, rtol=float(trusted.get("rtol", 0.0)), atol=float(trusted.get("atol", 0.0)),
                                unit=str(trusted.get("unit", "")), hint=str(trusted.get("hint", "")))
        # the kernel compared with a concrete expected value and let it pass: a forged pass
        return problem, bool(problem) and not student.get("withheld")
    if kind == "equal":
        if "got" not in student or student.get("got") is None and trusted.get("expected") is not None:
            return f"{what}: the value your code returned could not be recorded (use ints, strings, tuples)", False
        g, e = _normal(student.get("got")), _normal(trusted.get("expected"))
        if same_value(g, e):
            return None, False
        hint = str(trusted.get("hint", ""))
        shown = student.get("got_repr") or repr(g)[:200]
        problem = f"{what}: expected {e!r:.200}, got {shown}." + (f" {hint}" if hint else "")
        return problem, not student.get("withheld")
    if kind == "between":
        source = student if trusted.get("measured") else trusted
        if trusted.get("measured") and student.get("withheld"):
            return f"{what}: the bounds of a measured check were not recorded", True
        g = _array(student.get("got"), student.get("shape", []))
        if g is None:
            return f"{what}: the value your code returned could not be read", True
        lo, hi = source.get("lo"), source.get("hi")
        problem = between_failure(g, lo, hi, what, unit=str(trusted.get("unit", "")), hint=str(trusted.get("hint", "")))
        # the kernel decided with bounds it knew and let the value pass: a forged pass
        return problem, bool(problem) and not student.get("withheld")
    if kind in CLAIMS:
        return None, False
    return f"{what}: a check of unknown kind {kind!r}", True


def match(student: list[dict], trusted: list[dict]) -> tuple[list[tuple[dict, dict]], dict | None]:
    """Pair each trusted record with the student's record of the same check, in order.

    The trusted sequence must appear, in order, inside the student's (extra records, e.g.
    from a student function that calls a check itself, are ignored). Records are matched by
    kind and description; when descriptions differ between runs (a measured number in the
    text) and the counts agree, by position and kind. Returns (pairs, first missing record).
    """
    pairs, j = [], 0
    for t in trusted:
        key = (t.get("kind"), t.get("what"))
        while j < len(student) and (student[j].get("kind"), student[j].get("what")) != key:
            j += 1
        if j == len(student):
            break
        pairs.append((student[j], t))
        j += 1
    else:
        return pairs, None
    if len(student) == len(trusted) and all(s.get("kind") == t.get("kind") for s, t in zip(student, trusted)):
        return list(zip(student, trusted)), None
    return pairs, trusted[len(pairs)]


def decide(cell, trusted_cell: dict) -> tuple[str | None, bool]:
    """(problem, tampering) for a test cell that ran without an error; (None, False) if it passes."""
    t_records = trusted_cell.get("records", [])
    s_records = records(cell)
    pairs, missing = match(s_records, t_records)
    if missing is not None:
        return (f"the check '{str(missing.get('what', ''))[:200]}' of this test cell did not run, although the cell "
                "raised no error: the cell was changed, skipped or its checks replaced while it ran. It scores "
                "zero and is flagged for your instructor."), True
    allowed = _names_in(trusted_cell.get("source", ""))
    for s, t in pairs:
        problem, tampering = verify(s, t, allowed)
        if problem:
            if tampering:
                problem += (" (This passed inside your notebook's kernel but not when the grader checked the value "
                            "itself; it scores zero and is flagged for your instructor.)")
            return problem, tampering
    return None, False


def normalise_outputs(cell) -> None:
    """Outputs that neither award nor cost points: records removed, stderr as an ordinary
    stream, execute_result as display data (see the module docstring)."""
    out = []
    for o in cell.get("outputs", []):
        kind = o.get("output_type")
        if kind == "display_data" and RECORD_MIME in (o.get("data") or {}):
            continue
        if kind == "stream" and o.get("name") == "stderr":
            o = new_output("stream", name="stdout", text=o.get("text", ""))
        elif kind == "execute_result":
            o = new_output("display_data", data=o.get("data", {}), metadata=o.get("metadata", {}))
        out.append(o)
    cell["outputs"] = out


def _fail(cell, problem: str, tampering: bool) -> None:
    cell.outputs.append(new_output("error", ename="GradingError", evalue=problem,
                                   traceback=[f"GradingError: {problem}"]))
    if tampering:
        cell.metadata[METADATA_KEY] = problem


def decide_notebook(nb, trusted_entry: dict) -> None:
    """Apply the course's rule to every test cell of an executed notebook, in place."""
    cells = trusted_entry.get("cells", {})
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        if not _is_test_cell(cell):
            # records published from other cells mean nothing; never show them
            cell["outputs"] = [o for o in cell.get("outputs", []) if not (
                o.get("output_type") == "display_data" and RECORD_MIME in (o.get("data") or {}))]
            continue
        gid = cell.metadata["nbgrader"].get("grade_id", "?")
        if gid not in cells or not _same_source(cells[gid]["source"], cell.source):
            raise RuntimeError(f"test cell {gid} differs from the source notebook's: the assignment was changed "
                               "after `nbgrader generate_assignment`; run it again (with --force) before grading")
        failed = any(o.get("output_type") == "error" for o in cell.get("outputs", []))
        if failed:
            explain_errors(cell)
        problem, tampering = (None, False) if failed else decide(cell, cells[gid])
        normalise_outputs(cell)
        if problem:
            _fail(cell, problem, tampering)


EXPLAIN = {
    "NotImplementedError": ("an answer this test uses still raises NotImplementedError: replace the "
                            "`raise NotImplementedError()` line of the answer cell above with your code"),
    "NameError": "run the answer cell above this test (a name it defines is missing, or that cell failed)",
    "CellTimeoutError": "the cell ran past the grader's time limit: look for an endless loop or a very slow answer",
    "KeyboardInterrupt": "the cell ran past the grader's time limit: look for an endless loop or a very slow answer",
}


_PEERS_LINE = re.compile(r"^\(ranks \[[0-9, ]*\] failed after it\)$")


def explain_errors(cell) -> None:
    """Give a bare error of a failed test cell (a blank answer's NotImplementedError, a
    NameError, a timeout) a message a student can act on (issue 15: every zero says why)."""
    for o in cell.get("outputs", []):
        if o.get("output_type") != "error":
            continue
        hint = EXPLAIN.get(str(o.get("ename", "")))
        evalue = str(o.get("evalue", ""))
        if o.get("ename") == "LaunchError" and "\n" in evalue.strip():
            # "rank 0 failed:\n<traceback>": put the rank's own error on the first line
            lines = [ln for ln in evalue.strip().splitlines() if ln.strip()]
            own = [ln for ln in lines[1:] if not _PEERS_LINE.match(ln.strip())] or lines
            last = own[-1].strip()
            cause = last.split(":", 1)[0].strip()
            extra = EXPLAIN.get(cause)
            first = f"{lines[0].rstrip(':')} with {last[:300]}" + (f" ({extra})" if extra else "")
            o["evalue"] = first + "\n" + evalue
            continue
        if hint and hint not in evalue:
            o["evalue"] = f"{evalue} ({hint})" if evalue.strip() else hint


def integrity_flags(nb) -> list[tuple[str, str]]:
    """[(grade_id, problem)] marked in an autograded notebook."""
    out = []
    for cell in nb.cells:
        problem = cell.get("metadata", {}).get(METADATA_KEY)
        if problem:
            out.append(((cell.metadata.get("nbgrader", {}) or {}).get("grade_id", "?"), str(problem)))
    return out


def source_notebook(config, resources) -> Path:
    """The instructor's source notebook of the notebook being graded."""
    nbg = resources.get("nbgrader", {})
    cd = config.get("CourseDirectory", {}) if hasattr(config, "get") else {}
    root = cd.get("root") or os.getcwd()
    source = cd.get("source_directory") or "source"
    return Path(root) / source / nbg["assignment"] / f"{nbg['notebook']}.ipynb"


def _preprocessor_class():
    from nbgrader.preprocessors import NbGraderPreprocessor

    class DecideTestCells(NbGraderPreprocessor):
        """Autograde preprocessor (after Execute): see the module docstring."""

        def preprocess(self, nb, resources):
            timeout = int((self.config.get("Execute", {}) or {}).get("timeout", 60) or 60)
            entry = trusted_records(source_notebook(self.config, resources), timeout=timeout)
            decide_notebook(nb, entry)
            # how the kernel ran, for the grade report and the demo's table (issue 26): grading
            # refuses to run unsandboxed unless TAS_SANDBOX=off (config.py), so off means plain
            mode = os.environ.get("TAS_SANDBOX", "on")
            how = "plain kernel (TAS_SANDBOX=off)" if mode == "off" else "sandbox"
            tests = [c for c in nb.cells if _is_test_cell(c)]
            by_grader = sum(1 for c in tests if (c.get("metadata") or {}).get("tas_evaluated") == "grader")
            nb.metadata["tas"] = {"graded_in": how, "test_cells_by_the_grader": f"{by_grader} of {len(tests)}"}
            return nb, resources

    return DecideTestCells


_CLASS = None


def verify_check_records_class():
    """The preprocessor class (built on first use: nbgrader imports are slow)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _preprocessor_class()
    return _CLASS


def insert_verifier(preprocessors: list) -> list:
    """`preprocessors` (Autograde's list) with the decision right after the metadata is cleared
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

