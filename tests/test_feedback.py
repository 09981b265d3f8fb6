"""Feedback without leaks: stock `nbgrader generate_feedback`, configured by the course config,
shows the student's failure message and the visible tests, never the hidden tests' source or
a traceback that quotes it."""
from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from solutions_lib.course import notebooks as nbs
from solutions_lib.course.feedback import HideHiddenTests, final_error, hide_regions
from solutions_lib.course.grader import Course

from conftest import ROOT

A = "00_feedback"
HIDDEN = (
    "_probe_seed_4471 = 4471\n"
    "x_hidden_probe = -2.5 + 0 * _probe_seed_4471\n"
    "expect_close(triple(x_hidden_probe), -7.5, 'triple at a fresh input', hint='multiply every x by 3')\n"
)
SECRETS = ["_probe_seed_4471", "x_hidden_probe", "expect_close(triple(x_hidden_probe)", "HIDDEN TESTS"]


def _course(root: Path) -> Path:
    nb = nbs.new_notebook([
        nbs.markdown("# Feedback fixture", locked=True),
        nbs.answer("triple", "def triple(x):\n    ### BEGIN SOLUTION\n    return 3 * x\n    ### END SOLUTION"),
        nbs.tests("triple_tests",
                  "from solutions_lib.grading import expect_close\n"
                  "expect_close(triple(3), 9, 'visible check triple(3)')\n"
                  "### BEGIN HIDDEN TESTS\n" + HIDDEN + "### END HIDDEN TESTS", 2, ["TSX-01"]),
    ])
    (root / "source" / A).mkdir(parents=True)
    nbs.write(nbs.normalise(nb), root / "source" / A / "fb.ipynb")
    (root / "nbgrader_config.py").write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from solutions_lib.course.config import apply_course_config\n"
        "apply_course_config(get_config(), root=os.path.dirname(os.path.abspath(__file__)), cell_timeout=10)\n")
    return root


def _text(path: Path) -> str:
    """The feedback HTML as a reader sees it: tags stripped, entities decoded, ANSI codes removed."""
    raw = path.read_text(encoding="utf-8")
    raw = re.sub(r"<style.*?</style>|<script.*?</script>", "", raw, flags=re.S)
    return re.sub(r"\x1b\[[0-9;]*m", "", html.unescape(re.sub(r"<[^>]+>", "", raw)))


@pytest.mark.nbgrader
def test_stock_generate_feedback_hides_hidden_tests(tmp_path):
    root = _course(tmp_path / "course")
    course = Course(root)
    course.generate(A)
    rel = course.release_notebook(A, "fb.ipynb")
    answer = next(c for c in rel.cells if nbs.nbgrader_md(c).get("grade_id") == "triple")
    answer.source = "def triple(x):\n    return 9 if x == 3 else 0  # passes the visible test only"
    course.submit("s_hardcoded", A, {"fb.ipynb": rel})
    assert course.autograde(A, "s_hardcoded")["success"]
    graded = nbformat.read(root / "autograded" / "s_hardcoded" / A / "fb.ipynb", as_version=4)
    assert any("x_hidden_probe" in c.source for c in graded.cells), "the autograded copy keeps the hidden tests"

    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "generate_feedback", A, "--force"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = _text(root / "feedback" / "s_hardcoded" / A / "fb.html")
    assert "triple at a fresh input: expected -7.5, got 0" in text, text  # the student's failure message
    assert "multiply every x by 3" in text
    assert "GradingError" in text
    assert "visible check triple(3)" in text  # visible tests still shown
    assert "hidden tests: 3 lines (run at grading time)" in text
    for secret in SECRETS:
        assert secret not in text, secret
    for frame in ("Traceback", "---->", "Cell In[", "grading.py"):
        assert frame not in text, frame
    assert "Score: 0" in text


