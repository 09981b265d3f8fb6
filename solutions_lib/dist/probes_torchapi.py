"""Test machinery for assignment 11, exercises 5 (not an answer): torch's own APIs against the
by-hand builds of exercises 1-3 and 10's FSDP, measured from outside the student's code.

Each `*_rank` function runs inside a rank (under `launch_graded`), calls the student's answer, runs
the by-hand build of the course on the same seeded case in the same rank, and returns plain numbers
for the notebook to check (docs/GRADING.md rule 5). A crash of the answer inside a rank becomes a
`GradingError` that says what the test was doing, not a traceback of the test.

    mesh_rank(rank, world, torch_mesh, cases)        # init_device_mesh vs new_group by hand (11 ex2 C)
    fsdp_rank(rank, world, shard_fn, case)           # fully_shard vs the course's FlatShardFSDP (10 ex2)
    tp_rank(rank, world, parallelize_fn, case)       # parallelize_module vs tp_lab's column/row layers (11 ex1)
    pp_rank(rank, world, step_fn, case)              # torch.distributed.pipelining vs a by-hand 1F1B (11 ex2 A)

and one check per test cell, which launches the probe and checks in the notebook what the ranks measured:

    check_mesh(torch_mesh, [(2, 2)]); check_fsdp(shard_with_fsdp2, 2, case)
    check_tp(parallelize_mlp, 2, case); check_pp(torch_pipeline_step, 2, case)

What is counted where: the process-group collectives of FSDP2 (all-gather and reduce-scatter of the
flat shards) and the point-to-point messages of `torch.distributed.pipelining` (batch_isend_irecv)
go through `torch.distributed`'s Python functions, so `CommCounter` sees them. DTensor's
collectives (`parallelize_module`) go through functional collectives (`torch.ops._c10d_functional`)
that bypass those functions: `CommCounter` sees nothing there, and the test counts them with
torch's own `CommDebugMode` instead. `init_device_mesh` creates its groups without a collective
that CommCounter sees.
"""
from __future__ import annotations

import copy
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from ..grading import GradingError
from .counting import CommCounter

__all__ = ["check_mesh", "check_fsdp", "check_tp", "check_pp", "hand_mesh", "mesh_rank", "fsdp_model", "fsdp_rank", "NormMLP", "tp_case", "tp_rank",
           "pp_model", "pp_rank", "hand_pipeline", "schedule_events", "local_numel", "funcol_counts"]


def _fail(what: str, e: BaseException, hint: str = "") -> GradingError:
    return GradingError(f"{what}: your code raised {type(e).__name__}: {str(e)[:300]}.{' ' + hint if hint else ''}")


# ------------------------------------------------------------------------------------------------ mesh

def hand_mesh(dp: int, tp: int) -> dict:
    """The by-hand dp x tp mesh of 11 exercises 2 (TP innermost: global rank = d tp + t), built with
    `dist.new_group` on every rank in one order. Returns this rank's groups and their ranks."""
    world, rank = dist.get_world_size(), dist.get_rank()
    d, t = divmod(rank, tp)
    out = {}
    for i in range(dp):
        ranks = list(range(i * tp, (i + 1) * tp))
        g = dist.new_group(ranks)
        if i == d:
            out["tp_group"], out["tp_ranks"] = g, ranks
    for j in range(tp):
        ranks = list(range(j, world, tp))
        g = dist.new_group(ranks)
        if j == t:
            out["dp_group"], out["dp_ranks"] = g, ranks
    out["coord"] = [d, t]
    return out


def _group_sum(group, rank: int) -> float:
    x = torch.tensor([float(rank + 1) ** 2])
    dist.all_reduce(x, group=group)
    return float(x.item())


