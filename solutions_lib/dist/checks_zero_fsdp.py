"""Grading harnesses of assignment 10 exercises 2: ZeRO-1 (a sharded AdamW) and FSDP by hand.

Each ``check_*`` function runs on one rank of `launch_graded` (it is the rank function, or is
called from one): it builds a fresh `mlp`, trains it with the student's class for the given
micro-batches inside ``no_delegation`` (torch's AdamW, ZeroRedundancyOptimizer, FSDP and the
course's own ZeRO/FSDP modules are forbidden), measures what the exercise teaches and raises
`GradingError` with a message a student can act on. The expected values always come from the
caller (`reference_adamw_training` run in the test cell on the same data), never from here.

* `check_zero_equivalence` / `check_zero_bytes_and_comm`: the parameters after training match one
  process with torch AdamW; the optimizer keeps no model-sized tensor, reports two moment shards,
  and issues one reduce-scatter and one all-gather of the padded flat vector per step.
* `check_fsdp_equivalence` / `check_fsdp_memory`: losses and gathered parameters bitwise equal to
  the reference, bytes of the collectives; parameter storage, gradient shard and live tensor bytes
  between steps measured by the test (`probes_sharding.live_tensor_bytes`).
"""
from __future__ import annotations

import importlib

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..grading import expect_between, expect_equal, expect_own, expect_true, no_delegation
from .counting import CommCounter
from .probes_sharding import live_tensor_bytes
from .zero import mlp

__all__ = ["check_zero_equivalence", "check_zero_bytes_and_comm", "model_sized_tensors",
           "check_fsdp_equivalence", "check_fsdp_memory", "zero_forbidden", "fsdp_forbidden"]

_RS = ("reduce_scatter_tensor", "reduce_scatter_single")
_AG = ("all_gather_into_tensor", "all_gather_single")


def zero_forbidden() -> tuple:
    """What a ZeRO-1 answer may not call: torch's Adam/AdamW (classes and modules),
    ZeroRedundancyOptimizer, and the course's ZeRO, FSDP and optimizer modules."""
    from torch.distributed.optim import ZeroRedundancyOptimizer

    import solutions_lib.dist.fsdp
    import solutions_lib.dist.zero
    import solutions_lib.optim
    return (torch.optim.AdamW, torch.optim.Adam, ZeroRedundancyOptimizer,
            importlib.import_module("torch.optim.adamw"), importlib.import_module("torch.optim.adam"),
            importlib.import_module("torch.distributed.optim.zero_redundancy_optimizer"),
            solutions_lib.dist.zero, solutions_lib.dist.fsdp, solutions_lib.optim)


def fsdp_forbidden() -> tuple:
    """What an FSDP answer may not call: torch's FSDP1/FSDP2 and the course's FSDP and ZeRO modules."""
    from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard

    import solutions_lib.dist.fsdp
    import solutions_lib.dist.zero
    return (FullyShardedDataParallel, fully_shard,
            importlib.import_module("torch.distributed.fsdp._fully_shard._fully_shard"),
            importlib.import_module("torch.distributed.fsdp.fully_sharded_data_parallel"),
            solutions_lib.dist.fsdp, solutions_lib.dist.zero)


# ---------------------------------------------------------------- ZeRO-1


def _zero_rank(opt_cls, rank, world_size, dims, seed, batches, hp, expected):
    """Train `mlp(dims, seed)` with `opt_cls` on this rank's micro-batches; check the parameters
    against `expected["params"]` (to 1e-5 relative). Returns (state_bytes(), counters per step,
    parameters, optimizer)."""
    import solutions_lib.dist.zero
    forbidden = zero_forbidden()
    expect_own(opt_cls, "ZeRO-1 AdamW", *forbidden[:3], solutions_lib.dist.zero.ZeroOneAdamW)
    model = mlp(dims, seed=seed)
    params = list(model.parameters())
    comm = []
    with no_delegation("ZeRO-1 AdamW", *forbidden):
        opt = opt_cls(model.parameters(), **hp)
        for step in batches:
            x, y = step[rank]
            F.mse_loss(model(x), y).backward()
            with CommCounter() as c:
                opt.step()
            opt.zero_grad()
            comm.append(c)
        reported = opt.state_bytes()
    for i, (got, want) in enumerate(zip(params, expected["params"])):
        # the same math in another order rounds differently: a tight tolerance, not bitwise
        expect_true(torch.allclose(got.detach(), want, rtol=1e-5, atol=1e-6),
                    f"parameter {i} (shape {tuple(want.shape)}) after {len(batches)} steps differs from torch "
                    f"AdamW on one process by {(got.detach() - want).abs().max().item():.3g} (allowed: 1e-5 "
                    f"relative). Check: SUM then / world size; bias corrections with t starting at 1; decay "
                    f"uses lr * weight_decay.")
    return reported, comm, params, opt


