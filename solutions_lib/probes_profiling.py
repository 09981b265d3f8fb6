"""Test machinery for assignment 09, exercises 2 (profiling one training step); not an answer.

The notebook's test cells grade trace parsers and a memory measurement on traces and models that
this module makes, so that each cell reads as a few lines of intent:

    fresh = profile_gpt(dict(vocab=40, seq_len=12, layers=3, d_model=32, heads=2), batch=3, seed=5)
    with no_delegation("self_times", *analysis_modules()):   # torch's own analysis is no answer
        got = self_times(load_trace(TRACE_PATH))              # a fresh copy: the answer may mutate it
    model, opt, x, y = gpt_case(cfg, batch, seed)             # a seeded GPT, AdamW and a batch
    gpt_params(V, S, L, h), gpt_activations(V, L, h, a, b, s) # the closed forms the memory is held to

The trace parsers the tests compare with stay in the hidden tests (they are the answers).
"""
from __future__ import annotations

import importlib
import json
import os
import tempfile

import torch

__all__ = ["analysis_modules", "gpt_activations", "gpt_case", "gpt_params", "load_trace", "profile_gpt"]

#: modules whose code an answer may not run: torch's profiler analysis (key_averages, events) and the
#: course's own memory measurement
ANALYSIS = ("torch.autograd.profiler_util", "torch.profiler.profiler", "torch.autograd.profiler", "solutions_lib.memory")


def analysis_modules(names=ANALYSIS) -> tuple:
    """The modules `no_delegation` forbids while an answer of this notebook runs."""
    return tuple(importlib.import_module(m) for m in names)


def load_trace(path: str) -> dict:
    """A fresh copy of the Chrome trace at `path` (each answer gets its own: it may change it)."""
    with open(path) as f:
        return json.load(f)


def gpt_case(cfg: dict, batch: int, seed: int):
    """(model, AdamW, x, y): a seeded `solutions_lib.dist.gpt.GPT(**cfg)`, its optimizer and a batch of
    random token ids, targets shifted by one (both contiguous)."""
    from .dist.gpt import GPT

    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    torch.manual_seed(seed)
    m = GPT(**cfg)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg["vocab"], (batch, cfg["seq_len"] + 1), generator=g)
    return m, torch.optim.AdamW(m.parameters(), lr=1e-3), idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def profile_gpt(cfg: dict, batch: int, seed: int) -> dict:
    """The Chrome trace (as a dict) of one profiled training step of a fresh GPT, after one warm-up
    step, with the notebook's `forward` / `backward` / `optimizer` annotations and shapes recorded."""
    model, opt, x, y = gpt_case(cfg, batch, seed)

    def step():
        with torch.profiler.record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, cfg["vocab"]), y.reshape(-1))
        with torch.profiler.record_function("backward"):
            loss.backward()
        with torch.profiler.record_function("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        return load_trace(path)


def gpt_params(V: int, S: int, L: int, h: int) -> int:
    """P of `solutions_lib.dist.gpt.GPT`: token and position embeddings (the output layer is tied to
    the token embedding), L blocks of 12 h^2 + 13 h, the final LayerNorm."""
    return V * h + S * h + L * (12 * h * h + 13 * h) + 2 * h


def gpt_activations(V: int, L: int, h: int, a: int, b: int, s: int) -> int:
    """Bytes that GPT + cross-entropy save for the backward, fp32 on a CPU (the notebook's 'Reading
    the numbers'): per block 64 sbh, LayerNorm statistics 16 sb and the attention's log-sum-exp
    4 asb; then the final LayerNorm (8 sbh + 8 sb), the log-softmax 4 sbV, the positions 8 s (int64)
    and the loss's normaliser (4)."""
    per_block = 64 * s * b * h + 16 * s * b + 4 * a * s * b
    return L * per_block + 8 * s * b * h + 8 * s * b + 4 * s * b * V + 8 * s + 4
