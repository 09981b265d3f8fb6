"""ZeRO-1/2 around any torch optimizer (solutions_lib.dist.zero.ShardedOptimizer).

Oracle: one process (1 thread, like each rank) that accumulates loss / N over the N
micro-batches of a step and steps the wrapped optimizer itself on the full parameters, with
the same param groups. State bytes are measured from the wrapped optimizers' tensors,
communication with CommCounter.
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist.zero import ShardedOptimizer, _tensor_state_bytes, zero1_comm_bytes_per_step
from solutions_lib.optim import Lamb

pytestmark = pytest.mark.xdist_group("dist_sharded_optimizer")

STEPS = 4
DIMS = [6, 16, 16, 16, 2]      # 8 tensors, P = 690


def make_model(seed=0):
    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(DIMS, DIMS[1:])):
        layers += [nn.Linear(a, b)] + ([nn.Tanh()] if i < len(DIMS) - 2 else [])
    return nn.Sequential(*layers)


P = sum(p.numel() for p in make_model().parameters())


def groups(model, base_lr):
    """Two param groups: matrices with decay, biases without and at half the lr."""
    mats = [p for p in model.parameters() if p.dim() == 2]
    vecs = [p for p in model.parameters() if p.dim() == 1]
    return [{"params": mats}, {"params": vecs, "weight_decay": 0.0, "lr": base_lr / 2}]


OPTS = {
    "adamw": (torch.optim.AdamW, dict(lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1, foreach=False)),
    "adam": (torch.optim.Adam, dict(lr=1e-2, foreach=False)),
    "sgd": (torch.optim.SGD, dict(lr=5e-2, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=False)),
    "lamb": (Lamb, dict(lr=1e-2, weight_decay=0.01)),
}


def batches(world_size):
    g = torch.Generator().manual_seed(1)
    return [[(torch.randn(5, DIMS[0], generator=g), torch.randn(5, DIMS[-1], generator=g))
             for _ in range(world_size)] for _ in range(STEPS)]


def loss_fn(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def reference(world_size, name):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cls, kw = OPTS[name]
        model = make_model()
        opt = cls(groups(model, kw["lr"]), **kw)
        for step in batches(world_size):
            opt.zero_grad()
            for b in step:
                (loss_fn(model, b) / world_size).backward()
            opt.step()
        return [p.detach().clone() for p in model.parameters()], _tensor_state_bytes(opt.state)
    finally:
        torch.set_num_threads(threads)


def _rank(rank, world_size, runs):
    out = {}
    for name, stage, partition in runs:
        cls, kw = OPTS[name]
        model = make_model()
        opt = ShardedOptimizer(groups(model, kw["lr"]), cls, stage, partition=partition, **kw)
        comm_bw, comm_step, grad_bytes, saved = [], [], [], None
        for i, step in enumerate(batches(world_size)):
            opt.zero_grad()
            with CommCounter() as c:
                loss_fn(model, step[rank]).backward()
            comm_bw.append(c.summary())
            grad_bytes.append(opt.grad_bytes())
            with CommCounter() as c:
                opt.step()
            comm_step.append(c.summary())
            if i == 1:
                # deepcopy: like torch, state_dict() hands out the live state tensors
                saved = (copy.deepcopy(opt.state_dict()), [p.detach().clone() for p in model.parameters()])
        res = {"params": [p.detach().clone() for p in model.parameters()], "state_bytes": opt.state_bytes(),
               "comm_bw": comm_bw, "comm_step": comm_step, "grad_bytes": grad_bytes, "shard": opt.shard,
               "partition": opt.partition, "lrs": [g["lr"] for g in opt.param_groups]}
        # resume from the state saved after step 2 into a fresh model + optimizer
        model2 = make_model(seed=3)
        with torch.no_grad():
            for p, v in zip(model2.parameters(), saved[1]):
                p.copy_(v)
        opt2 = ShardedOptimizer(groups(model2, kw["lr"]), cls, stage, partition=partition, **kw)
        opt2.load_state_dict(saved[0])
        for step in batches(world_size)[2:]:
            opt2.zero_grad()
            loss_fn(model2, step[rank]).backward()
            opt2.step()
        res["resumed_equal"] = all(torch.equal(a, b) for a, b in zip(res["params"], model2.parameters()))
        out[(name, stage, partition)] = res
    return out


RUNS = [("adamw", 1, "auto"), ("adamw", 2, "auto"), ("sgd", 1, "auto"), ("adam", 2, "auto"),
        ("lamb", 1, "auto"), ("lamb", 2, "auto"), ("lamb", 1, "flat")]


def _check(out, world_size, exact):
    refs = {name: reference(world_size, name) for name in OPTS}
    for rank, r in enumerate(out):
        for (name, stage, partition), res in r.items():
            want, full_state = refs[name]
            close = [torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in zip(res["params"], want)]
            if name == "lamb" and partition == "flat":
                # a trust ratio per piece, not per tensor: measurably not Lamb
                assert not all(close), "Lamb on pieces that cut tensors should differ"
                continue
            assert all(close), (name, stage, rank)
            if exact:   # 2 ranks: g0 + g1 then / 2 is bitwise the accumulation g0 / 2 + g1 / 2
                assert all(torch.equal(a, b) for a, b in zip(res["params"], want)), (name, stage)
            assert res["resumed_equal"], (name, stage)
            assert res["lrs"] == [OPTS[name][1]["lr"], OPTS[name][1]["lr"] / 2]
            if res["partition"] == "flat":
                shard = -(-P // world_size)
                assert res["shard"] == shard
                # state: the unsharded state for my ceil(P / N) entries (the last rank's shard
                # ends in the zero padding, which holds no state)
                owned = min(shard, P - rank * shard)
                assert res["state_bytes"] * P == full_state * owned, (name, res["state_bytes"], full_state)
            else:
                assert name == "lamb"
                assert sum(x[(name, stage, partition)]["state_bytes"] for x in out) == full_state
                # whole tensors: 1/N up to the largest tensor's state
                assert res["state_bytes"] <= full_state / world_size + full_state * 256 / P
            n_s = res["shard"] * world_size
            want_comm = zero1_comm_bytes_per_step(n_s, world_size)
            if stage == 1:
                assert all(c == {} for c in res["comm_bw"])
                assert all(c == {op: (1, b) for op, b in want_comm.items()} for c in res["comm_step"])
                assert all(b == 4 * P for b in res["grad_bytes"])         # the full local gradients
            else:
                # backward: one reduce per (tensor, owner) piece, P entries in all; my shard kept
                for c in res["comm_bw"]:
                    assert set(c) == {"reduce"} and c["reduce"][1] == 4 * P and c["reduce"][0] >= 8
                assert all(b == 4 * res["shard"] for b in res["grad_bytes"])
                ag = want_comm["all_gather_into_tensor"]
                assert all(c == {"all_gather_into_tensor": (1, ag)} for c in res["comm_step"])
    # all ranks hold the same parameters
    for r in out[1:]:
        for k, res in r.items():
            assert all(torch.equal(a, b) for a, b in zip(res["params"], out[0][k]["params"]))


def test_sharded_optimizer_two_ranks_bitwise_the_wrapped_optimizer():
    _check(launch(_rank, 2, args=(RUNS,), threads_per_rank=1, timeout=240), 2, exact=True)


def test_sharded_optimizer_four_ranks_within_1e_6():
    runs = [("adamw", 1, "auto"), ("adamw", 2, "auto"), ("lamb", 2, "auto")]
    _check(launch(_rank, 4, args=(runs,), threads_per_rank=1, timeout=240), 4, exact=False)


def _errors(rank, world_size):
    msgs = []
    m = make_model()
    for make in (lambda: ShardedOptimizer(m.parameters(), torch.nn.Linear),
                 lambda: ShardedOptimizer(m.parameters(), torch.optim.AdamW, stage=3),
                 lambda: ShardedOptimizer(m.parameters(), torch.optim.AdamW, partition="rows"),
                 lambda: ShardedOptimizer([], torch.optim.AdamW),
                 lambda: ShardedOptimizer(m.parameters(), torch.optim.AdamW, lr=-1.0),
                 lambda: ShardedOptimizer(m.parameters(), torch.optim.AdamW, world_size=world_size + 1),
                 lambda: ShardedOptimizer(m.parameters(), torch.optim.AdamW).step(),
                 lambda: ShardedOptimizer(m.parameters(), torch.optim.AdamW).load_state_dict({"x": 1})):
        try:
            make()
            msgs.append(None)
        except ValueError as e:
            msgs.append(str(e))
    return msgs


def test_value_errors():
    with pytest.raises(ValueError, match="process group"):
        ShardedOptimizer(make_model().parameters(), torch.optim.AdamW)
    for msgs in launch(_errors, 2, threads_per_rank=1):
        assert all(m is not None for m in msgs), msgs
        assert "stage" in msgs[1] and "backward" in msgs[6] and "world_size=3" in msgs[5]


# ---- issue 27: frozen parameters are accepted and skipped, as torch's optimizers do

def _frozen_reference(world_size, frozen_layer):
    """One process: torch AdamW on the model with layer `frozen_layer` frozen (its parameters
    given to the optimizer anyway), loss / N accumulated."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cls, kw = OPTS["adamw"]
        model = make_model()
        for p in model[2 * frozen_layer].parameters():
            p.requires_grad_(False)
        opt = cls(groups(model, kw["lr"]), **kw)
        for step in batches(world_size):
            opt.zero_grad()
            for b in step:
                (loss_fn(model, b) / world_size).backward()
            opt.step()
        return [p.detach().clone() for p in model.parameters()], _tensor_state_bytes(opt.state)
    finally:
        torch.set_num_threads(threads)


