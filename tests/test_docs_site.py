"""The documentation site (docs/site/, tools/build_docs.py): built, complete, linked, and seen in a
real browser.

One build per session, into a temporary folder: the whole site except that the book holds one
theory chapter (`SUBSET`: a full build executes 13 notebooks, 6 min 41 s cold on 2 busy cores, which
`make docs` does). The build runs with `-W`, so it passing means no Sphinx warning. Then:

- every page the site promises is there (a missing page fails);
- every internal link and resource of every built HTML file resolves to a built file, and each
  `#fragment` into a page names an id on that page (a broken link fails);
- a kernel of the build has the reference answers withheld (a cell calling one shows nothing);
- the theory chapter shows the student edition: the plots, no traceback, none of the source
  notebook's solution lines, the "output not shown" line where an answer is needed;
- in headless Chromium (Debian's /usr/bin/chromium, as tests/test_browser.py): the front page,
  the theory chapter with its plots loaded (naturalWidth > 0) and an API page with its
  functions, each screenshot (artifacts/docs/) not blank, and the server saw no 404.
Without Chromium or Playwright the browser part is skipped saying why, and without the `docs`
extra (Sphinx, MyST-NB, the book theme) everything is, unless TAS_REQUIRE_BROWSER=1 (CI), where
it fails.
"""
from __future__ import annotations

import functools
import html.parser
import http.server
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from browser_support import CHROMIUM, INSTALL_HINT, browser_missing
from conftest import ROOT

pytestmark = pytest.mark.xdist_group("docs")

SUBSET = "01_optimizers"
#: pages the site must have (paths under the output folder)
PAGES = ["index.html", "theory.html", f"theory/{SUBSET}.html", "api/index.html", "api/memory.html",
         "api/comms.html", "api/parallel.html", "pages/students.html", "pages/instructors.html",
         "pages/lab.html", "pages/GRADING.html", "pages/THREAT_MODEL.html", "pages/benchmarks.html",
         "pages/gpu_measurements_2026-11.html", "pages/limitations.html", "pages/practitioners.html"]


def _docs_extra_missing() -> str | None:
    import importlib.util
    missing = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme") if importlib.util.find_spec(m) is None]
    return f"the docs extra is not installed (no {', '.join(missing)}): pip install -e '.[docs]'" if missing else None


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    why = _docs_extra_missing()
    if why:
        if os.environ.get("TAS_REQUIRE_BROWSER") == "1":       # CI: the site must build there
            pytest.fail(f"TAS_REQUIRE_BROWSER=1 and {why}", pytrace=False)
        pytest.skip(why)
    base = tmp_path_factory.mktemp("docs")
    out = base / "html"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "build_docs.py"), "--out", str(out),
                        "--cache", str(base / "cache"), "--assignments", SUBSET],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    log = r.stdout + r.stderr
    assert r.returncode == 0, f"the site did not build warning-free (sphinx-build -W):\n{log[-6000:]}"
    assert "WARNING" not in log, f"the build printed a warning:\n{log[-6000:]}"
    print(f"docs site ({SUBSET} only) built in {time.monotonic() - t0:.0f} s")
    return out


# ---------------------------------------------------------------- links, measured from the files


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("preconnect", "dns-prefetch")):
                self.urls.append(a[key])


@functools.lru_cache(maxsize=None)
def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8", errors="replace"))
    return p


def broken_links(site_dir: Path) -> list[str]:
    """'page -> url (why)' for every internal link of every built page that does not resolve."""
    site_dir = Path(site_dir).resolve()
    bad = []
    for page in sorted(site_dir.rglob("*.html")):
        if page.relative_to(site_dir).parts[0] == "_static":
            continue          # the theme's Jinja macro files, copied as assets, not pages
        for url in _parse(page).urls:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            rel = page.relative_to(site_dir)
            if not target.is_file() or site_dir not in target.parents:
                bad.append(f"{rel} -> {url} (no such file)")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _parse(target).ids:
                bad.append(f"{rel} -> {url} (no id {parts.fragment!r} on that page)")
    return bad


def test_every_promised_page_is_built(site):
    missing = [p for p in PAGES if not (site / p).is_file()]
    assert not missing, f"pages missing from the site: {missing}"
    api = {p.stem for p in (ROOT / "docs" / "site" / "api").glob("*.md")} - {"index"}
    assert {p.stem for p in (site / "api").glob("*.html")} >= api


