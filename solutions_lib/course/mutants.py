"""The wrong-answer bank and its sweep (`python -m solutions_lib bench mutants`).

A full mark must mean the student built the thing: for every build-it exercise the repository
keeps plausible *wrong* answers (the classic slips, and the shortcut that skips the idea of the
exercise), and each must lose points on the test cells it names. The bank lives in
`tests/wrong_answers/`, out of `source/` so that `generate_assignment` can never release it and
the student edition never holds it:

    tests/wrong_answers/<assignment>/<notebook stem>/<answer grade_id>__<slug>.py

A file is one whole answer cell (it replaces that cell's source in an otherwise solved
notebook) under a header of `#` lines:

    # loses: fa2_forward_tests, fa2_backward_tests     (test cells that must lose points)
    # why: one full N x N score matrix per (batch, head); the block sizes are ignored

The sweep makes a temporary course, submits one student per wrong answer (that notebook only,
every other answer solved) and grades them with stock `nbgrader autograde` in the course's
default configuration (sandbox, trusted run, withheld references), `workers` at a time. A
wrong answer is *caught* when every cell under `loses:` scored below its maximum and the
notebook ran to the end; it prints what each wrong answer lost, and
`mutants: K of N wrong answers caught`.

A *build-it exercise* is an answer cell with test cells of its own (`fairness.answer_tests`);
`bank_coverage` counts the wrong answers of each, and `tests/test_mutants.py` asks for at least
`MIN_PER_EXERCISE` for each (a few answer cells are exempt in `EXEMPT`, each with its reason).
"""
from __future__ import annotations

import json
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import notebooks as nbs

MIN_PER_EXERCISE = 3
BANK = Path("tests") / "wrong_answers"
_HEADER = re.compile(r"^#\s*(loses|why)\s*:\s*(.*)$")

#: "assignment/notebook stem/answer grade_id" -> why that answer cell needs no wrong answers.
EXEMPT: dict[str, str] = {
    "04_parallelism/exercises/bubble_plot_answer": "an ungraded plot; nothing it computes is checked (it shares "
                                                   "A.2's test cells only by sitting right after that answer)",
}


@dataclass
class WrongAnswer:
    path: Path
    assignment: str
    notebook: str           # file name, e.g. "exercises.ipynb"
    answer: str             # grade_id of the answer cell it replaces
    loses: list[str]        # test cells that must lose points
    why: str
    source: str             # the answer cell's new source

    @property
    def name(self) -> str:
        return f"{self.assignment}/{self.notebook.removesuffix('.ipynb')}/{self.path.stem}"


