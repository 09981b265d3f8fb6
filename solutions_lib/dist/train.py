"""A complete data-parallel training script: a character-level GPT trained with torch's DDP.

    python -m solutions_lib.dist.train --world-size 2 --steps 200 --out runs/demo
    python -m solutions_lib.dist.train --world-size 4 --tp 2 --pp 2 --steps 200 --out runs/tp_pp
    python -m solutions_lib.dist.train --world-size 4 --tp 2 --sp --pp 2 --virtual-stages 2 --layers 4 --out runs/3d
    torchrun --standalone --nproc-per-node 2 -m solutions_lib.dist.train --steps 200 --out runs/demo

What a production script needs, each in a small function that the lab's exercises rebuild:

* config: `TrainConfig` (a dataclass, validated: a bad value raises ValueError) and `parse_args`;
* process group: spawned locally with `solutions_lib.dist.launch` (gloo on CPU, NCCL with GPUs),
  or joined from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT);
  destroyed on exit, also after an error;
* data: fixed-length windows over the token stream, one shard per rank from
  `DistributedSampler(shuffle=True, seed=...)` with ``set_epoch(epoch)`` at every epoch;
  the position (epoch, batches consumed) is checkpointed, so a resume continues mid-epoch;
* schedule: linear warmup + cosine decay (`solutions_lib.schedules.warmup_cosine`) of a peak
  LR scaled linearly with the global batch (`scale_lr`: lr = base_lr * global / base_batch);
* mixed precision: ``--amp bf16`` (autocast) or ``--amp fp16`` (autocast + GradScaler); both
  run on CPU in torch >= 2.3 (slowly: CPU autocast is for correctness, not speed);
* checkpoints: `torch.distributed.checkpoint` for model and optimizer, plus scheduler,
  GradScaler, step, data position, elapsed time and every RNG stream per rank; written to a
  temp directory and renamed (atomic), the last `keep_last` kept. Resume is bit-exact: a run
  of 2N steps and a run of N steps + resume + N steps give == losses and equal parameters
  (same world size and thread count; a resume with another world size at the same global
  batch continues the same data order but not bit-exactly);
* logging: rank 0 only (stdout, ``metrics.jsonl``, a text progress bar, ``loss.png`` and a
  summary with tokens/s, on a GPU the peak allocated CUDA memory and, given ``--peak-flops``,
  MFU). Other ranks print nothing;
* layouts: ``--tp T --pp P [--micro-batches M]`` on world = dp x tp x pp ranks (`train_layout.py`):
  Megatron-style tensor parallelism inside groups of T ranks (`tensor_parallel.TensorParallelBlock`),
  P pipeline stages run by 1F1B over M micro-batches (`pipeline.run_1f1b`, M defaults to P),
  gradients averaged over the DP group only; the batch is split over the DP dimension only, so
  the loss curve is the one-process run's (to float rounding). Each rank checkpoints its own
  shard; a resume needs the same layout (another raises ValueError). fp16 is DP-only;
  ``--sp`` (needs T >= 2, seq_len divisible by T, no --amp) adds sequence parallelism to the TP blocks
  (Korthikanti et al. 2022): the activations between them are split along the sequence;
  ``--virtual-stages v`` (needs P >= 2, M a multiple of P, layers divisible by P v) runs the
  interleaved 1F1B schedule with v model chunks per pipeline rank (`pipeline.run_interleaved`);
* determinism on a GPU: ``--deterministic`` (the default) switches torch's deterministic
  algorithms on in each CUDA rank (SDPA's flash and memory-efficient backward otherwise add
  with atomics, so two identical runs differ in the last bits and a resume is not bit-exact);
  ``--no-deterministic`` trades that for speed. CPU ranks are deterministic either way;
* speed on a GPU: ``--compile`` runs each transformer block through ``torch.compile`` (in place,
  so checkpoints keep their names; DDP runs only), and AdamW is ``fused`` on CUDA.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import importlib.util
import json
import math

from ..schedules import _kit_warmup_cosine
import os
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import Dataset, DistributedSampler

from solutions_lib.checkpointing import rng_state, set_rng_state

from .gpt import GPT, non_embedding_params

__all__ = ["TrainConfig", "parse_args", "train", "main", "CharCorpus", "WindowDataset",
           "ShardedBatches", "lr_at", "make_scheduler", "train_step", "save_checkpoint",
           "load_checkpoint", "latest_checkpoint", "list_checkpoints", "default_corpus_text",
           "DEFAULT_CORPUS_MODULES", "AMP_MODES", "in_torchrun", "saved_layout", "check_resume_layout"]

AMP_MODES = ("none", "bf16", "fp16")
DEFAULT_CORPUS_MODULES = ("argparse", "textwrap", "string", "heapq", "bisect", "functools",
                          "dataclasses", "json.decoder", "json.encoder", "fractions")
_TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


# ---------------------------------------------------------------- configuration


@dataclass
class TrainConfig:
    """Every knob of a run. Batches count sequences; `lr` is tuned for a global batch `base_batch`."""
    steps: int = 300
    world_size: int = 1
    local_batch: int = 8
    base_batch: int = 8
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: int = 20
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seq_len: int = 64
    layers: int = 2
    d_model: int = 64
    heads: int = 4
    amp: str = "none"
    checkpoint_every: int = 0          # 0: only at the end (and at --stop-after)
    keep_last: int = 2
    corpus: str | None = None          # None: source code of a few stdlib modules
    max_chars: int | None = None       # use only the first max_chars characters of the corpus
    out: str = "runs/train"
    resume: bool = False
    stop_after: int | None = None      # simulate an interruption: save and stop after this step count
    backend: str | None = None         # None: nccl with enough GPUs, else gloo
    seed: int = 0
    peak_flops: float | None = None    # per device, FLOP/s, for the MFU line of the summary
    progress: bool | None = None       # None: a progress bar when stderr is a terminal
    timeout: float = 600.0             # seconds: whole local run, and the process group's timeout
    threads: int | None = None         # torch threads per spawned rank (None: cores // world_size)
    return_params: bool = False        # put rank 0's final parameters into the result (tests)
    deterministic: bool = True         # CUDA ranks: torch deterministic algorithms (bit-exact resume)
    tp: int = 1                        # tensor-parallel ranks per group (train_layout.py)
    pp: int = 1                        # pipeline stages
    micro_batches: int | None = None   # per step and DP replica, run by 1F1B (None: pp)
    sp: bool = False                   # sequence parallelism in the TP blocks (needs tp >= 2)
    virtual_stages: int = 1            # model chunks per pipeline rank (> 1: interleaved 1F1B)
    compile: bool = False              # torch.compile each transformer block (plain DDP runs; speed only)

    @property
    def dp(self) -> int:
        """Data-parallel replicas: world_size / (tp * pp)."""
        return self.world_size // (self.tp * self.pp)

    @property
    def n_micro(self) -> int:
        return self.pp if self.micro_batches is None else self.micro_batches

    @property
    def layout_run(self) -> bool:
        """True when the run needs train_layout.py (TP, PP or micro-batches) rather than plain DDP."""
        return self.tp > 1 or self.pp > 1 or self.n_micro > 1

    @property
    def layout(self) -> dict:
        """What a checkpoint of this run records (and a resume must match): dp, tp, pp, sp, v."""
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "sp": self.sp, "virtual_stages": self.virtual_stages}

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: local_batch on each of the dp replicas (TP and PP ranks of
        one replica share its batch)."""
        return self.local_batch * self.dp

    @property
    def peak_lr(self) -> float:
        """Linear scaling rule (Goyal et al. 2017): base_lr * global_batch / base_batch."""
        # inline (batch_scaling.scale_lr, same operations): the script also runs where the course's
        # answers are withheld (course/withheld_view.py), e.g. in a graded notebook's ranks
        return float(self.lr) * (float(self.global_batch) / float(self.base_batch))

    def validate(self) -> "TrainConfig":
        def pos_int(name, minimum=1):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
        for name in ("steps", "world_size", "local_batch", "base_batch", "seq_len", "layers",
                     "d_model", "heads", "keep_last", "tp", "pp", "virtual_stages"):
            pos_int(name)
        for name in ("warmup", "checkpoint_every", "seed"):
            pos_int(name, 0)
        if self.warmup >= self.steps:
            raise ValueError(f"warmup={self.warmup} must be shorter than the run (steps={self.steps})")
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} must be a multiple of heads={self.heads}")
        for name in ("lr", "timeout"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        for name in ("weight_decay", "grad_clip"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a number >= 0 (0 switches it off), got {v!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio must lie in [0, 1], got {self.min_lr_ratio!r}")
        if self.amp not in AMP_MODES:
            raise ValueError(f"amp must be one of {AMP_MODES}, got {self.amp!r}")
        if self.backend not in (None, "gloo", "nccl"):
            raise ValueError(f"backend must be 'gloo' or 'nccl', got {self.backend!r}")
        if self.stop_after is not None and not (isinstance(self.stop_after, int) and 1 <= self.stop_after <= self.steps):
            raise ValueError(f"stop_after must be an int in [1, steps={self.steps}], got {self.stop_after!r}")
        if self.max_chars is not None and (not isinstance(self.max_chars, int) or self.max_chars < self.seq_len + 1):
            raise ValueError(f"max_chars must be an int >= seq_len + 1 = {self.seq_len + 1}, got {self.max_chars!r}")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"threads must be a positive int, got {self.threads!r}")
        if self.peak_flops is not None and not self.peak_flops > 0:
            raise ValueError(f"peak_flops must be positive FLOP/s, got {self.peak_flops!r}")
        if not isinstance(self.deterministic, bool):
            raise ValueError(f"deterministic must be True or False, got {self.deterministic!r}")
        if not isinstance(self.compile, bool):
            raise ValueError(f"compile must be True or False, got {self.compile!r}")
        if self.compile and self.layout_run:
            raise ValueError("compile=True compiles the blocks of the plain DDP run; it is not supported with "
                             "tp, pp or micro_batches > 1")
        self._validate_layout()
        if self.corpus is not None and not Path(self.corpus).is_file():
            raise ValueError(f"corpus {self.corpus!r} is not a file")
        return self

    def _validate_layout(self) -> None:
        m = self.micro_batches
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise ValueError(f"micro_batches must be an int >= 1 (or None: pp), got {m!r}")
        if self.world_size % (self.tp * self.pp):
            raise ValueError(f"world_size={self.world_size} must be a multiple of tp x pp = {self.tp} x {self.pp} "
                             f"(world = dp x tp x pp)")
        if self.heads % self.tp:
            raise ValueError(f"tp={self.tp} must divide heads={self.heads} (each TP rank takes whole heads)")
        if self.layers % self.pp:
            raise ValueError(f"pp={self.pp} must divide layers={self.layers} (equal pipeline stages)")
        if self.local_batch % self.n_micro:
            raise ValueError(f"micro_batches={self.n_micro} must divide local_batch={self.local_batch} "
                             f"(equal micro-batches)")
        if not isinstance(self.sp, bool):
            raise ValueError(f"sp must be True or False, got {self.sp!r}")
        if self.sp and self.tp < 2:
            raise ValueError(f"sp (sequence parallelism) splits the sequence over the TP ranks: it needs tp >= 2, "
                             f"got tp={self.tp}")
        if self.sp and self.seq_len % self.tp:
            raise ValueError(f"sp: the sequence length seq_len={self.seq_len} must be divisible by tp={self.tp} "
                             f"(each TP rank holds an equal sequence shard)")
        v = self.virtual_stages
        if v > 1 and self.pp < 2:
            raise ValueError(f"virtual_stages={v} (interleaved pipeline) needs pp >= 2, got pp={self.pp}")
        if v > 1 and self.n_micro % self.pp:
            raise ValueError(f"virtual_stages={v}: the interleaved schedule sends micro-batches through in groups "
                             f"of pp, so micro_batches={self.n_micro} must be a multiple of pp={self.pp}")
        if self.layers % (self.pp * v):
            raise ValueError(f"pp x virtual_stages = {self.pp} x {v} must divide layers={self.layers} "
                             f"(equal pipeline chunks)")
        if self.layout_run and self.amp == "fp16":
            raise ValueError("amp='fp16' (GradScaler) is not supported with tp, pp or micro_batches > 1; "
                             "use amp='bf16' or 'none'")


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m solutions_lib.dist.train",
                                description="Train a small character-level GPT with DDP (CPU gloo or GPU NCCL), "
                                            "optionally with tensor (--tp) and pipeline (--pp) parallelism.")
    d = TrainConfig()
    a = p.add_argument
    a("--steps", type=int, default=d.steps, help="optimizer steps of the whole run")
    a("--world-size", type=int, default=d.world_size,
      help="local ranks to spawn (ignored under torchrun, which sets WORLD_SIZE)")
    a("--local-batch", type=int, default=d.local_batch, help="sequences per DP replica per step")
    a("--base-batch", type=int, default=d.base_batch, help="global batch at which --lr was tuned")
    a("--lr", type=float, default=d.lr, help="peak LR at --base-batch; scaled linearly with the global batch")
    a("--min-lr-ratio", type=float, default=d.min_lr_ratio, help="final LR / peak LR of the cosine")
    a("--warmup", type=int, default=d.warmup, help="linear warmup steps")
    a("--weight-decay", type=float, default=d.weight_decay)
    a("--grad-clip", type=float, default=d.grad_clip, help="max global grad norm (0: off)")
    a("--seq-len", type=int, default=d.seq_len)
    a("--layers", type=int, default=d.layers)
    a("--d-model", type=int, default=d.d_model)
    a("--heads", type=int, default=d.heads)
    a("--amp", choices=AMP_MODES, default=d.amp, help="autocast dtype; fp16 adds a GradScaler")
    a("--checkpoint-every", type=int, default=d.checkpoint_every, help="steps between checkpoints (0: end only)")
    a("--keep-last", type=int, default=d.keep_last, help="checkpoints to keep")
    a("--corpus", default=d.corpus, help="a text file (default: source of a few Python stdlib modules)")
    a("--max-chars", type=int, default=d.max_chars, help="use only the first N characters of the corpus")
    a("--out", default=d.out, help="output directory: metrics.jsonl, loss.png, checkpoints/")
    a("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    a("--stop-after", type=int, default=d.stop_after, help="save a checkpoint and stop after this step (simulated failure)")
    a("--backend", choices=("gloo", "nccl"), default=d.backend)
    a("--seed", type=int, default=d.seed)
    a("--peak-flops", type=float, default=d.peak_flops, help="peak FLOP/s per device, for MFU")
    a("--progress", action=argparse.BooleanOptionalAction, default=d.progress, help="rank-0 progress bar")
    a("--threads", type=int, default=d.threads, help="torch threads per spawned rank")
    a("--timeout", type=float, default=d.timeout, help="seconds: run limit and collective timeout")
    a("--deterministic", action=argparse.BooleanOptionalAction, default=d.deterministic,
      help="GPU ranks: deterministic kernels, so runs and resumes are bit-exact (off: faster)")
    a("--compile", action=argparse.BooleanOptionalAction, default=d.compile,
      help="torch.compile each transformer block (DDP runs; fuses the norms, GELU and residual adds)")
    a("--tp", type=int, default=d.tp,
      help="tensor-parallel ranks per group (Megatron-style heads/MLP split); world = dp x tp x pp")
    a("--pp", type=int, default=d.pp, help="pipeline stages (1F1B schedule); must divide --layers")
    a("--micro-batches", type=int, default=d.micro_batches,
      help="micro-batches per step and DP replica (default: --pp); must divide --local-batch")
    a("--sp", action="store_true", default=d.sp,
      help="sequence parallelism in the TP blocks (needs --tp >= 2 dividing --seq-len)")
    a("--virtual-stages", type=int, default=d.virtual_stages,
      help="model chunks per pipeline rank: > 1 runs the interleaved 1F1B schedule "
           "(needs --pp >= 2, --micro-batches a multiple of --pp, --layers divisible by pp x v)")
    return p


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """Command line -> validated TrainConfig; a bad value exits with argparse's usage error."""
    parser = _build_parser()
    ns = parser.parse_args(argv)
    cfg = TrainConfig(**{k: v for k, v in vars(ns).items()})
    try:
        return cfg.validate()
    except ValueError as e:
        parser.error(str(e))


# ---------------------------------------------------------------- data


def default_corpus_text(modules=DEFAULT_CORPUS_MODULES) -> str:
    """The source code of a few stdlib modules: text every Python installation ships."""
    parts = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".py"):
            parts.append(Path(spec.origin).read_text(encoding="utf-8"))
    if not parts:
        raise RuntimeError("no stdlib source found for the default corpus; pass --corpus PATH")
    return "\n".join(parts)


class CharCorpus:
    """Characters -> token ids; the vocabulary is the sorted set of characters in the text."""

    def __init__(self, text: str):
        if len(text) < 2:
            raise ValueError("the corpus needs at least 2 characters")
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.tokens = torch.tensor([self.index[c] for c in text], dtype=torch.long)

    @property
    def vocab(self) -> int:
        return len(self.chars)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


class WindowDataset(Dataset):
    """Sample i: input tokens[i*T : i*T+T] and target tokens[i*T+1 : i*T+T+1] (T = seq_len)."""

    def __init__(self, tokens: torch.Tensor, seq_len: int):
        if seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        self.tokens, self.seq_len = tokens, seq_len
        self.n = (len(tokens) - 1) // seq_len
        if self.n < 1:
            raise ValueError(f"a corpus of {len(tokens)} tokens holds no window of {seq_len + 1}")

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        s = int(i) * self.seq_len
        w = self.tokens[s:s + self.seq_len + 1]
        return w[:-1], w[1:]


class ShardedBatches:
    """This rank's batches: DistributedSampler(shuffle, seed, drop_last) + set_epoch each epoch.

    State = (epoch, position): the epoch and the batches already taken from it. The union of
    the ranks' k-th batches is the same set of samples whatever the world size (rank r takes
    every W-th index of the epoch's permutation), so runs with equal global batch see the
    same data. `load_state_dict` continues exactly where `state_dict` was taken.
    """

    def __init__(self, dataset: Dataset, rank: int, world_size: int, local_batch: int, seed: int = 0):
        if local_batch < 1:
            raise ValueError(f"local_batch must be >= 1, got {local_batch}")
        self.dataset, self.local_batch = dataset, local_batch
        self.sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                          seed=seed, drop_last=True)
        self.batches_per_epoch = len(self.sampler) // local_batch
        if self.batches_per_epoch < 1:
            raise ValueError(f"{len(dataset)} samples give no full batch of {local_batch} on each of "
                             f"{world_size} ranks; use a longer corpus or a smaller batch")
        self.epoch, self.position, self._order, self._order_epoch = 0, 0, None, None

    def indices(self, epoch: int) -> list[int]:
        if self._order_epoch != epoch:
            self.sampler.set_epoch(epoch)  # forget this and every epoch repeats epoch 0's order
            self._order, self._order_epoch = list(self.sampler), epoch
        return self._order

    def next_indices(self) -> list[int]:
        if self.position == self.batches_per_epoch:
            self.epoch, self.position = self.epoch + 1, 0
        order = self.indices(self.epoch)
        b = self.local_batch
        out = order[self.position * b:(self.position + 1) * b]
        self.position += 1
        return out

    def __next__(self):
        xs, ys = zip(*(self.dataset[i] for i in self.next_indices()))
        return torch.stack(xs), torch.stack(ys)

    def __iter__(self):
        return self

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


