"""Attention without the s x s matrix: the online softmax, a tiled FlashAttention forward that
returns the row logsumexp, a memory model of standard vs FlashAttention (forward, what is kept
for the backward, and the backward's working set), and a measurement of softmax saturation
with and without the 1/sqrt(d) score scale; and FlashAttention-2 (`FlashAttention2`, an autograd
Function: tiled forward saving only O and the row logsumexp, recomputation backward
`flash_attention_backward`, causal block skipping, fp32 accumulation; Triton kernels in
attention_triton.py on CUDA) with `attention_benchmark` behind `python -m solutions_lib bench attention`.

Sources:
- online softmax: Milakov & Gimelshein 2018, "Online normalizer calculation for softmax";
- tiled forward: Dao et al. 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention
  with IO-Awareness", Algorithm 1 (outer loop over key/value blocks there; here queries are
  tiled too, which is the loop order of FlashAttention-2, Dao 2023; the arithmetic is the same);
- FlashAttention2: Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and
  Work Partitioning", Algorithm 1 (forward) and Algorithm 2 (backward);
- score scale: Vaswani et al. 2017, section 3.2.1 (q.k has variance d for unit-variance entries).

Shapes: q (batch, heads, s_q, d), k (batch, heads, s_k, d), v (batch, heads, s_k, d_v).
`causal=True` lets query i see keys j <= i (the top-left alignment of
torch.nn.functional.scaled_dot_product_attention(is_causal=True)). Memory is in bytes.
Bad arguments (block_size < 1, mismatched shapes, d_model not divisible by heads, ...)
raise ValueError with the reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import torch

from .attention_inputs import _check_qkv, _check_same_dtype, _scale_for  # noqa: F401  (used here and by name)

PHASES = ("forward", "saved", "backward")
METHODS = ("standard", "flash")


def _count(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


# ---------------------------------------------------------------- online softmax


def online_softmax(x, block_size: int = 1) -> torch.Tensor:
    """softmax over the last dimension of `x`, normaliser computed in one pass over blocks.

    Running max m and running sum l of exp(x - m); a new block b updates them as
        m_new = max(m, max(b)),  l_new = l * exp(m - m_new) + sum(exp(b - m_new)),
    so no exp ever sees a positive argument (no overflow, whatever the magnitude of x).
    The output is exp(x - m) / l with the final m and l. Equals torch.softmax(x, -1).
    """
    x = torch.as_tensor(x)
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"x needs a non-empty last dimension, got shape {tuple(x.shape)}")
    b = _count("block_size", block_size)
    n = x.shape[-1]
    m = torch.full(x.shape[:-1], -math.inf, dtype=x.dtype)
    l = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for start in range(0, n, b):
        blk = x[..., start:start + b]
        m_new = torch.maximum(m, blk.max(dim=-1).values)
        safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        l = l * torch.exp(m - safe) + torch.exp(blk - safe[..., None]).sum(dim=-1)
        m = m_new
    return torch.exp(x - m[..., None]) / l[..., None]


# ---------------------------------------------------------------- tiled forward


def flash_attention_forward(q, k, v, block_size: int, causal: bool = False, scale: float | None = None):
    """Exact attention softmax(scale * q k^T) v computed tile by tile; returns (output, lse).

    For each query block Q_i, start with m = -inf, l = 0, O = 0 and for each key/value block
    (K_j, V_j): S = scale * Q_i K_j^T (masked to -inf where j > i if causal),
        m_new = max(m, rowmax(S)),  P = exp(S - m_new),  c = exp(m - m_new),
        l = c * l + rowsum(P),      O = c * O + P V_j,   m = m_new;
    finally O / l and lse = m + log(l) = log sum_j exp(scale * q_i.k_j), the only per-row
    statistic the backward needs to rebuild P = exp(S - lse) block by block. No tensor of the
    size of the full (s_q, s_k) score matrix is ever created. With causal=True, key blocks
    entirely in the future of a query block are skipped.
    lse has shape (batch, heads, s_q), in the dtype of q.
    """
    _check_qkv(q, k, v)
    b = _count("block_size", block_size)
    d = q.shape[-1]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    elif isinstance(scale, bool) or not isinstance(scale, Real) or not math.isfinite(float(scale)) or scale <= 0:
        raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
    s_q, s_k = q.shape[2], k.shape[2]
    outs, lses = [], []
    for qs in range(0, s_q, b):
        qi = q[:, :, qs:qs + b]
        rows = qi.shape[2]
        m = torch.full(qi.shape[:3], -math.inf, dtype=q.dtype)
        l = torch.zeros(qi.shape[:3], dtype=q.dtype)
        acc = torch.zeros(*qi.shape[:3], v.shape[-1], dtype=q.dtype)
        q_idx = torch.arange(qs, qs + rows)[:, None]
        for ks in range(0, s_k, b):
            if causal and ks > qs + rows - 1:
                break
            kj, vj = k[:, :, ks:ks + b], v[:, :, ks:ks + b]
            s = (qi @ kj.transpose(-1, -2)) * scale
            if causal:
                k_idx = torch.arange(ks, ks + kj.shape[2])[None, :]
                s = s.masked_fill(k_idx > q_idx, -math.inf)
            m_new = torch.maximum(m, s.max(dim=-1).values)
            safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - safe[..., None])
            c = torch.exp(m - safe)
            l = c * l + p.sum(dim=-1)
            acc = c[..., None] * acc + p @ vj
            m = m_new
        outs.append(acc / l[..., None])
        lses.append(m + torch.log(l))
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def naive_attention(q, k, v, causal: bool = False, scale: float | None = None):
    """softmax(scale * q k^T) v with the full score matrix: the standard path whose saved
    tensors AttentionBenchmark counts (scaled q, k, v and the probabilities P)."""
    _check_qkv(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    s = (q * scale) @ k.transpose(-1, -2)
    if causal:
        s = s.masked_fill(torch.ones(q.shape[2], k.shape[2], dtype=torch.bool, device=q.device).triu(1), -math.inf)
    return torch.softmax(s, dim=-1) @ v


# ---------------------------------------------------------------- memory model


@dataclass(frozen=True)
class AttentionBenchmark:
    """Memory of one attention layer's core, softmax(QK^T/sqrt(d_k)) V, for standard attention
    and FlashAttention. Element counts, with io = batch*seq_len*d_model (one of Q, K, V, O, dO,
    dQ, dK, dV), att = batch*heads*seq_len^2 (one score-sized matrix), row = batch*heads*seq_len
    (one value per query row); bytes = elements * bytes_per_element.

    Tensors counted (the `tensors` method lists them by name):
    - forward (all live during the forward):
        standard: Q, K, V, S = QK^T/sqrt(d_k), P = softmax(S), O        -> 4 io + 2 att
        flash:    Q, K, V, O, lse (tiles live in on-chip SRAM, not HBM) -> 4 io + 1 row
    - saved (kept from the forward for the backward; for standard this is exactly what torch
      autograd saves for (q*scale) @ k^T -> softmax -> @ v):
        standard: Q, K, V, P                                            -> 3 io + 1 att
        flash:    Q, K, V, O, lse                                       -> 4 io + 1 row
    - backward (saved + everything the backward creates, counted as if alive together: an
      upper bound of the backward peak):
        standard: saved + dO, dP, dS, dQ, dK, dV                        -> 7 io + 3 att
        flash:    saved + dO, dQ, dK, dV, D = rowsum(dO * O)            -> 8 io + 2 row
    Projections, the residual stream and on-chip buffers are outside the model. One
    bytes_per_element for every tensor (real kernels keep lse in fp32: negligible).
    """

    batch: int
    seq_len: int
    d_model: int
    heads: int
    bytes_per_element: float = 2

    # (io, att, row) coefficients per (method, phase)
    COEFFS = {
        ("standard", "forward"): (4, 2, 0), ("flash", "forward"): (4, 0, 1),
        ("standard", "saved"): (3, 1, 0), ("flash", "saved"): (4, 0, 1),
        ("standard", "backward"): (7, 3, 0), ("flash", "backward"): (8, 0, 2),
    }
    TENSORS = {
        ("standard", "forward"): ("Q", "K", "V", "S", "P", "O"),
        ("flash", "forward"): ("Q", "K", "V", "O", "lse"),
        ("standard", "saved"): ("Q", "K", "V", "P"),
        ("flash", "saved"): ("Q", "K", "V", "O", "lse"),
        ("standard", "backward"): ("Q", "K", "V", "P", "dO", "dP", "dS", "dQ", "dK", "dV"),
        ("flash", "backward"): ("Q", "K", "V", "O", "lse", "dO", "dQ", "dK", "dV", "D"),
    }
    _KIND = {"S": "att", "P": "att", "dP": "att", "dS": "att", "lse": "row", "D": "row"}

    def __post_init__(self):
        for name in ("batch", "seq_len", "d_model", "heads"):
            _count(name, getattr(self, name))
        if self.d_model % self.heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by heads={self.heads}")
        b = self.bytes_per_element
        if isinstance(b, bool) or not isinstance(b, Real) or not math.isfinite(float(b)) or b <= 0:
            raise ValueError(f"bytes_per_element must be a number > 0, got {b!r}")

    @staticmethod
    def _key(method, phase):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
        return method, phase

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    def _sizes(self) -> dict[str, int]:
        B, s, d, h = self.batch, self.seq_len, self.d_model, self.heads
        return {"io": B * s * d, "att": B * h * s * s, "row": B * h * s}

    def tensors(self, method: str, phase: str) -> dict[str, int]:
        """{tensor name: elements} counted for `method` in `phase`."""
        sizes = self._sizes()
        return {n: sizes[self._KIND.get(n, "io")] for n in self.TENSORS[self._key(method, phase)]}

    def bytes(self, method: str, phase: str) -> float:
        a, n, m = self.COEFFS[self._key(method, phase)]
        z = self._sizes()
        return float((a * z["io"] + n * z["att"] + m * z["row"]) * self.bytes_per_element)

    def forward_bytes(self, method: str) -> float:
        return self.bytes(method, "forward")

    def saved_bytes(self, method: str) -> float:
        return self.bytes(method, "saved")

    def backward_bytes(self, method: str) -> float:
        return self.bytes(method, "backward")

    def savings_ratio(self, phase: str = "backward") -> float:
        """standard bytes / flash bytes in `phase`."""
        return self.bytes("standard", phase) / self.bytes("flash", phase)

    def crossover_seq_len(self, phase: str = "backward", target: float = 2.0) -> int:
        """Smallest whole s at which the savings ratio exceeds `target` (batch cancels)."""
        return crossover_seq_len(self.d_model, self.heads, phase, target)


def crossover_threshold(d_model: int, heads: int, phase: str = "backward", target: float = 2.0) -> float:
    """The real s_c with ratio(s) > target exactly for s > s_c.

    With standard = a io + n att and flash = c io + m row (per batch element, io = s d,
    att = h s^2, row = h s): n h s^2 + a s d > target (c s d + m h s)
        <=>  s > s_c = ((target c - a) d + target m h) / (n h).
    Backward, target 2: s_c = 3 d/h + 4/3; saved: 5 d/h + 2; forward: 2 d/h + 1.
    """
    d = _count("d_model", d_model)
    h = _count("heads", heads)
    if isinstance(target, bool) or not isinstance(target, Real) or not math.isfinite(float(target)) or target <= 1:
        raise ValueError(f"target ratio must be a number > 1, got {target!r}")
    a, n, _ = AttentionBenchmark.COEFFS[AttentionBenchmark._key("standard", phase)]
    c, _, m = AttentionBenchmark.COEFFS[("flash", phase)]
    return ((target * c - a) * d + target * m * h) / (n * h)


def crossover_seq_len(d_model: int, heads: int, phase: str = "backward", target: float = 2.0) -> int:
    """Smallest whole sequence length with savings ratio > target: floor(s_c) + 1 (at least 1)."""
    return max(1, math.floor(crossover_threshold(d_model, heads, phase, target)) + 1)


def saved_tensor_bytes(fn, *args) -> int:
    """Bytes of the distinct tensors autograd saves while running fn(*args) (storages counted
    once: k and k.transpose share one). A measurement to check the 'saved' model against."""
    seen: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return int(sum(seen.values()))


# ---------------------------------------------------------------- saturation


def score_saturation(q, k, scaled: bool = True) -> dict[str, float]:
    """How peaked softmax(q k^T [/sqrt(d)]) is, for q (n_q, d) and k (n_k, d).

    Returns {"score_std": std of the scores, "max_prob": mean over rows of the largest
    probability, "entropy": mean row entropy in nats (log n_k = uniform, 0 = one-hot),
    "saturated_rows": fraction of rows whose largest probability exceeds 0.99}.
    For unit-variance entries q.k has variance d, so without the scale the scores have std
    ~sqrt(d) and the softmax is close to one-hot (gradients through it vanish).
    """
    q = torch.as_tensor(q, dtype=torch.float64)
    k = torch.as_tensor(k, dtype=torch.float64)
    if q.ndim != 2 or k.ndim != 2 or q.shape[1] != k.shape[1]:
        raise ValueError(f"q and k must be (n, d) matrices with the same d, got {tuple(q.shape)} and {tuple(k.shape)}")
    s = q @ k.T
    if scaled:
        s = s / math.sqrt(q.shape[1])
    p = torch.softmax(s, dim=-1)
    logp = torch.log_softmax(s, dim=-1)
    ent = -(p * logp).sum(-1)
    pmax = p.max(-1).values
    return {"score_std": float(s.std()), "max_prob": float(pmax.mean()), "entropy": float(ent.mean()),
            "saturated_rows": float((pmax > 0.99).double().mean())}


def saturation_sweep(dims, n_q=256, n_k=256, seed=0) -> dict[str, np.ndarray]:
    """score_saturation with and without the scale for random unit-variance q, k of each d."""
    rng = np.random.default_rng(seed)
    out = {key: [] for key in ("d", "std_unscaled", "std_scaled", "max_prob_unscaled", "max_prob_scaled",
                               "entropy_unscaled", "entropy_scaled")}
    for d in dims:
        d = _count("d", d)
        q, k = rng.standard_normal((n_q, d)), rng.standard_normal((n_k, d))
        u, s = score_saturation(q, k, scaled=False), score_saturation(q, k, scaled=True)
        out["d"].append(d)
        for tag, r in (("unscaled", u), ("scaled", s)):
            out[f"std_{tag}"].append(r["score_std"])
            out[f"max_prob_{tag}"].append(r["max_prob"])
            out[f"entropy_{tag}"].append(r["entropy"])
    return {key: np.array(v) for key, v in out.items()}


# ---------------------------------------------------------------- FlashAttention-2: forward + backward
#
# Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
# Algorithm 1 (forward: outer loop over query blocks, inner over key/value blocks; the output is
# rescaled once at the end; only O and L = m + log(l) are written) and Algorithm 2 (backward:
# outer loop over key/value blocks, inner over query blocks; P is recomputed from Q, K and L).
# Here the loops run in Python over tiles and each tile step is vectorised over (batch, heads):
# the reference, not the fast path (solutions_lib.attention_triton is the fast path on CUDA).

DEFAULT_BLOCK = 64


def _blocks(block_size) -> tuple[int, int]:
    """block_size as (B_r, B_c) = (query rows per tile, key columns per tile): an int for both."""
    if isinstance(block_size, (tuple, list)):
        if len(block_size) != 2:
            raise ValueError(f"block_size must be an int or a pair (block_q, block_k), got {block_size!r}")
        return _count("block_q", block_size[0]), _count("block_k", block_size[1])
    b = _count("block_size", block_size)
    return b, b


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 accumulation for fp16/bf16 (and fp32); float64 stays float64 (gradcheck)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _tile_visible(qs: int, rows: int, ks: int, causal: bool) -> bool:
    """False for a tile entirely above the diagonal (every key index > every query index)."""
    return not causal or ks <= qs + rows - 1


def causal_tile_count(s_q: int, s_k: int, block_size=DEFAULT_BLOCK, causal: bool = True) -> tuple[int, int]:
    """(tiles computed, tiles skipped) of the (s_q/B_r) x (s_k/B_c) tile grid: with causal=True a
    tile is skipped when its first key index exceeds its last query index. For s_q = s_k = n B
    (one block size B) that is n(n+1)/2 computed and n(n-1)/2 skipped."""
    bq, bk = _blocks(block_size)
    done = skipped = 0
    for qs in range(0, _count("s_q", s_q), bq):
        rows = min(bq, s_q - qs)
        for ks in range(0, _count("s_k", s_k), bk):
            if _tile_visible(qs, rows, ks, causal):
                done += 1
            else:
                skipped += 1
    return done, skipped


def _causal_mask(qs, rows, ks, cols, device):
    q_idx = torch.arange(qs, qs + rows, device=device)[:, None]
    k_idx = torch.arange(ks, ks + cols, device=device)[None, :]
    return k_idx > q_idx  # True where masked (key in the future of the query)


def flash_attention2_forward(q, k, v, causal: bool = False, block_size=DEFAULT_BLOCK, scale: float | None = None,
                             stats: dict | None = None):
    """FlashAttention-2 forward (Dao 2023, Algorithm 1); returns (O, L).

    For each query block Q_i (B_r rows), with m = -inf, l = 0, O~ = 0, over key blocks j:
        S_ij = scale * Q_i K_j^T                       (-inf where key > query if causal)
        m_new = max(m, rowmax(S_ij)),  P~ = exp(S_ij - m_new)
        l = exp(m - m_new) l + rowsum(P~),  O~ = diag(exp(m - m_new)) O~ + P~ V_j,  m = m_new
    then O_i = diag(l)^-1 O~ (one division per row, at the end: the FA2 change to Algorithm 1 of
    FlashAttention) and L_i = m + log(l) = log sum_j exp(S_ij), the row logsumexp (natural log,
    in units of the scaled score). scale defaults to 1/sqrt(head_dim).

    Causal: a tile whose first key index exceeds its last query index is never computed (block
    skipping; `stats` gets "tiles" and "skipped" added). Arithmetic in fp32 for fp16/bf16/fp32
    inputs (float64 for float64): O comes back in the input dtype, L in the accumulation dtype.
    Shapes: q (B, H, s_q, d), k (B, H, s_k, d), v (B, H, s_k, d_v) -> O (B, H, s_q, d_v), L (B, H, s_q).
    """
    _check_qkv(q, k, v)
    _check_same_dtype(q=q, k=k, v=v)
    bq, bk = _blocks(block_size)
    scale = _scale_for(q, scale)
    acc = _acc_dtype(q.dtype)
    s_q, s_k = q.shape[2], k.shape[2]
    o = torch.empty(*q.shape[:3], v.shape[-1], dtype=q.dtype, device=q.device)
    lse = torch.empty(q.shape[:3], dtype=acc, device=q.device)
    tiles = skipped = 0
    for qs in range(0, s_q, bq):
        qi = q[:, :, qs:qs + bq].to(acc)
        rows = qi.shape[2]
        m = torch.full(qi.shape[:3], -math.inf, dtype=acc, device=q.device)
        l = torch.zeros(qi.shape[:3], dtype=acc, device=q.device)
        o_acc = torch.zeros(*qi.shape[:3], v.shape[-1], dtype=acc, device=q.device)
        for ks in range(0, s_k, bk):
            if not _tile_visible(qs, rows, ks, causal):
                skipped += 1
                continue
            tiles += 1
            kj, vj = k[:, :, ks:ks + bk].to(acc), v[:, :, ks:ks + bk].to(acc)
            s = (qi @ kj.transpose(-1, -2)) * scale
            if causal and ks + kj.shape[2] - 1 > qs:  # the tile crosses the diagonal
                s = s.masked_fill(_causal_mask(qs, rows, ks, kj.shape[2], q.device), -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1))
            safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
            p = torch.exp(s - safe[..., None])
            c = torch.exp(m - safe)
            l = c * l + p.sum(dim=-1)
            o_acc = c[..., None] * o_acc + p @ vj
            m = m_new
        o[:, :, qs:qs + rows] = (o_acc / l[..., None]).to(q.dtype)
        lse[:, :, qs:qs + rows] = m + torch.log(l)
    if stats is not None:
        stats["tiles"] = stats.get("tiles", 0) + tiles
        stats["skipped"] = stats.get("skipped", 0) + skipped
    return o, lse


def flash_attention_backward(q, k, v, o, lse, do, causal: bool = False, block_size=DEFAULT_BLOCK,
                             scale: float | None = None, stats: dict | None = None):
    """FlashAttention-2 backward (Dao 2023, Algorithm 2); returns (dQ, dK, dV).

    Inputs: q, k, v and the forward's O and L (row logsumexp, from flash_attention2_forward) and
    dO = dLoss/dO. First D = rowsum(dO * O) (B, H, s_q) (= rowsum(P * dP), the softmax
    Jacobian's correction term). Then for each key block j (outer) and query block i (inner):
        S = scale * Q_i K_j^T,  P = exp(S - L_i)      (recomputed: P was never stored)
        dV_j += P^T dO_i,       dP = dO_i V_j^T,      dS = P * (dP - D_i)
        dQ_i += scale * dS K_j, dK_j += scale * dS^T Q_i
    Causal: tiles entirely above the diagonal are skipped (stats "tiles"/"skipped"), P is 0 above
    the diagonal in the tiles that cross it. Accumulation in fp32 for fp16/bf16 (float64 for
    float64); gradients come back in the input dtype. No (s_q, s_k) tensor is created: the
    largest temporary is one (B, H, B_r, B_c) tile.
    """
    _check_qkv(q, k, v)
    for name, t in (("o", o), ("lse", lse), ("do", do)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got "
                             f"{getattr(t, 'dtype', type(t).__name__)}")
    _check_same_dtype(q=q, k=k, v=v, o=o, do=do)
    o_shape = (*q.shape[:3], v.shape[-1])
    if tuple(o.shape) != o_shape or tuple(do.shape) != o_shape:
        raise ValueError(f"o and do must have shape {o_shape} (q's batch, heads, seq and v's head dim), "
                         f"got o {tuple(o.shape)}, do {tuple(do.shape)}")
    if tuple(lse.shape) != tuple(q.shape[:3]):
        raise ValueError(f"lse must have shape {tuple(q.shape[:3])} (batch, heads, s_q), got {tuple(lse.shape)}")
    bq, bk = _blocks(block_size)
    scale = _scale_for(q, scale)
    acc = _acc_dtype(q.dtype)
    s_q, s_k = q.shape[2], k.shape[2]
    D = (do.to(acc) * o.to(acc)).sum(dim=-1)  # (B, H, s_q)
    L = lse.to(acc)
    dq = torch.zeros(q.shape, dtype=acc, device=q.device)
    dk = torch.empty(k.shape, dtype=q.dtype, device=q.device)
    dv = torch.empty(v.shape, dtype=q.dtype, device=q.device)
    tiles = skipped = 0
    for ks in range(0, s_k, bk):
        kj, vj = k[:, :, ks:ks + bk].to(acc), v[:, :, ks:ks + bk].to(acc)
        cols = kj.shape[2]
        dk_j = torch.zeros(kj.shape, dtype=acc, device=q.device)
        dv_j = torch.zeros(vj.shape, dtype=acc, device=q.device)
        for qs in range(0, s_q, bq):
            rows = min(bq, s_q - qs)
            if not _tile_visible(qs, rows, ks, causal):
                skipped += 1
                continue
            tiles += 1
            qi, doi = q[:, :, qs:qs + rows].to(acc), do[:, :, qs:qs + rows].to(acc)
            s = (qi @ kj.transpose(-1, -2)) * scale
            if causal and ks + cols - 1 > qs:
                s = s.masked_fill(_causal_mask(qs, rows, ks, cols, q.device), -math.inf)
            p = torch.exp(s - L[:, :, qs:qs + rows, None])
            dv_j += p.transpose(-1, -2) @ doi
            dp = doi @ vj.transpose(-1, -2)
            ds = p * (dp - D[:, :, qs:qs + rows, None])
            dq[:, :, qs:qs + rows] += (ds @ kj) * scale
            dk_j += (ds.transpose(-1, -2) @ qi) * scale
        dk[:, :, ks:ks + cols] = dk_j.to(q.dtype)
        dv[:, :, ks:ks + cols] = dv_j.to(q.dtype)
    if stats is not None:
        stats["tiles"] = stats.get("tiles", 0) + tiles
        stats["skipped"] = stats.get("skipped", 0) + skipped
    return dq.to(q.dtype), dk, dv


def _triton_usable(q) -> bool:
    if not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return False
    try:
        from . import attention_triton
    except ImportError:
        return False
    return attention_triton.available()


class FlashAttention2(torch.autograd.Function):
    """softmax(Q K^T / sqrt(d)) V with the FlashAttention-2 forward and recomputation backward.

    `FlashAttention2.apply(q, k, v, causal=False, block_size=None, backend=None)`; q, k, v
    (batch, heads, seq, head_dim), one floating dtype. Saved for backward: q, k, v, O and the
    row logsumexp L only (4 io tensors + one value per row; never the s x s probabilities).
    backend: None = "triton" when the tensors are on CUDA in fp16/bf16/fp32 and triton imports
    (solutions_lib.attention_triton), else "torch" (flash_attention2_forward /
    flash_attention_backward, tile loops in Python); "triton" forces the kernels (also on CPU
    under TRITON_INTERPRET=1). block_size (int or (B_r, B_c)) applies to the torch path;
    BLOCK_SIZE is the default. After each call `last_stats` holds {"backend", "forward":
    {"tiles", "skipped"}, "backward": {...}} (torch path; causal block skipping counted).
    """

    BLOCK_SIZE = DEFAULT_BLOCK
    last_stats: dict = {}

    @classmethod
    def apply(cls, q, k, v, causal: bool = False, block_size=None, backend: str | None = None):
        _check_qkv(q, k, v)
        _check_same_dtype(q=q, k=k, v=v)
        if not isinstance(causal, bool):
            raise ValueError(f"causal must be True or False, got {causal!r}")
        blocks = _blocks(cls.BLOCK_SIZE if block_size is None else block_size)
        if backend is None:
            backend = "triton" if _triton_usable(q) else "torch"
        elif backend not in ("torch", "triton"):
            raise ValueError(f"backend must be None, 'torch' or 'triton', got {backend!r}")
        if backend == "triton":
            from . import attention_triton
            if not attention_triton.available():
                raise ValueError("backend='triton' needs the triton package (pip install triton)")
            if q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
                raise ValueError(f"backend='triton' takes fp16, bf16 or fp32, got {q.dtype}")
        cls.last_stats = {"backend": backend, "forward": {}, "backward": {}}
        return super().apply(q, k, v, causal, blocks, backend)

    @staticmethod
    def forward(ctx, q, k, v, causal, blocks, backend):
        stats = FlashAttention2.last_stats
        if backend == "triton":
            from . import attention_triton
            o, lse = attention_triton.flash_attention_forward(q, k, v, causal=causal)
        else:
            o, lse = flash_attention2_forward(q, k, v, causal, blocks, stats=stats["forward"])
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.blocks, ctx.backend, ctx.stats = causal, blocks, backend, stats
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        if ctx.backend == "triton":
            from . import attention_triton
            dq, dk, dv = attention_triton.flash_attention_backward(q, k, v, o, lse, do, causal=ctx.causal)
        else:
            dq, dk, dv = flash_attention_backward(q, k, v, o, lse, do, ctx.causal, ctx.blocks,
                                                  stats=ctx.stats["backward"])
        return dq, dk, dv, None, None, None


def flash_attention2(q, k, v, causal: bool = False, block_size=None, backend: str | None = None):
    """FlashAttention2.apply with keyword arguments."""
    return FlashAttention2.apply(q, k, v, causal, block_size, backend)


# ---------------------------------------------------------------- time and memory benchmark

BENCH_METHODS = ("naive", "sdpa", "fa2_torch", "fa2_triton")


def _bench_fn(method, causal, block_size):
    if method == "naive":
        return lambda q, k, v: naive_attention(q, k, v, causal=causal)
    if method == "sdpa":
        return lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    backend = "torch" if method == "fa2_torch" else "triton"
    return lambda q, k, v: FlashAttention2.apply(q, k, v, causal, block_size, backend)


def attention_benchmark(seq_lens=None, device=None, batch: int = 1, heads: int = 8, head_dim: int = 64,
                        dtype=None, causal: bool = True, repeats: int | None = None, time_budget_s: float | None = None,
                        methods=BENCH_METHODS, block_size=None, out=None) -> list[dict]:
    """Forward+backward time and memory of naive attention, SDPA, FlashAttention2 (PyTorch tile
    loops) and FlashAttention2 (Triton kernels, CUDA only) for each sequence length.

    One row per (seq_len, method): "ms" = median wall time of `repeats` (default 5 on CUDA, 2 on
    CPU) forward+backward passes (after one warm-up; CUDA synchronised), "peak_bytes" = on CUDA torch.cuda.max_memory_allocated
    during one forward+backward minus what was allocated before (inputs excluded; gradients,
    saved tensors and temporaries included), on CPU the bytes autograd saves for the backward
    (saved_tensor_bytes), "memory_kind" says which. A method that runs out of memory gets
    "error". Defaults: CUDA bf16, s = 128..16384; CPU fp32, s = 128..2048 (the Python tile loop
    and the naive s x s matrices make longer CPU runs take minutes). Once `time_budget_s` is
    spent, longer sequence lengths are skipped (rows with error "time budget").
    """
    import time

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda = device.type == "cuda"
    dtype = dtype or (torch.bfloat16 if cuda else torch.float32)
    seq_lens = list(seq_lens or ([128 << i for i in range(8)] if cuda else [128 << i for i in range(5)]))
    block_size = block_size or (1024 if cuda else 128)
    repeats = repeats or (5 if cuda else 2)
    methods = [m for m in methods if m != "fa2_triton" or (cuda and _triton_usable(torch.empty(0, device=device,
                                                                                                dtype=dtype)))]
    t_start = time.perf_counter()
    rows = []

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    for s in seq_lens:
        g = torch.Generator(device="cpu").manual_seed(s)
        base = [torch.randn(batch, heads, s, head_dim, generator=g).to(device, dtype) for _ in range(4)]
        for method in methods:
            row = {"seq_len": s, "method": method, "device": str(device), "dtype": str(dtype).replace("torch.", ""),
                   "causal": causal, "batch": batch, "heads": heads, "head_dim": head_dim,
                   "block_size": block_size if method == "fa2_torch" else None}
            if time_budget_s is not None and time.perf_counter() - t_start > time_budget_s:
                row["error"] = "time budget"
                rows.append(row)
                continue
            fn = _bench_fn(method, causal, block_size)
            q, k, v = (t.clone().requires_grad_() for t in base[:3])
            do = base[3]

            def step():
                for t in (q, k, v):
                    t.grad = None
                fn(q, k, v).backward(do)

            try:
                step()  # warm-up (Triton compiles here)
                sync()
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    step()
                    sync()
                    times.append(time.perf_counter() - t0)
                row["ms"] = 1e3 * float(np.median(times))
                if cuda:
                    for t in (q, k, v):
                        t.grad = None
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats(device)
                    before = torch.cuda.memory_allocated(device)
                    step()
                    sync()
                    row["peak_bytes"] = int(torch.cuda.max_memory_allocated(device) - before)
                    row["memory_kind"] = "cuda peak during fwd+bwd (inputs excluded)"
                else:
                    row["peak_bytes"] = saved_tensor_bytes(fn, q, k, v)
                    row["memory_kind"] = "bytes saved for backward"
            except torch.cuda.OutOfMemoryError:
                row["error"] = "out of memory"
            except RuntimeError as exc:  # pragma: no cover - e.g. a kernel out of resources
                row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            finally:
                q = k = v = None
                if cuda:
                    torch.cuda.empty_cache()
            rows.append(row)
            if out is not None:
                out(row)
    return rows


# ---------------------------------------------------------------- IO complexity (FA1 Theorem 2)
#
# Dao, Fu, Ermon, Rudra and Ré 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention
# with IO-Awareness", section 3.2. Counts are HBM element accesses (loads plus stores) of one
# attention head's forward pass, Q, K, V, O of shape (N, d); M is the on-chip SRAM size in
# elements. Standard attention is the paper's Algorithm 0, FlashAttention its Algorithm 1 with
# block sizes B_c = ceil(M / (4 d)), B_r = min(B_c, d). Theorem 2: Theta(N d + N^2) and
# Theta(N^2 d^2 / M) for d <= M <= N d; Proposition 3: no exact attention algorithm does
# o(N^2 d^2 / M) for every M in [d, N d]. tests/test_attention.py checks both closed forms
# against instrumented runs of the two algorithms that count every element moved.


def _positive_bytes(bytes_per_element) -> float:
    if isinstance(bytes_per_element, bool) or not isinstance(bytes_per_element, Real) \
            or not math.isfinite(bytes_per_element) or bytes_per_element <= 0:
        raise ValueError(f"bytes_per_element must be a positive number, got {bytes_per_element!r}")
    return bytes_per_element


def fa1_block_sizes(head_dim: int, sram_elements: int) -> tuple[int, int]:
    """(B_r, B_c) of FlashAttention's Algorithm 1: B_c = ceil(M / (4 d)), B_r = min(B_c, d)."""
    d = _count("head_dim", head_dim)
    m = _count("sram_elements", sram_elements)
    if m < 4 * d:
        raise ValueError(f"sram_elements must be >= 4 * head_dim = {4 * d} (one row each of Q, K, V and O), got {m}")
    b_c = -(-m // (4 * d))
    return min(b_c, d), b_c


def standard_attention_hbm_bytes(seq_len: int, head_dim: int, bytes_per_element=2):
    """HBM bytes of Algorithm 0 (standard attention), one head: e (4 N d + 4 N^2).

    Line 1 reads Q and K (2 N d) and writes S (N^2); line 2 reads S and writes P (2 N^2);
    line 3 reads P and V (N^2 + N d) and writes O (N d).
    """
    n = _count("seq_len", seq_len)
    d = _count("head_dim", head_dim)
    e = _positive_bytes(bytes_per_element)
    return e * (4 * n * d + 4 * n * n)


def flash_attention_hbm_bytes(seq_len: int, head_dim: int, sram_elements: int, bytes_per_element=2):
    """HBM bytes of Algorithm 1 (FlashAttention), one head: e (2 N d + T_c (3 N d + 4 N)).

    K and V are read once (line 6, 2 N d). Each of the T_c = ceil(N / B_c) outer iterations
    reads all of Q, O, l and m (line 8, 2 N d + 2 N) and writes all of O, l and m (lines 12-13,
    N d + 2 N). The initialisation of O, l, m (line 2) is not counted. Theta(N^2 d^2 / M):
    T_c ~ 4 N d / M, so the total is ~ 2 N d + 12 N^2 d^2 / M + 16 N^2 d / M.
    """
    n = _count("seq_len", seq_len)
    _, b_c = fa1_block_sizes(head_dim, sram_elements)
    e = _positive_bytes(bytes_per_element)
    d = int(head_dim)
    t_c = -(-n // b_c)
    return e * (2 * n * d + t_c * (3 * n * d + 4 * n))


def attention_io_roofline(seq_len: int, head_dim: int, standard_bytes, flash_bytes, peak_flops, bandwidth) -> dict:
    """Roofline verdicts for one head's attention forward given its two HBM byte counts.

    FLOPs = 4 N^2 d (Q K^T and P V, 2 N^2 d each; the softmax's O(N^2) is left out, and
    FlashAttention's forward recomputes nothing). Intensity = FLOPs / bytes; the ridge point is
    peak / bandwidth; a kernel is memory-bound when its intensity is below the ridge.
    """
    n = _count("seq_len", seq_len)
    d = _count("head_dim", head_dim)
    for name, v in (("standard_bytes", standard_bytes), ("flash_bytes", flash_bytes),
                    ("peak_flops", peak_flops), ("bandwidth", bandwidth)):
        if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive number, got {v!r}")
    flops = 4.0 * n * n * d
    ridge = peak_flops / bandwidth
    i_std, i_fl = flops / standard_bytes, flops / flash_bytes
    return {"ratio": standard_bytes / flash_bytes, "flops": flops, "intensity_standard": i_std,
            "intensity_flash": i_fl, "ridge": ridge, "standard_memory_bound": bool(i_std < ridge),
            "flash_memory_bound": bool(i_fl < ridge)}


# ---------------------------------------------------------------- grouped-query and variable-length attention
#
# Grouped-query attention: Ainslie, Lee-Thorp, de Jong, Zemlyanskiy, Lebrón and Sanghai 2023,
# "GQA: Training Generalized Multi-Query Transformer Models from Multi-Head Checkpoints" (EMNLP);
# multi-query attention (one K, V head): Shazeer 2019, "Fast Transformer Decoding: One Write-Head
# is All You Need". Llama 2 70B (Touvron et al. 2023): 80 layers, 64 query heads, 8 KV heads of
# dimension 128. H_q query heads share H_kv key/value heads; query head h reads KV head
# h // (H_q / H_kv) (torch's repeat_interleave, SDPA's enable_gqa, Llama's repeat_kv and
# FlashAttention all use this grouping).
#
# Variable-length (packed) batches: FlashAttention's varlen API (flash_attn_varlen_func):
# q, k, v of shape (total_tokens, heads, dim) with the sequences laid end to end, and
# cu_seqlens = [0, l_1, l_1 + l_2, ..., total] (torch.int32), the cumulative lengths. No token
# attends across a sequence boundary (Krell et al. 2021, "Efficient Sequence Packing without
# Cross-contamination"; Llama 3, Dubey et al. 2024, section 3.2: a mask that stops attention
# between documents of one packed sequence). Causal masking is within each sequence.


def _bottom_right_future(n_q: int, n_k: int, device=None) -> torch.Tensor:
    """(n_q, n_k) bool, True where masked: query i sees keys j <= i + n_k - n_q (bottom-right)."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu(1 + n_k - n_q)


def gqa_attention(q, k, v, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """Grouped-query attention, never expanding K or V to the query heads.

    q (B, H_q, N_q, d), k (B, H_kv, N_k, d), v (B, H_kv, N_k, d_v) with H_kv dividing H_q; query
    head h attends with KV head h // g, g = H_q / H_kv. The g query heads of a group are folded
    into the rows of one (B, H_kv, g N_q, d) matrix, so each KV head meets its whole group in one
    matmul: the largest tensor is the (B, H_q, N_q, N_k) score matrix or an input/output, never a
    (B, H_q, N_k, d) copy of K. causal=True is bottom-right aligned (query i sees keys
    j <= i + N_k - N_q), as FlashAttention and the 07 exercises_2 notebook. Returns
    (B, H_q, N_q, d_v) in q's dtype.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.ndim != 4 or not t.is_floating_point():
            raise ValueError(f"{name} must be a 4-D floating-point tensor (batch, heads, seq, dim), got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    b, h_q, n_q, d = q.shape
    h_kv, n_k = k.shape[1], k.shape[2]
    if k.shape[0] != b or v.shape[0] != b:
        raise ValueError(f"q, k and v need the same batch size, got {q.shape[0]}, {k.shape[0]}, {v.shape[0]}")
    if v.shape[1] != h_kv or v.shape[2] != n_k:
        raise ValueError(f"k and v need the same heads and length, got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.shape[-1] != d:
        raise ValueError(f"q and k need the same head dim, got {d} and {k.shape[-1]}")
    if h_kv < 1 or h_q % h_kv:
        raise ValueError(f"the query heads ({h_q}) must be a multiple of the key/value heads ({h_kv})")
    scale = _scale_for(q, scale)
    g, d_v = h_q // h_kv, v.shape[-1]
    qg = q.reshape(b, h_kv, g * n_q, d)                        # row r = (head j of the group, query r % N_q)
    s = (qg @ k.transpose(-1, -2)) * scale                      # (B, H_kv, g N_q, N_k): the scores, no K copy
    if causal:
        s = s.view(b, h_kv, g, n_q, n_k).masked_fill(_bottom_right_future(n_q, n_k, q.device), -math.inf)
        s = s.view(b, h_kv, g * n_q, n_k)
    return (torch.softmax(s, dim=-1) @ v).reshape(b, h_q, n_q, d_v)


def kv_cache_bytes(batch: int, seq_len: int, layers: int, q_heads: int, kv_heads: int, head_dim: int,
                   bytes_per_element=2) -> tuple:
    """(multi_head, grouped): bytes of the K and V cache of `layers` attention layers for `batch`
    sequences of `seq_len` tokens, with one K, V head per query head (multi-head attention) and with
    `kv_heads` shared heads (GQA; kv_heads = 1 is multi-query). Each is
    2 (K and V) * batch * seq_len * layers * heads * head_dim * bytes_per_element; grouped is
    kv_heads / q_heads of multi-head. Llama 2 70B (80 layers, 64 and 8 heads of 128, bf16): 2.5 MiB
    and 320 KiB per token."""
    b = _count("batch", batch)
    n = _count("seq_len", seq_len)
    n_layers = _count("layers", layers)
    h_q = _count("q_heads", q_heads)
    h_kv = _count("kv_heads", kv_heads)
    d = _count("head_dim", head_dim)
    if h_q % h_kv:
        raise ValueError(f"q_heads ({h_q}) must be a multiple of kv_heads ({h_kv})")
    e = _positive_bytes(bytes_per_element)
    per_head = 2 * b * n * n_layers * d * e
    return per_head * h_q, per_head * h_kv


def _check_cu_seqlens(cu_seqlens, total: int) -> list[int]:
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.ndim != 1 or cu_seqlens.is_floating_point() \
            or cu_seqlens.is_complex() or cu_seqlens.dtype == torch.bool:
        raise ValueError("cu_seqlens must be a 1-D integer tensor [0, l1, l1 + l2, ..., total], got "
                         f"{getattr(cu_seqlens, 'dtype', type(cu_seqlens).__name__)}")
    cu = [int(c) for c in cu_seqlens.tolist()]
    if len(cu) < 2 or cu[0] != 0 or cu[-1] != total:
        raise ValueError(f"cu_seqlens must start at 0 and end at the number of tokens {total}, got {cu}")
    if any(b <= a for a, b in zip(cu, cu[1:])):
        raise ValueError(f"cu_seqlens must be strictly increasing (every sequence has a token), got {cu}")
    return cu


def varlen_attention(q, k, v, cu_seqlens, causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """Attention over sequences packed end to end without padding (FlashAttention's varlen layout).

    q (T, H, d), k (T, H, d), v (T, H, d_v); cu_seqlens = [0, l_1, l_1 + l_2, ..., T] (1-D integer
    tensor, int32 as FlashAttention's). Sequence i is tokens cu[i]:cu[i+1]; its queries attend only
    to its own keys (causal=True: key j <= query i within the sequence). One score matrix per
    sequence, so the work is sum_i l_i^2 (d + d_v) multiply-adds per head, never the T^2 of the
    packed row nor the S * max(l)^2 of padding. Returns (T, H, d_v) in q's dtype.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.ndim != 3 or not t.is_floating_point():
            raise ValueError(f"{name} must be a 3-D floating-point tensor (tokens, heads, dim), got "
                             f"{getattr(t, 'shape', type(t).__name__)}")
    if not (q.shape[0] == k.shape[0] == v.shape[0]):
        raise ValueError(f"q, k and v need the same number of tokens, got {q.shape[0]}, {k.shape[0]}, {v.shape[0]}")
    if not (q.shape[1] == k.shape[1] == v.shape[1]):
        raise ValueError(f"q, k and v need the same number of heads, got {q.shape[1]}, {k.shape[1]}, {v.shape[1]}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k need the same head dim, got {q.shape[-1]} and {k.shape[-1]}")
    cu = _check_cu_seqlens(cu_seqlens, q.shape[0])
    scale = _scale_for(q, scale)
    out = q.new_empty(q.shape[0], q.shape[1], v.shape[-1])
    for a, b in zip(cu, cu[1:]):
        qs, ks, vs = (t[a:b].transpose(0, 1) for t in (q, k, v))     # (H, l, .)
        s = (qs @ ks.transpose(-1, -2)) * scale
        if causal:
            s = s.masked_fill(_bottom_right_future(b - a, b - a, q.device), -math.inf)
        out[a:b] = (torch.softmax(s, dim=-1) @ vs).transpose(0, 1)
    return out


def bench_gqa_varlen(out=print) -> bool:
    """KV-cache bytes of Llama 2 70B with multi-head and grouped attention, and the scores a packed
    batch computes per head: packed row, padded to the longest, per sequence; with a check of
    gqa_attention and varlen_attention against SDPA (enable_gqa, per sequence)."""
    import torch.nn.functional as F

    ok = True
    out("KV cache, Llama 2 70B (80 layers, 64 query heads, 8 KV heads of 128, bf16):")
    for seqs, n in ((1, 1), (1, 4096), (16, 4096)):
        mha, gqa = kv_cache_bytes(seqs, n, 80, 64, 8, 128, 2)
        out(f"  {seqs:>3} x {n:>5} tokens: multi-head {mha / 2 ** 20:>10,.1f} MiB  grouped {gqa / 2 ** 20:>9,.1f} MiB"
            f"  ({mha / gqa:.0f}x)")
    lengths = [5, 17, 9, 30, 3]
    t = sum(lengths)
    out(f"packed batch {lengths} (T = {t}): scores per head: packed row {t * t:,}, padded "
        f"{len(lengths) * max(lengths) ** 2:,}, per sequence {sum(n * n for n in lengths):,}")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, h, n, 16, generator=g, dtype=torch.float64) for h, n in ((8, 3), (2, 40), (2, 40)))
    mask = torch.ones(3, 40, dtype=torch.bool).tril(37)
    err = float((gqa_attention(q, k, v, causal=True)
                 - F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)).abs().max())
    cu = torch.tensor([0, 5, 22, 31, 61, 64], dtype=torch.int32)
    q, k, v = (torch.randn(t, 2, 8, generator=g, dtype=torch.float64) for _ in range(3))
    alone = torch.cat([F.scaled_dot_product_attention(*(x[a:b].transpose(0, 1) for x in (q, k, v)), is_causal=True)
                       .transpose(0, 1) for a, b in zip(cu.tolist(), cu.tolist()[1:])])
    err2 = float((varlen_attention(q, k, v, cu, causal=True) - alone).abs().max())
    out(f"max |gqa_attention - SDPA(enable_gqa)| = {err:.1e}; max |varlen_attention - SDPA per sequence| = {err2:.1e}")
    ok &= err < 1e-12 and err2 < 1e-12
    return bool(ok)