def test_hide_regions_and_error_reduction():
    src = "a = 1\n    ### BEGIN HIDDEN TESTS\n    secret_line_number_one = 2\n\n    ### END HIDDEN TESTS\nb = 2"
    out, hidden = hide_regions(src, "# hidden tests: {n} lines")
    assert out == "a = 1\n    # hidden tests: 1 lines\nb = 2"
    assert hidden == ["    secret_line_number_one = 2", ""]
    # an unterminated region hides everything after BEGIN
    out, _ = hide_regions("x\n### BEGIN HIDDEN TESTS\nsecret_value = 1", "# hidden {n}")
    assert out == "x\n# hidden 1"
    err = nbformat.from_dict({"output_type": "error", "ename": "GradingError", "evalue": "f(2): expected 4, got 5.",
                              "traceback": ["Traceback ...", "----> 3 expect_close(f(secret_input_value))"]})
    assert final_error(err, hidden)["traceback"] == ["GradingError: f(2): expected 4, got 5."]
    quoting = dict(err, evalue="bad: secret_line_number_one = 2")
    assert final_error(nbformat.from_dict(quoting), hidden)["evalue"].startswith("(message withheld")
    timeout = dict(err, ename="CellTimeoutError",
                   evalue="A cell timed out.\nHere is a preview of the cell contents:\n---\nsecret_value = 1")
    assert "secret_value" not in final_error(nbformat.from_dict(timeout), [])["traceback"][0]


def test_non_test_cells_untouched():
    cell = nbs.answer("f", "def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION")
    cell.outputs = [nbformat.from_dict({"output_type": "stream", "name": "stdout", "text": "hi"})]
    before = nbformat.writes(nbs.new_notebook([cell]))
    out, _ = HideHiddenTests().preprocess_cell(cell, {}, 0)
    assert nbformat.writes(nbs.new_notebook([out])) == before


# ------------------------------------------------------------------ hostile students (issue 14)
#
# One course, four students, graded with stock `nbgrader autograde A --force` and
# `nbgrader generate_feedback A --force` (subprocesses in the course root):
#   s_honest   outputs (text and an HTML table) and a written answer with a little markup;
#   s_history  a last cell that prints `In`, `_ih`, `%history` and the history manager's copy;
#   s_encoded  one cell per cheap encoding of the whole input history (repr, one character per
#              line, reversed, base64, hex, zlib+base64, ROT13, character codes, HTML, an image's
#              alt text, an error message) plus a control cell that must stay visible;
#   s_script   every script form in its written answer, in a markdown and a raw cell it adds,
#              and in outputs (text/html, application/javascript, image/svg+xml, text/markdown,
#              text/latex, broken image data).

import base64  # noqa: E402
import zlib  # noqa: E402

from solutions_lib.course.neutralise import markdown_problems  # noqa: E402

WRITTEN = "### BEGIN SOLUTION\nTripling is linear.\nRubric (1 pt): says linear.\n### END SOLUTION"
HONEST_ANSWER = "Tripling is *linear*: if x<y then 3x<3y, and `a<b` stays code. <b>Bold</b> claim."
HONEST_CODE = ("def triple(x):\n    return 3 * x\n"
               "print('honest output: triple(2) =', triple(2))\n"
               "from IPython.display import HTML, display\n"
               "display(HTML(\"<table class='dataframe'><tr><td>seven-7</td></tr></table>\"))")