def test_maths_is_rendered_by_the_sites_own_mathjax(site):
    import re
    pages = [p for p in site.rglob("*.html") if p.relative_to(site).parts[0] != "_static"]
    srcs = {p: re.findall(r"<script[^>]*src=\"([^\"]*mathjax[^\"]*)\"", p.read_text(encoding="utf-8"), re.I) for p in pages}
    assert srcs[site / "theory" / f"{SUBSET}.html"], "the theory chapter loads no MathJax"
    for p, found in srcs.items():
        assert all(src.endswith("_static/mathjax/tex-chtml.js") and "//" not in src for src in found), (p, found)
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()


def test_every_internal_link_resolves(site):
    n = sum(len(_parse(p).urls) for p in site.rglob("*.html"))
    assert n > 500, f"only {n} links found in the built site: the parser is not reading it"
    bad = broken_links(site)
    assert not bad, f"{len(bad)} broken internal link(s):\n" + "\n".join(bad[:40])


def test_the_link_check_catches_a_broken_link(site, tmp_path):
    """The check above is not vacuous: one link broken in a copy of a page is reported."""
    import shutil
    copy = tmp_path / "site"
    shutil.copytree(site, copy)
    page = copy / "theory.html"
    text = page.read_text(encoding="utf-8")
    assert f'href="theory/{SUBSET}.html"' in text
    page.write_text(text.replace(f'href="theory/{SUBSET}.html"', 'href="theory/no_such_chapter.html"', 1),
                    encoding="utf-8")
    assert [b for b in broken_links(copy) if "no_such_chapter" in b], "a broken link went unreported"


def _solution_lines(source_nb: Path) -> list[str]:
    """The distinctive lines of the source notebook's solutions (at least 12 characters, not a comment)."""
    lines = []
    for c in nbformat.read(source_nb, as_version=4).cells:
        inside = False
        for line in c.source.splitlines():
            s = line.strip()
            if "### BEGIN SOLUTION" in s or "### BEGIN HIDDEN TESTS" in s:
                inside = True
            elif "### END SOLUTION" in s or "### END HIDDEN TESTS" in s:
                inside = False
            elif inside and len(s) >= 12 and not s.startswith("#") and s not in ("return out", "return result"):
                lines.append(s)
    return lines


def test_theory_chapter_is_the_student_edition_with_its_plots(site):
    import html as htmlmod
    import re
    page = site / "theory" / f"{SUBSET}.html"
    # the text as read: highlighted code is split into <span>s
    text = htmlmod.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
    imgs = [u for u in _parse(page).urls if "_images/" in u]
    assert imgs, "the theory chapter shows no plot"
    assert "Traceback" not in text and "NotImplementedError:" not in text, "a traceback is shown"
    assert "Output not shown" in text, "no cell says that its output needs an answer"
    assert "raise NotImplementedError" in text, "the answer cells are not the student edition's"
    # lines of the solutions that the student edition itself does not have (an import it shares is fine)
    release = {ln.strip() for c in nbformat.read(ROOT / "release" / SUBSET / "theory.ipynb", as_version=4).cells
               for ln in c.source.splitlines()}
    sol = [s for s in _solution_lines(ROOT / "source" / SUBSET / "theory.ipynb") if s not in release]
    assert len(sol) >= 5, "the source notebook has no solution lines to look for"
    leaked = [s for s in sol if s in text]
    assert not leaked, f"solution lines shown on the theory page: {leaked[:5]}"
    assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text


# ---------------------------------------------------------------- in a real browser


@pytest.fixture(scope="module")
def server(site):
    """The built site over HTTP on a free port; the paths it answered 404 to."""
    misses: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def send_error(self, code, message=None, explain=None):
            if code == 404 and self.path != "/favicon.ico":    # asked by the browser itself
                misses.append(self.path)
            super().send_error(code, message, explain)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", misses
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def browser():
    why = browser_missing()
    if why:
        msg = f"docs browser test cannot run: {why}. Install with: {INSTALL_HINT}"
        if os.environ.get("TAS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TAS_REQUIRE_BROWSER=1 and {msg}", pytrace=False)
        pytest.skip(msg)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield b
        finally:
            b.close()


def _shots_dir() -> Path:
    d = Path(os.environ.get("TAS_ARTIFACTS") or ROOT / "artifacts") / "docs"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _not_blank(png: Path) -> int:
    """The number of distinct colours in a screenshot; fails when it is one colour."""
    from PIL import Image
    with Image.open(png) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    n = len(colours) if colours is not None else 1 << 20
    assert n > 16, f"{png.name} is blank ({n} colour(s))"
    return n


