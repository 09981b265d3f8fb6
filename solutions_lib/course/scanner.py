"""Submission scanner: flag code in a submitted notebook that deserves a human look.

A static scan (the code is never run) of the cells a student can change: answer cells, cells
the student added, and, given the released notebook, any other cell whose source differs
from the release (an edited locked or test cell is flagged as such: nbgrader puts the
original back at grading time, but the attempt is worth a look). Each code cell goes through
IPython's own escapes first (leading indent and prompts, cell magics, line magics, `!shell`,
`/f a`, `,f a b`, `;f a b` autocall lines, a one-line cell that is an automagic): the body of
a cell magic that runs Python (`%%time`, `%%timeit`, `%%capture`, `%%prun`, `%%debug`,
`%%python`, `%%script python`, `%%writefile x.py`) is analysed as Python, and so is a
literal string given to `exec`/`eval`/`compile` or to `get_ipython().run_cell`/
`run_line_magic`/`run_cell_magic`. The Python is parsed with `ast` and walked without
recursion; a cell that does not parse is checked with regular expressions instead.

The scanner never raises on a submission: a notebook (or a cell) it cannot analyse (not a
regular file, over the size limit, not UTF-8 JSON, not a notebook, an unsupported nbformat,
a cell that is not an object or whose source is not text, nesting too deep for the parser,
out of time) gives an `unreadable` finding that starts with "cannot analyse:", and the rest
of the notebook and of the class is scanned. The work per notebook is bounded: file size
(MAX_FILE_BYTES), cells (MAX_CELLS), characters per cell (MAX_CELL_CHARS) and per notebook
(MAX_CODE_CHARS), and time (SCAN_SECONDS).

Rules (a finding names one):

- `ipython_hook`: `get_ipython()` and its hooks (events, input/AST transformers,
  `set_custom_exc`, `run_cell`, ...), `import IPython`;
- `monkeypatch`: assigning, deleting or `setattr`-ing attributes of numpy, math, torch,
  builtins, sys, time, random, os, inspect, `solutions_lib` (the comparison helpers), ...;
  `import builtins`/`__builtins__`, `sys.modules` edits, `importlib.reload`, assigning a
  dunder attribute (`f.__code__ = ...`);
- `process_exit`: `sys.exit`, `os._exit`, `os.kill`, `os.abort`, `quit`, `exit`,
  `raise SystemExit`, `signal.*`;
- `file_access`: a call with an absolute, `~` or `..` path, `os.chdir`, `sqlite3`, a `shutil`
  call on a path that is neither a parameter of the enclosing function (or built from one)
  nor a temporary directory,
  strings naming the gradebook, `source/`, `autograded/`, `submitted/`, `release/`,
  `nbgrader_config`; `%run`, `%load`, `%%writefile`, `%cd`;
- `subprocess`: `subprocess`, `os.system`/`popen`/`exec*`/`spawn*`/`fork`, `pty`,
  `!shell` lines, `%%bash`/`%%sh`/`%%script`, `%system`, `%sx`;
- `network`: socket, urllib, requests, http, ftplib, smtplib, httpx, aiohttp, paramiko;
- `tracing`: `sys.settrace`/`setprofile`, `threading.settrace`/`setprofile`,
  `sys.addaudithook`; frame and heap introspection that can read a test's expected values
  (`sys._getframe`, `inspect.currentframe`/`stack`, `f_back`, `f_locals`, `gc.get_objects`,
  `gc.get_referrers`, `traceback.walk_stack`), reading `__globals__`, `__code__`,
  `__closure__` of a function;
- `dynamic_code`: `exec`, `eval`, `compile`, `__import__`, `importlib.import_module`,
  `ctypes`, `marshal`, `pickle` loads, `__subclasses__`, `getattr` of a sensitive module with
  a computed name;
- `background`: code that runs later, beside or after the test cells: a thread, timer,
  executor or process started outside a function that joins it, `atexit.register`,
  `weakref.finalize`, `gc.callbacks`, `signal.signal`/`setitimer`/`alarm` handlers;
- `edited_locked_cell` (with the release only): a locked or test cell that differs;
- `unreadable`: "cannot analyse: <why>" (see above), a flag for a person.

Module aliases are followed through imports (anywhere in the notebook) and, in cell order,
through assignments (`g = solutions_lib.grading`, `m = sys.modules`, `d = vars(np)`,
`g = __import__("solutions_lib.grading", fromlist=["x"])`, `importlib.import_module("x")`,
`sys.modules["x"]`, `getattr(m, "name")`, tuple assignments, `:=`); writes through any
alias of a sensitive module are flagged, and so is rebinding a name that an import bound to
a sensitive module or function (`expect_close = lambda *a, **k: None`) when a test or locked
cell reads that name without importing it itself (a student's variable `ref` or `ck` beside a
test cell that runs `import solutions_lib.ref as ref` changes nothing, and is not flagged). Dynamic names are
folded when literal (`getattr(g, "expect_" + "close")`); sensitive attribute names written as
strings (`"__globals__"`, `"f_back"`, ...) are flagged wherever they appear.

Writing under a temporary directory (`tempfile`), relative paths inside the notebook's
folder, `torch.distributed` (the lab's gloo ranks, through `solutions_lib.dist.launch`) and
`torch.backends.*` settings are allowed. This is a review aid, not a sandbox: see docs/THREAT_MODEL.md.
"""
from __future__ import annotations

import ast
import errno
import json
import os
import re
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

from . import notebooks as nbs

RULES = ("ipython_hook", "monkeypatch", "process_exit", "file_access", "subprocess", "network",
         "tracing", "dynamic_code", "background", "edited_locked_cell", "unreadable")

try:
    from .limits import MAX_SUBMISSION_FILE_BYTES as MAX_FILE_BYTES  # the intake's limit
except ImportError:  # pragma: no cover
    MAX_FILE_BYTES = 50 * 2**20
MAX_CELLS = 5000            # cells analysed per notebook
MAX_CELL_CHARS = 200_000    # characters of one code cell (honest cells are under 10 000)
MAX_CODE_CHARS = 1_000_000  # characters of code analysed per notebook
MAX_LINE_CHARS = 4000       # regular expressions see long lines in overlapping chunks of this size
MAX_NESTED = 4              # magic bodies / exec'd strings analysed inside one another
SCAN_SECONDS = 5.0          # time for one notebook (an honest one takes about 0.05 s)

PROTECTED = {"numpy", "math", "torch", "builtins", "solutions_lib", "sys", "time", "random", "os",
             "operator", "functools", "inspect", "importlib", "gc", "traceback", "IPython", "nbformat",
             "cmath", "statistics", "decimal", "fractions", "warnings", "unittest", "pytest", "threading",
             "signal", "atexit", "types", "ipykernel", "weakref", "copy", "json", "contextlib", "io"}
PATCH_ALLOWED = ("torch.backends.",)
DEFAULT_ALIASES = {"np": "numpy", "F": "torch.nn.functional", "nn": "torch.nn", "dist": "torch.distributed",
                   "plt": "matplotlib.pyplot", "mp": "torch.multiprocessing"}

