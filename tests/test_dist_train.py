"""The complete DDP training script (solutions_lib.dist.train): resume, scaling, logging, data order."""
import json
import math
import subprocess
import sys

import pytest
import torch

from solutions_lib.dist.gpt import GPT
from solutions_lib.dist.train import (TrainConfig, ShardedBatches, WindowDataset, lr_at, list_checkpoints,
                                      make_scheduler, parse_args, train, train_step)
from solutions_lib.schedules import scale_lr, warmup_cosine

TINY = dict(steps=40, base_batch=8, seq_len=32, layers=2, d_model=32, heads=2, max_chars=6000, warmup=5,
            lr=3e-3, progress=False, threads=1, return_params=True, timeout=120.0)
GLOBAL = 8
HALF = 20


def _cfg(tmp, name, world, **kw):
    return TrainConfig(world_size=world, local_batch=GLOBAL // world, out=str(tmp / name), **{**TINY, **kw})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Straight 40-step runs on 1, 2, 4 ranks and 20 + resume + 20 on 1 and 2 ranks (same global batch 8)."""
    tmp = tmp_path_factory.mktemp("train")
    out = {}
    for w in (1, 2):
        out[w] = train(_cfg(tmp, f"straight{w}", w, checkpoint_every=10, keep_last=2), all_ranks=True)
        first = train(_cfg(tmp, f"split{w}", w, stop_after=HALF))
        second = train(_cfg(tmp, f"split{w}", w, resume=True))
        out[("split", w)] = (first, second)
    out[4] = train(_cfg(tmp, "straight4", 4, return_params=False), all_ranks=True)
    out["tmp"] = tmp
    return out


@pytest.mark.parametrize("world", [1, 2])
def test_resume_is_bit_exact(runs, world):
    straight = runs[world][0]
    first, second = runs[("split", world)]
    assert first["steps"] == list(range(HALF)) and second["steps"] == list(range(HALF, TINY["steps"]))
    assert second["start_step"] == HALF
    assert straight["losses"] == first["losses"] + second["losses"], "resumed losses differ from the straight run"
    for name, p in straight["params"].items():
        assert torch.equal(p, second["params"][name]), f"parameter {name} differs after resume"
    # the data position went through an epoch boundary (23 steps per epoch here) after the resume
    assert straight["data_state"] == second["data_state"] == {"epoch": 1, "position": 40 - 23}


def test_final_loss_same_across_1_2_4_ranks(runs):
    finals = {w: runs[w][0]["final_loss_avg5"] for w in (1, 2, 4)}
    lo, hi = min(finals.values()), max(finals.values())
    assert (hi - lo) / lo < 0.02, f"final losses {finals} spread more than 2%"
    first_loss = runs[1][0]["losses"][0]
    assert finals[1] < first_loss - 0.5, "the tiny model did not learn"
    # same global batch => same samples per step: the first losses agree to float rounding
    for w in (2, 4):
        assert math.isclose(runs[w][0]["losses"][0], first_loss, rel_tol=1e-5)


def test_only_rank0_logs(runs):
    ranks = runs[2]
    assert ranks[0]["log_lines"] >= 2 and ranks[1]["log_lines"] == 0
    assert all(r["log_lines"] == 0 for r in runs[4][1:])
    out = runs["tmp"] / "straight2"
    recs = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == list(range(TINY["steps"])), "one metrics record per step, written once"
    assert set(recs[0]) == {"step", "loss", "lr", "tokens_per_s", "elapsed_s"}
    assert [r["loss"] for r in recs] == ranks[0]["losses"]
    assert (out / "loss.png").stat().st_size > 1000
    # the resumed run appended to the interrupted run's metrics: still one record per step
    split = [json.loads(ln)["step"] for ln in (runs["tmp"] / "split2" / "metrics.jsonl").read_text().splitlines()]
    assert split == list(range(TINY["steps"]))


def test_checkpoints_at_interval_and_pruned(runs):
    kept = list_checkpoints(runs["tmp"] / "straight1" / "checkpoints")
    assert [p.name for p in kept] == ["step_00000030", "step_00000040"]  # 10, 20 pruned (keep_last=2)
    names = {p.name for p in kept[-1].iterdir()}
    assert ".metadata" in names and "extra_rank0.pt" in names
    assert not [p for p in (runs["tmp"] / "straight1" / "checkpoints").iterdir() if p.name.startswith(".tmp")]
    both = {p.name for p in list_checkpoints(runs["tmp"] / "straight2" / "checkpoints")[-1].iterdir()}
    assert {"extra_rank0.pt", "extra_rank1.pt"} <= both


def test_lr_schedule_is_warmup_cosine_with_linear_scaling(runs):
    cfg = TrainConfig(steps=30, warmup=4, lr=1e-3, base_batch=8, local_batch=8, world_size=2, min_lr_ratio=0.1)
    peak = scale_lr(1e-3, 8, 16)
    assert cfg.peak_lr == pytest.approx(2e-3) and peak == pytest.approx(2e-3)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.peak_lr)
    sched = make_scheduler(opt, cfg)
    for s in range(cfg.steps):
        want = warmup_cosine(s, peak, 4, 30, 0.1 * peak)
        assert opt.param_groups[0]["lr"] == pytest.approx(want, rel=1e-12, abs=1e-15)
        assert lr_at(s, cfg) == pytest.approx(want, rel=1e-12)
        opt.step()
        sched.step()
    run = runs[2][0]
    for s, lr in zip(run["steps"], run["lrs"]):
        assert lr == pytest.approx(warmup_cosine(s, 3e-3, 5, 40, 3e-4), rel=1e-12, abs=1e-15)



