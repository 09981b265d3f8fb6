"""Build the documentation site: `make docs`, or

    .venv/bin/python tools/build_docs.py [--out build/docs] [--assignments 01_optimizers,03_memory]

The site's sources are docs/site/ (Sphinx configuration, front page, tables of contents, API
pages) and the pages it lists: docs/*.md and the student edition's theory notebooks
(release/<assignment>/theory.ipynb, executed by tools/docs_notebooks.py). Sphinx reads one
source folder, so the build first mirrors them into a staging folder (`--stage`, default
build/docs_src/; only changed files are rewritten, so Sphinx's incremental build stays
incremental):

    <stage>/            docs/site/*            the front page, conf.py, api/
    <stage>/pages/      docs/*.md, docs/img/   the guides, GRADING, THREAT_MODEL, the measurements
    <stage>/theory/     <assignment>.ipynb     executed, outputs that need an answer dropped

then runs `sphinx-build -b html -W --keep-going` into `--out`: any warning fails the build.
`--assignments` renders only those theory notebooks (the test uses it to stay short); the
default is all of them. Executions are cached in `--cache` (default build/docs_cache/).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_notebooks  # noqa: E402


def _write_if_changed(path: Path, data: bytes) -> bool:
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return True


def _mirror(files: dict[str, bytes], stage: Path, keep: tuple[str, ...] = ()) -> int:
    """Make `stage` hold exactly `files` (relative path -> bytes), plus Sphinx's own folders
    named in `keep`; the number of files written."""
    written = sum(_write_if_changed(stage / rel, data) for rel, data in files.items())
    for p in sorted(stage.rglob("*"), reverse=True):
        rel = p.relative_to(stage).as_posix()
        if rel.split("/")[0] in keep:
            continue
        if p.is_file() and rel not in files:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    return written


#: marks a folder as this builder's staging folder: the only kind `_mirror` deletes files from
STAGE_MARK = ".tas-docs-stage"


def stage_sources(stage: Path, assignments: list[str] | None, cache: Path, root: Path = ROOT, out=print,
                  jobs: int = 1) -> int:
    """Fill `stage` as the module docstring says; the number of files written. Refuses a
    folder that holds files but is not a staging folder (it would delete them)."""
    if stage.is_dir() and any(stage.iterdir()) and not (stage / STAGE_MARK).is_file():
        raise SystemExit(f"{stage} is not empty and not a docs staging folder (no {STAGE_MARK}): "
                         "give --stage a new or empty folder")
    docs = root / "docs"
    files: dict[str, bytes] = {}
    for p in sorted((docs / "site").rglob("*")):
        rel = p.relative_to(docs / "site")
        if p.is_file() and "__pycache__" not in rel.parts and not rel.parts[0].startswith("_build"):
            files[rel.as_posix()] = p.read_bytes()
    for p in sorted(docs.glob("*.md")):
        files[f"pages/{p.name}"] = p.read_bytes()
    for p in sorted((docs / "img").rglob("*")) if (docs / "img").is_dir() else []:
        if p.is_file():
            files[f"pages/img/{p.relative_to(docs / 'img').as_posix()}"] = p.read_bytes()
    theory = docs_notebooks.release_theory(root)
    if not theory:
        raise SystemExit(f"no release/*/theory.ipynb under {root}: run `make release` first")
    wanted = list(theory) if not assignments else assignments
    unknown = sorted(set(wanted) - set(theory))
    if unknown:
        raise SystemExit(f"unknown assignment(s) {', '.join(unknown)}: the release has {', '.join(theory)}")
    import nbformat
    for a, nb in zip(wanted, docs_notebooks.executed_all([theory[a] for a in wanted], cache, jobs=jobs, out=out)):
        files[f"theory/{a}.ipynb"] = nbformat.writes(nb).encode()
    files[STAGE_MARK] = b"made by tools/build_docs.py: its files are rewritten on every build\n"
    return _mirror(files, stage)


def sphinx_build(stage: Path, out_dir: Path, doctrees: Path) -> int:
    """sphinx-build -b html -W --keep-going; its exit status (0: no warning)."""
    from sphinx.cmd.build import build_main
    return build_main(["-b", "html", "-W", "--keep-going", "-q", "-d", str(doctrees), str(stage), str(out_dir)])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "build" / "docs", help="the HTML site (default build/docs)")
    p.add_argument("--stage", type=Path, default=None, help="staging sources (default: <out>_src)")
    p.add_argument("--cache", type=Path, default=ROOT / "build" / "docs_cache",
                   help="executed notebooks (default build/docs_cache)")
    p.add_argument("--assignments", default="", help="comma-separated theory notebooks to render (default: all)")
    p.add_argument("--jobs", type=int, default=1,
                   help="kernels run at once for notebooks not in the cache (default 1: on a shared 2-core "
                        "machine two were not faster)")
    a = p.parse_args(argv)
    out_dir = a.out.resolve()
    stage = (a.stage or out_dir.with_name(out_dir.name + "_src")).resolve()
    doctrees = stage.with_name(stage.name + "_doctrees")
    if out_dir in (ROOT, ROOT / "docs") or stage in (ROOT, ROOT / "docs"):
        raise SystemExit(f"refusing to build into {out_dir if out_dir in (ROOT, ROOT / 'docs') else stage}")
    wanted = [s.strip() for s in a.assignments.split(",") if s.strip()] or None
    t0 = time.monotonic()
    print(f"docs: executing the theory notebooks ({'all' if not wanted else ', '.join(wanted)})")
    if a.jobs < 1:
        raise SystemExit(f"--jobs must be at least 1, not {a.jobs}")
    written = stage_sources(stage, wanted, a.cache.resolve(), jobs=a.jobs)
    print(f"docs: {written} source file(s) changed in {stage}; sphinx-build -W into {out_dir}")
    os.environ["TAS_DOCS_REPO"] = str(ROOT)     # the solutions_lib that autodoc imports (conf.py)
    rc = sphinx_build(stage, out_dir, doctrees)
    took = time.monotonic() - t0
    if rc:
        print(f"docs: sphinx-build failed (exit {rc}; every warning is an error) after {took:.0f} s", file=sys.stderr)
        return rc
    print(f"docs: built in {took:.0f} s: open {out_dir / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
