"""Hidden tests draw their inputs from this term's seed (docs/GRADING.md rule 8).

`python -m solutions_lib.course.term_seeds [--check]` rewrites every hidden-test region of the
source notebooks so that each seed goes through `grading.term_seed`:

    torch.Generator().manual_seed(70201)   ->  torch.Generator().manual_seed(term_seed(70201))
    np.random.default_rng(8123)            ->  np.random.default_rng(term_seed(8123))
    random_qkv(2, 3, 21, 21, 8, seed=1)    ->  random_qkv(2, 3, 21, 21, 8, seed=term_seed(1))

and imports it at the top of the region. Without a course secret `term_seed(n) == n`, so a
notebook grades exactly as before; with one, every term's hidden inputs differ.
`tests/test_term_seeds.py` checks that no hidden seed is left unconverted.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from . import notebooks as nbs

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
IMPORT = "from solutions_lib.grading import term_seed"
#: RNG constructors whose first argument is a seed, and keyword arguments that are seeds. Only
#: literal seeds are wrapped (an int, or an int plus a loop variable): a seed held in a variable may
#: be shared with the student's code under test, and wrapping one side only would break the pair.
_CALLS = re.compile(r"\b(manual_seed|default_rng|RandomState|random\.seed|Random)\(")
_KW = re.compile(r"[(,]\s*(seed|generator_seed)\s*=(?!=)")
_LITERAL = re.compile(r"^\s*(\d+(\s*[+*]\s*[A-Za-z_]\w*)?|[A-Za-z_]\w*\s*[+*]\s*\d+)\s*$")


def _string_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the string literals in `text` (best effort: none if it does not tokenize)."""
    import io
    import tokenize

    lines = text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    spans = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                spans.append((starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1]))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return spans


def _arg_end(text: str, start: int) -> int:
    """Index just past the first argument that starts at `start` (balanced brackets)."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return i
            depth -= 1
        elif ch == "," and depth == 0:
            return i
        i += 1
    return i


def _numbers(text: str) -> list[tuple[int, str]]:
    """(offset, text) of the number tokens of `text` (none if it does not tokenize)."""
    import io
    import tokenize

    starts = [0]
    for ln in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(ln))
    try:
        return [(starts[t.start[0] - 1] + t.start[1], t.string)
                for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NUMBER]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def _wrap_seeds(region: str) -> str:
    strings = _string_spans(region)
    starts = sorted({m.end() for m in _CALLS.finditer(region)} | {m.end() for m in _KW.finditer(region)})
    # a literal seed that also stands bare elsewhere in the region (`mlp(dims, seed=5)` beside
    # `args=(dims, 5, ...)`) is paired with that use: left alone, or the pair would break
    spans = {}
    for pos in starts:
        end = _arg_end(region, pos)
        spans[pos] = (end, [n for o, n in _numbers(region[pos:end])])
    inside = [(pos, end) for pos, (end, _) in spans.items() if _LITERAL.match(region[pos:end])]
    bare = {n for o, n in _numbers(region) if not any(a <= o < b for a, b in inside)}
    out, i = [], 0
    for pos in starts:
        if pos < i or any(a <= pos < b for a, b in strings):
            continue
        arg_end = _arg_end(region, pos)
        arg = region[pos:arg_end]
        if not _LITERAL.match(arg) or any(n in bare for n in spans[pos][1]):
            continue
        out.append(region[i:pos])
        lead = len(arg) - len(arg.lstrip())
        out.append(arg[:lead] + f"term_seed({arg.strip()})" + arg[len(arg.rstrip()):])
        i = arg_end
    out.append(region[i:])
    return "".join(out)


def convert_source(source: str) -> str:
    """`source` with every hidden region's seeds wrapped in term_seed (idempotent)."""
    parts, pos = [], 0
    while True:
        b = source.find(BEGIN, pos)
        if b < 0:
            parts.append(source[pos:])
            return "".join(parts)
        e = source.find(END, b)
        e = len(source) if e < 0 else e
        head_end = source.find("\n", b)
        head_end = e if head_end < 0 or head_end > e else head_end + 1
        region = _wrap_seeds(source[head_end:e])
        if "term_seed(" in region and IMPORT not in region:
            line_start = source.rfind("\n", 0, b) + 1
            indent = source[line_start:b] if not source[line_start:b].strip() else ""
            region = indent + IMPORT + "\n" + region
        parts.append(source[pos:head_end] + region)
        pos = e


def unconverted(source: str) -> list[str]:
    """Lines of hidden regions with a seed that does not go through term_seed."""
    bad = []
    pos = 0
    while True:
        b = source.find(BEGIN, pos)
        if b < 0:
            return bad
        e = source.find(END, b)
        e = len(source) if e < 0 else e
        region = source[b:e]
        wrapped = _wrap_seeds(region)
        if wrapped != region:
            new = set(wrapped.splitlines())
            bad += [ln.strip() for ln in region.splitlines() if ln not in new]
        pos = e


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in argv
    from .paths import course_root
    root = course_root()
    changed = []
    for path in sorted((Path(root) / "source").glob("*/*.ipynb")):
        nb = nbs.read(path)
        touched = False
        for cell in nb.cells:
            if cell.cell_type == "code" and BEGIN in cell.source:
                new = convert_source(cell.source)
                if new != cell.source:
                    touched = True
                    cell.source = new
        if touched:
            changed.append(path)
            if not check:
                nbs.write(nbs.normalise(nb), path)
    for p in changed:
        print(("unconverted: " if check else "converted: ") + str(p.relative_to(root)))
    return 1 if (check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
