"""Per-layer FSDP by hand (solutions_lib.dist.fsdp.FSDP) against independent oracles.

Oracles: one process (1 thread, like each rank) that accumulates loss / N over the N
micro-batches of a step and steps torch.optim.AdamW(foreach=False) on fp32 parameters; for
bf16 compute, the same process running a bf16 copy of the fp32 master model (grads cast to
fp32 for the step): the emulation of "fp32 masters, bf16 compute". torch's FSDP2
`fully_shard` per layer for losses and communication counts. Peak parameter bytes are the
storages FSDP allocates (masters + gathered flat buffers alive), communication by CommCounter.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
from torch import nn

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist.fsdp import FSDP, fsdp_comm_bytes_per_step

pytestmark = pytest.mark.xdist_group("dist_fsdp_layers")

HP = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
STEPS = 3
D, DEPTH = 16, 6
BLOCK = 2 * D + D * D + D          # LayerNorm(D) + Linear(D, D): 304 entries, the largest unit


class Net(nn.Module):
    """inp -> DEPTH residual blocks (LayerNorm, Linear, Tanh) -> head, times a root scalar."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.inp = nn.Linear(6, D)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(D), nn.Linear(D, D), nn.Tanh())
                                    for _ in range(DEPTH))
        self.head = nn.Linear(D, 2)
        self.scale = nn.Parameter(torch.ones(1))    # outside every unit: the root unit

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        return self.head(h) * self.scale


P = sum(p.numel() for p in Net().parameters())     # 1971


def batches(world_size, steps=STEPS):
    g = torch.Generator().manual_seed(1)
    return [[(torch.randn(5, 6, generator=g), torch.randn(5, 2, generator=g)) for _ in range(world_size)]
            for _ in range(steps)]


