"""Do the notebooks read as prose? Lines of markdown against lines of test code, per notebook.

Issue 28 asks that every notebook hold at least as many markdown lines as test-code lines (the
test machinery belongs in the library, so a test cell reads as a few lines of intent).
`python -m solutions_lib bench prose` prints the table; `tests/test_prose.py` holds every new
notebook to the rule and keeps the older ones from getting worse (`DEBT`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import notebooks as nbs

#: Notebooks written before the rule, with how many more test-code lines than markdown lines
#: they held when it was set (2026-11-27): the gap may only shrink, and a notebook leaves this
#: table once markdown >= tests.
DEBT: dict[str, int] = {}


@dataclass(frozen=True)
class ProseRow:
    notebook: str          # "<assignment>/<stem>"
    markdown: int          # non-blank lines of markdown cells
    tests: int             # non-blank lines of graded test cells (nbgrader grade: true, not solution)
    answers: int           # non-blank lines of answer cells (solution: true)

    @property
    def ok(self) -> bool:
        return self.markdown >= self.tests


def _lines(src: str) -> int:
    return sum(1 for ln in src.splitlines() if ln.strip())


def prose_rows(root: Path) -> list[ProseRow]:
    rows = []
    for path in sorted(Path(root).glob("source/*/*.ipynb")):
        nb = nbs.read(path)
        md = tests = answers = 0
        for cell in nb.cells:
            meta = nbs.nbgrader_md(cell)
            if cell.cell_type == "markdown":
                md += _lines(cell.source)
            elif meta.get("solution"):
                answers += _lines(cell.source)
            elif meta.get("grade"):
                tests += _lines(cell.source)
        rows.append(ProseRow(f"{path.parent.name}/{path.stem}", md, tests, answers))
    return rows


def bench(root: Path | None = None, out=print) -> bool:
    """Print markdown vs test-code lines per notebook; True when every notebook reads as prose."""
    from .paths import course_root

    rows = prose_rows(Path(root or course_root()))
    out(f"{'notebook':58s} {'markdown':>8s} {'tests':>6s} {'answers':>7s}  markdown >= tests")
    for r in rows:
        out(f"{r.notebook:58s} {r.markdown:8d} {r.tests:6d} {r.answers:7d}  {'yes' if r.ok else 'NO'}")
    bad = [r for r in rows if not r.ok]
    out(f"prose: {len(rows) - len(bad)} of {len(rows)} notebooks hold at least as much markdown as test code")
    return not bad
