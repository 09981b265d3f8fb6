"""The memory-optimal sequence-parallel entry (`tensor_parallel.sp_column_linear`, Korthikanti et al.
2022, sec. 4.2.2) and the probes that grade 11 exercises 1, Part D (`dist/probes_tp.py`).

Oracle: one process running the whole `nn.Linear` (float64) through plain autograd
(`tp_lab.one_process`). Saved bytes are measured with saved-tensor hooks and the ctx attributes of
custom Functions; collectives with CommCounter. The probes must also fail the two classic wrong
versions: the one that keeps the gathered input (right gradients, t times the memory) and the one
that does not gather again in backward (a stale input: wrong weight gradient).
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from solutions_lib.dist import launch
from solutions_lib.dist import probes_tp as probes
from solutions_lib.dist import tp_lab
from solutions_lib.dist.fake_world import FakeWorld
from solutions_lib.dist.tensor_parallel import sp_column_linear, tp_comm_calls_per_step
from solutions_lib.grading import GradingError

pytestmark = pytest.mark.xdist_group("dist_tp")

CASE2 = dict(seed=3, sizes=[6, 8], batch=2, seq=4)
CASE4 = dict(seed=4, sizes=[5, 8], batch=3, seq=8, bias=False)


def _gather(x):
    t = dist.get_world_size()
    parts = [torch.empty_like(x) for _ in range(t)]
    dist.all_gather(parts, x.contiguous())
    return torch.cat(parts, dim=1)


def _reduce_scatter(g):
    t, r = dist.get_world_size(), dist.get_rank()
    g = g.contiguous().clone()
    dist.all_reduce(g)
    return g.chunk(t, dim=1)[r].contiguous()


class _KeepsGathered(torch.autograd.Function):
    """Wrong: keeps the gathered input (ctx attribute, which no saved-tensor hook sees)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.full, ctx.weight, ctx.has_bias = _gather(x), weight, bias is not None
        return F.linear(ctx.full, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        _gather(ctx.full[:, :1])        # the backward all-gather, on a stand-in tensor
        gx = _reduce_scatter(grad @ ctx.weight)
        return gx, grad.flatten(0, 1).t() @ ctx.full.flatten(0, 1), grad.sum((0, 1)) if ctx.has_bias else None


class _NoRegather(torch.autograd.Function):
    """Wrong: keeps the shard but uses it with zeros for the other ranks' tokens in backward."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return F.linear(_gather(x), weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        t, r, k = dist.get_world_size(), dist.get_rank(), x.shape[1]
        full = torch.zeros(x.shape[0], t * k, x.shape[2], dtype=x.dtype)
        full[:, r * k:(r + 1) * k] = x
        _gather(x)
        gx = _reduce_scatter(grad @ weight)
        return gx, grad.flatten(0, 1).t() @ full.flatten(0, 1), grad.sum((0, 1)) if ctx.has_bias else None


def _naive(x, weight, bias):
    return F.linear(tp_lab.GatherFromSP.apply(x), weight, bias)


_FNS = {"reference": tp_lab.SPColumnLinear.apply, "keeps_gathered": _KeepsGathered.apply,
        "no_regather": _NoRegather.apply, "naive": _naive}


def _rank(rank, world, name, case):
    return probes.run_sp_column(_FNS[name], rank, world, case)


def _layer_rank(rank, world, name, case):
    return probes.run_sp_layer(_FNS[name], rank, world, case)


@pytest.mark.parametrize("world,case", [(2, CASE2), (4, CASE4)])
def test_reference_matches_one_process_keeps_one_tth_and_counts(world, case):
    res = launch(_rank, world, args=("reference", case))
    probes.expect_sp_column_grads(res, world, case)
    probes.expect_sp_column_saved(res, world, case)
    probes.expect_sp_column_comm(res, world, case)
    shard = 8 * case["batch"] * (case["seq"] // world) * case["sizes"][0]
    for r in res:
        assert r["naive"] == world * shard                  # the gathered (b, s, n_in) input
        assert r["saved"] == shard                          # exactly the shard: 1/t


def test_whole_layer_six_all_gathers_four_reduce_scatters():
    case = dict(seed=5, hidden=8, heads=2, batch=2, seq_len=4)
    res = launch(_layer_rank, 2, args=("reference", case))
    probes.expect_sp_layer_comm(res, 2, case)
    calls = tp_comm_calls_per_step(1, 2, sequence_parallel=True, grad_sync=False)
    assert (res[0]["comm"]["all_gather"][0], res[0]["comm"]["reduce_scatter"][0]) == (
        calls["all_gather_into_tensor"], calls["reduce_scatter_tensor"]) == (6, 4)


def test_naive_layer_is_four_and_four():
    case = dict(seed=5, hidden=8, heads=2, batch=2, seq_len=4)
    res = launch(_layer_rank, 2, args=("naive", case))
    with pytest.raises(GradingError, match="6 all-gathers"):
        probes.expect_sp_layer_comm(res, 2, case)
    assert res[0]["comm"]["all_gather"][0] == 4 and res[0]["comm"]["reduce_scatter"][0] == 4


@pytest.mark.parametrize("name", ["naive", "keeps_gathered"])
def test_keeping_the_gathered_input_fails_the_memory_check(name):
    res = launch(_rank, 2, args=(name, CASE2))
    probes.expect_sp_column_grads(res, 2, CASE2)            # the numbers are right...
    assert all(r["saved"] == r["naive"] for r in res)       # ...seen even as a ctx attribute
    with pytest.raises(GradingError, match="bytes kept for backward"):
        probes.expect_sp_column_saved(res, 2, CASE2)


def test_no_regather_fails_the_gradients_but_not_the_memory():
    res = launch(_rank, 2, args=("no_regather", CASE2))
    probes.expect_sp_column_saved(res, 2, CASE2)
    with pytest.raises(GradingError, match="weight gradients"):
        probes.expect_sp_column_grads(res, 2, CASE2)


def test_saved_bytes_counts_each_storage_once_and_skips_parameters():
    w = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    with probes.SavedBytes(w) as saved:
        y = F.linear(x, w) * F.linear(x, w).sum()
    saved.add_graph(y)
    # x once (both linears), the two (5, 3) products the multiplication keeps; w left out
    assert saved.total == 8 * (5 * 4 + 5 * 3 + 1)


def test_reference_refuses_bad_shapes_before_any_collective():
    w, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    with FakeWorld(2):
        with pytest.raises(ValueError, match="in_features"):
            sp_column_linear(torch.randn(2, 3, 5, dtype=torch.float64), w, b)
        with pytest.raises(ValueError, match="bias"):
            sp_column_linear(torch.randn(2, 3, 6, dtype=torch.float64), w, b[:3])
        with pytest.raises(ValueError, match="3-D"):
            sp_column_linear(torch.randn(3, 6, dtype=torch.float64), w, b)
        assert sp_column_linear(torch.randn(2, 3, 6, dtype=torch.float64), w, b).shape == (2, 6, 4)


class _Delegates(torch.autograd.Function):
    """Wrong: hands the work to the course's reference inside its own Function."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        return tp_lab.SPColumnLinear.apply(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        return None, None, None


def test_launch_refuses_the_course_class_and_delegation():
    with pytest.raises(GradingError, match="SPColumnLinear"):
        probes.launch_sp_column(tp_lab.SPColumnLinear, 2, CASE2)
    with pytest.raises(GradingError, match="SPColumnLinear"):
        probes.launch_sp_column(_Delegates, 2, CASE2)
