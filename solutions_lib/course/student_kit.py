"""The student edition of the kit: a wheel that holds no reference answer (issue 25).

`python -m solutions_lib student-kit OUT_DIR [--assignments A,B]` writes
`OUT_DIR/solutions_lib-<version>+student-py3-none-any.whl`. Students install it beside torch,
nbgrader and JupyterLab (`pip install OUT_DIR/*.whl`) and open the release notebooks.

What the wheel holds:
- the kit: the lab package (launcher, counters, models, data generators), plotting and
  simulation helpers, the grading helpers the test cells import;
- not `solutions_lib.course` (the grading pipeline and the instructor's tools), not
  `bench.py` (benchmarks run the references) and not `attention_triton.py` (the course's
  FlashAttention-2 Triton kernels, which answer assignment 12's Triton exercise; `attention`
  falls back to its PyTorch path without them);
- every answer in `withheld_view.WITHHELD` replaced *in the files* by a stand-in
  (`withheld.Withheld`): the source of the answer is not in the wheel, and using it raises
  `WithheldError` "... is a reference answer of the course and is not in the student edition".
  Private helpers that only those answers used are removed too. Of the course's copies of
  earlier answers in `solutions_lib.upstream` (docs/GRADING.md rule 6), those in
  `upstream.STUDENT_OWN` are replaced by `upstream.OwnAnswer` stand-ins that call the
  student's own function; the others stay, because later notebooks are built on them, so a
  student holds those answers (listed in docs/THREAT_MODEL.md);
- `solutions_lib/_visible/<assignment>.json`: the expected values of the *visible* tests that
  compare with a reference (`expect_close(mine(x), ref.f(x), what)`), written at build time by
  the trusted run of the instructor's solution. In the student's kernel such a check finds its
  value there by its description `what` (and its position among the checks of that description
  in the running cell), so a solved release notebook passes its visible tests and Validate with
  the references absent. Only visible checks are written: hidden tests run at grading time.

The table is made per release notebook whose visible tests use a reference: its solved version
is run once with the references withheld (the records it publishes are the visible checks, in
order) and matched with the trusted run's records of the same test cells, which carry the
expected values. A description used twice in one assignment with different expected values
stops the build (rename the check).
"""
from __future__ import annotations

import ast
import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from . import notebooks as nbs
from .withheld_view import WITHHELD, withheld_source

_PACKAGE = Path(__file__).resolve().parent.parent
EDITION_FILE = "_edition.py"
LEFT_OUT = ("course", "bench.py", "__main__.py", "attention_triton.py")
STUDENT_MAIN = '''"""The student edition of the course kit has no command-line tools (they grade with the
instructor's copy); see the course README."""
import sys

print("solutions_lib (student edition): no commands here; open the notebooks in JupyterLab.", file=sys.stderr)
sys.exit(2)
'''


def edition_withheld() -> dict[str, tuple[str, ...]]:
    """module -> names replaced by stand-ins in the student edition (WITHHELD)."""
    return {m: tuple(v) for m, v in WITHHELD.items()}


def _strip_unused_private(source: str, other_text: str) -> str:
    """Remove top-level private functions/classes (`_name`) that nothing else in this module
    (after the answers were replaced) or the rest of the package names; repeat until stable."""
    while True:
        tree = ast.parse(source)
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                and n.name.startswith("_") and not n.name.startswith("__")]
        dead = []
        for d in defs:
            rest = ast.unparse(ast.Module(body=[n for n in tree.body if n is not d], type_ignores=[]))
            if not re.search(rf"\b{re.escape(d.name)}\b", rest) and not re.search(rf"\b{re.escape(d.name)}\b", other_text):
                dead.append(d)
        if not dead:
            return source
        tree.body = [n for n in tree.body if n not in dead]
        source = ast.unparse(tree) + "\n"


def package_files(withheld: dict[str, tuple[str, ...]] | None = None) -> dict[str, str]:
    """relative path -> text of every file of the student edition's `solutions_lib`."""
    withheld = edition_withheld() if withheld is None else withheld
    texts: dict[str, str] = {}
    for src in sorted(_PACKAGE.rglob("*.py")):
        rel = src.relative_to(_PACKAGE)
        if rel.parts[0] in LEFT_OUT or "__pycache__" in rel.parts:
            continue
        texts[rel.as_posix()] = src.read_text(encoding="utf-8")
    out: dict[str, str] = {}
    for rel, text in texts.items():
        module = ".".join(Path(rel).with_suffix("").parts)
        if module in withheld:
            text = withheld_source(module, text, withheld[module])
            others = "\n".join(t for r, t in texts.items() if r != rel)
            text = _strip_unused_private(text, others)
        if module == "upstream":
            text = own_answers_source(text)
        out[rel] = text
    out[EDITION_FILE] = 'EDITION = "student"\n'
    out["__main__.py"] = STUDENT_MAIN
    return out


