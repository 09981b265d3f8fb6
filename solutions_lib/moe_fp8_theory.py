"""Experts, FP8 and kernels by the numbers: the references of assignment 12, theory (EXT-MOE,
EXT-EP, EXT-FP8, EXT-TRITON).

Closed forms, each checked in tests/test_moe_fp8_theory.py against published numbers (Mixtral
8x7B, OLMoE-1B-7B, the OCP MX v1.0 element formats), torch.finfo and the bit patterns of torch's
float8 dtypes, or brute force.

* `moe_param_counts(...)`: total and active (per token) parameters of a decoder whose MLPs are
  top-k routed SwiGLU experts, and the training FLOPs per token of its matmuls (6 x active
  matmul weights).
* `capacity_report(load, top_k, capacity_factor)`: capacity C = ceil(f T k / E), the dropped
  assignments of a load vector, and the smallest factor with no drops, E max(load) / sum(load).
* `ep_vs_dp_bytes(...)`: the bytes one rank sends per MoE layer and step with expert
  parallelism (4 all-to-alls of T k h e_a, (n-1)/n of each leaving the rank) against the ring
  all-reduce of the same layer's expert gradients under data parallelism, and the crossover.
* `fp_format(exp_bits, man_bits, kind)`: bias, max normal, min normal, min subnormal, eps and
  binades of a binary floating-point format from its bit layout ("ieee", "fn", "fnuz", "mx").
* `fa2_tile_budget(...)`: shared memory and registers of one FlashAttention-2 forward program.
* `tile_roofline(...)`: arithmetic intensity of a tiled-matmul K step against a ridge point.

Every function raises ValueError with the reason on bad input.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["moe_param_counts", "capacity_report", "ep_vs_dp_bytes", "fp_format", "fa2_tile_budget", "tile_roofline",
           "bench_moe_fp8_theory", "MIXTRAL_8X7B", "OLMOE_1B_7B", "H100_SXM"]

#: Mixtral 8x7B (Jiang et al. 2024, arXiv:2401.04088, table 1; Mistral AI's announcement: 46.7B total,
#: 12.9B active per token)
MIXTRAL_8X7B = dict(d_model=4096, d_ff=14336, n_layers=32, n_experts=8, top_k=2, vocab_size=32000, n_heads=32,
                    n_kv_heads=8, head_dim=128)
#: OLMoE-1B-7B (Muennighoff et al. 2024, arXiv:2409.02060: 6.9B total, 1.3B active; config.json of
#: allenai/OLMoE-1B-7B-0924 on the Hugging Face hub)
OLMOE_1B_7B = dict(d_model=2048, d_ff=1024, n_layers=16, n_experts=64, top_k=8, vocab_size=50304, n_heads=16,
                   n_kv_heads=16, head_dim=128)
#: NVIDIA H100 SXM5 data sheet: dense bf16 tensor-core peak and HBM3 bandwidth; 227 KB of shared
#: memory per thread block (228 KB per SM), 255 registers per thread at most
H100_SXM = dict(flops=989.4e12, bandwidth=3.35e12, smem=227 * 1024, regs_per_thread=255)


def _int(name, v, lo=1):
    if isinstance(v, bool) or not isinstance(v, Integral) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return int(v)


def _pos(name, v):
    if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    return float(v)


def moe_param_counts(d_model, d_ff, n_layers, n_experts, top_k, vocab_size, n_heads, n_kv_heads, head_dim,
                     n_shared=0) -> dict:
    """{'total', 'active', 'train_flops_per_token'} of a top-k MoE decoder (ints).

    Per layer: attention W_q (d x a d_h), W_k and W_v (d x a_kv d_h each), W_o (a d_h x d), no
    biases; a router d x E; E routed SwiGLU experts and n_shared always-on ones, 3 d d_ff each;
    two RMSNorm weights of d. Then a final norm (d), the embedding table and an untied output
    head (V d each). Active: the same with top_k + n_shared experts per layer. FLOPs: 6 x the
    active weights that are matmuls (everything active but the embedding table and the norms)."""
    d, f, L = _int("d_model", d_model), _int("d_ff", d_ff), _int("n_layers", n_layers)
    E, k, V = _int("n_experts", n_experts), _int("top_k", top_k), _int("vocab_size", vocab_size)
    a, akv, dh = _int("n_heads", n_heads), _int("n_kv_heads", n_kv_heads), _int("head_dim", head_dim)
    s = _int("n_shared", n_shared, 0)
    if k > E:
        raise ValueError(f"top_k = {k} > n_experts = {E}")
    if a % akv:
        raise ValueError(f"n_kv_heads = {akv} must divide n_heads = {a}")
    attn = 2 * d * a * dh + 2 * d * akv * dh
    expert = 3 * d * f
    router, norms = d * E, 2 * d
    total = L * (attn + router + norms + (E + s) * expert) + d + 2 * V * d
    active = L * (attn + router + norms + (k + s) * expert) + d + 2 * V * d
    matmul = active - V * d - (2 * L + 1) * d
    return {"total": total, "active": active, "train_flops_per_token": 6 * matmul}


def capacity_report(load, top_k, capacity_factor) -> dict:
    """Capacity, drops and the smallest drop-free capacity factor of one routing step.

    load[i]: how many of the T*k token-expert assignments chose expert i (ints >= 0, sum > 0).
    T = sum(load) / top_k, C = ceil(capacity_factor * T * top_k / E); an expert keeps at most C,
    dropped = sum(max(0, load_i - C)), drop_fraction = dropped / (T k); min_factor = the
    smallest f with f T k / E >= max(load), i.e. max(load) / mean(load)."""
    try:
        load = [v for v in load]
    except TypeError:
        raise ValueError(f"load must be a sequence of ints, got {type(load).__name__}") from None
    if not load:
        raise ValueError("load is empty")
    load = [_int("every load", getattr(v, "item", lambda: v)(), 0) for v in load]
    k = _int("top_k", top_k)
    cf = _pos("capacity_factor", capacity_factor)
    E, n = len(load), sum(load)
    if k > E:
        raise ValueError(f"top_k = {k} > n_experts = {E}")
    if n == 0 or n % k:
        raise ValueError(f"sum(load) = {n} must be a positive multiple of top_k = {k}")
    T = n // k
    C = math.ceil(cf * T * k / E)
    dropped = sum(max(0, v - C) for v in load)
    return {"tokens": T, "capacity": int(C), "dropped": int(dropped), "drop_fraction": dropped / n,
            "min_factor": E * max(load) / n}


def ep_vs_dp_bytes(tokens, hidden, d_ff, n_experts, top_k, ranks, act_bytes=2, grad_bytes=2) -> dict:
    """Bytes one rank sends per MoE layer and optimizer step: EP's all-to-alls vs DP's expert all-reduce.

    tokens: tokens per rank per step. EP over `ranks` ranks: dispatch + combine in the forward and
    again in the backward, 4 buffers of tokens * top_k * hidden * act_bytes, (n-1)/n of each leaving
    the rank. DP over the same ranks: a ring all-reduce of the layer's expert gradients, 2 (n-1)/n *
    3 E hidden d_ff grad_bytes. crossover_tokens: the tokens per rank below which EP sends less,
    3 E d_ff grad_bytes / (2 top_k act_bytes)."""
    T, h, f = _int("tokens", tokens), _int("hidden", hidden), _int("d_ff", d_ff)
    E, k, n = _int("n_experts", n_experts), _int("top_k", top_k), _int("ranks", ranks)
    ea, eg = _pos("act_bytes", act_bytes), _pos("grad_bytes", grad_bytes)
    if k > E:
        raise ValueError(f"top_k = {k} > n_experts = {E}")
    if E % n:
        raise ValueError(f"ranks = {n} must divide n_experts = {E}")
    frac = (n - 1) / n
    return {"ep": 4 * frac * T * k * h * ea, "dp": 2 * frac * 3 * E * h * f * eg,
            "crossover_tokens": 3 * E * f * eg / (2 * k * ea)}


_KINDS = ("ieee", "fn", "fnuz", "mx")


def fp_format(exp_bits, man_bits, kind="ieee") -> dict:
    """Limits of a binary float with a sign bit, `exp_bits` exponent and `man_bits` mantissa bits.

    kind 'ieee': the top exponent field is inf/NaN, bias 2^(e-1)-1. 'fn' (e4m3fn): the top exponent
    holds normals except the all-ones mantissa (NaN), bias 2^(e-1)-1. 'fnuz': no inf, no -0 (its code
    is the NaN), every exponent field holds numbers, bias 2^(e-1). 'mx' (OCP MX FP6/FP4): no inf, no
    NaN, bias 2^(e-1)-1. Returns bias (int), max_normal, min_normal, min_subnormal, eps (spacing
    above 1) and binades = log2(max_normal / min_subnormal)."""
    e, m = _int("exp_bits", exp_bits, 2), _int("man_bits", man_bits, 1)
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    bias = 2 ** (e - 1) if kind == "fnuz" else 2 ** (e - 1) - 1
    top = 2 ** e - 2 if kind == "ieee" else 2 ** e - 1
    top_mant = 2 ** m - 2 if kind == "fn" else 2 ** m - 1
    mx = 2.0 ** (top - bias) * (1 + top_mant / 2 ** m)
    mn = 2.0 ** (1 - bias)
    sub = 2.0 ** (1 - bias - m)
    return {"bias": bias, "max_normal": mx, "min_normal": mn, "min_subnormal": sub, "eps": 2.0 ** -m,
            "binades": math.log2(mx / sub)}


def fa2_tile_budget(block_m, block_n, head_dim, stages=2, num_warps=4, in_bytes=2, smem=H100_SXM["smem"],
                    regs_per_thread=H100_SXM["regs_per_thread"]) -> dict:
    """On-chip memory of one FlashAttention-2 forward program (one BLOCK_M query tile).

    Shared memory: the Q tile (BM x d) and `stages` buffers of the K and V tiles (BN x d each), in
    in_bytes. Registers (fp32, 4 bytes): the O accumulator (BM x d), the score tile (BM x BN) and the
    running max and sum (BM each), spread over num_warps * 32 threads. Returns shared_bytes,
    register_bytes, registers_per_thread (float) and fits (shared <= smem and per-thread registers
    <= regs_per_thread)."""
    bm, bn, d = _int("block_m", block_m), _int("block_n", block_n), _int("head_dim", head_dim)
    st, w = _int("stages", stages), _int("num_warps", num_warps)
    eb, sm, rp = _pos("in_bytes", in_bytes), _pos("smem", smem), _pos("regs_per_thread", regs_per_thread)
    shared = (bm * d + st * 2 * bn * d) * eb
    reg_bytes = 4 * (bm * d + bm * bn + 2 * bm)
    per_thread = reg_bytes / 4 / (32 * w)
    return {"shared_bytes": float(shared), "register_bytes": float(reg_bytes), "registers_per_thread": per_thread,
            "fits": bool(shared <= sm and per_thread <= rp)}


def tile_roofline(block_m, block_n, block_k, peak_flops=H100_SXM["flops"], bandwidth=H100_SXM["bandwidth"],
                  in_bytes=2) -> dict:
    """One K step of a tiled matmul program against a GPU's roofline.

    The step loads a BM x BK tile of A and a BK x BN tile of B (in_bytes each) and does 2 BM BN BK
    FLOPs: intensity = 2 BM BN BK / ((BM + BN) BK in_bytes) FLOP/B; ridge = peak / bandwidth;
    bound 'memory' when intensity < ridge, else 'compute'; attainable = min(peak, intensity * bandwidth)."""
    bm, bn, bk = _int("block_m", block_m), _int("block_n", block_n), _int("block_k", block_k)
    P, B, eb = _pos("peak_flops", peak_flops), _pos("bandwidth", bandwidth), _pos("in_bytes", in_bytes)
    intensity = 2 * bm * bn * bk / ((bm * bk + bk * bn) * eb)
    ridge = P / B
    return {"intensity": intensity, "ridge": ridge, "bound": "memory" if intensity < ridge else "compute",
            "attainable": min(P, intensity * B)}


def bench_moe_fp8_theory(out=print) -> bool:
    """The published numbers the theory notebook checks, and whether the closed forms reproduce them."""
    ok = True
    rows = []
    for name, cfg, tot, act in (("Mixtral 8x7B", MIXTRAL_8X7B, 46.7e9, 12.9e9), ("OLMoE-1B-7B", OLMOE_1B_7B, 6.9e9, 1.3e9)):
        c = moe_param_counts(**cfg)
        good = abs(c["total"] - tot) <= 0.05e9 and abs(c["active"] - act) <= 0.05e9
        ok &= good
        rows.append((name, f"{c['total'] / 1e9:.2f}B / {c['active'] / 1e9:.2f}B", f"{tot / 1e9:.1f}B / {act / 1e9:.1f}B", good))
    for name, args, want in (("e4m3fn max", (4, 3, "fn"), 448.0), ("e5m2 max", (5, 2, "ieee"), 57344.0),
                             ("MX FP6 e2m3 max", (2, 3, "mx"), 7.5), ("MX FP6 e3m2 max", (3, 2, "mx"), 28.0),
                             ("MX FP4 e2m1 max", (2, 1, "mx"), 6.0), ("e4m3fnuz max", (4, 3, "fnuz"), 240.0)):
        got = fp_format(*args)["max_normal"]
        ok &= got == want
        rows.append((name, f"{got:g}", f"{want:g}", got == want))
    r = tile_roofline(128, 128, 64)
    rows.append(("H100 ridge (FLOP/B)", f"{r['ridge']:.1f}", "295.3", abs(r["ridge"] - 295.3) < 0.1))
    out(f"{'quantity':24s} {'closed form':>22s} {'published':>20s}  ok")
    for name, got, want, good in rows:
        out(f"{name:24s} {got:>22s} {want:>20s}  {'yes' if good else 'NO'}")
    return bool(ok and all(r[3] for r in rows))
