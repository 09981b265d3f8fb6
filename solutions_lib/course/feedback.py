"""Feedback without leaks: a preprocessor that stock `nbgrader generate_feedback` runs.

Stock nbgrader renders the *autograded* notebook to HTML, and the autograded notebook holds
each test cell as it ran at grading time: the hidden tests included (nbgrader has no option
to hide them in feedback; `ClearHiddenTests` is a release-time preprocessor that deletes the
region without a trace and checks nothing about outputs). Tracebacks in the outputs quote the
hidden lines too. `HideHiddenTests` runs after `GetGrades` in `GenerateFeedback.preprocessors`
(wired in `config.apply_course_config`) and, in every auto-graded test cell:

- replaces each `### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS` region by one line
  `# hidden tests: N lines (run at grading time)`;
- reduces an error to its final line, `ExceptionType: message` (the test helpers put the
  student-actionable message there), with no traceback frames; a message that quotes a
  line of the hidden tests is withheld;
- in a cell with hidden tests, drops the other outputs (a hidden test could print its inputs);
  check records (integrity.py) are dropped from every test cell;
- in EVERY cell, replaces each output that reproduces a line of the hidden tests by a notice
  (`screen_output`): a student cell that prints IPython's `In`/`_ih`/`%history` after the test
  cells ran, or a hook that writes into a later cell, would otherwise put the hidden tests in
  the feedback. The hidden lines are taken from the notebook's test cells and the gradebook's
  source cells; trivial ones (short, comments, `pass`, or also in the visible notebook) are
  ignored. A line is matched whole when short, else by any run of 24 of its letters and
  digits (so pieces with junk between them are seen). Matching is on letters and digits only, case-folded, so whitespace, quoting,
  `repr`/`ascii` escapes, one character per line and any separator are seen through; reversed
  text, ROT13, `\\xNN`/`\\uNNNN` escapes, base64, hex, lists of character codes and
  zlib/gzip/bz2/lzma-compressed base64 or hex are decoded first. Error outputs of test cells
  (the helpers' failure messages, shown by design) are matched against the code of the hidden
  lines without their string literals.

Only the feedback HTML is changed: the autograded notebook and the gradebook keep everything.
"""
from __future__ import annotations

import base64
import binascii
import bz2
import codecs
import lzma
import re
import zlib

from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat import from_dict
from traitlets import Unicode

from ..grading import RECORD_MIME

BEGIN = "BEGIN HIDDEN TESTS"
END = "END HIDDEN TESTS"
WITHHELD = "(message withheld: it quotes the hidden tests)"
OUTPUT_WITHHELD = "(output withheld by the grader: it reproduces the hidden tests)\n"
#: A hidden line is a secret worth screening for when its letters and digits number this many.
MIN_SECRET = 10
#: Longer lines are screened for by every run of this many of their letters and digits (not in
#: the visible notebook), so a line printed in pieces with junk between them is still seen.
FRAGMENT = 24


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_test_cell(cell) -> bool:
    md = _nbgrader(cell)
    return cell.get("cell_type") == "code" and bool(md.get("grade")) and not md.get("solution")


def hide_regions(source: str, placeholder: str) -> tuple[str, list[str]]:
    """`source` with each hidden region replaced by `placeholder` (its `{n}`: the region's
    non-blank lines); returns the new source and the hidden lines. An unterminated region
    hides everything after its BEGIN line."""
    out, hidden, region, indent = [], [], None, ""
    for line in source.split("\n"):
        if region is None:
            if BEGIN in line:
                region, indent = [], line[: len(line) - len(line.lstrip())]
            else:
                out.append(line)
            continue
        if END in line:
            out.append(indent + placeholder.format(n=sum(1 for x in region if x.strip())))
            hidden.extend(region)
            region = None
        else:
            region.append(line)
    if region is not None:
        out.append(indent + placeholder.format(n=sum(1 for x in region if x.strip())))
        hidden.extend(region)
    return "\n".join(out), hidden


def _quotes(text: str, hidden: list[str]) -> bool:
    lines = [h.strip() for h in hidden if len(h.strip()) >= 12 and not h.strip().startswith("#")]
    return any(h in text for h in lines)


def final_error(output, hidden: list[str]):
    """An error output reduced to `ename: evalue`, no traceback frames."""
    ename = str(output.get("ename", "Error"))
    evalue = str(output.get("evalue", ""))
    if "Here is a preview of the cell contents" in evalue:  # nbclient's timeout quotes the cell
        evalue = evalue.split("Here is a preview")[0].strip()
    if _quotes(evalue, hidden):
        evalue = WITHHELD
    line = f"{ename}: {evalue}" if evalue else ename
    return from_dict(dict(output, evalue=evalue, traceback=[line]))