#: Answers the student edition still holds a copy of (course/copycheck.kit_copies finds them;
#: tests/test_upstream_edition.py fails on any other): (notebook, answer grade_id) -> why it ships.
KNOWN_COPIES = {
    ("07_numerics_attention/exercises_2_flash_attention", "saved_bytes"):
        "attention.saved_tensor_bytes: 07 exercises hands it out as a measuring tool",
    ("11_model_parallel/exercises_1_tensor_sequence", "parallel_linear"):
        "dist.tp_lab: the course's layers that later parts of 11 ex1 run under the student's own",
    ("12_experts_fp8_triton/exercises_1_moe_ep", "top_k_route"):
        "checks_moe.course_top_k_route: the router that the expert-parallel cells run in place of the student's",
    ("13_capstone/exercises", "capstone_pieces"):
        "dist.probes_capstone: group-aware copies of the capstone's pieces, swapped in so one slip costs one cell",
    ("13_capstone/exercises", "capstone_trainer"):
        "dist.probes_capstone.CourseStage: the stage the trainer cell runs when the student's pieces fail",
}


def answer_copies() -> list[tuple[str, str, str, str, float]]:
    """(notebook, answer grade_id, answer unit, kit unit, shared) for every answer of the course
    whose code the student edition holds (copycheck.kit_copies over package_files())."""
    from .copycheck import kit_copies
    from .paths import course_root

    return kit_copies(package_files(), sorted((course_root() / "source").glob("*/*.ipynb")))


def own_answers_source(source: str) -> str:
    """upstream.py with each function in STUDENT_OWN replaced by `name = OwnAnswer("name")`."""
    from ..upstream import STUDENT_OWN

    tree = ast.parse(source)
    done = set()
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.FunctionDef) and node.name in STUDENT_OWN:
            tree.body[i] = ast.parse(f"{node.name} = OwnAnswer({node.name!r})").body[0]
            done.add(node.name)
    if done != set(STUDENT_OWN):
        raise ValueError(f"upstream.py defines no top-level {sorted(set(STUDENT_OWN) - done)}")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


# ---------------------------------------------------------------- visible expected values


def _visible_uses_reference(release_nb) -> bool:
    """Whether a visible test cell of `release_nb` names a withheld reference (ref.f / from ... import f)."""
    names = {n for v in WITHHELD.values() for n in v}
    for c in release_nb.cells:
        md = nbs.nbgrader_md(c)
        if c.cell_type == "code" and md.get("grade") and not md.get("solution"):
            if any(re.search(rf"\.{re.escape(n)}\b|\bimport\b[^\n]*\b{re.escape(n)}\b", c.source) for n in names):
                return True
    return False


def _run_records(nb, workdir: Path, timeout: int) -> dict[str, list[dict]]:
    """Run `nb` in a plain kernel with the references withheld (NBGRADER_EXECUTION=autograde,
    the view first on PYTHONPATH); grade_id -> the records its test cells published."""
    from .trusted import _is_test_cell, records_of, run_in
    from .withheld_view import build_view

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(NBGRADER_EXECUTION="autograde", PYTHONHASHSEED="0", PYTHONPATH=str(build_view().parent))
    run_in(nb, workdir, env, timeout)
    return {nbs.nbgrader_md(c).get("grade_id"): records_of(c) for c in nb.cells if _is_test_cell(c)}


_EXPECTED_KEYS = ("expected", "expected_shape", "sampled", "lo", "hi", "kind", "rtol", "atol", "unit", "hint")


