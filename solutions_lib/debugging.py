"""Operational debugging of a training run: shape and mask checks, gradient-norm traces around
clipping, a step timer that decomposes T_step into phases, a reproducible small run, and the
launch checklist as executable checks.

Conventions. A language-model batch is cut from token rows of length T+1:
inputs = rows[:, :-1], targets = rows[:, 1:], so target_i = input_{i+1} (next-token prediction).
Targets that must not be trained on hold `ignore_index` (-100, torch's cross_entropy default).
A causal mask is a (T, T) tensor: boolean True = "may attend", or additive float (0 = attend,
-inf = blocked); position i may attend to j exactly when j <= i. The check functions return a
list of problems in words (empty list = the check passed); they raise ValueError only when the
arguments cannot be checked at all.
"""
from __future__ import annotations

import io
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["label_shift_problems", "causal_mask_problems", "padding_mask_problems", "make_lm_batch",
           "clip_grad_norm", "grad_norm_trace", "StepTimer", "TinyLM", "synthetic_tokens",
           "RowLoader", "train_small", "resume_matches", "LaunchConfig", "lr_at", "memory_estimate_bytes",
           "run_launch_checklist", "PHASES", "one_thread"]

PHASES = ("data", "forward", "backward", "optimizer", "checkpoint")


# ---------------------------------------------------------------- shape and mask checks


def _2d(name, t):
    t = torch.as_tensor(t)
    if t.dim() != 2:
        raise ValueError(f"{name} must be (batch, seq_len), got shape {tuple(t.shape)}")
    return t


def _padding_positions(tokens, pad_id, eos_id=None):
    """Bool mask of the padding in right-padded token rows: the run of `pad_id` at the end of
    each row, except that when the tokenizer pads with its EOS token (`eos_id == pad_id`, as GPT-2
    and LLaMA tokenizers are often set up) the first token of that run is the text's own EOS,
    which is attended to and trained on, not padding."""
    tokens = _2d("tokens", tokens)
    is_pad = tokens == pad_id
    # trailing run: positions from which every token to the end of the row is pad_id
    trailing = is_pad.flip(1).long().cumprod(1).flip(1).bool()
    if eos_id is not None and eos_id == pad_id:
        first = trailing & ~torch.cat([torch.zeros_like(trailing[:, :1]), trailing[:, :-1]], 1)
        trailing = trailing & ~first
    return trailing


def make_lm_batch(rows, pad_id=None, ignore_index=-100, eos_id=None):
    """(inputs, targets, attention_mask) from token rows of length T+1, done right.

    Targets whose token is padding get `ignore_index`; the attention mask is 1 on real tokens.
    Padding is right padding (`_padding_positions`): with `eos_id == pad_id` the first pad token
    after a row's text is its real EOS, kept as a target and attended to.
    """
    rows = _2d("rows", rows)
    inputs, targets = rows[:, :-1].clone(), rows[:, 1:].clone()
    if pad_id is None:
        return inputs, targets, torch.ones_like(inputs)
    if eos_id is None or eos_id != pad_id:
        targets[targets == pad_id] = ignore_index
        return inputs, targets, (inputs != pad_id).long()
    pad = _padding_positions(rows, pad_id, eos_id)
    targets[pad[:, 1:]] = ignore_index
    return inputs, targets, (~pad[:, :-1]).long()


def label_shift_problems(inputs, targets, ignore_index=-100) -> list[str]:
    """Check target_i = input_{i+1} wherever both are known; [] when the shift is right.

    Only positions 0..T-2 can be checked (the last target is the token after the window).
    """
    inputs, targets = _2d("inputs", inputs), _2d("targets", targets)
    if inputs.shape != targets.shape:
        return [f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} differ in shape"]
    known = targets[:, :-1] != ignore_index
    wrong = known & (targets[:, :-1] != inputs[:, 1:])
    if not wrong.any():
        return []
    b, i = (int(v) for v in wrong.nonzero()[0])
    problems = [f"{int(wrong.sum())} of {int(known.sum())} checkable targets break target_i = input_(i+1); "
                f"first at row {b}, position {i}: target {int(targets[b, i])}, next input {int(inputs[b, i + 1])}"]
    kt = targets != ignore_index
    if bool(((targets == inputs) | ~kt).all()):
        problems.append("targets equal the inputs: the labels were not shifted (the model learns to copy)")
    elif bool(((targets[:, 1:] == inputs[:, :-1]) | ~kt[:, 1:]).all()):
        problems.append("targets are shifted the wrong way (target_i = input_(i-1))")
    return problems


