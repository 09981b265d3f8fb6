"""Command-line tools of the course: `python -m solutions_lib <command>`.

  demo       build release/, autograde a sample class, print the grade table (the main job)
  release    rebuild release/ from source/ (nbgrader generate_assignment --force)
  check      self-check a notebook with the hidden tests, offline
  coverage   which syllabus ids are graded where, which are missing
  fmt        normalise the source notebooks (no outputs, stable JSON); --check only reports
  scan       flag suspicious code in submitted notebooks for manual review
  sandbox    what a grading kernel is held to on this machine (bubblewrap, rlimits, cgroup)
  autograde  autograde a class in parallel on this host: one stock `nbgrader autograde --student` per student
  grade      grade a class on Dask (a LocalCluster, or --scheduler tcp://HOST:PORT for several machines):
             one task per student-notebook, one gradebook (docs/engine.md)
  bench      print measured-vs-predicted benchmarks (activation memory, all-reduce alpha-beta, DDP step time)
  roster / late / export / class-report   course staff tools for a term (docs/term.md)
"""
from __future__ import annotations

import argparse
import logging
import sys
import warnings


def _quiet() -> None:
    # nbgrader's SQLAlchemy warnings and the kernel's transport notice are not for learners.
    warnings.filterwarnings("ignore")
    logging.getLogger("traitlets").setLevel(logging.ERROR)


def cmd_check(args) -> int:
    from .course.selfcheck import CheckError, check, format_report, to_json

    _quiet()
    try:
        report = check(args.notebook)
    except CheckError as e:
        if args.json:
            import json
            print(json.dumps({"path": args.notebook, "error": str(e)}))
        else:
            print(f"cannot check: {e}", file=sys.stderr)
        return 2
    print(to_json(report) if args.json else format_report(report))
    return 0 if report.full_marks else 1


def cmd_coverage(args) -> int:
    from .course.coverage import coverage_map, format_coverage, problems

    cmap = coverage_map()
    if args.json:
        import json
        print(json.dumps(cmap, indent=1))
    else:
        print(format_coverage(cmap))
    return 1 if problems(cmap) else 0


def cmd_fmt(args) -> int:
    from .course import notebooks as nbs
    from .course.paths import source_notebooks

    bad = []
    for path in source_notebooks():
        if nbs.is_normalised(path):
            continue
        bad.append(path)
        if not args.check:
            nbs.write(nbs.normalise(nbs.read(path)), path)
    for p in bad:
        print(("not normalised: " if args.check else "normalised: ") + str(p))
    return 1 if (bad and args.check) else 0


def cmd_release(args) -> int:
    from .course.demo import release
    from .course.grader import ensure_tools_on_path
    from .course.paths import course_root

    ensure_tools_on_path()
    names = release(course_root(), verbose=True)   # one line per assignment as it is built
    print("release/ rebuilt for: " + ", ".join(names))
    return 0


def cmd_demo(args) -> int:
    from .course.demo import main

    _quiet()
    return main(all_assignments=args.all, workers=args.workers)


def cmd_scan(args) -> int:
    from .course.scanner import main

    return main(args.paths, as_json=args.json)


def cmd_bench(args) -> int:
    from .bench import main

    assignments = [a for a in (args.assignments or "").split(",") if a] or None
    return main(args.names, assignments=assignments, baseline=args.baseline, sweep=args.sweep,
                only=args.only, workers=args.workers)


def cmd_autograde(args) -> int:
    from .course.parallel import main

    if args.shard or args.claim:
        print("error: --shard and --claim are gone: several grading hosts now share a class through the "
              "grading engine, `python -m solutions_lib grade A --scheduler tcp://HOST:PORT` (docs/engine.md)",
              file=sys.stderr)
        return 2
    return main(args.assignment, students=args.student, workers=args.workers, root=args.root,
                timeout=args.timeout_per_student)


def cmd_grade(args) -> int:
    from .course.engine import main as grade_main
    from .course.engine_feedback import main as feedback_main

    argv = [args.assignment] + (["--workers", str(args.workers)] if args.workers else []) \
        + (["--scheduler", args.scheduler] if args.scheduler else []) \
        + (["--student", *args.student] if args.student else []) \
        + (["--root", args.root] if args.root else [])
    if args.feedback:
        return feedback_main(argv)
    return grade_main(argv + (["--timeout", str(args.timeout)] if args.timeout else []))


def cmd_student_kit(args) -> int:
    from pathlib import Path

    from .course.student_kit import build

    _quiet()
    assignments = [a for a in (args.assignments or "").split(",") if a] or None
    build(Path(args.out_dir), assignments=assignments)
    return 0


def cmd_sandbox(args) -> int:
    import os

    from .course.sandbox import describe_limits, sandbox_available

    mode = os.environ.get("TAS_SANDBOX", "on")
    print(f"TAS_SANDBOX={mode}" + (" (grading kernels are NOT sandboxed)" if mode == "off" else ""))
    for line in describe_limits():
        print(line)
    return 0 if sandbox_available()[0] or mode == "off" else 1


