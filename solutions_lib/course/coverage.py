"""The coverage map: which graded cells grade which syllabus ids."""
from __future__ import annotations

from pathlib import Path

from . import notebooks as nbs
from .paths import course_root, source_notebooks
from .syllabus import NOT_YET_WRITTEN, SYLLABUS


def coverage_map(root: Path | None = None) -> dict[str, list[str]]:
    """{syllabus id: ["assignment/notebook.ipynb:grade_id", ...]} over all graded source cells.

    Raises ValueError for a graded cell that names an id the syllabus does not have."""
    root = Path(root or course_root())
    out: dict[str, list[str]] = {i: [] for i in SYLLABUS}
    for path in source_notebooks(root):
        nb = nbs.read(path)
        where = f"{path.parent.name}/{path.name}"
        for cell in nbs.graded_cells(nb):
            gid = nbs.nbgrader_md(cell)["grade_id"]
            for sid in cell.metadata.get("syllabus", []):
                if sid not in out:
                    raise ValueError(f"{where}:{gid} names unknown syllabus id {sid!r}")
                out[sid].append(f"{where}:{gid}")
    return out


def problems(cmap: dict[str, list[str]]) -> list[str]:
    """Ids neither graded nor listed as not yet written, and listed ids that are graded now."""
    out = [f"{i} is not graded anywhere and not listed in NOT_YET_WRITTEN" for i, w in cmap.items()
           if not w and i not in NOT_YET_WRITTEN]
    out += [f"{i} is graded ({cmap[i][0]}) but still listed in NOT_YET_WRITTEN: remove it" for i in NOT_YET_WRITTEN
            if cmap.get(i)]
    out += [f"NOT_YET_WRITTEN names unknown id {i}" for i in NOT_YET_WRITTEN if i not in SYLLABUS]
    return out


def format_coverage(cmap: dict[str, list[str]]) -> str:
    lines = []
    graded = sum(1 for w in cmap.values() if w)
    for sid, where in cmap.items():
        state = ", ".join(where) if where else ("not yet written" if sid in NOT_YET_WRITTEN else "MISSING")
        lines.append(f"{sid:<9} {SYLLABUS[sid][:48]:<48} {state}")
    lines.append("")
    lines.append(f"{graded}/{len(cmap)} syllabus ids graded; {len(NOT_YET_WRITTEN)} not yet written.")
    for p in problems(cmap):
        lines.append("PROBLEM: " + p)
    return "\n".join(lines)
