"""Lab part 2's references on NCCL with CUDA tensors (issue 16), skipped without enough GPUs.

Tensor parallelism and sequence parallelism (`solutions_lib.dist.tensor_parallel`), the AFAB,
1F1B and interleaved 1F1B pipelines (`pipeline`), ring attention (`context_parallel`) and the
DP x TP mesh (`mesh`) run on NCCL ranks, one GPU each (the launcher's
`torch.cuda.set_device(rank)`), with every tensor on that GPU, float64 and TF32 off. The oracle is one process on the CPU in float64 (in each rank,
as in the gloo tests: the parent runs no backward, so forked gloo ranks of later tests can), built
from the gloo tests' cases (test_dist_tp, test_dist_pp, test_dist_cp), with their tolerances. One
launch per reference runs both of its variants (TP and TP + SP, AFAB and 1F1B, causal and full).

Every test is parametrized over ["gloo-cpu", "nccl"]: the same rank body and the same checks run
here on gloo with the device "cpu" (about 2 s for the four), so a body that can only run on a GPU
machine is still exercised on every run. Under "nccl" the ranks also report the device of their
results, and the test fails if anything stayed on the CPU. The pipeline and ring attention also
record their `batch_isend_irecv` batches, and `_nccl_progress` replays them under NCCL's rules
(a send may wait for its receive, a rank's batches run in order), which a gloo run cannot show.
"""
from __future__ import annotations

import copy
from collections import Counter
from contextlib import contextmanager

import pytest
import torch
import torch.distributed as dist

import test_dist_cp as cp_cases
import test_dist_pp as pp_cases
import test_dist_tp as tp_cases
from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist.context_parallel import ring_attention, ring_attention_bytes, split_sequence
from solutions_lib.dist.pipeline import PipelineStage, run_1f1b, run_afab, split_transformer
from solutions_lib.dist.tensor_parallel import (TensorParallelBlock, causal_mask, shard_rows, tp_comm_bytes_per_step,
                                                tp_comm_calls_per_step)

pytestmark = pytest.mark.xdist_group("dist_nccl_part2")

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
TOL = 1e-12  # float64, as in the gloo tests


def _backends(world: int):
    """["gloo-cpu", "nccl"], the NCCL one skipped unless CUDA has one GPU per rank."""
    return [pytest.param("gloo-cpu", id="gloo-cpu"),
            pytest.param("nccl", id="nccl", marks=pytest.mark.skipif(
                GPUS < world, reason=f"NCCL needs {world} CUDA GPUs (one per rank), found {GPUS}"))]


def _launch(fn, world: int, backend: str, *args):
    if backend == "nccl":  # spawned ranks (the launcher's choice for NCCL): fn must be importable
        return launch(fn, world, args=args, backend="nccl", timeout=300, collective_timeout=120)
    return launch(fn, world, args=args, backend="gloo", timeout=60)


def _rank_device() -> torch.device:
    """In a rank: its GPU under NCCL (TF32 off, so float32 matmuls would be exact too), else the CPU."""
    if dist.get_backend() == "nccl":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _check_devices(results, backend: str):
    for rank, r in enumerate(results):
        want = f"cuda:{rank}" if backend == "nccl" else "cpu"
        assert r["devices"] == {want}, f"rank {rank}: tensors on {sorted(r['devices'])}, expected only {want}"


def _max(a, b) -> float:
    return float((a.detach().cpu() - b).abs().max())


# ---------------------------------------------------------------- point-to-point under NCCL's rules


@contextmanager
def _recording_batches():
    """In a rank: record every `dist.batch_isend_irecv` as [("S", src, dst) / ("R", src, dst), ...]
    (global ranks), in the order posted."""
    me, batches, original = dist.get_rank(), [], dist.batch_isend_irecv

    def recording(ops):
        batches.append([("S", me, op.peer) if op.op is dist.isend else ("R", op.peer, me) for op in ops])
        return original(ops)

    dist.batch_isend_irecv = recording
    try:
        yield batches
    finally:
        dist.batch_isend_irecv = original


