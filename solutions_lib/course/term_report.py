"""Class report: one self-contained HTML file of the class's results, with matplotlib plots.

What it shows, and how each number is made (all from the gradebook and autograded/, through
`report.build_report` and `term_export.class_rows`, so a crash is never counted as a 0):

- Score distribution per assignment: the final scores (late penalty applied) of the students
  whose assignment is fully graded (status `graded` in the export); missing, failed and
  awaiting-grader submissions are counted beside it, not in it.
- Per question (every graded cell): difficulty = the mean fraction of its points earned, over
  the students whose notebook was graded and whose cell has a grade (a written answer
  awaiting a grader is left out); discrimination = the corrected item-total correlation: the
  Pearson correlation between the cell's points and the student's points on the rest of the
  assignment (the point-biserial when the cell is all-or-nothing). Below 0.2 the question
  tells strong from weak students poorly; it is blank with fewer than 3 students or when either
  side has no spread.
- Per syllabus id: mastery = points earned / points possible over every graded cell whose
  `syllabus` metadata in source/ names the id, over the same graded answers.
- Who failed to run, and why (the notebook and nbgrader's or the intake's reason).

The page embeds its plots as base64 PNG and its CSS inline; a Content-Security-Policy
forbids anything else (no script, no font, no request to any server).

    python -m solutions_lib.course.term_report [--root COURSE] [--out class_report.html] [--assignments ...]
"""
from __future__ import annotations

import argparse
import base64
import html
import io
import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
WEAK_DISCRIMINATION = 0.2


@dataclass
class QuestionStats:
    assignment: str
    notebook: str
    grade_id: str
    kind: str
    max_points: float
    n: int
    difficulty: float | None
    discrimination: float | None


@dataclass
class ClassStats:
    assignments: list[str]
    scores: dict[str, list[float]]                 # assignment -> final scores of fully graded students
    max_score: dict[str, float]
    status_counts: dict[str, dict[str, int]]       # assignment -> status -> students
    questions: list[QuestionStats]
    mastery: dict[str, tuple[float, float, int]]   # syllabus id -> (earned, possible, answers)
    failed: list[tuple[str, str, str, str]]        # (student, assignment, notebook, why)
    students: int = 0
    notes: list[str] = field(default_factory=list)


def pearson(x: list[float], y: list[float]) -> float | None:
    """Pearson's r, or None with fewer than 3 pairs or no spread on either side."""
    if len(x) != len(y) or len(x) < 3:
        return None
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 1e-12 or syy <= 1e-12:
        return None
    return sxy / math.sqrt(sxx * syy)


def syllabus_of_cells(root: Path, assignment: str) -> dict[tuple[str, str], list[str]]:
    """{(notebook file, grade_id): syllabus ids} from the source notebooks' cell metadata."""
    from . import notebooks as nbs

    out = {}
    folder = Path(root) / "source" / assignment
    for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        try:
            nb = nbs.read(path)
        except Exception:  # noqa: BLE001  (a broken source notebook fails generate_assignment, not this page)
            continue
        for cell in nb.cells:
            gid = nbs.nbgrader_md(cell).get("grade_id")
            if gid and nbs.nbgrader_md(cell).get("grade"):
                out[path.name, gid] = [str(s) for s in (cell.get("metadata", {}).get("syllabus") or [])]
    return out


