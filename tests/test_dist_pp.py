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
    part = split_transformer(_model(layers), world)[rank]
    out["errors"] = _value_errors(
        lambda: PipelineStage(part, (MB, S, H), torch.float64),            # the last stage needs a loss
        lambda: PipelineStage(part, (MB, 0, H), torch.float64, loss_fn=_loss),
        lambda: run_afab(PipelineStage(part, (MB, S, H), torch.float64, loss_fn=_loss), [0, 1], [0]))
    return out


def _value_errors(*calls) -> list:
    """The ValueError message of each call, None for one that did not raise."""
    errors = []
    for bad in calls:
        try:
            bad()
            errors.append(None)
        except ValueError as e:
            errors.append(str(e))
    return errors


def _one_process(layers, inputs, targets):
    """The oracle: one model accumulating loss_i / m over the micro-batches; (model, losses)."""
    ref, losses, m = _model(layers), [], len(inputs)
    for x, y in zip(inputs, targets):
        loss = _loss(ref(x), y)
        (loss / m).backward()
        losses.append(float(loss.detach()))
    return ref, losses


def _pp_schedule(rank, world, schedule, m, layers):
    model = _model(layers)
    inputs, targets = _batches(m)
    ref, ref_losses = _one_process(layers, inputs, targets)
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


# ---------------------------------------------------------------- interleaved 1F1B (Megatron-LM, v chunks per rank)
#
# Oracle as above: one process accumulating (loss_i / m).backward(). The executed orders are
# checked against Megatron's order as the course's simulator builds it
# (solutions_lib.parallel.simulate_pipeline(p, m, "interleaved", v)), their unit-slot replay
# against the simulator's bubble: idle / step time (p-1)/(v m + p - 1) ("total"), idle / busy
# time (p-1)/(v m) (Megatron's "ideal"); the peak of chunk activations a rank holds against
# min(w + 1, v m), w = min(2 (p - r - 1) + (v - 1) p, v m) (v m when m = p); the bytes against
# (2 v - [r = 0] - [r = p-1]) m a e; the recorded batches against `interleaved_batches` and
# NCCL's progress rules (tests/test_dist_nccl_part2.py's replay).

from solutions_lib.dist.pipeline import (InterleavedStage, interleaved_batches, interleaved_p2p_bytes,  # noqa: E402
                                         interleaved_peak_in_flight, interleaved_schedule_order, interleaved_warmup,
                                         run_interleaved)
from solutions_lib.parallel import (pipeline_bubble_ratio, pipeline_peak_activations,  # noqa: E402
                                    simulate_pipeline)


def _nccl_replay():
    import test_dist_nccl_part2  # lazily: that module imports this one

    return test_dist_nccl_part2


def _as_batches(plan, rank):
    """interleaved_batches' posts as the replay's [("S", src, dst) / ("R", src, dst)] batches."""
    return [[("S", rank, peer) if kind == "S" else ("R", peer, rank) for kind, peer, _ in ops]
            for what, ops in plan if what == "post"]


def _ilv_rank(rank, world, v, ms, layers):
    """Also the body of tests/test_dist_nccl_part2.py's NCCL run: the rank's GPU under NCCL (the
    oracle stays on the CPU), the CPU on gloo."""
    nccl = _nccl_replay()
    dev = nccl._rank_device()
    out = {}
    for m in ms:
        inputs, targets = _batches(m)
        ref, ref_losses = _one_process(layers, inputs, targets)
        model = _model(layers).to(dev)
        parts = split_transformer(model, world * v)[rank::world]  # chunks rank, rank + p, ...
        stage = InterleavedStage(parts, (MB, S, H), torch.float64, loss_fn=_loss)
        with nccl._recording_batches() as batches:
            r = run_interleaved(stage, [x.to(dev) for x in inputs], [y.to(dev) for y in targets])
        ref_grads = {n: p.grad for n, p in ref.named_parameters()}
        names = {id(p): n for n, p in model.named_parameters()}
        r.update(batches=batches, ref_losses=ref_losses,
                 diffs={names[id(p)]: float((p.grad.cpu() - ref_grads[names[id(p)]]).abs().max())
                        for c in parts for p in c.parameters()},
                 devices={str(stage.device)} | {str(t.device) for c in parts for p in c.parameters()
                                                for t in (p, p.grad)})
        out[m] = r
    out["errors"] = _value_errors(
        lambda: run_interleaved(stage, _batches(world + 1)[0], _batches(world + 1)[1]),  # m % p != 0
        lambda: InterleavedStage([], (MB, S, H), torch.float64, loss_fn=_loss),
        lambda: run_interleaved(PipelineStage(parts[0], (MB, S, H), torch.float64, loss_fn=_loss), inputs, targets))
    return out


