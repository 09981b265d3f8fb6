"""The class report: its numbers against a hand computation on a small graded class
(tests/term_class.py), a self-contained page, and (where Chromium and Playwright are there)
the page rendered in a real headless browser with a screenshot in artifacts/browser/."""
from __future__ import annotations

import base64
import datetime as dt
import io
import os
import re

import pytest

from solutions_lib.course.term_report import build_stats, main, pearson, render_html

from term_class import build_class, fast_gradebooks

NOW = dt.datetime(2026, 2, 1)


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        fast_gradebooks(mp)
        return build_class(tmp_path_factory.mktemp("term_report"))


@pytest.fixture(scope="module")
def stats(klass):
    return build_stats(klass, now=NOW)


def test_numbers_match_a_hand_computation(stats):
    # A1 scores of the fully graded: s1 2+4+2 = 8, s2 2+2+1-0.5 = 4.5, s3 0 (s4 awaits a grader,
    # s5 failed to run, s6 handed in nothing: counted beside the distribution, not in it)
    assert stats.scores == {"A1": [8.0, 4.5, 0.0], "A2": [1.0]}
    assert stats.status_counts["A1"] == {"graded": 3, "awaiting_grader": 1, "failed_to_run": 1, "missing": 1}
    q = {x.grade_id: x for x in stats.questions}
    # difficulty: q1 (2,2,0,2)/2 -> 0.75; q2 (4,2,0,0)/4 -> 0.375; w1 (2,1,0)/2 -> 0.5 (s4 awaits a grader)
    assert (q["q1"].n, q["q1"].difficulty) == (4, 0.75)
    assert (q["q2"].n, q["q2"].difficulty) == (4, 0.375)
    assert (q["w1"].n, q["w1"].difficulty) == (3, 0.5)
    # discrimination, item vs rest of A1 (totals s1..s4 = 8, 5, 0, 2):
    # q1: x=(2,2,0,2), rest=(6,3,0,0): dx=(.5,.5,-1.5,.5) dy=(3.75,.75,-2.25,-2.25) ->
    #     sxy=4.5, sxx=3, syy=24.75, r = 4.5/sqrt(74.25) = 0.52223
    # q2: x=(4,2,0,0), rest=(4,3,0,2) -> sxy=8.5, sxx=11, syy=8.75, r = 8.5/sqrt(96.25) = 0.86640
    # w1: x=(2,1,0), rest=(6,4,0) -> sxy=6, sxx=2, syy=18.667, r = 6/sqrt(37.333) = 0.98198
    assert q["q1"].discrimination == pytest.approx(4.5 / 74.25 ** 0.5)
    assert q["q2"].discrimination == pytest.approx(8.5 / 96.25 ** 0.5)
    assert q["w1"].discrimination == pytest.approx(6 / (2 * 56 / 3) ** 0.5)
    assert q["q3"].discrimination is None  # one student: no correlation
    # mastery: S-1 = (q1 2+2+0+2 + q2 4+2+0+0) / (4x2 + 4x4) = 12/24; S-2 = (q2 6 + w1 3) / (16 + 6); S-3 = 1/1
    assert stats.mastery == {"S-1": (12.0, 24.0, 8), "S-2": (9.0, 22.0, 7), "S-3": (1.0, 1.0, 1)}
    assert [f[:3] for f in stats.failed] == [("s5", "A1", "ex.ipynb")]
    assert "did not run to the end" in stats.failed[0][3]


def test_pearson_edge_cases():
    assert pearson([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert pearson([1, 1, 1], [3, 2, 1]) is None  # no spread
    assert pearson([1, 2], [1, 2]) is None        # too few


def test_page_is_self_contained_and_escapes_names(stats, klass, tmp_path, capsys):
    stats.failed.append(("<script>alert(1)</script>", "A1", "ex.ipynb", "<img src=http://evil>"))
    page = render_html(stats)
    stats.failed.pop()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert not re.search(r"<[^>]*\b(src|href)=['\"]?(https?:|//)", page)  # no tag loads from a server
    assert "&lt;img src=http://evil&gt;" in page
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(imgs) == 3
    from PIL import Image
    for b in imgs:
        im = Image.open(io.BytesIO(base64.b64decode(b)))
        assert im.size[0] > 200 and im.size[1] > 100
    assert "Content-Security-Policy" in page and "0.522" in page and "0.866" in page
    out = tmp_path / "class.html"
    assert main(["--root", str(klass), "--out", str(out), "--now", "2026-02-01 00:00:00 UTC"]) == 0
    assert out.stat().st_size > 10_000
    assert main(["--root", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert "class report:" in capsys.readouterr().err


def test_report_renders_in_a_real_browser(klass, tmp_path):
    from browser_support import CHROMIUM, INSTALL_HINT, artifacts_dir, browser_missing
    from conftest import ROOT

    why = browser_missing()
    if why:
        msg = f"class report browser check cannot run: {why}. Install with: {INSTALL_HINT}"
        if os.environ.get("TAS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TAS_REQUIRE_BROWSER=1 and {msg}", pytrace=False)
        pytest.skip(msg)
    from PIL import Image, ImageStat
    from playwright.sync_api import sync_playwright

    page_path = tmp_path / "class_report.html"
    assert main(["--root", str(klass), "--out", str(page_path), "--now", "2026-02-01 00:00:00 UTC"]) == 0
    shot = artifacts_dir(ROOT) / "term_class_report.png"
    requests = []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--disable-gpu", "--disable-dev-shm-usage"])
        try:
            page = b.new_page(viewport={"width": 1100, "height": 1400})
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load", timeout=30_000)
            widths = page.eval_on_selector_all("img", "els => els.map(e => e.complete ? e.naturalWidth : 0)")
            heading = page.inner_text("h1")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            b.close()
    assert len(widths) == 3 and min(widths) > 200, widths  # every plot decoded
    assert heading.startswith("Class report")
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
    im = Image.open(shot).convert("L")
    assert im.size[1] > 1000
    assert ImageStat.Stat(im).stddev[0] > 10, "the screenshot is blank"
