"""Pipeline parallelism by hand (solutions_lib.dist.pipeline) against one process.

Oracle: the whole CheckpointedTransformer in one process accumulating (loss_i / m).backward()
over the same m micro-batches. Each stage's gradients are compared by parameter name; the
executed orders give the measured bubble (idle slots) against (p-1)/(m+p-1) and the measured
peak of in-flight micro-batches (AFAB m, 1F1B min(p - s, m) <= p).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from solutions_lib.dist import launch
from solutions_lib.dist.pipeline import (PipelineStage, pipeline_p2p_bytes, pipeline_timeline, run_1f1b, run_afab,
                                         schedule_order, split_transformer)
from solutions_lib.models import CheckpointedTransformer
from solutions_lib.parallel import pipeline_bubble_fraction

pytestmark = pytest.mark.xdist_group("dist_pp")

V, H, A, S, MB = 11, 8, 2, 6, 2


def _model(layers):
    return CheckpointedTransformer(vocab=V, hidden=H, heads=A, layers=layers, max_seq=S, seed=0).double()


def _batches(m, seed=1):
    g = torch.Generator().manual_seed(seed)
    return ([torch.randint(0, V, (MB, S), generator=g) for _ in range(m)],
            [torch.randint(0, V, (MB, S), generator=g) for _ in range(m)])


def _loss(logits, target):
    return F.cross_entropy(logits.reshape(-1, V), target.reshape(-1))


def _pp_rank(rank, world, m, layers):
    out = {schedule: _pp_schedule(rank, world, schedule, m, layers) for schedule in ("afab", "1f1b")}
    errors = []
    part = split_transformer(_model(layers), world)[rank]
    for bad in (lambda: PipelineStage(part, (MB, S, H), torch.float64),            # the last stage needs a loss
                lambda: PipelineStage(part, (MB, 0, H), torch.float64, loss_fn=_loss),
                lambda: run_afab(PipelineStage(part, (MB, S, H), torch.float64, loss_fn=_loss), [0, 1], [0])):
        try:
            bad()
            errors.append(None)
        except ValueError as e:
            errors.append(str(e))
    out["errors"] = errors
    return out


def _pp_schedule(rank, world, schedule, m, layers):
    model = _model(layers)
    inputs, targets = _batches(m)
    ref = _model(layers)
    ref_losses = []
    for x, y in zip(inputs, targets):
        loss = _loss(ref(x), y)
        (loss / m).backward()
        ref_losses.append(float(loss))
    part = split_transformer(model, world)[rank]
    stage = PipelineStage(part, (MB, S, H), torch.float64, loss_fn=_loss)
    out = (run_afab if schedule == "afab" else run_1f1b)(stage, inputs, targets)
    ref_grads = {n: p.grad for n, p in ref.named_parameters()}
    names = {id(p): n for n, p in model.named_parameters()}
    diffs = {names[id(p)]: float((p.grad - ref_grads[names[id(p)]]).abs().max()) for p in part.parameters()}
    out["diffs"] = diffs
    out["ref_losses"] = ref_losses
    return out


@pytest.mark.parametrize("world,m,layers", [(2, 4, 2), (4, 6, 4)])
def test_pipeline_matches_one_process(world, m, layers):
    both = launch(_pp_rank, world, args=(m, layers), timeout=60)
    last = both[-1]["errors"]
    assert "loss_fn" in last[0] and "act_shape" in last[1] and "one entry per micro-batch" in last[2], last
    assert both[0]["errors"][0] is None and "act_shape" in both[0]["errors"][1], both[0]["errors"]
    for schedule in ("afab", "1f1b"):
        _check(schedule, world, m, [r[schedule] for r in both])


def _check(schedule, world, m, res):
    for r in res:
        s = r["stage"]
        assert r["diffs"] and max(r["diffs"].values()) < 1e-12, (s, r["diffs"])
        assert r["order"] == schedule_order(schedule, s, world, m)
        want_peak = m if schedule == "afab" else min(world - s, m)
        assert r["peak_in_flight"] == want_peak, (schedule, s, r["peak_in_flight"])
        assert r["peak_in_flight"] <= (m if schedule == "afab" else world)
        pred = pipeline_p2p_bytes(s, world, m, MB * S * H, 8)
        assert {k: v.get("bytes", 0) for k, v in r["p2p"].items()} == pred
    assert res[-1]["losses"] == pytest.approx(res[-1]["ref_losses"], abs=1e-12)
    tl = pipeline_timeline([r["order"] for r in res])
    assert tl["bubble"] == pytest.approx(pipeline_bubble_fraction(world, m, "gpipe"))
    assert tl["idle"] == [2 * (world - 1)] * world


def test_timeline_and_orders_without_ranks():
    for p, m in ((2, 1), (3, 5), (4, 4), (4, 8)):
        for sched in ("afab", "1f1b"):
            orders = [schedule_order(sched, s, p, m) for s in range(p)]
            tl = pipeline_timeline(orders)
            assert tl["bubble"] == pytest.approx((p - 1) / (m + p - 1))
            tl3 = pipeline_timeline(orders, forward_slots=1, backward_slots=2)
            assert tl3["bubble"] == pytest.approx((p - 1) / (m + p - 1))
    # forwards as digits, backwards as letters, idle as dots
    assert pipeline_timeline([schedule_order("afab", s, 2, 3) for s in range(2)])["grid"] == ["012..abc", ".012abc."]
    assert pipeline_timeline([schedule_order("1f1b", s, 2, 3) for s in range(2)])["grid"] == ["01.a2b.c", ".0a1b2c."]
    with pytest.raises(ValueError, match="deadlock"):
        pipeline_timeline([[("B", 0), ("F", 0)], [("F", 0), ("B", 0)]])
    with pytest.raises(ValueError, match="schedule"):
        schedule_order("zigzag", 0, 2, 2)
    with pytest.raises(ValueError, match="divide"):
        split_transformer(CheckpointedTransformer(layers=3), 2)