def build_stats(root: Path, assignments: list[str] | None = None, now=None) -> ClassStats:
    from .report import build_report
    from .term_export import class_rows

    root = Path(root)
    rep = build_report(root, assignments=assignments)
    rows = class_rows(root, assignments, now, rep=rep)
    names = sorted({q["assignment"] for q in rep.questions})
    scores = {a: [] for a in names}
    max_score: dict[str, float] = {}
    counts: dict[str, dict[str, int]] = {a: {} for a in names}
    for r in rows:
        max_score[r.assignment] = r.max_score
        counts[r.assignment][r.status] = counts[r.assignment].get(r.status, 0) + 1
        if r.status == "graded" and r.score is not None:
            scores[r.assignment].append(r.score)

    graded = [q for q in rep.questions if q["status"] == "graded" and q["points"] != ""]
    totals: dict[tuple[str, str], float] = {}
    for q in graded:
        key = (q["student"], q["assignment"])
        totals[key] = totals.get(key, 0.0) + float(q["points"])
    by_cell: dict[tuple[str, str, str], list[dict]] = {}
    layout: dict[tuple[str, str, str], dict] = {}
    for q in rep.questions:
        layout.setdefault((q["assignment"], q["notebook"], q["grade_id"]), q)
    for q in graded:
        by_cell.setdefault((q["assignment"], q["notebook"], q["grade_id"]), []).append(q)
    questions = []
    for key, q0 in layout.items():
        got = by_cell.get(key, [])
        mx = float(q0["max_points"])
        pts = [float(q["points"]) for q in got]
        rest = [totals[q["student"], q["assignment"]] - float(q["points"]) for q in got]
        diff = (sum(p / mx for p in pts) / len(pts)) if (pts and mx > 0) else None
        questions.append(QuestionStats(key[0], key[1], key[2], q0["kind"], mx, len(pts), diff, pearson(pts, rest)))

    mastery: dict[str, list[float]] = {}
    syllabus = {a: syllabus_of_cells(root, a) for a in names}
    for q in graded:
        for sid in syllabus[q["assignment"]].get((q["notebook"], q["grade_id"]), []):
            m = mastery.setdefault(sid, [0.0, 0.0, 0])
            m[0] += float(q["points"])
            m[1] += float(q["max_points"])
            m[2] += 1
    failed = sorted({(q["student"], q["assignment"], q["notebook"], q["detail"])
                     for q in rep.questions if q["status"] == "failed_to_run"})
    return ClassStats(names, scores, max_score, counts, questions,
                      {k: (v[0], v[1], int(v[2])) for k, v in sorted(mastery.items())}, failed,
                      students=len({r.student for r in rows}))