# ---------------------------------------------------------------- schedule


def lr_at(step: int, cfg: TrainConfig) -> float:
    """LR of the 0-based optimizer step `step`: warmup_cosine around the linearly scaled peak."""
    peak = cfg.peak_lr
    return _warmup_cosine(step, peak, cfg.warmup, cfg.steps, cfg.min_lr_ratio * peak)


def _warmup_cosine(step: int, peak_lr: float, warmup_steps: int, total_steps: int, min_lr: float) -> float:
    """`solutions_lib.schedules.warmup_cosine` through the kit's copy (the answer itself is withheld
    where the course grades; course/withheld_view.py); tests/test_dist_train.py checks that they agree."""
    if step < 0 or warmup_steps >= total_steps:
        raise ValueError(f"need step >= 0 and warmup_steps < total_steps, got {step}, {warmup_steps}, {total_steps}")
    return _kit_warmup_cosine(step, peak_lr, warmup_steps, total_steps, min_lr)


def make_scheduler(optimizer: torch.optim.Optimizer, cfg: TrainConfig) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR whose factor is lr_at / peak (the optimizer's lr must be cfg.peak_lr)."""
    peak = cfg.peak_lr
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_at(s, cfg) / peak)


# ---------------------------------------------------------------- one step


def _autocast(amp: str, device_type: str):
    if amp == "none":
        return nullcontext()
    return torch.autocast(device_type, dtype=torch.bfloat16 if amp == "bf16" else torch.float16)