HOOK_ATTRS = {"events", "input_transformers", "input_transformers_cleanup", "input_transformers_post",
              "ast_transformers", "set_custom_exc", "run_cell", "run_cell_async", "run_code", "run_ast_nodes",
              "showtraceback", "showsyntaxerror", "set_hook", "register_magic_function", "register_magics",
              "custom_exceptions", "user_ns", "user_global_ns", "InteractiveTB", "displayhook", "excepthook",
              "prefilter_manager", "transform_cell", "kernel"}
EXIT_CALLS = {"sys.exit", "os._exit", "os.kill", "os.killpg", "os.abort", "quit", "exit", "os.exit",
              "builtins.exit", "builtins.quit", "_thread.interrupt_main", "signal.raise_signal", "os.close"}
EXIT_EXC = {"SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException"}
SUBPROCESS_CALLS = {"os.system", "os.popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.posix_spawnp",
                    "pty.spawn", "os.startfile"}
SUBPROCESS_PREFIXES = ("os.exec", "os.spawn", "subprocess.", "asyncio.create_subprocess")
FILE_CALLS = {"os.chdir", "os.fchdir", "os.chroot", "os.chmod", "os.chown", "os.symlink", "os.link",
              "os.removedirs", "os.utime"}
TRACE_CALLS = {"sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile",
               "threading.settrace_all_threads", "threading.setprofile_all_threads", "sys.addaudithook",
               "sys._getframe", "sys._current_frames", "sys.setrecursionlimit", "inspect.currentframe",
               "inspect.stack", "inspect.getouterframes", "inspect.trace", "gc.get_objects", "gc.get_referrers",
               "gc.get_referents", "sys.monitoring.register_callback", "sys.monitoring.use_tool_id",
               "traceback.walk_stack", "traceback.walk_tb", "inspect.getinnerframes"}
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "f_trace"}
SAFE_PATH_CALLS = {"str", "os.fspath", "os.path.join", "os.path.abspath", "Path", "pathlib.Path"}
DYNAMIC_CALLS = {"exec", "eval", "compile", "__import__", "importlib.import_module", "importlib.__import__",
                 "importlib.util.spec_from_file_location", "marshal.loads", "pickle.loads", "pickle.load",
                 "runpy.run_path", "runpy.run_module", "types.FunctionType", "types.CodeType",
                 "builtins.exec", "builtins.eval", "builtins.compile", "builtins.__import__"}
MODULE_RULES = {
    "subprocess": "subprocess", "pty": "subprocess", "pexpect": "subprocess", "sh": "subprocess",
    "socket": "network", "socketserver": "network", "urllib": "network", "urllib3": "network",
    "requests": "network", "http": "network", "httpx": "network", "aiohttp": "network", "ftplib": "network",
    "smtplib": "network", "telnetlib": "network", "paramiko": "network", "websocket": "network",
    "websockets": "network", "xmlrpc": "network", "ssl": "network",
    "sqlite3": "file_access", "sqlalchemy": "file_access", "nbgrader": "file_access",
    "builtins": "monkeypatch", "ctypes": "dynamic_code", "cffi": "dynamic_code", "marshal": "dynamic_code",
    "code": "dynamic_code", "codeop": "dynamic_code", "runpy": "dynamic_code", "IPython": "ipython_hook",
    "ipykernel": "ipython_hook", "signal": "process_exit", "_thread": "process_exit",
}
SENSITIVE_STR = re.compile(r"gradebook|nbgrader_config|(^|[/\\])(source|autograded|submitted|release|feedback)"
                           r"([/\\]|$)|\.ipynb_checkpoints|/etc/|/proc/|/home/|/root")
ABSOLUTE = re.compile(r"^(/.|~|[A-Za-z]:[/\\])")
DOTDOT = re.compile(r"(^|[/\\])\.\.([/\\]|$)")

LINE_MAGIC = re.compile(r"^\s*(?:[\w.]+\s*=\s*)?(%{1,2})(\w+)(.*)$")
CELL_MAGIC = re.compile(r"^%%(!|\w+)(.*)$")
SHELL = re.compile(r"^\s*([\w.]+\s*=\s*)?!")
ESCAPE = re.compile(r"^(\s*)([/,;])([\w.]+)[ \t]*(.*)$")   # IPython autocall: /f a b, ,f a b, ;f a b
PROMPTS = [(re.compile(r"^(>>>|\.\.\.)( |$)"), re.compile(r"^>>>( |$)")),
           (re.compile(r"^(In \[\d+\]: |\s*\.\.\.+: )"), re.compile(r"^(In \[\d+\]: |\s*\.\.\.+: )"))]
MAGIC_RULES = {"bash": "subprocess", "sh": "subprocess", "script": "subprocess", "system": "subprocess",
               "sx": "subprocess", "perl": "subprocess", "ruby": "subprocess", "python": "subprocess",
               "python2": "subprocess", "python3": "subprocess", "pypy": "subprocess", "js": "subprocess",
               "javascript": "subprocess", "html": "subprocess", "run": "file_access", "load": "file_access",
               "writefile": "file_access", "cd": "file_access", "pushd": "file_access", "popd": "file_access",
               "bookmark": "file_access", "env": "file_access", "set_env": "file_access",
               "load_ext": "ipython_hook", "reload_ext": "ipython_hook", "autoreload": "ipython_hook",
               "aimport": "ipython_hook", "alias": "subprocess", "unalias": "subprocess", "rehashx": "subprocess",
               "rerun": "ipython_hook", "recall": "ipython_hook", "macro": "ipython_hook", "store": "file_access",
               "config": "ipython_hook", "xmode": "ipython_hook", "capture": "ipython_hook",
               "pip": "subprocess", "conda": "subprocess", "mamba": "subprocess", "micromamba": "subprocess",
               "uv": "subprocess", "edit": "subprocess", "ed": "subprocess", "cat": "subprocess",
               "cp": "subprocess", "mv": "subprocess", "rm": "subprocess", "rmdir": "subprocess",
               "mkdir": "subprocess", "ls": "subprocess", "ll": "subprocess", "lf": "subprocess",
               "lk": "subprocess", "lx": "subprocess", "ldir": "subprocess", "less": "subprocess",
               "more": "subprocess", "man": "subprocess", "clear": "subprocess", "killbgscripts": "subprocess",
               "save": "file_access", "logstart": "file_access", "notebook": "file_access", "pycat": "file_access",
               "pfile": "file_access", "history": "file_access", "hist": "file_access", "dhist": "file_access",
               "dirs": "file_access", "code_wrap": "ipython_hook", "autocall": "ipython_hook",
               "automagic": "ipython_hook", "autoawait": "ipython_hook", "doctest_mode": "ipython_hook",
               "gui": "ipython_hook", "reset": "ipython_hook", "reset_selective": "ipython_hook",
               "xdel": "ipython_hook", "pdb": "ipython_hook", "tb": "ipython_hook", "connect_info": "ipython_hook",
               "qtconsole": "subprocess", "px": "subprocess", "autopx": "subprocess", "sql": "file_access"}
PY_MAGICS = {"time", "timeit", "prun", "debug", "capture"}   # their body (or statement) is Python, run here
PY_SCRIPT = re.compile(r"^(\S*/)?(python[\d.]*|pypy[\d.]*|ipython[\d.]*)$")
SAFE_MAGICS = {"matplotlib", "who", "whos", "who_ls", "precision", "pinfo", "pinfo2", "pdef", "pdoc", "psource",
               "lsmagic", "magic", "quickref", "colors", "page", "pprint", "pwd", "markdown", "latex", "svg", "md"}
