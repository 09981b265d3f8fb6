"""Data parallelism by hand (solutions_lib.dist.ddp) against two oracles: single-process gradient
accumulation and torch's own DistributedDataParallel, on gloo ranks.

Each multi-rank scenario runs once (module-scoped fixture) and several tests read its results.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch._dynamo  # noqa: F401 - DDP's first construction imports it (~1.5 s); once here, not in every forked rank
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from solutions_lib.dist import CommCounter, launch
from solutions_lib.dist import ddp as D
from solutions_lib.parallel import dp_comm_bytes_per_step

STEPS = 3


# ---------------------------------------------------------------- models and data


def mlp(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 12), nn.Tanh(), nn.Linear(12, 12),
                         nn.Tanh(), nn.Linear(12, 3))


class TiedNet(nn.Module):
    """Embedding tied to the output layer, a frozen layer, and a branch only some batches use."""

    def __init__(self, seed, vocab=11, d=8):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(vocab, d)
        self.frozen = nn.Linear(d, d)
        self.frozen.requires_grad_(False)
        self.body = nn.Linear(d, d)
        self.extra = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, tokens, use_extra):
        h = torch.tanh(self.body(self.frozen(self.emb(tokens))))
        if use_extra:
            h = h + torch.tanh(self.extra(h))
        return self.out(h)


def mlp_batches(world, steps, seed):
    g = torch.Generator().manual_seed(seed)
    return [[(torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)) for _ in range(world)]
            for _ in range(steps)]


def mlp_loss(model, batch):
    return F.mse_loss(model(batch[0]), batch[1])


def tied_batches(world, steps, seed):
    g = torch.Generator().manual_seed(seed)
    # rank 0's micro-batches use the extra branch, the others' never do
    return [[(torch.randint(0, 11, (3, 5), generator=g), r == 0) for r in range(world)] for _ in range(steps)]


def tied_loss(model, batch):
    tokens, use_extra = batch
    logits = model(tokens[:, :-1], use_extra)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def run(make, kind, rank, world, batches, loss_fn, cap=None):
    """Train on this rank's micro-batches; every rank but 0 starts from other weights."""
    model = make(0 if rank == 0 else 50 + rank)
    if kind == "torch":
        model = make(0)
        wrapper = DistributedDataParallel(model, find_unused_parameters=True)
    elif kind == "naive":
        wrapper = D.NaiveDDP(model)
    else:
        wrapper = D.BucketedDDP(model, cap)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    stats = []
    with CommCounter() as comm:
        for step in batches:
            opt.zero_grad(set_to_none=True)
            loss_fn(wrapper, step[rank]).backward()
            if kind == "naive":
                wrapper.sync_gradients()
            elif kind == "bucketed":
                stats.append(dict(wrapper.finish()))
            opt.step()
    return {"params": {n: p.detach().clone() for n, p in model.named_parameters()},
            "calls": comm.calls["all_reduce"], "bytes": comm.bytes["all_reduce"], "stats": stats,
            "formula_calls": {k: D.ddp_comm_calls_per_step(model, world, k, cap or 1) for k in ("naive", "bucketed")},
            "formula_bytes": D.ddp_comm_bytes_per_step(model, world), "n_trainable": len(D.trainable_parameters(model))}


def scenario(rank, world, which, cap):
    make, batches_of, loss_fn, seed = ((mlp, mlp_batches, mlp_loss, 7) if which == "mlp"
                                       else (TiedNet, tied_batches, tied_loss, 8))
    batches = batches_of(world, STEPS, seed)
    ref = make(0)
    initial = {n: p.detach().clone() for n, p in ref.named_parameters()}
    D.grad_accumulation_reference(ref, torch.optim.AdamW(ref.parameters(), lr=1e-2, weight_decay=0.1), loss_fn, batches)
    out = {"ref": {n: p.detach().clone() for n, p in ref.named_parameters()}, "initial": initial}
    for kind in ("torch", "naive", "bucketed"):
        out[kind] = run(make, kind, rank, world, batches, loss_fn, cap)
    return out


@pytest.fixture(scope="module")
def mlp2():
    return launch(scenario, 2, args=("mlp", 500))  # 500 B cap: 4 buckets of the 8 tensors


@pytest.fixture(scope="module")
def mlp4():
    return launch(scenario, 4, args=("mlp", 500))


@pytest.fixture(scope="module")
def tied2():
    return launch(scenario, 2, args=("tied", 200))  # buckets [extra] [body] [emb]: rank 1 must hold [body] back


def differing(a, b):
    return [n for n in a if not torch.equal(a[n], b[n])]


# ---------------------------------------------------------------- equivalence