def causal_mask_problems(mask, seq_len=None) -> list[str]:
    """Check a (T, T) causal mask: i may attend to j iff j <= i. [] when it is right."""
    mask = torch.as_tensor(mask)
    if mask.dim() != 2 or mask.shape[0] != mask.shape[1]:
        return [f"a causal mask must be square (T, T), got shape {tuple(mask.shape)}"]
    if seq_len is not None and mask.shape[0] != seq_len:
        return [f"mask is {mask.shape[0]} long, the sequence {seq_len}"]
    allowed = mask if mask.dtype == torch.bool else mask == 0
    T = mask.shape[0]
    want = torch.ones(T, T, dtype=torch.bool).tril()
    if torch.equal(allowed, want):
        return []
    problems = []
    future = allowed & ~want
    if future.any():
        i, j = (int(v) for v in future.nonzero()[0])
        problems.append(f"{int(future.sum())} future positions are visible (first: query {i} sees key {j}): "
                        "the loss is low because the model reads the answer")
    hidden = ~allowed & want
    if hidden.any():
        i, j = (int(v) for v in hidden.nonzero()[0])
        problems.append(f"{int(hidden.sum())} past-or-self positions are blocked (first: query {i} cannot see key {j})"
                        + (": the diagonal is masked (off by one)" if not allowed.diagonal().any() else ""))
    return problems


def padding_mask_problems(inputs, targets, attention_mask, pad_id, ignore_index=-100, eos_id=None) -> list[str]:
    """Check padding handling: attention_mask = (inputs != pad_id) and no target is pad_id.

    With `eos_id == pad_id` a pad token can be real (the EOS that ends a text), so padding is the
    run of pad tokens at the end of a row minus its first token (`_padding_positions`): the mask
    must be 1 exactly off the padding, and a target at a padding position or just before the
    padding (it would predict padding) must be `ignore_index`.
    """
    inputs, targets, attention_mask = _2d("inputs", inputs), _2d("targets", targets), _2d("attention_mask", attention_mask)
    if not (inputs.shape == targets.shape == attention_mask.shape):
        return ["inputs, targets and attention_mask differ in shape"]
    problems = []
    shared = eos_id is not None and eos_id == pad_id
    want = ~_padding_positions(inputs, pad_id, eos_id) if shared else inputs != pad_id
    got = attention_mask.bool()
    if (got & ~want).any():
        problems.append(f"{int((got & ~want).sum())} padding positions are attended to (attention_mask is 1 on padding)")
    if (~got & want).any():
        problems.append(f"{int((~got & want).sum())} real tokens are masked out (attention_mask is 0 on them)"
                        + (" (with pad id = EOS id, the first pad token after the text is its EOS)" if shared else ""))
    if shared:
        pad = ~want
        before = torch.cat([pad[:, 1:], torch.zeros_like(pad[:, :1])], 1)
        n = int(((pad | before) & (targets != ignore_index)).sum())
    else:
        n = int((targets == pad_id).sum())
    if n:
        problems.append(f"{n} targets are the pad token: the loss trains on padding (set them to {ignore_index})")
    return problems


# ---------------------------------------------------------------- gradient norms


def clip_grad_norm(parameters, max_norm: float, eps: float = 1e-6) -> tuple[float, float]:
    """Clip in place like torch.nn.utils.clip_grad_norm_ (2-norm); return (pre-clip, post-clip) norms.

    Total norm ||g||_2 = sqrt(sum over all gradient entries of g^2); every gradient is scaled by
    min(1, max_norm / (||g|| + eps)) (torch's eps = 1e-6).
    """
    if not max_norm > 0:
        raise ValueError(f"max_norm must be > 0, got {max_norm!r}")
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0, 0.0
    total = torch.sqrt(sum((g.detach().double() ** 2).sum() for g in grads))
    coef = min(1.0, float(max_norm / (total + eps)))
    for g in grads:
        g.detach().mul_(coef)
    post = math.sqrt(sum(float((g.detach().double() ** 2).sum()) for g in grads))
    return float(total), post