def mesh_rank(rank: int, world: int, torch_mesh, cases) -> list[dict]:
    """For each (dp, tp): the student's DeviceMesh against the by-hand groups, measured in this rank:
    the ranks of mesh['dp'] and mesh['tp'] groups, the rank's coordinate, and the result of an
    all-reduce over each of the mesh's groups (counted with CommCounter) beside the by-hand one."""
    from torch.distributed.device_mesh import DeviceMesh

    reports = []
    for dp, tp in cases:
        hand = hand_mesh(dp, tp)
        try:
            mesh = torch_mesh(dp, tp)
        except Exception as e:  # noqa: BLE001
            raise _fail(f"torch_mesh({dp}, {tp}) on rank {rank}", e) from None
        if not isinstance(mesh, DeviceMesh):
            raise GradingError(f"torch_mesh({dp}, {tp}) returned a {type(mesh).__name__}, not a DeviceMesh "
                               "(torch.distributed.device_mesh.init_device_mesh makes one).")
        rep = {"hand_tp": hand["tp_ranks"], "hand_dp": hand["dp_ranks"], "hand_coord": hand["coord"],
               "names": [str(n) for n in (mesh.mesh_dim_names or ())], "shape": [int(s) for s in mesh.shape]}
        try:
            groups = {ax: mesh[ax].get_group() for ax in ("dp", "tp")}
        except Exception as e:  # noqa: BLE001
            raise _fail(f"torch_mesh({dp}, {tp})['dp' or 'tp'].get_group() on rank {rank}", e,
                        "name the mesh's dimensions with mesh_dim_names=('dp', 'tp').") from None
        rep["tp"] = [int(r) for r in dist.get_process_group_ranks(groups["tp"])]
        rep["dp"] = [int(r) for r in dist.get_process_group_ranks(groups["dp"])]
        rep["coord"] = [int(c) for c in mesh.get_coordinate()] if len(mesh.shape) == 2 else []
        with CommCounter() as comm:
            rep["tp_sum"] = _group_sum(groups["tp"], rank)
            rep["dp_sum"] = _group_sum(groups["dp"], rank)
        rep["hand_tp_sum"] = _group_sum(hand["tp_group"], rank)
        rep["hand_dp_sum"] = _group_sum(hand["dp_group"], rank)
        rep["counted"] = int(comm.calls["all_reduce"])
        reports.append(rep)
    return reports


# ------------------------------------------------------------------------------------------------ FSDP

def fsdp_model(seed: int, dims) -> nn.Module:
    """A float32 MLP with a nested block, dims = [d0, d1, d2, d3]:
    Sequential(Linear(d0, d1), Tanh, Sequential(Linear(d1, d2), Tanh, Linear(d2, d3)))."""
    torch.manual_seed(seed)
    d0, d1, d2, d3 = dims
    return nn.Sequential(nn.Linear(d0, d1), nn.Tanh(),
                         nn.Sequential(nn.Linear(d1, d2), nn.Tanh(), nn.Linear(d2, d3)))


def local_numel(p) -> int:
    """Elements this rank stores for parameter `p` (a DTensor's local shard; a plain tensor whole)."""
    to_local = getattr(p, "to_local", None)
    return int((to_local() if callable(to_local) else p).numel())


def _full(t):
    if t is None:
        return None
    full = getattr(t, "full_tensor", None)
    return (full() if callable(full) else t).detach().clone()


