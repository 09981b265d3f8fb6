"""Checks for the tests of 11 exercises 2 (pipeline, context parallelism, the 2-D mesh) that run
on gloo ranks: each starts the ranks with `launch_graded`, runs the student's answer there under
the probes of `probes_pipeline` (a `P2PCounter`, the `CommCounter` that splits point-to-point
bytes by direction; `ActivationWatch`; `LargestTensor`) or `mesh.count_by_group`, inside
`no_delegation`, and compares what the ranks report with ONE process doing the same computation
without any parallelism (torch's autograd on the whole model or sequence). The student's answer
is an argument (the ranks are forked, so it travels as it is); the cases (sizes, seeds) are
arguments too: the hidden ones stay in the test cell. No expected value is stored here.

    check_stage_grads(PipeStage, world, layers, width, mb, m, seed)      # A.2: gradients, losses, messages
    check_stage_memory(PipeStage, world, layers, width, mb, m, seed)     # A.2: order, activations held, bubble
    check_ring(ring_attention, world, shape, seed, causal)               # B.2: output vs full attention
    check_ring_bytes(ring_attention, world, shape, seed)                 # B.2: bytes, no collective, largest tensor
    check_ring_backward(ring_attention_backward, world, shape, seed, causal)      # B.4: dq, dk, dv
    check_ring_backward_traffic(ring_attention_backward, world, shape, seed)      # B.4: bytes, collectives, memory
    check_mesh_groups(build_mesh, dp, tp)                                 # C.2: coordinates and groups
    check_mesh_step(tp_dp_step, dp, tp, dims, mb, seed)                   # C.3: loss and sharded gradients
    check_mesh_counts(tp_dp_step, dp, tp, dims, mb, seed)                 # C.3: all-reduces per group

Each exercise is graded alone: the pipeline checks drive the stage with the test's own schedule
(`exact_schedule`), the ring checks swap the test's own merge (`exact_merge`) into the ranks'
copy of the answer's globals, the groups check its own layout (`exact_layout`), and the mesh step
gets the test's own process groups, so a slip in one answer costs only its own cells.

B.4's contract (`ring_attention_backward(q, k, v, o, lse, do, causal)` on each rank with its chunks
of Q, K, V, its rows `o` of the forward output, their log-sum-exp `lse` over the whole (masked)
sequence and the upstream gradient `do`; returns `(dq, dk, dv)` for the rank's own chunks):
bytes sent and received each at most (4 (p - 1) + 2) c e (`ring_backward_bytes`: the ring that
passes K, V and the dK/dV accumulators p - 1 times and returns the accumulators home in one more
hop; c = elements of one chunk of K, e = 8 for float64); no collective; no tensor larger than
max(4 c, one n x n block of scores per batch element and head).
"""
from __future__ import annotations

import importlib
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..grading import expect_between, expect_close, expect_equal, no_delegation
from .graded import launch_graded
from .checks_pipeline import exact_layout, exact_merge, exact_schedule
from .mesh import count_by_group
from .pipeline import pipeline_timeline
from .probes_pipeline import ActivationWatch, LargestTensor, P2PCounter
from .zero import mlp, regression_micro_batches

__all__ = ["check_stage_grads", "check_stage_memory", "check_ring", "check_ring_bytes", "check_ring_backward",
           "check_ring_backward_traffic", "check_mesh_groups", "check_mesh_step", "check_mesh_counts",
           "exact_schedule", "exact_merge", "exact_layout", "cp_inputs", "full_attention", "full_attention_grads",
           "ring_backward_bytes"]


# ---------------------------------------------------------------- A: the pipeline stage

def _pp_case(layers, width, mb, m, seed):
    model = mlp([width] * (layers + 1), seed=seed).double()
    data = regression_micro_batches(m, 1, width, width, batch=mb, seed=seed + 1)
    return model, [b[0][0].double() for b in data], [b[0][1].double() for b in data]


