"""Test machinery for 06 exercises (not an answer): the timing harnesses `time_matmul` and
`measure_tokens_per_second` run on the scripted machines of `probes_compute` (a clock that moves
only by scripted durations), and FLOPs per token counted by torch's FlopCounterMode. Meant for
test cells that already run in the student's kernel (they swap the notebook's `torch` and `time`
for the scripted ones, so `namespace` is the notebook's `globals()`).
"""
from __future__ import annotations

import torch

from .grading import expect_close, no_delegation
from .probes_compute import ScriptedGemmMachine, ScriptedTrainingModel

__all__ = ["check_scripted_time_matmul", "check_scripted_tokens_per_second", "counted_flops_per_token"]


def counted_flops_per_token(model_cls, cfg: dict, batch: int = 2) -> float:
    """FLOPs of one forward and backward of a fresh `model_cls(**cfg)` on `batch` random sequences,
    counted by FlopCounterMode, per token."""
    from torch.utils.flop_counter import FlopCounterMode

    model = model_cls(**cfg)
    idx = torch.randint(0, cfg["vocab"], (batch, cfg["seq_len"]))
    with FlopCounterMode(display=False) as counter:
        model(idx).sum().backward()
    return counter.get_total_flops() / idx.numel()


def check_scripted_time_matmul(time_matmul, namespace: dict, ref) -> None:
    """time_matmul(*shape, min_time=0.05, trials=...) on a scripted machine (1 ms clock ticks, a 1 s first
    call, torch.randn 1 us per element) against the machine's true seconds per call, within 5%."""
    from . import upstream

    for trials, shape in [(1, (64, 64, 64)), (3, (96, 32, 128))]:
        machine = ScriptedGemmMachine(flops=1e9, overhead=1e-4, tick=1e-3, first_call=1.0, create_cost=1e-6)
        with upstream.swapped(namespace, **machine.modules()), no_delegation("time_matmul", ref):
            got = time_matmul(*shape, min_time=0.05, trials=trials)
        expect_close(got, machine.seconds_per_call(*shape), f"time_matmul{shape} with min_time=0.05, trials={trials} on the "
                     "scripted machine (1 ms clock ticks, a 1 s first call, torch.randn 1 us per element)", rtol=0.05, unit="s",
                     hint="Make A and B before timing, call torch.mm once untimed, repeat the call until min_time has passed "
                          "(one call is below the clock's tick), divide by the number of calls and keep the best trial.")


def check_scripted_tokens_per_second(measure_tokens_per_second, namespace: dict, ref, seed: int) -> None:
    """measure_tokens_per_second on a scripted model (forward 0.1 s, the first 2 s; backward 0.2 s;
    optimizer step 0.05 s) against its true rate, within 5%, for two (steps, warmup_steps)."""
    from . import upstream

    for steps, warm in [(3, 1), (2, 3)]:
        torch.manual_seed(seed)
        scripted = ScriptedTrainingModel(16, forward=0.1, backward=0.2, optimizer_step=0.05, first_forward=2.0)
        with upstream.swapped(namespace, **scripted.modules()), scripted.timing(), no_delegation("measure_tokens_per_second", ref):
            got = measure_tokens_per_second(scripted, 2, 8, 16, steps=steps, warmup_steps=warm)
        expect_close(got, scripted.tokens_per_second(2, 8), f"measure_tokens_per_second(steps={steps}, warmup_steps={warm}) on a "
                     "scripted model (forward 0.1 s, the first 2 s; backward 0.2 s; optimizer step 0.05 s)", rtol=0.05,
                     unit="tokens/s",
                     hint="Time only the `steps` full training steps (forward, loss, backward, optimizer step) after the untimed "
                          "warm-up, and count batch_size * seq_len tokens per timed step.")
