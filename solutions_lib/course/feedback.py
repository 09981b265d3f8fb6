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
  check records (integrity.py) are dropped from every test cell.

Only the feedback HTML is changed: the autograded notebook and the gradebook keep everything.
"""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat import from_dict
from traitlets import Unicode

from ..grading import RECORD_MIME

BEGIN = "BEGIN HIDDEN TESTS"
END = "END HIDDEN TESTS"
WITHHELD = "(message withheld: it quotes the hidden tests)"


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


class HideHiddenTests(NbGraderPreprocessor):
    """nbconvert preprocessor for `GenerateFeedback.preprocessors`: hidden tests and
    traceback frames out of the feedback HTML."""

    placeholder = Unicode("# hidden tests: {n} lines (run at grading time)",
                          help="Replaces each hidden-test region; {n}: its non-blank lines").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not is_test_cell(cell):
            return cell, resources
        cell.source, hidden = hide_regions(cell.source, self.placeholder)
        outputs = []
        for o in cell.get("outputs", []):
            if RECORD_MIME in o.get("data", {}):  # check records hold the hidden tests' values
                continue
            if o.get("output_type") == "error":
                outputs.append(final_error(o, hidden))
            elif not hidden:
                outputs.append(o)
        cell.outputs = outputs
        return cell, resources
