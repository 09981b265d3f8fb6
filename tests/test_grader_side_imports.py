"""A grader-side test cell imports every module it uses itself: a name it does not bind is
fetched from the student's kernel as a handle, so `np.random...` there would draw the hidden
inputs inside the student's process, and `upstream.f(...)` would compute in it."""
from pathlib import Path

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader_side import eligible, imported_names, loaded_names, stored_names

ROOT = Path(__file__).resolve().parents[1]
MODULE_NAMES = {"np", "numpy", "torch", "math", "F", "nn", "plt", "random", "itertools", "functools", "collections",
                "time", "os", "json", "dist", "ref", "upstream", "grading", "checks", "ck", "cm", "pd", "scipy"}


def test_grader_side_cells_fetch_no_module_from_the_kernel():
    bad = []
    for path in sorted((ROOT / "source").glob("*/*.ipynb")):
        for cell in nbs.read(path).cells:
            md = nbs.nbgrader_md(cell)
            if cell.cell_type == "code" and md.get("grade") and not md.get("solution") and eligible(cell.source):
                fetched = set(loaded_names(cell.source)) - set(stored_names(cell.source)) - imported_names(cell.source)
                if fetched & MODULE_NAMES:
                    bad.append(f"{path.parent.name}/{path.name} {md['grade_id']}: {sorted(fetched & MODULE_NAMES)}")
    assert not bad, f"import these in the cell itself: {bad}"