def test_inline_schedule_is_bitwise_the_course_schedule():
    """train.py computes the peak and the schedule inline (it must run where the answers are withheld)."""
    for lr, base, local, world, warm, steps, ratio in [(3e-4, 256, 128, 8, 100, 1000, 0.1), (1e-3, 8, 8, 2, 4, 30, 0.0),
                                                       (7e-5, 24, 5, 3, 0, 17, 0.37), (2e-3, 16, 4, 4, 9, 10, 1.0)]:
        cfg = TrainConfig(steps=steps, warmup=warm, lr=lr, base_batch=base, local_batch=local, world_size=world,
                          min_lr_ratio=ratio)
        peak = scale_lr(lr, base, local * world)
        assert cfg.peak_lr == peak
        assert [lr_at(s, cfg) for s in range(steps + 3)] == [warmup_cosine(s, peak, warm, steps, ratio * peak)
                                                            for s in range(steps + 3)]


def _indices_by_rank(n, world, local, seed, epochs):
    ds = WindowDataset(torch.arange(n * 4 + 1), 4)
    its = [ShardedBatches(ds, r, world, local, seed) for r in range(world)]
    per_epoch = its[0].batches_per_epoch
    return [[[it.next_indices() for _ in range(per_epoch)] for _ in range(epochs)] for it in its]


def test_sampler_covers_each_sample_once_and_reshuffles():
    world, local, n = 3, 4, 60  # 60 = 3 ranks * 4 * 5 steps: nothing dropped
    got = _indices_by_rank(n, world, local, seed=7, epochs=3)
    orders = []
    for e in range(3):
        flat = [i for r in range(world) for b in got[r][e] for i in b]
        assert sorted(flat) == list(range(n)), f"epoch {e}: not every sample exactly once across ranks"
        for r in range(world):
            for q in range(r + 1, world):
                assert not set(sum(got[r][e], [])) & set(sum(got[q][e], [])), "ranks overlap"
        # global order: step k of rank r; the union per step is a slice of the epoch's permutation
        orders.append([i for k in range(len(got[0][e])) for r in range(world) for i in got[r][e][k]])
    assert orders[0] != orders[1] != orders[2], "the order must change every epoch (set_epoch)"
    # the pitfall it guards against: a DistributedSampler never told the epoch repeats itself
    s = torch.utils.data.DistributedSampler(list(range(n)), num_replicas=world, rank=0, shuffle=True, seed=7)
    assert list(s) == list(s)


