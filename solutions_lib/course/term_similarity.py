"""Side-by-side similarity report of a class's answer cells, with copydetect (issue 30).

    python -m solutions_lib similarity ASSIGNMENT [--root COURSE] [--out similarity_ASSIGNMENT.html]
                                                  [--threshold 0.5]

`flags.csv` (course/report.py, course/copycheck.py) already names each pair of students with
mostly the same code in one answer cell; this report shows the code. It runs copydetect
(https://github.com/blingenf/copydetect: MOSS's winnowing over pygments tokens with names
filtered) on one file per student and answer cell, comparing each answer cell only with the
same answer cell of the other students (`same_name_only`), with the released cell's code as
boilerplate (what every student was given never counts). Pairs above `--threshold` (the
fraction of a file's tokens found in the other) are listed with the shared code highlighted;
the student code in the page is HTML-escaped by copydetect, and file names are built here
from student ids reduced to `[A-Za-z0-9_.-]`. A pair is a prompt to look, not a verdict.
"""
from __future__ import annotations

import argparse
import re
import tempfile
import warnings
from pathlib import Path

from . import copycheck
from .scanner import read_notebook, release_for


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "_"


def write_answer_files(root: Path, assignment: str, dest: Path) -> tuple[int, int]:
    """dest/class/<student>/<notebook>__<grade_id>.py for every answer cell handed in, and
    dest/given/<notebook>__<grade_id>.py for the released cells; returns (students, files)."""
    students = files = 0
    given_dir = dest / "given"
    given_dir.mkdir(parents=True)
    seen_release = set()
    submitted = root / "submitted"
    for sdir in sorted(p for p in submitted.iterdir() if p.is_dir() and not p.is_symlink()) if submitted.is_dir() else []:
        adir = sdir / assignment
        if not adir.is_dir() or adir.is_symlink():
            continue
        students += 1
        out = dest / "class" / _safe(sdir.name)
        out.mkdir(parents=True, exist_ok=True)
        for nb_path in sorted(adir.glob("*.ipynb")):
            try:
                nb, release = read_notebook(nb_path), release_for(nb_path, root)
            except Exception:  # noqa: BLE001  (unreadable: the scanner's flag says why)
                continue
            for gid, src, given in copycheck.answer_cells(nb, release):
                stem = f"{_safe(nb_path.stem)}__{_safe(gid)}.py"
                (out / stem).write_text(src, encoding="utf-8")
                files += 1
                if given and stem not in seen_release:
                    (given_dir / stem).write_text(given, encoding="utf-8")
                    seen_release.add(stem)
    return students, files


def similarity_report(root: Path, assignment: str, out: Path, threshold: float = 0.5) -> list[tuple]:
    """Write copydetect's HTML report to `out`; returns [(similarity, file, other file)] above
    `threshold`, most similar first."""
    from copydetect import CopyDetector

    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    with tempfile.TemporaryDirectory(prefix="tas-similarity-") as tmp:
        tmp = Path(tmp)
        students, files = write_answer_files(Path(root), assignment, tmp)
        if students < 2:
            raise ValueError(f"{assignment}: {students} student(s) handed in; a comparison needs two")
        det = CopyDetector(test_dirs=[str(tmp / "class")], boilerplate_dirs=[str(tmp / "given")], extensions=["py"],
                           display_t=threshold, same_name_only=True, ignore_leaf=True, autoopen=False,
                           silent=True, out_file=str(out))
        with warnings.catch_warnings():   # copydetect 0.5 uses importlib.resources.open_text
            warnings.simplefilter("ignore", DeprecationWarning)
            det.run()
            pairs = sorted(((max(c[0], c[1]), str(Path(c[2]).relative_to(tmp / "class")),
                             str(Path(c[3]).relative_to(tmp / "class"))) for c in det.get_copied_code_list()),
                           reverse=True)
            det.generate_html_report()
    return pairs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m solutions_lib similarity", description=__doc__.splitlines()[0])
    p.add_argument("assignment")
    p.add_argument("--root", default=".", help="the course root (default: here)")
    p.add_argument("--out", help="the HTML file (default: similarity_<assignment>.html in the root)")
    p.add_argument("--threshold", type=float, default=0.5, help="fraction of shared tokens shown (default 0.5)")
    a = p.parse_args(argv)
    root = Path(a.root)
    out = Path(a.out) if a.out else root / f"similarity_{_safe(a.assignment)}.html"
    try:
        pairs = similarity_report(root, a.assignment, out, a.threshold)
    except ValueError as e:
        print(f"similarity: {e}")
        return 2
    for sim, f1, f2 in pairs:
        print(f"{sim:6.0%}  {f1}  ~  {f2}")
    print(f"similarity: {len(pairs)} pair(s) above {a.threshold:.0%}; report in {out}")
    return 0
