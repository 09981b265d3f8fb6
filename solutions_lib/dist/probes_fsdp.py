"""The harness of 11 exercises 3's graded cells: a sharded optimizer (ZeRO-1/2 around any torch
optimizer) and per-layer FSDP with mixed precision, trained on gloo ranks and measured there.

Each `check_*` function takes the student's class and the case (world size, sizes, seed, steps)
from the test cell, trains it on `world` ranks with `launch_graded` and compares what the ranks
measured with one process computed here with plain torch (the oracle). The measurements are the
test's own, never the student's bookkeeping: the collectives issued (`CommCounter`, by kind and
bytes), the live tensor storages of the rank (`probes_sharding.live_tensor_bytes`), what autograd
saves during a forward (`saved_tensors_hooks`), the wrapped optimizer's state tensors, and what
`full_state_dict()` gathers.

Every rank runs the student's class inside `no_delegation(...)` against torch's
`ZeroRedundancyOptimizer` / FSDP and the course's own `solutions_lib.dist.zero` / `.fsdp`
(`expect_own` first), so an answer that delegates fails its cell with a DelegationError.

Part A (`MyShardedOptimizer`): `check_sharded_step`, `check_sharded_state`,
`check_sharded_resume`, `check_sharded_stage2`. Part B and C (`MyFSDP`): `check_fsdp_training`,
`check_fsdp_memory`, `check_fsdp_mixed_precision`.

The cells run in the student's kernel (the ranks are forked from it, so the student's class is
passed to them as an argument). No expected value is stored here: each comes from the oracle or
from the case's sizes.
"""
from __future__ import annotations

import copy
import importlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard   # imported once here, not in every rank
from torch.distributed.optim import ZeroRedundancyOptimizer

from ..grading import expect_between, expect_close, expect_equal, expect_own, no_delegation
from .counting import CommCounter
from .gpt import Block
from .graded import launch_graded
from .probes_sharding import collective_bytes, live_tensor_bytes
from .zero import mlp, regression_micro_batches

__all__ = ["OPTIMIZERS", "SGD_HP", "two_groups", "state_bytes", "sharded_oracle", "shard_sizes", "check_sharded_step",
           "check_sharded_state", "check_sharded_resume", "check_sharded_stage2", "block_stack", "block_batches",
           "fsdp_oracle", "saved_bytes", "check_fsdp_training", "check_fsdp_memory", "check_fsdp_mixed_precision"]

#: name -> (class, kwargs) of the optimizers the sharded optimizer wraps in the tests; foreach=False:
#: the same kernels in the ranks and the oracle.
OPTIMIZERS = {
    "AdamW": (torch.optim.AdamW, dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, foreach=False)),
    "SGD-momentum": (torch.optim.SGD, dict(lr=5e-2, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=False)),
    "Adagrad": (torch.optim.Adagrad, dict(lr=5e-2, weight_decay=0.01, foreach=False)),
    "RMSprop": (torch.optim.RMSprop, dict(lr=1e-2, momentum=0.5, weight_decay=0.01, foreach=False)),
}

#: the SGD that steps the FSDP masters (and the oracle's fp32 model)
SGD_HP = dict(lr=0.05, momentum=0.9)


# ---------------------------------------------------------------------------------------------
# Part A: the sharded optimizer
# ---------------------------------------------------------------------------------------------

def two_groups(model: nn.Module, lr: float) -> list[dict]:
    """Two param groups: matrices with the optimizer's weight decay, vectors at lr / 2 without it."""
    mats = [p for p in model.parameters() if p.dim() == 2]
    vecs = [p for p in model.parameters() if p.dim() == 1]
    return [{"params": mats}, {"params": vecs, "lr": lr / 2, "weight_decay": 0.0}]


def state_bytes(state) -> int:
    """Bytes of the tensors (not scalars such as a step count) in an optimizer's `state`."""
    return sum(t.numel() * t.element_size() for s in state.values() for t in s.values()
               if torch.is_tensor(t) and t.dim() > 0)


