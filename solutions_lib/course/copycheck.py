"""Copied code: answers that are the course's own code, or another student's (issues 25 and 30).

Two reads of a class's answer cells, each a flag for a person to look at (`flags.csv`); neither
changes a grade:

- `copied_library`: a function or class in an answer cell that is mostly the code of one in
  `solutions_lib`: a reference answer (a self-study learner holds them all), a course copy that
  the student edition ships because later parts build on it (`upstream.wsd`,
  `dist.context_parallel._RingAttention`, the probe modules' oracles), or a kit helper.
- `similar_answers`: two students' versions of the same answer cell that are mostly the same code.

**How code is compared** (the idea of MOSS, Schleimer, Wilkerson and Aiken, SIGMOD 2003, on
Python's syntax tree instead of text). Each unit (every function, class and method) is parsed
with `ast`, its docstring dropped, and read as a stream of tokens: the kinds of its syntax
nodes, attribute names, keywords, numbers and builtins, with every other name (variables,
arguments, functions, modules) read as one token `N` and every string as `S`, so renaming,
adding a variable or rewording a message changes nothing around it. Its fingerprint is the set of hashes of every run of `K` consecutive tokens. Two
units match when they share at least `MIN_SHARED` runs and at least `THRESHOLD` of the smaller
unit's runs: short functions that anyone would write alike (`return a * b`) never match. Runs
that occur in the released cell (the code every student is given) are removed from a student's
answer first.

**What it does not catch** (docs/THREAT_MODEL.md): code rewritten by hand (statements reordered,
loops turned into comprehensions, a different decomposition), or copied from outside the course
and the class. It is a prompt to look, never a verdict: two students may legitimately follow
the same hint to the same lines.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

K = 12            # tokens per run (a run is about one short line of code)
MIN_SHARED = 60   # runs a match must share: about 6 lines of non-trivial code
THRESHOLD = 0.9   # ... and this fraction of the smaller unit's runs
_PACKAGE = Path(__file__).resolve().parent.parent
_SKIP_PARTS = {"course", "__pycache__"}   # the grading tools are not answers
_BUILTINS = frozenset(dir(builtins))
_MAX_SOURCE = 200_000                     # characters of one cell read (a bigger cell is cut)


@dataclass(frozen=True)
class Unit:
    name: str                 # "module.qualname" for the library, the def's name in a cell
    line: int                 # 1-based line of the def
    runs: frozenset           # hashes of every K consecutive tokens


@dataclass(frozen=True)
class Match:
    unit: str                 # the answer's function or class
    line: int
    other: str                # the library function, or "<student>'s <unit>"
    shared: float             # fraction of the smaller unit's runs shared


def _body_without_docstring(node) -> list:
    body = list(getattr(node, "body", []))
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def _tokens(node) -> list[str]:
    """The unit's token stream: node kinds, attribute names, constants and builtins; every other
    name reads as `N` (a renamed variable, or one added early, changes nothing downstream)."""
    out: list[str] = []

    def name(n: str) -> str:
        return n if n in _BUILTINS else "N"

    stack = [node]
    while stack:
        n = stack.pop()
        out.append(type(n).__name__)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            children = [*getattr(n, "decorator_list", []), *([n.args] if hasattr(n, "args") else []),
                        *getattr(n, "bases", []), *_body_without_docstring(n)]
        else:
            if isinstance(n, ast.Name):
                out.append(name(n.id))
            elif isinstance(n, ast.Attribute):
                out.append("." + n.attr)
            elif isinstance(n, ast.keyword):
                out.append(f"{n.arg}=")
            elif isinstance(n, ast.alias):
                out.append(n.name)
            elif isinstance(n, ast.Constant):
                out.append("S" if isinstance(n.value, str) else repr(n.value)[:40])
            children = list(ast.iter_child_nodes(n))
        stack.extend(reversed(children))
    return out


def _runs(tokens: list[str]) -> frozenset:
    """Hashes of every K consecutive tokens (Python's own hash: compared within one process only)."""
    return frozenset(hash(tuple(tokens[i:i + K])) for i in range(len(tokens) - K + 1))


def units_of(source: str, prefix: str = "") -> list[Unit]:
    """Every function, class and method of `source`, each with its runs (a function's inner
    helpers belong to it: a closure alone is too generic to match).
    Source that does not parse gives no unit (IPython's `%` and `!` lines are dropped first)."""
    text = "\n".join(ln for ln in source[:_MAX_SOURCE].split("\n") if not ln.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out: list[Unit] = []
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, qual = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{qual}.{child.name}" if qual else child.name
                try:
                    runs = _runs(_tokens(child))
                except RecursionError:
                    continue
                out.append(Unit(f"{prefix}{q}", child.lineno, runs))
                if isinstance(child, ast.ClassDef):    # methods are units; a function's inner helpers are not
                    stack.append((child, q))
            else:
                stack.append((child, qual))
    return sorted(out, key=lambda u: (u.line, u.name))


@lru_cache(maxsize=1)
def library_units() -> tuple[Unit, ...]:
    """Units of every module of `solutions_lib` but the grading tools (`course/`), large enough
    to be matched (at least MIN_SHARED runs)."""
    out = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        rel = path.relative_to(_PACKAGE)
        if _SKIP_PARTS & set(rel.parts):
            continue
        module = ".".join(("solutions_lib", *rel.with_suffix("").parts)).removesuffix(".__init__")
        out += [u for u in units_of(path.read_text(encoding="utf-8"), module + ".") if len(u.runs) >= MIN_SHARED]
    return tuple(out)


@lru_cache(maxsize=1)
def _library_index() -> dict[int, list[int]]:
    index: dict[int, list[int]] = {}
    for i, u in enumerate(library_units()):
        for r in u.runs:
            index.setdefault(r, []).append(i)
    return index


def _shared(a: frozenset, b: frozenset) -> tuple[int, float]:
    n = len(a & b)
    return n, n / max(1, min(len(a), len(b)))


def answer_units(source: str, given: str = "") -> list[Unit]:
    """The units of an answer cell, less the runs of `given` (the released cell's code)."""
    drop = frozenset().union(*(u.runs for u in units_of(given))) if given else frozenset()
    return [Unit(u.name, u.line, u.runs - drop) for u in units_of(source)]


def copied_library(source: str, given: str = "") -> list[Match]:
    """The units of an answer cell that match a unit of `solutions_lib` (best match each)."""
    lib, index = library_units(), _library_index()
    out = []
    for u in answer_units(source, given):
        if len(u.runs) < MIN_SHARED:
            continue
        counts: dict[int, int] = {}
        for r in u.runs:
            for i in index.get(r, ()):
                counts[i] = counts.get(i, 0) + 1
        best = None
        for i, n in counts.items():
            if n < MIN_SHARED:
                continue
            frac = n / min(len(u.runs), len(lib[i].runs))
            if frac >= THRESHOLD and (best is None or (frac, n) > best[:2]):
                best = (frac, n, lib[i].name)
        if best:
            out.append(Match(u.name, u.line, best[2], round(best[0], 3)))
    return out


def similar_answers(answers: dict[str, list[Unit]]) -> list[tuple[str, Match]]:
    """Pairs of students whose units of one answer cell match: `answers` is {student: units of
    that cell}; returns (student, match naming the other student) for both students of a pair."""
    index: dict[int, set[str]] = {}
    for student, units in answers.items():
        for u in units:
            for r in u.runs:
                index.setdefault(r, set()).add(student)
    out = []
    for student, units in sorted(answers.items()):
        for u in units:
            if len(u.runs) < MIN_SHARED:
                continue
            others = {s for r in u.runs for s in index.get(r, ()) if s != student}
            for other in sorted(others):
                best = max(((n, f) for v in answers[other] if len(v.runs) >= MIN_SHARED
                            for n, f in [_shared(u.runs, v.runs)]), default=(0, 0.0))
                if best[0] >= MIN_SHARED and best[1] >= THRESHOLD:
                    out.append((student, Match(u.name, u.line, f"{other}'s answer", round(best[1], 3))))
    return out


def answer_cells(nb, release=None) -> list[tuple[str, str, str]]:
    """(grade_id, source, released source) of each code answer cell of a notebook read as JSON
    (`scanner.read_notebook`); cells whose metadata or source is malformed are skipped."""
    given = {gid: src for gid, src, _ in _cells(release)}
    return [(gid, src, given.get(gid, "")) for gid, src, solution in _cells(nb) if solution and src]


def _cells(nb) -> list[tuple[str, str, bool]]:
    """(grade_id, source, is an answer) of the code cells of a JSON notebook that carry a grade_id."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    out = []
    for c in cells if isinstance(cells, list) else []:
        meta = c.get("metadata") if isinstance(c, dict) and c.get("cell_type") == "code" else None
        md = meta.get("nbgrader") if isinstance(meta, dict) else None
        if isinstance(md, dict) and isinstance(md.get("grade_id"), str):
            out.append((md["grade_id"], _text(c.get("source")), bool(md.get("solution"))))
    return out


def _text(source) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        return "".join(source)
    return ""


def kit_copies(files: dict[str, str], notebooks: list[Path]) -> list[tuple[str, str, str, str, float]]:
    """Answers of the course that `files` ({path in the package: text}, e.g. the student
    edition's) hold a copy of: (notebook, answer grade_id, answer unit, kit unit, shared) for
    each answer unit of the solved `notebooks` (source/ paths) that matches a unit of `files`."""
    from . import notebooks as nbs

    kit = []
    for rel, text in sorted(files.items()):
        module = ".".join(("solutions_lib", *Path(rel).with_suffix("").parts)).removesuffix(".__init__")
        kit += [u for u in units_of(text, module + ".") if len(u.runs) >= MIN_SHARED]
    index: dict[int, list[int]] = {}
    for i, u in enumerate(kit):
        for r in u.runs:
            index.setdefault(r, []).append(i)
    out = []
    for path in notebooks:
        path = Path(path)
        release = path.parents[2] / "release" / path.parent.name / path.name
        given = {g: s for g, s, _ in _cells(json_of(release))} if release.exists() else {}
        for gid, src, solution in _cells(json_of(path)):
            if not solution:
                continue
            for u in answer_units(nbs.strip_solution_markers(src), given.get(gid, "")):
                if len(u.runs) < MIN_SHARED:
                    continue
                counts: dict[int, int] = {}
                for r in u.runs:
                    for i in index.get(r, ()):
                        counts[i] = counts.get(i, 0) + 1
                best = max(((n / min(len(u.runs), len(kit[i].runs)), kit[i].name) for i, n in counts.items()
                            if n >= MIN_SHARED), default=None)
                if best and best[0] >= THRESHOLD:
                    out.append((f"{path.parent.name}/{path.stem}", gid, u.name, best[1], round(best[0], 3)))
    return out


def json_of(path: Path) -> dict:
    import json
    return json.loads(Path(path).read_text(encoding="utf-8"))
