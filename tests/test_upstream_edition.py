"""What the student edition holds of the course's answers (issue 25).

- The course copies in `upstream.STUDENT_OWN` are used only in the notebook where the student
  writes that answer, so the student edition ships `OwnAnswer` stand-ins that call the
  student's own function; `swapped` keeps the student's own in place.
- Measured with copycheck: every answer of the course whose code the student edition still
  holds is listed, with its reason, in `student_kit.KNOWN_COPIES`; a new one fails here.
"""
import functools
import re
import types

import pytest

from solutions_lib import upstream
from solutions_lib.course import notebooks as nbs
from solutions_lib.course.paths import course_root
from solutions_lib.course.student_kit import KNOWN_COPIES, answer_copies, package_files

ROOT = course_root()
_files = functools.lru_cache(maxsize=1)(package_files)


def _uses(pattern: str, folder: str) -> set[str]:
    out = set()
    for p in sorted((ROOT / folder).glob("*/*.ipynb")):
        if any(c.cell_type == "code" and re.search(pattern, c.source) for c in nbs.read(p).cells):
            out.add(f"{p.parent.name}/{p.name}")
    return out


@pytest.mark.parametrize("name", upstream.STUDENT_OWN)
def test_an_own_answer_copy_is_used_only_where_the_student_writes_it(name):
    defines = {f"{p.parent.name}/{p.name}" for p in sorted((ROOT / "source").glob("*/*.ipynb"))
               if any(nbs.nbgrader_md(c).get("solution") and re.search(rf"^\s*def {name}\(", c.source, re.M)
                      for c in nbs.read(p).cells)}
    used = _uses(rf"\b(upstream|_up)\.{name}\b|upstream import[^\n]*\b{name}\b", "release")
    assert defines, f"no answer cell defines {name}"
    assert used <= defines, f"upstream.{name} is used in {sorted(used - defines)}, which has no answer {name}: " \
                            "keep the copy (remove it from upstream.STUDENT_OWN)"
    kit = [rel for rel, text in _files().items() if rel != "upstream.py"
           and re.search(rf"upstream\.{name}\b|upstream import[^\n]*\b{name}\b", text)]
    assert not kit, f"the kit modules {kit} call upstream.{name}"


def _student_upstream():
    text = _files()["upstream.py"]
    m = types.ModuleType("solutions_lib.upstream")
    exec(compile(text, "upstream (student edition)", "exec"), m.__dict__)
    return text, m


def test_the_student_edition_holds_no_own_answer_and_calls_the_students_own(monkeypatch):
    text, m = _student_upstream()
    for name in upstream.STUDENT_OWN:
        assert f"def {name}(" not in text and isinstance(getattr(m, name), m.OwnAnswer)
    kept = [f.__name__ for f in upstream.ANSWERS if f.__name__ not in upstream.STUDENT_OWN]
    assert all(f"def {n}(" in text for n in kept)
    import __main__
    monkeypatch.setattr(__main__, "minhash_signature", lambda s, num_perm=128, seed=0: ["mine", num_perm], raising=False)
    assert m.minhash_signature({"a"}, 3) == ["mine", 3]
    ns = {"wsd": "the student's wsd"}
    with m.swapped(ns, wsd=m.wsd, layout_step_time=m.layout_step_time):
        assert ns["wsd"] == "the student's wsd" and ns["layout_step_time"].__name__ == "layout_step_time"
    assert ns == {"wsd": "the student's wsd"}
    assert not any(isinstance(f, m.OwnAnswer) for f in m.forbidden_except())
    with pytest.raises(NameError, match="no course copy of wsd; run the cell that defines your own wsd"):
        m.wsd(1, 1.0, 1, 10)


def test_the_full_edition_keeps_every_copy():
    assert not any(isinstance(f, upstream.OwnAnswer) for f in upstream.ANSWERS)
    assert upstream.wsd(0, 1.0, 2, 10) == 0.5


def test_every_answer_the_student_edition_still_holds_is_known_and_said_why():
    found = answer_copies()
    unknown = sorted({(nb, gid, f"{unit} ~ {kit} ({shared:.0%})") for nb, gid, unit, kit, shared in found
                      if (nb, gid) not in KNOWN_COPIES})
    assert not unknown, ("the student edition holds a copy of these answers (withhold the module, or move the "
                         f"oracle to a withheld one): {unknown}")
