"""solutions_lib.dist.checks_script (10 exercises 3): the helpers accept the notebook's solutions and
reject wrong answers from the bank with the message that names the slip."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.distributed as dist

from solutions_lib.course import notebooks as nbs
from solutions_lib.dist import launch_graded
from solutions_lib.dist import checks_script as C
from solutions_lib.grading import GradingError

from conftest import ROOT

NB = ROOT / "source" / "10_distributed_lab" / "exercises_3_training_script.ipynb"
BANK = ROOT / "tests" / "wrong_answers" / "10_distributed_lab" / "exercises_3_training_script"


def _answer(gid: str, name: str, wrong: str | None = None):
    cell = next(c for c in nbs.read(NB).cells if nbs.nbgrader_md(c).get("grade_id") == gid)
    ns = {"torch": torch, "dist": dist, "math": math, "argparse": argparse, "contextlib": contextlib}
    exec(nbs.strip_solution_markers(cell.source) if wrong is None else (BANK / wrong).read_text(), ns)
    return ns[name]


def test_lr_cases_are_reproducible_and_the_solution_meets_them():
    cases = C.lr_schedule_cases(np.random.default_rng(3), 5)
    assert cases == C.lr_schedule_cases(np.random.default_rng(3), 5) and len(cases) >= 5
    lr = _answer("lr_schedule", "lr_schedule")
    assert all(math.isclose(lr(*args), want, rel_tol=1e-9, abs_tol=1e-18) for args, want in cases)
    late = _answer("lr_schedule", "lr_schedule", "lr_schedule__cosine_never_reaches_floor.py")
    assert not all(math.isclose(late(*args), want, rel_tol=1e-9, abs_tol=1e-18) for args, want in cases)


def test_config_read_from_a_dict_a_dataclass_or_a_namespace():
    want = dict(C.CONFIG_DEFAULTS)
    Cfg = dataclasses.make_dataclass("Cfg", list(C.CONFIG_KEYS))
    assert C.as_config_dict(dict(want, extra=1)) == want
    assert C.as_config_dict(Cfg(**want)) == want
    assert C.as_config_dict(argparse.Namespace(**want)) == want
    assert C.as_config_dict({"steps": 3})["lr"] == "<missing>"
    assert C.as_config_dict("steps=3") == "steps=3"


def test_parse_config_cases_parse_with_the_solution():
    parse = _answer("parse_config", "parse_config")
    for argv, want in C.parse_config_cases(np.random.default_rng(7), 8):
        assert C.as_config_dict(parse(argv)) == want
    gloo = _answer("parse_config", "parse_config", "parse_config__backend_default_gloo.py")
    assert any(C.as_config_dict(gloo(argv)) != want for argv, want in C.parse_config_cases(np.random.default_rng(7), 8))


def test_amp_checks_accept_the_solution_and_catch_bf16_as_fp16():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g)
    x, w, y = torch.randn(5, 3, 12, generator=g), torch.randn(7, 12, generator=g), torch.randint(0, 7, (15,), generator=g)
    good = _answer("amp_setup", "amp_setup")
    C.expect_amp_modes(good, a, b)
    C.expect_amp_setups({m: [good(m, "cpu") for _ in range(2)] for m in ("fp16", "bf16", "none")}, x, w, y)
    wrong = _answer("amp_setup", "amp_setup", "amp_setup__bf16_as_fp16.py")
    with pytest.raises(GradingError, match="amp_setup\\('bf16', 'cpu'\\): dtype of a matmul"):
        C.expect_amp_modes(wrong, a, b)


def test_cleanup_checks_accept_the_solution_and_catch_a_missing_finally():
    good = _answer("cleanup_on_exit", "cleanup_on_exit")
    for fail_with in (None, RuntimeError):
        C.expect_cleanup(launch_graded(C.cleanup_rank, 2, args=(good, 3.0, fail_with), collective_timeout=10.0),
                         3.0, fail_with)
    wrong = _answer("cleanup_on_exit", "cleanup_on_exit", "cleanup_on_exit__no_finally.py")
    seen = launch_graded(C.cleanup_rank, 2, args=(wrong, 3.0, RuntimeError), collective_timeout=10.0)
    with pytest.raises(GradingError, match="dist.is_initialized\\(\\) afterwards"):
        C.expect_cleanup(seen, 3.0, RuntimeError)