def _pp_rank(rank, world, stage_cls, layers, width, mb, m, seed):
    ref_pp = importlib.import_module("solutions_lib.dist.pipeline")
    k = layers // world
    out = {}
    for kind in ("afab", "1f1b"):
        model, xs, ys = _pp_case(layers, width, mb, m, seed)
        part = model[2 * rank * k: 2 * (rank + 1) * k]
        watch, live = ActivationWatch(part), []   # the test's own count of the activations held
        with no_delegation("PipeStage", ref_pp), P2PCounter() as p2p:
            stage = stage_cls(part, (mb, width), loss_fn=F.mse_loss, dtype=torch.float64)
            for action, i in exact_schedule(kind, rank, world, m):
                if action == "F":
                    stage.forward_step(i, xs[i] if rank == 0 else None, ys[i] if rank == world - 1 else None, m)
                else:
                    stage.backward_step(i)
                live.append(watch.live())
            stage.finish()
        watch.remove()
        grads = [torch.full(p.shape, float("nan"), dtype=torch.float64) if p.grad is None else p.grad.detach().clone()
                 for p in part.parameters()]
        losses = getattr(stage, "losses", {}) if rank == world - 1 else {}
        out[kind] = dict(grads=torch.cat([g.reshape(-1) for g in grads]),
                         losses=[float(losses[i]) if i in losses else float("nan") for i in range(m)],
                         recv=[p2p.recv_calls, p2p.recv_bytes], sent=[p2p.sent_calls, p2p.sent_bytes],
                         collectives=p2p.collectives(), live=live, module_calls=watch.calls,
                         order=[(str(a), int(i)) for a, i in getattr(stage, "order", [])],
                         peak=int(getattr(stage, "peak_in_flight", -1)))
    return out


def _pp_expected(layers, width, mb, m, seed):
    # one process: gradient accumulation of loss_i / m over the same micro-batches
    model, xs, ys = _pp_case(layers, width, mb, m, seed)
    losses = []
    for x, y in zip(xs, ys):
        loss = F.mse_loss(model(x), y)
        (loss / m).backward()
        losses.append(loss.item())
    return [p.grad for p in model.parameters()], losses


def check_stage_grads(stage_cls, world, layers, width, mb, m, seed):
    """`stage_cls` (the student's PipeStage) driven on `world` ranks by both schedules over a
    `layers`-layer MLP of `width`, m micro-batches of `mb` rows: every stage's accumulated
    gradients and the last stage's losses equal one process's; one message of mb x width float64
    per micro-batch and link in each direction, no collective."""
    res = launch_graded(_pp_rank, world, args=(stage_cls, layers, width, mb, m, seed))
    grads, losses = _pp_expected(layers, width, mb, m, seed)
    k, act = layers // world, mb * width * 8
    for kind in ("afab", "1f1b"):
        for s in range(world):
            want = torch.cat([g.reshape(-1) for g in grads[2 * s * k: 2 * (s + 1) * k]])
            expect_close(res[s][kind]["grads"], want,
                         f"{kind}, {world} stages, m={m}: stage {s}'s accumulated gradients vs one process",
                         rtol=1e-6, atol=1e-9,
                         hint="Backpropagate loss_i / m on the last stage; receive the output's gradient and send "
                              "input.grad; set requires_grad_(True) on a received input. NaN: a parameter got no .grad.")
        expect_close(res[-1][kind]["losses"], losses, f"{kind}, {world} stages, m={m}: self.losses of the last stage",
                     rtol=1e-9, hint="Record loss_fn(output, target).item() (before dividing by m) in self.losses[i].")
        for s in range(world):
            links = (s > 0) + (s < world - 1)
            expect_equal([res[s][kind]["recv"], res[s][kind]["sent"], res[s][kind]["collectives"]],
                         [[links * m, links * m * act], [links * m, links * m * act], {}],
                         f"{kind}, {world} stages, m={m}: stage {s}'s [[messages, bytes] received, [messages, bytes] sent, "
                         "collectives]",
                         hint="One dist.recv and one dist.isend per micro-batch and neighbour: activations to s+1, "
                              "gradients to s-1, each micro_batch x width float64 values; no collective.")
    return res


