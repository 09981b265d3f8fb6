"""The one place where the course's nbgrader settings live.

`nbgrader_config.py` at the course root applies them to stock nbgrader commands; temporary
courses made by the tests and by the self-check apply the same function, so a notebook is
graded the same way everywhere.
"""
from __future__ import annotations

import os

COURSE_ID = "training-at-scale"

#: Seconds a single cell may run before nbgrader interrupts it and records a
#: CellTimeoutError. Every solved notebook runs in well under this on 2 cores.
CELL_TIMEOUT_S = 60

#: Files never copied from source/ into release/ (nor from submissions).
IGNORE = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.orig", "*.rej"]

#: Grading limits (issue 14): kept in limits.py, which the pipeline's modules import.
from .limits import KERNEL_FILE_BYTES, MAX_SUBMISSION_FILE_BYTES, OUTPUT_CAP_BYTES  # noqa: E402,F401

#: The repository holding this package: the instructor's course root (`nbgrader_config.py`).
_REPO_ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def gradebook_url(root) -> str:
    """The gradebook of course `root`: SQLite in the course root, or $TAS_DB_URL.

    $TAS_DB_URL (any SQLAlchemy URL, e.g. postgresql+psycopg2://user:pass@host/dbname) moves
    the gradebook of the instructor's course (the repository holding this package) off
    SQLite. Temporary courses (tests, the self-check) keep their own throw-away SQLite file.
    $TAS_DB_URL_ROOT (course roots separated by os.pathsep) names the courses the URL applies
    to instead of the repository: a second grading host's clone, a test's temporary course.
    """
    root = os.path.abspath(root)
    url = os.environ.get("TAS_DB_URL")
    if url:
        named = os.environ.get("TAS_DB_URL_ROOT")
        roots = [os.path.realpath(r) for r in named.split(os.pathsep) if r] if named else [_REPO_ROOT]
        if os.path.realpath(root) in roots:
            return url
    return "sqlite:///" + os.path.join(root, "gradebook.db")


#: nbgrader's default exchange, which must exist before anyone uses it.
DEFAULT_EXCHANGE = "/usr/local/share/nbgrader/exchange"


def _exchange_configured_elsewhere() -> bool:
    """Whether a Jupyter config file outside the course (~/.jupyter, /etc/jupyter, ...) names
    an exchange: nbgrader merges those files with the course's, and theirs must stand."""
    try:
        from jupyter_core.paths import jupyter_config_path
    except ImportError:
        return False
    for d in jupyter_config_path():
        for name in ("nbgrader_config.py", "nbgrader_config.json"):
            try:
                with open(os.path.join(d, name), encoding="utf-8", errors="replace") as f:
                    if "Exchange" in f.read():
                        return True
            except OSError:
                pass
    return False


def course_exchange(c, root: str) -> None:
    """A course-local exchange, `<root>/exchange`, when nothing else names one and nbgrader's
    default cannot be used: without an existing exchange the Formgrader opens with a warning
    and release/collect are off. On JupyterHub set the shared one
    (`c.Exchange.root = "/srv/nbgrader/exchange"` after apply_course_config): that wins."""
    if "root" in c.Exchange or _exchange_configured_elsewhere():
        return
    if os.path.isdir(DEFAULT_EXCHANGE) and os.access(DEFAULT_EXCHANGE, os.W_OK | os.X_OK):
        return
    ex = os.path.join(root, "exchange")
    try:
        if not os.path.isdir(ex):
            os.makedirs(ex, exist_ok=True)
            os.chmod(ex, 0o1777)  # what `nbgrader release_assignment` would set (sticky: no deletes by others)
    except OSError:
        return  # a read-only course root: nbgrader's default and its warning, as before
    c.Exchange.root = ex


SECRET_FILE = ".course_secret"


def refusal(mode: str, why: str) -> str:
    """What autograde says when it will not grade without the sandbox."""
    return (f"TAS_SANDBOX={mode}: the grading sandbox cannot run on this machine ({why}), and the course does "
            "not grade students' code unsandboxed by default. Install bubblewrap (Debian/Ubuntu: "
            "`apt-get install -y bubblewrap`; it needs unprivileged user namespaces) and check with "
            "`python -m solutions_lib sandbox`, or grade without it on purpose with TAS_SANDBOX=off "
            "(docs/THREAT_MODEL.md says what that gives up).")


def term_key(root: str) -> str:
    """The hidden tests' seed key of course `root` (grading.term_seed): a digest of the course's
    secret, from $TAS_COURSE_SECRET or `<root>/.course_secret` (keep it out of git, release/ and
    the student kit; change it each term); "" when the course has none (the literal seeds)."""
    import hashlib

    secret = os.environ.get("TAS_COURSE_SECRET", "")
    if not secret:
        try:
            with open(os.path.join(root, SECRET_FILE), encoding="utf-8") as f:
                secret = f.read().strip()
        except OSError:
            secret = ""
    return hashlib.sha256(f"tas-term:{secret}".encode()).hexdigest()[:24] if secret else ""