def _nccl_progress(batches_by_rank) -> str:
    """Replay the ranks' batches under NCCL's rules: a rank's batches run one after the other
    (one stream), a send may wait until its receive is posted, the ops of one batch progress
    together, and the n-th send from a to b meets the n-th receive on b from a. "ok", or where it
    deadlocks (a gloo run cannot show that: its sends never wait)."""
    where, count = {}, Counter()
    for r, batches in enumerate(batches_by_rank):
        for j, batch in enumerate(batches):
            for kind, a, b in batch:
                where[(kind, a, b, count[(kind, a, b)])] = (r, j)
                count[(kind, a, b)] += 1
    def partner(k):  # the matching receive of a send, or send of a receive
        return ("R" if k[0] == "S" else "S",) + k[1:]

    unmatched = [k for k in where if partner(k) not in where]
    if unmatched:
        return f"unmatched messages {unmatched}"

    def started(k):  # the batch holding k's partner is running (or done) on its rank
        r, j = where[partner(k)]
        return j <= pos[r]

    pos = [0] * len(batches_by_rank)
    while any(p < len(b) for p, b in zip(pos, batches_by_rank)):
        ready = [r for r, b in enumerate(batches_by_rank) if pos[r] < len(b)
                 and all(started(k) for k, (rr, j) in where.items() if rr == r and j == pos[r])]
        if not ready:
            return f"deadlock: batches reached per rank {pos}"
        for r in ready:
            pos[r] += 1
    return "ok"


def test_nccl_progress_model_without_ranks():
    """The replay itself: a send and a receive posted one by one on both ranks, each sending first
    (the ring's pattern unbatched), deadlock; batched, they pass."""
    one_by_one = [[[("S", r, 1 - r)], [("R", 1 - r, r)]] for r in (0, 1)]
    batched = [[[("S", r, 1 - r), ("R", 1 - r, r)]] for r in (0, 1)]
    assert _nccl_progress(one_by_one).startswith("deadlock") and _nccl_progress(batched) == "ok"
    assert _nccl_progress([[[("S", 0, 1)]], [[]]]).startswith("unmatched")


# ---------------------------------------------------------------- TP and SP block


def _tp_shard(name: str, full: dict, rank: int, t: int) -> torch.Tensor:
    """Rank `rank`'s part of the full Block tensor `full[...]` that TensorParallelBlock's parameter
    `name` holds (weights or their gradients)."""
    h, k_in = tp_cases.H // t, tp_cases.H * 4 // t
    key = name.split(".", 1)[1] if name.startswith(("attn.", "mlp.")) else name
    if key.startswith("qkv."):
        return shard_rows(full[key], rank, t, 3)
    if key.startswith("fc1."):
        return shard_rows(full[key], rank, t)
    if key == "proj.weight":
        return full[key][:, rank * h:(rank + 1) * h]
    if key == "fc2.weight":
        return full[key][:, rank * k_in:(rank + 1) * k_in]
    return full[key]  # LayerNorms and the row-parallel biases: replicated


def _tp_rank(rank, world):
    return {sp: _tp_case(rank, world, sp) for sp in (False, True)}