def canon(text: str) -> str:
    """Letters and digits only, lower case: what survives any spacing, quoting or separator."""
    return re.sub(r"[^0-9a-z]", "", text.lower())


_STRING = re.compile(r"""[rbfuRBFU]{0,2}("\"\"|'''|"|')(?:\\.|(?!\1).)*?\1""", re.S)


def secret_lines(hidden: list[str], visible: str) -> tuple[list[str], list[str]]:
    """The hidden lines worth screening for, as `canon` strings: (whole lines, lines without
    their string literals). Skipped: blank lines, comments, `pass`, lines under 12 characters,
    and lines whose text is also in the visible notebook."""
    seen = canon(visible)
    whole, code = set(), set()
    for line in hidden:
        s = line.strip()
        if len(s) < 12 or s.startswith("#") or s == "pass":
            continue
        c = canon(s)
        if len(c) >= MIN_SECRET and c not in seen:
            whole |= _fragments(c, seen)
            k = canon(_STRING.sub("", s))
            if len(k) >= MIN_SECRET and k not in seen:
                code |= _fragments(k, seen)
    return sorted(whole), sorted(code)


def _fragments(c: str, seen: str) -> set[str]:
    """`c` itself when short, else its runs of FRAGMENT characters that are not in `seen`."""
    if len(c) <= FRAGMENT:
        return {c}
    return {c[i:i + FRAGMENT] for i in range(len(c) - FRAGMENT + 1) if c[i:i + FRAGMENT] not in seen}


_LIMIT = 1 << 21  # characters of one output examined for encodings, bytes decompressed
#: The screen's work per notebook (issue 26): bytes decompressed or decoded in all, and seconds.
#: Past either, the outputs not yet screened are withheld (never shown unscreened, never a hang):
#: a few KB of base64 bz2 can inflate to MiB each, and a notebook may hold thousands of them.
NOTEBOOK_DECODE_BYTES = 32 << 20
NOTEBOOK_SCREEN_SECONDS = 20.0
OUTPUT_UNSCREENED = ("(output withheld by the grader: this notebook's outputs took more work to screen for "
                     "the hidden tests than the grader spends on one notebook)\n")


class ScreenBudget:
    """Bytes and seconds the screen may still spend on one notebook."""

    def __init__(self, nbytes: int = NOTEBOOK_DECODE_BYTES, seconds: float = NOTEBOOK_SCREEN_SECONDS):
        import time
        self.left, self.deadline, self._now = int(nbytes), time.monotonic() + float(seconds), time.monotonic

    def spend(self, n: int) -> None:
        self.left -= int(n)
        if self.left < 0 or self._now() > self.deadline:
            raise ScreenBudgetSpent()


class ScreenBudgetSpent(Exception):
    """The notebook's screening budget is spent."""





def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def _unescape(text: str) -> str:
    def one(m):
        try:
            return chr(int(m.group(1) or m.group(2) or m.group(3), 16))
        except (ValueError, OverflowError):
            return ""
    return re.sub(r"\\x([0-9a-fA-F]{2})|\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})", one, text)


def _inflate(raw: bytes, budget: "ScreenBudget | None" = None) -> list[bytes]:
    out = [raw]
    for make in (lambda: zlib.decompressobj(47), lambda: zlib.decompressobj(-15)):  # zlib/gzip, raw
        try:
            out.append(make().decompress(raw, _LIMIT))
        except zlib.error:
            pass
        if budget is not None:
            budget.spend(len(out[-1]))
    for mod in (bz2, lzma):
        try:
            d = mod.BZ2Decompressor() if mod is bz2 else mod.LZMADecompressor()
            out.append(d.decompress(raw, _LIMIT))
        except (OSError, EOFError, ValueError, lzma.LZMAError):
            pass
        if budget is not None:
            budget.spend(len(out[-1]))
    return [b for b in out if b]


