"""Submission scanner: flag code in a submitted notebook that deserves a human look.

A static scan (the code is never run) of the cells a student can change: answer cells, cells
the student added, and, given the released notebook, any other cell whose source differs
from the release (an edited locked or test cell is flagged as such: nbgrader puts the
original back at grading time, but the attempt is worth a look). Each code cell is parsed
with `ast` (IPython magics and shell escapes are checked line by line first); a cell that
does not parse is checked with regular expressions instead.

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
  `gc.get_referrers`);
- `dynamic_code`: `exec`, `eval`, `compile`, `__import__`, `importlib.import_module`,
  `ctypes`, `marshal`, `pickle` loads;
- `edited_locked_cell` (with the release only): a locked or test cell that differs.

Writing under a temporary directory (`tempfile`), relative paths inside the notebook's
folder, `torch.distributed` (the lab's gloo ranks, through `solutions_lib.dist.launch`) and
`torch.backends.*` settings are allowed. This is a review aid, not a sandbox: see README.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import nbformat

from . import notebooks as nbs

RULES = ("ipython_hook", "monkeypatch", "process_exit", "file_access", "subprocess", "network",
         "tracing", "dynamic_code", "edited_locked_cell", "unreadable")

PROTECTED = {"numpy", "math", "torch", "builtins", "solutions_lib", "sys", "time", "random", "os",
             "operator", "functools", "inspect", "importlib", "gc", "traceback", "IPython", "nbformat",
             "cmath", "statistics", "decimal", "fractions", "warnings", "unittest", "pytest"}
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
               "gc.get_referents", "sys.monitoring.register_callback", "sys.monitoring.use_tool_id"}
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

LINE_MAGIC = re.compile(r"^\s*(%{1,2})(\w+)")
SHELL = re.compile(r"^\s*(\w+\s*=\s*)?!")
MAGIC_RULES = {"bash": "subprocess", "sh": "subprocess", "script": "subprocess", "system": "subprocess",
               "sx": "subprocess", "perl": "subprocess", "ruby": "subprocess", "python": "subprocess",
               "python3": "subprocess", "pypy": "subprocess", "js": "subprocess", "javascript": "subprocess",
               "html": "subprocess", "run": "file_access", "load": "file_access", "writefile": "file_access",
               "cd": "file_access", "pushd": "file_access", "bookmark": "file_access", "env": "file_access",
               "load_ext": "ipython_hook", "reload_ext": "ipython_hook", "autoreload": "ipython_hook",
               "alias": "subprocess", "rerun": "ipython_hook", "macro": "ipython_hook", "store": "file_access",
               "config": "ipython_hook", "xmode": "ipython_hook", "capture": "ipython_hook"}

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


@dataclass
class Finding:
    cell: str          # grade_id, or "cell <index>" for a cell without one
    line: int          # 1-based line in the cell's source
    rule: str
    snippet: str

    def __str__(self) -> str:
        return f"{self.cell}:{self.line}: {self.rule}: {self.snippet}"


# ---------------------------------------------------------------- one cell


def _dotted(node) -> str | None:
    """'a.b.c' for a Name/Attribute chain; 'f().x' style chains give 'f().x'."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        inner = _dotted(node.func)
        if inner is None:
            return None
        parts.append(inner + "()")
    else:
        return None
    return ".".join(reversed(parts))