# 2 ranks (m = 2 and 4; both directions of the one pair carry activations and gradients): the same
# body and checks run as tests/test_dist_nccl_part2.py::test_pipeline_interleaved_on_nccl[gloo-cpu]
@pytest.mark.parametrize("world,ms", [(4, (4, 8))])
def test_interleaved_matches_one_process_and_the_simulator(world, ms):
    v = 2
    _nccl_replay()  # imported before the ranks fork
    per_rank = launch(_ilv_rank, world, args=(v, ms, world * v), timeout=60)
    _check_interleaved(world, ms, v, per_rank)


def _check_interleaved(world, ms, v, per_rank):
    nccl = _nccl_replay()
    for r in per_rank:
        assert "multiple of n_stages" in r["errors"][0] and "chunks" in r["errors"][1] \
            and "InterleavedStage" in r["errors"][2], r["errors"]
    a = MB * S * H
    for m in ms:
        res = [r[m] for r in per_rank]
        sim = simulate_pipeline(world, m, "interleaved", v)
        for s, r in enumerate(res):
            assert r["diffs"] and max(r["diffs"].values()) < 1e-12, (m, s, r["diffs"])
            assert r["order"] == interleaved_schedule_order(s, world, m, v) == [op[:3] for op in sim.ops[s]]
            assert r["chunks"] == v
            # peak chunk activations: Megatron's warm-up holds more than 1F1B's min(p - s, m) stages
            want_peak = interleaved_peak_in_flight(s, world, m, v)
            assert want_peak == (v * m if m == world else min(2 * (world - s - 1) + (v - 1) * world + 1, v * m))
            assert r["peak_in_flight"] == want_peak == round(v * sim.peak_in_flight[s]), (m, s, r["peak_in_flight"])
            assert r["peak_in_flight"] / v == pytest.approx(pipeline_peak_activations(world, m, "interleaved", v, s))
            if s == 0 and m > world:
                assert r["peak_in_flight"] / v == world + (world - 1) / v > min(world, m)
            # bytes: (2 v - [s = 0] - [s = p-1]) m a e each way; v times 1F1B's on an inner rank
            got = {k: d.get("bytes", 0) for k, d in r["p2p"].items()}
            want = interleaved_p2p_bytes(s, world, m, v, a, 8)
            assert got == want == {k: (2 * v - (s == 0) - (s == world - 1)) * m * a * 8 for k in ("send", "recv")}
            one = pipeline_p2p_bytes(s, world, m, a, 8)["send"]
            assert want["send"] == (v * one if 0 < s < world - 1 else (2 * v - 1) * one)
            # every message went through the planned batches
            assert r["batches"] == _as_batches(interleaved_batches(s, world, m, v), s)
            assert sum(map(len, r["batches"])) == r["p2p"]["send"]["calls"] + r["p2p"]["recv"]["calls"]
        assert res[-1]["losses"] == pytest.approx(res[-1]["ref_losses"], abs=1e-12)
        assert nccl._nccl_progress([r["batches"] for r in res]) == "ok", (m, [r["batches"] for r in res])
        tl = pipeline_timeline([r["order"] for r in res])
        assert tl["idle"] == [2 * (world - 1)] * world and tl["span"] == 2 * (v * m + world - 1)
        assert tl["bubble"] == pytest.approx(sim.idle_fraction, abs=1e-12)
        assert tl["bubble"] == pytest.approx((world - 1) / (v * m + world - 1), abs=1e-12)
        assert tl["bubble"] == pytest.approx(pipeline_bubble_fraction(world, m, "interleaved", v), abs=1e-12)
        assert tl["bubble_ideal"] == pytest.approx(pipeline_bubble_ratio(world, m, "interleaved", v), abs=1e-12)
        assert tl["bubble_ideal"] == pytest.approx(pipeline_bubble_ratio(world, m, "1f1b") / v, abs=1e-12)


