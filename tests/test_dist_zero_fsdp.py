"""ZeRO-1 and FSDP by hand (solutions_lib.dist.zero / .fsdp) against independent oracles.

Oracles: one process running torch.optim.AdamW(foreach=False) on gradients accumulated over
the same micro-batches (loss / N each); torch's ZeroRedundancyOptimizer (shards by parameter);
torch's FSDP2 `fully_shard` on gloo. Memory is measured from the tensors each rank holds;
communication with CommCounter.
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist.fsdp import FlatShardFSDP, fsdp_comm_bytes_per_step
from solutions_lib.dist.zero import (ZeroOneAdamW, adamw_shard_update_, adamw_state_bytes, flat_shard_layout,
                                     zero1_comm_bytes_per_step)
from solutions_lib.memory import zero_bytes_per_rank

HP = dict(lr=3e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
STEPS = 4


def make_model(hidden=10, out=2, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, hidden), nn.Tanh(), nn.Linear(hidden, out))


def micro_batches(world_size, steps=STEPS, out=2, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [[(torch.randn(5, 6, generator=g), torch.randn(5, out, generator=g)) for _ in range(world_size)]
            for _ in range(steps)]


def loss_fn(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def reference(world_size, hidden=10, out=2):
    """One process: accumulate loss/N over the N micro-batches of a step, then AdamW(foreach=False)."""
    model = make_model(hidden, out)
    opt = torch.optim.AdamW(model.parameters(), foreach=False, **HP)
    losses = []
    for step in micro_batches(world_size, out=out):
        opt.zero_grad()
        row = []
        for b in step:
            loss = loss_fn(model, b)
            (loss / world_size).backward()
            row.append(loss.detach())
        losses.append(row)
        opt.step()
    return model, opt, losses


# ---------------------------------------------------------------- pure helpers (no process group)


def test_flat_shard_layout_pads_to_a_multiple_of_the_world():
    assert flat_shard_layout(92, 4) == (92, 23, 0, 23)
    assert flat_shard_layout(103, 4, 3) == (104, 26, 78, 104)
    assert flat_shard_layout(1, 2, 1) == (2, 1, 1, 2)
    for bad in [(0, 2), (5, 0), (5, 2, 2), (5, 2, -1), (5.5, 2), (True, 2)]:
        with pytest.raises(ValueError):
            flat_shard_layout(*bad)


def test_shard_update_is_bitwise_torch_adamw_on_any_slice():
    torch.manual_seed(3)
    shapes = [(33, 17), (17,), (5, 33), (1,)]
    params = [nn.Parameter(torch.randn(s)) for s in shapes]
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    m, v = torch.zeros_like(flat), torch.zeros_like(flat)
    opt = torch.optim.AdamW(params, foreach=False, **HP)
    cuts = [0, 100, 333, 561, flat.numel()]          # shards that cut through tensors
    for t in range(1, 5):
        grads = [torch.randn(s) for s in shapes]
        for p, g in zip(params, grads):
            p.grad = g
        opt.step()
        gflat = torch.cat([g.reshape(-1) for g in grads])
        for a, b in zip(cuts, cuts[1:]):
            adamw_shard_update_(flat[a:b], gflat[a:b], m[a:b], v[a:b], t, **HP)
    assert torch.equal(flat, torch.cat([p.detach().reshape(-1) for p in params]))
    assert torch.equal(m, torch.cat([opt.state[p]["exp_avg"].reshape(-1) for p in params]))
    with pytest.raises(ValueError):
        adamw_shard_update_(flat, gflat, m, v, 0, **HP)
    with pytest.raises(ValueError):
        adamw_shard_update_(flat, gflat[:3], m, v, 1, **HP)
    with pytest.raises(ValueError):
        adamw_shard_update_(flat, gflat, m, v, 1, lr=1e-3, betas=(1.0, 0.9))


def test_comm_formulas():
    assert zero1_comm_bytes_per_step(103, 4) == {"reduce_scatter_tensor": 416, "all_gather_into_tensor": 416}
    wire = zero1_comm_bytes_per_step(100, 4, measure="wire")
    assert sum(wire.values()) == pytest.approx(2 * 3 / 4 * 400)   # one ring all-reduce of the gradient
    assert fsdp_comm_bytes_per_step(103, 2) == {"all_gather_into_tensor": 416, "reduce_scatter_tensor": 416}
    assert fsdp_comm_bytes_per_step(103, 2, reshard_after_forward=True)["all_gather_into_tensor"] == 832
    with pytest.raises(ValueError):
        zero1_comm_bytes_per_step(10, 2, measure="bus")
    with pytest.raises(ValueError):
        fsdp_comm_bytes_per_step(10, 2, bytes_per_element=0)


def test_no_process_group_is_a_value_error():
    with pytest.raises(ValueError, match="process group"):
        ZeroOneAdamW(make_model().parameters())
    with pytest.raises(ValueError, match="process group"):
        FlatShardFSDP(make_model())


# ---------------------------------------------------------------- ZeRO-1


def _zero_rank(rank, world_size, hidden, out, with_zero_redundancy):
    model = make_model(hidden, out)
    opt = ZeroOneAdamW(model.parameters(), **HP)
    comm, losses = [], []
    for step in micro_batches(world_size, out=out):
        opt.zero_grad()
        loss = loss_fn(model, step[rank])
        loss.backward()
        with CommCounter() as c:
            opt.step()
        comm.append(c.summary())
        losses.append(loss.detach())
    res = {"params": [p.detach().clone() for p in model.parameters()], "state_bytes": opt.state_bytes(),
           "comm": comm, "losses": losses}
    if with_zero_redundancy:   # torch's ZeRO-1: shards whole parameters; we average the grads ourselves
        from torch.distributed.optim import ZeroRedundancyOptimizer
        model = make_model(hidden, out)
        zro = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, foreach=False, **HP)
        for step in micro_batches(world_size, out=out):
            zro.zero_grad()
            loss_fn(model, step[rank]).backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad.div_(world_size)
            zro.step()
        res["zro_params"] = [p.detach().clone() for p in model.parameters()]
        res["zro_state_bytes"] = adamw_state_bytes(zro.optim)
    return res


def test_zero1_two_ranks_is_bitwise_torch_adamw_and_holds_half_the_state():
    ref, ref_opt, ref_losses = reference(2)
    out = launch(_zero_rank, 2, args=(10, 2, True))
    n_params = sum(p.numel() for p in ref.parameters())        # 92: divisible by 2 and 4
    full_state = adamw_state_bytes(ref_opt)
    assert full_state == 8 * n_params
    for rank, r in enumerate(out):
        for i, (got, want) in enumerate(zip(r["params"], ref.parameters())):
            assert torch.equal(got, want.detach()), f"rank {rank} parameter {i} differs"
            assert torch.equal(r["zro_params"][i], want.detach()), "ZeroRedundancyOptimizer oracle differs"
        assert all(torch.equal(a, b[rank]) for a, b in zip(r["losses"], ref_losses))
        assert r["state_bytes"] * 2 == full_state
        # the stage-1 formula's optimizer term with o = 8 bytes (two fp32 moments) per parameter
        assert r["state_bytes"] == zero_bytes_per_rank(n_params, 2, 1, 0, 0, 8)
        want = zero1_comm_bytes_per_step(n_params, 2)
        for c in r["comm"]:
            assert c == {op: (1, b) for op, b in want.items()}
    # torch's ZeroRedundancyOptimizer assigns whole tensors to ranks: uneven, here 480 vs 256 bytes
    zro = [r["zro_state_bytes"] for r in out]
    assert sum(zro) == full_state and zro[0] != zro[1]


def test_zero1_four_ranks_with_padding_matches_within_reduction_order():
    ref, ref_opt, _ = reference(4, hidden=11, out=3)       # 6*11+11+11*3+3 = 113 params: pad to 116
    out = launch(_zero_rank, 4, args=(11, 3, False))
    n_params = 113
    for rank, r in enumerate(out):
        for got, want in zip(r["params"], ref.parameters()):
            # gloo sums 4 gradients in its own order, not ((g0+g1)+g2)+g3: last-bit differences
            assert torch.allclose(got, want.detach(), rtol=1e-6, atol=1e-7)
        assert r["state_bytes"] == 8 * 29                      # ceil(113 / 4) = 29 entries per rank
        assert r["state_bytes"] * 4 - adamw_state_bytes(ref_opt) == 8 * 3   # the 3 padding entries
        want = zero1_comm_bytes_per_step(n_params, 4)
        assert all(c == {op: (1, b) for op, b in want.items()} for c in r["comm"])
    assert all(torch.equal(a, b) for r in out[1:] for a, b in zip(r["params"], out[0]["params"]))


def _zero_errors(rank, world_size):
    msgs = []
    frozen = make_model()
    for p in frozen.parameters():
        p.requires_grad_(False)
    for make in (lambda: ZeroOneAdamW(frozen.parameters()),
                 lambda: ZeroOneAdamW(make_model().parameters(), world_size=world_size + 1),
                 lambda: ZeroOneAdamW(make_model().double().parameters()),
                 lambda: ZeroOneAdamW(make_model().parameters(), lr=-1.0),
                 lambda: ZeroOneAdamW(make_model().parameters()).step(),
                 lambda: FlatShardFSDP(frozen),
                 lambda: FlatShardFSDP(make_model(), world_size=3),
                 lambda: FlatShardFSDP(make_model().double())):
        try:
            make()
            msgs.append(None)
        except ValueError as e:
            msgs.append(str(e))
    return msgs


def test_value_errors_on_ranks():
    for msgs in launch(_zero_errors, 2):
        assert all(m is not None for m in msgs), msgs
        assert "no trainable" in msgs[0] and "world_size=3" in msgs[1] and "backward" in msgs[4]


# ---------------------------------------------------------------- FSDP


def _fsdp_rank(rank, world_size):
    model = make_model()
    n_params = sum(p.numel() for p in model.parameters())
    originals = list(model.parameters())
    fsdp = FlatShardFSDP(model)
    freed = all(p.numel() == 0 for p in originals)
    opt = torch.optim.AdamW(fsdp.parameters(), foreach=False, **HP)
    losses, comm, held, during, grads = [], [], [], [], []
    for step in micro_batches(world_size):
        opt.zero_grad()
        with CommCounter() as c:
            loss = loss_fn(fsdp, step[rank])
            during.append(fsdp.param_bytes())
            loss.backward()
        opt.step()
        comm.append(c.summary())
        losses.append(loss.detach())
        held.append(fsdp.param_bytes())
        grads.append(fsdp.grad_bytes())
    res = {"losses": losses, "comm": comm, "held": held, "during": during, "grads": grads, "freed": freed,
           "counts": (fsdp.gathers, fsdp.reduce_scatters), "opt_bytes": adamw_state_bytes(opt),
           "n_params": n_params, "params": fsdp.full_parameters()}

    # torch's FSDP2 on the same model and data (one unit for the whole model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    model = make_model()
    fully_shard(model, mesh=init_device_mesh("cpu", (world_size,)))
    opt = torch.optim.AdamW(model.parameters(), foreach=False, **HP)
    t_losses = []
    for step in micro_batches(world_size):
        opt.zero_grad()
        loss = loss_fn(model, step[rank])
        loss.backward()
        opt.step()
        t_losses.append(loss.detach())
    res["torch_losses"] = t_losses
    res["torch_param_bytes"] = sum(p.to_local().numel() * p.to_local().element_size() for p in model.parameters())
    res["torch_opt_bytes"] = adamw_state_bytes(opt)
    res["torch_params"] = {n: p.full_tensor().detach() for n, p in model.named_parameters()}
    return res


def test_fsdp_two_ranks_bitwise_equal_and_one_nth_of_the_bytes():
    ref, ref_opt, ref_losses = reference(2)
    out = launch(_fsdp_rank, 2)
    n = out[0]["n_params"]                                    # 92 fp32 parameters, 46 per rank
    full_param_bytes = 4 * n
    for rank, r in enumerate(out):
        assert r["freed"], "the original parameters still hold storage"
        assert all(torch.equal(a, b[rank]) for a, b in zip(r["losses"], ref_losses))
        for name, want in ref.named_parameters():
            assert torch.equal(r["params"][name], want.detach()), f"rank {rank} {name} differs"
        assert r["held"] == [full_param_bytes // 2] * STEPS           # between steps: the shard only
        assert r["during"] == [full_param_bytes // 2 + full_param_bytes] * STEPS  # shard + gathered vector
        assert r["grads"] == [full_param_bytes // 2] * STEPS
        assert r["opt_bytes"] * 2 == adamw_state_bytes(ref_opt)
        assert r["held"][0] + r["grads"][0] + r["opt_bytes"] == zero_bytes_per_rank(n, 2, 3, 4, 4, 8)
        want = fsdp_comm_bytes_per_step(n, 2)
        assert all(c == {op: (1, b) for op, b in want.items()} for c in r["comm"])
        assert r["counts"] == (STEPS, STEPS)
        # FSDP2: same losses and parameters (measured bitwise equal on 2 ranks; checked to 1e-6)
        for a, b in zip(r["torch_losses"], ref_losses):
            assert torch.allclose(a, b[rank], rtol=1e-6, atol=0)
        for name, want in ref.named_parameters():
            assert torch.allclose(r["torch_params"][name], want.detach(), rtol=1e-6, atol=1e-7)
        assert r["torch_opt_bytes"] == 2 * r["torch_param_bytes"]
    # FSDP2 shards each tensor along dim 0 (10 and 2 rows here: even halves, 184 bytes per rank)
    assert sum(r["torch_param_bytes"] for r in out) == full_param_bytes


def test_library_oracle_matches_the_test_oracle():
    from solutions_lib.dist.zero import mlp, reference_adamw_training, regression_micro_batches
    ref, ref_opt, ref_losses = reference(2)
    got = reference_adamw_training(mlp([6, 10, 2], seed=0), regression_micro_batches(STEPS, 2, 6, 2, seed=1), **HP)
    assert all(torch.equal(a, b.detach()) for a, b in zip(got["params"], ref.parameters()))
    assert got["losses"] == ref_losses and got["state_bytes"] == adamw_state_bytes(ref_opt)
    with pytest.raises(ValueError):
        mlp([6])