MAGIC_OPTS = re.compile(r"^\s*((-[nrp]\s*\d+|-[tcqo]|-[DTsl]\s*\S+|-[rqm]|--breakpoint\s+\S+|-b\s*\S+|"
                        r"--no-std(out|err)|--no-display)\s+)*")
GET_IPYTHON_CODE = {"run_cell", "run_cell_async", "ex", "ev", "run_code", "safe_execfile", "safe_run_module"}
GET_IPYTHON_SHELL = {"system", "system_raw", "system_piped", "getoutput"}
BACKGROUND_CALLS = {"threading.Timer", "_thread.start_new_thread", "_thread.start_new", "atexit.register",
                    "weakref.finalize", "signal.signal", "signal.setitimer", "signal.alarm",
                    "sys.set_asyncgen_hooks", "gc.callbacks.append", "gc.callbacks.insert", "gc.callbacks.extend",
                    "asyncio.get_event_loop().call_later", "asyncio.get_event_loop().call_at"}
JOINABLE_CALLS = {"threading.Thread", "concurrent.futures.ThreadPoolExecutor",
                  "concurrent.futures.ProcessPoolExecutor", "concurrent.futures.thread.ThreadPoolExecutor",
                  "multiprocessing.Process", "multiprocessing.Pool", "multiprocessing.pool.ThreadPool",
                  "torch.multiprocessing.Process", "torch.multiprocessing.Pool"}
MAPPING_MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}
SENSITIVE_NAMES = {"__globals__": "tracing", "__code__": "tracing", "__closure__": "tracing",
                   "f_back": "tracing", "f_locals": "tracing", "f_globals": "tracing", "f_builtins": "tracing",
                   "tb_frame": "tracing", "gi_frame": "tracing", "cr_frame": "tracing",
                   "__subclasses__": "dynamic_code", "__import__": "dynamic_code", "__builtins__": "monkeypatch",
                   "__dict__": "monkeypatch", "__setattr__": "monkeypatch", "__delattr__": "monkeypatch"}
READ_DUNDERS = {"__globals__": "tracing", "__code__": "tracing", "__closure__": "tracing",
                "__subclasses__": "dynamic_code"}

FALLBACK = [
    ("ipython_hook", re.compile(r"get_ipython|\bIPython\b|\.(events|ast_transformers|input_transformers\w*|"
                                r"set_custom_exc|run_cell\w*|showtraceback|set_hook)\b")),
    ("monkeypatch", re.compile(r"\b(np|numpy|math|torch|builtins|solutions_lib|grading|sys|time|random|os)"
                               r"(\.\w+)+\s*=[^=]|\bsetattr\s*\(|\bdelattr\s*\(|__builtins__|\bimport\s+builtins"
                               r"|sys\.modules|\.__\w+__\s*=[^=]|importlib\.reload")),
    ("process_exit", re.compile(r"\b(sys\.exit|os\._exit|os\.kill|os\.abort|quit|exit)\s*\(|SystemExit|\bsignal\.")),
    ("file_access", re.compile(r"os\.chdir|\bshutil\b|\bsqlite3\b|gradebook|nbgrader_config|['\"](/|~|\.\./)"
                               r"|['\"][^'\"]*(source|autograded|submitted)/")),
    ("subprocess", re.compile(r"\bsubprocess\b|os\.(system|popen|fork|exec\w*|spawn\w*)\b|\bpty\b")),
    ("network", re.compile(r"\b(socket|urllib\w*|requests|httpx|aiohttp|ftplib|smtplib|http\.client|paramiko)\b")),
    ("tracing", re.compile(r"set(trace|profile)|addaudithook|_getframe|currentframe|inspect\.stack|\bf_(back|locals"
                           r"|globals)\b|gc\.get_(objects|referrers)")),
    ("dynamic_code", re.compile(r"\b(exec|eval|compile|__import__)\s*\(|import_module|\bctypes\b|\bmarshal\b")),
]


_JSON_TYPES = {"dict": "an object", "list": "an array", "NoneType": "null", "str": "a string", "int": "a number",
               "float": "a number", "bool": "a boolean"}


def _json_type(x) -> str:
    return _JSON_TYPES.get(type(x).__name__, type(x).__name__)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _clean(text, limit: int) -> str:
    """Printable, encodable text: a snippet may hold lone surrogates, terminal escapes or
    bidi controls (it goes to a terminal and to flags.csv)."""
    text = str(text)[: limit * 2].encode("utf-8", "backslashreplace").decode("utf-8")
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return text[:limit]


@dataclass
class Finding:
    cell: str          # grade_id, or "cell <index>" for a cell without one
    line: int          # 1-based line in the cell's source (0: the whole cell or notebook)
    rule: str
    snippet: str

    def __post_init__(self):
        self.cell = _clean(self.cell, 80)
        self.snippet = _clean(self.snippet, 200)
        self.line = int(self.line) if isinstance(self.line, int) else 0

    def __str__(self) -> str:
        return f"{self.cell}:{self.line}: {self.rule}: {self.snippet}"


class CannotAnalyse(Exception):
    """A notebook or a cell the scanner cannot analyse (the message says why)."""


class _OutOfTime(Exception):
    pass


class _Budget:
    def __init__(self, seconds: float | None = None):
        self.seconds = SCAN_SECONDS if seconds is None else seconds
        self.deadline = time.monotonic() + self.seconds
        self.chars = 0

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise _OutOfTime()


def _cannot(cell: str, why: str, line: int = 0) -> Finding:
    return Finding(cell, line, "unreadable", f"cannot analyse: {why}")


# ---------------------------------------------------------------- expressions


def _plain_dotted(node) -> str | None:
    """'a.b.c' for a Name/Attribute chain (no aliases), else None. No recursion."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _literal_str(node, limit: int = 10_000) -> str | None:
    """The value of a string expression built from literals only ('a' + 'b', f'ab'), else None."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            stack += [n.right, n.left]
        elif isinstance(n, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in n.values):
            stack += reversed(n.values)
        else:
            return None
        if len(out) > limit:
            return None
    return "".join(out)


def _dotted(node) -> str | None:
    """'a.b.c' for a Name/Attribute chain; a call in the chain gives 'f().x'."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        inner = _plain_dotted(node.func)
        if inner is None:
            return None
        parts.append(inner + "()")
    else:
        return None
    return ".".join(reversed(parts))


# ---------------------------------------------------------------- notebook-wide state


class _State:
    """What one notebook's cells tell about the names of the others (in cell order)."""

    def __init__(self, aliases: dict[str, str] | None = None, imported: dict[str, str] | None = None):
        self.aliases = dict(DEFAULT_ALIASES if aliases is None else aliases)
        self.imported = dict(imported or {})   # name -> sensitive module/object an import bound it to
        self.written: set[str] = set()          # files written by %%writefile
        self.relied: set[str] | None = None     # names the course's cells read from the kernel (None: all)

    def rebinding_matters(self, name: str) -> bool:
        """Whether binding `name` in a student's cell can change what a course cell sees: an
        imported name some test or locked cell reads without binding it itself first. A test
        cell that imports its own module under a short alias (`import solutions_lib.checks_x
        as ck`) rebinds it when it runs, so a student's variable `ck` changes nothing."""
        return name in self.imported and (self.relied is None or name in self.relied)


