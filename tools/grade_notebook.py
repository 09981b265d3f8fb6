"""Grade one source notebook the way a class is graded, for authors of notebooks.

    .venv/bin/python tools/grade_notebook.py 10_distributed_lab exercises_2_zero_fsdp.ipynb [--students solved,blank,half]

Makes a temporary course holding that assignment, runs `generate_assignment`, submits the
solved, blank and half-solved versions of the one notebook, grades each with stock
`nbgrader autograde` (sandbox, trusted run, withheld references: the course's default
configuration) and prints every test cell's points with the grader's messages. The other
notebooks of the assignment are not submitted (each notebook runs in its own kernel).
`tests/test_pipeline.py` checks the same for whole assignments.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solutions_lib.course import notebooks as nbs  # noqa: E402
from solutions_lib.course.grader import Course, make_course, solved_version  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("assignment")
    p.add_argument("notebook")
    p.add_argument("--students", default="solved,blank,half")
    args = p.parse_args(argv)
    a, n = args.assignment, args.notebook
    with tempfile.TemporaryDirectory(prefix="tas-grade-one-") as t:
        course = Course(make_course(Path(t) / a, [a], ROOT))
        course.generate(a)
        rel = course.release_notebook(a, n)
        src = nbs.read(ROOT / "source" / a / n)
        versions = {"solved": solved_version(rel, src), "blank": rel, "half": solved_version(rel, src, 0.5)}
        ok = True
        for student in args.students.split(","):
            course.submit(student, a, {n: versions[student]})
            t0 = time.perf_counter()
            course.autograde(a, student)
            took = time.perf_counter() - t0
            res = next(nb for nb in course.results(a, student).notebooks if nb.name == n)
            graded = course.root / "autograded" / student / a / n
            where = {}   # grade_id -> "grader" when the grader evaluated the cell (grader_side.py), else "kernel"
            if graded.is_file():
                for cell in nbs.read(graded).cells:
                    gid = nbs.nbgrader_md(cell).get("grade_id")
                    if gid:
                        where[gid] = cell.metadata.get("tas_evaluated", "kernel")
            print(f"== {student}: {res.score('tests'):g} / {res.max_score('tests'):g} auto-graded points "
                  f"({res.status}, {took:.1f} s){' ' + res.detail if res.detail else ''}")
            for c in res.cells:
                if c.kind != "tests":
                    continue
                print(f"  {c.grade_id:<40} {c.points if c.points is not None else '-'!s:>5} / {c.max_points:g}"
                      f"  [{where.get(c.grade_id, '?')}]")
                if (c.points or 0) < c.max_points:
                    for m in c.messages:
                        lines = m.strip().splitlines() or [""]
                        print(f"      {lines[0][:300]}" + (f"\n      ... {lines[-1][:300]}" if len(lines) > 1 else ""))
            if student == "solved" and res.score("tests") < res.max_score("tests"):
                ok = False
            if student == "blank" and res.score("tests") > 0:
                ok = False
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
