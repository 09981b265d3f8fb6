"""The grader-side checks of 12 ex1 and ex2 (solutions_lib/checks_moe.py, checks_fp8.py): the
references pass, an answer that delegates to a course copy is caught by the default guard, and a
cell's own guard is used, with the task's name, instead (a grader-side cell passes its
`no_delegation`, which watches the student's kernel)."""
from __future__ import annotations

import contextlib

import pytest
import torch

from solutions_lib import checks_fp8, checks_moe, fp8, moe, probes_fp8, probes_moe
from solutions_lib.grading import DelegationError


def _own_keep(experts, n_experts, capacity):
    """A capacity_keep written here (GShard's order, a plain loop): not a course copy."""
    T, k = experts.shape
    used, keep = [0] * n_experts, torch.zeros(T, k, dtype=torch.bool)
    for j in range(k):
        for t in range(T):
            e = int(experts[t, j])
            keep[t, j] = used[e] < capacity
            used[e] += bool(keep[t, j])
    return keep


def test_probes_re_export_the_checks_unchanged():
    assert probes_moe.check_capacity is checks_moe.check_capacity and probes_moe.course_keep is checks_moe.course_keep
    assert probes_fp8.saturated is checks_fp8.saturated and probes_fp8.check_quantize_mx is checks_fp8.check_quantize_mx
    assert set(checks_fp8.__all__) <= set(probes_fp8.__all__)


def test_check_capacity_passes_an_own_answer_and_catches_the_course_copy():
    checks_moe.check_capacity(moe.expert_capacity, _own_keep, seed=5, tokens=12, n_experts=4, k=2,
                              capacities=[0, 2, 5], label="own")
    with pytest.raises(DelegationError):
        checks_moe.check_capacity(moe.expert_capacity, lambda e, n, c: checks_moe.course_keep(e, n, c), seed=5,
                                  tokens=12, n_experts=4, k=2, capacities=[2], label="copy")


def test_the_cells_guard_is_used_with_each_task_name():
    seen = []

    def guard(task):
        seen.append(task)
        return contextlib.nullcontext()

    checks_moe.check_bias(moe.biased_route, moe.update_bias, seed=3, tokens=9, n_experts=4, k=2, label="ref",
                          guard=guard)
    checks_moe.check_load_report(moe.load_report, torch.tensor([[0, 1], [1, 2]]), 4, 2, 1.0, label="ref",
                                 guard=guard)
    checks_fp8.check_quantize_mx(fp8.quantize_mx, torch.randn(2, 64), 32, checks_fp8.E4M3, "ref",
                                 guard=lambda: guard("quantize_mx"))
    assert seen == ["biased_route", "update_bias", "load_report", "quantize_mx"]


def test_check_quantize_mx_default_guard_catches_the_reference():
    with pytest.raises(DelegationError):
        checks_fp8.check_quantize_mx(lambda x, b, d: fp8.quantize_mx(x, b, d), torch.randn(2, 64), 32,
                                     checks_fp8.E4M3, "delegates")