@pytest.mark.parametrize("kind", ["naive", "bucketed"])
def test_two_ranks_match_grad_accumulation_and_torch_ddp_bitwise(mlp2, kind):
    for rank, out in enumerate(mlp2):
        assert differing(out[kind]["params"], out["ref"]) == [], f"rank {rank} vs accumulation"
        assert differing(out[kind]["params"], out["torch"]["params"]) == [], f"rank {rank} vs torch DDP"
    assert differing(out["ref"], out["initial"]) != [], "the steps must change the weights"


def test_torch_ddp_itself_matches_the_accumulation_oracle(mlp2):
    assert differing(mlp2[0]["torch"]["params"], mlp2[0]["ref"]) == []


@pytest.mark.parametrize("kind", ["naive", "bucketed"])
def test_four_ranks_agree_to_rounding_and_replicas_stay_identical(mlp4, kind):
    # gloo's ring adds the 4 contributions in an order that depends on the chunk, the
    # accumulation adds them in rank order: not bitwise (float addition is not associative),
    # but within 1e-6; all ranks receive the same sum, so the replicas stay bitwise equal.
    for out in mlp4:
        for n, p in out[kind]["params"].items():
            assert torch.allclose(p, out["ref"][n], rtol=0, atol=1e-6), n
            assert torch.allclose(p, out["torch"]["params"][n], rtol=0, atol=1e-6), n
        assert differing(out[kind]["params"], mlp4[0][kind]["params"]) == []


def test_unused_parameter_on_one_rank_does_not_hang_and_matches(tied2):
    # the `extra` branch runs only on rank 0: rank 1 sends zeros for it
    for out in tied2:
        for kind in ("naive", "bucketed"):
            assert differing(out[kind]["params"], out["ref"]) == [], kind
            assert differing(out[kind]["params"], out["torch"]["params"]) == [], kind
    assert not torch.equal(tied2[1]["ref"]["extra.weight"], tied2[1]["initial"]["extra.weight"])
    # rank 1 cannot launch the bucket holding `extra` from a hook: finish() launches it
    assert any(s["launched_at_finish"] > 0 for s in tied2[1]["bucketed"]["stats"])


def test_frozen_parameter_untouched_and_tied_parameter_sent_once(tied2):
    out = tied2[0]
    for kind in ("naive", "bucketed", "torch"):
        for n in ("frozen.weight", "frozen.bias"):
            assert torch.equal(out[kind]["params"][n], out["initial"][n]), (kind, n)
    model = TiedNet(0)
    trainable = D.trainable_parameters(model)
    assert len(trainable) == 5  # emb/out weight once, body and extra weight + bias; frozen excluded
    expected = sum(p.numel() * 4 for p in trainable)
    assert expected == 4 * (11 * 8 + 2 * (8 * 8 + 8))
    assert out["naive"]["formula_bytes"] == expected
    for kind in ("naive", "bucketed"):
        assert out[kind]["bytes"] == STEPS * expected, kind


# ---------------------------------------------------------------- counting


@pytest.mark.parametrize("fixture", ["mlp2", "tied2", "mlp4"])
def test_calls_and_bytes_equal_the_formulas(fixture, request):
    for out in request.getfixturevalue(fixture):
        for kind in ("naive", "bucketed"):
            r = out[kind]
            assert r["calls"] == STEPS * r["formula_calls"][kind], kind
            assert r["bytes"] == STEPS * r["formula_bytes"], kind
        assert out["naive"]["formula_calls"]["naive"] == out["naive"]["n_trainable"]


def test_mlp_bytes_agree_with_the_parallel_formula():
    model = mlp(0)
    n = sum(p.numel() for p in model.parameters())
    assert D.ddp_comm_bytes_per_step(model, 2) == dp_comm_bytes_per_step(n, 2, bytes_per_element=4)
    assert D.ddp_comm_bytes_per_step(model, 4, "wire") == dp_comm_bytes_per_step(n, 4, 4, "wire")
    assert D.ddp_comm_bytes_per_step(model, 1) == 0 and D.ddp_comm_calls_per_step(model, 1, "naive") == 0


def test_hooks_fire_once_per_trainable_parameter_and_a_bucket_starts_during_backward(mlp2, tied2):
    for out in mlp2:
        n = out["bucketed"]["n_trainable"]
        for s in out["bucketed"]["stats"]:
            assert s["hooks_fired"] == n
            assert s["launched_from_hook"] + s["launched_at_finish"] == out["bucketed"]["formula_calls"]["bucketed"]
            assert s["launched_from_hook"] >= 1
            # the first bucket started while gradients of earlier layers were still to come
            assert s["hooks_at_launch"][0] < n
    for rank, out in enumerate(tied2):  # tied weight: one hook; rank 1 never fires `extra`'s two
        for s in out["bucketed"]["stats"]:
            assert s["hooks_fired"] == out["bucketed"]["n_trainable"] - (2 if rank == 1 else 0)