def collect_aliases(sources: list[str]) -> dict[str, str]:
    """Names bound by imports in `sources` (all code cells of a notebook), e.g. np -> numpy."""
    aliases = dict(DEFAULT_ALIASES)
    for src in sources:
        try:
            tree = ast.parse(_python_only(src)[0])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        aliases[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _python_only(src: str) -> tuple[str, list[tuple[int, str, str]]]:
    """The source with magic and shell lines blanked (so `ast` can parse it), and the
    findings those lines give. A cell magic makes the whole cell non-Python."""
    found, lines = [], src.split("\n")
    if lines and (m := LINE_MAGIC.match(lines[0])) and m.group(1) == "%%":
        rule = MAGIC_RULES.get(m.group(2))
        if rule:
            found.append((1, rule, lines[0].strip()))
        return "", found
    out = []
    for i, line in enumerate(lines, 1):
        m = LINE_MAGIC.match(line)
        if SHELL.match(line):
            found.append((i, "subprocess", line.strip()))
        elif m:
            rule = MAGIC_RULES.get(m.group(2))
            if rule:
                found.append((i, rule, line.strip()))
        else:
            out.append(line)
            continue
        out.append(line[: len(line) - len(line.lstrip())] + "pass")
    return "\n".join(out), found


class _Visitor(ast.NodeVisitor):
    def __init__(self, aliases: dict[str, str], tmp_names: set[str]):
        self.aliases = aliases
        self.tmp = tmp_names
        self.hits: list[tuple[int, str]] = []
        self.given: list[set[str]] = []

    def hit(self, node, rule):
        self.hits.append((getattr(node, "lineno", 1), rule))

    def resolve(self, name: str | None) -> str | None:
        if name is None:
            return None
        head, _, rest = name.partition(".")
        full = self.aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    def _protected(self, full: str | None) -> bool:
        if not full or full.startswith(PATCH_ALLOWED):
            return False
        return full.split(".")[0] in PROTECTED

    # imports
    def visit_Import(self, node):
        for a in node.names:
            rule = MODULE_RULES.get(a.name.split(".")[0])
            if rule:
                self.hit(node, rule)
        self.generic_visit(node)

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
        self.generic_visit(node)

    # stores
    def _store_target(self, t, node):
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                self._store_target(e, node)
        elif isinstance(t, ast.Starred):
            self._store_target(t.value, node)
        elif isinstance(t, ast.Attribute):
            full = self.resolve(_dotted(t))
            if t.attr.startswith("__") and t.attr.endswith("__"):
                self.hit(node, "monkeypatch")
            elif self._protected(full) and full.count(".") >= 1:
                self.hit(node, "monkeypatch")
            elif t.attr in HOOK_ATTRS and "get_ipython" in (full or ""):
                self.hit(node, "ipython_hook")
        elif isinstance(t, ast.Subscript):
            base = self.resolve(_dotted(t.value)) or ""
            if base in ("sys.modules", "builtins.__dict__") or base.endswith(".__dict__") or \
                    (isinstance(t.value, ast.Call) and _dotted(t.value.func) in ("vars", "globals")
                     and (_dotted(t.value.func) == "globals" or any(
                         self._protected(self.resolve(_dotted(a))) for a in t.value.args))):
                self.hit(node, "monkeypatch")
        elif isinstance(t, ast.Name) and t.id == "__builtins__":
            self.hit(node, "monkeypatch")

    def visit_Assign(self, node):
        for t in node.targets:
            self._store_target(t, node)
        self._note_tmp(node)
        value = self.resolve(_dotted(node.value)) if isinstance(node.value, (ast.Name, ast.Attribute)) else None
        if self._protected(value):  # g = solutions_lib.grading: g is the module from now on
            self.aliases.update({t.id: value for t in node.targets if isinstance(t, ast.Name)})
        if self.given and all(isinstance(t, ast.Name) for t in node.targets) and self._caller_given(node.value):
            self.given[-1].update(t.id for t in node.targets)
        self.generic_visit(node)

    # a function that deletes or copies the path its caller gave it (a checkpoint folder)
    # is allowed to: `shutil.rmtree(path)` with `path` a parameter (or built from one)
    def visit_FunctionDef(self, node):
        a = node.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        self.given.append(params - {"self", "cls"})
        self.generic_visit(node)
        self.given.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

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

    def visit_AugAssign(self, node):
        self._store_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._store_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for t in node.targets:
            self._store_target(t, node)
        self.generic_visit(node)

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
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    # references
    def visit_Name(self, node):
        if node.id in ("get_ipython", "__IPYTHON__"):
            self.hit(node, "ipython_hook")
        elif node.id == "__builtins__":
            self.hit(node, "monkeypatch")
        self.generic_visit(node)

    def visit_Attribute(self, node):
        if node.attr in FRAME_ATTRS:
            self.hit(node, "tracing")
        elif node.attr in HOOK_ATTRS and "get_ipython" in (_dotted(node) or ""):
            pass  # the Name visit already reports get_ipython
        self.generic_visit(node)

    def visit_Raise(self, node):
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if exc is not None and self.resolve(_dotted(exc)) in EXIT_EXC | {f"builtins.{e}" for e in EXIT_EXC}:
            self.hit(node, "process_exit")
        self.generic_visit(node)

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
        if isinstance(node.value, str) and re.search(r"gradebook|nbgrader_config", node.value):
            self.hit(node, "file_access")
        self.generic_visit(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, ast.Div) and self._is_path_const(node.right) and \
                not (isinstance(node.left, ast.Name) and node.left.id in self.tmp):
            self.hit(node, "file_access")
        self.generic_visit(node)

    def visit_Call(self, node):
        raw = _dotted(node.func)
        full = self.resolve(raw)
        if full:
            if raw and "get_ipython" in raw:
                pass
            elif full in EXIT_CALLS or full.startswith("signal."):
                self.hit(node, "process_exit")
            elif full in SUBPROCESS_CALLS or full.startswith(SUBPROCESS_PREFIXES):
                self.hit(node, "subprocess")
            elif full in TRACE_CALLS:
                self.hit(node, "tracing")
            elif full in DYNAMIC_CALLS:
                self.hit(node, "dynamic_code")
            elif full in FILE_CALLS or full.startswith("sqlite3."):
                self.hit(node, "file_access")
            elif full.startswith("shutil.") and not all(self._caller_given(a) for a in node.args[:2]):
                self.hit(node, "file_access")
            elif full in ("setattr", "delattr", "builtins.setattr", "builtins.delattr") and node.args and (
                    self._protected(self.resolve(_dotted(node.args[0]))) or _dotted(node.args[0]) == "get_ipython()"):
                self.hit(node, "monkeypatch")
            elif full in ("importlib.reload", "imp.reload"):
                self.hit(node, "monkeypatch")
            elif full in ("vars", "globals") and full == "vars" and node.args and \
                    self._protected(self.resolve(_dotted(node.args[0]))):
                self.hit(node, "monkeypatch")
        args = list(node.args) + [k.value for k in node.keywords]
        if any(self._is_path_const(a) for a in args):
            self.hit(node, "file_access")
        self.generic_visit(node)


def scan_source(source: str, cell: str, aliases: dict[str, str] | None = None) -> list[Finding]:
    """Findings in one code cell's source."""
    lines = source.split("\n")

    def snip(n: int) -> str:
        return lines[n - 1].strip()[:120] if 0 < n <= len(lines) else ""

    python, magic = _python_only(source)
    findings = [Finding(cell, n, rule, text[:120]) for n, rule, text in magic]
    try:
        tree = ast.parse(python)
    except SyntaxError:
        for n, line in enumerate(python.split("\n"), 1):
            for rule, pat in FALLBACK:
                if pat.search(line):
                    findings.append(Finding(cell, n, rule, snip(n)))
        return _dedupe(findings)
    v = _Visitor(dict(aliases) if aliases is not None else collect_aliases([source]), set())
    v.visit(tree)
    findings += [Finding(cell, n, rule, snip(n)) for n, rule in v.hits]
    return _dedupe(findings)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.cell, f.line, f.rule)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return sorted(out, key=lambda f: (f.line, f.rule))


