"""Test machinery for assignment 11, exercises 6 (not an answer): vocabulary-parallel embedding and
cross-entropy, and dropout seeds under tensor parallelism, measured from outside the student's code.

Each `*_rank` function runs inside a rank (under `launch_graded`), calls the student's answer on a
seeded case and returns plain numbers (docs/GRADING.md rule 5); the `check_*` functions launch it
and check, in the notebook, against a one-process oracle computed here with torch:

    check_embedding(VocabParallelEmbedding, world, case)   # F.embedding; rows held; bytes sent
    check_cross_entropy(fn, world, case)                   # F.cross_entropy; largest tensor; bytes sent
    check_dropout_rng(TPDropoutRNG, layouts, base_seed)    # masks compared across dp x tp ranks

What is measured: `TensorPeak` records the largest tensor any torch function returns inside the
call and the largest tensor autograd saves for the backward (`saved_tensors_hooks`), so a
cross-entropy that gathers the (N, V) logits shows N V elements however it is written; bytes are
counted with `CommCounter` over the forward and the backward; dropout masks are those of
`F.dropout` on a tensor of ones inside the student's `fork`, compared across ranks.
"""
from __future__ import annotations

import itertools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..grading import GradingError
from .counting import CommCounter
from .probes_pipeline import LargestTensor

__all__ = ["TensorPeak", "embedding_case", "embedding_rank", "check_embedding", "ce_case", "ce_rank",
           "check_cross_entropy", "dropout_rank", "check_dropout_rng", "boundary_ids"]


def _fail(what: str, e: BaseException, hint: str = "") -> GradingError:
    said = f": {str(e)[:300]}" if str(e) else ""
    return GradingError(f"{what}: your code raised {type(e).__name__}{said}.{' ' + hint if hint else ''}")


class TensorPeak:
    """`with TensorPeak() as peak:` -> `peak.numel`, `peak.shape`: the largest tensor that a torch
    function returned inside the block (tensors passed in are not counted) or that autograd saved
    for the backward there (`saved_tensors_hooks`, which sees what a custom Function saves too)."""

    def __init__(self):
        self.numel, self.shape = 0, None
        self._mode = LargestTensor()
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t):
        if isinstance(t, torch.Tensor) and t.numel() > self.numel:
            self.numel, self.shape = t.numel(), tuple(t.shape)
        return t

    def __enter__(self):
        self._hooks.__enter__()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        self._hooks.__exit__(*exc)
        if self._mode.numel > self.numel:
            self.numel, self.shape = self._mode.numel, self._mode.shape
        return False


def _sent(comm: CommCounter) -> int:
    return int(sum(comm.bytes.values()))


def boundary_ids(vocab: int, world: int) -> list[int]:
    """The ids on both sides of every shard boundary, and the two ends of the vocabulary."""
    k = vocab // world
    ids = {0, vocab - 1}
    for r in range(1, world):
        ids |= {r * k - 1, r * k}
    return sorted(ids)


def _token_ids(g: torch.Generator, vocab: int, world: int, n: int) -> torch.Tensor:
    edge = torch.tensor(boundary_ids(vocab, world), dtype=torch.long)
    ids = torch.cat([edge, torch.randint(0, vocab, (max(n - len(edge), 0),), generator=g)])[:n]
    return ids[torch.randperm(len(ids), generator=g)]


# ----------------------------------------------------------------------------------------- embedding

def embedding_case(seed: int, vocab: int, hidden: int, shape, world: int):
    """A float64 nn.Embedding(vocab, hidden), token ids of `shape` (every shard boundary among them)
    and a weight for the upstream gradient, all from `seed`."""
    g = torch.Generator().manual_seed(seed)
    emb = nn.Embedding(vocab, hidden).double()
    with torch.no_grad():
        emb.weight.copy_(torch.randn(vocab, hidden, generator=g, dtype=torch.float64))
    n = int(np.prod(shape))
    tokens = _token_ids(g, vocab, world, n).reshape(shape)
    w = torch.randn(*shape, hidden, generator=g, dtype=torch.float64)
    return emb, tokens, w