ENCODINGS = {
    "repr": "print('ENC-repr', repr(chr(10).join(_ih)))",
    "perchar": "print('ENC-perchar'); print(chr(10).join(chr(10).join(_ih)))",
    "reversed": "print('ENC-reversed', chr(10).join(_ih)[::-1])",
    "base64": "import base64; print('ENC-base64', base64.b64encode(chr(10).join(_ih).encode()).decode())",
    "hex": "print('ENC-hex', chr(10).join(_ih).encode().hex())",
    "zlib": "import zlib, base64; print('ENC-zlib', base64.b64encode(zlib.compress(chr(10).join(_ih).encode())).decode())",
    "rot13": "import codecs; print('ENC-rot13', codecs.encode(chr(10).join(_ih), 'rot13'))",
    "ords": "print('ENC-ords', [ord(c) for c in chr(10).join(_ih)])",
    "html": "display({'text/html': '<p>ENC-html</p><pre>' + chr(10).join(_ih) + '</pre>', 'text/plain': 'x'}, raw=True)",
    "alt": ("display({'image/png': 'iVBORw0KGgo=', 'text/plain': 'ENC-alt'}, "
            "metadata={'image/png': {'alt': chr(10).join(_ih)}}, raw=True)"),
    "chunked": "s = chr(10).join(_ih); print('ENC-chunked', 'QQ'.join(s[i:i + 40] for i in range(0, len(s), 40)))",
    "error": "raise ValueError('ENC-error ' + chr(10).join(_ih))",
}
SCRIPT_ANSWER = (
    "My answer: tripling is linear.\n\n"
    "<script>window.tas_pwned_md1 = 1</script>\n\n"
    "<img src=x onerror=\"window.tas_pwned_md2=1\">\n\n"
    "<iframe srcdoc=\"<script>parent.tas_pwned_md3=1</script>\"></iframe>\n\n"
    "[click me](javascript:window.tas_pwned_md4=1)\n\n"
    "<svg xmlns='http://www.w3.org/2000/svg' onload='window.tas_pwned_md5=1'><script>window.tas_pwned_md6=1</script></svg>\n\n"
    "<a href=\"jav&#x61;script:window.tas_pwned_md7=1\">entity link</a>\n\n"
    "$\\href{javascript:window.tas_pwned_md8=1}{math link}$\n")
SCRIPT_OUTPUTS = (
    "from IPython.display import display, HTML, Javascript, Markdown, Latex\n"
    "display(HTML(\"<b>bold-o0</b><script>window.tas_pwned_o1=1</script><img src=x onerror='window.tas_pwned_o2=1'>\"))\n"
    "display(Javascript('window.tas_pwned_o3=1'))\n"
    "display({'image/svg+xml': \"<svg xmlns='http://www.w3.org/2000/svg'><script>window.tas_pwned_o4=1</script></svg>\","
    " 'text/plain': 'svg'}, raw=True)\n"
    "display(Markdown(\"[x](javascript:window.tas_pwned_o5=1) <img src=x onerror='window.tas_pwned_o6=1'>\"))\n"
    "display({'image/png': '\" onerror=\"window.tas_pwned_o7=1', 'text/plain': 'png'}, raw=True)\n"
    "display(Latex(r'$\\href{javascript:window.tas_pwned_o8=1}{x}$'))\n")
# the marker is assembled at run time, so only an output (never the cell's source) spells it
ENCODINGS = {k: v.replace("ENC-", "EN' + 'C-") for k, v in ENCODINGS.items()}
HIDDEN_LINES = [x for x in HIDDEN.splitlines() if len(x.strip()) >= 12]


