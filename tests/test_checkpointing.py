"""solutions_lib.checkpointing against independent oracles: brute-force minimisation of the
wasted-time models, a Monte Carlo simulation of failures, the seed's overhead numbers, and a
bit-exact interrupted-vs-uninterrupted training run; plus atomicity, corruption and async
snapshot safety of CheckpointManager."""
import math
import os
import random
import warnings

import numpy as np
import pytest
import torch

from solutions_lib import checkpointing as C

torch.set_num_threads(1)


# ---------------------------------------------------------------- intervals


def test_seed_overhead_numbers():
    got = [C.checkpoint_overhead(180.0, k, 2.0) for k in (100, 500, 1000, 5000)]
    assert [round(100 * g, 2) for g in got] == [47.37, 15.25, 8.26, 1.77]


@pytest.mark.parametrize("c,m", [(60.0, 86400.0), (180.0, 4 * 3600.0), (5.0, 600.0)])
def test_young_minimises_first_order_waste(c, m):
    taus = np.linspace(1.0, 20 * math.sqrt(2 * c * m), 400001)
    waste = c / taus + taus / (2 * m)
    assert C.young_interval(c, m) == pytest.approx(taus[np.argmin(waste)], rel=1e-3)
    assert C.first_order_waste(C.young_interval(c, m), c, m) == pytest.approx(waste.min(), rel=1e-6)


@pytest.mark.parametrize("c,m", [(60.0, 86400.0), (180.0, 4 * 3600.0), (300.0, 3600.0), (5.0, 600.0)])
def test_daly_close_to_exact_optimum(c, m):
    taus = np.linspace(1.0, 5 * m, 500001)
    wall = m * np.expm1((taus + c) / m) / taus
    best = taus[np.argmin(wall)]
    assert C.daly_interval(c, m) == pytest.approx(best, rel=0.01)
    # Daly's is nearer the exact optimum than Young's
    assert abs(C.daly_interval(c, m) - best) < abs(C.young_interval(c, m) - best)
    assert C.daly_interval(3.0, 1.0) == 1.0  # C >= 2M


def test_expected_wall_time_against_simulation():
    rng = np.random.default_rng(0)
    work, tau, c, m = 2000.0, 100.0, 10.0, 500.0
    runs = []
    for _ in range(4000):
        t, done = 0.0, 0.0
        while done < work:
            seg = min(tau, work - done) + c
            fail = rng.exponential(m)
            if fail >= seg:
                t, done = t + seg, done + seg - c
            else:
                t += fail
        runs.append(t)
    assert np.mean(runs) == pytest.approx(C.expected_wall_time(work, tau, c, m), rel=0.03)


def test_adaptive_and_io():
    h = C.hazard_from_probability(0.05, 3600.0)
    assert h == pytest.approx(-math.log(0.95) / 3600)
    lo, hi = C.adaptive_interval(60.0, C.hazard_from_probability(0.01, 3600)), C.adaptive_interval(60.0, h)
    assert hi < lo  # more risk, more frequent checkpoints
    assert C.adaptive_interval(60.0, 1e-4) == pytest.approx(math.sqrt(2 * 60 * 1e4))
    assert C.adaptive_interval(60.0, 1.0, min_seconds=120.0) == 120.0
    assert C.io_seconds(15e9, 1e9) == 15.0 and C.io_seconds(15e9, 200e6) == 75.0
    assert C.io_seconds(15e9, 3e9, writers=8) == pytest.approx(0.625)
    assert C.expected_lost_work(600.0, 3600.0, 36000.0) == 3000.0
    for bad in (lambda: C.young_interval(-1, 10), lambda: C.daly_interval(1, 0),
                lambda: C.checkpoint_overhead(1, 0, 1), lambda: C.hazard_from_probability(1.0, 10),
                lambda: C.adaptive_interval(1, 0), lambda: C.io_seconds(1, 1, writers=0)):
        with pytest.raises(ValueError):
            bad()


# ---------------------------------------------------------------- manager: resume bit for bit


class Data:
    """A shuffled stream of mini-batches drawn with its own torch.Generator; its state is
    (generator state, current permutation, position)."""

    def __init__(self, x, y, batch, seed):
        self.x, self.y, self.batch = x, y, batch
        self.gen = torch.Generator().manual_seed(seed)
        self.perm, self.pos = torch.randperm(len(x), generator=self.gen), 0

    def next(self):
        if self.pos + self.batch > len(self.perm):
            self.perm, self.pos = torch.randperm(len(self.x), generator=self.gen), 0
        idx = self.perm[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return self.x[idx], self.y[idx]

    def state(self):
        return {"gen": self.gen.get_state(), "perm": self.perm.clone(), "pos": self.pos}

    def load(self, s):
        self.gen.set_state(s["gen"])
        self.perm, self.pos = s["perm"].clone(), s["pos"]


def _setup(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 5) * 0.5 * (1 + math.cos(math.pi * min(s, 30) / 30)))
    g = torch.Generator().manual_seed(123)
    x = torch.randn(40, 6, generator=g)
    data = Data(x, x.sum(1, keepdim=True), 8, seed=seed + 1)
    return model, opt, sched, data