def test_sampler_state_continues_exactly():
    ds = WindowDataset(torch.arange(50 * 4 + 1), 4)
    a = ShardedBatches(ds, 1, 2, 3, seed=5)
    for _ in range(11):  # 8 batches per epoch: stop mid-epoch 1
        a.next_indices()
    state = a.state_dict()
    assert state == {"epoch": 1, "position": 3}
    b = ShardedBatches(ds, 1, 2, 3, seed=5)
    b.load_state_dict(state)
    for _ in range(12):
        assert a.next_indices() == b.next_indices()
    x, y = next(b)
    assert x.shape == y.shape == (3, 4) and torch.equal(x[:, 1:], y[:, :-1])


def test_fp16_grad_scaler_skips_a_step_with_inf_gradient():
    torch.manual_seed(0)
    model = GPT(vocab=11, seq_len=8, layers=1, d_model=16, heads=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    x = torch.randint(0, 11, (4, 8))
    y = torch.randint(0, 11, (4, 8))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    hook = model.tok.weight.register_hook(lambda g: g * float("inf"))
    train_step(model, opt, x, y, amp="fp16", scaler=scaler, grad_clip=1.0)
    hook.remove()
    assert scaler.get_scale() == 2.0 ** 11, "an inf gradient must halve the scale"
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), f"{k} changed although the step should have been skipped"
    loss = train_step(model, opt, x, y, amp="fp16", scaler=scaler, grad_clip=1.0)
    assert torch.isfinite(loss) and not torch.equal(model.tok.weight, before["tok.weight"])


def test_bad_config_raises():
    with pytest.raises(ValueError, match="local_batch"):
        TrainConfig(local_batch=0).validate()
    with pytest.raises(ValueError, match="amp"):
        TrainConfig(amp="fp8").validate()
    with pytest.raises(ValueError, match="warmup"):
        TrainConfig(steps=10, warmup=10).validate()
    with pytest.raises(ValueError, match="multiple"):
        TrainConfig(d_model=30, heads=4).validate()
    with pytest.raises(ValueError):
        train(TrainConfig(world_size=0))
    with pytest.raises(ValueError, match="compile"):
        TrainConfig(world_size=2, tp=2, compile=True).validate()
    with pytest.raises(ValueError, match="compile"):
        TrainConfig(compile=1).validate()
    assert parse_args(["--compile"]).compile and not parse_args([]).compile
    for argv in (["--amp", "fp8"], ["--local-batch", "0"], ["--steps", "x"]):
        with pytest.raises(SystemExit):
            parse_args(argv)
    cfg = parse_args(["--world-size", "2", "--local-batch", "4", "--amp", "bf16", "--resume"])
    assert (cfg.world_size, cfg.global_batch, cfg.amp, cfg.resume) == (2, 8, "bf16", True)


def test_cli_runs_two_ranks(tmp_path):
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "solutions_lib.dist.train", "--world-size", "2", "--local-batch", "2",
           "--steps", "6", "--warmup", "1", "--seq-len", "16", "--d-model", "16", "--heads", "2",
           "--layers", "1", "--max-chars", "3000", "--out", str(out), "--no-progress", "--threads", "1",
           "--peak-flops", "1e11"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "RuntimeWarning" not in p.stderr, p.stderr[-2000:]  # e.g. the package importing the script module
    assert p.stdout.count("done:") == 1 and p.stdout.count("world 2") == 1, p.stdout  # rank 0 only
    assert "MFU" in p.stdout
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 6
    assert [c.name for c in list_checkpoints(out / "checkpoints")] == ["step_00000006"]


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs (NCCL)")
def test_nccl_bf16_resume(tmp_path):
    kw = dict(backend="nccl", amp="bf16", return_params=True)
    straight = train(_cfg(tmp_path, "a", 2, **kw))
    first = train(_cfg(tmp_path, "b", 2, stop_after=HALF, **kw))
    second = train(_cfg(tmp_path, "b", 2, resume=True, **kw))
    assert straight["losses"] == first["losses"] + second["losses"]
