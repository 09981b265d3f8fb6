"""Copied code (course/copycheck.py): a copy of the course's code, renamed or not, is flagged
with what it copies; honest answers written differently, short formulas and the code every
student is given are not; two students with the same code are flagged both, and the grade
report carries both rules."""
import inspect
import json
import textwrap

import pytest

from solutions_lib import upstream
from solutions_lib.course import copycheck as cc
from solutions_lib.course.report import Report, _add_similar, _copies
from solutions_lib.dist import context_parallel


@pytest.fixture(scope="module", autouse=True)
def _library():
    cc.library_units()  # built once (a few seconds)


def _renamed(src: str, pairs: dict[str, str]) -> str:
    for a, b in pairs.items():
        src = src.replace(a, b)
    return src


def test_verbatim_and_renamed_copies_of_a_course_copy_are_flagged():
    src = inspect.getsource(upstream.minhash_signature)
    assert [m.other for m in cc.copied_library(src)] == ["solutions_lib.upstream.minhash_signature"]
    renamed = _renamed(src, {"shingle_set": "shingles", "num_perm": "k", "seed": "s0", "minhash_signature": "mine"})
    renamed = renamed.replace('"""', '"""My own words. ', 1)
    (m,) = cc.copied_library(renamed)
    assert m.unit == "mine" and m.other == "solutions_lib.upstream.minhash_signature" and m.shared >= 0.95


def test_a_reference_answer_and_a_copied_class_are_flagged():
    from solutions_lib import debugging
    src = inspect.getsource(debugging.label_shift_problems)
    assert "solutions_lib.debugging.label_shift_problems" in {m.other for m in cc.copied_library(src)}
    ring = inspect.getsource(context_parallel._RingAttention)
    found = {(m.unit, m.other) for m in cc.copied_library(ring)}
    assert ("_RingAttention", "solutions_lib.dist.context_parallel._RingAttention") in found


def test_a_copy_with_lines_added_is_still_flagged():
    src = inspect.getsource(upstream.bucket_plan)
    body_at = src.index('"""', src.index('"""') + 3) + 4       # after the docstring
    added = "    if not sizes_bytes:\n        return []\n    total = sum(sizes_bytes)\n    assert total >= 0\n"
    assert cc.copied_library(src[:body_at] + added + src[body_at:])


HONEST = {
    "wsd": '''
def wsd(step, peak_lr, warmup_steps, total_steps, decay_fraction=0.1, min_lr=0.0, shape="linear"):
    import math
    n_decay = math.ceil(round(decay_fraction * total_steps, 9))
    if shape not in {"linear", "sqrt"}:
        raise ValueError(f"shape must be linear or sqrt, not {shape}")
    if n_decay + warmup_steps > total_steps:
        raise ValueError("warm-up and decay overlap")
    cooldown_from = total_steps - n_decay
    if step >= total_steps:
        lr = min_lr
    elif step >= cooldown_from:
        frac = (step + 1 - cooldown_from) / n_decay
        keep = 1 - frac if shape == "linear" else 1 - math.sqrt(frac)
        lr = min_lr + keep * (peak_lr - min_lr)
    elif step < warmup_steps:
        lr = peak_lr * (step + 1) / warmup_steps
    else:
        lr = peak_lr
    return lr
''',
    "minhash": '''
def minhash_signature(shingle_set, num_perm=128, seed=0):
    import hashlib
    sig = []
    for i in range(num_perm):
        best = None
        for s in shingle_set:
            d = hashlib.sha1(f"{seed}:{i}:{s}".encode()).digest()
            v = int.from_bytes(d[:8], "big")
            best = v if best is None or v < best else best
        sig.append(best if best is not None else 2 ** 64 - 1)
    return sig
''',
    "buckets": '''
def bucket_plan(sizes_bytes, cap_bytes):
    if cap_bytes <= 0:
        raise ValueError("cap must be positive")
    plan, current, used = [], [], 0
    for index in reversed(range(len(sizes_bytes))):
        size = sizes_bytes[index]
        if current and used + size > cap_bytes:
            plan.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    return plan + [current] if current else plan
''',
    "short formula": '''
def ring_allreduce_time(n, nbytes, alpha, bandwidth):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bandwidth
''',
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_answers_written_differently_are_not_flagged(name):
    assert cc.copied_library(textwrap.dedent(HONEST[name])) == []


def test_code_given_in_the_release_is_not_held_against_the_student():
    given = inspect.getsource(upstream.fit_alpha_beta)   # pretend the release hands this out
    answer = given + "\n\ndef my_answer(x):\n    return x + 1\n"
    assert cc.copied_library(answer) and cc.copied_library(answer, given) == []


def test_unparsable_or_magic_cells_give_no_unit():
    assert cc.units_of("def f(:\n  pass") == []
    assert [u.name for u in cc.units_of("%time x = 1\ndef f():\n    return 1\n")] == ["f"]


def test_similar_answers_flag_both_students_and_only_them():
    mine = inspect.getsource(upstream.layer_activation_bytes)
    theirs = _renamed(mine, {"seq_len": "s", "batch": "b", "hidden": "h"})
    other = textwrap.dedent(HONEST["wsd"])
    units = {"ann": cc.answer_units(mine), "bob": cc.answer_units(theirs), "cyd": cc.answer_units(other)}
    pairs = cc.similar_answers(units)
    assert sorted((s, m.other) for s, m in pairs) == [("ann", "bob's answer"), ("bob", "ann's answer")]
    short = {"x": cc.answer_units("def f(a):\n    return a * 2\n"), "y": cc.answer_units("def f(a):\n    return a * 2\n")}
    assert cc.similar_answers(short) == []


def _nb(source: str, solution=True) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"id": "c0", "cell_type": "code", "source": source, "metadata": {"nbgrader": {
                "grade_id": "ans", "solution": solution, "grade": False, "locked": False}},
                "outputs": [], "execution_count": None}]}


def test_report_flags_copies_and_similar_answers(tmp_path):
    (tmp_path / "release" / "A").mkdir(parents=True)
    (tmp_path / "release" / "A" / "nb.ipynb").write_text(json.dumps(_nb("def f():\n    raise NotImplementedError()\n")))
    copied = inspect.getsource(upstream.quality_flags)
    for student in ("ann", "bob"):
        d = tmp_path / "submitted" / student / "A"
        d.mkdir(parents=True)
        (d / "nb.ipynb").write_text(json.dumps(_nb(copied)))
    (tmp_path / "bad.ipynb").write_text("not json")
    assert _copies(tmp_path / "bad.ipynb", tmp_path) == []
    rep, answers = Report(), {}
    for student in ("ann", "bob"):
        (gid, units, matches), = _copies(tmp_path / "submitted" / student / "A" / "nb.ipynb", tmp_path)
        assert gid == "ans" and [m.other for m in matches] == ["solutions_lib.upstream.quality_flags"]
        answers.setdefault(("A", "nb.ipynb", gid), {})[student] = units
        rep.students.append({"student": student, "assignment": "A", "flags": 1, "flag_rules": "copied_library"})
        rep.questions.append({"student": student, "assignment": "A", "notebook": "nb.ipynb", "flags": "copied_library"})
    _add_similar(rep, answers)
    assert {(f["student"], f["rule"], f["snippet"].split(" the code of ")[1]) for f in rep.flags} == {
        ("ann", "similar_answers", "bob's answer"), ("bob", "similar_answers", "ann's answer")}
    assert all(r["flags"] == 2 and r["flag_rules"] == "copied_library;similar_answers" for r in rep.students)
    assert all(r["flags"] == "copied_library;similar_answers" for r in rep.questions)