#: Course staff tools (docs/term.md): each module parses its own arguments.
TERM_TOOLS = {"roster": ("term_roster", "import the class roster CSV (names, emails) into the gradebook"),
              "late": ("term_late", "due dates, extensions and late penalties (nbgrader's late plugin)"),
              "export": ("term_export", "Canvas gradebook CSV and plain CSV (not graded stays blank)"),
              "class-report": ("term_report", "the class report: one HTML file with plots"),
              "similarity": ("term_similarity", "side-by-side report of students' answer cells that share code")}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in TERM_TOOLS:
        from importlib import import_module
        _quiet()
        return import_module(f"solutions_lib.course.{TERM_TOOLS[argv[0]][0]}").main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m solutions_lib", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="grade your notebook with the hidden tests (self-study)")
    c.add_argument("notebook")
    c.add_argument("--json", action="store_true", help="machine-readable report")
    c.set_defaults(func=cmd_check)
    c = sub.add_parser("coverage", help="syllabus coverage map")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_coverage)
    c = sub.add_parser("fmt", help="normalise source notebooks")
    c.add_argument("--check", action="store_true", help="report, do not rewrite")
    c.set_defaults(func=cmd_fmt)
    c = sub.add_parser("scan", help="flag suspicious code in submitted notebooks for manual review")
    c.add_argument("paths", nargs="+", help="notebooks or folders (e.g. submitted/)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_scan)
    c = sub.add_parser("bench", help="benchmarks: predicted vs measured memory and communication; DDP step time")
    c.add_argument("names", nargs="*", help="memory, comms, ddp, grading, fairness, mutants, studentkit, cheat, "
                   "attention, parallel, moe, fp8, triton, published, capstone, prose (default: memory comms ddp)")
    c.add_argument("--assignments", help="grading, fairness: comma-separated assignments (default: all)")
    c.add_argument("--sweep", choices=["warnings", "cascades", "both"], default="both",
                   help="fairness: harmless warnings in every answer, one blank answer at a time, or both")
    c.add_argument("--baseline", action="store_true", help="grading: also with nbgrader's stock settings")
    c.add_argument("--only", help="mutants: only the wrong answers whose name (assignment/notebook/file) contains this; "
                   "studentkit: comma-separated notebook names")
    c.add_argument("--workers", type=int, help="mutants: submissions graded at once (default: the number of CPUs)")
    c.set_defaults(func=cmd_bench)
    c = sub.add_parser("autograde", help="autograde every submission of an assignment, N students at a time")
    c.add_argument("assignment")
    c.add_argument("--workers", type=int, help="students graded at once (default: the number of CPUs)")
    c.add_argument("--student", action="extend", nargs="+", help="grade only these students")
    c.add_argument("--root", help="course root (default: $TAS_COURSE_ROOT or this repository)")
    c.add_argument("--timeout-per-student", type=float, metavar="SECONDS",
                   help="kill a student's nbgrader run after this long (default: none)")
    c.add_argument("--shard", help=argparse.SUPPRESS)    # gone: says so and points to `grade`
    c.add_argument("--claim", help=argparse.SUPPRESS)
    c.set_defaults(func=cmd_autograde)
    c = sub.add_parser("grade", help="grade a class on Dask: one task per student-notebook, one gradebook "
                       "(several machines: --scheduler; docs/engine.md)")
    c.add_argument("assignment")
    c.add_argument("--workers", type=int, help="Dask workers (default: the number of CPUs; with --scheduler: "
                   "wait for this many)")
    c.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="grade on an existing Dask cluster (docs/engine.md)")
    c.add_argument("--student", action="extend", nargs="+", help="grade only these students")
    c.add_argument("--root", help="course root (default: $TAS_COURSE_ROOT or this repository)")
    c.add_argument("--timeout", type=float, metavar="SECONDS", help="seconds one student-notebook may take")
    c.add_argument("--feedback", action="store_true", help="make the graded students' feedback HTML on the workers "
                   "instead of grading (then `nbgrader release_feedback A`)")
    c.set_defaults(func=cmd_grade)
    c = sub.add_parser("student-kit", help="build the student edition wheel (no reference answers) into OUT_DIR")
    c.add_argument("out_dir")
    c.add_argument("--assignments", help="comma-separated: write the visible tests' values of these only (default: all)")
    c.set_defaults(func=cmd_student_kit)
    sub.add_parser("sandbox", help="what a grading kernel is held to on this machine").set_defaults(func=cmd_sandbox)
    sub.add_parser("release", help="rebuild release/ from source/").set_defaults(func=cmd_release)
    c = sub.add_parser("demo", help="the main job: release, grade a sample class, print the table")
    c.add_argument("--all", action="store_true", help="every assignment (says how long first), not the sample")
    c.add_argument("--workers", type=int, help="notebooks graded at once (default: the number of CPUs)")
    c.set_defaults(func=cmd_demo)
    for name, (_, text) in TERM_TOOLS.items():
        sub.add_parser(name, help=text, add_help=False)  # listed in --help; dispatched above
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