def fsdp_rank(rank: int, world: int, shard_fn, case: dict) -> dict:
    """One SGD step of the student's FSDP2 model and of the course's by-hand FlatShardFSDP (10
    exercises 2) on the same weights and the same per-rank micro-batch. Returns per-parameter local
    sizes, full gradients and parameters after the step (both builds), and the collectives of the
    forward and of the backward (CommCounter), for both."""
    import warnings

    from .fsdp import FlatShardFSDP

    warnings.filterwarnings("ignore", message=".*is deprecated. Please use `torch.distributed")
    dims, lr = case["dims"], case["lr"]
    g = torch.Generator().manual_seed(case["seed"] + 1)
    xs = [torch.randn(case["batch"], dims[0], generator=g) for _ in range(world)]
    ys = [torch.randn(case["batch"], dims[-1], generator=g) for _ in range(world)]
    names = [n for n, _ in fsdp_model(case["seed"], dims).named_parameters()]

    # the by-hand build (the course's FlatShardFSDP, one flat unit)
    hand = FlatShardFSDP(fsdp_model(case["seed"], dims))
    with CommCounter() as h_fwd:
        loss = F.mse_loss(hand(xs[rank]), ys[rank])
    with CommCounter() as h_bwd:
        loss.backward()
    shard_grad = hand.flat_shard.grad.detach().clone()
    flat_grads = [torch.zeros_like(shard_grad) for _ in range(world)]
    dist.all_gather(flat_grads, shard_grad)
    flat = torch.cat(flat_grads)
    hand_grads = [flat[o:o + math.prod(s)].view(s).clone() for o, s in zip(hand.offsets, hand.shapes)]
    torch.optim.SGD(hand.parameters(), lr=lr).step()
    full_after = hand.full_parameters()
    hand_after = [full_after[n] for n in names]

    # the student's FSDP2
    model = fsdp_model(case["seed"], dims)
    try:
        out_model = shard_fn(model)
    except Exception as e:  # noqa: BLE001
        raise _fail(f"shard_with_fsdp2(model) on rank {rank}", e) from None
    model = out_model if isinstance(out_model, nn.Module) else model
    params = dict(model.named_parameters())
    if sorted(params) != sorted(names):
        raise GradingError(f"shard_with_fsdp2: the returned model's parameters are {sorted(params)}, expected "
                           f"{sorted(names)} (return the model you were given, sharded in place).")
    local = [local_numel(params[n]) for n in names]
    try:
        with CommCounter() as s_fwd:
            loss = F.mse_loss(model(xs[rank]), ys[rank])
        with CommCounter() as s_bwd:
            loss.backward()
    except Exception as e:  # noqa: BLE001
        raise _fail(f"a training step of your FSDP2 model on rank {rank}", e) from None
    grads = [_full(params[n].grad) for n in names]
    torch.optim.SGD(model.parameters(), lr=lr).step()
    after = [_full(params[n]) for n in names]

    def kinds(c):
        out = {}
        for op, (calls, nbytes) in c.summary().items():
            k = "all_gather" if op.startswith("all_gather") else "reduce_scatter" if op.startswith("reduce_scatter") \
                else op
            a, b = out.get(k, (0, 0))
            out[k] = (a + calls, b + nbytes)
        return out

    return {"names": names, "full": [int(math.prod(s)) for s in hand.shapes], "local": local,
            "grads": _flat(grads, f"the gradients of your FSDP2 model on rank {rank}"),
            "hand_grads": _flat(hand_grads, "the by-hand FSDP's gradients"),
            "after": _flat(after, f"the parameters after one SGD step on rank {rank}"),
            "hand_after": _flat(hand_after, "the by-hand FSDP's parameters"),
            "fwd": kinds(s_fwd), "bwd": kinds(s_bwd), "hand_fwd": kinds(h_fwd), "hand_bwd": kinds(h_bwd)}


# ------------------------------------------------------------------------------------------------ TP

class NormMLP(nn.Module):
    """LayerNorm, then fc1 (h -> 4h), GeLU, fc2 (4h -> h): the MLP half of a transformer block."""

    def __init__(self, hidden: int, ffn: int | None = None):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn or 4 * hidden)
        self.fc2 = nn.Linear(ffn or 4 * hidden, hidden)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.norm(x))))


def tp_case(seed: int, hidden: int, batch: int, seq_len: int):
    """A seeded float64 NormMLP (with non-trivial LayerNorm weights), an input and a loss weight."""
    torch.manual_seed(seed)
    m = NormMLP(hidden).double()
    with torch.no_grad():
        m.norm.weight.uniform_(0.5, 1.5)
        m.norm.bias.uniform_(-0.5, 0.5)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, seq_len, hidden, generator=g, dtype=torch.float64)
    w = torch.randn(batch, seq_len, hidden, generator=g, dtype=torch.float64)
    return m, x, w


def funcol_counts(mode) -> dict:
    """CommDebugMode's counts as {kind: calls}, kinds all_reduce / all_gather / reduce_scatter / ..."""
    out = {}
    for op, n in mode.get_comm_counts().items():
        name = str(op).split(".")[-1] if "." in str(op) else str(op)
        name = getattr(op, "__name__", name)
        for k in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"):
            if k in str(op) or k in name:
                out[k] = out.get(k, 0) + int(n)
                break
        else:
            out[str(op)] = out.get(str(op), 0) + int(n)
    return out


def _by_kind(counter) -> dict:
    out = {}
    for op, (calls, _) in counter.summary().items():
        k = "all_gather" if op.startswith("all_gather") else "reduce_scatter" if op.startswith("reduce_scatter") else op
        out[k] = out.get(k, 0) + calls
    return out