def embedding_rank(rank: int, world: int, cls, case: dict) -> dict:
    """The student's embedding on this rank: output, the rows it holds, its gradient, bytes sent."""
    emb, tokens, w = embedding_case(case["seed"], case["vocab"], case["hidden"], case["shape"], world)
    at = f"VocabParallelEmbedding(nn.Embedding({case['vocab']}, {case['hidden']})) on rank {rank} of {world}"
    try:
        layer = cls(emb)
    except Exception as e:  # noqa: BLE001
        raise _fail(f"{at}: building it", e) from None
    weight = getattr(layer, "weight", None)
    if not isinstance(weight, torch.Tensor):
        raise GradingError(f"{at}: self.weight is {type(weight).__name__}, not the (V/t, h) shard as an nn.Parameter.")
    held = int(sum(p.numel() for p in layer.parameters()))
    try:
        with CommCounter() as fwd:
            y = layer(tokens)
        with CommCounter() as bwd:
            (y * w).sum().backward()
    except Exception as e:  # noqa: BLE001
        raise _fail(f"{at}: forward and backward on tokens of shape {tuple(case['shape'])}", e) from None
    return dict(y=y.detach().clone(), weight=weight.detach().clone(), grad=None if weight.grad is None else weight.grad.clone(),
                held=held, sent=_sent(fwd) + _sent(bwd))


def check_embedding(cls, world: int, case: dict) -> None:
    """The student's VocabParallelEmbedding on `world` ranks against F.embedding in one process."""
    from ..grading import expect_between, expect_close, expect_equal
    from .graded import launch_graded

    emb, tokens, w = embedding_case(case["seed"], case["vocab"], case["hidden"], case["shape"], world)
    full = emb.weight.detach().clone().requires_grad_(True)
    y_ref = F.embedding(tokens, full)
    (y_ref * w).sum().backward()
    V, h, k = case["vocab"], case["hidden"], case["vocab"] // world
    n = tokens.numel()
    res = launch_graded(embedding_rank, world, args=(cls, case))
    tag = f"Embedding({V}, {h}) on {world} ranks, tokens {tuple(case['shape'])}"
    for r, rr in enumerate(res):
        expect_close(rr["weight"], full.detach()[r * k:(r + 1) * k], f"{tag}: self.weight on rank {r} (rows r V/t to (r+1) V/t)",
                     rtol=0, atol=0, hint="rank r keeps the rows [r V/t, (r+1) V/t) of the table.")
        expect_equal(rr["held"], k * h, f"{tag}: parameter elements held on rank {r} (V/t x h)",
                     hint="a rank keeps only its V/t rows; a full table on every rank is not vocabulary parallel.")
        expect_close(rr["y"], y_ref.detach(), f"{tag}: output on rank {r} vs F.embedding in one process", rtol=1e-12, atol=1e-12,
                     hint="every rank returns all the embeddings: the rows it does not hold must contribute zeros "
                          "before the sum over the ranks (token ids at the shard boundaries are in the input).")
        expect_close(rr["grad"] if rr["grad"] is not None else torch.zeros(k, h, dtype=torch.float64),
                     full.grad[r * k:(r + 1) * k], f"{tag}: gradient of self.weight on rank {r} vs one process",
                     rtol=1e-12, atol=1e-12, hint="the output is the same on every rank and so is its gradient: the "
                                                  "backward of the sum over the ranks passes it through (no all-reduce, "
                                                  "which would multiply it by t).")
        expect_between(rr["sent"], 0, n * h * 8, f"{tag}: bytes sent by rank {r} (forward and backward)",
                       unit="B", hint="only the output travels: one all-reduce of N x h numbers; never the table.")


# ------------------------------------------------------------------------------------- cross-entropy

