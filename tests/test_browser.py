"""The student's and the instructor's path in a real browser (headless Chromium + Playwright).

A throw-away course holding 01_optimizers is generated with nbgrader. The student gets the
released `theory.ipynb` in a folder of their own, with every answer filled in but the last one
(`trust_ratio`), and works in JupyterLab as a student would:

1. opens the notebook, presses nbgrader's **Validate** button: the dialog names exactly one
   failing test cell, the one of the missing answer;
2. types the answer (the source notebook's solution) into the answer cell with the keyboard,
   runs it with Shift+Enter (no error in its output), presses Validate again: "Success! Your
   notebook passes all the tests."; the file saved on disk holds exactly the typed solution.

The instructor opens the Formgrader from JupyterLab's command palette in the course root and
sees the assignment listed, with no warning banner (e.g. a missing exchange directory).

Both JupyterLab servers run in isolated homes (see browser_support). Screenshots of every step
land in $TAS_ARTIFACTS/browser/ (default <repo>/artifacts/browser/). Without Chromium or
Playwright the test is skipped, saying how to install them, unless TAS_REQUIRE_BROWSER=1 (CI),
where it fails.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

import nbformat
import pytest

from browser_support import CHROMIUM, INSTALL_HINT, LabServer, artifacts_dir, browser_missing
from conftest import ROOT
from solutions_lib.course import notebooks as nbs
from solutions_lib.course.grader import Course, make_course, solved_version

ASSIGNMENT = "01_optimizers"
NOTEBOOK = "theory.ipynb"
#: The answer the student types: short (one small function), and its test cell is quick.
GRADE_ID = "trust_ratio"
TEST_ID = "trust_ratio_tests"

#: Playwright waits (ms): generous, bounded. Validate runs the whole notebook in a fresh kernel.
UI_TIMEOUT = 30_000
VALIDATE_TIMEOUT = 150_000

# No xdist_group: the two tests share no server, so xdist may run them side by side.
pytestmark = pytest.mark.nbgrader


@pytest.fixture(scope="module", autouse=True)
def browser_available():
    why = browser_missing()
    if why:
        msg = f"browser end-to-end test cannot run: {why}. Install with: {INSTALL_HINT}"
        if os.environ.get("TAS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TAS_REQUIRE_BROWSER=1 and {msg}", pytrace=False)
        pytest.skip(msg)


@pytest.fixture
def shots(request):
    """Numbered screenshots `<test>_NN_<step>.png` in the artifacts folder. Each test replaces
    only its own files, so the tests may run on different xdist workers side by side."""
    folder = artifacts_dir(ROOT)
    prefix = request.node.name.removeprefix("test_").split("_")[0]  # student / instructor
    for old in folder.glob(f"{prefix}_*.png"):
        old.unlink()
    count = [0]

    def shot(page, name: str) -> Path:
        count[0] += 1
        path = folder / f"{prefix}_{count[0]:02d}_{name}.png"
        page.screenshot(path=str(path), full_page=False)
        return path

    shot.folder = folder
    return shot


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The throw-away course (with its own nbgrader_config.py) and the student's folder."""
    tmp = tmp_path_factory.mktemp("browser")
    root = make_course(tmp / "course", [ASSIGNMENT], ROOT)
    (root / "nbgrader_config.py").write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from solutions_lib.course.config import apply_course_config\n"
        "apply_course_config(get_config(), root=os.path.dirname(os.path.abspath(__file__)))\n")
    Course(root).generate(ASSIGNMENT)
    release = nbformat.read(root / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    source = nbs.read(ROOT / "source" / ASSIGNMENT / NOTEBOOK)
    # A student who has answered everything but the last question.
    nb = solved_version(release, source)
    blank = next(c for c in release.cells if nbs.nbgrader_md(c).get("grade_id") == GRADE_ID)
    cell = next(c for c in nb.cells if nbs.nbgrader_md(c).get("grade_id") == GRADE_ID)
    cell.source = blank.source
    assert "NotImplementedError" in cell.source
    student = tmp / "student"
    (student / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(nb, student / ASSIGNMENT / NOTEBOOK)
    answer = nbs.strip_solution_markers(
        next(c for c in source.cells if nbs.nbgrader_md(c).get("grade_id") == GRADE_ID).source)
    index = nb.cells.index(cell)
    return {"tmp": tmp, "root": root, "student": student, "answer": answer, "index": index}


@pytest.fixture(scope="module")
def student_lab(course):
    """JupyterLab in the student's folder; always stopped, kernels included."""
    lab = LabServer(course["student"], course["tmp"] / "student-lab", "student")
    try:
        yield lab.start()
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def instructor_lab(course):
    """JupyterLab in the course root (its nbgrader_config.py applies the course settings)."""
    lab = LabServer(course["root"], course["tmp"] / "instructor-lab", "instructor")
    try:
        yield lab.start()
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def browser(browser_available):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, request, shots):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(UI_TIMEOUT)
    pg = context.new_page()
    console_errors = []
    pg.on("pageerror", lambda e: console_errors.append(str(e)))
    pg.console_errors = console_errors
    try:
        yield pg
    finally:
        # Captured output: pytest shows it only when the test fails.
        try:
            shots(pg, "end_of_test")
        except Exception:
            pass
        print(f"browser screenshots: {shots.folder}")
        try:
            context.close()
        except Exception:
            pass


def _report(shots, *lines):
    return "\n".join([*lines, f"screenshots: {shots.folder}"])


def wait_kernel_idle(page, timeout=UI_TIMEOUT):
    """The notebook's kernel has started and is idle (JupyterLab's execution indicator)."""
    page.locator(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']") \
        .first.wait_for(state="attached", timeout=timeout)


def validate(page, shots, name: str) -> str:
    """Press nbgrader's Validate button; return the result dialog's text (dialog closed after)."""
    page.locator(".jp-NotebookPanel-toolbar .validate-button button, "
                 ".jp-NotebookPanel-toolbar .validate-button jp-button").first.click()
    dialog = page.locator(".jp-Dialog").filter(has_text="Validation Results")
    dialog.wait_for(state="visible", timeout=VALIDATE_TIMEOUT)
    text = dialog.locator(".jp-Dialog-body").inner_text()
    shots(page, name)
    dialog.locator(".jp-Dialog-footer button").first.click()
    dialog.wait_for(state="detached")
    return text


def type_code(page, code: str) -> None:
    """Type `code` into the focused CodeMirror editor with real key presses, line by line.

    The editor auto-indents after Enter (and JupyterLab may close brackets, switched off in
    the isolated settings): after each Enter, Shift+Home selects whatever indentation the
    editor inserted and the line, typed with its own indentation, replaces it. The result is
    checked against the file saved on disk afterwards, so any editor cleverness is caught."""
    for i, line in enumerate(code.split("\n")):
        if i:
            page.keyboard.press("Enter")
            page.keyboard.press("Shift+Home")
            if not line:
                page.keyboard.press("Delete")
        if line:
            page.keyboard.type(line)


def test_student_validates_in_jupyterlab(student_lab, course, page, shots):
    lab = student_lab
    nb_path = course["student"] / ASSIGNMENT / NOTEBOOK
    t0 = time.monotonic()
    page.goto(lab.page_url(f"/lab/tree/{ASSIGNMENT}/{NOTEBOOK}"))
    # Every cell is in the DOM (windowing off in the isolated settings), in notebook order.
    answer_cell = page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(course["index"])
    answer_cell.wait_for(state="visible", timeout=60_000)
    assert "raise NotImplementedError" in answer_cell.locator(".cm-content").inner_text(), _report(
        shots, "the answer cell is not where the notebook has it")
    page.locator(".jp-NotebookPanel-toolbar .validate-button").wait_for(state="visible")
    wait_kernel_idle(page, timeout=60_000)
    answer_cell.scroll_into_view_if_needed()
    shots(page, "notebook_opened")

    t_open = time.monotonic() - t0
    # 1. Validate with the last answer missing: exactly its test cell fails.
    t1 = time.monotonic()
    text = validate(page, shots, "validate_missing_answer")
    t_fail = time.monotonic() - t1
    assert "The following cell failed" in text, _report(shots, f"validate dialog:\n{text}")
    assert text.count("The following cell failed") == 1, _report(shots, f"validate dialog:\n{text}")
    assert "trust_ratio(" in text and "Success!" not in text, _report(shots, f"validate dialog:\n{text}")

    # 2. Type the answer into the answer cell, run it, validate again.
    answer_cell.locator(".cm-content").click()
    page.keyboard.press("ControlOrMeta+a")
    type_code(page, course["answer"])
    shots(page, "answer_typed")
    page.keyboard.press("Shift+Enter")
    prompt = answer_cell.locator(".jp-InputArea-prompt")
    page.wait_for_function("el => /\\[\\d+\\]/.test(el.textContent)",
                           arg=prompt.element_handle(), timeout=UI_TIMEOUT)
    wait_kernel_idle(page)
    outputs = answer_cell.locator(".jp-OutputArea-output")
    errors = answer_cell.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, _report(shots, f"the answer cell shows an error:\n{outputs.all_inner_texts()}")
    shots(page, "answer_run")

    t1 = time.monotonic()
    text = validate(page, shots, "validate_passed")
    t_pass = time.monotonic() - t1
    assert "Success! Your notebook passes all the tests." in text, _report(shots, f"validate dialog:\n{text}")

    # Validate saved the notebook first: the file holds exactly what was typed.
    saved = nbformat.read(nb_path, as_version=4)
    cell = next(c for c in saved.cells if nbs.nbgrader_md(c).get("grade_id") == GRADE_ID)
    assert cell.source == course["answer"], _report(
        shots, "the typed answer differs from the solution:", repr(cell.source), repr(course["answer"]))
    assert not page.console_errors, _report(shots, f"page errors: {page.console_errors}")
    print(f"student path: {time.monotonic() - t0:.1f} s (notebook open {t_open:.1f} s, validate "
          f"failing {t_fail:.1f} s, passing {t_pass:.1f} s); screenshots in {shots.folder}")


def test_instructor_sees_assignment_in_formgrader(instructor_lab, page, shots):
    lab = instructor_lab
    page.goto(lab.page_url("/lab"))
    page.locator(".jp-LabShell").wait_for(state="visible", timeout=60_000)
    page.locator(".jp-DirListing-item").first.wait_for(state="visible", timeout=60_000)
    shots(page, "lab_opened")
    # JupyterLab's command palette -> nbgrader's "Formgrader" command (an iframe of /formgrader).
    page.keyboard.press("ControlOrMeta+Shift+c")
    palette = page.locator("#command-palette input, .jp-mod-commandPalette input").first
    palette.fill("Formgrader")
    page.locator(".lm-CommandPalette-item").filter(has_text=re.compile(r"^Formgrader$")).first.click()
    frame = page.frame_locator("#formgrader iframe")
    row = frame.locator("#main_table, table").filter(has_text=ASSIGNMENT).first
    row.wait_for(state="visible", timeout=60_000)
    shots(page, "formgrader")
    assert frame.locator("body").filter(has_text="Manage Assignments").count() >= 1, _report(
        shots, "the formgrader page is not the assignment list")
    # The course's default configuration opens it without warnings: a course-local exchange
    # (<root>/exchange, config.course_exchange) instead of nbgrader's missing default.
    banners = frame.locator(".alert-warning, #warning-exchange, #warning-course-id")
    assert banners.count() == 0, _report(shots, "formgrader warns: " + " | ".join(banners.all_inner_texts()))
    status = lab.get_json("/formgrader/api/assignments")
    names = [a["name"] for a in status]
    assert ASSIGNMENT in names, _report(shots, f"formgrader API lists {names}")


# ------------------------------------------------------------------ a hostile written answer
#
# A tiny second assignment in the same course: a student whose written answer holds a
# <script> and an <img onerror> that set a window flag and give themselves the written
# answer's point through the Formgrader's own API (PUT /formgrader/api/grade/<id>, with the
# page's XSRF cookie), as soon as an instructor opens the submission. Autograde (stock nbgrader)
# neutralises the answer (solutions_lib/course/neutralise.py). A control student's autograded
# copy gets the raw answer back (what autograde wrote before the neutraliser): there the same
# script must run, which shows the probe would see it.

XSS_ASSIGNMENT = "00_xss"
XSS_SCRIPT = (  # the page's own jQuery (its XSRF prefilter) and the token of the page's URL
    "window.tas_pwned = 1; setTimeout(function () {"
    " var sid = location.pathname.split('/').filter(Boolean).pop();"
    " var q = location.search.indexOf('token=') < 0 ? '' : '?token=' + location.search.split('token=')[1].split('&')[0];"
    " $.ajax({url: base_url + '/api/grades' + q, data: {submission_id: sid}, dataType: 'json',"
    " error: function (x) { console.log('tas error ' + x.status + ' ' + String(x.responseText).slice(0, 200)); },"
    " success: function (gs) { gs.forEach(function (g) {"
    " if (g.name === 'explain') { g.manual_score = 1; $.ajax({url: base_url + '/api/grade/' + g.id + q,"
    " method: 'PUT', contentType: 'application/json', data: JSON.stringify(g)}); } }); } }); }, 300);")
XSS_ANSWER = ("Tripling is linear.\n\n<script>" + XSS_SCRIPT + "</script>\n\n"
              "<img src=\"x\" onerror=\"window.tas_pwned_img = 1\">\n")


@pytest.fixture(scope="module")
def xss_submissions(course):
    import subprocess
    import sys

    root = course["root"]
    nb = nbs.new_notebook([
        nbs.markdown("# XSS fixture", locked=True),
        nbs.answer("triple", "def triple(x):\n    ### BEGIN SOLUTION\n    return 3 * x\n    ### END SOLUTION"),
        nbs.tests("triple_tests", "from solutions_lib.grading import expect_close\n"
                  "expect_close(triple(3), 9, 'triple(3)')", 1, ["TSX-01"]),
        nbs.written("explain", "### BEGIN SOLUTION\nLinear.\n### END SOLUTION", 1, ["TSX-01"]),
    ])
    (root / "source" / XSS_ASSIGNMENT).mkdir(parents=True, exist_ok=True)
    nbs.write(nbs.normalise(nb), root / "source" / XSS_ASSIGNMENT / "xss.ipynb")
    grader = Course(root)
    grader.generate(XSS_ASSIGNMENT)
    sub = grader.release_notebook(XSS_ASSIGNMENT, "xss.ipynb")
    for c in sub.cells:
        if nbs.nbgrader_md(c).get("grade_id") == "triple":
            c.source = "def triple(x):\n    return 3 * x"
        elif nbs.nbgrader_md(c).get("grade_id") == "explain":
            c.source = XSS_ANSWER
    for student in ("s_xss", "s_control"):
        grader.submit(student, XSS_ASSIGNMENT, {"xss.ipynb": sub})
    proc = subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "autograde", XSS_ASSIGNMENT, "--force"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the control: its autograded copy as it was before the neutraliser
    path = root / "autograded" / "s_control" / XSS_ASSIGNMENT / "xss.ipynb"
    ctl = nbformat.read(path, as_version=4)
    cell = next(c for c in ctl.cells if nbs.nbgrader_md(c).get("grade_id") == "explain")
    assert cell.source != XSS_ANSWER and "Shown as text" in cell.source, "autograde should have neutralised it"
    cell.source = XSS_ANSWER
    nbformat.write(ctl, path)
    return root


def _explain_grade(root: Path, student: str):
    from nbgrader.api import Gradebook

    from solutions_lib.course.config import gradebook_url
    with Gradebook(gradebook_url(root)) as gb:
        sub = gb.find_submission_notebook("xss", XSS_ASSIGNMENT, student)
        grade = next(g for g in sub.grades if g.name == "explain")
        return sub.id, grade.manual_score


def _open_submission(page, lab, submission_id: str) -> dict:
    """Open the Formgrader's page for one submission; return the window flags the student's
    code set (in any frame) and the non-GET requests to the Formgrader API seen meanwhile."""
    writes, api = [], []

    def seen(r):
        if "/formgrader/api/" in r.url:
            api.append(f"{r.method} {r.url}")
            if r.method != "GET":
                writes.append(f"{r.method} {r.url}")
    page.on("request", seen)
    page.on("console", lambda m: api.append("console: " + m.text))
    page.goto(lab.page_url(f"/formgrader/submissions/{submission_id}/"), wait_until="domcontentloaded")
    page.locator(".nbgrader-label, #explain").first.wait_for(state="attached", timeout=UI_TIMEOUT)
    try:
        page.wait_for_load_state("networkidle", timeout=8_000)
    except Exception:
        pass
    page.wait_for_timeout(1_500)  # the script's own 300 ms timer and its two requests
    flags = set()
    for frame in page.frames:
        try:
            flags |= set(frame.evaluate("() => Object.keys(window).filter(k => k.startsWith('tas_pwned'))"))
        except Exception:
            pass
    page.remove_listener("request", seen)
    return {"flags": sorted(flags), "writes": writes, "api": api, "errors": list(page.console_errors)}


def test_formgrader_runs_no_student_script(instructor_lab, xss_submissions, page, shots):
    lab, root = instructor_lab, xss_submissions
    t0 = time.monotonic()
    sid, before = _explain_grade(root, "s_xss")
    assert before is None
    seen = _open_submission(page, lab, sid)
    shots(page, "hostile_submission")
    text = page.locator("body").inner_text()
    assert "Tripling is linear." in text and "window.tas_pwned = 1" in text, _report(
        shots, "the answer should be shown as text", text[:2000])
    assert seen["flags"] == [] and seen["writes"] == [], _report(shots, f"the student's script ran: {seen}")
    assert _explain_grade(root, "s_xss")[1] is None

    # control: the same answer, not neutralised, runs and changes its own grade
    cid, _ = _explain_grade(root, "s_control")
    control = _open_submission(page, lab, cid)
    shots(page, "control_submission")
    assert "tas_pwned" in control["flags"] and any("PUT" in w for w in control["writes"]), _report(
        shots, f"the probe did not see the unneutralised script run: {control}")
    assert _explain_grade(root, "s_control")[1] == 1
    print(f"formgrader probe: {time.monotonic() - t0:.1f} s")


def test_validate_in_the_course_root_with_references(instructor_lab, course, page, shots):
    """Issue 25: Validate in the course root (the course's nbgrader_config.py, bubblewrap on
    the machine) runs a plain kernel with the real package, so a solved notebook whose visible
    tests compare with references (05 exercises: the alpha-beta fit on the student's own
    measurement) passes; before, it ran in the grading sandbox with the references withheld and
    said "VALIDATION FAILED ON 3 CELL(S)"."""
    a, n = "05_communication", "exercises.ipynb"
    release = nbformat.read(ROOT / "release" / a / n, as_version=4)
    folder = course["root"] / "self_study" / a
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(solved_version(release, nbs.read(ROOT / "source" / a / n)), folder / n)
    page.goto(instructor_lab.page_url(f"/lab/tree/self_study/{a}/{n}"))
    page.locator(".jp-NotebookPanel-toolbar .validate-button").wait_for(state="visible", timeout=60_000)
    wait_kernel_idle(page, timeout=60_000)
    text = validate(page, shots, "validate_references_course_root")
    assert "Success! Your notebook passes all the tests." in text, _report(shots, f"validate dialog:\n{text}")