def tp_rank(rank: int, world: int, parallelize_fn, case: dict) -> dict:
    """The student's parallelize_module plan on a NormMLP against the course's by-hand column/row
    layers (tp_lab, with f/g or their sequence-parallel twins) on the same weights and input.
    Returns outputs, input gradients, the rank's weight shards and their gradients, the LayerNorm's
    full gradients, and the collectives per direction of both (torch's via CommDebugMode)."""
    import warnings

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.debug import CommDebugMode

    from . import tp_lab

    warnings.filterwarnings("ignore", message=".*is deprecated. Please use `torch.distributed")
    sp = bool(case["sequence_parallel"])
    full, x, w = tp_case(case["seed"], case["hidden"], case["batch"], case["seq_len"])
    s, k4 = x.shape[1], full.fc1.out_features // world
    lo, hi = (rank * s // world, (rank + 1) * s // world) if sp else (0, s)

    # by hand (11 exercises 1, the course's copies)
    hand = copy.deepcopy(full)
    ops = dict(enter=tp_lab.GatherFromSP.apply) if sp else {}
    col = tp_lab.ColumnParallelLinear(hand.fc1, **ops)
    row = tp_lab.RowParallelLinear(hand.fc2, **(dict(exit=tp_lab.ScatterToSP.apply) if sp else {}))
    xh = x[:, lo:hi].clone().requires_grad_(True)
    with CommCounter() as h_fwd:
        yh = row(F.gelu(col(hand.norm(xh))))
    with CommCounter() as h_bwd:
        (yh * w[:, lo:hi]).sum().backward()
    hand_norm = [p.grad.detach().clone() for p in (hand.norm.weight, hand.norm.bias)]
    if sp:     # the replicated LayerNorm's gradients are partial sums over each rank's tokens
        for t in hand_norm:
            dist.all_reduce(t)

    # torch's API
    model = copy.deepcopy(full)
    mesh = init_device_mesh("cpu", (world,))
    try:
        out_model = parallelize_fn(model, mesh, sp)
    except Exception as e:  # noqa: BLE001
        raise _fail(f"parallelize_mlp(model, mesh, sequence_parallel={sp}) on rank {rank}", e) from None
    model = out_model if isinstance(out_model, nn.Module) else model
    xt = x[:, lo:hi].clone().requires_grad_(True)
    try:
        with CommDebugMode() as t_fwd:
            yt = model(xt)
            if hasattr(yt, "full_tensor"):
                raise GradingError(f"parallelize_mlp(sequence_parallel={sp}): the model returns a DTensor; "
                                   "return a plain tensor (use_local_output, the default of torch's styles).")
        yt_shape = tuple(yt.shape)
        if yt_shape != tuple(yh.shape):
            raise GradingError(f"parallelize_mlp(sequence_parallel={sp}): the output on rank {rank} has shape "
                               f"{yt_shape}, expected {tuple(yh.shape)} (the "
                               f"{'rank s sequence shard' if sp else 'full, replicated output'}).")
        with CommDebugMode() as t_bwd:
            (yt * w[:, lo:hi]).sum().backward()
    except GradingError:
        raise
    except Exception as e:  # noqa: BLE001
        raise _fail(f"a forward and backward of your parallelized MLP on rank {rank} "
                    f"(sequence_parallel={sp})", e) from None

    def local(p):
        to_local = getattr(p, "to_local", None)
        return (to_local() if callable(to_local) else p).detach().clone()

    def local_grad(p, name):
        if p.grad is None:
            raise GradingError(f"parallelize_mlp(sequence_parallel={sp}): {name} has no gradient on rank {rank} "
                               "after the backward.")
        return local(p.grad)

    if xt.grad is None:
        raise GradingError(f"parallelize_mlp(sequence_parallel={sp}): no gradient reached the input on rank {rank}.")

    return {"out": yt.detach().clone(), "hand_out": yh.detach().clone(),
            "xgrad": xt.grad.detach().clone(), "hand_xgrad": xh.grad.detach().clone(),
            "fc1_w": local(model.fc1.weight), "fc2_w": local(model.fc2.weight),
            "hand_fc1_w": col.weight.detach().clone(), "hand_fc2_w": row.weight.detach().clone(),
            "fc1_g": local_grad(model.fc1.weight, "fc1.weight"), "fc2_g": local_grad(model.fc2.weight, "fc2.weight"),
            "fc1_bg": local_grad(model.fc1.bias, "fc1.bias"),
            "hand_fc1_g": col.weight.grad.detach().clone(), "hand_fc2_g": row.weight.grad.detach().clone(),
            "hand_fc1_bg": col.bias.grad.detach().clone(),
            "norm_g": _flat([_full(p.grad) for p in (model.norm.weight, model.norm.bias)],
                            f"the LayerNorm's gradients on rank {rank}"),
            "hand_norm_g": _flat(hand_norm, "the by-hand LayerNorm gradients"),
            "fwd": funcol_counts(t_fwd), "bwd": funcol_counts(t_bwd),
            "hand_fwd": _by_kind(h_fwd), "hand_bwd": _by_kind(h_bwd), "k4": k4}


# ------------------------------------------------------------------------------------------------ PP

def pp_model(seed: int, width: int, layers: int) -> nn.Sequential:
    """nn.Sequential of `layers` layers, each Sequential(Linear(width, width), Tanh), float64."""
    torch.manual_seed(seed)
    return nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(layers)]).double()