def test_the_site_in_a_browser(server, browser):
    base, misses = server
    shots = _shots_dir()
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(30_000)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))

    # the front page: the book's table of contents
    pg.goto(f"{base}/index.html", wait_until="load")
    assert "Training LLMs at scale" in pg.title()
    nav = pg.locator("nav.bd-links a").all_inner_texts()
    assert any("theory" in t.lower() or "book" in t.lower() for t in nav), f"no book in the navigation: {nav}"
    pg.screenshot(path=str(shots / "01_index.png"))
    _not_blank(shots / "01_index.png")

    # a theory chapter: its plots are loaded images
    pg.goto(f"{base}/theory/{SUBSET}.html", wait_until="load")
    widths = pg.eval_on_selector_all("article img[src*='_images/']", "els => els.map(e => e.naturalWidth)")
    assert widths and all(w > 0 for w in widths), f"plots not loaded (naturalWidth {widths})"
    first = pg.locator("article img[src*='_images/']").first
    first.scroll_into_view_if_needed()
    pg.screenshot(path=str(shots / "02_theory_plot.png"))
    _not_blank(shots / "02_theory_plot.png")

    # an API page: generated from the docstrings
    pg.goto(f"{base}/api/memory.html", wait_until="load")
    funcs = pg.locator("dl.py.function > dt").count()
    assert funcs >= 10, f"the memory API page documents {funcs} functions"
    assert pg.locator("dl.py.function dd").first.inner_text().strip(), "a function without its docstring"
    pg.screenshot(path=str(shots / "03_api_memory.png"))
    _not_blank(shots / "03_api_memory.png")

    ctx.close()
    assert not misses, f"the browser asked for files the site does not have: {misses}"
    assert not errors, f"JavaScript errors: {errors}"


# ---------------------------------------------------------------- the pieces, without a build


def test_filter_drops_every_output_of_a_cell_that_needed_an_answer():
    sys.path.insert(0, str(ROOT / "tools"))
    import docs_notebooks as dn
    out = nbformat.v4.new_output
    png = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("plot()", outputs=[out("display_data", data=png),
                                                     out("stream", name="stderr", text="UserWarning: x\n")]),
        nbformat.v4.new_code_cell("answer()", outputs=[out("stream", name="stdout", text="partial 3.14\n"),
                                                       out("error", ename="NotImplementedError", evalue="",
                                                           traceback=["Traceback ..."])]),
        nbformat.v4.new_code_cell("ref.f(1)", outputs=[out("execute_result", data={"text/plain": "<withheld ref.f>"},
                                                           execution_count=3)]),
        nbformat.v4.new_code_cell("print(2)", outputs=[out("stream", name="stdout", text="2\n")]),
    ])
    assert dn.filter_outputs(nb) == (2, 2)
    plot, answer, ref, plain = nb.cells
    assert [o.output_type for o in plot.outputs] == ["display_data"]          # stderr gone, plot kept
    for c in (answer, ref):
        assert [o["data"]["text/markdown"] for o in c.outputs] == [dn.DROPPED]  # nothing of the run is left
    assert plain.outputs[0]["text"] == "2\n"


def test_links_out_of_docs_become_api_pages_or_paths():
    sys.path.insert(0, str(ROOT / "docs" / "site"))
    import repo_links
    got = repo_links.rewrite("[m](../solutions_lib/memory.py) [r](../README.md#x) [g](GRADING.md) "
                             "[o](../solutions_lib/bench.py)", {"memory"})
    assert got == ("[m](../api/memory.md) r (`README.md`) [g](GRADING.md) o (`solutions_lib/bench.py`)")


def test_the_kernel_has_the_reference_answers_withheld(tmp_path):
    """A cell that calls a reference answer cannot show its value: the kernel imports the
    grading view, where the call gives a stand-in, and the filter drops the cell's output."""
    sys.path.insert(0, str(ROOT / "tools"))
    import docs_notebooks as dn
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import solutions_lib.schedules as s\nprint(repr(s.step_decay(10, 1.0, 5, 0.5)))"),
        nbformat.v4.new_code_cell("print(float(s.step_decay(10, 1.0, 5, 0.5)))"),
        nbformat.v4.new_code_cell("print(6 * 7)"),
    ])
    path = tmp_path / "probe" / "theory.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    out, modules = dn.execute(path, timeout=120)
    shown = [[o.get("text") or o.get("data", {}).get("text/markdown") for o in c.outputs] for c in out.cells]
    assert shown == [[dn.DROPPED], [dn.DROPPED], ["42\n"]], shown
    assert "solutions_lib.schedules" in modules
