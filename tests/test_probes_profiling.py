"""The kit of 09 ex2's tests (solutions_lib/probes_profiling.py): its closed forms against the model
they describe, and the fresh traces it makes hold what the hidden tests rely on."""
from __future__ import annotations

import pytest
import torch

from solutions_lib.probes_profiling import analysis_modules, gpt_case, gpt_params, profile_gpt

CFGS = [dict(vocab=40, seq_len=12, layers=3, d_model=32, heads=2), dict(vocab=97, seq_len=16, layers=1, d_model=48, heads=6)]


@pytest.mark.parametrize("cfg", CFGS)
def test_gpt_params_counts_the_models_parameters(cfg):
    model, _, x, y = gpt_case(cfg, 2, 0)
    assert gpt_params(cfg["vocab"], cfg["seq_len"], cfg["layers"], cfg["d_model"]) == \
        sum(p.numel() for p in model.parameters())
    assert x.shape == y.shape == (2, cfg["seq_len"]) and torch.equal(x[:, 1:], y[:, :-1])


def test_gpt_case_is_seeded():
    a, b = gpt_case(CFGS[0], 3, 7), gpt_case(CFGS[0], 3, 7)
    assert all(torch.equal(p, q) for p, q in zip(a[0].parameters(), b[0].parameters()))
    assert torch.equal(a[2], b[2])
    with pytest.raises(ValueError):
        gpt_case(CFGS[0], 0, 7)


def test_profile_gpt_has_one_annotated_step_with_its_gemms():
    cfg = CFGS[0]
    trace = profile_gpt(cfg, 3, 5)
    ann = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"
           and e.get("name") in ("forward", "backward", "optimizer")]
    assert sorted(ann) == ["backward", "forward", "optimizer"]
    mm = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e.get("name") in ("aten::mm", "aten::addmm")]
    assert len(mm) == 4 * cfg["layers"] + 1 + 2 * (4 * cfg["layers"] + 1)   # forward + backward GEMMs
    assert all("Input Dims" in e["args"] for e in mm)


def test_analysis_modules_are_the_profilers_and_the_memory_kit():
    names = {m.__name__ for m in analysis_modules()}
    assert names == {"torch.autograd.profiler_util", "torch.profiler.profiler", "torch.autograd.profiler",
                     "solutions_lib.memory"}