def ce_case(seed: int, n: int, vocab: int, world: int, dtype=torch.float64, scale: float = 2.0,
            offset: float = 0.0):
    """Full logits (n, vocab) = scale * randn + offset, targets (every shard boundary among them) and
    a scalar weight for the upstream gradient, all from `seed`."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, vocab, generator=g, dtype=torch.float64) * scale + offset).to(dtype)
    targets = _token_ids(g, vocab, world, n)
    c = float(torch.rand((), generator=g, dtype=torch.float64) + 0.5)
    return logits, targets, c


def _dtype(name: str):
    return {"float64": torch.float64, "float32": torch.float32}[name]


def ce_rank(rank: int, world: int, fn, case: dict) -> dict:
    """The student's cross-entropy on this rank's logit columns: loss, gradient, largest tensor, bytes."""
    logits, targets, c = ce_case(case["seed"], case["n"], case["vocab"], world, _dtype(case["dtype"]),
                                 case.get("scale", 2.0), case.get("offset", 0.0))
    k = case["vocab"] // world
    shard = logits[:, rank * k:(rank + 1) * k].clone().requires_grad_(True)
    at = f"vocab_parallel_cross_entropy on rank {rank} of {world}, N={case['n']}, V={case['vocab']}, {case['dtype']}"
    try:
        with CommCounter() as fwd, TensorPeak() as peak:
            loss = fn(shard, targets)
        with CommCounter() as bwd:
            (loss * c).backward()
    except Exception as e:  # noqa: BLE001
        raise _fail(at, e) from None
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise GradingError(f"{at}: returned {type(loss).__name__} {tuple(getattr(loss, 'shape', ()))}, not a scalar tensor.")
    return dict(loss=float(loss.detach()), grad=None if shard.grad is None else shard.grad.detach().double(),
                peak=peak.numel, peak_shape=peak.shape, sent=_sent(fwd) + _sent(bwd), esize=shard.element_size())


def check_cross_entropy(fn, world: int, case: dict) -> None:
    """The student's vocab-parallel cross-entropy on `world` ranks against F.cross_entropy in one process
    (float64, on the same logits), with the largest tensor and the bytes each rank sent."""
    from ..grading import expect_between, expect_close
    from .graded import launch_graded

    logits, targets, c = ce_case(case["seed"], case["n"], case["vocab"], world, _dtype(case["dtype"]),
                                 case.get("scale", 2.0), case.get("offset", 0.0))
    full = logits.double().requires_grad_(True)
    loss_ref = F.cross_entropy(full, targets)
    (loss_ref * c).backward()
    n, V, k = case["n"], case["vocab"], case["vocab"] // world
    tol = dict(rtol=1e-9, atol=1e-12) if case["dtype"] == "float64" else dict(rtol=1e-4, atol=1e-6)
    res = launch_graded(ce_rank, world, args=(fn, case))
    tag = f"N={n}, V={V} on {world} ranks, {case['dtype']} logits" + (
        f" around {case['offset']:g}" if case.get("offset") else "")
    for r, rr in enumerate(res):
        expect_close(rr["loss"], float(loss_ref.detach()), f"{tag}: loss on rank {r} vs F.cross_entropy in one process", **tol,
                     hint="a non-finite loss with large logits means exp overflowed: subtract the max over the whole "
                          "vocabulary (all ranks) first." if case.get("offset") else
                     "log(sum of exp over all V logits) - the target's logit, averaged over the N tokens; the target "
                     "logit comes from the one rank that holds it.")
        grad = rr["grad"] if rr["grad"] is not None else torch.zeros(n, k, dtype=torch.float64)
        expect_close(grad, full.grad[:, r * k:(r + 1) * k], f"{tag}: gradient of rank {r}'s logit columns vs one process",
                     **tol, hint="(softmax - onehot(target)) / N on this rank's columns, times the incoming gradient; "
                                 "an all-reduce in the backward multiplies it by t.")
        if case.get("measure", True):
            expect_between(rr["peak"], 0, n * k + 4 * n, f"{tag}: largest tensor created or saved on rank {r} (elements)",
                           hint="at most N x V/t + 4N elements: the full (N, V) logits must never be gathered.")
            expect_between(rr["sent"] / rr["esize"], 0, (world + 4) * n,
                           f"{tag}: numbers sent by rank {r} (forward and backward, bytes / element size)",
                           hint="a few numbers per token (max, sum of exp, target logit): at most (t + 4) N; "
                                "gathering the logits sends N x V.")


# ------------------------------------------------------------------------------------------- dropout

def _masks(rng, n: int, layers: int) -> dict:
    out = {"replicated": [], "sharded": []}
    ones = torch.ones(n)
    for _ in range(layers):
        for region in ("sharded", "replicated"):
            with rng.fork(region):
                out[region].append(F.dropout(ones, 0.5, training=True) != 0)
    return out


def dropout_rank(rank: int, world: int, cls, layouts, base_seed: int, n: int, layers: int) -> list[dict]:
    """For each (dp, tp) layout (TP innermost: rank = d tp + t): the masks F.dropout draws inside the
    student's forks, the default generator after them, and the masks of a second object."""
    reports = []
    for dp, tp in layouts:
        d, t = divmod(rank, tp)
        at = f"TPDropoutRNG({base_seed}, dp_rank={d}, tp_rank={t}) on rank {rank} of {dp}x{tp}"
        outside = 1000 + 17 * rank
        torch.manual_seed(outside)
        try:
            masks = _masks(cls(base_seed, d, t), n, layers)
            after = torch.rand(8)
            again = _masks(cls(base_seed, d, t), n, 1)
        except Exception as e:  # noqa: BLE001
            raise _fail(at, e) from None
        torch.manual_seed(outside)
        reports.append(dict(d=d, t=t, masks=masks, again=again, after=after, untouched=torch.rand(8)))
    return reports