def visible_table(root: Path, assignment: str, timeout: int = 300, out=print) -> dict[str, list[dict]]:
    """what -> [expected record, ...] for the visible reference checks of `assignment` (see the
    module docstring). ValueError when a description is used with different expected values."""
    from .grader import solved_version
    from .trusted import trusted_records

    root = Path(root)
    table: dict[str, list[dict]] = {}
    where: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="tas-kit-") as t:
        course_dir = Path(t)
        from .grader import Course, make_course
        course = Course(make_course(course_dir / assignment, [assignment], root))
        course.generate(assignment)
        for src in sorted((root / "source" / assignment).glob("*.ipynb")):
            release = course.release_notebook(assignment, src.name)
            if not _visible_uses_reference(release):
                continue
            solved = solved_version(release, nbs.read(src))
            work = course_dir / "run" / src.stem
            work.mkdir(parents=True)
            for p in src.parent.iterdir():
                if p.is_file() and p.suffix != ".ipynb":
                    shutil.copy2(p, work / p.name)
            got = _run_records(solved, work, timeout)
            trusted = trusted_records(src)["cells"]
            n_before = sum(map(len, table.values()))
            for gid, recs in got.items():
                tru = trusted.get(gid, {}).get("records", [])
                per_cell: dict[str, list[dict]] = {}
                for i, r in enumerate(recs):
                    if not r.get("withheld"):
                        continue
                    if i >= len(tru) or tru[i].get("what") != r.get("what") or tru[i].get("kind") != r.get("kind"):
                        raise ValueError(f"{assignment}/{src.name} {gid}: visible check {i} ({r.get('what')!r}) does "
                                         "not match the trusted run's; the visible part must make the same checks")
                    if r.get("measured"):
                        continue   # compared with the student's own measurement: decided at grading time
                    per_cell.setdefault(r["what"], []).append({k: tru[i][k] for k in _EXPECTED_KEYS if k in tru[i]})
                for what, vals in per_cell.items():
                    if what in table and table[what] != vals:
                        raise ValueError(f"{assignment}: the check description {what!r} is used in {where[what]} and "
                                         f"{src.name} {gid} with different expected values; give one of them another "
                                         "description")
                    table[what], where[what] = vals, f"{src.name} {gid}"
            out(f"  {assignment}/{src.name}: {sum(map(len, table.values())) - n_before} visible reference checks")
    return table


# ---------------------------------------------------------------- the wheel


def _version() -> str:
    from .. import __version__
    return f"{__version__}+student"


