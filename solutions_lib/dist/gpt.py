"""A small character-level GPT for the distributed lab's training script.

Decoder-only transformer (Radford et al. 2018/2019): token + learned position embeddings,
`layers` pre-LayerNorm blocks (x + attn(LN(x)), x + MLP(LN(x))), a final LayerNorm and an
output layer that reuses the token embedding matrix (weight tying, Press & Wolf 2017). No
dropout: a training step draws no random numbers, which keeps resumed runs bit-exact.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["GPT", "CausalSelfAttention", "Block", "non_embedding_params"]


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} must be a multiple of heads={heads}")
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, d_model: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """logits = GPT(vocab, seq_len, layers, d_model, heads)(idx) with idx of shape (B, T <= seq_len)."""

    def __init__(self, vocab: int, seq_len: int, layers: int = 2, d_model: int = 64, heads: int = 4):
        super().__init__()
        for name, v in (("vocab", vocab), ("seq_len", seq_len), ("layers", layers),
                        ("d_model", d_model), ("heads", heads)):
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.seq_len = seq_len
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.apply(self._init)
        # GPT-2's scaled init of the projections that write into the residual stream.
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        if T > self.seq_len:
            raise ValueError(f"sequence of {T} tokens is longer than the model's seq_len={self.seq_len}")
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln_f(x), self.tok.weight)  # tied output layer


def non_embedding_params(model: GPT) -> int:
    """Parameters outside the token and position embeddings (the N of 6N FLOPs per token)."""
    emb = model.tok.weight.numel() + model.pos.weight.numel()
    return sum(p.numel() for p in model.parameters()) - emb
