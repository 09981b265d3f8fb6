"""Grading harnesses for the lab's "complete training script" exercises (CH26-24).

Each check runs the student's function the way the reference script (`solutions_lib.dist.train`)
would, compares with the reference, and raises `GradingError` with a message a student can act
on. The distributed checks run on a rank (call them from a function given to `launch_graded`);
the student's code runs inside ``no_delegation(task, *forbidden)``.
"""
from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..grading import GradingError, expect_close, expect_equal, expect_true, no_delegation
from .gpt import GPT
from .train import ShardedBatches, TrainConfig, WindowDataset, make_scheduler

__all__ = ["check_rank_batches", "check_resume", "check_log_step"]


# ---------------------------------------------------------------- (b) data iterator


def check_rank_batches(make, n_samples: int, world_size: int, local_batch: int, seed: int,
                       epochs: int = 3, forbidden: tuple = ()) -> None:
    """`make(n_samples, rank, world_size, local_batch, seed)` -> object with next_indices(),
    state_dict(), load_state_dict(), batches_per_epoch. Checked against ShardedBatches."""
    ds = WindowDataset(torch.zeros(n_samples * 2 + 1, dtype=torch.long), 2)
    refs = [ShardedBatches(ds, r, world_size, local_batch, seed) for r in range(world_size)]
    per_epoch = refs[0].batches_per_epoch
    want = [[[ref.next_indices() for _ in range(per_epoch)] for _ in range(epochs)] for ref in refs]
    with no_delegation("the per-rank data iterator", *forbidden):
        its = [make(n_samples, r, world_size, local_batch, seed) for r in range(world_size)]
        got_per_epoch = [it.batches_per_epoch for it in its]
        got = [[[list(map(int, it.next_indices())) for _ in range(per_epoch)] for _ in range(epochs)] for it in its]
    expect_equal(int(got_per_epoch[0]), per_epoch, f"batches_per_epoch ({n_samples} samples, {world_size} ranks, "
                 f"local batch {local_batch})", hint="floor(floor(n / world) / local_batch): drop_last=True, "
                 "then only full batches.")
    kept = per_epoch * local_batch * world_size
    for e in range(epochs):
        flat = [i for r in range(world_size) for b in got[r][e] for i in b]
        expect_true(len(flat) == len(set(flat)) == kept and set(flat) <= set(range(n_samples)),
                    f"epoch {e}: the ranks' batches together should hold {kept} different samples "
                    f"(each sample once, none on two ranks); got {len(flat)} indices of which "
                    f"{len(set(flat))} distinct. Give each rank its own DistributedSampler(rank=...).")
        for r in range(world_size):
            for k, b in enumerate(got[r][e]):
                expect_equal(len(b), local_batch, f"size of rank {r}'s batch {k} in epoch {e}")
    if epochs > 1:
        expect_true(got[0][0] != got[0][1],
                    "rank 0 got the same batches in epoch 0 and epoch 1: call sampler.set_epoch(epoch) "
                    "before iterating over each new epoch, otherwise every epoch repeats the first order.")
    for r in range(world_size):
        for e in range(epochs):
            for k in range(per_epoch):
                if got[r][e][k] != want[r][e][k]:
                    raise GradingError(
                        f"rank {r}, epoch {e}, batch {k}: expected indices {want[r][e][k]}, got {got[r][e][k]}. "
                        "Use DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=True, "
                        "seed=seed, drop_last=True), set_epoch(epoch) once per epoch, and cut its list into "
                        "consecutive chunks of local_batch.")
    # exact continuation from a mid-epoch state
    stop = per_epoch + max(1, per_epoch // 2)
    with no_delegation("the per-rank data iterator", *forbidden):
        a = make(n_samples, world_size - 1, world_size, local_batch, seed)
        for _ in range(stop):
            a.next_indices()
        state = a.state_dict()
        b = make(n_samples, world_size - 1, world_size, local_batch, seed)
        b.load_state_dict(state)
        cont_a = [list(map(int, a.next_indices())) for _ in range(per_epoch + 1)]
        cont_b = [list(map(int, b.next_indices())) for _ in range(per_epoch + 1)]
    expect_true(cont_a == cont_b, f"a fresh iterator given state_dict() {state!r} (taken after {stop} batches) "
                "does not continue with the same batches as the original: the state must hold the epoch and "
                "the number of batches already taken from it.")


# ---------------------------------------------------------------- (c) resume


def _tiny_setup(seed: int, rank: int, world_size: int, steps: int, local_batch: int, model_seed: int):
    cfg = TrainConfig(steps=steps, world_size=world_size, local_batch=local_batch, base_batch=local_batch,
                      lr=1e-2, warmup=2, seq_len=16, layers=1, d_model=16, heads=2)
    g = torch.Generator().manual_seed(seed)
    # 3 batches per epoch and rank: a run of ~10 steps crosses epochs, a split lands mid-epoch
    tokens = torch.randint(0, 13, ((3 * local_batch + 1) * world_size * cfg.seq_len + 1,), generator=g)
    torch.manual_seed(model_seed)
    model = GPT(13, cfg.seq_len, cfg.layers, cfg.d_model, cfg.heads)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=cfg.peak_lr, weight_decay=0.1)
    sched = make_scheduler(opt, cfg)
    batches = ShardedBatches(WindowDataset(tokens, cfg.seq_len), rank, world_size, local_batch, seed)
    return model, ddp, opt, sched, batches