def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def write_wheel(out_dir: Path, files: dict[str, str | bytes]) -> Path:
    """A pure-Python wheel of the package files `files` (paths relative to `solutions_lib/`)."""
    version = _version()
    dist = f"solutions_lib-{version}.dist-info"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"solutions_lib-{version}-py3-none-any.whl"
    meta = {
        f"{dist}/METADATA": "\n".join([
            "Metadata-Version: 2.1", "Name: solutions_lib", f"Version: {version}",
            "Summary: Training LLMs at scale: the course kit, student edition (no reference answers)",
            "Requires-Python: >=3.10", "Requires-Dist: numpy>=1.24", "Requires-Dist: matplotlib>=3.7",
            "Requires-Dist: torch>=2.2", "Requires-Dist: jupyterlab>=4.0,<5", "Requires-Dist: nbgrader>=0.9.6,<0.10", ""]),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: solutions_lib.course.student_kit\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}/top_level.txt": "solutions_lib\n",
    }
    entries = {f"solutions_lib/{rel}": data for rel, data in sorted(files.items())}
    entries.update(meta)
    record = io.StringIO()
    w = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in entries.items():
            b = data.encode("utf-8") if isinstance(data, str) else data
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, b, compress_type=zipfile.ZIP_DEFLATED)
            w.writerow(_record_line(name, b))
        w.writerow([f"{dist}/RECORD", "", ""])
        info = zipfile.ZipInfo(f"{dist}/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        z.writestr(info, record.getvalue())
    return wheel


def build(out_dir: Path, assignments: list[str] | None = None, root: Path | None = None, out=print) -> Path:
    """Write the student wheel into `out_dir` (visible tables for `assignments`, default all)."""
    from .grader import ensure_tools_on_path
    from .paths import assignments as all_assignments, course_root

    ensure_tools_on_path()
    root = Path(root or course_root())
    files: dict[str, str | bytes] = dict(package_files())
    for a in assignments or all_assignments(root):
        table = visible_table(root, a, out=out)
        files[f"_visible/{a}.json"] = json.dumps(table, sort_keys=True)
    wheel = write_wheel(out_dir, files)
    out(f"student edition: {wheel} ({wheel.stat().st_size / 1024:.0f} KiB)")
    return wheel


# ---------------------------------------------------------------- checking the edition


def kit_venv(wheel: Path, dest: Path) -> Path:
    """A fresh venv at `dest` with the student wheel installed; torch, nbgrader and JupyterLab
    come from this interpreter's site-packages (a plain path entry, so this repository's own
    editable install is not visible there). Returns the venv's python."""
    import subprocess
    import sys
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    py = Path(dest) / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "zz_course_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    with zipfile.ZipFile(wheel) as z:   # a wheel is a zip laid out for site-packages
        z.extractall(site)
    return py


def validate_in(py: Path, notebook: Path, timeout: int = 900) -> tuple[bool, str]:
    """`nbgrader validate` of `notebook` with interpreter `py`, in the notebook's folder and with
    no course config (as on a student's machine): (passed, output)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAS_", "NBGRADER_", "PYTHONPATH"))}
    p = subprocess.run([str(py), "-m", "nbgrader", "validate", notebook.name], cwd=notebook.parent, env=env,
                       capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    return "Success! Your notebook passes all the tests." in out, out


def withheld_lines() -> dict[str, set[str]]:
    """'module.name' -> the distinctive source lines of each withheld answer: stripped lines of
    at least 24 characters that appear nowhere else in the package."""
    per: dict[str, set[str]] = {}
    elsewhere: set[str] = set()
    for src in sorted(_PACKAGE.rglob("*.py")):
        rel = src.relative_to(_PACKAGE)
        if "__pycache__" in rel.parts:
            continue
        module = ".".join(rel.with_suffix("").parts)
        text = src.read_text(encoding="utf-8")
        names = set(WITHHELD.get(module, ()))
        tree = ast.parse(text)
        lines = text.split("\n")
        inside = set()
        for node in tree.body:
            if getattr(node, "name", None) in names:
                first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
                seg = lines[first - 1:node.end_lineno]
                inside.update(range(first - 1, node.end_lineno))
                per[f"{module}.{node.name}"] = {ln.strip() for ln in seg}
        for i, ln in enumerate(lines):
            if i not in inside:   # as written, and without a trailing comment (ast.unparse drops it)
                elsewhere.update((ln.strip(), ln.split("  #")[0].strip()))
    # the leak check looks for each line as a substring of the kit, so a line that is part of a
    # line elsewhere ("group=None) -> torch.Tensor:") is not distinctive either
    elsewhere_text = "\n".join(elsewhere)
    return {k: {ln for ln in v if len(ln) >= 24 and not ln.startswith("#") and ln not in elsewhere_text}
            for k, v in per.items()}


def bench(assignments: list[str] | None = None, out=print, only: str | None = None) -> bool:
    """`python -m solutions_lib bench studentkit`: build the wheel, install it in a fresh venv and
    validate every solved release notebook there (and the blank ones fail). Goal: all pass.
    `only`: validate only the notebooks whose `assignment/name` contains one of these comma-separated texts."""
    import time

    from .grader import Course, make_course, solved_version
    from .paths import assignments as all_assignments, course_root

    root = course_root()
    names = assignments or all_assignments(root)
    t0 = time.perf_counter()
    ok_all = True
    with tempfile.TemporaryDirectory(prefix="tas-kit-bench-") as t:
        wheel = build(Path(t) / "dist", assignments=names, root=root, out=out)
        py = kit_venv(wheel, Path(t) / "venv")
        out(f"built and installed in {time.perf_counter() - t0:.0f} s")
        for a in names:
            course = Course(make_course(Path(t) / "c" / a, [a], root))
            course.generate(a)
            for src in sorted((root / "source" / a).glob("*.ipynb")):
                if only and not any(o in f"{a}/{src.name}" for o in only.split(",")):
                    continue
                rel = course.release_notebook(a, src.name)
                work = Path(t) / "nb" / a
                work.mkdir(parents=True, exist_ok=True)
                for p in src.parent.iterdir():
                    if p.is_file() and p.suffix != ".ipynb":
                        shutil.copy2(p, work / p.name)
                path = work / src.name
                import nbformat
                nbformat.write(solved_version(rel, nbs.read(src)), path)
                t1 = time.perf_counter()
                ok, text = validate_in(py, path)
                nbformat.write(rel, path)
                blank_ok, _ = validate_in(py, path)
                good = ok and not blank_ok
                ok_all &= good
                out(f"  {a}/{src.name}: solved {'validates' if ok else 'FAILS'}, blank "
                    f"{'fails' if not blank_ok else 'VALIDATES'} ({time.perf_counter() - t1:.0f} s)")
                if not ok:
                    tail = [ln for ln in text.splitlines() if "Error" in ln][-3:]
                    for ln in tail:
                        out(f"      {ln.strip()[:200]}")
    out(f"student edition: {'every solved notebook validates' if ok_all else 'NOT all validate'} "
        f"({time.perf_counter() - t0:.0f} s)")
    return ok_all