def _frozen_rank(rank, world_size, stage, frozen_layer):
    cls, kw = OPTS["adamw"]
    model = make_model()
    for p in model[2 * frozen_layer].parameters():
        p.requires_grad_(False)
    before = [p.detach().clone() for p in model[2 * frozen_layer].parameters()]
    opt = ShardedOptimizer(groups(model, kw["lr"]), cls, stage, **kw)
    with CommCounter() as comm:
        for step in batches(world_size):
            opt.zero_grad()
            loss_fn(model, step[rank]).backward()
            opt.step()
    frozen_same = all(torch.equal(a, b) for a, b in zip(before, model[2 * frozen_layer].parameters()))
    in_groups = sum(len(g["params"]) for g in opt.param_groups)
    return [p.detach().clone() for p in model.parameters()], opt.state_bytes(), frozen_same, in_groups, \
        opt.numel, dict(comm.bytes)


@pytest.mark.parametrize("stage", [1, 2])
def test_frozen_parameters_are_accepted_and_skipped(stage):
    world, frozen_layer = 2, 1
    want, full_state = _frozen_reference(world, frozen_layer)
    out = launch(_frozen_rank, world, args=(stage, frozen_layer), threads_per_rank=1)
    n_frozen = sum(p.numel() for p in make_model()[2 * frozen_layer].parameters())
    for params, state, frozen_same, in_groups, numel, _ in out:
        assert frozen_same, "a frozen parameter was changed"
        assert in_groups == len(list(make_model().parameters())), "frozen parameters stay in param_groups"
        assert numel == P - n_frozen, "only the trainable entries are sharded"
        for a, b in zip(params, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert sum(s for _, s, *_ in out) == full_state       # the state of the trainable entries only, split
    ag = [b.get("all_gather_into_tensor", 0) + b.get("all_gather_single", 0) for *_, b in out]
    assert all(x <= STEPS * 4 * (P - n_frozen + world) for x in ag), ag   # frozen entries never sent


def _all_frozen(rank, world_size):
    m = make_model()
    for p in m.parameters():
        p.requires_grad_(False)
    try:
        ShardedOptimizer(m.parameters(), torch.optim.AdamW)
    except ValueError as e:
        return str(e)
    return None


def test_all_frozen_is_a_value_error():
    assert all(msg and "requires grad" in msg for msg in launch(_all_frozen, 2, threads_per_rank=1))