def _tp_case(rank, world, sequence_parallel):
    dev = _rank_device()
    S = tp_cases.S
    block, x, w = tp_cases._data(torch.float64)
    tp = TensorParallelBlock(copy.deepcopy(block).to(dev), sequence_parallel=sequence_parallel)
    xr = x.clone().requires_grad_(True)  # the oracle: the whole block, this process, CPU
    ref_out = block(xr, causal_mask(S))
    (ref_out * w).sum().backward()
    full = {n: p.grad for n, p in block.named_parameters()}

    lo, hi = (rank * S // world, (rank + 1) * S // world) if sequence_parallel else (0, S)
    xin = x[:, lo:hi].clone().to(dev).requires_grad_(True)
    mask = causal_mask(S, device=dev)
    with CommCounter() as fwd:
        out = tp(xin, mask)
    with CommCounter() as bwd:
        (out * w[:, lo:hi].to(dev)).sum().backward()
        tp.allreduce_replicated_grads()
    diffs = {"out": _max(out, ref_out.detach()[:, lo:hi]), "x.grad": _max(xin.grad, xr.grad[:, lo:hi])}
    diffs.update({n: _max(p.grad, _tp_shard(n, full, rank, world)) for n, p in tp.named_parameters()})
    devices = {str(t.device) for t in (out, xin.grad, mask, *tp.parameters(), *(p.grad for p in tp.parameters()))}
    return dict(devices=devices, diffs=diffs, fwd=dict(fwd.summary()), bwd=dict(bwd.summary()))


@pytest.mark.parametrize("backend", _backends(2))
def test_tp_and_sp_block_on_nccl(backend):
    world = 2
    per_rank = _launch(_tp_rank, world, backend)
    for sequence_parallel in (False, True):
        _check_tp([r[sequence_parallel] for r in per_rank], world, backend, sequence_parallel)


def _check_tp(res, world, backend, sequence_parallel):
    _check_devices(res, backend)
    B, S, H = tp_cases.B, tp_cases.S, tp_cases.H
    for rank, r in enumerate(res):
        assert len(r["diffs"]) == 14, sorted(r["diffs"])  # output, input grad, 12 parameters
        bad = {k: v for k, v in r["diffs"].items() if not v < TOL}
        assert not bad, (f"rank {rank} ({backend}, sequence_parallel={sequence_parallel}): differs from the "
                         f"one-process block by {bad}")
        both = tp_cases._merge(r["fwd"], r["bwd"])
        assert {op: c for op, (c, _) in both.items()} == tp_comm_calls_per_step(1, world, sequence_parallel), \
            (rank, r["fwd"], r["bwd"])
        assert {op: c for op, (c, _) in r["fwd"].items()} == \
            tp_comm_calls_per_step(1, world, sequence_parallel, backward=False), (rank, r["fwd"])
        assert {op: b for op, (_, b) in both.items()} == \
            tp_comm_bytes_per_step(B, S, H, 1, world, sequence_parallel, bytes_per_element=8), (rank, both)


# ---------------------------------------------------------------- pipeline: AFAB and 1F1B


def _pp_rank(rank, world, m, layers):
    return {schedule: _pp_case(rank, world, schedule, m, layers) for schedule in ("afab", "1f1b")}


def _pp_case(rank, world, schedule, m, layers):
    dev = _rank_device()
    inputs, targets = pp_cases._batches(m)
    ref = pp_cases._model(layers)  # the oracle: one process accumulating (loss_i / m), CPU
    ref_losses = []
    for x, y in zip(inputs, targets):
        loss = pp_cases._loss(ref(x), y)
        (loss / m).backward()
        ref_losses.append(float(loss.detach()))
    model = pp_cases._model(layers).to(dev)
    part = split_transformer(model, world)[rank]
    stage = PipelineStage(part, (pp_cases.MB, pp_cases.S, pp_cases.H), torch.float64, loss_fn=pp_cases._loss)
    run = run_afab if schedule == "afab" else run_1f1b
    with _recording_batches() as batches:
        out = run(stage, [x.to(dev) for x in inputs], [y.to(dev) for y in targets])
    out["batches"] = batches
    ref_grads = {n: p.grad for n, p in ref.named_parameters()}
    names = {id(p): n for n, p in model.named_parameters()}
    out["diffs"] = {names[id(p)]: _max(p.grad, ref_grads[names[id(p)]]) for p in part.parameters()}
    out["ref_losses"] = ref_losses
    out["devices"] = {str(stage.device)} | {str(t.device) for p in part.parameters() for t in (p, p.grad)}
    return out


@pytest.mark.parametrize("backend", _backends(2))
def test_pipeline_afab_and_1f1b_on_nccl(backend):
    world, m, layers = 2, 4, 2
    per_rank = _launch(_pp_rank, world, backend, m, layers)
    for schedule in ("afab", "1f1b"):
        res = [r[schedule] for r in per_rank]
        _check_devices(res, backend)
        # gradients and losses vs one process, executed order, peak in flight (AFAB m, 1F1B
        # min(p - s, m)), bytes per link, and the replayed bubble: the gloo test's checks
        pp_cases._check(schedule, world, m, res)
        for r in res:  # every message went through batch_isend_irecv ...
            assert sum(map(len, r["batches"])) == r["p2p"]["send"]["calls"] + r["p2p"]["recv"]["calls"], r["batches"]
        # ... in batches that cannot deadlock where a send waits for its receive (NCCL)
        assert _nccl_progress([r["batches"] for r in res]) == "ok", (schedule, [r["batches"] for r in res])


@pytest.mark.parametrize("backend", _backends(2))
def test_pipeline_interleaved_on_nccl(backend):
    """Interleaved 1F1B (v = 2 chunks per rank): the gloo test's rank body and checks (gradients and
    losses vs one process, Megatron's order, the simulator's bubble, peak, bytes, the planned batches
    and their NCCL progress replay), on the rank's GPU under NCCL."""
    world, ms, v = 2, (2, 4), 2
    per_rank = _launch(pp_cases._ilv_rank, world, backend, v, ms, world * v)
    for m in ms:
        _check_devices([r[m] for r in per_rank], backend)
    pp_cases._check_interleaved(world, ms, v, per_rank)


# ---------------------------------------------------------------- ring attention


def _cp_rank(rank, world):
    return {causal: _cp_case(rank, world, causal) for causal in (True, False)}


def _cp_case(rank, world, causal):
    dev = _rank_device()
    q, k, v, do = cp_cases._cp_inputs()
    ref = [t.clone().requires_grad_(True) for t in (q, k, v)]  # the oracle: full attention, CPU
    out_full = cp_cases._full(*ref, causal)
    out_full.backward(do)
    mine = [split_sequence(t, rank, world).to(dev).requires_grad_(True) for t in (q, k, v)]
    comm = Counter()
    with _recording_batches() as batches:
        o = ring_attention(*mine, causal=causal, comm=comm)
        o.backward(split_sequence(do, rank, world).to(dev))
    diffs = [_max(o, split_sequence(out_full.detach(), rank, world))]
    diffs += [_max(t.grad, split_sequence(r.grad, rank, world)) for t, r in zip(mine, ref)]
    return dict(devices={str(t.device) for t in (o, *mine, *(t.grad for t in mine))}, diffs=diffs, comm=dict(comm),
                batches=batches)


@pytest.mark.parametrize("backend", _backends(2))
def test_ring_attention_causal_and_full_on_nccl(backend):
    world = 2
    per_rank = _launch(_cp_rank, world, backend)
    chunk = cp_cases.BH[0] * cp_cases.BH[1] * (cp_cases.S // world) * cp_cases.D
    for causal in (True, False):
        res = [r[causal] for r in per_rank]
        _check_devices(res, backend)
        for rank, r in enumerate(res):
            assert max(r["diffs"]) < TOL, (rank, backend, causal, r["diffs"])  # output, dq, dk, dv
            assert r["comm"] == ring_attention_bytes(chunk, world, 8), (rank, causal, r["comm"])
            assert sum(map(len, r["batches"])) == r["comm"]["send_calls"] + r["comm"]["recv_calls"], r["batches"]
        assert _nccl_progress([r["batches"] for r in res]) == "ok", [r["batches"] for r in res]


# ---------------------------------------------------------------- the DP x TP mesh


def _mesh_rank(rank, world, dp, tp, steps, lr=0.1):
    from solutions_lib.dist.mesh import average_gradients, count_by_group, init_mesh

    dev = _rank_device()
    mesh = init_mesh(dp, tp)
    block, _, _ = tp_cases._data(torch.float64)
    ref = copy.deepcopy(block)
    data = tp_cases._mesh_data(dp, steps)
    mask = causal_mask(tp_cases.S)
    for step in data:  # the oracle: one process, the mean of the dp replicas' losses, CPU
        for x, w in step:
            ((ref(x, mask) * w).sum() / dp).backward()
        tp_cases._sgd(ref, lr)
    tpb = TensorParallelBlock(block.to(dev), group=mesh.tp_group)
    mask = causal_mask(tp_cases.S, device=dev)
    with count_by_group() as calls:
        for step in data:
            x, w = step[mesh.dp_rank]
            (tpb(x.to(dev), mask) * w.to(dev)).sum().backward()
            average_gradients(tpb.parameters(), mesh.dp_group)
            tp_cases._sgd(tpb, lr)
    full = {n: p.detach() for n, p in ref.named_parameters()}
    diffs = {n: _max(p, _tp_shard(n, full, mesh.tp_rank, tp)) for n, p in tpb.named_parameters()}
    return dict(devices={str(p.device) for p in tpb.parameters()}, diffs=diffs, calls=dict(calls),
                tp_ranks=mesh.tp_ranks, dp_ranks=mesh.dp_ranks)


@pytest.mark.parametrize("backend", _backends(4))
def test_dp_x_tp_mesh_on_nccl(backend):
    steps = 2
    res = _launch(_mesh_rank, 4, backend, 2, 2, steps)
    _check_devices(res, backend)
    for rank, r in enumerate(res):
        assert len(r["diffs"]) == 12 and max(r["diffs"].values()) < TOL, (rank, backend, r["diffs"])
        tp_ranks, dp_ranks = r["tp_ranks"], r["dp_ranks"]
        assert tp_ranks == (rank // 2 * 2, rank // 2 * 2 + 1) and dp_ranks == (rank % 2, rank % 2 + 2)
        assert r["calls"] == {("all_reduce", tp_ranks): 4 * steps, ("all_reduce", dp_ranks): steps}, (rank, r["calls"])