def _protected(full: str | None) -> bool:
    if not full or full.startswith(PATCH_ALLOWED):
        return False
    return full.split(".")[0] in PROTECTED


def _import_bindings(tree, st: _State) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    st.aliases[a.asname] = a.name
                    if _protected(a.name):
                        st.imported[a.asname] = a.name
                elif _protected(a.name):
                    st.imported[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                if a.name == "*":
                    continue
                full = f"{node.module}.{a.name}"
                st.aliases[a.asname or a.name] = full
                if _protected(full):
                    st.imported[a.asname or a.name] = full


def relied_names(sources: list[str]) -> set[str] | None:
    """Names the course's cells (`sources`: test and locked cells) read as globals bound elsewhere:
    every name a statement loads that no earlier statement of the same cell imported or assigned
    at its top level. None (every name) when a cell cannot be parsed."""
    relied: set[str] = set()
    for src in sources:
        tree = _try_parse(_prepare(src)[0])
        if tree is None:
            return None
        own: set[str] = set()
        for stmt in tree.body:
            relied |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - own
            for n in ast.walk(stmt):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    own |= {a.asname or a.name.split(".")[0] for a in n.names if a.name != "*"}
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                own |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return relied


def collect_aliases(sources: list[str]) -> dict[str, str]:
    """Names bound by imports in `sources` (all code cells of a notebook), e.g. np -> numpy."""
    st = _State()
    for src in sources:
        tree = _try_parse(_prepare(src)[0])
        if tree is not None:
            _import_bindings(tree, st)
    return st.aliases


def _try_parse(python: str):
    try:
        return ast.parse(python)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None


# ---------------------------------------------------------------- IPython's escapes


def _strip_ipython_cleanup(lines: list[str]) -> list[str]:
    """IPython's cleanup transforms: leading blank lines go, the first line's indent is
    removed from every line, `>>> ` and `In [1]: ` prompts are removed."""
    k = 0
    while k < len(lines) and not lines[k].strip():
        k += 1
    lines = [""] * k + lines[k:]  # keep line numbers
    if k == len(lines):
        return lines
    indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
    if indent:
        lines = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines]
    for prompt, initial in PROMPTS:  # IPython's classic_prompt and ipython_prompt strippers
        nxt = next((ln for ln in lines[k + 1:] if ln.strip()), "")
        if initial.match(lines[k]) or prompt.match(nxt):
            lines = [prompt.sub("", ln, count=1) for ln in lines]
    return lines


def _autocall(esc: str, fn: str, rest: str) -> str:
    if esc == "/":
        return f"{fn}({', '.join(rest.split())})"
    if esc == ",":
        return f"{fn}({', '.join(repr(a) for a in rest.split())})"
    return f"{fn}({rest!r})"


def _magic_code(rest: str) -> str:
    return MAGIC_OPTS.sub("", rest, count=1).strip()


def _prepare(src: str):
    """(python, findings, nested) for one cell's source: python is the source with magic and
    shell lines blanked (line numbers kept) and autocall lines rewritten; findings are
    (line, rule, text) for those lines; nested is [(code, line offset)] of Python found inside
    magics, to be analysed in turn. A cell magic makes the whole cell non-Python (its body is
    in nested when it runs Python)."""
    lines = _strip_ipython_cleanup(src.split("\n"))
    found, nested = [], []
    k = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if k is None:
        return "", found, nested
    m = CELL_MAGIC.match(lines[k])
    if m:
        name, arg = m.group(1), m.group(2).strip()
        n, text, body = k + 1, lines[k].strip(), "\n".join(lines[k + 1:])
        words = arg.split()
        if name in PY_MAGICS:
            if name == "timeit" and _magic_code(arg):
                nested.append((_magic_code(arg), k))
            nested.append((body, k + 1))
        elif name in ("python", "python2", "python3", "pypy") or (
                name == "script" and words and PY_SCRIPT.match(words[0])):
            found.append((n, "subprocess", text))
            nested.append((body, k + 1))
        elif name == "writefile":
            target = next((w for w in reversed(words) if not w.startswith("-")), "")
            found.append((n, "file_access", text))
            if target:
                found.append((n, "_written", os.path.basename(target.strip("'\""))))
            if target.endswith((".py", ".ipy", ".pyw")) or not target:
                nested.append((body, k + 1))
        elif name == "!":
            found.append((n, "subprocess", text))
        elif name in MAGIC_RULES:
            found.append((n, MAGIC_RULES[name], text))
        elif name not in SAFE_MAGICS:
            found.append((n, "ipython_hook", f"{text}  (unknown cell magic: its body is not analysed)"))
        return "", found, nested
    out = []
    for i, line in enumerate(lines):
        n = i + 1
        indent = line[: len(line) - len(line.lstrip())]
        m = LINE_MAGIC.match(line)
        e = ESCAPE.match(line)
        if SHELL.match(line):
            found.append((n, "subprocess", line.strip()))
        elif m:
            name, rest = m.group(2), m.group(3)
            if name in PY_MAGICS and m.group(1) == "%":
                if _magic_code(rest):
                    nested.append((_magic_code(rest), i))
            elif name == "run":
                words = [w.strip("'\"") for w in rest.split() if not w.startswith("-")]
                found.append((n, "_run", os.path.basename(words[0]) if words else ""))
            elif name in MAGIC_RULES:
                found.append((n, MAGIC_RULES[name], line.strip()))
            elif name not in SAFE_MAGICS:
                found.append((n, "ipython_hook", f"{line.strip()}  (unknown magic)"))
        elif e:
            out.append(e.group(1) + _autocall(e.group(2), e.group(3), e.group(4)))
            continue
        else:
            out.append(line)
            continue
        out.append(indent + "pass")
    return "\n".join(out), found, nested


# ---------------------------------------------------------------- the AST walk