def _with_cells(rel, answer_src, written_src=None, extra=()):
    nb = nbformat.from_dict(nbformat.reads(nbformat.writes(rel), as_version=4))
    for c in nb.cells:
        gid = nbs.nbgrader_md(c).get("grade_id")
        if gid == "triple":
            c.source = answer_src
        elif gid == "explain" and written_src is not None:
            c.source = written_src
    nb.cells.extend(extra)
    return nb


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    import time

    from nbformat.v4 import new_code_cell, new_markdown_cell, new_raw_cell

    root = tmp_path_factory.mktemp("hostile") / "course"
    root.mkdir()
    nb = nbs.new_notebook([
        nbs.markdown("# Feedback fixture", locked=True),
        nbs.answer("triple", "def triple(x):\n    ### BEGIN SOLUTION\n    return 3 * x\n    ### END SOLUTION"),
        nbs.tests("triple_tests",
                  "from solutions_lib.grading import expect_close\n"
                  "expect_close(triple(3), 9, 'visible check triple(3)')\n"
                  "### BEGIN HIDDEN TESTS\n" + HIDDEN + "### END HIDDEN TESTS", 2, ["TSX-01"]),
        nbs.written("explain", WRITTEN, 1, ["TSX-01"]),
    ])
    (root / "source" / A).mkdir(parents=True)
    nbs.write(nbs.normalise(nb), root / "source" / A / "fb.ipynb")
    (root / "nbgrader_config.py").write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from solutions_lib.course.config import apply_course_config\n"
        "apply_course_config(get_config(), root=os.path.dirname(os.path.abspath(__file__)), cell_timeout=10)\n")
    course = Course(root)
    course.generate(A)
    rel = course.release_notebook(A, "fb.ipynb")
    good = "def triple(x):\n    return 3 * x"
    subs = {
        "s_honest": _with_cells(rel, HONEST_CODE, HONEST_ANSWER),
        "s_history": _with_cells(rel, good, "Linear.", [new_code_cell(
            "print(In)\nprint(_ih)\nget_ipython().run_line_magic('history', '')\n"
            "print(get_ipython().history_manager.input_hist_raw)\nprint(get_ipython().user_ns['In'][-2])")]),
        "s_encoded": _with_cells(rel, good, "Linear.",
                                 [new_code_cell(src) for src in ENCODINGS.values() if "raise" not in src]
                                 + [new_code_cell("print('CONTROL-OK', 6 * 7)"), new_code_cell(ENCODINGS["error"])]),
        "s_script": _with_cells(rel, good, SCRIPT_ANSWER, [
            new_code_cell(SCRIPT_OUTPUTS),
            new_markdown_cell("Added cell <details open ontoggle='window.tas_pwned_md9=1'>x</details>"),
            new_raw_cell("<script>window.tas_pwned_raw=1</script>", metadata={"raw_mimetype": "text/html"})]),
    }
    for student, sub in subs.items():
        course.submit(student, A, {"fb.ipynb": sub})
    nbgrader = str(Path(sys.executable).with_name("nbgrader"))
    t0 = time.monotonic()
    # The screen is what protects the hidden lines of *beside* test cells (run in the kernel, so
    # the kernel's history holds them): grade this class with every test cell in the kernel.
    # Grader-side cells never reach the kernel (test_integrity.py: xor_history).
    import os
    env = {**os.environ, "TAS_GRADER_SIDE": "off"}
    for cmd in (["autograde", A, "--force"], ["generate_feedback", A, "--force"]):
        proc = subprocess.run([nbgrader, *cmd], cwd=root, capture_output=True, text=True, timeout=600, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"autograde + generate_feedback, 4 students: {time.monotonic() - t0:.1f} s")
    return {"root": root, "course": course, "subs": subs}


def _graded(cls, student) -> nbformat.NotebookNode:
    return nbformat.read(cls["root"] / "autograded" / student / A / "fb.ipynb", as_version=4)


def _feedback(cls, student) -> str:
    return (cls["root"] / "feedback" / student / A / "fb.html").read_text(encoding="utf-8")


def _html_of_autograded(cls, student) -> str:
    """The autograded notebook as the Formgrader renders it (its template extends classic)."""
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter(template_name="classic").from_filename(
        str(cls["root"] / "autograded" / student / A / "fb.ipynb"))
    return html