def apply_course_config(c, root: str, cell_timeout: int = CELL_TIMEOUT_S) -> None:
    """Fill a traitlets Config `c` with the course's nbgrader settings for course `root`."""
    root = os.path.abspath(root)
    # this term's hidden cases (grading.term_seed): the trusted run and the kernels inherit it
    key = term_key(root)
    if key:
        os.environ["TAS_TERM_SEED"] = key
    else:
        os.environ.pop("TAS_TERM_SEED", None)
    c.CourseDirectory.root = root
    c.CourseDirectory.course_id = COURSE_ID
    c.CourseDirectory.db_url = gradebook_url(root)
    c.CourseDirectory.ignore = list(IGNORE)
    course_exchange(c, root)
    # `Execute.timeout` is the knob nbgrader reads (it overrides ExecutePreprocessor.timeout).
    c.Execute.timeout = cell_timeout
    c.Execute.interrupt_on_timeout = True
    c.Execute.execute_retries = 0
    # Kill the kernel (its whole process group) once the last cell has run instead of asking it
    # to exit: a kernel that has run torch code often ignores the shutdown request, and
    # jupyter_client then waits 2.5 s before SIGTERM, per notebook. Outputs are all in by then.
    c.Execute.shutdown_kernel = "immediate"
    # No shared history file between kernels; no transport notice in every grading log.
    c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--IPKernelApp.log_level=ERROR"]
    # A student who deletes a test cell gets it back (with its hidden tests) at grading time.
    c.OverwriteCells.add_missing_cells = True
    c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
    c.ClearSolutions.enforce_metadata = True
    # Feedback HTML without the hidden tests and without traceback frames (see feedback.py).
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import GetGrades

    from .feedback import HideHiddenTests
    from .neutralise import NeutraliseStudentContent, insert_neutraliser
    from .term_feedback import MarkAwaitingGrader
    # Student HTML and scripts made inert (neutralise.py), in the feedback and, below, in the
    # autograded notebook that the Formgrader renders; a written answer not graded yet says so
    # (term_feedback.py) instead of showing 0.
    c.GenerateFeedback.preprocessors = [GetGrades, NeutraliseStudentContent, HideHiddenTests,
                                        MarkAwaitingGrader, CSSHTMLHeaderPreprocessor]
    # The grader re-checks each test cell's check records outside the kernel (integrity.py).
    from nbgrader.converters import Autograde

    from .integrity import insert_verifier
    current = c.Autograde.autograde_preprocessors if "autograde_preprocessors" in c.Autograde else \
        list(Autograde.class_traits()["autograde_preprocessors"].default())
    c.Autograde.autograde_preprocessors = insert_verifier(list(current))
    # After SaveAutoGrades (grades come from what the kernel produced), before the final
    # CheckCellMetadata: the Formgrader renders the neutralised copy.
    c.Autograde.autograde_preprocessors = insert_neutraliser(list(c.Autograde.autograde_preprocessors))
    # One Execute for every path (sandbox on or off): nbgrader's, with a cap on the output it
    # keeps (execute.py); the sandbox below subclasses it. And an intake check before nbgrader
    # opens a submission: links, FIFOs, devices, oversize files refused (intake.py).
    from nbgrader.preprocessors import Execute

    from .execute import CourseExecute
    from .intake import install as install_intake
    c.Autograde.autograde_preprocessors = [CourseExecute if p is Execute else p
                                           for p in c.Autograde.autograde_preprocessors]
    c.CourseExecute.output_cap_bytes = OUTPUT_CAP_BYTES
    c.IntakeMixin.intake_max_file_bytes = MAX_SUBMISSION_FILE_BYTES
    c.SafeGenerateFeedback.intake_max_file_bytes = 0
    install_intake()
    # Student kernels in a bubblewrap sandbox (sandbox.py). Secure by default (issue 26):
    # TAS_SANDBOX=on (the default) and =required grade only in the sandbox, and autograde refuses
    # to start a kernel where it cannot run (CourseExecute.unsandboxed_refusal, with how to install
    # bubblewrap or opt out); =off grades in plain kernels, by name (students' own machines, the
    # self-check). Validate and generate_assignment never need the sandbox.
    mode = os.environ.get("TAS_SANDBOX", "on")
    if mode not in ("off", "on", "required"):
        raise ValueError(f"TAS_SANDBOX must be off, on or required, got {mode!r}")
    if mode != "off":
        from .sandbox import enable_sandbox, sandbox_available

        ok, why = sandbox_available()
        if ok:
            enable_sandbox(c, root, file_bytes=KERNEL_FILE_BYTES)
        else:
            c.CourseExecute.unsandboxed_refusal = refusal(mode, why)
    # The rubric of each written answer, from source/, beside it in the Formgrader (never in the
    # feedback): term_rubric.py.
    from .term_rubric import enable_rubrics
    enable_rubrics(c, root)