class _Visitor:
    """Walks a cell's tree without recursion (an 800-term expression or a deeply nested list
    is fine), in source order, updating the notebook's aliases as assignments go."""

    def __init__(self, st: _State, budget: _Budget, tmp_names: set[str] | None = None):
        self.st = st
        self.aliases = st.aliases
        self.budget = budget
        self.tmp = set(tmp_names or ())
        self.hits: list[tuple[int, str]] = []
        self.nested: list[tuple[str, int]] = []   # (code, line) of literal code run by exec & co
        self.given: list[set[str]] = []
        self.joins = False
        self.with_calls: set[int] = set()
        self.scopes: list[set[str]] = []   # names declared `global` in each enclosing function/class

    def run(self, tree) -> None:
        for n in ast.walk(tree):  # iterative; what the whole cell does with threads
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("join", "shutdown"):
                self.joins = True
            elif isinstance(n, (ast.With, ast.AsyncWith)):
                self.with_calls.update(id(i.context_expr) for i in n.items)
        stack = [(tree, False)]
        count = 0
        while stack:
            node, leave = stack.pop()
            if leave:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.given.pop()
                self.scopes.pop()
                continue
            count += 1
            if count % 256 == 0:
                self.budget.check()
            visit = getattr(self, "visit_" + type(node).__name__, None)
            if visit is not None:
                visit(node)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                self.scopes.append(set())
                stack.append((node, True))
            stack.extend((c, False) for c in reversed(list(ast.iter_child_nodes(node))))

    def hit(self, node, rule):
        self.hits.append((getattr(node, "lineno", 1), rule))

    # names
    def resolve(self, name: str | None) -> str | None:
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def name_of(self, node, depth: int = 0) -> str | None:
        """The dotted name an expression stands for, through aliases and the dynamic forms:
        np.linalg -> numpy.linalg, sys.modules['x'] -> x, __import__('x', fromlist=[...]) -> x,
        importlib.import_module('x') -> x, getattr(m, 'a') -> m.a, vars(m) -> m.__dict__."""
        if depth > 4:
            return None
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        base = None
        if isinstance(node, ast.NamedExpr):  # (m := np).allclose
            inner = self.name_of(node.value, depth + 1)
            return ".".join([inner] + list(reversed(parts))) if inner else None
        if isinstance(node, ast.Name):
            base = self.aliases.get(node.id, node.id)
        elif isinstance(node, ast.Subscript):
            key = _literal_str(node.slice)
            if key and self.name_of(node.value, depth + 1) == "sys.modules":
                base = key
        elif isinstance(node, ast.Call):
            fn = self.resolve(_plain_dotted(node.func))
            arg0 = node.args[0] if node.args else None
            lit = _literal_str(arg0) if arg0 is not None else None
            if fn in ("__import__", "builtins.__import__", "importlib.__import__") and lit:
                fromlist = next((k.value for k in node.keywords if k.arg == "fromlist"),
                                node.args[3] if len(node.args) > 3 else None)
                has_from = fromlist is not None and not (isinstance(fromlist, (ast.List, ast.Tuple))
                                                         and not fromlist.elts)
                base = lit if has_from else lit.split(".")[0]
            elif fn == "importlib.import_module" and lit:
                base = lit
            elif fn in ("sys.modules.get", "sys.modules.setdefault", "sys.modules.pop") and lit:
                base = lit
            elif fn in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                attr = _literal_str(node.args[1])
                inner = self.name_of(node.args[0], depth + 1)
                base = f"{inner}.{attr}" if inner and attr else None
            elif fn in ("vars", "builtins.vars") and arg0 is not None:
                inner = self.name_of(arg0, depth + 1)
                base = f"{inner}.__dict__" if _protected(inner) or inner == "__builtins__" else None
            elif fn in ("globals", "builtins.globals"):
                base = "globals()"
            elif fn is not None:
                base = fn + "()"
        if base is None:
            return None
        return ".".join([base] + list(reversed(parts)))

    def _module_mapping(self, name: str | None) -> bool:
        """A mapping whose items are a module's names (or the modules themselves)."""
        if not name:
            return False
        return name in ("sys.modules", "globals()", "builtins.__dict__", "__builtins__") or name.endswith(".__dict__")

    # imports
    def visit_Import(self, node):
        for a in node.names:
            rule = MODULE_RULES.get(a.name.split(".")[0])
            if rule:
                self.hit(node, rule)
            bound = a.asname or a.name.split(".")[0]
            if self.st.rebinding_matters(bound) and not _protected(a.name):
                self.hit(node, "monkeypatch")  # import fake as np

    def visit_ImportFrom(self, node):
        mod = node.module or ""
        rule = MODULE_RULES.get(mod.split(".")[0])
        if rule:
            self.hit(node, rule)
        for a in node.names:
            full = f"{mod}.{a.name}"
            if full in EXIT_CALLS:
                self.hit(node, "process_exit")
            elif full in SUBPROCESS_CALLS or full.startswith(SUBPROCESS_PREFIXES):
                self.hit(node, "subprocess")
            elif full in TRACE_CALLS:
                self.hit(node, "tracing")
            elif full in FILE_CALLS:
                self.hit(node, "file_access")
            elif a.name == "*" and mod.split(".")[0] in ("os", "sys", "builtins"):
                self.hit(node, "monkeypatch")
            bound = a.asname or a.name
            if self.st.rebinding_matters(bound) and not _protected(full) and a.name != "*":
                self.hit(node, "monkeypatch")  # from fake import expect_close

    # stores
    def _store_target(self, t, node):
        stack = [t]
        while stack:
            t = stack.pop()
            if isinstance(t, (ast.Tuple, ast.List)):
                stack += t.elts
            elif isinstance(t, ast.Starred):
                stack.append(t.value)
            elif isinstance(t, ast.Attribute):
                full = self.name_of(t)
                if t.attr.startswith("__") and t.attr.endswith("__"):
                    self.hit(node, "monkeypatch")
                elif _protected(full) and full.count(".") >= 1:
                    self.hit(node, "monkeypatch")
                elif t.attr in HOOK_ATTRS and "get_ipython" in (full or ""):
                    self.hit(node, "ipython_hook")
            elif isinstance(t, ast.Subscript):
                if self._module_mapping(self.name_of(t.value)):
                    self.hit(node, "monkeypatch")
            elif isinstance(t, ast.Name):
                if t.id == "__builtins__" or (self.st.rebinding_matters(t.id) and self._global(t.id)):
                    self.hit(node, "monkeypatch")  # rebinds np, expect_close, ... for later cells

    def _global(self, name: str) -> bool:
        """Whether binding `name` here binds the cell's global (not a local or class attribute)."""
        return not self.scopes or name in self.scopes[-1]

    def visit_Global(self, node):
        if self.scopes:
            self.scopes[-1].update(node.names)

    def _bind(self, target, value):
        """g = <sensitive module>: g is that module from now on (a, b = x, y pairwise)."""
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                if isinstance(t, ast.Name):
                    self._bind(t, v)
            return
        if not isinstance(target, ast.Name):
            return
        full = self.name_of(value) if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) else None
        if full == "get_ipython()" or (full and "()" not in full and (_protected(full) or self._module_mapping(full))):
            self.aliases[target.id] = full
        elif target.id in self.aliases and target.id not in DEFAULT_ALIASES:
            self.aliases.pop(target.id)

    def visit_Assign(self, node):
        for t in node.targets:
            self._store_target(t, node)
        self._note_tmp(node)
        for t in node.targets:
            self._bind(t, node.value)
        if self.given and all(isinstance(t, ast.Name) for t in node.targets) and self._caller_given(node.value):
            self.given[-1].update(t.id for t in node.targets)

    def visit_NamedExpr(self, node):
        self._bind(node.target, node.value)

    def visit_AugAssign(self, node):
        self._store_target(node.target, node)

    def visit_AnnAssign(self, node):
        self._store_target(node.target, node)
        if node.value is not None:
            self._bind(node.target, node.value)

    def visit_Delete(self, node):
        for t in node.targets:
            self._store_target(t, node)

    def visit_For(self, node):
        self._store_target(node.target, node)

    visit_AsyncFor = visit_For

    # a function that deletes or copies the path its caller gave it (a checkpoint folder)
    # is allowed to: `shutil.rmtree(path)` with `path` a parameter (or built from one)
    def visit_FunctionDef(self, node):
        if self.st.rebinding_matters(node.name) and self._global(node.name):
            self.hit(node, "monkeypatch")  # def expect_close(...): replaces the imported one
        a = node.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        self.given.append(params - {"self", "cls"})

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        if self.st.rebinding_matters(node.name) and self._global(node.name):
            self.hit(node, "monkeypatch")
        for b in node.bases:
            full = self.name_of(b)
            if full in JOINABLE_CALLS and not (self.given and self.joins):
                self.hit(node, "background")

    def _caller_given(self, expr) -> bool:
        allowed = set(self.tmp).union(*self.given) if self.given else set(self.tmp)
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id not in allowed and n.id not in ("str", "os", "Path", "pathlib"):
                return False
            if isinstance(n, ast.Call) and (self.resolve(_dotted(n.func)) or "") not in SAFE_PATH_CALLS:
                return False
            if isinstance(n, ast.Constant) and self._is_path_const(n):
                return False
        return True

    def _note_tmp(self, node):
        # names bound to a temporary directory: paths built from them are allowed
        src = self.resolve(_dotted(node.value.func)) if isinstance(node.value, ast.Call) else None
        if src and src.startswith("tempfile."):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.tmp.add(t.id)

    def visit_With(self, node):
        for item in node.items:
            ctx = item.context_expr
            if isinstance(ctx, ast.Call) and (self.resolve(_dotted(ctx.func)) or "").startswith("tempfile.") \
                    and isinstance(item.optional_vars, ast.Name):
                self.tmp.add(item.optional_vars.id)
            elif item.optional_vars is not None:
                self._bind(item.optional_vars, ctx)

    visit_AsyncWith = visit_With

    # references
    def visit_Name(self, node):
        if node.id in ("get_ipython", "__IPYTHON__"):
            self.hit(node, "ipython_hook")
        elif node.id == "__builtins__":
            self.hit(node, "monkeypatch")

    def visit_Attribute(self, node):
        if node.attr in FRAME_ATTRS:
            self.hit(node, "tracing")
        elif isinstance(node.ctx, ast.Load) and node.attr in READ_DUNDERS:
            self.hit(node, READ_DUNDERS[node.attr])
        elif node.attr == "__dict__" and _protected(self.name_of(node.value)):
            self.hit(node, "monkeypatch")

    def visit_Raise(self, node):
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if exc is not None and self.resolve(_dotted(exc)) in EXIT_EXC | {f"builtins.{e}" for e in EXIT_EXC}:
            self.hit(node, "process_exit")

    def _is_path_const(self, arg) -> bool:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, (str, bytes)):
            s = arg.value.decode("utf-8", "replace") if isinstance(arg.value, bytes) else arg.value
            return bool(ABSOLUTE.match(s) or DOTDOT.search(s) or SENSITIVE_STR.search(s))
        if isinstance(arg, ast.JoinedStr):
            parts = [v.value for v in arg.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            first = arg.values[0] if arg.values else None
            starts_abs = isinstance(first, ast.Constant) and isinstance(first.value, str) and ABSOLUTE.match(first.value)
            return bool(starts_abs or any(DOTDOT.search(p) or SENSITIVE_STR.search(p) for p in parts))
        return False

    def visit_Constant(self, node):
        if isinstance(node.value, str):
            if re.search(r"gradebook|nbgrader_config", node.value):
                self.hit(node, "file_access")
            rule = SENSITIVE_NAMES.get(node.value)
            if rule:
                self.hit(node, rule)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.Div) and self._is_path_const(node.right) and \
                not (isinstance(node.left, ast.Name) and node.left.id in self.tmp):
            self.hit(node, "file_access")

    def _literal_code(self, node, line) -> None:
        code = _literal_str(node, limit=MAX_CELL_CHARS) if node is not None else None
        if code:
            self.nested.append((code, line))

    def visit_Call(self, node):
        raw = _dotted(node.func)
        full = self.name_of(node.func) or self.resolve(raw)
        args = node.args
        line = getattr(node, "lineno", 1)
        ip = full if full and full.startswith("get_ipython().") else raw if raw and "get_ipython()." in raw else None
        if ip:
            meth = ip.rsplit(".", 1)[-1]
            if meth in GET_IPYTHON_CODE and args:
                self._literal_code(args[0], line)
            elif meth in ("run_line_magic", "magic", "run_cell_magic") and args:
                name = _literal_str(args[0])
                rest = _literal_str(args[1]) if len(args) > 1 else ""
                if meth == "run_cell_magic" and name is not None:
                    body = _literal_str(args[2]) if len(args) > 2 else ""
                    self.nested.append((f"%%{name} {rest or ''}\n{body or ''}", line))
                elif name is not None:
                    self.nested.append((f"%{name.lstrip('%')} {rest or ''}".rstrip(), line))
            elif meth in GET_IPYTHON_SHELL:
                self.hit(node, "subprocess")
        elif full:
            if full in EXIT_CALLS or full.startswith("signal."):
                self.hit(node, "process_exit")
            elif full in SUBPROCESS_CALLS or full.startswith(SUBPROCESS_PREFIXES):
                self.hit(node, "subprocess")
            elif full in TRACE_CALLS:
                self.hit(node, "tracing")
            elif full in DYNAMIC_CALLS:
                self.hit(node, "dynamic_code")
                if full.rsplit(".", 1)[-1] in ("exec", "eval", "compile") and args:
                    self._literal_code(args[0], line)
                mod = _literal_str(args[0]) if args and "import" in full else None
                if mod and MODULE_RULES.get(mod.split(".")[0]):
                    self.hit(node, MODULE_RULES[mod.split(".")[0]])
            elif full in FILE_CALLS or full.startswith("sqlite3."):
                self.hit(node, "file_access")
            elif full.startswith("shutil.") and not all(self._caller_given(a) for a in args[:2]):
                self.hit(node, "file_access")
            elif full in ("importlib.reload", "imp.reload"):
                self.hit(node, "monkeypatch")
            elif full in ("vars", "builtins.vars") and args and _protected(self.name_of(args[0])):
                self.hit(node, "monkeypatch")
            elif full == "functools.update_wrapper" and args and _protected(self.name_of(args[0])):
                self.hit(node, "monkeypatch")
            if full in BACKGROUND_CALLS or full.startswith("gc.callbacks."):
                self.hit(node, "background")
            elif full in JOINABLE_CALLS and not (self.given and (self.joins or id(node) in self.with_calls)):
                self.hit(node, "background")  # runs beside the test cells unless its function joins it
        # getattr & co: a literal name is an attribute access, a computed one on a module is flagged
        if full in ("getattr", "setattr", "delattr", "hasattr", "builtins.getattr", "builtins.setattr",
                    "builtins.delattr", "object.__getattribute__", "object.__setattr__", "object.__delattr__",
                    "type.__setattr__") and len(args) >= 2:
            target = self.name_of(args[0])
            attr = _literal_str(args[1])
            writes = full.endswith(("setattr", "delattr", "__setattr__", "__delattr__"))
            if writes and (_protected(target) or _dotted(args[0]) == "get_ipython()"):
                self.hit(node, "monkeypatch")
            elif writes and attr and attr.startswith("__") and attr.endswith("__"):
                self.hit(node, "monkeypatch")
            elif _protected(target) and not isinstance(args[1], ast.Constant):
                self.hit(node, "dynamic_code")  # getattr(g, name), getattr(g, "expect_" + "close")
            if attr in FRAME_ATTRS or attr in READ_DUNDERS:
                self.hit(node, SENSITIVE_NAMES.get(attr, "tracing"))
        if isinstance(node.func, ast.Attribute):
            attr, recv = node.func.attr, self.name_of(node.func.value)
            if attr in ("__setattr__", "__delattr__") and (
                    _protected(recv) or (args and _protected(self.name_of(args[0])))):
                self.hit(node, "monkeypatch")
            elif attr in MAPPING_MUTATORS and self._module_mapping(recv):
                self.hit(node, "monkeypatch")
        if any(self._is_path_const(a) for a in list(args) + [k.value for k in node.keywords]):
            self.hit(node, "file_access")