def train_step(model, optimizer, x, y, *, amp: str = "none", scaler=None, grad_clip: float = 0.0,
               device_type: str = "cpu") -> torch.Tensor:
    """One optimizer step; returns this rank's loss (detached, fp32).

    fp16: the loss is scaled before backward, gradients are unscaled before clipping, and
    ``scaler.step`` skips the update when a gradient is inf/NaN (then the scale halves).
    """
    optimizer.zero_grad(set_to_none=True)
    with _autocast(amp, device_type):
        logits = model(x)
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
    params = [p for g in optimizer.param_groups for p in g["params"]]
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
    return loss.detach()


# ---------------------------------------------------------------- checkpoints

_PREFIX = "step_"


def list_checkpoints(directory) -> list[Path]:
    """Complete checkpoints in `directory` (temp dirs excluded), oldest first."""
    d = Path(directory)
    if not d.is_dir():
        return []
    found = [p for p in d.iterdir() if p.is_dir() and p.name.startswith(_PREFIX) and p.name[len(_PREFIX):].isdigit()
             and (p / ".metadata").exists()]
    return sorted(found, key=lambda p: int(p.name[len(_PREFIX):]))


def latest_checkpoint(directory) -> Path | None:
    found = list_checkpoints(directory)
    return found[-1] if found else None


