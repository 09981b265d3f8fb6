"""Notebooks read as prose (issue 28): markdown lines >= test-code lines in every notebook written
since the rule; the older ones (course/prose.py DEBT) may only narrow their gap."""
from __future__ import annotations

from pathlib import Path

from solutions_lib.course.prose import DEBT, prose_rows

ROOT = Path(__file__).resolve().parents[1]
ROWS = {r.notebook: r for r in prose_rows(ROOT)}


def test_new_notebooks_read_as_prose():
    bad = [f"{r.notebook}: {r.markdown} markdown lines < {r.tests} test-code lines"
           for name, r in ROWS.items() if name not in DEBT and not r.ok]
    assert not bad, ("move test machinery into the library (a probes module) so each test cell reads as a "
                     f"few lines of intent: {bad}")


def test_older_notebooks_do_not_get_worse():
    worse = [f"{n}: {ROWS[n].tests - ROWS[n].markdown} more test-code than markdown lines, {gap} when the rule was set"
             for n, gap in DEBT.items() if n in ROWS and ROWS[n].tests - ROWS[n].markdown > gap]
    assert not worse, worse
    paid = [n for n in DEBT if n in ROWS and ROWS[n].ok]
    assert not paid, f"these now read as prose: take them out of prose.DEBT: {paid}"
    assert set(DEBT) <= set(ROWS), sorted(set(DEBT) - set(ROWS))