def _differ(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a != b).double().mean())


def check_dropout_rng(cls, layouts, base_seed: int, n: int = 2048, layers: int = 3) -> None:
    """The student's TPDropoutRNG on 4 ranks for each (dp, tp) layout: which masks agree, which differ."""
    from ..grading import expect_between, expect_equal
    from .graded import launch_graded

    world = 4
    res = launch_graded(dropout_rank, world, args=(cls, list(layouts), base_seed, n, layers))
    for i, (dp, tp) in enumerate(layouts):
        reps = [res[r][i] for r in range(world)]
        tag = f"{dp}x{tp} (dp x tp) ranks, base_seed {base_seed}"
        same, cross_dp, sharded, own, layer_to_layer = [], [], [], [], []
        for a, b in itertools.combinations(reps, 2):
            for layer in range(layers):
                ra, rb = a["masks"]["replicated"][layer], b["masks"]["replicated"][layer]
                if a["d"] == b["d"]:
                    same.append(bool(torch.equal(ra, rb)))
                else:
                    cross_dp.append(_differ(ra, rb))
                sharded.append(_differ(a["masks"]["sharded"][layer], b["masks"]["sharded"][layer]))
        for a in reps:
            for layer in range(layers):
                own.append(_differ(a["masks"]["replicated"][layer], a["masks"]["sharded"][layer]))
                if layer:
                    for region in ("replicated", "sharded"):
                        layer_to_layer.append(_differ(a["masks"][region][layer], a["masks"][region][layer - 1]))
        if same:
            expect_equal(same, [True] * len(same), f"{tag}: replicated-region masks equal across the TP ranks of a replica",
                         hint="a replicated activation is one tensor held t times: its mask must be the same on every "
                              "TP rank of the replica (the same stream there).")
        if cross_dp:
            expect_between(np.array(cross_dp), 0.3, 0.7, f"{tag}: share of positions where replicated-region masks of "
                           "two DP replicas differ", hint="replicas see different micro-batches: their streams must "
                           "be independent (about half the positions differ at p = 0.5).")
        expect_between(np.array(sharded), 0.3, 0.7, f"{tag}: share of positions where sharded-region masks of two "
                       "ranks differ", hint="each TP rank holds a different shard (its own heads): its stream must be "
                       "its own, independent of every other rank's.")
        expect_between(np.array(own), 0.3, 0.7, f"{tag}: share of positions where a rank's replicated and sharded "
                       "masks differ", hint="the two regions are two independent streams.")
        expect_between(np.array(layer_to_layer), 0.3, 0.7, f"{tag}: share of positions where a region's masks of "
                       "consecutive forks differ", hint="a region's stream carries on from where the previous fork "
                       "left it; seeding it again at every fork repeats the same mask in every layer.")
        for r, rep in enumerate(reps):
            expect_equal(rep["after"].tolist(), rep["untouched"].tolist(), f"{tag}: torch's default generator on rank "
                         f"{r} after the forks vs never forked", hint="restore the default generator's state when "
                         "the block ends, so the code outside draws as if the fork had not happened.")
            expect_equal([torch.equal(rep["again"][g][0], rep["masks"][g][0]) for g in ("replicated", "sharded")],
                         [True, True], f"{tag}: rank {r}'s first masks from a second object with the same arguments",
                         hint="the streams come from the arguments only (seeded), not from global state.")