# ---------------------------------------------------------------- one cell


def _fallback(python: str, line0: int, lines: list[str]):
    """(line, rule) from the regular expressions, line by line; a long line is searched in
    overlapping chunks so that no expression sees more than MAX_LINE_CHARS at once."""
    out = []
    for n, line in enumerate(python.split("\n"), 1):
        step = MAX_LINE_CHARS
        chunks = [line] if len(line) <= step else [line[i:i + step + 200] for i in range(0, len(line), step)]
        for rule, pat in FALLBACK:
            if any(pat.search(c) for c in chunks):
                out.append((n, rule))
    return out


def _scan_code(source: str, cell: str, st: _State, budget: _Budget, line0: int = 0, depth: int = 0) -> list[Finding]:
    """Findings in one piece of code (a cell, a magic's body, an exec'd string)."""
    budget.check()
    if depth > MAX_NESTED:
        return [_cannot(cell, f"code nested in magics or strings more than {MAX_NESTED} deep", line0 + 1)]
    budget.chars += len(source)
    if budget.chars > MAX_CODE_CHARS:
        raise CannotAnalyse(f"more than {MAX_CODE_CHARS} characters of code")
    lines = source.split("\n")

    def snip(n: int) -> str:
        return lines[n - 1].strip()[:120] if 0 < n <= len(lines) else ""

    python, magic, nested = _prepare(source)
    findings = []
    for n, rule, text in magic:
        if rule == "_written":
            st.written.add(text)
        elif rule == "_run":
            note = f"  (runs {text}, written by %%writefile in this notebook)" if text in st.written else ""
            findings.append(Finding(cell, line0 + n, "file_access", snip(n)[:120] + note))
        else:
            findings.append(Finding(cell, line0 + n, rule, text[:120]))
    problem = None
    try:
        tree = ast.parse(python)
    except SyntaxError as e:
        tree = None
        if "null bytes" in str(e):
            problem = "the code holds a NUL byte"
        elif "too many nested" in str(e) or "too complex" in str(e):
            problem = f"the code is nested too deeply for Python's parser ({e.msg})"
    except RecursionError:
        tree, problem = None, "the code is nested too deeply for Python's parser"
    except MemoryError:
        tree, problem = None, "the parser ran out of memory"
    except (ValueError, UnicodeError, OverflowError) as e:
        tree, problem = None, f"{type(e).__name__}: {e}"
    if tree is None:
        if problem:
            findings.append(_cannot(cell, f"{problem}; checked with regular expressions only", line0 + 1))
        words = [ln.strip() for ln in python.split("\n") if ln.strip()]
        first = words[0].split()[0] if len(words) == 1 and words[0].split() else ""
        if first.isidentifier() and (first in MAGIC_RULES or first in PY_MAGICS):
            # a one-line cell that IPython's automagic runs as %<line>
            findings += _scan_code("%" + words[0], cell, st, budget, line0, depth + 1)
        findings += [Finding(cell, line0 + n, rule, snip(n)) for n, rule in _fallback(python, line0, lines)]
    else:
        v = _Visitor(st, budget)
        v.run(tree)
        findings += [Finding(cell, line0 + n, rule, snip(n)) for n, rule in v.hits]
        nested += [(code, n - 1) for code, n in v.nested]
    for code, offset in nested:
        findings += _scan_code(code, cell, st, budget, line0 + offset, depth + 1)
    return findings


