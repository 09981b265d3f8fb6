"""`python -m solutions_lib.course.nbgrader_cmd ARGS`: stock `nbgrader ARGS`, 1-3 s sooner.

Every nbgrader command imports nbformat, which imports jsonschema, which imports the optional
`rfc3987_syntax` (installed with `jsonschema[format-nongpl]`, which jupyter-events and nbformat
ask for). That module builds Earley parsers for the RFC 3987 (IRI) grammar at import time:
about 1.3 s of a 2.3 s nbgrader start on an idle 2-core machine, and about 0.5 s more to tear
down at exit (upstream: python-jsonschema/jsonschema#1428). Only jsonschema's `iri` and
`iri-reference` format checks use it; no notebook or nbgrader schema asks for them, and
nbgrader does not check formats. The import happens before nbgrader reads nbgrader_config.py,
so configuration cannot avoid it: this launcher marks the module as absent (jsonschema then
leaves those two format checks out, as when the extra is not installed) and runs nbgrader's
own `main`, with the same arguments, output and exit status as the `nbgrader` script.

Our tools that run nbgrader as a command use `command(*args)`; instructors can keep typing
`nbgrader ...` (same results, a little slower per command).
"""
from __future__ import annotations

import os
import sys

MODULE = "solutions_lib.course.nbgrader_cmd"


def stock_executable() -> str:
    """The `nbgrader` script installed next to this interpreter (what an instructor types)."""
    return os.path.join(os.path.dirname(sys.executable), "nbgrader")


def command(*args: str) -> list[str]:
    """The argv that runs `nbgrader *args` through this launcher with this interpreter."""
    return [sys.executable, "-m", MODULE, *args]


def main(argv: list[str] | None = None) -> int:
    sys.modules.setdefault("rfc3987_syntax", None)  # `import rfc3987_syntax` -> ImportError
    # `python -m` put the working folder (the course root) first on sys.path; the `nbgrader`
    # script does not, so neither do we (nothing in a course root should shadow a module).
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    from nbgrader.apps.nbgraderapp import main as nbgrader_main

    if argv is not None:
        sys.argv = ["nbgrader", *argv]
    else:
        sys.argv[0] = "nbgrader"
    return nbgrader_main()


if __name__ == "__main__":
    sys.exit(main())
