"""Bounded grader work (issue 26, attack 2): a forged record of a measured check can name a
reference and arguments for the grader to recompute. The grader now redoes only a reference
that the test cell's own source names, in a child process with a time and memory limit, so a
huge argument costs the grader seconds, not the class."""
from __future__ import annotations

import time

from solutions_lib.course import integrity

FIT = "solutions_lib.comms.fit_alpha_beta"


def _fit_call(**kw):
    return {"name": FIT, "args": [[1e3, 1e4, 1e5, 1e6], [1e-5, 2e-5, 1.1e-4, 1.01e-3]], "kwargs": {}, "index": [0], **kw}


def test_a_named_reference_is_redone():
    got = integrity.redo_reference(_fit_call(), {FIT})
    assert got is not None and abs(got - 9.159e-06) < 1e-8


def test_only_the_references_the_cell_names():
    assert integrity._names_in("a_ref, b_ref = ref.fit_alpha_beta(S_[mask], m_[mask])") == {FIT}
    assert integrity.redo_reference(_fit_call(), {"solutions_lib.comms.ring_allreduce_time"}) is None
    assert integrity.redo_reference({"name": "os.system", "args": ["true"], "kwargs": {}, "index": []}, None) is None


def test_a_huge_argument_costs_the_grader_seconds(monkeypatch):
    monkeypatch.setattr(integrity, "REDO_SECONDS", 3)
    t0 = time.monotonic()
    # sgdr_restarts(1, 1, 3e7) took 1.5 GB and minutes inside the grader before
    assert integrity.redo_reference({"name": "solutions_lib.schedules.sgdr_restarts", "args": [1, 1, 3e7],
                                     "kwargs": {}, "index": []}, None) is None
    assert time.monotonic() - t0 < 15