def scan_source(source: str, cell: str, aliases: dict[str, str] | None = None,
                budget: _Budget | None = None) -> list[Finding]:
    """Findings in one code cell's source (never raises: what cannot be analysed is a finding)."""
    st = _State(aliases if aliases is not None else collect_aliases([source]))
    if aliases is None:
        tree = _try_parse(_prepare(source)[0])
        if tree is not None:
            _import_bindings(tree, st)
    return _dedupe(_scan_cell(source, cell, st, budget or _Budget()))


def _scan_cell(source: str, cell: str, st: _State, budget: _Budget) -> list[Finding]:
    if len(source) > MAX_CELL_CHARS:
        return [_cannot(cell, f"the cell holds {len(source)} characters (limit {MAX_CELL_CHARS})")]
    try:
        return _scan_code(source, cell, st, budget)
    except (CannotAnalyse, _OutOfTime):
        raise
    except RecursionError:
        return [_cannot(cell, "the code is nested too deeply")]
    except Exception as e:  # noqa: BLE001  (a scanner bug must not hide the rest of the class)
        return [_cannot(cell, f"{type(e).__name__}: {e}")]


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.cell, f.line, f.rule)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return sorted(out, key=lambda f: (f.line, f.rule))


# ---------------------------------------------------------------- notebooks


@dataclass
class _Cell:
    kind: str
    source: str | None
    md: dict
    label: str
    problem: str | None = None


def _cell_view(cell, index: int) -> _Cell:
    """What the scanner needs from one cell, read defensively (any JSON may be there)."""
    if not isinstance(cell, dict):
        return _Cell("?", None, {}, f"cell {index}", f"the cell is {_json_type(cell)}, not an object")
    meta = cell.get("metadata", {})
    problem = None
    if not isinstance(meta, dict):
        meta, problem = {}, "its metadata is not an object"
    md = meta.get("nbgrader", {}) or {}
    if not isinstance(md, dict):
        md, problem = {}, "its nbgrader metadata is not an object"
    gid = md.get("grade_id")
    label = (gid if isinstance(gid, str) else repr(gid)) if gid else f"cell {index}"
    kind = cell.get("cell_type")
    if not isinstance(kind, str):
        return _Cell("?", None, md, label, f"its cell_type is {_json_type(kind)}")
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(x, str) for x in src):
        src = "".join(src)
    if not isinstance(src, str):
        return _Cell(kind, None, md, label, f"its source is {_json_type(src)}, not text")
    return _Cell(kind, src, md, label, problem)


def _course_cell(md: dict) -> bool:
    """A cell the course wrote and nbgrader restores at grading time (a test or locked cell)."""
    return bool(md.get("locked") or md.get("grade")) and not md.get("solution")


def _cells_of(nb) -> list:
    cells = nb.get("cells") if isinstance(nb, dict) else getattr(nb, "cells", None)
    if not isinstance(cells, list):
        raise CannotAnalyse(f"'cells' is {_json_type(cells)}, not a list")
    return cells


