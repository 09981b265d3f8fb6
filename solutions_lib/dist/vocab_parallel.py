"""Vocabulary parallelism (Megatron-LM, Shoeybi et al. 2019, section 3): the embedding table and the
output logits split over the tensor-parallel ranks along the vocabulary.

At V = 128k (Llama 3's 128,256-token vocabulary) one sequence of 8k tokens has 8192 x 128256 logits:
1.05e9 numbers, 4.2 GB in float32, and the embedding table and the output layer are the two largest
matrices of a small model. Splitting both along the vocabulary over t ranks keeps V/t rows of the
table and V/t logits per token on each rank; the softmax cross-entropy then needs only three numbers
per token from the other ranks (the max, the sum of exponentials, the target's logit), never the
logits themselves.

    emb = VocabParallelEmbedding(nn.Embedding(V, h))     # keeps rows [r V/t, (r+1) V/t)
    x = emb(tokens)                                      # (..., h), the same on every rank
    loss = vocab_parallel_cross_entropy(logits_shard, targets)   # logits_shard (N, V/t)

Both work on the default process group (or `group=`). They are the course's reference answers of
assignment 11, exercises 6.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["VocabParallelEmbedding", "vocab_parallel_cross_entropy", "vocab_range"]


def vocab_range(vocab_size: int, rank: int, world: int) -> tuple[int, int]:
    """The token ids [start, end) that rank `rank` of `world` holds; ValueError unless world divides V."""
    if world < 1 or vocab_size < 1:
        raise ValueError(f"vocab_size and world must be >= 1, got {vocab_size} and {world}")
    if vocab_size % world:
        raise ValueError(f"the tensor-parallel size {world} must divide the vocabulary size {vocab_size}")
    k = vocab_size // world
    return rank * k, (rank + 1) * k


class _SumOverRanks(torch.autograd.Function):
    """Megatron's g: all-reduce (sum) forward, identity backward (the output is replicated)."""

    @staticmethod
    def forward(ctx, x, group):
        y = x.contiguous().clone()
        dist.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class VocabParallelEmbedding(nn.Module):
    """Rows [r V/t, (r+1) V/t) of `embedding`'s table on rank r; forward gives the full embeddings.

    Each rank looks up the tokens it holds, writes zeros for the others, and one all-reduce (sum) of
    the (..., h) output completes every row: the only traffic is the output, never the table."""

    def __init__(self, embedding: nn.Embedding, group=None):
        super().__init__()
        self.group = group
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        self.vocab_size = embedding.num_embeddings
        self.start, self.end = vocab_range(self.vocab_size, rank, world)
        self.weight = nn.Parameter(embedding.weight.detach()[self.start:self.end].clone())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dtype.is_floating_point or tokens.dtype == torch.bool:
            raise ValueError(f"tokens must be an integer tensor, got {tokens.dtype}")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size}), got [{int(tokens.min())}, {int(tokens.max())}]")
        mine = (tokens >= self.start) & (tokens < self.end)
        local = torch.where(mine, tokens - self.start, torch.zeros_like(tokens))
        part = F.embedding(local, self.weight) * mine.unsqueeze(-1).to(self.weight.dtype)
        return _SumOverRanks.apply(part, self.group)


class _VocabParallelCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, group):
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        n, k = logits.shape
        start = rank * k
        # 1. the max over the whole vocabulary: shift by it so that exp never overflows
        m = logits.detach().max(dim=1).values
        dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
        shifted = logits.detach() - m.unsqueeze(1)
        # 2. the target's shifted logit: only the rank that holds it contributes
        mine = (targets >= start) & (targets < start + k)
        local = torch.where(mine, targets - start, torch.zeros_like(targets))
        target_logit = shifted.gather(1, local.unsqueeze(1)).squeeze(1) * mine.to(shifted.dtype)
        # 3. the sum of exponentials; the two sums travel in one all-reduce of 2N numbers
        exp = shifted.exp()
        sums = torch.stack([exp.sum(dim=1), target_logit])
        dist.all_reduce(sums, group=group)
        sum_exp, target_logit = sums[0], sums[1]
        loss = (sum_exp.log() - target_logit).mean()
        exp.div_(sum_exp.unsqueeze(1))                 # this rank's columns of the softmax
        ctx.save_for_backward(exp, local, mine)
        return loss

    @staticmethod
    def backward(ctx, grad):
        softmax, local, mine = ctx.saved_tensors
        g = softmax.clone()
        rows = torch.arange(g.shape[0])
        g[rows, local] -= mine.to(g.dtype)
        return g * (grad / g.shape[0]), None, None


def vocab_parallel_cross_entropy(logits_shard: torch.Tensor, targets: torch.Tensor, group=None) -> torch.Tensor:
    """Mean cross-entropy over N tokens whose logits are split along the vocabulary.

    `logits_shard` (N, V/t): this rank's columns [r V/t, (r+1) V/t) of the logits; `targets` (N,):
    token ids in [0, V), the same on every rank. Returns the loss (the same on every rank), equal to
    `F.cross_entropy(full_logits, targets)`; its gradient with respect to `logits_shard` is this
    rank's columns of (softmax - onehot) / N. Forward sends 3N numbers (one all-reduce MAX of N, one
    SUM of 2N), backward nothing; the largest tensor is N x V/t."""
    world = dist.get_world_size(group)
    if logits_shard.dim() != 2:
        raise ValueError(f"logits_shard must be (N, V/t), got shape {tuple(logits_shard.shape)}")
    if targets.shape != logits_shard.shape[:1]:
        raise ValueError(f"targets must have shape ({logits_shard.shape[0]},), got {tuple(targets.shape)}")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise ValueError(f"targets must be integer token ids, got {targets.dtype}")
    vocab = world * logits_shard.shape[1]
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= vocab):
        raise ValueError(f"targets must lie in [0, {vocab}), got [{int(targets.min())}, {int(targets.max())}]")
    return _VocabParallelCE.apply(logits_shard, targets, group)
