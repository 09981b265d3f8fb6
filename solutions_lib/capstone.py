"""Reference answers of assignment 13 (the capstone), withheld from graded kernels.

Exercises: the assembly of the student's pieces into one trainer of the course's small GPT
(`solutions_lib.dist.gpt.GPT`) on a dp x tp x pp layout (`build_rank`, `train_step`,
`save_rank`, `load_rank`); the pieces here are the course's copies
(`solutions_lib.dist.probes_capstone`), the notebook's answer uses the student's own.

Theory: the projection of a layout to a real cluster with the course's planner
(`solutions_lib.parallel.layout_step_time` / `layout_memory_per_rank`): `project_run` (step
time, tokens per second, MFU, days, memory) and `calibrate_projection` (the planner's prediction
corrected by the ratios measured on a small run).
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["build_rank", "train_step", "save_rank", "load_rank", "project_run", "calibrate_projection",
           "bench_capstone"]


# ---------------------------------------------------------------- exercises: the trainer


class _Stage(nn.Module):
    """This rank's part of the GPT: embeddings on the first stage, its layers as TP blocks, ln_f
    and the (tied) output layer on the last stage; on a last stage that is not the first, `head`
    is a copy of the token embedding kept equal by summing the two gradients."""

    def __init__(self, gpt, mesh, TPBlock):
        super().__init__()
        L = len(gpt.blocks)
        k = L // mesh.pp
        lo, hi = mesh.pp_rank * k, (mesh.pp_rank + 1) * k
        self.first, self.last = mesh.first, mesh.last
        self.blocks = nn.ModuleList(TPBlock(b, mesh.tp_group) for b in gpt.blocks[lo:hi])
        if self.first:
            self.tok, self.pos = gpt.tok, gpt.pos
        if self.last:
            self.ln_f = gpt.ln_f
            if not self.first:
                self.head = nn.Parameter(gpt.tok.weight.detach().clone())

    def forward(self, x):
        if self.first:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for b in self.blocks:
            x = b(x)
        if self.last:
            return F.linear(self.ln_f(x), self.tok.weight if self.first else self.head)
        return x


def _ce(logits, y):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def build_rank(gpt, mesh, TPBlock=None):
    """This rank's part of `gpt` on `mesh` (an nn.Module)."""
    if TPBlock is None:
        from .dist.probes_capstone import TPBlock
    if len(gpt.blocks) % mesh.pp:
        raise ValueError(f"pp={mesh.pp} must divide the {len(gpt.blocks)} layers")
    return _Stage(gpt, mesh, TPBlock)


def train_step(model, optimizer, batch, mesh, micro_batches, PipeStage=None, run_1f1b=None, average_gradients=None):
    """One step: 1F1B over the micro-batches (one forward + backward when pp == 1), the tied
    embedding's gradients summed over (first, last) stage, DP averaging, AdamW. Returns the
    replica's mean loss on the last stage, None elsewhere."""
    if PipeStage is None:
        from .dist.probes_capstone import PipeStage, average_gradients, run_1f1b
    x, y = batch
    m = micro_batches
    if x.shape[0] % m:
        raise ValueError(f"micro_batches={m} must divide the replica's batch of {x.shape[0]}")
    optimizer.zero_grad(set_to_none=True)
    xs, ys = list(x.chunk(m)), list(y.chunk(m))
    if mesh.pp == 1:
        losses = []
        for xi, yi in zip(xs, ys):
            loss = _ce(model(xi), yi)
            (loss / m).backward()
            losses.append(float(loss.detach()))
    else:
        h = model.blocks[0].ln1.normalized_shape[0]
        stage = PipeStage(model, (x.shape[0] // m, x.shape[1], h), mesh.pp_group, _ce, torch.float64)
        losses = run_1f1b(stage, xs, ys)
        tied = model.tok.weight if mesh.first else (model.head if mesh.last else None)
        if tied is not None:
            dist.all_reduce(tied.grad, group=mesh.embed_group)
    if mesh.dp > 1:
        average_gradients(list(model.parameters()), mesh.dp_group)
    optimizer.step()
    return sum(losses) / m if mesh.last else None


def save_rank(model, optimizer, path):
    """Everything this rank needs to resume bit-exactly: its parameters and its AdamW state."""
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)


def load_rank(model, optimizer, path):
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])