def _rank_rng_state(model) -> dict:
    """`rng_state()` on a rank whose model is on a GPU; without the CUDA streams on a CPU rank.

    A CPU (gloo) rank must not touch CUDA: on a GPU machine it is usually forked, and
    ``torch.cuda.get_rng_state_all()`` in a child forked from a parent that had initialised
    CUDA (a notebook that used the GPU, say) raises "Cannot re-initialize CUDA in forked
    subprocess". Nothing on a CPU rank draws from the CUDA generators anyway."""
    if any(p.is_cuda for p in model.parameters()):
        return rng_state()
    import random

    import numpy as np
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _state_keys(shard: str | None) -> tuple[str, str]:
    return ("model", "optim") if shard is None else (f"model_{shard}", f"optim_{shard}")


def save_checkpoint(directory, step: int, model, optimizer, *, scheduler=None, scaler=None,
                    extra: dict | None = None, keep_last: int = 2, shard: str | None = None) -> Path:
    """Collective: every rank calls it. DCP holds model + optimizer (sharded files, one writer
    per rank); ``extra_rank{r}.pt`` holds rank r's scheduler, scaler, RNG streams and `extra`.
    Written into ``.tmp_step_N`` and renamed to ``step_N`` by rank 0 once all ranks are done;
    then all but the newest `keep_last` checkpoints are deleted.

    `shard` names the part of the model this rank holds when ranks hold different parts (TP / PP,
    e.g. "pp0_tp1"): its tensors are saved under their own keys, so DCP keeps every shard (it
    would keep one copy of equal keys) and writes each once (DP replicas share a key)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    rank = dist.get_rank()
    directory = Path(directory)
    final = directory / f"{_PREFIX}{step:08d}"
    tmp = directory / f".tmp_{_PREFIX}{step:08d}"
    if rank == 0:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    dist.barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    km, ko = _state_keys(shard)
    dcp.save({km: model_sd, ko: optim_sd}, checkpoint_id=str(tmp))
    mine = {"step": step, "world_size": dist.get_world_size(), "rng": _rank_rng_state(model),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict() if scaler is not None else None, "extra": extra or {}}
    with open(tmp / f"extra_rank{rank}.pt", "wb") as f:
        torch.save(mine, f)
        f.flush()
        os.fsync(f.fileno())
    dist.barrier()
    if rank == 0:
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in list_checkpoints(directory)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()
    return final


def load_checkpoint(path, model, optimizer, *, scheduler=None, scaler=None, restore_rng: bool = True,
                    shard: str | None = None) -> dict:
    """Collective: restore what `save_checkpoint` wrote, in place; returns this rank's extras
    (step, extra). A rank beyond the saved world size takes rank 0's extras. `shard`: as saved."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    path = Path(path)
    model_sd, optim_sd = get_state_dict(model, optimizer)  # creates the optimizer state to load into
    km, ko = _state_keys(shard)
    state = {km: model_sd, ko: optim_sd}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state[km], optim_state_dict=state[ko])
    rank = dist.get_rank()
    f = path / f"extra_rank{rank}.pt"
    if not f.exists():
        f = path / "extra_rank0.pt"
    mine = torch.load(f, weights_only=False)
    if scheduler is not None and mine["scheduler"] is not None:
        scheduler.load_state_dict(mine["scheduler"])
    if scaler is not None and mine["scaler"] is not None:
        scaler.load_state_dict(mine["scaler"])
    if restore_rng and mine["world_size"] == dist.get_world_size():
        set_rng_state(mine["rng"])
    return mine