def decodings(text: str, budget: "ScreenBudget | None" = None) -> list[str]:
    """`text` and what a student could have encoded it as, each as a `canon` string. With a
    `budget`, every byte decoded is charged to it (ScreenBudgetSpent when it runs out)."""
    text = text[:_LIMIT]
    if budget is not None:
        budget.spend(len(text))
    plain = canon(text)
    found = [plain, plain[::-1], codecs.encode(plain, "rot13"), canon(_unescape(text))]
    blobs = []
    for run in re.findall(r"[A-Za-z0-9+/_-]{16,}={0,2}", text):
        for alt in (run, run.replace("-", "+").replace("_", "/")):
            try:
                blobs.append(base64.b64decode(alt + "=" * (-len(alt) % 4)))
            except (binascii.Error, ValueError):
                pass
    for run in re.findall(r"(?:[0-9a-fA-F]{2}[\s:,]?){12,}", text):
        try:
            blobs.append(bytes.fromhex(re.sub(r"[\s:,]", "", run)))
        except ValueError:
            pass
    for run in re.findall(r"(?:\b\d{1,7}\b[^0-9A-Za-z]{1,4}){9,}\b\d{1,7}\b", text):
        codes = [int(n) for n in re.findall(r"\d+", run)]
        found.append(canon("".join(chr(n) for n in codes if n < 0x110000)))
    for blob in blobs:
        if budget is not None:
            budget.spend(len(blob))
        for raw in _inflate(blob, budget):
            found.append(canon(raw.decode("utf-8", "ignore")))
    return found


def reproduces(output, needles: list[str], budget: "ScreenBudget | None" = None) -> bool:
    """Whether any string of `output` (data of every MIME type, text, error parts, metadata)
    holds one of `needles` (`canon` strings), directly or encoded."""
    if not needles:
        return False
    text = "\n".join(_strings({k: v for k, v in output.items() if k != "output_type"}))
    grams = {n for n in needles if len(n) == FRAGMENT}
    short = [n for n in needles if len(n) < FRAGMENT]
    for h in decodings(text, budget):
        if any(n in h for n in short):
            return True
        if grams and any(h[i:i + FRAGMENT] in grams for i in range(len(h) - FRAGMENT + 1)):
            return True
    return False


def screen_output(output, needles: list[str], budget: "ScreenBudget | None" = None):
    """`output`, or a notice in its place when it reproduces a hidden line, or when the
    notebook's screening `budget` ran out before it was screened."""
    try:
        if budget is not None and budget.left < 0:
            raise ScreenBudgetSpent()
        hit = reproduces(output, needles, budget)
    except ScreenBudgetSpent:
        if budget is not None:
            budget.left = -1
        return from_dict({"output_type": "stream", "name": "stdout", "text": OUTPUT_UNSCREENED})
    if hit:
        return from_dict({"output_type": "stream", "name": "stdout", "text": OUTPUT_WITHHELD})
    return output


def notebook_secrets(nb, resources) -> tuple[list[str], list[str]]:
    """`secret_lines` of a notebook: its test cells' hidden regions, and those of the
    gradebook's source cells when there is a gradebook to ask."""
    hidden, visible = [], []
    for cell in nb.cells:
        shown, lines = hide_regions(cell.get("source", ""), "")
        visible.append(shown)
        if is_test_cell(cell):
            hidden.extend(lines)
    nbg = (resources or {}).get("nbgrader") or {}
    if all(nbg.get(k) for k in ("db_url", "notebook", "assignment")):
        from nbgrader.api import Gradebook
        try:
            with Gradebook(nbg["db_url"]) as gb:
                for c in gb.find_notebook(nbg["notebook"], nbg["assignment"]).source_cells:
                    if BEGIN in (c.source or ""):
                        hidden.extend(hide_regions(c.source, "")[1])
        except Exception:
            pass
    return secret_lines(hidden, "\n".join(visible))


class HideHiddenTests(NbGraderPreprocessor):
    """nbconvert preprocessor for `GenerateFeedback.preprocessors`: hidden tests and
    traceback frames out of the feedback HTML."""

    placeholder = Unicode("# hidden tests: {n} lines (run at grading time)",
                          help="Replaces each hidden-test region; {n}: its non-blank lines").tag(config=True)

    def preprocess(self, nb, resources):
        self._secrets = notebook_secrets(nb, resources)
        self._budget = ScreenBudget()
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        whole, code = getattr(self, "_secrets", ([], []))
        if getattr(self, "_budget", None) is None:
            self._budget = ScreenBudget()
        if cell.get("cell_type") != "code":
            return cell, resources
        if not is_test_cell(cell):
            if whole and cell.get("outputs"):
                cell.outputs = [screen_output(o, whole, self._budget) for o in cell.outputs]
            return cell, resources
        cell.source, hidden = hide_regions(cell.source, self.placeholder)
        outputs = []
        for o in cell.get("outputs", []):
            if RECORD_MIME in o.get("data", {}):  # check records hold the hidden tests' values
                continue
            if o.get("output_type") == "error":
                outputs.append(screen_output(final_error(o, hidden), code, self._budget))
            elif not hidden:
                outputs.append(screen_output(o, whole, self._budget))
        cell.outputs = outputs
        return cell, resources