# ---------------------------------------------------------------- bucket plan


def test_bucket_plan_matches_torch_bucket_assignment():
    gen = torch.Generator().manual_seed(3)
    for _ in range(20):
        numels = torch.randint(1, 400, (int(torch.randint(1, 15, (1,), generator=gen)),), generator=gen).tolist()
        cap = int(torch.randint(4, 3000, (1,), generator=gen))
        torch_plan, _ = dist._compute_bucket_assignment_by_size([torch.zeros(n) for n in numels], [cap])
        assert D.bucket_plan([4 * n for n in numels], cap) == [list(b) for b in torch_plan]
    assert D.bucket_plan([], 10) == []
    assert D.bucket_plan([100, 1, 1], 10) == [[0], [1, 2]]


def test_model_buckets_follow_reverse_registration_order():
    model = mlp(0)
    sizes = D.grad_sizes_reverse(model)
    names = [n for n, _ in model.named_parameters()][::-1]
    assert names[0] == "6.bias" and sizes[0] == 3 * 4 and sizes[1] == 12 * 3 * 4
    assert D.ddp_comm_calls_per_step(model, 2, "bucketed", 1e9) == 1
    assert D.ddp_comm_calls_per_step(model, 2, "bucketed", 1) == len(sizes) == D.ddp_comm_calls_per_step(model, 2, "naive")


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "1"])
def test_bad_bucket_cap_raises(bad):
    with pytest.raises(ValueError, match="bucket cap"):
        D.bucket_plan([4, 4], bad)


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        D.bucket_plan([4, -4], 10)
    with pytest.raises(ValueError):
        D.ddp_comm_calls_per_step(mlp(0), 2, "ring")
    with pytest.raises(ValueError):
        D.ddp_comm_calls_per_step(mlp(0), 0)
    with pytest.raises(ValueError):
        D.ddp_step_benchmark(caps=(0,))
    with pytest.raises(RuntimeError, match="process group"):
        D.NaiveDDP(mlp(0))


def _bad_cap_on_rank(rank, world):
    try:
        D.BucketedDDP(mlp(0), bucket_cap_bytes=-5)
    except ValueError as e:
        return str(e)


def test_bucketed_ddp_rejects_a_bad_cap_before_any_collective():
    assert all("bucket cap" in m for m in launch(_bad_cap_on_rank, 2))


# ---------------------------------------------------------------- no_sync and the benchmark


def _no_sync_rank(rank, world):
    batches = mlp_batches(2 * world, 2, 9)  # 2 micro-batches per rank per step
    ref = mlp(0)
    D.grad_accumulation_reference(ref, torch.optim.AdamW(ref.parameters(), lr=1e-2), mlp_loss, batches)
    model = mlp(0)
    ddp = D.BucketedDDP(model, 500)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with CommCounter() as comm:
        for step in batches:
            opt.zero_grad(set_to_none=True)
            with ddp.no_sync():
                (mlp_loss(ddp, step[2 * rank]) / 2).backward()
            (mlp_loss(ddp, step[2 * rank + 1]) / 2).backward()
            ddp.finish()
            opt.step()
    diff = max(float((a - b).abs().max()) for a, b in zip(model.parameters(), ref.parameters()))
    return diff, comm.calls["all_reduce"], D.ddp_comm_calls_per_step(model, world, "bucketed", 500)


def test_no_sync_accumulates_locally_then_syncs_once():
    for diff, calls, per_step in launch(_no_sync_rank, 2):
        assert diff <= 1e-6 and calls == 2 * per_step


def test_benchmark_runs_on_a_tiny_config():
    res = D.ddp_step_benchmark(width=16, depth=2, batch=4, steps=1, warmup=1, rounds=1, caps=(256,))
    rows = {(r["method"], r["cap_bytes"]): r for r in res["rows"]}
    assert set(rows) == {("no_comm", None), ("torch_ddp", None), ("naive", None), ("bucketed", 256)}
    assert res["grad_bytes"] == 4 * 2 * (16 * 16 + 16)
    for r in rows.values():
        assert r["median_s"] > 0
        assert len(r["round_medians_s"]) == 1 and r["round_medians_s"][0] >= r["min_s"]
        if r["predicted_calls"] is not None:
            assert (r["calls"], r["bytes"]) == (r["predicted_calls"], res["grad_bytes"])