def reference(world_size, compute_dtype=None):
    """{"grads": first-step grads by name, "params": final state_dict, "losses": [step][rank]}."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)             # the ranks run 1 thread: same reduction order in kernels
    try:
        cd = compute_dtype or torch.float32
        model = Net()
        opt = torch.optim.AdamW(model.parameters(), foreach=False, **HP)
        grads, losses = None, []
        for step in batches(world_size):
            opt.zero_grad()
            work = copy.deepcopy(model).to(cd)
            row = []
            for x, y in step:
                loss = nn.functional.mse_loss(work(x.to(cd)).float(), y)
                (loss / world_size).backward()
                row.append(loss.item())
            losses.append(row)
            for p, q in zip(model.parameters(), work.parameters()):
                p.grad = q.grad.float()
            if grads is None:
                grads = {n: p.grad.clone() for n, p in model.named_parameters()}
            opt.step()
        return {"grads": grads, "params": {n: t.clone() for n, t in model.state_dict().items()}, "losses": losses}
    finally:
        torch.set_num_threads(threads)


def _gathered_grads(fsdp):
    out = {}
    for u in fsdp._all_units():
        buf = torch.empty(u.padded)
        dist.all_gather_into_tensor(buf, u.master.grad)
        for (name, _), off, shape in zip(u.params, u.offsets, u.shapes):
            out[name] = buf[off:off + shape.numel()].view(shape).clone()
    return out


def _train(rank, world_size, **cfg):
    fsdp = FSDP(Net(), **cfg)
    opt = torch.optim.AdamW(fsdp.parameters(), foreach=False, **HP)
    res = {"losses": [], "comm": [], "peak": [], "held": [], "dtype": None}
    for i, step in enumerate(batches(world_size)):
        opt.zero_grad()
        fsdp.reset_peak()
        x, y = step[rank]
        with CommCounter() as c:
            out = fsdp(x)
            loss = nn.functional.mse_loss(out.float(), y)
            loss.backward()
        if i == 0:
            res["grads"] = _gathered_grads(fsdp)
            res["grad_dtypes"] = {u.master.grad.dtype for u in fsdp._all_units()}
        opt.step()
        res["dtype"] = out.dtype
        res["losses"].append(loss.item())
        res["comm"].append(c.summary())
        res["peak"].append(fsdp.peak_param_bytes)
        res["held"].append(fsdp.param_bytes())
    res["want_comm"] = fsdp.comm_per_step()
    res["units"] = fsdp.unit_numels()
    res["shard_bytes"] = sum(p.numel() * p.element_size() for p in fsdp.parameters())
    res["state_dtypes"] = {t.dtype for st in opt.state.values() for k, t in st.items() if k != "step"}
    res["state"] = fsdp.full_state_dict()
    res["state_rank0"] = fsdp.full_state_dict(rank0_only=True)
    return res


def _fsdp_rank(rank, world_size, configs, with_torch):
    out = {name: _train(rank, world_size, **cfg) for name, cfg in configs.items()}
    # full_state_dict round trip: load a perturbed state, read it back, run a plain model on it
    fsdp = FSDP(Net(seed=5))
    sd = {k: v + 0.25 for k, v in Net(seed=7).state_dict().items()}
    fsdp.load_full_state_dict(sd)
    back = fsdp.full_state_dict()
    x = batches(world_size)[0][rank][0]
    plain = Net()
    plain.load_state_dict(back)
    out["roundtrip"] = {"equal": all(torch.equal(back[k], sd[k]) for k in sd), "keys": sorted(back),
                        "outputs_equal": torch.equal(fsdp(x).detach(), plain(x).detach())}
    errs = []
    for bad in ({}, {**sd, "extra": torch.zeros(1)}, {**sd, "head.bias": torch.zeros(3)}):
        try:
            fsdp.load_full_state_dict(bad)
            errs.append(None)
        except ValueError as e:
            errs.append(str(e))
    out["load_errors"] = errs
    if with_torch:                       # torch's FSDP2, one unit per layer and the root
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        model = Net()
        mesh = init_device_mesh("cpu", (world_size,))
        for m in [model.inp, *model.blocks, model.head]:
            fully_shard(m, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.AdamW(model.parameters(), foreach=False, **HP)
        losses, comm = [], []
        for step in batches(world_size):
            opt.zero_grad()
            x, y = step[rank]
            with CommCounter() as c:
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
            opt.step()
            losses.append(loss.item())
            comm.append(c.summary())
        out["torch"] = {"losses": losses, "comm": comm,
                        "params": {n: p.full_tensor().detach() for n, p in model.named_parameters()}}
    return out


def _max_rel(a, b):
    return max(((a[k] - b[k]).abs().max() / b[k].abs().max().clamp_min(1e-12)).item() for k in b)


CONFIGS = {
    "fp32": dict(),
    "fp32_no_prefetch": dict(prefetch=False),
    "fp32_keep": dict(reshard_after_forward=False),
    "bf16": dict(compute_dtype=torch.bfloat16),
    "fp16_fp32_reduce": dict(compute_dtype=torch.float16, reduce_dtype=torch.float32),
}


def _units_expected(world_size):
    return {"inp": 6 * D + D, **{f"blocks.{i}": BLOCK for i in range(DEPTH)}, "head": 2 * D + 2, "": 1}


def _check_common(out, world_size, ref32):
    units = _units_expected(world_size)
    shard_bytes = 4 * sum(-(-n // world_size) for n in units.values())
    pad = lambda n: -(-n // world_size) * world_size          # noqa: E731
    biggest = pad(BLOCK)
    for rank, r in enumerate(out):
        for name, res in ((k, r[k]) for k in CONFIGS):
            assert res["units"] == units
            assert res["shard_bytes"] == shard_bytes, name
            assert res["held"] == [shard_bytes] * STEPS, name       # between steps: the masters only
            assert res["grad_dtypes"] == {torch.float32} and res["state_dtypes"] == {torch.float32}, name
            # communication: the formula, summed over the units, is what CommCounter saw
            assert all(c == res["want_comm"] for c in res["comm"]), (name, res["comm"][0], res["want_comm"])
            e_c = {"bf16": 2, "fp16_fp32_reduce": 2}.get(name, 4)
            e_r = 2 if name == "bf16" else 4
            again = name != "fp32_keep"
            ag = sum(fsdp_comm_bytes_per_step(n, world_size, e_c, again and u != "")["all_gather_into_tensor"]
                     for u, n in units.items())
            rs = sum(fsdp_comm_bytes_per_step(n, world_size, e_r)["reduce_scatter_tensor"] for n in units.values())
            n_units = len(units)
            assert res["want_comm"] == {"all_gather_into_tensor": ((2 * n_units - 1) if again else n_units, ag),
                                        "reduce_scatter_tensor": (n_units, rs)}, name
            # full state dict: every rank the same, rank0_only leaves the others empty
            assert sorted(res["state"]) == sorted(ref32["params"])
            assert (res["state_rank0"] == {}) == (rank != 0)
        e = {"fp32": 4, "bf16": 2}
        root = pad(1)
        # peak parameter bytes: masters + root + the largest unit (+ the prefetched next one)
        assert r["fp32_no_prefetch"]["peak"] == [shard_bytes + 4 * (root + biggest)] * STEPS
        assert r["fp32"]["peak"] == [shard_bytes + 4 * (root + 2 * biggest)] * STEPS
        assert r["bf16"]["peak"] == [shard_bytes + e["bf16"] * (root + 2 * biggest)] * STEPS
        assert r["fp32_keep"]["peak"] == [shard_bytes + 4 * sum(pad(n) for n in units.values())] * STEPS
        assert max(r["fp32"]["peak"]) < 4 * P                   # DDP holds all P parameters
        assert r["roundtrip"]["equal"] and r["roundtrip"]["outputs_equal"]
        assert r["roundtrip"]["keys"] == sorted(Net().state_dict())
        assert all(m is not None for m in r["load_errors"]), r["load_errors"]
        assert "missing" in r["load_errors"][0] and "extra" in r["load_errors"][1]
        assert "head.bias" in r["load_errors"][2]


def test_per_layer_fsdp_two_ranks_bitwise_and_memory():
    out = launch(_fsdp_rank, 2, args=(CONFIGS, True), threads_per_rank=1, timeout=240)
    ref32, ref16 = reference(2), reference(2, torch.bfloat16)
    _check_common(out, 2, ref32)
    for rank, r in enumerate(out):
        for name in ("fp32", "fp32_no_prefetch", "fp32_keep"):
            res = r[name]
            assert res["dtype"] == torch.float32
            # 2 ranks: g0 + g1 then / 2 is bitwise the accumulation of g0 / 2 + g1 / 2
            assert all(torch.equal(res["grads"][k], ref32["grads"][k]) for k in ref32["grads"]), name
            assert all(torch.equal(res["state"][k], ref32["params"][k]) for k in ref32["params"]), name
            assert res["losses"] == [row[rank] for row in ref32["losses"]]
        bf = r["bf16"]
        assert bf["dtype"] == torch.bfloat16                  # the compute really ran in bf16
        # bitwise the bf16-compute / fp32-master emulation in one process ...
        assert all(torch.equal(bf["grads"][k], ref16["grads"][k]) for k in ref16["grads"])
        assert all(torch.equal(bf["state"][k], ref16["params"][k]) for k in ref16["params"])
        # ... and measurably off the fp32 gradients: fp32 silently used would be < 1e-6 here
        assert 1e-4 < _max_rel(bf["grads"], ref32["grads"]) < 5e-2
        fp16 = r["fp16_fp32_reduce"]
        assert fp16["dtype"] == torch.float16
        assert 1e-5 < _max_rel(fp16["grads"], ref32["grads"]) < 1e-2
        # torch's fully_shard per layer: same losses and parameters (different shard layout)
        t = r["torch"]
        assert t["losses"] == pytest.approx([row[rank] for row in ref32["losses"]], rel=1e-6)
        for k, v in t["params"].items():
            assert torch.allclose(v, ref32["params"][k], rtol=1e-6, atol=1e-7), k
        # same collectives, call for call and byte for byte (torch 2.13 names them *_single; it
        # pads each tensor's dim 0 to a multiple of N, we pad each unit's flat vector: every
        # dim 0 here is even, so both pad only the root's 1 entry to 2)
        ours = r["fp32"]["comm"][0]
        names = {"all_gather_into_tensor": "all_gather_single", "reduce_scatter_tensor": "reduce_scatter_single"}
        for c in t["comm"]:
            seen = {names.get(op, op): v for op, v in ours.items()}
            assert {op: v for op, v in c.items() if op in seen} == seen, (c, ours)
            assert sum(v[0] for v in c.values()) == sum(v[0] for v in ours.values()), (c, ours)


def test_per_layer_fsdp_four_ranks_within_reduction_order():
    configs = {k: CONFIGS[k] for k in CONFIGS}
    out = launch(_fsdp_rank, 4, args=(configs, False), threads_per_rank=1, timeout=240)
    ref32 = reference(4)
    _check_common(out, 4, ref32)
    for r in out:
        for name in ("fp32", "fp32_no_prefetch", "fp32_keep"):
            res = r[name]
            for k in ref32["grads"]:        # gloo adds 4 gradients in its own order
                assert torch.allclose(res["grads"][k], ref32["grads"][k], rtol=1e-6, atol=1e-8), (name, k)
                assert torch.allclose(res["state"][k], ref32["params"][k], rtol=1e-6, atol=1e-7), (name, k)
        assert r["bf16"]["dtype"] == torch.bfloat16
        assert 1e-4 < _max_rel(r["bf16"]["grads"], ref32["grads"]) < 5e-2
    assert all(torch.equal(a["fp32"]["state"][k], out[0]["fp32"]["state"][k]) for a in out for k in ref32["params"])


def _errors(rank, world_size):
    msgs = []
    frozen = Net()
    for p in frozen.parameters():
        p.requires_grad_(False)
    for make in (lambda: FSDP(frozen),
                 lambda: FSDP(Net(), world_size=3),
                 lambda: FSDP(Net().double()),
                 lambda: FSDP(Net(), compute_dtype=torch.int8),
                 lambda: FSDP(Net(), reduce_dtype="bf16"),
                 lambda: FSDP(Net(), prefetch=1),
                 lambda: FSDP(Net(), units=["nope"]),
                 lambda: FSDP(Net(), units=["blocks", "blocks.0"]),
                 lambda: FSDP(Net(), units=nn.Conv1d),
                 lambda: FSDP(Net()).full_state_dict(rank0_only="yes")):
        try:
            make()
            msgs.append(None)
        except ValueError as e:
            msgs.append(str(e))
    # units by class: the six blocks are units, everything else is the root
    f = FSDP(Net(), units=nn.Sequential)
    msgs.append(sorted(f.unit_numels()))
    return msgs


def test_value_errors_and_unit_choice():
    with pytest.raises(ValueError, match="process group"):
        FSDP(Net())
    for msgs in launch(_errors, 2, threads_per_rank=1):
        assert all(m is not None for m in msgs[:-1]), msgs
        assert "no trainable" in msgs[0] and "world_size=3" in msgs[1] and "nest" in msgs[7]
        assert msgs[-1] == sorted(["", *(f"blocks.{i}" for i in range(DEPTH))])