def sharded_oracle(name: str, dims, seed: int, batches):
    """One process: the wrapped optimizer itself on the whole model, loss / N accumulated per step.
    Returns (flat parameters, state bytes, number of parameter entries)."""
    cls, kw = OPTIMIZERS[name]
    model = mlp(dims, seed=seed)
    opt = cls(two_groups(model, kw["lr"]), **kw)
    for step in batches:
        opt.zero_grad()
        for x, y in step:
            (F.mse_loss(model(x), y) / len(step)).backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return flat, state_bytes(opt.state), flat.numel()


def shard_sizes(dims, world: int) -> list[int]:
    """ceil(n_t / N) for every parameter tensor of mlp(dims)."""
    return [-(-p.numel() // world) for p in mlp(dims).parameters()]


def _zero_forbidden(opt_cls):
    import solutions_lib.dist.fsdp
    import solutions_lib.dist.zero
    expect_own(opt_cls, "sharded optimizer", ZeroRedundancyOptimizer,
               solutions_lib.dist.zero.ShardedOptimizer, solutions_lib.dist.zero.ZeroOneAdamW)
    return (ZeroRedundancyOptimizer, importlib.import_module("torch.distributed.optim.zero_redundancy_optimizer"),
            solutions_lib.dist.zero, solutions_lib.dist.fsdp)


def _train(rank, world_size, opt_cls, name, dims, seed, batches, stage=1):
    """Train with the student's sharded optimizer. Measured here per step: the tensor bytes that
    loss.backward() left allocated on the rank (live storages after it minus before the forward,
    whatever holds them), and the bytes of each kind of collective issued inside loss.backward()
    and step()."""
    cls, kw = OPTIMIZERS[name]
    forbidden = _zero_forbidden(opt_cls)
    model = mlp(dims, seed=seed)
    extra, bw, st = [], [], []
    with no_delegation("sharded optimizer", *forbidden):
        opt = opt_cls(two_groups(model, kw["lr"]), cls, stage=stage, **kw)
        for step in batches:
            opt.zero_grad()
            x, y = step[rank]
            before = live_tensor_bytes()
            with CommCounter() as c:
                F.mse_loss(model(x), y).backward()
            extra.append(live_tensor_bytes() - before)
            bw.append(collective_bytes(c))
            with CommCounter() as c:
                opt.step()
            st.append(collective_bytes(c))
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return dict(flat=flat, state=state_bytes(opt.optimizer.state), extra=extra, bw=bw, st=st)


def _resume(rank, world_size, opt_cls, name, dims, seed, batches, cut):
    """Train `cut` steps, save; a fresh model + optimizer loads the state and trains the rest."""
    cls, kw = OPTIMIZERS[name]
    forbidden = _zero_forbidden(opt_cls)
    model = mlp(dims, seed=seed)
    model2 = mlp(dims, seed=seed + 1000)              # other weights, overwritten with the saved ones
    with no_delegation("sharded optimizer", *forbidden):
        opt = opt_cls(two_groups(model, kw["lr"]), cls, **kw)
        for step in batches[:cut]:
            opt.zero_grad()
            F.mse_loss(model(step[rank][0]), step[rank][1]).backward()
            opt.step()
        saved = copy.deepcopy(opt.state_dict())
        values = [p.detach().clone() for p in model.parameters()]
        with torch.no_grad():
            for p, v in zip(model2.parameters(), values):
                p.copy_(v)
        opt2 = opt_cls(two_groups(model2, kw["lr"]), cls, **kw)
        opt2.load_state_dict(saved)
        for step in batches[cut:]:
            opt2.zero_grad()
            F.mse_loss(model2(step[rank][0]), step[rank][1]).backward()
            opt2.step()
    return torch.cat([p.detach().reshape(-1) for p in model2.parameters()])


def check_sharded_step(opt_cls, name: str, world: int, dims, seed: int, steps: int) -> None:
    """Stage 1 of `opt_cls` wrapping OPTIMIZERS[name], two param groups, `steps` steps of mlp(dims)
    on `world` ranks: every rank's parameters equal the wrapped optimizer on one process, and each
    step() issues reduce-scatters and all-gathers of the padded gradients (sum_t N s_t fp32
    entries each, up to padding) and nothing else."""
    torch.set_num_threads(1)
    batches = regression_micro_batches(steps, world, dims[0], dims[-1], seed=seed + 1)
    want, _, _ = sharded_oracle(name, dims, seed, batches)
    out = launch_graded(_train, world, args=(opt_cls, name, dims, seed, batches), threads_per_rank=1, timeout=300)
    for rank, r in enumerate(out):
        expect_close(r["flat"].numpy(), want.numpy(), f"{name} on {world} ranks: parameters of rank {rank} after {steps} steps",
                     rtol=1e-5, atol=1e-6, hint="Compare with the wrapped optimizer on one process. Check: SUM then / N; "
                     "each piece keeps its group's lr and weight decay; all_gather writes every parameter back.")
        S = shard_sizes(dims, world)
        padded, slack = 4 * world * sum(S), 4 * world * len(S)     # bytes of the padded gradients; padding slack
        expect_close([b["reduce_scatter"] for b in r["st"]], [padded] * steps, f"{name} on {world} ranks: reduce-scatter "
                     f"bytes per step() on rank {rank}", rtol=0, atol=slack, unit="bytes", hint="Step 1: one "
                     "reduce-scatter (SUM) of every parameter's zero-padded gradient, N s_t entries, not an all-reduce.")
        expect_close([b["all_gather"] for b in r["st"]], [padded] * steps, f"{name} on {world} ranks: all-gather "
                     f"bytes per step() on rank {rank}", rtol=0, atol=slack, unit="bytes", hint="Step 3: one all-gather "
                     "of every parameter's updated piece (s_t entries per rank, N s_t gathered).")
        expect_equal([b["all_reduce"] + b["other"] for b in r["st"]], [0] * steps, f"{name} on {world} ranks: bytes of "
                     f"all-reduces and other collectives per step() on rank {rank}", hint="A reduce-scatter plus an "
                     "all-gather are the whole traffic of a sharded step; an all-reduce moves the full gradient to every rank.")


def check_sharded_state(opt_cls, name: str, world: int, dims, seed: int) -> None:
    """After 2 stage-1 steps on `world` ranks, each rank's wrapped optimizer (`opt.optimizer.state`)
    holds 1/N of the state bytes of the unsharded optimizer (up to the rounding of ceil(n_t / N))."""
    torch.set_num_threads(1)
    batches = regression_micro_batches(2, world, dims[0], dims[-1], seed=seed + 1)
    _, full_state, n = sharded_oracle(name, dims, seed, batches)
    out = launch_graded(_train, world, args=(opt_cls, name, dims, seed, batches), threads_per_rank=1, timeout=300)
    per_entry = full_state / n                     # state bytes per parameter entry of this optimizer
    slack = per_entry * 2 * (len(dims) - 1) * world  # rounding of ceil(n_t / N) per tensor
    for rank, r in enumerate(out):
        expect_close(r["state"], full_state / world, f"{name} on {world} ranks: optimizer-state bytes of rank {rank}",
                     rtol=0, atol=slack, unit="bytes", hint="Measured from self.optimizer.state: the wrapped "
                     "optimizer must be built on this rank's pieces only (1/N of every parameter), not on the parameters.")


def check_sharded_resume(opt_cls, name: str, world: int, dims, seed: int, steps: int, cut: int) -> None:
    """Save `state_dict()` after `cut` of `steps` steps, load it into a fresh optimizer on a model
    holding the saved parameters, train the rest: equal to `steps` uninterrupted one-process steps."""
    torch.set_num_threads(1)
    batches = regression_micro_batches(steps, world, dims[0], dims[-1], seed=seed + 1)
    want, _, _ = sharded_oracle(name, dims, seed, batches)
    out = launch_graded(_resume, world, args=(opt_cls, name, dims, seed, batches, cut), threads_per_rank=1)
    for rank, got in enumerate(out):
        expect_close(got.numpy(), want.numpy(), f"{name} on {world} ranks: rank {rank}, saved after step {cut}, "
                     f"reloaded, {steps} steps in all", rtol=1e-5, atol=1e-6,
                     hint="The resumed run must equal an uninterrupted one: save the wrapped optimizer's state "
                     "(moments, step counts) and the group hyperparameters, and load them into the new pieces.")


def check_sharded_stage2(opt_cls, name: str, world: int, dims, seed: int, steps: int) -> None:
    """Stage 2: the same parameters as one process; each loss.backward() leaves at most the rank's
    gradient shards allocated (4 sum_t s_t bytes, measured from the live storages) and issues the
    reduce-scatters itself; step() issues no reduction."""
    torch.set_num_threads(1)
    batches = regression_micro_batches(steps, world, dims[0], dims[-1], seed=seed + 1)
    want, full_state, n = sharded_oracle(name, dims, seed, batches)
    out = launch_graded(_train, world, args=(opt_cls, name, dims, seed, batches, 2), threads_per_rank=1, timeout=300)
    S = shard_sizes(dims, world)
    padded, slack = 4 * world * sum(S), 4 * world * len(S)
    bound = 4 * sum(S) + 64            # the backward may leave this rank's gradient shards: 4 sum s_t bytes
    for rank, r in enumerate(out):
        expect_close(r["flat"].numpy(), want.numpy(), f"stage 2, {name} on {world} ranks: parameters of rank {rank}",
                     rtol=1e-5, atol=1e-6, hint="Stage 2 must train exactly like stage 1: the hooks reduce-scatter "
                     "the same average gradient, only earlier.")
        expect_between(r["extra"], None, bound, f"stage 2, {name} on {world} ranks: tensor bytes that each "
                       f"loss.backward() left allocated on rank {rank} (at most its gradient shards, 4 sum s_t)",
                       unit="bytes", hint="Measured from the live tensor storages, not from p.grad: keep only this "
                       "rank's s_t reduced entries per parameter, never a full (P-entry) gradient, averaged or not.")
        expect_close([b["reduce_scatter"] for b in r["bw"]], [padded] * steps, f"stage 2, {name} on {world} ranks: "
                     f"reduce-scatter bytes issued inside loss.backward() on rank {rank}, per step", rtol=0, atol=slack,
                     unit="bytes", hint="The hooks must reduce-scatter each zero-padded gradient (N s_t entries) during "
                     "the backward, not in step().")
        expect_equal([b["all_reduce"] + b["all_gather"] + b["other"] for b in r["bw"]], [0] * steps,
                     f"stage 2, {name} on {world} ranks: bytes of other collectives inside loss.backward() on rank {rank}",
                     hint="Stage 2 reduces with a reduce-scatter only: an all-reduce gives every rank the whole gradient.")
        expect_equal([b["reduce_scatter"] + b["all_reduce"] + b["other"] for b in r["st"]], [0] * steps,
                     f"stage 2, {name} on {world} ranks: reduction bytes in step() on rank {rank}",
                     hint="With stage 2 the gradient is already reduced by the hooks; step() only all-gathers the pieces.")


# ---------------------------------------------------------------------------------------------
# Parts B and C: per-layer FSDP, in fp32 and with a bf16 compute dtype
# ---------------------------------------------------------------------------------------------

def block_stack(depth: int, d: int, heads: int, seed: int) -> nn.Sequential:
    """`depth` pre-LayerNorm transformer blocks (the course GPT's `Block`) in an nn.Sequential."""
    torch.manual_seed(seed)
    return nn.Sequential(*[Block(d, heads) for _ in range(depth)])


def block_batches(steps: int, world: int, d: int, seed: int, batch: int = 2, seq: int = 5):
    """batches[step][rank] = (x, y), both (batch, seq, d): a regression target per token."""
    g = torch.Generator().manual_seed(seed)
    return [[(torch.randn(batch, seq, d, generator=g), torch.randn(batch, seq, d, generator=g))
             for _ in range(world)] for _ in range(steps)]


def saved_bytes(fn, skip=()):
    """Run fn(); bytes of the distinct storages autograd saved for backward (still allocated after fn).
    Returns (fn's result, bytes); storages whose data pointer is in `skip` are not counted."""
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (saved.append(t), t)[1], lambda t: t):
        out = fn()
    seen, total = set(skip), 0
    for t in saved:
        st = t.untyped_storage()
        if st.nbytes() and st.data_ptr() not in seen:
            seen.add(st.data_ptr())
            total += st.nbytes()
    return out, total


def fsdp_oracle(depth: int, d: int, heads: int, seed: int, batches, dtype) -> dict:
    """One process: per step a `dtype` copy of the fp32 model runs every rank's micro-batch
    (loss / N accumulated), its gradients become the fp32 model's, SGD steps in fp32. In fp32 this
    is plain gradient accumulation. Also: the bytes of activations autograd saves in one forward,
    the parameter names and the entries of each block (unit)."""
    model = block_stack(depth, d, heads, seed)
    opt = torch.optim.SGD(model.parameters(), foreach=False, **SGD_HP)
    losses = []
    for step in batches:
        opt.zero_grad()
        work = copy.deepcopy(model).to(dtype)
        row = []
        for x, y in step:
            loss = F.mse_loss(work(x.to(dtype)).float(), y)
            (loss / len(step)).backward()
            row.append(loss.item())
        for p, q in zip(model.parameters(), work.parameters()):
            p.grad = q.grad.float()
        opt.step()
        losses.append(row)
    names = [n for n, _ in model.named_parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    work = block_stack(depth, d, heads, seed).to(dtype)
    params = {p.untyped_storage().data_ptr() for p in work.parameters()}
    _, act = saved_bytes(lambda: work(batches[0][0][0].to(dtype)), skip=params)
    units = [sum(p.numel() for p in b.parameters()) for b in model]
    return dict(losses=losses, names=names, flat=flat, act=act, units=units)


def _fsdp_forbidden(fsdp_cls):
    import solutions_lib.dist.fsdp
    import solutions_lib.dist.zero
    expect_own(fsdp_cls, "per-layer FSDP", FullyShardedDataParallel, fully_shard,
               solutions_lib.dist.fsdp.FSDP, solutions_lib.dist.fsdp.FlatShardFSDP)
    return (FullyShardedDataParallel, fully_shard,
            importlib.import_module("torch.distributed.fsdp._fully_shard._fully_shard"),
            importlib.import_module("torch.distributed.fsdp.fully_sharded_data_parallel"),
            solutions_lib.dist.fsdp, solutions_lib.dist.zero)


def _no_measurement():
    return 0


def _run(rank, world_size, fsdp_cls, depth, d, heads, seed, batches, dtype, measure_memory):
    """Train the blocks wrapped in the student's FSDP (one unit per block) with SGD. Measured here:
    losses, the bytes autograd saves in step 0's forward (the only step inside the test's
    saved_tensors_hooks; later steps run as plain training), all-gather / reduce-scatter bytes and
    calls per step and, with `measure_memory`, the live tensor bytes after each backward and
    between steps relative to right after construction."""
    measure = live_tensor_bytes if measure_memory else _no_measurement
    forbidden = _fsdp_forbidden(fsdp_cls)
    model = block_stack(depth, d, heads, seed)
    r = dict(losses=[], saved=[], ag_bytes=[], ag_calls=[], rs_bytes=[], after_backward=[], between=[])
    with no_delegation("per-layer FSDP", *forbidden):
        fsdp = fsdp_cls(model, list(model), compute_dtype=dtype)
        opt = torch.optim.SGD(fsdp.parameters(), foreach=False, **SGD_HP)
        base = measure()                           # measured by the test: live tensor storages of this rank
        for i, step in enumerate(batches):
            x, y = step[rank]
            with CommCounter() as c:
                if i == 0:   # step 0: count the bytes autograd saves (inside the test's saved_tensors_hooks)
                    out, saved = saved_bytes(lambda: fsdp(x))
                    r["saved"].append(saved)
                else:        # every later step: plain training, no hook of the test's around it
                    out = fsdp(x)
                r["out_dtype"] = str(out.dtype)
                loss = F.mse_loss(out.float(), y)
                del out
                loss.backward()
            r["after_backward"].append(measure() - base)
            opt.step()
            opt.zero_grad()
            r["losses"].append(loss.item())
            del loss
            r["between"].append(measure() - base)
            r["ag_bytes"].append(sum(b for op, b in c.bytes.items() if "all_gather" in op))
            r["ag_calls"].append(sum(k for op, k in c.calls.items() if "all_gather" in op))
            r["rs_bytes"].append(sum(b for op, b in c.bytes.items() if "reduce_scatter" in op))
        r["held"] = fsdp.param_bytes()
        r["peak"] = fsdp.peak_param_bytes
        sd = fsdp.full_state_dict()
    r["master_dtypes"] = sorted({str(p.dtype) for p in fsdp.parameters()})
    r["state_dtypes"] = sorted({str(t.dtype) for s in opt.state.values() for t in s.values() if torch.is_tensor(t)})
    r["entries"] = sum(p.numel() for p in fsdp.parameters())
    r["keys"] = sorted(sd)
    r["sd"] = {k: v.detach().float() for k, v in sd.items()}
    return r


def _fsdp_case(fsdp_cls, world, depth, d, heads, seed, steps, dtype, measure_memory=False):
    torch.set_num_threads(1)
    batches = block_batches(steps, world, d, seed + 1)
    want = fsdp_oracle(depth, d, heads, seed, batches, dtype)
    out = launch_graded(_run, world, args=(fsdp_cls, depth, d, heads, seed, batches, dtype, measure_memory),
                        threads_per_rank=1, timeout=300)
    return want, out


def _flat(r, want):
    expect_equal(r["keys"], sorted(want["names"]), "names in full_state_dict()",
                 hint="Use the module's original parameter names, e.g. '0.attn.qkv.weight'.")
    return torch.cat([r["sd"][n].reshape(-1) for n in want["names"]])


def check_fsdp_training(fsdp_cls, world: int, depth: int, d: int, heads: int, seed: int, steps: int) -> None:
    """fp32, one unit per block: every rank's losses, step by step, and its `full_state_dict()`
    after `steps` SGD steps equal one process (1e-6)."""
    want, out = _fsdp_case(fsdp_cls, world, depth, d, heads, seed, steps, torch.float32)
    tag = f"{world} ranks, {depth} blocks of d={d}"
    for rank, r in enumerate(out):
        expect_close(r["losses"], [row[rank] for row in want["losses"]], f"{tag}: losses of rank {rank}, step by step",
                     rtol=1e-6, hint="The forward must see the full parameters of each block: gather before it runs.")
        expect_close(_flat(r, want).numpy(), want["flat"].numpy(), f"{tag}: full_state_dict() of rank {rank} after {steps} "
                     "SGD steps", rtol=1e-6, atol=1e-6, hint="Check: the reduce-scatter SUM then / N; the gradient goes to "
                     "master.grad (added, not overwritten); every unit's gradient arrives during loss.backward().")


def check_fsdp_memory(fsdp_cls, world: int, depth: int, d: int, heads: int, seed: int, steps: int) -> None:
    """fp32: the masters hold sum_u ceil(P_u / N) entries; the live storages after each backward and
    between steps hold nothing beyond the master gradients and SGD's momentum (a gathered unit left
    allocated is caught); autograd keeps no gathered parameters after the forward; the peak is the
    masters plus one unit; each unit is all-gathered twice and reduce-scattered once per step."""
    want, out = _fsdp_case(fsdp_cls, world, depth, d, heads, seed, steps, torch.float32, measure_memory=True)
    tag = f"{world} ranks, {depth} blocks of d={d}"
    S = [-(-p // world) for p in want["units"]]
    slack = 4 * world * depth                                    # padding, counted or not
    for rank, r in enumerate(out):
        expect_equal(r["entries"], sum(S), f"{tag}: entries in fsdp.parameters() on rank {rank} (sum of ceil(P_u/N))",
                     hint="parameters() must yield only the fp32 master shards, one per unit.")
        expect_close(r["held"], 4 * sum(S), f"{tag}: param_bytes() of rank {rank} between steps", rtol=0, atol=slack,
                     unit="bytes", hint="Between steps only the master shards hold parameter storage.")
        # measured by the test from the live tensor storages (relative to right after construction):
        # after a backward the masters' fp32 gradients (4 sum S_u) and, from step 2 on, SGD's momentum
        # (4 sum S_u); between steps the momentum only. A gathered unit left allocated adds 4 N S_u.
        unit_left = 2 * world * min(S)                          # half the smallest gathered unit, in bytes
        expect_between([a - 4 * sum(S) * (1 + (i > 0)) for i, a in enumerate(r["after_backward"])], None, unit_left,
                       f"{tag}: bytes still allocated on rank {rank} after each backward beyond the master "
                       "gradients and the optimizer state (measured from the live tensor storages)", unit="bytes",
                       hint="After its backward a unit's gathered buffer (and its .grad) must be freed: "
                       "flat.untyped_storage().resize_(0) in the post-backward hook. param_bytes() is not used here.")
        expect_between([b - 4 * sum(S) for b in r["between"]], None, unit_left, f"{tag}: bytes still allocated on rank "
                       f"{rank} between steps beyond the master shards and the optimizer state (measured)", unit="bytes",
                       hint="Between steps only the master shards (and the optimizer's state) may hold parameter memory.")
        expect_close(max(0, max(r["saved"]) - want["act"]), 0, f"{tag}: bytes autograd holds after the forward beyond "
                     f"the activations, rank {rank}", rtol=0, atol=0.02 * want["act"], unit="bytes",
                     hint="The graph keeps views of each gathered flat buffer: free the storage after the unit's "
                     "forward (flat.untyped_storage().resize_(0)) and re-gather it before the unit's backward.")
        expect_close(r["peak"], 4 * sum(S) + 4 * world * max(S), f"{tag}: peak_param_bytes of rank {rank} "
                     "(master shards + the largest gathered unit)", rtol=0, atol=slack, unit="bytes",
                     hint="Update the peak whenever you allocate a gathered buffer, and free each unit right after use.")
        expect_equal(r["ag_bytes"], [2 * 4 * world * sum(S)] * steps, f"{tag}: all-gather bytes per step on rank {rank} "
                     "(forward and backward)", hint="Each unit is gathered twice per step: before its forward and again before its backward.")
        expect_equal(r["rs_bytes"], [4 * world * sum(S)] * steps, f"{tag}: reduce-scatter bytes per step on rank {rank}",
                     hint="One reduce-scatter of each unit's padded flat gradient per step.")


def check_fsdp_mixed_precision(fsdp_cls, world: int, depth: int, d: int, heads: int, seed: int, steps: int) -> None:
    """compute_dtype=torch.bfloat16: a bf16 output, fp32 masters and SGD state, 2 bytes per gathered
    entry, and losses and final parameters within bf16 rounding of the bf16-compute oracle."""
    want, out = _fsdp_case(fsdp_cls, world, depth, d, heads, seed, steps, torch.bfloat16)
    tag = f"bf16 on {world} ranks, {depth} blocks of d={d}"
    S = [-(-p // world) for p in want["units"]]
    for rank, r in enumerate(out):
        expect_equal(r["out_dtype"], "torch.bfloat16", f"{tag}: dtype of the model output on rank {rank}",
                     hint="Cast floating inputs to compute_dtype in forward and gather the parameters in compute_dtype.")
        expect_equal(r["master_dtypes"], ["torch.float32"], f"{tag}: dtypes of the master shards (fsdp.parameters())",
                     hint="Masters stay fp32; only the gathered copy is bf16.")
        expect_equal(r["state_dtypes"], ["torch.float32"], f"{tag}: dtypes of the SGD momentum buffers",
                     hint="master.grad must be fp32 (cast the reduced gradient), so the optimizer state is fp32.")
        expect_equal(r["ag_bytes"][-1] // max(1, r["ag_calls"][-1]), 2 * world * max(S), f"{tag}: bytes per "
                     f"all-gather (one unit) on rank {rank}", hint="Cast the master shard to bf16 before the all-gather: "
                     "2 bytes per entry of the unit's padded flat vector.")
        expect_close(r["losses"], [row[rank] for row in want["losses"]], f"{tag}: losses of rank {rank}", rtol=1e-2)
        expect_close(_flat(r, want).numpy(), want["flat"].numpy(), f"{tag}: full_state_dict() of rank {rank} "
                     f"after {steps} SGD steps", rtol=0, atol=2e-3, hint="Reduce-scatter SUM, cast to fp32, / N.")