def scan_notebook(nb, release=None, budget: _Budget | None = None) -> list[Finding]:
    """Findings in the cells of `nb` a student can change (never raises: a notebook or cell
    that cannot be analysed gives an `unreadable` finding, and the rest is scanned).

    Without `release`: answer cells and every code cell that is neither locked nor a test.
    With `release` (the released notebook): answer cells, and every other cell whose source
    is not in the release; an edited locked or test cell is also flagged `edited_locked_cell`.
    """
    budget = budget or _Budget()
    findings: list[Finding] = []
    try:
        raw_cells = _cells_of(nb)
        if len(raw_cells) > MAX_CELLS:
            findings.append(_cannot("notebook", f"{len(raw_cells)} cells; only the first {MAX_CELLS} analysed"))
        views = [_cell_view(c, i) for i, c in enumerate(raw_cells[:MAX_CELLS])]
        rel_by_id, rel_sources = {}, set()
        if release is not None:
            for i, c in enumerate(_cells_of(release)):
                rv = _cell_view(c, i)
                if rv.source is not None:
                    rel_sources.add(rv.source)
                    if rv.md.get("grade_id") and isinstance(rv.md.get("grade_id"), str):
                        rel_by_id[rv.md["grade_id"]] = rv
        st = _State()
        course_cells = [_cell_view(c, i) for i, c in enumerate(_cells_of(release))] if release is not None else views
        course_sources = [v.source for v in course_cells if v.kind == "code" and v.source is not None
                          and len(v.source) <= MAX_CELL_CHARS and _course_cell(v.md)]
        st.relied = relied_names(course_sources) if course_sources else None
        for v in views:  # imports anywhere in the notebook bind their names everywhere
            budget.check()
            if v.kind == "code" and v.source and len(v.source) <= MAX_CELL_CHARS and "import" in v.source:
                tree = _try_parse(_prepare(v.source)[0])
                if tree is not None:
                    _import_bindings(tree, st)
        for i, v in enumerate(views):
            budget.check()
            if v.problem:
                findings.append(_cannot(v.label, v.problem))
            if v.source is None:
                continue
            protected = bool(v.md.get("locked") or v.md.get("grade")) and not v.md.get("solution")
            scan = True
            if release is not None and protected:
                orig = rel_by_id.get(v.md.get("grade_id")) if isinstance(v.md.get("grade_id"), str) else None
                if orig is not None and orig.source != v.source:
                    findings.append(Finding(v.label, 1, "edited_locked_cell",
                                            "differs from the release (nbgrader restores it at grading time)"))
                elif orig is not None:
                    scan = False
            elif release is not None and not v.md.get("solution") and v.source in rel_sources:
                scan = False
            elif release is None and protected:
                scan = False
            if v.kind != "code":
                continue
            if scan:
                findings += _dedupe(_scan_cell(v.source, v.label, st, budget))
            elif len(v.source) <= MAX_CELL_CHARS:  # course code: only its aliases matter
                tree = _try_parse(_prepare(v.source)[0])
                if tree is not None:
                    _Visitor(st, budget).run(tree)
    except CannotAnalyse as e:
        findings.append(_cannot("notebook", f"{e}; the rest of the notebook is not analysed"))
    except _OutOfTime:
        findings.append(_cannot("notebook", f"the scan took over {budget.seconds:g} s; the rest of the notebook "
                                            "is not analysed"))
    except RecursionError:
        findings.append(_cannot("notebook", "nested too deeply"))
    except Exception as e:  # noqa: BLE001
        findings.append(_cannot("notebook", f"{type(e).__name__}: {e}"))
    return findings


def read_notebook(path: Path) -> dict:
    """The notebook at `path` as nbformat 4 JSON (a dict), read within the limits; raises
    CannotAnalyse saying why not. A link, FIFO or device is never opened for reading."""
    from .intake import intake_problem

    why = intake_problem(path, max_bytes=MAX_FILE_BYTES)
    if why:
        raise CannotAnalyse(f"the file {why}")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CannotAnalyse("the file is a symbolic link") from None
        raise CannotAnalyse(f"the file cannot be opened ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CannotAnalyse("not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise CannotAnalyse(f"the file is {st.st_size / 2**20:.1f} MB (limit {MAX_FILE_BYTES / 2**20:g} MB)")
        chunks, total = [], 0
        while total <= MAX_FILE_BYTES:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
            total += len(b)
        if total > MAX_FILE_BYTES:
            raise CannotAnalyse(f"the file grew over {MAX_FILE_BYTES / 2**20:g} MB while read")
    finally:
        os.close(fd)
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as e:
        raise CannotAnalyse(f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        raw = json.loads(text)
    except RecursionError:
        raise CannotAnalyse("JSON nested too deeply") from None
    except ValueError as e:
        raise CannotAnalyse(f"not JSON ({str(e)[:80]})") from None
    if not isinstance(raw, dict):
        raise CannotAnalyse(f"JSON but not a notebook ({_json_type(raw)})")
    major = raw.get("nbformat")
    if type(major) is not int:
        raise CannotAnalyse(f"JSON but not a notebook (nbformat is {_clean(repr(major), 40)})")
    if major == 4:
        return raw
    if major in (1, 2, 3):
        try:
            return nbformat.reads(text, as_version=4)
        except Exception as e:  # noqa: BLE001
            raise CannotAnalyse(f"nbformat {major} notebook that cannot be converted ({type(e).__name__}: {e})") \
                from None
    raise CannotAnalyse(f"nbformat {major} is not supported")


def release_for(path: Path, root: Path | None = None):
    """The released notebook matching a submission at .../<assignment>/<name>.ipynb, if any."""
    from .paths import course_root

    path = Path(path)
    root = Path(root or course_root())
    rel = root / "release" / path.parent.name / path.name
    return nbformat.read(rel, as_version=4) if rel.exists() else None


def scan_file(path: Path, root: Path | None = None, seconds: float | None = None) -> list[Finding]:
    """Findings in a notebook file (compared with its release when the course has one).
    Never raises: a file that cannot be analysed gives one `unreadable` finding."""
    path = Path(path)
    budget = _Budget(seconds)
    try:
        nb = read_notebook(path)
    except CannotAnalyse as e:
        return [_cannot("notebook", str(e))]
    except RecursionError:
        return [_cannot("notebook", "nested too deeply")]
    except Exception as e:  # noqa: BLE001  (MemoryError, OSError, ...: reported, not raised)
        return [_cannot("notebook", f"{type(e).__name__}: {e}")]
    try:
        release = release_for(path, root)
    except Exception:  # noqa: BLE001
        release = None
    return scan_notebook(nb, release, budget)


def _printable(path) -> str:
    return _clean(str(path), 4096)


def main(paths: list[str], as_json: bool = False) -> int:
    """`python -m solutions_lib scan PATH...`: print findings; exit 1 when any, else 0."""
    files = []
    for p in map(Path, paths):
        if p.is_dir() and not p.is_symlink():
            for dirpath, dirnames, filenames in os.walk(p):  # never follows links to folders
                dirnames[:] = sorted(d for d in dirnames if d != ".ipynb_checkpoints")
                files += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".ipynb")]
        else:
            files.append(p)
    result = {}
    for f in files:
        try:
            result[_printable(f)] = scan_file(f)
        except Exception as e:  # noqa: BLE001  (never: scan_file reports; one notebook never stops the rest)
            result[_printable(f)] = [_cannot("notebook", f"{type(e).__name__}: {e}")]
    if as_json:
        print(json.dumps({k: [asdict(x) for x in v] for k, v in result.items()}, indent=1))
    else:
        for f, found in result.items():
            for x in found:
                print(f"{f}: {x}")
        n = sum(map(len, result.values()))
        print(f"{n} finding(s) in {len(files)} notebook(s)" + ("; review them by hand" if n else ""))
    return 1 if any(result.values()) else 0
