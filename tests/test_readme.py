"""The README is short and true (issue 31): at most 150 lines, its counts are the course's, and
every relative link in it and in docs/ points at a file that exists."""
from __future__ import annotations

import re
from pathlib import Path

from solutions_lib.course.paths import assignments
from solutions_lib.course.syllabus import EXT_IDS, NOT_YET_WRITTEN, SEED_IDS, SYLLABUS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def test_readme_is_short():
    assert len(README.splitlines()) <= 150


def test_readme_counts_are_the_courses():
    m = re.search(r"\*\*The course today:\*\* (\d+) assignments, (\d+) notebooks .*?, (\d+) syllabus ids "
                  r"\(87 from the seed documents, (\d+) beyond them\), (\d+) of them\s+graded", README, re.S)
    assert m, "the README's 'The course today' sentence changed: update this test with it"
    n_a, n_nb, n_ids, n_ext, n_graded = map(int, m.groups())
    notebooks = sorted(ROOT.glob("source/*/*.ipynb"))
    assert n_a == len(assignments(ROOT))
    assert n_nb == len(notebooks)
    assert n_ids == len(SYLLABUS) and n_ext == len(EXT_IDS) and len(SEED_IDS) == 87
    assert n_graded == len(SYLLABUS) - len(NOT_YET_WRITTEN)


def test_relative_links_resolve():
    broken = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target, _ in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, broken