# ---------------------------------------------------------------- notebooks


def _label(cell, index: int) -> str:
    return nbs.nbgrader_md(cell).get("grade_id") or f"cell {index}"


def scan_notebook(nb, release=None) -> list[Finding]:
    """Findings in the cells of `nb` a student can change.

    Without `release`: answer cells and every code cell that is neither locked nor a test.
    With `release` (the released notebook): answer cells, and every other cell whose source
    is not in the release; an edited locked or test cell is also flagged `edited_locked_cell`.
    """
    aliases = collect_aliases([c.source for c in nb.cells if c.cell_type == "code"])
    rel_by_id, rel_sources = {}, set()
    if release is not None:
        for c in release.cells:
            rel_sources.add(c.source)
            if nbs.nbgrader_md(c).get("grade_id"):
                rel_by_id[nbs.nbgrader_md(c)["grade_id"]] = c
    findings = []
    for i, cell in enumerate(nb.cells):
        md = nbs.nbgrader_md(cell)
        label = _label(cell, i)
        protected = bool(md.get("locked") or md.get("grade")) and not md.get("solution")
        if release is not None and protected:
            orig = rel_by_id.get(md.get("grade_id"))
            if orig is not None and orig.source != cell.source:
                findings.append(Finding(label, 1, "edited_locked_cell",
                                        "differs from the release (nbgrader restores it at grading time)"))
            elif orig is not None:
                continue
        elif release is not None and not md.get("solution") and cell.source in rel_sources:
            continue
        elif release is None and protected:
            continue
        if cell.cell_type == "code":
            findings += scan_source(cell.source, label, aliases)
    return findings


def release_for(path: Path, root: Path | None = None):
    """The released notebook matching a submission at .../<assignment>/<name>.ipynb, if any."""
    from .paths import course_root

    path = Path(path)
    root = Path(root or course_root())
    rel = root / "release" / path.parent.name / path.name
    return nbformat.read(rel, as_version=4) if rel.exists() else None


def scan_file(path: Path, root: Path | None = None) -> list[Finding]:
    """Findings in a notebook file (compared with its release when the course has one)."""
    path = Path(path)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001  (malformed JSON, wrong format: reported, not raised)
        return [Finding("notebook", 0, "unreadable", f"{type(e).__name__}: {e}"[:120])]
    try:
        release = release_for(path, root)
    except Exception:  # noqa: BLE001
        release = None
    return scan_notebook(nb, release)


def main(paths: list[str], as_json: bool = False) -> int:
    """`python -m solutions_lib scan PATH...`: print findings; exit 1 when any, else 0."""
    files = []
    for p in map(Path, paths):
        files += sorted(p.rglob("*.ipynb")) if p.is_dir() else [p]
    files = [f for f in files if ".ipynb_checkpoints" not in f.parts]
    result = {str(f): scan_file(f) for f in files}
    if as_json:
        print(json.dumps({k: [asdict(x) for x in v] for k, v in result.items()}, indent=1))
    else:
        for f, found in result.items():
            for x in found:
                print(f"{f}: {x}")
        n = sum(map(len, result.values()))
        print(f"{n} finding(s) in {len(files)} notebook(s)" + ("; review them by hand" if n else ""))
    return 1 if any(result.values()) else 0