# ---------------------------------------------------------------- rank-0 output


class _Log:
    """Rank 0 prints and appends to metrics.jsonl; on other ranks every method does nothing."""

    def __init__(self, rank: int, out: Path, total: int, progress: bool):
        self.on = rank == 0
        self.lines = 0
        self.total, self.progress = total, progress
        self.metrics = out / "metrics.jsonl"
        self._bar_shown = False

    def print(self, *args) -> None:
        if self.on:
            if self._bar_shown:
                sys.stderr.write("\r\033[K")  # clear the bar; the next record redraws it
                self._bar_shown = False
            print(*args, flush=True)
            self.lines += 1

    def truncate_metrics(self, before_step: int) -> None:
        """Drop records of steps >= before_step (a run that died after its last checkpoint)."""
        if not self.on:
            return
        self.metrics.parent.mkdir(parents=True, exist_ok=True)
        kept = []
        if self.metrics.exists():
            kept = [ln for ln in self.metrics.read_text().splitlines()
                    if ln.strip() and json.loads(ln)["step"] < before_step]
        self.metrics.write_text("".join(ln + "\n" for ln in kept))

    def record(self, rec: dict) -> None:
        if not self.on:
            return
        with open(self.metrics, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if self.progress:
            done = rec["step"] + 1
            width = 30
            fill = int(width * done / self.total)
            sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{self.total} "
                             f"loss {rec['loss']:.4f} lr {rec['lr']:.2e} {rec['tokens_per_s']:,.0f} tok/s")
            sys.stderr.flush()
            self._bar_shown = True

    def end_progress(self) -> None:
        if self.on and self._bar_shown:
            sys.stderr.write("\n")
            self._bar_shown = False