def check_stage_memory(stage_cls, world, layers, width, mb, m, seed):
    """The same run as `check_stage_grads`: each stage's recorded `order` is the schedule it was
    driven by; the peak of micro-batches whose module output is alive (measured by weak
    references) and the stage's own `peak_in_flight` are m (AFAB) or min(p - s, m) (1F1B); the
    recorded orders replay to the bubble (p - 1)/(m + p - 1)."""
    res = launch_graded(_pp_rank, world, args=(stage_cls, layers, width, mb, m, seed))
    for kind in ("afab", "1f1b"):
        orders = [res[s][kind]["order"] for s in range(world)]
        for s in range(world):
            expect_equal(orders[s], exact_schedule(kind, s, world, m),
                         f"{kind}, {world} stages, m={m}: stage {s}'s self.order (the actions it ran)",
                         hint="Append ('F', i) at the end of forward_step and ('B', i) at the end of backward_step.")
            want = m if kind == "afab" else min(world - s, m)
            expect_equal([max(res[s][kind]["live"], default=0), res[s][kind]["module_calls"]], [want, m],
                         f"{kind}, {world} stages, m={m}: stage {s}'s [measured peak of micro-batches whose module output "
                         "is alive, calls of the module]",
                         hint="backward_step must release micro-batch i: pop (input, output) from the stash and keep no "
                              "other reference; call the module once per forward_step as self.module(inp).")
            expect_equal(res[s][kind]["peak"], want,
                         f"{kind}, {world} stages, m={m}: stage {s}'s peak_in_flight (micro-batches stashed at once)",
                         hint="Stash (input, output) in forward_step, pop it in backward_step, and keep the largest "
                              "len(self.stash) seen.")
        try:
            bubble = pipeline_timeline(orders)["bubble"]
        except (ValueError, KeyError, TypeError, IndexError):
            bubble = float("nan")
        expect_close(bubble, (world - 1) / (m + world - 1),
                     f"{kind}, {world} stages, m={m}: bubble of the recorded timeline vs (p-1)/(m+p-1)", rtol=1e-12,
                     hint="The bubble comes from your recorded orders; NaN means they could not be replayed.")
    return res


# ---------------------------------------------------------------- B: ring attention

#: modules whose code a ring-attention answer may not run
CP_FORBIDDEN = ("solutions_lib.dist.context_parallel", "solutions_lib.attention")
#: and the backward's: also the withheld reference of B.4
BWD_FORBIDDEN = CP_FORBIDDEN + ("solutions_lib.dist.ring_backward",)