def test_interleaved_orders_messages_and_replay_without_ranks():
    nccl = _nccl_replay()
    for p in (1, 2, 3, 4, 5):
        for k in (1, 2, 3):
            for v in (1, 2, 3):
                m = k * p
                sim = simulate_pipeline(p, m, "interleaved", v, 1, 1)
                orders = [interleaved_schedule_order(s, p, m, v) for s in range(p)]
                assert orders == [[op[:3] for op in row] for row in sim.ops], (p, m, v)
                for s in range(p):
                    w = interleaved_warmup(s, p, m, v)
                    assert [a[0] for a in orders[s]] == ["F"] * w + ["F", "B"] * (v * m - w) + ["B"] * w
                    level = [0]
                    for a in orders[s]:
                        level.append(level[-1] + (1 if a[0] == "F" else -1))
                    assert max(level) == interleaved_peak_in_flight(s, p, m, v)
                tl = pipeline_timeline(orders)
                assert tl["bubble"] == pytest.approx(sim.idle_fraction, abs=1e-12)
                assert tl["bubble_ideal"] == pytest.approx(pipeline_bubble_ratio(p, m, "interleaved", v), abs=1e-12)
                if p < 2:
                    continue
                plans = [interleaved_batches(s, p, m, v) for s in range(p)]
                assert [[x for what, x in plan if what == "run"] for plan in plans] == orders
                # the n-th message a sends to b is the n-th one b receives from a (NCCL and gloo
                # match in posting order, and for p = 2 both directions carry both kinds)
                for a in range(p):
                    for b in range(p):
                        sent = [msg for what, ops in plans[a] if what == "post" for kd, peer, msg in ops
                                if kd == "S" and peer == b]
                        got = [msg for what, ops in plans[b] if what == "post" for kd, peer, msg in ops
                               if kd == "R" and peer == a]
                        assert sent == got, (p, m, v, a, b)
                assert nccl._nccl_progress([_as_batches(plan, s) for s, plan in enumerate(plans)]) == "ok", (p, m, v)
    # one step at a time on p = 2, m = 2, v = 2: rank 1 runs its 4 forwards, then its backwards
    assert interleaved_schedule_order(1, 2, 2, 2) == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1),
                                                      ("B", 0, 1), ("B", 1, 1), ("B", 0, 0), ("B", 1, 0)]
    assert interleaved_schedule_order(0, 2, 4, 2)[:5] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1),
                                                          ("F", 2, 0)]
    # the 1F1B replay is unchanged by the chunk-aware timeline; mixed orders are refused
    assert pipeline_timeline([schedule_order("1f1b", s, 2, 3) for s in range(2)])["grid"] == ["01.a2b.c", ".0a1b2c."]
    with pytest.raises(ValueError, match="mix"):
        pipeline_timeline([[("F", 0, 0), ("B", 0, 0)], [("F", 0), ("B", 0)]])
    for bad in (lambda: interleaved_schedule_order(0, 4, 6, 2), lambda: interleaved_schedule_order(4, 4, 8, 2),
                lambda: interleaved_schedule_order(0, 4, 8, 0), lambda: interleaved_p2p_bytes(0, 2, 3, 2, 8)):
        with pytest.raises(ValueError):
            bad()


def test_activation_watch_counts_outputs_still_held():
    """The probe of 11 exercises 2's memory test: outputs of module(x) stay alive while a stash (or
    an autograd graph) holds them and die when the micro-batch's backward drops them."""
    from solutions_lib.dist.probes_pipeline import ActivationWatch
    module = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh())
    watch, stash = ActivationWatch(module), {}
    for i in range(3):
        stash[i] = module(torch.randn(2, 3))
    assert watch.live() == 3 and watch.calls == 3
    for i in range(3):
        stash.pop(i).sum().backward()
        assert watch.live() == 2 - i
    module.forward(torch.randn(2, 3))          # not module(x): no hook, not counted
    watch.remove()
    module(torch.randn(2, 3))
    assert watch.calls == 3