def parse(path: Path, assignment: str, notebook: str) -> WrongAnswer:
    """Read one bank file (see the module docstring); ValueError says what is malformed."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    meta: dict[str, str] = {}
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        m = _HEADER.match(lines[i])
        if m:
            meta[m.group(1)] = m.group(2).strip()
        i += 1
    stem = Path(path).stem
    if "__" not in stem:
        raise ValueError(f"{path}: the file name must be <answer grade_id>__<slug>.py")
    answer = stem.split("__", 1)[0]
    loses = [s.strip() for s in meta.get("loses", "").split(",") if s.strip()]
    if not loses:
        raise ValueError(f"{path}: no '# loses: <test cell ids>' header line")
    if not meta.get("why"):
        raise ValueError(f"{path}: no '# why: ...' header line")
    body = "\n".join(lines[i:]).strip("\n")
    if not body.strip():
        raise ValueError(f"{path}: no answer source after the header")
    return WrongAnswer(Path(path), assignment, notebook, answer, loses, meta["why"], body + "\n")


def load_bank(root: Path, assignments: list[str] | None = None, only: str | None = None) -> list[WrongAnswer]:
    """Every wrong answer under `root/tests/wrong_answers` (of `assignments`; whose name
    contains `only`), sorted by path."""
    bank = Path(root) / BANK
    out = []
    for path in sorted(bank.glob("*/*/*.py")):
        a, stem = path.parent.parent.name, path.parent.name
        if assignments and a not in assignments:
            continue
        w = parse(path, a, stem + ".ipynb")
        if only and only not in w.name:
            continue
        out.append(w)
    return out


def _tests_after(nb) -> dict[str, list[str]]:
    from .fairness import answer_tests
    return answer_tests(nb)


def check_bank(root: Path, bank: list[WrongAnswer]) -> list[str]:
    """Problems that make a bank entry meaningless: no such notebook, answer cell or test
    cell, or a wrong answer identical to the solution."""
    problems = []
    cache: dict[tuple[str, str], object] = {}
    for w in bank:
        src = Path(root) / "source" / w.assignment / w.notebook
        if not src.is_file():
            problems.append(f"{w.name}: no notebook {src}")
            continue
        nb = cache.get((w.assignment, w.notebook)) or nbs.read(src)
        cache[(w.assignment, w.notebook)] = nb
        cells = {nbs.nbgrader_md(c).get("grade_id"): c for c in nb.cells}
        ans = cells.get(w.answer)
        if ans is None or not nbs.nbgrader_md(ans).get("solution") or ans.cell_type != "code":
            problems.append(f"{w.name}: {w.answer} is not a code answer cell of {w.notebook}")
            continue
        for t in w.loses:
            md = nbs.nbgrader_md(cells[t]) if t in cells else {}
            if not (md.get("grade") and not md.get("solution") and cells[t].cell_type == "code"):
                problems.append(f"{w.name}: {t} is not a test cell of {w.notebook}")
        if _normal(w.source) == _normal(nbs.strip_solution_markers(ans.source)):
            problems.append(f"{w.name}: identical to the solution")
    return problems


def _normal(src: str) -> str:
    return "\n".join(ln.rstrip() for ln in src.strip().splitlines() if ln.strip())


def bank_coverage(root: Path, bank: list[WrongAnswer], assignments: list[str] | None = None) -> dict[str, int]:
    """'assignment/notebook stem/answer' -> wrong answers in the bank, for every build-it
    exercise (an answer cell with test cells of its own) of the course, exempt ones left out."""
    from .paths import assignments as all_assignments

    counts: dict[str, int] = {}
    for a in assignments or all_assignments(Path(root)):
        for path in sorted((Path(root) / "source" / a).glob("*.ipynb")):
            nb = nbs.read(path)
            for answer, tests in _tests_after(nb).items():
                key = f"{a}/{path.stem}/{answer}"
                if tests and key not in EXEMPT:
                    counts[key] = 0
    for w in bank:
        key = f"{w.assignment}/{w.notebook.removesuffix('.ipynb')}/{w.answer}"
        if key in counts:
            counts[key] += 1
    return counts


@dataclass
class Outcome:
    wrong: WrongAnswer
    status: str = ""                                   # graded / failed_to_run / missing
    lost: dict[str, tuple[float, float]] = field(default_factory=dict)   # test cell -> (points, max)
    messages: dict[str, str] = field(default_factory=dict)

    @property
    def caught(self) -> bool:
        return self.status == "graded" and all(t in self.lost for t in self.wrong.loses)

    def line(self) -> str:
        w = self.wrong
        if self.status != "graded":
            return f"BROKEN  {w.name}: the notebook {self.status} (a wrong answer must run; fix the bank file)"
        missed = [t for t in w.loses if t not in self.lost]
        lost = ", ".join(f"{t} {p:g}/{m:g}" for t, (p, m) in self.lost.items())
        if missed:
            return f"MISSED  {w.name}: full marks on {', '.join(missed)} ({w.why})" + (f"; lost {lost}" if lost else "")
        return f"caught  {w.name}: lost {lost}"


def write_course_config(dest: Path, cell_timeout: int | None = None) -> None:
    """A temporary course's `nbgrader_config.py`: the course's own settings, rooted at `dest`
    (stock `nbgrader autograde` processes read it, as in the instructor's course root)."""
    from .config import _REPO_ROOT, CELL_TIMEOUT_S

    (Path(dest) / "nbgrader_config.py").write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {_REPO_ROOT!r})\n"
        "from solutions_lib.course.config import apply_course_config\n"
        "c = get_config()  # noqa: F821\n"
        f"apply_course_config(c, root=os.path.dirname(os.path.abspath(__file__)), "
        f"cell_timeout={int(cell_timeout or CELL_TIMEOUT_S)})\n")