def plot_metrics(metrics_path, png_path) -> None:
    """loss and learning rate against step, from metrics.jsonl (no pyplot: safe in any process)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    recs = [json.loads(ln) for ln in Path(metrics_path).read_text().splitlines() if ln.strip()]
    fig = Figure(figsize=(7, 3.2))
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot([r["step"] for r in recs], [r["loss"] for r in recs])
    ax1.set_xlabel("optimizer step")
    ax1.set_ylabel("training loss (nats/token)")
    ax2.plot([r["step"] for r in recs], [r["lr"] for r in recs])
    ax2.set_xlabel("optimizer step")
    ax2.set_ylabel("learning rate")
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


# ---------------------------------------------------------------- the run on one rank


def in_torchrun() -> bool:
    """True when torchrun (or another launcher) put the env:// rendezvous variables here."""
    return all(v in os.environ for v in _TORCHRUN_VARS)


def saved_layout(path) -> dict:
    """{"dp", "tp", "pp", "sp", "virtual_stages"} of the run that wrote checkpoint `path` (a checkpoint
    written before the layouts existed: plain DP over its world size; before --sp and
    --virtual-stages: sp False, 1 virtual stage)."""
    mine = torch.load(Path(path) / "extra_rank0.pt", weights_only=False)
    got = mine["extra"].get("layout") or {"dp": mine["world_size"], "tp": 1, "pp": 1}
    return {"sp": False, "virtual_stages": 1, **got}


def _describe_layout(lay: dict) -> str:
    return (f"dp {lay['dp']} x tp {lay['tp']} x pp {lay['pp']}" + (", sequence parallel" if lay.get("sp") else "")
            + (f", {lay['virtual_stages']} virtual stages" if lay.get("virtual_stages", 1) > 1 else ""))


def check_resume_layout(path, cfg: TrainConfig) -> None:
    """ValueError unless checkpoint `path` can be resumed with cfg's layout: the same tp and pp
    (each rank loads its own shard), sp and virtual_stages, and with tp or pp > 1 also the same dp.
    A DP-only run may resume on another world size (same data order, not bit-exact)."""
    got, want = saved_layout(path), cfg.layout
    key = ("tp", "pp", "sp", "virtual_stages")
    if any(got[k] != want[k] for k in key) or ((cfg.tp > 1 or cfg.pp > 1) and got != want):
        flags = (f"--world-size {got['dp'] * got['tp'] * got['pp']} --tp {got['tp']} --pp {got['pp']}"
                 + (" --sp" if got["sp"] else "")
                 + (f" --virtual-stages {got['virtual_stages']}" if got["virtual_stages"] > 1 else ""))
        raise ValueError(f"checkpoint {path} was written with layout {_describe_layout(got)}; "
                         f"this run is {_describe_layout(want)}: resume with the same layout ({flags})")


def _rank_main(rank: int, world_size: int, cfg: TrainConfig) -> dict:
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    if device.type != "cuda" or not cfg.deterministic:
        return _rank_run(rank, world_size, cfg, device)
    # cuBLAS needs this workspace setting for deterministic mode (read when cuBLAS is first
    # used by this process); restored afterwards, since under torchrun this is the caller's process.
    # warn_only=True would not do: SDPA's memory-efficient and cuDNN backward then only warn and
    # stay non-deterministic (seen on an H100, torch 2.11).
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    try:
        return _rank_run(rank, world_size, cfg, device)
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])