def _steps(ddp, opt, sched, batches, n):
    """Training that draws from all three RNG streams: token dropout (torch), a loss jitter
    (python random and numpy). A resume that forgets one of them changes the losses."""
    losses = []
    for _ in range(n):
        x, y = next(batches)
        x = torch.where(torch.rand(x.shape) < 0.1, torch.zeros_like(x), x)
        jitter = 1.0 + 0.01 * random.random() + 0.01 * float(np.random.random())
        opt.zero_grad(set_to_none=True)
        logits = ddp(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)) * jitter
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def _seed_all(s: int) -> None:
    torch.manual_seed(s)
    random.seed(s)
    np.random.seed(s)


def check_resume(rank: int, world_size: int, save_state, load_state, directory, seed: int, steps: int = 10,
                 split: int = 4, local_batch: int = 3, forbidden: tuple = ()) -> None:
    """Run on every rank. Straight run of `steps` vs `split` steps, ``save_state``, fresh objects
    (other initial weights, scrambled RNG), ``load_state``, the rest: losses must be == and the
    final parameters equal."""
    path = Path(directory) / "ckpt"
    model, ddp, opt, sched, batches = _tiny_setup(seed, rank, world_size, steps, local_batch, seed)
    _seed_all(seed + 100 + rank)
    straight = _steps(ddp, opt, sched, batches, steps)
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}

    model, ddp, opt, sched, batches = _tiny_setup(seed, rank, world_size, steps, local_batch, seed)
    _seed_all(seed + 100 + rank)
    first = _steps(ddp, opt, sched, batches, split)
    data_state = batches.state_dict()
    with no_delegation("saving the training state", *forbidden):
        save_state(str(path), split, ddp, opt, sched, batches)
    dist.barrier()
    expect_true((path / ".metadata").exists(),
                f"no DCP checkpoint at {path}: save_state must call torch.distributed.checkpoint.save "
                "with checkpoint_id=path (the .metadata file is missing).")
    leftovers = [p.name for p in path.parent.iterdir() if p.name != path.name]
    expect_true(not leftovers, f"after save_state the directory holds {leftovers} besides the checkpoint: "
                "write into a temporary directory and rename it to `path` once every rank is done.")

    model, ddp, opt, sched, batches = _tiny_setup(seed, rank, world_size, steps, local_batch, seed + 1)
    _seed_all(seed + 999)
    with no_delegation("restoring the training state", *forbidden):
        step = load_state(str(path), ddp, opt, sched, batches)
    expect_equal(int(step) if step is not None else step, split, "the step returned by load_state")
    expect_equal(batches.state_dict(), data_state, "data position (epoch, batches taken) after load_state",
                 hint="save batches.state_dict() and give it back with batches.load_state_dict().")
    second = _steps(ddp, opt, sched, batches, steps - split)
    got = first + second
    for i, (a, b) in enumerate(zip(straight, got)):
        if a != b:
            where = "before the checkpoint" if i < split else f"{i - split + 1} step(s) after the resume"
            raise GradingError(
                f"loss of step {i} ({where}) is {b!r}, the uninterrupted run had {a!r}. A bit-exact "
                "resume restores model and optimizer (DCP + get_state_dict/set_state_dict), the scheduler, the "
                "data position, and every RNG stream of this rank: torch, python random and numpy.")
    for k, v in model.state_dict().items():
        expect_true(torch.equal(v, final[k]), f"parameter {k!r} differs from the uninterrupted "
                    "run's although every loss matched.")


# ---------------------------------------------------------------- (d) logging


def check_log_step(rank: int, world_size: int, log_step, directory, seed: int, steps: int = 4,
                   forbidden: tuple = ()) -> None:
    """Run on every rank: ``log_step(rank, world_size, out_dir, step, loss, lr, tokens_per_s)``."""
    g = torch.Generator().manual_seed(seed)
    all_losses = torch.rand(steps, world_size, generator=g, dtype=torch.float64) * 3 + 1
    out = Path(directory)
    buf = io.StringIO()
    with no_delegation("rank-0 logging", *forbidden), contextlib.redirect_stdout(buf):
        got = [log_step(rank, world_size, str(out), s, all_losses[s, rank].clone(), 1e-3 * (s + 1), 1000.0 + s)
               for s in range(steps)]
    for s, g_ in enumerate(got):
        expect_close(float(g_), float(all_losses[s].mean()), f"the loss log_step returns at step {s}",
                     rtol=1e-9, hint="every rank takes part in one all_reduce(SUM) and divides by world_size "
                     "(gloo has no AVG); calling the collective on rank 0 alone hangs the job.")
    printed = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    if rank == 0:
        expect_equal(len(printed), steps, "lines rank 0 printed (one per step)")
    else:
        expect_true(not printed, f"rank {rank} printed {printed[:2]}: only rank 0 may print.")
    dist.barrier()
    metrics = out / "metrics.jsonl"
    expect_true(metrics.exists(), f"{metrics} was not written: rank 0 appends one JSON line per step there.")
    lines = [ln for ln in metrics.read_text().splitlines() if ln.strip()]
    expect_equal(len(lines), steps, f"records in metrics.jsonl after {steps} steps on {world_size} ranks",
                 hint="twice as many means every rank wrote; only rank 0 may.")
    for s, ln in enumerate(lines):
        rec = json.loads(ln)
        expect_equal(sorted(rec), ["loss", "lr", "step", "tokens_per_s"], f"keys of record {s}")
        expect_equal(rec["step"], s, f"step of record {s}")
        expect_close(rec["loss"], float(all_losses[s].mean()), f"loss of record {s} (the mean over ranks)", rtol=1e-9)
        expect_close(rec["lr"], 1e-3 * (s + 1), f"lr of record {s}", rtol=1e-12)
