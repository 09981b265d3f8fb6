"""The class similarity report (course/term_similarity.py, copydetect): two students with the
same code in one answer cell are listed, a different answer is not, the released code never
counts, and the page escapes what students control."""
import inspect
import json

import pytest

from solutions_lib import upstream
from solutions_lib.course.term_similarity import main, similarity_report


def _nb(cells: dict[str, str]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"id": gid, "cell_type": "code", "source": src, "outputs": [], "execution_count": None,
         "metadata": {"nbgrader": {"grade_id": gid, "solution": True, "grade": False, "locked": False}}}
        for gid, src in cells.items()]})


def test_similar_pairs_are_listed_and_the_page_is_escaped(tmp_path):
    given = "def helper(x):\n    '''given to everyone'''\n" + "".join(f"    x = x * {i} + {i}\n" for i in range(40)) + "    return x\n"
    mine = inspect.getsource(upstream.quality_flags)
    theirs = mine.replace("text", "doc").replace("quality_flags", "flags_of")
    other = "def quality_flags(text):\n    words = text.split()\n    return {'short': len(words) < 50}\n"
    (tmp_path / "release" / "A").mkdir(parents=True)
    (tmp_path / "release" / "A" / "nb.ipynb").write_text(_nb({"q1": given + "\ndef quality_flags(text):\n    raise NotImplementedError()\n"}))
    for student, code in {"ann": mine, "<b>bob": theirs, "cyd": other}.items():
        d = tmp_path / "submitted" / student / "A"
        d.mkdir(parents=True)
        (d / "nb.ipynb").write_text(_nb({"q1": given + "\n" + code}))
    out = tmp_path / "sim.html"
    pairs = similarity_report(tmp_path, "A", out, threshold=0.5)
    names = {frozenset((f1.split("/")[0], f2.split("/")[0])) for _, f1, f2 in pairs}
    assert names == {frozenset(("ann", "_b_bob"))}, pairs
    page = out.read_text()
    assert "<b>bob" not in page and "_b_bob/nb__q1.py" in page
    assert main(["A", "--root", str(tmp_path), "--out", str(out)]) == 0


def test_fewer_than_two_students_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "submitted" / "ann" / "A").mkdir(parents=True)
    assert main(["A", "--root", str(tmp_path)]) == 2
    assert "1 student(s) handed in; a comparison needs two" in capsys.readouterr().out
    with pytest.raises(ValueError, match="threshold"):
        similarity_report(tmp_path, "A", tmp_path / "x.html", threshold=0)
