"""solutions_lib.checks_memory (03 exercises): the checks accept the notebook's solution and reject a
wrong answer from the bank with the message that names the slip."""
from __future__ import annotations

import copy
import inspect
import math

import numpy as np
import pytest
import torch

from solutions_lib import checks_memory as C
from solutions_lib import memory as ref
from solutions_lib.course import notebooks as nbs
from solutions_lib.grading import GradingError

from conftest import ROOT

NB = ROOT / "source" / "03_memory" / "exercises.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "03_memory" / "exercises"


@pytest.fixture(scope="module")
def good():
    """The solved notebook's namespace (setup and answer cells)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = {"np": np, "torch": torch, "math": math, "copy": copy, "inspect": inspect, "plt": plt}
    for c in nbs.read(NB).cells:
        md = nbs.nbgrader_md(c)
        if c.cell_type == "code" and (md.get("solution") or "GPUS = " in c.source or "sizes_c = " in c.source):
            exec(nbs.strip_solution_markers(c.source), ns)      # setup and answers, not the demos
    return ns


def _wrong(good, name):
    ns = dict(good)
    exec((BANK / f"{name}.py").read_text(), ns)
    return ns


def test_part_a(good):
    g = good
    assert not C.layer_raises(g["layer_activation_bytes"])
    want_gb = {"fp32": 33.383069696, "amp": 20.498167808, "amp_ckpt4": 8.183691264}
    want_fits = {k: {c: v <= cap for c, cap in g["GPUS"].items()} for k, v in
                 (("fp32", 33.383069696e9), ("amp", 20.498167808e9), ("amp_ckpt4", 8.183691264e9))}
    table = C.ch26_08_table(g["training_memory"], g["fits"])
    C.check_ch26_08(*table, want_gb, want_fits, g["layer_activation_bytes"], g["GPUS"])
    cases, totals = C.training_memory_cases(1, n=5, n_totals=5)
    C.compare_training_memory(cases, [g["training_memory"](*c) for c in cases],
                              [ref.training_memory(*c[:7], checkpoint_every=c[7], checkpoint_model="segments") for c in cases],
                              totals, [g["fits"](t) for t in totals], [ref.fits_on(t) for t in totals])
    bad = _wrong(good, "memory_calculator_answer__amp_without_master")
    with pytest.raises(GradingError, match="state of ch26_08"):
        C.check_ch26_08(*C.ch26_08_table(bad["training_memory"], bad["fits"]), want_gb, want_fits,
                        bad["layer_activation_bytes"], bad["GPUS"])


def test_parts_b_and_layouts(good):
    g = good
    names = ("ckpt_memory", "ckpt_overhead", "epoch_time", "best_k_memory", "best_k_time", "best_time",
             "best_k_time_saturated", "best_time_saturated")
    C.check_interval(*(g[n] for n in names))
    bad = _wrong(good, "interval_answer__overhead_inverted")
    with pytest.raises(GradingError, match="ckpt_overhead"):
        C.check_interval(*(bad[n] for n in names))
    assert C.layout_peak(g["sizes_c"], range(3, 48, 4)) == 123.0
    C.check_my_layout(g["my_kept_c"], g["sizes_c"])
    with pytest.raises(GradingError, match="the peak of your layout"):
        C.check_my_layout(range(3, 48, 4), g["sizes_c"])
    for sizes, kept in C.layout_cases(2, n=5):
        assert math.isclose(C.layout_peak(sizes, kept), ref.checkpoint_layout_bytes(sizes, kept), rel_tol=1e-12)


def test_estimator_and_prediction(good):
    g = good
    C.check_estimator(g["estimate_memory_consumption"])
    bad = _wrong(good, "estimator_answer__caller_model_changed")
    with pytest.raises(GradingError, match="caller's model.checkpointing"):
        C.check_estimator(bad["estimate_memory_consumption"])
    cfg = C.prediction_cases(3, n=3)[0]
    assert C.measured_saved_bytes(*cfg) == C.measured_saved_bytes(*cfg) > 0
    assert abs(g["predict_saved_bytes"](*cfg[:6], checkpointing=cfg[6], checkpoint_every=cfg[7]) / C.measured_saved_bytes(*cfg) - 1) < 0.1


def test_zero(good):
    g = good
    want = {"DDP": 112.0, "ZeRO-1": 63.0, "ZeRO-2": 38.5, "ZeRO-3": 14.0}
    C.check_ch26_18(g["ch26_18_gb"], g["ch26_18_stage"], g["min_stage"], want)
    cases, caps = C.zero_cases(4, n=5)
    from solutions_lib import upstream
    assert all(upstream.zero_table(*c) == pytest.approx(ref.zero_table(*c)) for c in cases)  # the course copy the hidden test swaps in
    bad = _wrong(good, "zero_table_answer__stages_1_2_swapped")
    with pytest.raises(GradingError, match="ch26_18_gb"):
        C.check_ch26_18(bad["ch26_18_gb"], bad["ch26_18_stage"], bad["min_stage"], want)