def cp_inputs(shape, seed: int, count: int = 3) -> list[torch.Tensor]:
    """`count` float64 tensors of `shape` drawn from `seed` (Q, K, V, then dO)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g, dtype=torch.float64) for _ in range(count)]


def _masked_scores(q, k, causal):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return s


def full_attention(shape, seed, causal):
    """One process: attention over the whole sequence of the case (shape, seed)."""
    q, k, v = cp_inputs(shape, seed)
    return torch.softmax(_masked_scores(q, k, causal), -1) @ v


def full_attention_grads(shape, seed: int, causal: bool) -> dict[str, torch.Tensor]:
    """One process, the whole sequence: plain attention softmax(Q K^T / sqrt d [+ mask]) V on the
    case (shape, seed), its row log-sum-exp, and dQ, dK, dV of the loss sum(O * dO) by autograd."""
    q, k, v, do = cp_inputs(shape, seed, 4)
    q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
    s = _masked_scores(q, k, causal)
    o = torch.softmax(s, -1) @ v
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    return dict(o=o.detach(), lse=torch.logsumexp(s, -1).detach(), do=do, dq=dq, dk=dk, dv=dv)


def _cp_rank(rank, world, fn, shape, seed, causal):
    forbidden = [importlib.import_module(m) for m in CP_FORBIDDEN]
    n = shape[-2] // world
    q, k, v = (t[..., rank * n:(rank + 1) * n, :].clone() for t in cp_inputs(shape, seed))
    getattr(fn, "__globals__", {})["merge_partials"] = exact_merge   # in this forked rank only
    with no_delegation("ring_attention", *forbidden), P2PCounter() as p2p, LargestTensor() as big:
        o = fn(q, k, v, causal=causal)
    return dict(out=torch.as_tensor(o).detach().clone(), sent=p2p.sent_bytes, received=p2p.recv_bytes,
                collectives=p2p.collectives(), largest=big.numel)


def check_ring(fn, world, shape, seed, causal):
    """`fn` (the student's ring_attention) on `world` ranks: each rank's output equals its rows
    of full attention (float64, rtol 1e-6)."""
    res = launch_graded(_cp_rank, world, args=(fn, shape, seed, causal))
    full = full_attention(shape, seed, causal)
    n = shape[-2] // world
    for r in range(world):
        expect_close(res[r]["out"], full[..., r * n:(r + 1) * n, :],
                     f"ring attention on {world} ranks, shape {shape}, causal={causal}: rank {r}'s output vs full attention",
                     rtol=1e-6, atol=1e-9,
                     hint="Scale by 1/sqrt(d); at step j you hold the chunk of rank (r - j) mod p; causal: skip chunks "
                          "from later ranks, mask the upper triangle of your own chunk.")


def check_ring_bytes(fn, world, shape, seed):
    """`fn` without the causal mask on `world` ranks: 2 (p-1) c e bytes sent and received per rank,
    no collective, no tensor created above max(2 c, one n x n block of scores)."""
    res = launch_graded(_cp_rank, world, args=(fn, shape, seed, False))
    c, n = math.prod(shape) // world, shape[-2] // world     # elements of one K chunk, positions per rank
    for r in range(world):
        expect_equal([res[r]["sent"], res[r]["received"]], [2 * (world - 1) * c * 8] * 2,
                     f"ring attention on {world} ranks, shape {shape}: rank {r}'s [bytes sent, bytes received]",
                     hint="p - 1 hops, each sending one K chunk and one V chunk (c float64 values each) and receiving two.")
        expect_equal(res[r]["collectives"], {},
                     f"ring attention on {world} ranks: rank {r}'s collective calls (all-gather, all-reduce, ...)",
                     hint="Only point-to-point messages: isend/irecv, send/recv or batch_isend_irecv.")
        bound = max(2 * c, math.prod(shape[:-2]) * n * n)
        expect_between(res[r]["largest"], 1, bound,
                       f"ring attention on {world} ranks, shape {shape}: the largest tensor rank {r} creates (elements), "
                       f"at most max(2 c, one n x n block of scores)",
                       hint="Hold at most the K/V chunk you compute with and the one arriving; never the whole sequence.")


def ring_backward_bytes(shape, world: int, bytes_per_element: int = 8) -> int:
    """Bytes one rank sends (and receives) in the ring backward: (4 (p - 1) + 2) c e, c = numel of
    one rank's chunk of K (0 on one rank)."""
    c = math.prod(shape) // world
    return (4 * (world - 1) + 2) * c * bytes_per_element if world > 1 else 0


def _backward_rank(rank, world, fn, shape, seed, causal):
    forbidden = [importlib.import_module(m) for m in BWD_FORBIDDEN]
    full = full_attention_grads(shape, seed, causal)
    q, k, v, _ = cp_inputs(shape, seed, 4)
    n = shape[-2] // world
    rows = slice(rank * n, (rank + 1) * n)
    q, k, v, o, do = (t[..., rows, :].clone() for t in (q, k, v, full["o"], full["do"]))
    lse = full["lse"][..., rows].clone()
    with no_delegation("ring_attention_backward", *forbidden), P2PCounter() as p2p, LargestTensor() as big:
        out = fn(q, k, v, o, lse, do, causal=causal)
    try:
        dq, dk, dv = (torch.as_tensor(t).detach().clone() for t in out)
    except (TypeError, ValueError, RuntimeError):
        dq = dk = dv = None
    return dict(grads=(dq, dk, dv), kind=type(out).__name__, sent=p2p.sent_bytes, received=p2p.recv_bytes,
                collectives=p2p.collectives(), largest=big.numel)


def _run_backward(fn, world, shape, seed, causal):
    shape = tuple(int(x) for x in shape)
    if shape[-2] % world:
        raise ValueError(f"the test's case is wrong: {world} ranks must divide the sequence length {shape[-2]}")
    return shape, launch_graded(_backward_rank, world, args=(fn, shape, seed, causal))


def check_ring_backward(fn, world: int, shape, seed: int, causal: bool) -> None:
    """The gradients `fn` (the student's ring_attention_backward) returns on each of `world` ranks
    equal dQ, dK, dV of full attention's autograd on the rank's chunk (float64, rtol 1e-6)."""
    shape, res = _run_backward(fn, world, shape, seed, causal)
    full = full_attention_grads(shape, seed, causal)
    n = shape[-2] // world
    case = f"ring attention backward on {world} ranks, shape {shape}, causal={causal}"
    for r in range(world):
        expect_equal(res[r]["grads"][0] is not None, True,
                     f"{case}: rank {r} returns three tensors (dq, dk, dv), got a {res[r]['kind']}",
                     hint="return dq, dk, dv: the gradients for this rank's own chunks of Q, K and V")
        for name, got, hint in (
                ("dq", res[r]["grads"][0], "dQ of your rows: the sum over every key block of dS K / sqrt(d), with "
                 "P = exp(S - lse) from the saved log-sum-exp (not a softmax within the block) and D = rowsum(dO * O)."),
                ("dk", res[r]["grads"][1], "dK of your chunk sums dS^T Q / sqrt(d) over EVERY rank's queries: the "
                 "accumulator must travel with the chunk and come back to its owner at the end."),
                ("dv", res[r]["grads"][2], "dV of your chunk sums P^T dO over every rank's queries; causal: no block "
                 "from a later rank, and the diagonal block masked above the diagonal only.")):
            want = full[name][..., r * n:(r + 1) * n, :]
            expect_close(got, want, f"{case}: rank {r}'s {name} vs full attention's autograd", rtol=1e-6, atol=1e-9,
                         hint=hint)


def check_ring_backward_traffic(fn, world: int, shape, seed: int) -> None:
    """Without the causal mask, on each rank: bytes sent and received each at most
    `ring_backward_bytes`, no collective call, and no tensor created above max(4 c, one block of
    scores) elements (c = numel of one chunk of K)."""
    shape, res = _run_backward(fn, world, shape, seed, False)
    c, n = math.prod(shape) // world, shape[-2] // world
    most = ring_backward_bytes(shape, world)
    bound = max(4 * c, math.prod(shape[:-2]) * n * n)
    case = f"ring attention backward on {world} ranks, shape {shape}"
    for r in range(world):
        expect_between([res[r]["sent"], res[r]["received"]], 0, most,
                       f"{case}: rank {r}'s [bytes sent, bytes received], at most (4 (p-1) + 2) c e = {most}",
                       hint="p - 1 hops of K, V and their dK/dV accumulators (4 c values each hop), then one hop "
                            "of the accumulators home (2 c): nothing else travels.")
        expect_equal(res[r]["collectives"], {},
                     f"{case}: rank {r}'s collective calls (all-gather, all-reduce, reduce-scatter, ...)",
                     hint="Only point-to-point messages: isend/irecv, send/recv or batch_isend_irecv.")
        expect_between(res[r]["largest"], 1, bound,
                       f"{case}: the largest tensor rank {r} creates (elements), at most max(4 c, one n x n block "
                       f"of scores) = {bound}",
                       hint="Hold the K/V chunk that visits and its dK/dV accumulator (4 c), and one block of "
                            "scores at a time: never the whole sequence's K, V or scores.")


# ---------------------------------------------------------------- C: the 2-D mesh

def _groups_rank(rank, world, fn, dp, tp):
    ref_mesh = importlib.import_module("solutions_lib.dist.mesh")
    getattr(fn, "__globals__", {})["mesh_layout"] = exact_layout   # in this forked rank only
    with no_delegation("build_mesh", ref_mesh.init_mesh, ref_mesh.mesh_coordinates):
        mesh = fn(dp, tp)
    out = {"coords": [int(mesh["dp_rank"]), int(mesh["tp_rank"])]}
    for name in ("tp", "dp"):
        try:
            g = mesh[name + "_group"]
            out[name] = list(dist.get_process_group_ranks(g))
            total = torch.tensor([float(rank)])
            dist.all_reduce(total, group=g)
            out[name + "_sum"] = int(total.item())
        except Exception as e:  # noqa: BLE001
            out[name] = out[name + "_sum"] = f"not a process group of this rank ({type(e).__name__})"
    return out


def check_mesh_groups(fn, dp, tp):
    """`fn` (the student's build_mesh) on dp x tp ranks: each rank's coordinates, the ranks of its
    TP and DP groups, and an all-reduce over each group that sums exactly those ranks."""
    res = launch_graded(_groups_rank, dp * tp, args=(fn, dp, tp))
    table = exact_layout(dp, tp)
    for r in range(dp * tp):
        d, t = table["coords"][r]
        tp_ranks, dp_ranks = list(table["tp_groups"][d]), list(table["dp_groups"][t])
        expect_equal(res[r]["coords"], [d, t], f"dp={dp} x tp={tp}: rank {r}'s [dp_rank, tp_rank]")
        expect_equal([res[r]["tp"], res[r]["dp"]], [tp_ranks, dp_ranks],
                     f"dp={dp} x tp={tp}: ranks of rank {r}'s [tp_group, dp_group]",
                     hint="Create every TP group, then every DP group, on every rank; keep the two you belong to.")
        expect_equal([res[r]["tp_sum"], res[r]["dp_sum"]], [sum(tp_ranks), sum(dp_ranks)],
                     f"dp={dp} x tp={tp}: rank {r}'s all-reduce of global ranks over [tp_group, dp_group]")


def _mesh_case(dims, dp, mb, seed):
    model = mlp(dims, seed=seed).double()
    data = [(x.double(), y.double()) for x, y in regression_micro_batches(1, dp, dims[0], dims[2], batch=mb,
                                                                        seed=seed + 1)[0]]
    return model, data


def _mesh_rank(rank, world, fn, dp, tp, dims, mb, seed):
    # the test's own groups: these checks grade tp_dp_step alone
    tp_groups = [dist.new_group(list(range(d * tp, (d + 1) * tp))) for d in range(dp)]
    dp_groups = [dist.new_group(list(range(t, world, tp))) for t in range(tp)]
    d, t = divmod(rank, tp)
    model, data = _mesh_case(dims, dp, mb, seed)
    w1, b1, w2, b2 = (p.detach() for p in model.parameters())
    k = dims[1] // tp
    shard = {"w1": w1[t * k:(t + 1) * k], "b1": b1[t * k:(t + 1) * k], "w2": w2[:, t * k:(t + 1) * k], "b2": b2}
    shard = {name: p.clone().requires_grad_(True) for name, p in shard.items()}
    ref_mesh, ref_tp = (importlib.import_module(m) for m in ("solutions_lib.dist.mesh", "solutions_lib.dist.tensor_parallel"))
    with count_by_group() as calls, no_delegation("tp_dp_step", ref_mesh.average_gradients, ref_mesh.init_mesh, ref_tp):
        loss = fn(shard, *data[d], tp_groups[d], dp_groups[t])
    tp_ranks, dp_ranks = tuple(range(d * tp, (d + 1) * tp)), tuple(range(t, world, tp))
    counts = {"tp": 0, "dp": 0, "other": 0}
    for (op, ranks), n in calls.items():
        key = "tp" if ranks == tp_ranks and op == "all_reduce" else "dp" if ranks == dp_ranks and op == "all_reduce" else "other"
        counts[key] += n
    grads = {name: torch.full(p.shape, float("nan"), dtype=torch.float64) if p.grad is None else p.grad.detach().clone()
             for name, p in shard.items()}
    return dict(loss=float(loss), grads=grads, counts=counts)


def _mesh_expected(dims, dp, mb, seed):
    # one process: the full MLP, gradient accumulation of loss_d / dp over the dp micro-batches
    model, data = _mesh_case(dims, dp, mb, seed)
    losses = []
    for x, y in data:
        loss = F.mse_loss(model(x), y)
        (loss / dp).backward()
        losses.append(loss.item())
    w1, b1, w2, b2 = (p.grad for p in model.parameters())
    return losses, w1, b1, w2, b2


def check_mesh_step(fn, dp, tp, dims, mb, seed):
    """`fn` (the student's tp_dp_step) on dp x tp ranks with the test's groups: every rank's loss
    and sharded gradients equal one process's, sliced."""
    res = launch_graded(_mesh_rank, dp * tp, args=(fn, dp, tp, dims, mb, seed))
    losses, w1, b1, w2, b2 = _mesh_expected(dims, dp, mb, seed)
    k = dims[1] // tp
    for r in range(dp * tp):
        d, t = divmod(r, tp)
        want = {"w1": w1[t * k:(t + 1) * k], "b1": b1[t * k:(t + 1) * k], "w2": w2[:, t * k:(t + 1) * k], "b2": b2}
        expect_close(res[r]["loss"], losses[d], f"dp={dp} x tp={tp}, dims {dims}: rank {r}'s loss vs one process",
                     rtol=1e-9, hint="Sum the partial outputs over the TP group before adding b2 and taking the loss.")
        for name in ("w1", "b1", "w2", "b2"):
            expect_close(res[r]["grads"][name], want[name],
                         f"dp={dp} x tp={tp}, dims {dims}: rank {r}'s {name}.grad vs one process's gradient, sliced",
                         rtol=1e-6, atol=1e-9,
                         hint="TP sum: identity in the backward. DP: all-reduce SUM over the DP group, then divide by dp.")


def check_mesh_counts(fn, dp, tp, dims, mb, seed):
    """`fn` on dp x tp ranks: one all-reduce in the rank's TP group and one in its DP group per step."""
    res = launch_graded(_mesh_rank, dp * tp, args=(fn, dp, tp, dims, mb, seed))
    for r in range(dp * tp):
        expect_equal(res[r]["counts"], {"tp": 1, "dp": 1, "other": 0},
                     f"dp={dp} x tp={tp}: rank {r}'s collectives in one step, by group",
                     hint="One all_reduce in the TP group (the forward sum) and one flat all_reduce in the DP group.")