def grad_norm_trace(model, batches, max_norm: float, lr: float = 0.1) -> list[dict]:
    """Train with SGD over `batches` of (inputs, targets); per step the pre-clip norm, the
    post-clip norm and their ratio (1 when no clipping happened)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    out = []
    for x, y in batches:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        pre, post = clip_grad_norm(model.parameters(), max_norm)
        opt.step()
        out.append({"loss": float(loss.detach()), "pre": pre, "post": post, "ratio": post / pre if pre else 1.0})
    return out


# ---------------------------------------------------------------- step timer


class StepTimer:
    """Wall-clock phases of training steps with time.perf_counter: T_step = sum_j T_j + gaps.

    with timer.step(tokens):          # the outer timer (the measured step time)
        with timer.phase("data"): ...
        with timer.phase("forward"): ...
    """

    def __init__(self):
        self.steps: list[dict] = []
        self._current = None

    @contextmanager
    def step(self, tokens: int):
        if self._current is not None:
            raise ValueError("steps cannot nest")
        self._current = {p: 0.0 for p in PHASES}
        t0 = time.perf_counter()
        try:
            yield self
        finally:
            rec = self._current
            rec["step"] = time.perf_counter() - t0
            rec["tokens"] = int(tokens)
            self.steps.append(rec)
            self._current = None

    @contextmanager
    def phase(self, name: str):
        if self._current is None:
            raise ValueError("phase() must run inside step()")
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; use one of {PHASES}")
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._current[name] += time.perf_counter() - t0

    def summary(self, skip: int = 0) -> dict:
        """Mean seconds per phase and per step, the phase sum, and tokens/s = tokens / step time."""
        recs = self.steps[skip:]
        if not recs:
            raise ValueError("no steps recorded")
        out = {p: sum(r[p] for r in recs) / len(recs) for p in PHASES}
        out["step"] = sum(r["step"] for r in recs) / len(recs)
        out["phase_sum"] = sum(out[p] for p in PHASES)
        out["tokens_per_s"] = sum(r["tokens"] for r in recs) / sum(r["step"] for r in recs)
        return out


# ---------------------------------------------------------------- a small model and data


class TinyLM(nn.Module):
    """Embedding -> one causal self-attention block -> logits; small enough to train in a second."""

    def __init__(self, vocab: int = 32, hidden: int = 32, heads: int = 2):
        super().__init__()
        self.vocab, self.heads = vocab, heads
        self.emb = nn.Embedding(vocab, hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden))
        self.out = nn.Linear(hidden, vocab)

    def causal_mask(self, T: int) -> torch.Tensor:
        return torch.ones(T, T, dtype=torch.bool).tril()

    def forward(self, idx, attention_mask=None):
        x = self.emb(idx)
        B, T, H = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, H // self.heads).permute(2, 0, 3, 1, 4)
        mask = self.causal_mask(T)
        if attention_mask is not None:
            mask = mask & attention_mask.bool()[:, None, None, :]
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, H))
        x = x + self.mlp(x)
        return self.out(x)


def synthetic_tokens(n_rows: int, row_len: int, vocab: int = 32, seed: int = 0) -> torch.Tensor:
    """Rows that follow t_(i+1) = (3 t_i + 1) mod vocab, with 10% random tokens: learnable."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.empty(n_rows, row_len, dtype=torch.long)
    rows[:, 0] = torch.randint(0, vocab, (n_rows,), generator=g)
    for i in range(1, row_len):
        rows[:, i] = (3 * rows[:, i - 1] + 1) % vocab
    noise = torch.rand(n_rows, row_len, generator=g) < 0.1
    rows[noise] = torch.randint(0, vocab, (int(noise.sum()),), generator=g)
    return rows


class RowLoader:
    """Shuffled batches of rows, each row once per epoch; its state (epoch, position, generator)
    is saved and restored with the checkpoint. `replacement=True` plants the classic bug."""

    def __init__(self, rows: torch.Tensor, batch: int, seed: int = 0, replacement: bool = False):
        self.rows, self.batch, self.replacement = rows, batch, replacement
        self.g = torch.Generator().manual_seed(seed)
        self.order, self.pos = None, 0

    def _new_epoch(self):
        n = len(self.rows)
        self.order = torch.randint(0, n, (n,), generator=self.g) if self.replacement else torch.randperm(n, generator=self.g)
        self.pos = 0

    def next_indices(self) -> torch.Tensor:
        if self.order is None or self.pos + self.batch > len(self.order):
            self._new_epoch()
        idx = self.order[self.pos:self.pos + self.batch]
        self.pos += self.batch
        return idx

    def next(self):
        return self.rows[self.next_indices()]

    def state_dict(self):
        return {"g": self.g.get_state(), "order": None if self.order is None else self.order.clone(), "pos": self.pos}

    def load_state_dict(self, s):
        self.g.set_state(s["g"])
        self.order, self.pos = (None if s["order"] is None else s["order"].clone()), s["pos"]