def check_zero_equivalence(rank, world_size, opt_cls, dims, seed, batches, hp, expected):
    """Rank function: `opt_cls` (the student's ZeRO-1 AdamW) trains `mlp(dims, seed)` to the
    parameters of `expected = reference_adamw_training(...)` (relative 1e-5)."""
    _zero_rank(opt_cls, rank, world_size, dims, seed, batches, hp, expected)
    return True


def model_sized_tensors(opt, params, n: int) -> list[tuple]:
    """Shapes of the tensors with at least `n` entries reachable from `vars(opt)` (three levels of
    lists, tuples, sets and dicts), parameters excluded: a full copy kept between steps defeats ZeRO-1."""
    skip = {id(p) for p in params}
    found = []

    def visit(x, depth):
        if isinstance(x, torch.Tensor):
            if id(x) not in skip and x.numel() >= n:
                found.append(tuple(x.shape))
        elif depth < 3 and isinstance(x, (list, tuple, set)):
            for y in x:
                visit(y, depth + 1)
        elif depth < 3 and isinstance(x, dict):
            for y in x.values():
                visit(y, depth + 1)
    visit(vars(opt), 0)
    return found


def check_zero_bytes_and_comm(rank, world_size, opt_cls, dims, seed, batches, hp, expected):
    """Rank function: the parameters match (as `check_zero_equivalence`), the optimizer keeps no
    tensor of the model's size, `state_bytes()` is two fp32 moment shards of ceil(P/N) entries (up
    to 16 bytes of step counter tolerated), and every step issues exactly one reduce-scatter and one
    all-gather, each of the padded flat fp32 vector. Returns the state bytes counted."""
    reported, comm, params, opt = _zero_rank(opt_cls, rank, world_size, dims, seed, batches, hp, expected)
    n = sum(p.numel() for p in params)
    shard = -(-n // world_size)
    expect_equal(model_sized_tensors(opt, params, n), [], "tensors of the whole model's size kept by the optimizer",
                 hint="Between steps keep only the two moment shards (flat buffers are local variables of step()).")
    held = 2 * 4 * shard if 2 * 4 * shard <= int(reported) <= 2 * 4 * shard + 16 else int(reported)
    expect_equal(held, 2 * 4 * shard, f"state_bytes(): two fp32 moments of ceil(P/N) = {shard} entries "
                 "(a step counter of up to 16 bytes is not counted against you)",
                 hint="exp_avg and exp_avg_sq must cover only your shard, not all P parameters; measure numel() * element_size().")
    for k, c in enumerate(comm):
        rs = sum(c.calls[op] for op in _RS)
        ag = sum(c.calls[op] for op in _AG)
        others = {op: k2 for op, k2 in c.calls.items() if op not in _RS + _AG}
        expect_equal((rs, ag, others), (1, 1, {}), f"step {k + 1}: (reduce-scatters, all-gathers, other collectives)",
                     hint="One reduce_scatter_tensor of the flat gradient and one all_gather_into_tensor of the shards per step.")
        rs_b = sum(c.bytes[op] for op in _RS)
        ag_b = sum(c.bytes[op] for op in _AG)
        expect_equal((rs_b, ag_b), (4 * shard * world_size,) * 2,
                     f"step {k + 1}: bytes of (reduce-scatter input, all-gather output)",
                     hint="Both act on the whole zero-padded flat fp32 buffer of N * ceil(P/N) entries.")
    return held


# ---------------------------------------------------------------- FSDP


def _fsdp_rank(fsdp_cls, rank, world_size, dims, seed, batches, hp, measure_between=False):
    """Wrap `mlp(dims, seed)` in `fsdp_cls`, train it with torch AdamW on the shard, and return what
    the test saw: losses, counters, param_bytes() and shard.grad bytes per step, the gathered flat
    parameters, and (with `measure_between`) the live tensor bytes between steps beyond those right
    after construction."""
    import solutions_lib.dist.fsdp
    forbidden = fsdp_forbidden()
    expect_own(fsdp_cls, "FSDP by hand", *forbidden[:2], solutions_lib.dist.fsdp.FlatShardFSDP)
    model = mlp(dims, seed=seed)
    originals = list(model.named_parameters())
    n = sum(p.numel() for _, p in originals)
    size = -(-n // world_size)
    losses, comm, held, grads, between = [], [], [], [], []
    with no_delegation("FSDP by hand", *forbidden):
        fsdp = fsdp_cls(model)
        opt = torch.optim.AdamW([fsdp.shard], foreach=False, **hp)
        base = live_tensor_bytes() if measure_between else 0   # measured by the test: live storages of this rank
        for step in batches:
            x, y = step[rank]
            with CommCounter() as c:
                loss = F.mse_loss(fsdp(x), y)
                loss.backward()
                fsdp.finish_backward()
            opt.step()
            grads.append(fsdp.shard.grad.numel() * fsdp.shard.grad.element_size())
            opt.zero_grad()
            losses.append(loss.detach())
            comm.append(c)
            held.append(fsdp.param_bytes())
            if measure_between:
                del loss                             # the test's last reference to this step's graph
                between.append(live_tensor_bytes() - base)
    full = torch.empty(size * world_size)
    dist.all_gather_into_tensor(full, fsdp.shard.detach())
    return dict(losses=losses, comm=comm, held=held, grads=grads, full=full, n=n, size=size,
                originals=originals, fsdp=fsdp, model=model, between=between)


def check_fsdp_equivalence(rank, world_size, fsdp_cls, dims, seed, batches, hp, expected):
    """Rank function: every loss and the gathered parameters after training are bitwise those of
    `expected = reference_adamw_training(...)`, the padding stays zero, and each step all-gathers
    and reduce-scatters the padded flat fp32 vector (bytes counted)."""
    r = _fsdp_rank(fsdp_cls, rank, world_size, dims, seed, batches, hp)
    for k, (got, want) in enumerate(zip(r["losses"], expected["losses"])):
        expect_true(torch.equal(got, want[rank]), f"step {k + 1}: loss {got.item():.9g} is not bitwise "
                    f"the reference {want[rank].item():.9g} (one process, same micro-batch, same parameters)")
    diff = (r["full"][:r["n"]] - expected["flat"]).abs().max().item()
    expect_true(torch.equal(r["full"][:r["n"]], expected["flat"]),
                f"the gathered parameters after {len(batches)} steps differ from the reference by up to {diff:.3g}. "
                "Check: shards in named_parameters() order, gradient SUM then / world size, shard.grad set before opt.step().")
    expect_true(torch.equal(r["full"][r["n"]:], torch.zeros(len(r["full"]) - r["n"])), "the padding entries must stay zero")
    for k, c in enumerate(r["comm"]):
        ag_b = sum(c.bytes[op] for op in _AG)
        rs_b = sum(c.bytes[op] for op in _RS)
        expect_equal((ag_b, rs_b), (4 * r["size"] * world_size,) * 2,
                     f"step {k + 1}: bytes of (all-gather output, reduce-scatter input)",
                     hint="Both are the zero-padded flat fp32 vector of N * ceil(P/N) entries.")
    return True


def _storage(t):
    return 0 if t is None else t.untyped_storage().nbytes()


def check_fsdp_memory(rank, world_size, fsdp_cls, dims, seed, batches, hp):
    """Rank function: between steps `param_bytes()` and `shard.grad` are one fp32 shard, the live
    tensor bytes grew by at most AdamW's two moment shards (measured from the storages), the shard
    is the only trainable parameter left, and no original parameter (object or name) holds storage.
    Returns the last `param_bytes()`."""
    r = _fsdp_rank(fsdp_cls, rank, world_size, dims, seed, batches, hp, measure_between=True)
    shard_bytes = 4 * r["size"]
    expect_equal(r["held"], [shard_bytes] * len(batches),
                 f"param_bytes() between steps (P = {r['n']}, ceil(P/N) = {r['size']} fp32 entries)",
                 hint="Between steps only the shard may hold parameter storage; measure it from the tensors.")
    expect_equal(r["grads"], [shard_bytes] * len(batches), f"bytes of shard.grad (1/N of the gradient)")
    expect_between(r["between"], None, 2 * shard_bytes + shard_bytes // 2 + 128, "tensor bytes allocated on this rank between steps "
                   "beyond what it held right after construction (measured from the live storages: AdamW's two "
                   "moment shards may grow, nothing of the model's size)", unit="bytes",
                   hint="After finish_backward no gathered copy of the parameters may stay allocated, under any name.")
    trainable = sum(p.numel() for p in r["fsdp"].parameters() if p.requires_grad)
    expect_equal(trainable, r["size"], f"trainable parameter entries left in the wrapped model",
                 hint="Keep the shard as the only nn.Parameter; delete the module's own parameters.")
    for name, p in r["originals"]:
        expect_equal(_storage(p), 0, f"storage bytes still held by the original parameter {name}",
                     hint="Free it: p.data = torch.empty(0).")
        mod_name, _, attr = name.rpartition(".")
        mod = r["model"].get_submodule(mod_name) if mod_name else r["model"]
        expect_equal(_storage(getattr(mod, attr, None)), 0,
                     f"storage bytes behind {name} after the backward",
                     hint="After the reduce-scatter point every parameter name at torch.empty(0).")
    return r["held"][-1]