def _mse(y, t):
    return ((y - t) ** 2).mean()


def schedule_events(kind: str, stage: int, n_stages: int, m: int) -> list[str]:
    """The order of forwards and backwards of one stage: GPipe (all forwards, then all backwards)
    or 1F1B (warm-up of min(p - 1 - stage, m) forwards, then one forward one backward, then the
    remaining backwards), as ["F0", "F1", "B0", ...]."""
    if kind == "gpipe":
        return [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]
    warm = min(n_stages - 1 - stage, m)
    order = [f"F{i}" for i in range(warm)]
    f, b = warm, 0
    while b < m:
        if f < m:
            order.append(f"F{f}")
            f += 1
        order.append(f"B{b}")
        b += 1
    return order


def hand_pipeline(model: nn.Sequential, x, target, m: int, loss_fn=_mse) -> list[float]:
    """A by-hand 1F1B step (11 exercises 2: isend, recv, on the world group): stage r runs
    layers [r L/p, (r+1) L/p) of `model`; gradients of loss_i / m accumulate in those layers.
    Returns the micro-batch losses on the last stage, [] elsewhere."""
    rank, p = dist.get_rank(), dist.get_world_size()
    L = len(model)
    part = model[rank * L // p:(rank + 1) * L // p]
    xs, ts = x.chunk(m), target.chunk(m)
    shape = xs[0].shape[:-1] + (x.shape[-1],)
    first, last = rank == 0, rank == p - 1
    saved, losses, pending = {}, [], []
    for action in schedule_events("1f1b", rank, p, m):
        i = int(action[1:])
        if action[0] == "F":
            if first:
                inp = xs[i]
            else:
                inp = torch.empty(shape, dtype=x.dtype)
                dist.recv(inp, rank - 1)
                inp.requires_grad_(True)
            out = part(inp)
            if last:
                loss = loss_fn(out, ts[i])
                losses.append(float(loss.detach()))
                out = loss / m
            else:
                pending.append(dist.isend(out.detach().contiguous(), rank + 1))
            saved[i] = (inp, out)
        else:
            inp, out = saved.pop(i)
            if last:
                out.backward()
            else:
                grad = torch.empty_like(out)
                dist.recv(grad, rank + 1)
                out.backward(grad)
            if not first:
                pending.append(dist.isend(inp.grad.contiguous(), rank - 1))
    for work in pending:
        work.wait()
    return losses


def _flat(ts, what: str) -> torch.Tensor:
    """Tensors flattened into one vector; a missing one (None) is a GradingError naming `what`."""
    missing = [i for i, t in enumerate(ts) if t is None]
    if missing:
        raise GradingError(f"{what}: missing (None) for entries {missing}: a parameter without a gradient?")
    return torch.cat([t.detach().reshape(-1).to(torch.float64) for t in ts])


_SHAPE_INFERENCE = ("_shape_inference", "_compute_outputs", "_prepare_forward_infra")


def _in_shape_inference(depth: int = 40) -> bool:
    """True when called from torch.distributed.pipelining's set-up forward (PipelineStage runs the
    stage once on its first step to learn the output's shape: not a micro-batch of the schedule)."""
    import sys

    f = sys._getframe(1)
    for _ in range(depth):
        if f is None:
            return False
        if f.f_code.co_name in _SHAPE_INFERENCE and "pipelining" in f.f_code.co_filename:
            return True
        f = f.f_back
    return False


def _pp_once(rank, world, step_fn, case, schedule, x, t):
    width, layers, m = case["width"], case["layers"], case["m"]
    model = pp_model(case["seed"], width, layers)
    lo = rank * layers // world
    ran = [0] * layers
    events: list[str] = []
    counter = {"F": 0}

    def count(j):
        def hook(mod, inp, out):
            if not _in_shape_inference():
                ran[j] += 1
        return hook

    def first_layer(mod, inp, out):
        if not isinstance(out, torch.Tensor) or _in_shape_inference():
            return
        i = counter["F"]
        counter["F"] += 1
        events.append(f"F{i}")
        if out.requires_grad:
            out.register_hook(lambda grad: events.append(f"B{i}"))

    handles = [model[j].register_forward_hook(count(j)) for j in range(layers)]
    handles.append(model[lo].register_forward_hook(first_layer))
    try:
        with CommCounter() as comm:
            losses = step_fn(model, x, t, _mse, m, schedule)
    except Exception as e:  # noqa: BLE001
        raise _fail(f"torch_pipeline_step(..., n_microbatches={m}, schedule={schedule!r}) on rank {rank}",
                    e) from None
    finally:
        for h in handles:
            h.remove()
    try:
        losses = [float(v) for v in (losses if losses is not None else [])]
    except Exception as e:  # noqa: BLE001
        raise _fail(f"the losses returned by torch_pipeline_step on rank {rank} (a list of numbers on the "
                    "last stage, [] elsewhere)", e) from None
    has_grad = [int(l[0].weight.grad is not None) for l in model]
    hi = (rank + 1) * layers // world
    grads = _flat([model[j][0].weight.grad for j in range(lo, hi)] + [model[j][0].bias.grad for j in range(lo, hi)],
                  f"the gradients of this stage's layers {lo}..{hi - 1} on rank {rank} ({schedule})")
    p2p = sum(comm.calls[k] for k in ("send", "recv", "isend", "irecv", "batch_isend_irecv"))
    coll = sum(c for k, c in comm.calls.items()
               if k not in ("send", "recv", "isend", "irecv", "batch_isend_irecv", "barrier"))
    return {"losses": losses, "grads": grads, "has_grad": has_grad, "ran": [int(c > 0) for c in ran],
            "forwards": sum(ran[lo:hi]), "events": events, "p2p": int(p2p), "collectives": int(coll)}


def pp_rank(rank: int, world: int, step_fn, case: dict) -> list[dict]:
    """The student's torch.distributed.pipelining step, once per schedule of case["schedules"], against
    the by-hand 1F1B on the same model and batch. Measured per schedule: the losses, this stage's
    gradients (flat) and which layers got one, which layers ran a forward on this rank, the order of
    forwards and backwards of the stage's first layer (hooks; torch's set-up forward that learns shapes
    is not counted), and the point-to-point and collective calls (CommCounter)."""
    import warnings

    warnings.filterwarnings("ignore")
    width, layers, m, batch = case["width"], case["layers"], case["m"], case["batch"]
    g = torch.Generator().manual_seed(case["seed"] + 1)
    x = torch.randn(batch, width, generator=g, dtype=torch.float64)
    t = torch.randn(batch, width, generator=g, dtype=torch.float64)
    lo, hi = rank * layers // world, (rank + 1) * layers // world
    hand = pp_model(case["seed"], width, layers)
    hand_losses = hand_pipeline(hand, x, t, m)
    hand_grads = _flat([hand[j][0].weight.grad for j in range(lo, hi)] + [hand[j][0].bias.grad for j in range(lo, hi)],
                       "the by-hand pipeline's gradients")
    reports = []
    for schedule in case["schedules"]:
        dist.barrier()
        rep = _pp_once(rank, world, step_fn, case, schedule, x, t)
        rep.update(hand_losses=hand_losses, hand_grads=hand_grads, schedule=schedule)
        reports.append(rep)
    return reports


# ------------------------------------------------------------------------------------------------ the checks
# Each test cell of the notebook is one call of these: run the probe on the ranks, then check in the
# notebook process what the ranks measured (docs/GRADING.md rule 5), with a hint a student can act on.

_TP_INNER = "TP innermost: rank = d * tp + t, so the TP group of a rank is the tp consecutive ranks of its row."


def check_mesh(torch_mesh, cases) -> None:
    """torch_mesh(dp, tp) on 4 ranks for each (dp, tp) of `cases` against the by-hand groups."""
    from ..grading import expect_close, expect_equal
    from .graded import launch_graded

    for r, reports in enumerate(launch_graded(mesh_rank, 4, args=(torch_mesh, list(cases)))):
        for (dp, tp), rep in zip(cases, reports):
            at = f"torch_mesh({dp}, {tp}) on rank {r} of 4"
            expect_equal(rep["names"], ["dp", "tp"], f"{at}: mesh.mesh_dim_names", hint="name the dimensions 'dp', 'tp'.")
            expect_equal(rep["tp"], rep["hand_tp"], f"{at}: ranks of mesh['tp']'s group vs the by-hand TP group",
                         hint=_TP_INNER)
            expect_equal(rep["dp"], rep["hand_dp"], f"{at}: ranks of mesh['dp']'s group vs the by-hand DP group",
                         hint="the DP group holds the ranks with the same t: t, t + tp, t + 2 tp, ...")
            expect_equal(rep["coord"], rep["hand_coord"], f"{at}: mesh.get_coordinate() vs (d, t)", hint=_TP_INNER)
            expect_close([rep["tp_sum"], rep["dp_sum"]], [rep["hand_tp_sum"], rep["hand_dp_sum"]],
                         f"{at}: all-reduce of (rank + 1)^2 over the mesh's tp and dp groups vs the by-hand groups",
                         rtol=0, atol=0)
            expect_equal(rep["counted"], 2, f"{at}: the two all-reduces over the mesh's groups, counted by CommCounter")


def check_fsdp(shard_fn, world: int, case: dict, units: int = 3) -> None:
    """One SGD step of shard_fn(fsdp_model(...)) against the course's FlatShardFSDP on `world` ranks."""
    from ..grading import expect_close, expect_equal
    from .graded import launch_graded

    for r, rep in enumerate(launch_graded(fsdp_rank, world, args=(shard_fn, case))):
        at = f"rank {r} of {world}, dims {case['dims']}"
        expect_equal(rep["local"], [n // world for n in rep["full"]], f"{at}: elements of each parameter on this rank "
                     "(DTensor.to_local())", hint="fully_shard keeps 1/N of every parameter per rank; a whole "
                     "parameter on every rank is not sharded.")
        expect_close(rep["grads"], rep["hand_grads"], f"{at}: full gradients vs the by-hand FSDP's", rtol=1e-5,
                     atol=1e-6, hint="each rank's gradient must be the average over the ranks.")
        expect_close(rep["after"], rep["hand_after"], f"{at}: parameters after one SGD step vs the by-hand FSDP's",
                     rtol=1e-5, atol=1e-6)
        fwd, bwd, hfwd, hbwd = (rep[k] for k in ("fwd", "bwd", "hand_fwd", "hand_bwd"))
        expect_equal(fwd.get("all_gather", (0, 0))[0], units, f"{at}: all-gathers in the forward",
                     hint="one unit per nn.Linear: one all-gather each.")
        expect_equal(bwd.get("all_gather", (0, 0))[0], units, f"{at}: all-gathers in the backward",
                     hint="resharded after forward, each unit is gathered again for its backward.")
        expect_equal(bwd.get("reduce_scatter", (0, 0))[0], units, f"{at}: reduce-scatters in the backward",
                     hint="one per unit.")
        expect_equal(bwd.get("reduce_scatter", (0, 0))[1], hbwd["reduce_scatter"][1],
                     f"{at}: bytes reduce-scattered vs the by-hand FSDP's")
        expect_equal(fwd.get("all_gather", (0, 0))[1], hfwd["all_gather"][1],
                     f"{at}: bytes all-gathered in the forward vs the by-hand FSDP's")


_TOL = dict(rtol=1e-9, atol=1e-12)


def check_tp(parallelize_fn, world: int, case: dict) -> None:
    """parallelize_fn(NormMLP, mesh, sp) against the by-hand column/row layers on `world` ranks."""
    from ..grading import expect_close, expect_equal
    from .graded import launch_graded

    sp = case["sequence_parallel"]
    for r, rep in enumerate(launch_graded(tp_rank, world, args=(parallelize_fn, case))):
        at = f"rank {r} of {world}, sequence_parallel={sp}"
        for name, how in (("fc1_w", "rows [r k, (r+1) k): column parallel"), ("fc2_w", "columns: row parallel")):
            expect_equal(tuple(rep[name].shape), tuple(rep["hand_" + name].shape),
                         f"{at}: shape of the {name[:3]}.weight shard this rank keeps", hint=f"{name[:3]}: {how}.")
            expect_close(rep[name], rep["hand_" + name], f"{at}: {name[:3]}.weight's local shard vs by hand",
                         rtol=0, atol=0, hint=f"{name[:3]}: {how}.")
        expect_close(rep["out"], rep["hand_out"], f"{at}: output vs the by-hand layers", **_TOL)
        expect_close(rep["xgrad"], rep["hand_xgrad"], f"{at}: gradient of the input vs by hand", **_TOL)
        for name in ("fc1_g", "fc2_g", "fc1_bg"):
            expect_close(rep[name], rep["hand_" + name], f"{at}: gradient of the local {name} shard vs by hand", **_TOL)
        expect_close(rep["norm_g"], rep["hand_norm_g"], f"{at}: LayerNorm's full gradients vs by hand", **_TOL,
                     hint="under SP each rank's LayerNorm sees its own tokens: its gradient is a partial sum.")
        expect_equal(rep["fwd"], rep["hand_fwd"], f"{at}: collectives in the forward, torch's (CommDebugMode) vs "
                     "by hand (CommCounter)", hint="TP: one all-reduce; SP: one all-gather and one reduce-scatter.")
        expect_equal(rep["bwd"], rep["hand_bwd"], f"{at}: collectives in the backward, torch's vs by hand")


def check_pp(step_fn, world: int, case: dict) -> None:
    """step_fn (torch.distributed.pipelining) against the by-hand 1F1B on `world` ranks, per schedule."""
    from ..grading import expect_between, expect_close, expect_equal
    from .graded import launch_graded

    L, m = case["layers"], case["m"]
    for r, reports in enumerate(launch_graded(pp_rank, world, args=(step_fn, case))):
        mine = [int(r * L // world <= j < (r + 1) * L // world) for j in range(L)]
        for rep in reports:
            at = f"rank {r} of {world}, {rep['schedule']}, L={L}, m={m}"
            expect_equal(rep["ran"], mine, f"{at}: layers that ran a forward on this rank (1 = ran)",
                         hint="rank r runs only its stage, layers [r L/p, (r+1) L/p).")
            expect_equal(rep["has_grad"], mine, f"{at}: layers with a gradient on this rank (1 = has one)")
            expect_close(rep["grads"], rep["hand_grads"], f"{at}: gradients of the stage's layers vs by-hand 1F1B",
                         **_TOL, hint="the gradient of the mean of the micro-batch losses.")
            expect_close(rep["losses"], rep["hand_losses"], f"{at}: losses returned vs by-hand 1F1B", **_TOL,
                         hint="the last stage returns the m micro-batch losses as floats, the others [].")
            expect_equal(rep["events"], schedule_events(rep["schedule"], r, world, m),
                         f"{at}: order of forwards and backwards of the stage's micro-batches",
                         hint="GPipe: all forwards, then all backwards; 1F1B: p - 1 - s forwards, then alternate.")
            expect_between(rep["p2p"], 1, None, f"{at}: point-to-point calls (CommCounter)")
            expect_equal(rep["collectives"], 0, f"{at}: collectives issued (CommCounter)")