# ---------------------------------------------------------------- plots


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def plot_distributions(st: ClassStats) -> str:
    from matplotlib.figure import Figure  # no pyplot: no global backend state, no display needed

    n = max(1, len(st.assignments))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(4.2 * cols, 2.8 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, a in zip(axes.flat, st.assignments):
        s = st.scores[a]
        hi = st.max_score.get(a, 1.0) or 1.0
        ax.hist(s, bins=10, range=(0, hi), color="#3b6ea5", edgecolor="white")
        ax.set_title(f"{a} (n={len(s)})", fontsize=9)
        ax.set_xlabel(f"score / {hi:g}", fontsize=8)
        ax.set_ylabel("students", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(st.assignments):]:
        ax.axis("off")
    fig.suptitle("Score distribution per assignment (fully graded submissions)", fontsize=10)
    return _png(fig)


def plot_questions(st: ClassStats) -> str:
    from matplotlib.figure import Figure  # no pyplot: no global backend state, no display needed

    qs = st.questions
    labels = [f"{q.assignment}/{q.grade_id}" for q in qs]
    fig = Figure(figsize=(10, max(2.5, 0.28 * len(qs) + 1)), layout="constrained")
    a1, a2 = fig.subplots(1, 2, sharey=True)
    y = list(range(len(qs)))
    a1.barh(y, [q.difficulty if q.difficulty is not None else 0 for q in qs], color="#5a9e6f")
    a1.set_xlim(0, 1)
    a1.set_xlabel("difficulty: mean fraction of points", fontsize=8)
    a2.barh(y, [q.discrimination if q.discrimination is not None else 0 for q in qs],
            color=["#c0504d" if (q.discrimination is not None and q.discrimination < WEAK_DISCRIMINATION)
                   else "#3b6ea5" for q in qs])
    a2.axvline(WEAK_DISCRIMINATION, color="grey", lw=0.8, ls="--")
    a2.set_xlim(-1, 1)
    a2.set_xlabel("discrimination: item-rest correlation", fontsize=8)
    a1.set_yticks(y, labels, fontsize=7)
    a1.invert_yaxis()
    for ax in (a1, a2):
        ax.tick_params(labelsize=7)
    return _png(fig)


def plot_mastery(st: ClassStats) -> str:
    from matplotlib.figure import Figure  # no pyplot: no global backend state, no display needed

    ids = list(st.mastery)
    fig = Figure(figsize=(max(4, 0.35 * len(ids) + 1.5), 2.8), layout="constrained")
    ax = fig.subplots()
    vals = [st.mastery[i][0] / st.mastery[i][1] if st.mastery[i][1] else 0 for i in ids]
    ax.bar(range(len(ids)), vals, color="#8064a2")
    ax.set_xticks(range(len(ids)), ids, rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mastery (points earned / possible)", fontsize=8)
    ax.tick_params(labelsize=7)
    return _png(fig)


# ---------------------------------------------------------------- page


def _f(x: float | None, nd: int = 3) -> str:
    return "" if x is None else f"{x:.{nd}f}"


def _table(head: list[str], rows: list[list]) -> str:
    e = html.escape
    return ("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows) + "</table>")


def render_html(st: ClassStats, title: str = "Class report") -> str:
    e = html.escape
    dist_rows = []
    for a in st.assignments:
        s = st.scores[a]
        c = st.status_counts[a]
        dist_rows.append([a, f"{st.max_score.get(a, 0):g}", len(s), _f(statistics.fmean(s) if s else None, 2),
                          _f(statistics.median(s) if s else None, 2), _f(min(s) if s else None, 2),
                          _f(max(s) if s else None, 2), c.get("failed_to_run", 0), c.get("awaiting_grader", 0),
                          c.get("missing", 0)])
    q_rows = [[q.assignment, q.notebook, q.grade_id, q.kind, f"{q.max_points:g}", q.n, _f(q.difficulty),
               _f(q.discrimination),
               "weak" if (q.discrimination is not None and q.discrimination < WEAK_DISCRIMINATION) else ""]
              for q in st.questions]
    m_rows = [[sid, f"{earned:g}", f"{possible:g}", n, _f(earned / possible if possible else None)]
              for sid, (earned, possible, n) in st.mastery.items()]
    f_rows = [list(x) for x in st.failed]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
        f"<title>{e(title)}</title><style>",
        "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #bbb;padding:3px 8px;font-size:13px;text-align:left}th{background:#eef}"
        "img{max-width:100%}.note{color:#555;font-size:13px}",
        "</style></head><body>",
        f"<h1>{e(title)}</h1><p class='note'>{st.students} students, {len(st.assignments)} assignments. "
        "A submission that failed to run or awaits a grader is never counted as 0.</p>",
        "<h2>Score distribution per assignment</h2>",
        _table(["assignment", "points possible", "graded", "mean", "median", "lowest", "highest", "failed to run",
                "awaiting grader", "missing"], dist_rows),
        f"<img id='distribution' alt='score distribution' src='data:image/png;base64,{plot_distributions(st)}'>",
        "<h2>Questions: difficulty and discrimination</h2>",
        "<p class='note'>difficulty = mean fraction of the points earned; discrimination = correlation of the "
        f"question's points with the rest of the assignment (below {WEAK_DISCRIMINATION} marked weak).</p>",
        f"<img id='questions' alt='difficulty and discrimination' src='data:image/png;base64,{plot_questions(st)}'>",
        _table(["assignment", "notebook", "cell", "kind", "points", "answers", "difficulty", "discrimination", ""],
               q_rows),
        "<h2>Mastery per syllabus id</h2>",
        (f"<img id='mastery' alt='mastery per syllabus id' src='data:image/png;base64,{plot_mastery(st)}'>"
         if st.mastery else "<p>No graded cell names a syllabus id.</p>"),
        _table(["syllabus id", "earned", "possible", "answers", "mastery"], m_rows),
        "<h2>Failed to run</h2>",
        _table(["student", "assignment", "notebook", "why"], f_rows) if f_rows else "<p>Every notebook ran.</p>",
        "</body></html>",
    ]
    return "\n".join(parts)


def write_class_report(root: Path, out: Path | None = None, assignments: list[str] | None = None,
                       now=None) -> Path:
    root = Path(root)
    st = build_stats(root, assignments, now)
    if not st.assignments:
        raise ValueError(f"nothing to report: no assignment in {root}'s gradebook")
    out = Path(out or root / "class_report.html")
    out.write_text(render_html(st, f"Class report: {root.name}"), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    from .term_late import parse_due
    from .term_roster import checked_root

    ap = argparse.ArgumentParser(prog="python -m solutions_lib.course.term_report",
                                 description="Write the class report (one self-contained HTML file).")
    ap.add_argument("--root", type=Path, default=None, help="course root (default: this repository)")
    ap.add_argument("--out", type=Path, default=None, help="output file (default: <root>/class_report.html)")
    ap.add_argument("--assignments", nargs="*", default=None)
    ap.add_argument("--now", default=None, help="the time the due-date rule uses (default: now), with a zone")
    args = ap.parse_args(argv)
    try:
        path = write_class_report(checked_root(args.root), args.out, args.assignments,
                                  parse_due(args.now) if args.now else None)
    except (ValueError, OSError) as e:
        print(f"class report: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
