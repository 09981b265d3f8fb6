"""Grading helpers of assignment 10 exercises 3 (a complete training script), parts A and E.

The expected values come from the caller's inputs or from the course's own schedule functions
(`solutions_lib.schedules`), never from constants here. Cells that grade a student's function keep
their own ``no_delegation`` block around the student's calls (so it watches the kernel when the cell
runs grader-side) and hand the results to these functions:

* `lr_schedule_cases(rng, n)`: random schedules and steps (warm-up edges, the last step, beyond it)
  with the learning rate `warmup_cosine` gives for each.
* `parse_config_cases(rng, n)` and `as_config_dict(cfg)`: random command lines with the values they
  must parse to; a parsed config (dict, dataclass, Namespace) read as a dict of the six keys.
* `amp_observed(ctx, a, b)`, `expect_amp_modes(amp_setup, a, b)`, `expect_amp_setups(setups, x, w, y)`:
  what a matmul gives inside the context returned by `amp_setup`, and the scaler's state.
* `cleanup_rank(rank, world, cleanup_on_exit, scale, fail_with)` (a rank function for
  `launch_graded`) and `expect_cleanup(seen, scale, fail_with)`: the result or error, the barriers
  counted with `CommCounter` and whether the process group was destroyed, on every rank.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..grading import expect_between, expect_close, expect_equal
from .counting import CommCounter

__all__ = ["lr_schedule_cases", "CONFIG_KEYS", "CONFIG_DEFAULTS", "as_config_dict", "parse_config_cases",
           "AMP_DTYPES", "amp_observed", "expect_amp_modes", "expect_amp_setups", "cleanup_rank", "expect_cleanup"]


# ---------------------------------------------------------------- A: the learning rate


def lr_schedule_cases(rng, n: int = 40) -> list[tuple[tuple, float]]:
    """`n` random schedules from the numpy generator `rng`, each at the steps 0, the last warm-up
    step, the first cosine step, the last step, 3 steps beyond and one random step: a list of
    ((step, base_lr, base_batch, global_batch, warmup, total, min_lr_ratio), learning rate)."""
    from ..schedules import scale_lr, warmup_cosine

    cases = []
    for _ in range(n):
        base_batch = int(rng.integers(8, 512))
        global_batch = int(rng.integers(8, 4096))
        base_lr = float(10 ** rng.uniform(-5, -2))
        total = int(rng.integers(5, 3000))
        warm = int(rng.integers(0, total))
        ratio = float(rng.choice([0.0, 0.1, rng.uniform(0, 1)]))
        for step in {0, max(warm - 1, 0), warm, total - 1, total + 3, int(rng.integers(0, total))}:
            peak = scale_lr(base_lr, base_batch, global_batch)
            cases.append(((step, base_lr, base_batch, global_batch, warm, total, ratio),
                          warmup_cosine(step, peak, warm, total, ratio * peak)))
    return cases


# ---------------------------------------------------------------- E2: the command line

CONFIG_KEYS = ("steps", "local_batch", "lr", "amp", "backend", "resume")
#: the reference script's defaults, as the exercise's table states them
CONFIG_DEFAULTS = {"steps": 300, "local_batch": 8, "lr": 3e-3, "amp": "none", "backend": None, "resume": False}


def as_config_dict(cfg):
    """A parsed config as a dict of the six keys ("<missing>" for an absent one): a dict is read
    with `.get`; anything else (a dataclass, an argparse Namespace, also when it is a handle on an
    object of the notebook's) by attribute. Returns `cfg` itself when it has none of the keys."""
    if isinstance(cfg, dict):
        return {k: cfg.get(k, "<missing>") for k in CONFIG_KEYS}
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return as_config_dict(dataclasses.asdict(cfg))
    out = {}
    for k in CONFIG_KEYS:
        try:
            out[k] = getattr(cfg, k)
        except Exception:   # noqa: BLE001 - a handle on a remote object raises its own kinds
            out[k] = "<missing>"
    return out if any(v != "<missing>" for v in out.values()) else cfg


def parse_config_cases(rng, n: int = 8) -> list[tuple[list[str], dict]]:
    """`n` random command lines (each option present with some probability, as `--opt value` or
    `--opt=value`, in a random order) with the config each must parse to."""
    cases = []
    for _ in range(n):
        want = dict(CONFIG_DEFAULTS)
        opts = []
        if rng.random() < 0.7:
            want["steps"] = int(rng.integers(1, 100_000))
            opts.append(["--steps", str(want["steps"])])
        if rng.random() < 0.7:
            want["local_batch"] = int(rng.integers(1, 512))
            opts.append([f"--local-batch={want['local_batch']}"])
        if rng.random() < 0.7:
            want["lr"] = float(f"{10 ** rng.uniform(-6, 0):.3e}")
            opts.append(["--lr", repr(want["lr"])])
        if rng.random() < 0.7:
            want["amp"] = str(rng.choice(["none", "bf16", "fp16"]))
            opts.append(["--amp", want["amp"]])
        if rng.random() < 0.5:
            want["backend"] = str(rng.choice(["gloo", "nccl"]))
            opts.append(["--backend", want["backend"]])
        if rng.random() < 0.5:
            want["resume"] = True
            opts.append(["--resume"])
        order = rng.permutation(len(opts))
        cases.append(([w for i in order for w in opts[i]], want))
    return cases


# ---------------------------------------------------------------- E3: mixed precision

AMP_DTYPES = {"none": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16"}


def amp_observed(ctx, a, b) -> dict:
    """What a matmul gives inside `ctx`, and the CPU autocast state there and after it."""
    with ctx:
        seen = {"matmul dtype": str((a @ b).dtype), "autocast on": torch.is_autocast_enabled("cpu")}
    seen["autocast on after the block"] = torch.is_autocast_enabled("cpu")
    return seen


def expect_amp_modes(amp_setup, a, b) -> None:
    """For each mode: the matmul dtype inside the context, autocast off after it, a scaler only for
    fp16; then the fp16 scaler is an enabled `torch.amp.GradScaler`."""
    for mode in ("none", "bf16", "fp16"):
        ctx, scaler = amp_setup(mode, "cpu")
        seen = amp_observed(ctx, a, b)
        print(f"{mode:>4}: {seen}, scaler: {type(scaler).__name__}")
        expect_equal(seen["matmul dtype"], AMP_DTYPES[mode], f"amp_setup({mode!r}, 'cpu'): dtype of a matmul inside the context",
                     hint="torch.autocast(device_type, dtype=...) for bf16/fp16, contextlib.nullcontext() for none.")
        expect_equal(seen["autocast on after the block"], False, f"amp_setup({mode!r}, 'cpu'): autocast after leaving the context")
        expect_equal(scaler is None, mode != "fp16", f"amp_setup({mode!r}, 'cpu'): scaler is None",
                     hint="only fp16 needs a GradScaler; bf16 has float32's exponent range.")
    scaler = amp_setup("fp16", "cpu")[1]
    expect_equal(isinstance(scaler, torch.amp.GradScaler), True, "amp_setup('fp16', 'cpu'): scaler is a torch.amp.GradScaler")
    expect_equal(scaler.is_enabled(), True, "amp_setup('fp16', 'cpu'): scaler.is_enabled()",
                 hint="torch.amp.GradScaler() means CUDA and switches itself off without it: pass device_type.")


def expect_amp_setups(setups: dict, x, w, y) -> None:
    """`setups[mode]` holds two (context, scaler) pairs of `amp_setup(mode, "cpu")`: inside the first
    context F.linear(x, w) runs in the mode's dtype and cross-entropy stays float32; fp16 gets a
    new, enabled scaler per call with torch's default initial scale."""
    for mode, pairs in setups.items():
        (ctx, scaler), (_ctx2, scaler2) = pairs
        with ctx:
            out = F.linear(x, w)
            dtype = str(torch.get_autocast_dtype("cpu")) if torch.is_autocast_enabled("cpu") else "off"
            loss = F.cross_entropy(out.flatten(0, 1), y)
        expect_equal(str(out.dtype), AMP_DTYPES[mode], f"amp_setup({mode!r}, 'cpu'): dtype of F.linear inside the context")
        expect_equal(dtype, AMP_DTYPES[mode] if mode != "none" else "off",
                     f"amp_setup({mode!r}, 'cpu'): autocast dtype inside the context ('off': autocast disabled)")
        expect_equal(str(loss.dtype), "torch.float32", f"amp_setup({mode!r}, 'cpu'): cross-entropy stays float32 inside the context")
        expect_equal([scaler is None, scaler2 is None], [mode != "fp16"] * 2, f"amp_setup({mode!r}, 'cpu'): scalers are None")
        if mode == "fp16":
            expect_equal(scaler is scaler2, False, "amp_setup('fp16', 'cpu') twice: a new GradScaler each call",
                         hint="a scaler carries its scale and step counts: every run needs its own.")
            expect_equal([scaler.is_enabled(), scaler2.is_enabled()], [True, True], "amp_setup('fp16', 'cpu'): scalers enabled")
            expect_close(scaler.get_scale(), 2.0 ** 16, "amp_setup('fp16', 'cpu'): initial loss scale S", rtol=0,
                         hint="use torch's default settings: GradScaler(device_type).")
            expect_close(scaler.scale(loss.detach()).item(), loss.item() * 2.0 ** 16, "scaler.scale(loss) = S * loss", rtol=1e-6)


# ---------------------------------------------------------------- E4: a clean exit


def cleanup_rank(rank, world_size, cleanup_on_exit, scale, fail_with):
    """Rank function: run `cleanup_on_exit(work, ...)` where `work` all-reduces and then returns or
    raises `fail_with`; report the result or error, the barriers counted and the group's state."""
    torch.set_num_threads(1)

    def work(value, *, offset):
        t = torch.tensor([float(value) + offset], dtype=torch.float64)
        dist.all_reduce(t)
        if fail_with is not None:
            raise fail_with(f"rank {rank}: loss is NaN at step {int(scale)}")
        return t.item()

    seen = {"result": None, "error": None}
    with CommCounter() as comm:
        try:
            seen["result"] = cleanup_on_exit(work, scale * (rank + 1), offset=0.5)
        except Exception as e:  # noqa: BLE001 - the test checks which error came back
            seen["error"] = f"{type(e).__name__}: {e}"
    seen["barriers"] = comm.calls["barrier"]
    seen["initialized"] = dist.is_initialized()
    if not seen["initialized"]:  # something for the launcher's own destroy_process_group()
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    return seen


def expect_cleanup(seen: list[dict], scale: float, fail_with) -> None:
    """What every rank of `cleanup_rank` saw: on success fn's result (the all-reduced value,
    computed here) and one barrier; on an error fn's own exception and no barrier; the process
    group destroyed either way."""
    world = len(seen)
    total = sum(scale * (r + 1) + 0.5 for r in range(world))  # the all-reduced value
    for rank, s in enumerate(seen):
        print(f"{'error' if fail_with else 'success'} run, rank {rank}: {s}")
        tag = f"{world} ranks, fn {'raises' if fail_with else 'returns'}, rank {rank}"
        if fail_with is None:
            expect_equal(s["error"], None, f"{tag}: exception from cleanup_on_exit",
                         hint="fn returned normally, so cleanup_on_exit must return too.")
            expect_close(s["result"], total, f"{tag}: cleanup_on_exit returns fn's result", rtol=1e-12,
                         hint="call fn(*args, **kwargs) and return what it returns.")
            expect_between(s["barriers"], 1, 1, f"{tag}: dist.barrier() calls",
                           hint="on success, one dist.barrier() before destroying the group.")
        else:
            expect_equal(s["error"], f"{fail_with.__name__}: rank {rank}: loss is NaN at step {int(scale)}",
                         f"{tag}: the exception that leaves cleanup_on_exit",
                         hint="re-raise fn's own exception unchanged (try/finally does).")
            expect_equal(s["barriers"], 0, f"{tag}: dist.barrier() calls",
                         hint="no barrier after an error: a failed peer never arrives, the barrier would wait until the timeout.")
        expect_equal(s["initialized"], False, f"{tag}: dist.is_initialized() afterwards",
                     hint="call dist.destroy_process_group() in a finally block.")