# ---------------------------------------------------------------- theory: the projection


def _num(name, v, positive=True):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (v <= 0 if positive else v < 0):
        raise ValueError(f"{name} must be a finite number {'> 0' if positive else '>= 0'}, got {v!r}")
    return float(v)


def project_run(layout, model, cluster, train_tokens):
    """The planner's projection of a whole training run: {"step_time" (s), "tokens_per_second",
    "mfu" (compute / total of one step: 6 N T over N_gpu F), "days", "memory_gb" (per GPU, 1e9
    bytes), "fits" (memory <= cluster["memory"])}."""
    from .upstream import layout_memory_per_rank, layout_step_time

    D = _num("train_tokens", train_tokens)
    st = layout_step_time(layout, model, cluster)
    mem = layout_memory_per_rank(layout, model)["total"]
    tokens = model["global_batch"] * model["seq_len"]
    total = st["total"]
    return {"step_time": total, "tokens_per_second": tokens / total, "mfu": st["compute"] / total,
            "days": D / tokens * total / 86400.0, "memory_gb": mem / 1e9, "fits": mem <= cluster["memory"]}


_PARTS = ("compute", "communication", "bubble")


def calibrate_projection(predicted_big, predicted_small, measured_small):
    """The planner's prediction for the big run corrected part by part with what the small run
    showed: for each part of ("compute", "communication", "bubble"), predicted_big[part] x
    measured_small[part] / predicted_small[part]; "total" their sum. A planner dict
    ({"compute", "tp", "pp", "bubble", "dp"}) counts tp + pp + dp as communication."""
    def parts(d, what):
        if not isinstance(d, dict):
            raise ValueError(f"{what} must be a dict, got {d!r}")
        if "communication" not in d and all(k in d for k in ("tp", "pp", "dp")):
            d = {**d, "communication": d["tp"] + d["pp"] + d["dp"]}
        try:
            return {k: _num(f"{what}[{k!r}]", d[k], positive=False) for k in _PARTS}
        except KeyError as e:
            raise ValueError(f"{what} has no {e.args[0]!r}") from None

    big, small, meas = parts(predicted_big, "predicted_big"), parts(predicted_small, "predicted_small"), \
        parts(measured_small, "measured_small")
    out = {}
    for k in _PARTS:
        if small[k] == 0:
            if big[k] != 0:
                raise ValueError(f"predicted_small[{k!r}] is 0: no ratio to carry to the big run")
            out[k] = 0.0
        else:
            out[k] = big[k] * meas[k] / small[k]
    out["total"] = sum(out[k] for k in _PARTS)
    return out


def bench_capstone(out=print) -> bool:
    """The capstone's reference trainer on dp 2 x tp 2 and tp 2 x pp 2 gloo ranks against one
    process (losses), and bit-exact resume on tp 2 x pp 2."""
    import tempfile

    from .dist import probes_capstone as P

    fns = (build_rank, train_step, save_rank, load_rank)
    ref = P.one_process_losses(0, 1, 4, 8)
    ok = True
    for lay in ((2, 2, 1), (1, 2, 2)):
        got = P.replica_losses(P.run_layout(fns, lay, 4))
        err = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
        out(f"dp x tp x pp = {lay}: losses {['%.6f' % v for v in got]}, max rel. error vs one process {err:.1e}")
        ok = ok and err < 1e-9
    with tempfile.TemporaryDirectory() as d:
        path = d + "/r{rank}.pt"
        whole = P.run_layout(fns, (1, 2, 2), 4)
        P.run_layout(fns, (1, 2, 2), 2, save_path=path)
        rest = P.run_layout(fns, (1, 2, 2), 4, start=2, load_path=path)
    same = P.replica_losses(whole)[2:] == P.replica_losses(rest) and all(
        all(torch.equal(a["state"][k], b["state"][k]) for k in a["state"]) for a, b in zip(whole, rest))
    out(f"resume after 2 of 4 steps on tp 2 x pp 2: bit-exact {same}")
    return ok and same
