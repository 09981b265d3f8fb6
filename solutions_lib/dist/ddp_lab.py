"""Models, data and a training loop for the data-parallel exercises (not a DDP implementation:
the graded code brings its own gradient synchronisation, this module only drives it).

`LabNet` is a tiny next-token model that has every case a gradient synchroniser must handle:
an embedding tied to the output layer (one Parameter under two names), an optional frozen layer
(``requires_grad=False``) and an ``extra`` layer that only batches flagged ``use_extra`` run
through (a parameter some ranks do not use in a step).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
import torch._dynamo  # noqa: F401 - see below
import torch.nn.functional as F
from torch import nn

# An optimizer's first step (and torch DDP's constructor) imports torch._dynamo, 1-4 s on a
# busy 2-core machine. Importing it here, in the parent, lets every forked rank inherit it
# instead of paying for it on each launch.

__all__ = ["LabNet", "lab_batches", "lab_loss", "lab_reference", "train_on_rank"]


class LabNet(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab): embedding, `depth` tanh Linear(d, d) layers
    (layer `frozen_layer` frozen), an optional extra layer, output layer (tied to the embedding
    when `tied`)."""

    def __init__(self, vocab: int = 13, d: int = 8, depth: int = 3, frozen_layer: int | None = 1,
                 tied: bool = True, extra: bool = True, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))
        if frozen_layer is not None:
            self.layers[frozen_layer].requires_grad_(False)
        self.extra = nn.Linear(d, d) if extra else None
        self.out = nn.Linear(d, vocab, bias=False)
        if tied:
            self.out.weight = self.emb.weight

    def forward(self, tokens: torch.Tensor, use_extra: bool = False) -> torch.Tensor:
        h = self.emb(tokens)
        for layer in self.layers:
            h = torch.tanh(layer(h))
        if use_extra and self.extra is not None:
            h = h + torch.tanh(self.extra(h))
        return self.out(h)


def lab_batches(world_size: int, steps: int, vocab: int = 13, batch: int = 3, seq: int = 6, seed: int = 0,
                extra_ranks: Sequence[int] = ()) -> list[list[tuple[torch.Tensor, bool]]]:
    """``steps`` lists of ``world_size`` micro-batches ``(tokens, use_extra)``; the ranks in
    `extra_ranks` run the extra layer."""
    g = torch.Generator().manual_seed(seed)
    return [[(torch.randint(0, vocab, (batch, seq + 1), generator=g), r in extra_ranks)
             for r in range(world_size)] for _ in range(steps)]


def lab_loss(model: nn.Module, batch) -> torch.Tensor:
    """Next-token cross-entropy of one micro-batch ``(tokens, use_extra)``."""
    tokens, use_extra = batch
    logits = model(tokens[:, :-1], use_extra)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def train_on_rank(model: nn.Module, rank: int, batches, after_backward: Callable[[], object],
                  lr: float = 1e-2, weight_decay: float = 0.1, forward: nn.Module | None = None) -> list[float]:
    """AdamW steps on this rank's micro-batches: zero_grad, loss.backward(), ``after_backward()``
    (the gradient synchronisation under test), step. `forward` runs the batches (default: the
    model itself). Returns this rank's losses."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for step in batches:
        opt.zero_grad(set_to_none=True)
        loss = lab_loss(forward or model, step[rank])
        loss.backward()
        after_backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def lab_reference(model: nn.Module, batches, lr: float = 1e-2, weight_decay: float = 0.1) -> list[float]:
    """`grad_accumulation_reference` with the optimizer and loss of `train_on_rank`: the
    parameters N ranks must end with, computed in one process (in place on `model`)."""
    from .ddp import grad_accumulation_reference

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    return grad_accumulation_reference(model, opt, lab_loss, batches)
