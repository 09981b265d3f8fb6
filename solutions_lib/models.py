"""Two small torch models for the memory assignment: a two-tower recommender and a tiny
GPT-style decoder with optional activation checkpointing. Both build from a seed, run in
milliseconds on a CPU and are written with plain operations, so that what autograd saves
for the backward pass can be counted by hand.

What autograd saves (fp32, training mode, the bytes `solutions_lib.memory` measures with
saved-tensor hooks: every storage once, parameters, buffers and the input batch left out):

`CheckpointedTransformer` with batch B, sequence S, width H, heads a, MLP ratio m, L blocks,
per block (pre-LN, no dropout, attention written as two matmuls around a softmax)::

    LayerNorm 1   input x            4 B S H     + mean, rstd   8 B S
    QKV linear    input LN1(x)       4 B S H
    q @ k^T       q and k            8 B S H     (contiguous copies, one per head layout)
    softmax       its output         4 a B S^2   (also what att @ v saves)
    att @ v       v                  4 B S H
    out proj      input              4 B S H
    LayerNorm 2   input              4 B S H     + mean, rstd   8 B S
    fc1           input              4 B S H
    GELU          input              4 m B S H
    fc2           input (GELU out)   4 m B S H
    ------------------------------------------------------------
    block         (32 + 8 m) B S H + 16 B S + 4 a B S^2     bytes

and once per model the final LayerNorm (4 B S H + 8 B S) and the input of the LM head
(4 B S H). The token ids the embedding saves are the input batch (not counted). With
`checkpointing=True` and `checkpoint_every=k`, torch.utils.checkpoint (non-reentrant) keeps
only the input of each segment of k blocks during the forward pass (4 B S H each, ceil(L/k)
segments) and recomputes the rest during backward. `CheckpointedTransformer.saved_bytes`
evaluates these formulas; the tests check them against the measurement.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return value


class TwoTowerModel(nn.Module):
    """A two-tower recommender: a user MLP and an item MLP map features to embeddings, the
    score of a (user, item) pair is the dot product of the two embeddings.

    `forward(user_features, item_features)` takes (B, user_dim) and (B, item_dim) float
    tensors and returns the (B,) scores. It has no checkpointing (no `checkpointing` flag).
    Saved for backward (fp32): per tower the ReLU output (4 B hidden) and the embedding
    (4 B embed_dim), so 8 B (hidden + embed_dim) bytes in all.
    """

    def __init__(self, user_dim: int = 32, item_dim: int = 24, hidden: int = 64, embed_dim: int = 16,
                 seed: int = 0):
        super().__init__()
        for name, v in (("user_dim", user_dim), ("item_dim", item_dim), ("hidden", hidden), ("embed_dim", embed_dim)):
            _positive_int(name, v)
        gen = torch.Generator().manual_seed(seed)
        self.user_dim, self.item_dim, self.hidden, self.embed_dim = user_dim, item_dim, hidden, embed_dim
        self.user_tower = nn.Sequential(nn.Linear(user_dim, hidden), nn.ReLU(), nn.Linear(hidden, embed_dim))
        self.item_tower = nn.Sequential(nn.Linear(item_dim, hidden), nn.ReLU(), nn.Linear(hidden, embed_dim))
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)

    def forward(self, user_features: torch.Tensor, item_features: torch.Tensor) -> torch.Tensor:
        return (self.user_tower(user_features) * self.item_tower(item_features)).sum(-1)

    def example_batch(self, batch: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return (torch.randn(batch, self.user_dim, generator=gen),
                torch.randn(batch, self.item_dim, generator=gen))


class Block(nn.Module):
    """One pre-LN decoder block: x + Attn(LN1(x)), then + MLP(LN2(.)); causal attention."""

    def __init__(self, hidden: int, heads: int, mlp_ratio: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, mlp_ratio * hidden)
        self.fc2 = nn.Linear(mlp_ratio * hidden, hidden)

    def attention(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        B, S, H = x.shape
        a = self.heads
        q, k, v = self.qkv(x).split(H, dim=-1)
        # (B, S, H) -> (B, a, S, H/a), made contiguous so each of q, k, v is one saved copy
        q, k, v = (t.reshape(B, S, a, H // a).transpose(1, 2).contiguous() for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(H // a))
        att = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, S, H)
        return self.proj(y)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x), mask)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CheckpointedTransformer(nn.Module):
    """A tiny GPT-style decoder: token + learned position embeddings, `layers` pre-LN blocks
    with causal multi-head attention and a GELU MLP, a final LayerNorm and an LM head.

    `forward(idx)` takes (B, S) token ids (S <= max_seq) and returns (B, S, vocab) logits.
    Set `model.checkpointing = True` to wrap every segment of `checkpoint_every` blocks in
    `torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`. The bytes autograd saves
    are given in the module docstring and by `saved_bytes`.
    """

    def __init__(self, vocab: int = 64, hidden: int = 32, heads: int = 4, layers: int = 4,
                 max_seq: int = 64, mlp_ratio: int = 4, checkpoint_every: int = 1, seed: int = 0):
        super().__init__()
        for name, v in (("vocab", vocab), ("hidden", hidden), ("heads", heads), ("layers", layers),
                        ("max_seq", max_seq), ("mlp_ratio", mlp_ratio), ("checkpoint_every", checkpoint_every)):
            _positive_int(name, v)
        if hidden % heads:
            raise ValueError(f"heads={heads} must divide hidden={hidden}")
        torch.manual_seed(seed)
        self.vocab, self.hidden, self.heads, self.layers = vocab, hidden, heads, layers
        self.max_seq, self.mlp_ratio, self.checkpoint_every = max_seq, mlp_ratio, checkpoint_every
        self.checkpointing = False
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(torch.randn(max_seq, hidden) * 0.02)
        self.blocks = nn.ModuleList(Block(hidden, heads, mlp_ratio) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab)
        self.register_buffer("causal", torch.ones(max_seq, max_seq, dtype=torch.bool).triu(1), persistent=False)

    def _segment(self, start: int, stop: int, mask: torch.Tensor):
        def run(x):
            for block in self.blocks[start:stop]:
                x = block(x, mask)
            return x
        return run

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        B, S = idx.shape
        if S > self.max_seq:
            raise ValueError(f"sequence length {S} exceeds max_seq={self.max_seq}")
        mask = self.causal[:S, :S]
        x = self.tok(idx) + self.pos[:S]
        k = self.checkpoint_every
        for start in range(0, self.layers, k):
            seg = self._segment(start, min(start + k, self.layers), mask)
            if self.checkpointing and torch.is_grad_enabled():
                x = checkpoint(seg, x, use_reentrant=False)
            else:
                x = seg(x)
        return self.head(self.ln_f(x))

    def example_batch(self, batch: int = 2, seq_len: int | None = None, seed: int = 0) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed)
        return torch.randint(0, self.vocab, (batch, seq_len or self.max_seq), generator=gen)

    def saved_bytes(self, batch: int, seq_len: int, checkpointing: bool | None = None) -> int:
        """Bytes autograd saves in one fp32 forward pass (module docstring): per block
        (32 + 8m) B S H + 16 B S + 4 a B S^2, plus 8 B S H + 8 B S for the final LayerNorm and
        the head's input; with checkpointing, ceil(L/k) segment inputs of 4 B S H instead of
        the blocks. `checkpointing=None` uses the model's current flag."""
        B, S = _positive_int("batch", batch), _positive_int("seq_len", seq_len)
        H, a, m, L = self.hidden, self.heads, self.mlp_ratio, self.layers
        ckpt = self.checkpointing if checkpointing is None else checkpointing
        block = (32 + 8 * m) * B * S * H + 16 * B * S + 4 * a * B * S * S
        blocks = math.ceil(L / self.checkpoint_every) * 4 * B * S * H if ckpt else L * block
        return blocks + 8 * B * S * H + 8 * B * S