def _rank_run(rank: int, world_size: int, cfg: TrainConfig, device: torch.device) -> dict:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    out = Path(cfg.out)
    ckpt_dir = out / "checkpoints"
    progress = sys.stderr.isatty() if cfg.progress is None else cfg.progress
    log = _Log(rank, out, cfg.steps, progress)

    text = Path(cfg.corpus).read_text(encoding="utf-8", errors="replace") if cfg.corpus else default_corpus_text()
    if cfg.max_chars:
        text = text[:cfg.max_chars]
    corpus = CharCorpus(text)
    dataset = WindowDataset(corpus.tokens, cfg.seq_len)

    torch.manual_seed(cfg.seed)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = GPT(corpus.vocab, cfg.seq_len, cfg.layers, cfg.d_model, cfg.heads).to(device)
    n_params, n_nonemb = sum(p.numel() for p in model.parameters()), non_embedding_params(model)
    layout = shard = stage = None
    if cfg.layout_run:
        from . import train_layout as tl  # TP / PP: one part of the model per rank, DP over the dp groups
        layout = tl.init_layout(cfg.dp, cfg.tp, cfg.pp)
        data = ShardedBatches(dataset, layout.dp_rank, layout.dp, cfg.local_batch, cfg.seed)
        model = tl.build_stage(model, layout, cfg.amp, device.type, cfg.sp, cfg.virtual_stages)
        ddp, shard = model, layout.shard_key
        stage = tl.make_pipeline_stage(model, layout, cfg.local_batch // cfg.n_micro, cfg.seq_len, cfg.d_model, device)
    else:
        data = ShardedBatches(dataset, rank, world_size, cfg.local_batch, cfg.seed)
        if cfg.compile:  # in place: the parameters' names, and so the checkpoints, stay the same
            for block in model.blocks:
                block.compile()
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    # fused=True on CUDA: one kernel for the whole update instead of a dozen per parameter list
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=cfg.peak_lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay,
                                  **({"fused": True} if device.type == "cuda" else {}))
    scheduler = make_scheduler(optimizer, cfg)
    scaler = torch.amp.GradScaler(device.type) if cfg.amp == "fp16" else None

    start, elapsed0 = 0, 0.0
    if cfg.resume:
        path = [str(latest_checkpoint(ckpt_dir)) if rank == 0 and latest_checkpoint(ckpt_dir) else None]
        dist.broadcast_object_list(path, src=0)
        if path[0] is None:
            log.print(f"--resume: no checkpoint in {ckpt_dir}; starting from step 0")
        else:
            check_resume_layout(path[0], cfg)  # every rank reads the same file: all raise or none
            mine = load_checkpoint(path[0], ddp, optimizer, scheduler=scheduler, scaler=scaler, shard=shard)
            start = mine["step"]
            data.load_state_dict(mine["extra"]["data"])
            elapsed0 = mine["extra"].get("elapsed_s", 0.0)
            log.print(f"resumed from {path[0]} at step {start} (epoch {data.epoch}, batch {data.position})")
    log.truncate_metrics(start)
    if start == 0:
        torch.manual_seed(cfg.seed + 1 + rank)  # per-rank streams for anything random after init
    log.print(f"world {world_size} ({dist.get_backend()}, {device.type}), global batch {cfg.global_batch} "
              f"x {cfg.seq_len} tokens, peak lr {cfg.peak_lr:.3g}, {n_params:,} parameters, vocab {corpus.vocab}, "
              f"{len(data.dataset)} windows = {data.batches_per_epoch} steps/epoch, amp {cfg.amp}"
              + (f", layout {_describe_layout(cfg.layout)}, {cfg.n_micro} micro-batches"
                 if layout is not None else ""))

    stop = min(cfg.steps, cfg.stop_after or cfg.steps)
    tokens_per_step = cfg.global_batch * cfg.seq_len
    losses, lrs, steps, rates = [], [], [], []
    t_run = time.perf_counter()
    last_saved = None
    for step in range(start, stop):
        t0 = time.perf_counter()
        x, y = next(data)
        x, y = x.to(device), y.to(device)
        lr = optimizer.param_groups[0]["lr"]
        if layout is None:
            loss = train_step(ddp, optimizer, x, y, amp=cfg.amp, scaler=scaler, grad_clip=cfg.grad_clip,
                              device_type=device.type)
            scheduler.step()
            dist.all_reduce(loss, op=dist.ReduceOp.SUM)  # gloo has no AVG
            loss_value = loss.item() / world_size
        else:
            part = tl.layout_train_step(model, stage, layout, optimizer, x, y, cfg.n_micro, cfg.grad_clip)
            scheduler.step()
            # one rank per replica (TP rank 0 of the last stage) holds the replica's loss; sum over the world
            loss = torch.tensor([part], dtype=torch.float64, device=device)
            dist.all_reduce(loss, op=dist.ReduceOp.SUM)
            loss_value = loss.item() / cfg.dp
        dt = time.perf_counter() - t0
        losses.append(loss_value)
        lrs.append(lr)
        steps.append(step)
        rates.append(tokens_per_step / dt)
        log.record({"step": step, "loss": loss_value, "lr": lr, "tokens_per_s": tokens_per_step / dt,
                    "elapsed_s": elapsed0 + time.perf_counter() - t_run})
        done = step + 1
        if done == stop or (cfg.checkpoint_every and done % cfg.checkpoint_every == 0):
            save_checkpoint(ckpt_dir, done, ddp, optimizer, scheduler=scheduler, scaler=scaler,
                            keep_last=cfg.keep_last, shard=shard,
                            extra={"data": data.state_dict(), "elapsed_s": elapsed0 + time.perf_counter() - t_run,
                                   "layout": cfg.layout})
            last_saved = done
    log.end_progress()
    wall = time.perf_counter() - t_run

    result = {"rank": rank, "world_size": world_size, "layout": {"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp},
              "sp": cfg.sp, "virtual_stages": cfg.virtual_stages,
              "start_step": start, "steps": steps, "losses": losses,
              "lrs": lrs, "final_loss": losses[-1] if losses else None,
              "final_loss_avg5": sum(losses[-5:]) / len(losses[-5:]) if losses else None,
              "tokens_per_s": (sorted(rates[1:] or rates)[len(rates[1:] or rates) // 2]) if rates else None,
              "wall_s": wall, "n_params": n_params, "last_checkpoint": last_saved,
              "data_state": data.state_dict(), "log_lines": 0,
              "peak_cuda_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None}
    if losses:
        summary = (f"done: steps {start}..{stop - 1}, final loss {losses[-1]:.4f} "
                   f"(mean of last 5: {result['final_loss_avg5']:.4f}), median {result['tokens_per_s']:,.0f} tokens/s, "
                   f"{wall:.1f} s")
        if result["peak_cuda_bytes"] is not None:
            summary += f", peak CUDA memory {result['peak_cuda_bytes'] / 2**20:,.0f} MiB"
        if cfg.peak_flops:
            from solutions_lib.compute import mfu, palm_flops_per_token
            fpt = palm_flops_per_token(n_nonemb, cfg.layers, cfg.heads,
                                       cfg.d_model // cfg.heads, cfg.seq_len)
            result["mfu"] = mfu(result["tokens_per_s"], fpt, cfg.peak_flops * world_size)
            summary += f", MFU {100 * result['mfu']:.2f}% of {world_size} x {cfg.peak_flops:.3g} FLOP/s"
        log.print(summary)
        if rank == 0:
            plot_metrics(log.metrics, out / "loss.png")
    if cfg.return_params:
        result["params"] = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    result["log_lines"] = log.lines
    return result


# ---------------------------------------------------------------- entry points


def _prewarm() -> None:
    """Import in the parent what every rank would import on first use (DCP, the step's lazy
    imports, the PNG writer): forked ranks then start without paying for it once each."""
    import importlib
    for name in ("torch.distributed.checkpoint", "torch.distributed.checkpoint.state_dict",
                 "torch.distributed.checkpoint.filesystem", "torch._dynamo", "fsspec",
                 "matplotlib.figure", "matplotlib.backends.backend_agg", "PIL.PngImagePlugin"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def train(config: TrainConfig | None = None, *, all_ranks: bool = False, **overrides):
    """Run training; return rank 0's result dict (every rank's list with all_ranks=True).

    Under torchrun this process is one rank: it joins the env:// process group (WORLD_SIZE
    from the environment wins over config.world_size) and destroys it on the way out. Otherwise
    `config.world_size` ranks are spawned here with `solutions_lib.dist.launch`.
    """
    cfg = dataclasses.replace(config or TrainConfig(), **overrides).validate()
    if in_torchrun():
        cfg = dataclasses.replace(cfg, world_size=int(os.environ["WORLD_SIZE"])).validate()
        backend = cfg.backend or ("nccl" if torch.cuda.is_available() else "gloo")
        kw = {}
        if backend == "nccl":
            local = int(os.environ["LOCAL_RANK"])
            torch.cuda.set_device(local)
            kw["device_id"] = torch.device("cuda", local)
        dist.init_process_group(backend, timeout=_dt.timedelta(seconds=cfg.timeout), **kw)
        try:
            result = _rank_main(dist.get_rank(), dist.get_world_size(), cfg)
        finally:
            dist.destroy_process_group()
        return [result] if all_ranks else result
    if cfg.resume and latest_checkpoint(Path(cfg.out) / "checkpoints") is not None:
        check_resume_layout(latest_checkpoint(Path(cfg.out) / "checkpoints"), cfg)  # a clear error before spawning
    from .launch import launch
    _prewarm()  # import once here, not once per forked rank
    # On a machine with a GPU the ranks are spawned, gloo ones too: a forked rank cannot use
    # autograd once the caller has run a backward pass there (autograd's GPU worker threads).
    # Spawning needs the importable module's function and config class, also when this file
    # runs as __main__ (python -m).
    import importlib
    mod = importlib.import_module("solutions_lib.dist.train")
    cfg = mod.TrainConfig(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})
    results = launch(mod._rank_main, cfg.world_size, args=(cfg,), backend=cfg.backend, timeout=cfg.timeout,
                     collective_timeout=min(cfg.timeout, 300.0), threads_per_rank=cfg.threads,
                     start_method="spawn" if torch.cuda.is_available() else None)
    return results if all_ranks else results[0]


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