def sweep(assignment: str, bank: list[WrongAnswer], root: Path | None = None, workers: int | None = None,
          out=print, cell_timeout: int | None = None) -> list[Outcome]:
    """Grade every wrong answer of `assignment` in `bank` (see the module docstring)."""
    from .grader import Course, make_course, solved_version
    from .parallel import autograde_class
    from .paths import course_root

    root = Path(root or course_root())
    todo = [w for w in bank if w.assignment == assignment]
    if not todo:
        return []
    with tempfile.TemporaryDirectory(prefix="tas-mutants-") as t:
        dest = make_course(Path(t) / assignment, [assignment], root)
        write_course_config(dest, cell_timeout)
        course = Course(dest, cell_timeout=cell_timeout)
        course.generate(assignment)
        solved: dict[str, nbformat.NotebookNode] = {}
        students = {}
        for k, w in enumerate(todo):
            if w.notebook not in solved:
                solved[w.notebook] = solved_version(course.release_notebook(assignment, w.notebook),
                                                    nbs.read(course.root / "source" / assignment / w.notebook))
            sub = nbformat.from_dict(json.loads(json.dumps(solved[w.notebook])))
            cell = next(c for c in sub.cells if nbs.nbgrader_md(c).get("grade_id") == w.answer)
            cell.source = w.source
            student = f"m{k:04d}"
            course.submit(student, assignment, {w.notebook: sub})
            students[student] = w
        t0 = time.perf_counter()
        done: dict[str, Outcome] = {}

        def graded(run, n_done: int, total: int) -> None:   # each outcome as soon as it is known
            done[run.student] = _outcome(course, assignment, students[run.student], run.student)
            out(f"[{n_done}/{total} {time.perf_counter() - t0:.0f} s] {done[run.student].line()}")

        autograde_class(course.root, assignment, list(students), workers=workers, progress=graded)
        outcomes = [done.get(s) or _outcome(course, assignment, w, s) for s, w in students.items()]
        out(f"  {assignment}: {len(todo)} wrong answers graded in {time.perf_counter() - t0:.0f} s")
    return outcomes


def _outcome(course, assignment: str, w: WrongAnswer, student: str) -> Outcome:
    """What `student`, who handed in `w`, lost: read from the course's results."""
    o = Outcome(w)
    res = course.results(assignment, student)
    nb = next((n for n in res.notebooks if n.name == w.notebook), None)
    if nb is None:
        o.status = "missing"
        return o
    o.status = nb.status if nb.status != "failed" else f"failed to run ({nb.detail})"
    for c in nb.cells:
        if c.kind == "tests" and (c.points or 0) < c.max_points:
            o.lost[c.grade_id] = (c.points or 0.0, c.max_points)
            o.messages[c.grade_id] = (c.messages[0].strip().splitlines() or [""])[0][:300] if c.messages else ""
    return o


def main(assignments: list[str] | None = None, only: str | None = None, workers: int | None = None,
         out=print) -> bool:
    import warnings

    from .paths import assignments as all_assignments, course_root

    warnings.filterwarnings("ignore", message=".*not in session.*")
    root = course_root()
    bank = load_bank(root, assignments, only)
    problems = check_bank(root, bank)
    for p in problems:
        out(f"BANK    {p}")
    outcomes: list[Outcome] = []
    t0 = time.perf_counter()
    for a in assignments or all_assignments(root):
        outcomes += sweep(a, bank, root, workers=workers, out=out)
    caught = sum(o.caught for o in outcomes)
    cover = bank_coverage(root, load_bank(root, assignments), assignments)
    thin = [k for k, n in cover.items() if n < MIN_PER_EXERCISE]
    per_a: dict[str, int] = {}
    for w in bank:
        per_a[w.assignment] = per_a.get(w.assignment, 0) + 1
    out("bank: " + ", ".join(f"{a} {n}" for a, n in sorted(per_a.items())))
    if thin and not only:
        out(f"exercises with fewer than {MIN_PER_EXERCISE} wrong answers: {len(thin)} of {len(cover)}")
        for k in thin:
            out(f"    {k}: {cover[k]}")
    out(f"mutants: {caught} of {len(outcomes)} wrong answers caught ({time.perf_counter() - t0:.0f} s)")
    return caught == len(outcomes) and not problems