def _train(model, opt, sched, data, steps):
    losses = []
    for _ in range(steps):
        xb, yb = data.next()
        xb = xb + 0.01 * torch.randn_like(xb) + 0.01 * float(np.random.rand()) + 0.01 * random.random()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("async_save", [False, True])
def test_resume_is_bit_exact(tmp_path, async_save):
    random.seed(0); np.random.seed(0)
    full = _train(*_setup(0), 20)
    random.seed(0); np.random.seed(0)
    model, opt, sched, data = _setup(0)
    first = _train(model, opt, sched, data, 8)
    with C.CheckpointManager(tmp_path, keep_last=2, async_save=async_save) as mgr:
        mgr.save(8, model, opt, sched, extra={"data": data.state()})
    # clobber every RNG and build fresh objects: only the checkpoint can restore them
    random.seed(99); np.random.seed(99); torch.manual_seed(99)
    model, opt, sched, data = _setup(5)
    info = C.CheckpointManager(tmp_path).load(model, opt, sched)
    data.load(info["extra"]["data"])
    assert info["step"] == 8
    assert first + _train(model, opt, sched, data, 12) == full


def test_missing_rng_breaks_resume(tmp_path):
    # the oracle is sensitive: without the RNG restore the dropout masks differ
    random.seed(0); np.random.seed(0)
    full = _train(*_setup(0), 12)
    random.seed(0); np.random.seed(0)
    model, opt, sched, data = _setup(0)
    first = _train(model, opt, sched, data, 6)
    mgr = C.CheckpointManager(tmp_path)
    mgr.save(6, model, opt, sched, extra={"data": data.state()})
    torch.manual_seed(99)
    model, opt, sched, data = _setup(5)
    data.load(mgr.load(model, opt, sched, restore_rng=False)["extra"]["data"])
    assert first + _train(model, opt, sched, data, 6) != full


def test_async_snapshot_is_taken_before_return(tmp_path, monkeypatch):
    model = torch.nn.Linear(200, 200)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    real_write = C.write_checkpoint_file
    gate = __import__("threading").Event()

    def slow_write(path, state):
        gate.wait(5)  # the write cannot start until the weights have been mutated
        real_write(path, state)
    monkeypatch.setattr(C, "write_checkpoint_file", slow_write)
    mgr = C.CheckpointManager(tmp_path, async_save=True)
    mgr.save(1, model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    gate.set()
    mgr.wait()
    fresh = torch.nn.Linear(200, 200)
    mgr.load(fresh)
    for k, v in fresh.state_dict().items():
        assert torch.equal(v, before[k])


def test_keep_last_k(tmp_path):
    mgr = C.CheckpointManager(tmp_path, keep_last=3)
    model = torch.nn.Linear(2, 2)
    for s in range(0, 60, 10):
        mgr.save(s, model)
    assert [os.path.basename(p) for p in mgr.checkpoints()] == [f"ckpt_{s:09d}.pt" for s in (30, 40, 50)]
    assert mgr.latest().endswith("ckpt_000000050.pt")
    with pytest.raises(ValueError):
        C.CheckpointManager(tmp_path, keep_last=0)


def test_crash_mid_write_keeps_previous(tmp_path, monkeypatch):
    model = torch.nn.Linear(3, 3)
    mgr = C.CheckpointManager(tmp_path)
    mgr.save(1, model)
    good = {k: v.clone() for k, v in model.state_dict().items()}

    def crash(fd):
        raise OSError("power cut")
    monkeypatch.setattr(os, "fsync", crash)
    with torch.no_grad():
        model.weight.add_(5)
    with pytest.raises(OSError):
        mgr.save(2, model)
    monkeypatch.undo()
    # a killed process would also leave a partial temp file behind
    (tmp_path / ".tmp-abc.part").write_bytes(b"LLMCKPT1 half a file")
    assert mgr.latest().endswith("ckpt_000000001.pt")
    fresh = torch.nn.Linear(3, 3)
    assert mgr.load(fresh)["step"] == 1
    assert all(torch.equal(v, good[k]) for k, v in fresh.state_dict().items())


def test_corruption_detected(tmp_path):
    model = torch.nn.Linear(4, 4)
    mgr = C.CheckpointManager(tmp_path, keep_last=5)
    mgr.save(1, model)
    p2 = mgr.save(2, model)
    raw = bytearray(open(p2, "rb").read())
    raw[len(raw) // 2] ^= 0xFF
    open(p2, "wb").write(bytes(raw))
    with pytest.raises(ValueError, match="corrupt"):
        C.read_checkpoint_file(p2)
    with pytest.raises(ValueError, match=os.path.basename(p2)):
        mgr.load(torch.nn.Linear(4, 4), path=p2)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert mgr.latest().endswith("ckpt_000000001.pt")
    assert any("skipping" in str(x.message) for x in w)
    p1 = mgr.path_for(1)
    open(p1, "wb").write(open(p1, "rb").read()[:-10])
    with pytest.raises(ValueError, match="truncated"):
        C.read_checkpoint_file(p1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert mgr.latest() is None
        with pytest.raises(FileNotFoundError):
            mgr.load(torch.nn.Linear(4, 4))