def _student_scripts(page: str) -> list[str]:
    """Every way `page` could run the student's code: <script> bodies, on* attributes,
    javascript:/data: URLs, srcdoc, and MathJax \\href outside code, that mention the student's
    marker `tas_pwned`."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page, "html.parser")
    found = []
    for s in soup.find_all("script"):
        if "tas_pwned" in s.get_text():
            found.append(f"<script>: {s.get_text()[:80]}")
    for el in soup.find_all(True):
        for name, value in el.attrs.items():
            value = " ".join(value) if isinstance(value, list) else str(value)
            squeezed = re.sub(r"[\x00-\x20]", "", value).lower()
            if name.lower().startswith("on") or name.lower() == "srcdoc":
                found.append(f"<{el.name} {name}={value[:60]!r}>")
            elif squeezed.startswith(("javascript:", "vbscript:")) or (
                    squeezed.startswith("data:") and not squeezed.startswith(("data:image/png", "data:image/jpeg",
                                                                              "data:image/gif"))):
                found.append(f"<{el.name} {name}={value[:60]!r}>")
        if el.name in ("iframe", "svg", "object", "embed", "details"):
            found.append(f"<{el.name}>")
    for text in soup.find_all(string=True):
        if "\\href" in text and not text.find_parent(["pre", "code", "script", "textarea"]):
            found.append(f"MathJax link: {text[:60]!r}")
    return found


@pytest.mark.nbgrader
def test_feedback_withholds_history_printing(hostile_class):
    text = _text(hostile_class["root"] / "feedback" / "s_history" / A / "fb.html")
    raw = _feedback(hostile_class, "s_history")
    for secret in SECRETS[:3] + [x.strip() for x in HIDDEN_LINES]:
        assert secret not in text and secret not in raw, secret
    assert "output withheld by the grader" in text
    assert "hidden tests: 3 lines" in text and "visible check triple(3)" in text
    # the autograded notebook (the instructor's) keeps the student's output
    graded = _graded(hostile_class, "s_history")
    assert "x_hidden_probe" in json_text(graded.cells[-1].outputs)


def json_text(outputs) -> str:
    return nbformat.writes(nbs.new_notebook([nbformat.from_dict(
        {"cell_type": "code", "id": "outputs", "source": "", "metadata": {}, "outputs": outputs, "execution_count": None})]))


@pytest.mark.nbgrader
def test_feedback_withholds_cheap_encodings(hostile_class):
    raw = _feedback(hostile_class, "s_encoded")
    text = _text(hostile_class["root"] / "feedback" / "s_encoded" / A / "fb.html")
    kept = json_text([o for c in _graded(hostile_class, "s_encoded").cells if c.cell_type == "code" for o in c.outputs])
    for name in ENCODINGS:
        assert f"ENC-{name}" in kept, name  # the kernel did produce it (the instructor's copy keeps it)
        assert f"ENC-{name}" not in text, name  # each output replaced
    assert "CONTROL-OK 42" in text  # an innocent output of the same student stays
    assert text.count("output withheld by the grader") >= len(ENCODINGS)
    joined = HIDDEN
    forms = [joined.encode().hex(), base64.b64encode(joined.encode()).decode()[:40], joined[::-1].strip()[:40],
             base64.b64encode(zlib.compress(joined.encode())).decode()[:40]]
    for line in HIDDEN_LINES:
        s = line.strip()
        forms += [s, s[::-1], "\n".join(s), repr(s)[1:-1]]
    for form in forms:
        assert form not in raw and form not in text, form


@pytest.mark.nbgrader
def test_no_student_script_in_formgrader_view_or_feedback(hostile_class):
    graded = _graded(hostile_class, "s_script")
    answer = next(c for c in graded.cells if nbs.nbgrader_md(c).get("grade_id") == "explain")
    assert markdown_problems(answer.source) == []
    assert "window.tas_pwned_md1 = 1" in answer.source  # shown as text, not deleted
    assert nbs.nbgrader_md(answer)["grade_id"] == "explain" and nbs.nbgrader_md(answer)["points"] == 1
    mimes = {m for c in graded.cells if c.cell_type == "code" for o in c.outputs for m in o.get("data", {})}
    assert not mimes & {"application/javascript", "image/svg+xml"}, mimes
    for page, where in ((_html_of_autograded(hostile_class, "s_script"), "formgrader view"),
                        (_feedback(hostile_class, "s_script"), "feedback")):
        found = _student_scripts(page)
        assert not found, f"{where}: {found}"
    text = _text(hostile_class["root"] / "feedback" / "s_script" / A / "fb.html")
    for visible in ("My answer: tripling is linear.", "window.tas_pwned_md1 = 1", "bold-o0",
                    "window.tas_pwned_o3=1", "window.tas_pwned_raw=1", "Added cell"):
        assert visible in text, visible
    # the grade is what the kernel produced: the triple tests pass, the written answer waits
    res = hostile_class["course"].results(A, "s_script")
    by_id = {c.grade_id: c for n in res.notebooks for c in n.cells}
    assert by_id["triple_tests"].points == 2 and by_id["explain"].points is None


@pytest.mark.nbgrader
def test_honest_student_sees_outputs_and_answer_unchanged(hostile_class):
    graded = _graded(hostile_class, "s_honest")
    answer = next(c for c in graded.cells if nbs.nbgrader_md(c).get("grade_id") == "explain")
    assert answer.source == HONEST_ANSWER  # byte for byte
    raw = _feedback(hostile_class, "s_honest")
    text = _text(hostile_class["root"] / "feedback" / "s_honest" / A / "fb.html")
    assert "honest output: triple(2) = 6" in text
    assert "<td>seven-7</td>" in raw and "<b>Bold</b>" in raw and "<em>linear</em>" in raw
    assert "output withheld" not in text and "Shown as text" not in text
    assert "Score: 2" in text
    res = hostile_class["course"].results(A, "s_honest")
    assert {c.grade_id: c.points for n in res.notebooks for c in n.cells}["triple_tests"] == 2


def test_neutralise_units():
    """The neutraliser without nbgrader: what it rewrites, what it leaves alone, and that a
    second pass changes nothing."""
    from nbgrader.preprocessors import CheckCellMetadata, SaveAutoGrades

    from solutions_lib.course.neutralise import (NOTICE, insert_neutraliser, is_safe_html, is_trusted,
                                                 neutralise_cell, neutralise_markdown, neutralise_output,
                                                 NeutraliseStudentContent)
    honest = ["Plain *answer* with $x<y$, `a<b` and <b>bold</b>.", "# H\n\n| a | b |\n|--|--|\n|1|2|\n\n> q & a",
              "[docs](https://example.org) ![plot](https://example.org/p.png)", "```\n<script>shown as code</script>\n```"]
    for md in honest:
        assert neutralise_markdown(md) == md, md
    hostile = ["<script>x()</script>", "<img src=x onerror=x()>", "<iframe srcdoc='<script>x()</script>'>",
               "[a](javascript:x())", "[a](JaVaScRiPt&#58;x())", "<a href='javascript:x()'>a</a>",
               "<svg onload=x()>", "$\\href{javascript:x()}{a}$", "<details open ontoggle=x()>",
               "[a](data:text/html,<script>x()</script>)", "<span class='score'>fake</span>", "<!-- -->"]
    for md in hostile:
        out = neutralise_markdown(md)
        assert out.startswith(NOTICE) and md in out and neutralise_markdown(out) == out, md
    o = lambda **kw: nbformat.from_dict({"output_type": "display_data", "metadata": {}, **kw})  # noqa: E731
    js = neutralise_output(o(data={"application/javascript": "x()"}))
    assert set(js.data) == {"text/plain"} and "x()" in js.data["text/plain"]
    svg = neutralise_output(o(data={"image/svg+xml": "<svg><script>x()</script></svg>", "text/plain": "fig"}))
    assert set(svg.data) == {"text/plain"} and svg.data["text/plain"].startswith("fig")
    html = neutralise_output(o(data={"text/html": "<b>ok</b><script>x()</script><img src=y onerror=x()>"}))
    assert is_safe_html(html.data["text/html"]) and "&lt;script&gt;" in html.data["text/html"]
    table = "<table class=\"dataframe\"><tr><td>1</td></tr></table>"
    assert neutralise_output(o(data={"text/html": table})).data["text/html"] == table
    png = neutralise_output(o(data={"image/png": "\" onerror=\"x()", "text/plain": "p"}))
    assert "image/png" not in png.data
    stream = neutralise_output(nbformat.from_dict({"output_type": "stream", "name": "x\" onclick=\"y", "text": "t"}))
    assert stream.name == "stdout" and stream.text == "t"
    assert neutralise_output(nbformat.from_dict({"output_type": "bogus"})) is None
    hiding = nbformat.from_dict({"cell_type": "code", "id": "h", "source": "print(In)", "outputs": [],
                                 "execution_count": None, "metadata": {"transient": {"remove_source": True}}})
    assert "transient" not in neutralise_cell(hiding, False).metadata
    for out in (js, svg, html, png):
        assert neutralise_output(out) == out  # idempotent
    # a locked cell of the gradebook is left alone; the same cell with other text is not trusted
    cell = nbs.markdown("<details>instructor's</details>", cell_id="intro", locked=True)
    cell.metadata.nbgrader["grade_id"] = "intro"
    locked = {"intro": ("markdown", cell.source)}
    assert is_trusted(cell, locked) and neutralise_cell(cell, True).source == "<details>instructor's</details>"
    forged = nbformat.from_dict(dict(cell, source="<script>x()</script>"))
    assert not is_trusted(forged, locked) and not is_trusted(cell, None)
    raw = neutralise_cell(nbformat.from_dict({"cell_type": "raw", "id": "r", "metadata": {},
                                              "source": "<script>x()</script>"}), False)
    assert raw.source.startswith("<pre") and "&lt;script&gt;" in raw.source
    order = insert_neutraliser([SaveAutoGrades, CheckCellMetadata])
    assert order == [SaveAutoGrades, NeutraliseStudentContent, CheckCellMetadata]
    assert insert_neutraliser(order) == order


def test_the_screen_bounds_its_work_per_notebook():
    """Issue 26 (3): 68-character base64 strings of bz2 data inflate to 2 MiB each; 49 KB of
    them kept generate_feedback busy past 300 s at 614 MB. The screen now spends a bounded
    budget per notebook and withholds what it could not screen: quick, nothing shown unscreened,
    and a notebook of ordinary outputs is not affected."""
    import bz2
    import time

    from solutions_lib.course import feedback as fb

    blob = base64.b64encode(bz2.compress(b"\0" * (2 << 20))).decode()
    assert len(blob) <= 80
    bomb = "\n".join([blob] * (49_000 // len(blob)))
    src = "x = 1\n### BEGIN HIDDEN TESTS\nassert some_hidden_reference_value == 12345678\n### END HIDDEN TESTS\n"
    test = nbformat.v4.new_code_cell(src, metadata={"nbgrader": {"grade": True, "solution": False,
                                                                 "grade_id": "t", "points": 1}})
    cells = [nbformat.v4.new_code_cell("print(...)", outputs=[nbformat.v4.new_output("stream", name="stdout", text=bomb)])
             for _ in range(4)]
    cells.append(nbformat.v4.new_code_cell("print('fine')", outputs=[nbformat.v4.new_output("stream", name="stdout",
                                                                                            text="an honest output\n")]))
    nb = nbformat.v4.new_notebook(cells=cells + [test])
    t0 = time.monotonic()
    out, _ = HideHiddenTests().preprocess(nb, {})
    took = time.monotonic() - t0
    assert took < fb.NOTEBOOK_SCREEN_SECONDS + 10, took
    texts = [o.get("text", "") for c in out.cells for o in c.get("outputs", [])]
    assert not any(blob in t for t in texts), "a bomb output was shown unscreened"
    assert sum(t == fb.OUTPUT_UNSCREENED for t in texts) >= 1
    honest = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('fine')", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="an honest output\n")]), test])
    out, _ = HideHiddenTests().preprocess(honest, {})
    assert out.cells[0].outputs[0]["text"] == "an honest output\n"