# ---------------------------------------------------------------- launch configuration


@dataclass(frozen=True)
class LaunchConfig:
    """A small training configuration; the checklist runs it for real.

    The memory fields describe the *target* run (the one the small run stands for)."""

    vocab: int = 32
    hidden: int = 32
    heads: int = 2
    seq_len: int = 16
    micro_batch: int = 8
    grad_accum: int = 1
    dp: int = 1
    tp: int = 1
    pp: int = 1
    world_size: int = 1
    planned_tokens_per_step: int = 128
    steps: int = 100
    warmup_steps: int = 10
    peak_lr: float = 3e-3
    min_lr: float = 3e-4
    max_norm: float = 1.0
    seed: int = 0
    n_rows: int = 256
    shift_labels: bool = True
    replacement: bool = False
    checkpoint_includes: tuple = ("model", "optimizer", "scheduler", "rng", "dataloader")
    logged: tuple = ("train_loss", "val_loss", "tokens_per_s", "grad_norm", "lr")
    # the target run, for the memory check
    target_params: float = 1.3e9
    target_layers: int = 24
    target_hidden: int = 2048
    target_heads: int = 16
    target_seq_len: int = 2048
    target_micro_batch: int = 1
    gpu_memory_bytes: float = 80e9
    memory_counts: tuple = ("weights", "grads", "optimizer", "activations")

    def __post_init__(self):
        # Only malformed values are rejected here; plausible-but-wrong plans (a warmup longer than
        # the run, a batch that misses the plan) are what the checklist must catch.
        for name in ("vocab", "hidden", "heads", "seq_len", "micro_batch", "grad_accum", "dp", "tp", "pp",
                     "world_size", "planned_tokens_per_step", "steps", "n_rows", "target_layers",
                     "target_hidden", "target_heads", "target_seq_len", "target_micro_batch"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {v!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.n_rows < self.micro_batch:
            raise ValueError("n_rows must hold at least one micro-batch")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be a whole number >= 0, got {self.warmup_steps!r}")
        for name in ("peak_lr", "max_norm", "target_params", "gpu_memory_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not self.min_lr >= 0:
            raise ValueError(f"min_lr must be >= 0, got {self.min_lr!r}")

    def with_(self, **kw):
        return replace(self, **kw)


def lr_at(step: int, cfg: LaunchConfig) -> float:
    """Linear warmup from peak/warmup at step 0 to the peak, then cosine decay to min_lr.

    step is the 0-based optimizer step; the value is the LR that update uses (no zero LR at step 0).
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be a whole number >= 0, got {step!r}")
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return cfg.peak_lr * (step + 1) / cfg.warmup_steps
    span = max(1, cfg.steps - cfg.warmup_steps)
    t = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr + 0.5 * (cfg.peak_lr - cfg.min_lr) * (1 + math.cos(math.pi * t))


BYTES_PER_PARAM = {"weights": 2, "grads": 2, "optimizer": 12}  # bf16 weights/grads, fp32 master + Adam moments


def memory_estimate_bytes(cfg: LaunchConfig, counts=None) -> float:
    """Per-GPU bytes of the target run: 16 bytes/param (mixed-precision Adam) + activations.

    Activations per layer 34 s b h + 5 a s^2 b bytes (Korthikanti et al. 2022, no recomputation).
    `counts` (default cfg.memory_counts) says which terms an estimate includes.
    """
    counts = cfg.memory_counts if counts is None else counts
    total = sum(BYTES_PER_PARAM[k] * cfg.target_params for k in ("weights", "grads", "optimizer") if k in counts)
    if "activations" in counts:
        s, b, h, a = cfg.target_seq_len, cfg.target_micro_batch, cfg.target_hidden, cfg.target_heads
        total += cfg.target_layers * (34 * s * b * h + 5 * a * s * s * b)
    return float(total)


def _batch(rows, cfg):
    if cfg.shift_labels:
        return rows[:, :-1], rows[:, 1:]
    return rows[:, :-1], rows[:, :-1]


def _setup(cfg: LaunchConfig, seed: int):
    torch.manual_seed(seed)
    model = TinyLM(cfg.vocab, cfg.hidden, cfg.heads)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.peak_lr, weight_decay=0.0)
    loader = RowLoader(synthetic_tokens(cfg.n_rows, cfg.seq_len + 1, cfg.vocab, seed=1234),
                       cfg.micro_batch, seed=seed, replacement=cfg.replacement)
    return model, opt, loader


@contextmanager
def one_thread():
    """Run a tiny model on one CPU thread: thread hand-offs cost more than its matmuls."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _train_steps(model, opt, loader, cfg, start, stop):
    with one_thread():
        return _train_steps_inner(model, opt, loader, cfg, start, stop)


def _train_steps_inner(model, opt, loader, cfg, start, stop):
    losses, norms = [], []
    for step in range(start, stop):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        opt.zero_grad(set_to_none=True)
        for _ in range(cfg.grad_accum):
            x, y = _batch(loader.next(), cfg)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten()) / cfg.grad_accum
            loss.backward()
        pre, _ = clip_grad_norm(model.parameters(), cfg.max_norm)
        opt.step()
        losses.append(float(loss.detach()) * cfg.grad_accum)
        norms.append(pre)
    return losses, norms


def train_small(cfg: LaunchConfig = LaunchConfig(), seed: int | None = None, steps: int | None = None):
    """Train TinyLM for `steps` (default cfg.steps) from `seed`: (losses, pre-clip grad norms)."""
    model, opt, loader = _setup(cfg, cfg.seed if seed is None else seed)
    return _train_steps(model, opt, loader, cfg, 0, cfg.steps if steps is None else steps)


def _save(model, opt, loader, step, includes):
    buf = io.BytesIO()
    state = {"step": step}
    if "model" in includes:
        state["model"] = model.state_dict()
    if "optimizer" in includes:
        state["optimizer"] = opt.state_dict()
    if "rng" in includes:
        state["rng"] = torch.get_rng_state()
    if "dataloader" in includes:
        state["dataloader"] = loader.state_dict()
    torch.save(state, buf)
    buf.seek(0)
    return buf


def resume_matches(cfg: LaunchConfig, split: int | None = None, steps: int | None = None):
    """Train `steps`; separately train `split`, checkpoint (the parts cfg.checkpoint_includes),
    rebuild everything fresh from a different seed, load, finish. Returns (straight, resumed) losses
    after the split; they are identical (==) when the checkpoint holds all the state."""
    steps = cfg.steps if steps is None else steps
    split = steps // 2 if split is None else split
    straight, _ = train_small(cfg, steps=steps)
    model, opt, loader = _setup(cfg, cfg.seed)
    _train_steps(model, opt, loader, cfg, 0, split)
    buf = _save(model, opt, loader, split, cfg.checkpoint_includes)
    model, opt, loader = _setup(cfg, cfg.seed + 1)  # a fresh process
    state = torch.load(buf, weights_only=False)
    if "model" in state:
        model.load_state_dict(state["model"])
    if "optimizer" in state:
        opt.load_state_dict(state["optimizer"])
    if "rng" in state:
        torch.set_rng_state(state["rng"])
    if "dataloader" in state:
        loader.load_state_dict(state["dataloader"])
    if "scheduler" not in cfg.checkpoint_includes:
        start = 0  # without the scheduler state the schedule restarts
    else:
        start = state["step"]
    resumed, _ = _train_steps(model, opt, loader, cfg.with_(steps=steps), start, start + steps - split)
    return straight[split:], resumed


REQUIRED_CHECKPOINT = ("model", "optimizer", "scheduler", "rng", "dataloader")
REQUIRED_LOGS = ("train_loss", "val_loss", "tokens_per_s")


def run_launch_checklist(cfg: LaunchConfig) -> list[tuple[str, bool, str]]:
    """Run the launch checklist (the theory notebook's seven checks, made executable, plus the
    LR schedule, gradient-norm and data-coverage checks) on `cfg`: [(check, passed, detail)]."""
    out = []

    def add(name, ok, detail):
        out.append((name, bool(ok), detail))

    # 1. a small run learns, is reproducible, and resumes exactly
    l1, norms = train_small(cfg)
    l2, _ = train_small(cfg)
    l3, _ = train_small(cfg, seed=cfg.seed + 1, steps=5)
    add("small_run_learns", l1[-1] < l1[0] and l1 == l2 and l1[:5] != l3,
        f"L_0={l1[0]:.3f}, L_last={l1[-1]:.3f}, same seed identical: {l1 == l2}, other seed differs: {l1[:5] != l3}")
    a, b = resume_matches(cfg)
    add("resume_exact", a == b, "resumed losses equal the uninterrupted run" if a == b else
        f"resumed losses differ from step {next(i for i, (u, v) in enumerate(zip(a, b)) if u != v)} after the checkpoint")
    add("grad_norm_finite", all(math.isfinite(n) for n in norms), f"max pre-clip norm {max(norms):.3g}")
    # 2. labels shifted, masks tested
    rows = synthetic_tokens(4, cfg.seq_len + 1, cfg.vocab, seed=99)
    x, y = _batch(rows, cfg)
    probs = label_shift_problems(x, y) + causal_mask_problems(TinyLM(cfg.vocab, cfg.hidden, cfg.heads).causal_mask(cfg.seq_len))
    add("labels_and_masks", not probs, "; ".join(probs) or "target_i = input_(i+1), causal mask tril")
    # 3. memory estimate includes optimizer states and activations, and fits
    missing = [k for k in ("weights", "grads", "optimizer", "activations") if k not in cfg.memory_counts]
    full = memory_estimate_bytes(cfg, counts=("weights", "grads", "optimizer", "activations"))
    add("memory_fits", not missing and full <= cfg.gpu_memory_bytes,
        f"estimate {full / 1e9:.1f} GB of {cfg.gpu_memory_bytes / 1e9:.0f} GB" + (f"; estimate omits {missing}" if missing else ""))
    # 4. global batch and token budget explicit
    tps = cfg.micro_batch * cfg.grad_accum * cfg.dp * cfg.seq_len
    add("tokens_per_step", tps == cfg.planned_tokens_per_step,
        f"micro_batch*grad_accum*dp*seq_len = {tps}, planned {cfg.planned_tokens_per_step}")
    # 5. parallelism product equals world size
    add("parallelism", cfg.dp * cfg.tp * cfg.pp == cfg.world_size,
        f"dp*tp*pp = {cfg.dp * cfg.tp * cfg.pp}, world size {cfg.world_size}")
    # LR schedule: warmup then decay, never zero
    lrs = [lr_at(s, cfg) for s in range(cfg.steps)]
    w = min(cfg.warmup_steps, cfg.steps)
    ok = (all(v > 0 for v in lrs) and cfg.warmup_steps < cfg.steps and 0 <= cfg.min_lr <= cfg.peak_lr
          and all(lrs[i] <= lrs[i + 1] for i in range(max(0, w - 1)))
          and all(lrs[i] >= lrs[i + 1] for i in range(max(0, w - 1), cfg.steps - 1)))
    add("lr_schedule", ok, f"lr(0)={lrs[0]:.2e}, peak {max(lrs):.2e} at step {lrs.index(max(lrs))}, last {lrs[-1]:.2e}")
    # 6. validation loss and throughput logged separately
    miss = [k for k in REQUIRED_LOGS if k not in cfg.logged]
    add("logging", not miss, "logs " + ", ".join(cfg.logged) + (f"; missing {miss}" if miss else ""))
    # 7. checkpoint holds every piece of state
    miss = [k for k in REQUIRED_CHECKPOINT if k not in cfg.checkpoint_includes]
    add("checkpoint_contents", not miss, f"missing {miss}" if miss else "model, optimizer, scheduler, RNG, dataloader")
    # data loader: one epoch covers every row exactly once
    ld = RowLoader(torch.arange(cfg.n_rows)[:, None], cfg.micro_batch, seed=cfg.seed, replacement=cfg.replacement)
    seen = torch.cat([ld.next_indices() for _ in range(cfg.n_rows // cfg.micro_batch)])
    add("data_coverage", len(set(seen.tolist())) == len(seen),
        f"{len(set(seen.tolist()))} distinct rows in {len(seen)} draws of one epoch")
    return out
