"""The layout planner with an expert-parallel axis: memory and step time of a (dp, tp, pp, ep)
layout for a mixture-of-experts transformer, and the fastest layout that fits.

It extends the dense planner of `solutions_lib.parallel` (`layout_step_time`, `best_layout`,
the model of Narayanan et al. 2021) with the conventions of `solutions_lib.moe` and
`solutions_lib.dist.expert_parallel`:

model:   the dense planner's dict {"layers": L, "hidden": h, "heads": a, "seq_len": s,
         "global_batch": B, "micro_batch": b} plus {"n_experts": E, "top_k": k, "expert_ffn": f}
         (every layer is an MoE layer; each expert is a GELU MLP h -> f -> h, 2 h f weights).
layout:  {"dp": d, "tp": t, "pp": p, "ep": x, "zero": z}: x ranks of a data-parallel group each
         hold E/x experts (expert parallelism is carved out of data parallelism, as in DeepSpeed-MoE
         and Megatron-Core: x divides d and E); attention is split t ways by tensor parallelism,
         experts are not; d t p = N GPUs.

Per layer and rank: attention 4 h^2 / t weights, replicated over d; experts 2 h f E / x weights,
replicated over d / x; the router h E (replicated, counted with attention). Mixed-precision
Adam, 16 bytes per weight; ZeRO stage z shards the 12 (z = 1) optimizer bytes over the ranks that
hold the same weights (d for attention, d / x for experts).

Step time, per micro-batch of T = b s tokens and stage of l = L/p layers (e = 2 bytes):
  compute     t_c  = l T (24 h^2 / t + 12 k h f imbalance) / F     (6 FLOPs per weight and token:
                     attention 4 h^2 weights split t ways; each token runs k experts of 2 h f
                     weights, and the most loaded rank runs `imbalance` times the mean)
  tensor      t_tp = 2 l AR(t, T h e)   (attention only: one all-reduce forward, one backward)
  all-to-all  t_a2a = 4 l (x-1)/x T k h e / bandwidth + 4 l (x-1) alpha
                     (dispatch and combine, forward and backward; a row of h values per token and
                     choice, `dist.expert_parallel.ep_bytes_per_step`), on the intra-node link when
                     the EP group fits in one node (t x divides G), else between nodes
  pipeline    t_pp as in `parallel.layout_step_time`
  data par.   attention gradients all-reduced over d, expert gradients over d / x, once per step
so total = (m + p - 1)(t_c + t_tp + t_a2a + t_pp) + t_dp with m = B / (d b) micro-batches.
Nothing overlaps except what the pipeline overlaps (pessimistic, like the dense planner).
"""
from __future__ import annotations

from ._checks import count as _int
from ._checks import positive_real as _pos
from .parallel import _cluster, _model, _ring_allreduce

__all__ = ["MOE_LAYOUT_KEYS", "make_moe_layout", "moe_layout_memory_per_rank", "moe_layout_step_time",
           "candidate_moe_layouts", "best_moe_layout"]

MOE_LAYOUT_KEYS = ("dp", "tp", "pp", "ep", "zero")
BYTES = 2.0


def make_moe_layout(dp, tp, pp, ep, zero=1) -> dict:
    """{"dp", "tp", "pp", "ep", "zero"} as ints."""
    return {"dp": int(dp), "tp": int(tp), "pp": int(pp), "ep": int(ep), "zero": int(zero)}


def _moe_model(model):
    L, h, a, s, B, b = _model(model)
    try:
        E, k, f = (model[key] for key in ("n_experts", "top_k", "expert_ffn"))
    except (KeyError, TypeError):
        raise ValueError("an MoE model also needs n_experts, top_k and expert_ffn") from None
    E, k, f = _int("n_experts", E), _int("top_k", k), _int("expert_ffn", f)
    if k > E:
        raise ValueError(f"top_k={k} must be <= n_experts={E}")
    return L, h, a, s, B, b, E, k, f


def _moe_layout(layout, model):
    if not isinstance(layout, dict) or any(key not in layout for key in MOE_LAYOUT_KEYS):
        raise ValueError(f"layout must be a dict with the keys {MOE_LAYOUT_KEYS} (see make_moe_layout), got {layout!r}")
    d, t, p, x = (_int(key, layout[key]) for key in ("dp", "tp", "pp", "ep"))
    z = layout["zero"]
    if isinstance(z, bool) or z not in (0, 1):
        raise ValueError(f"zero must be 0 or 1 in the MoE planner, got {z!r}")
    L, h, a, s, B, b, E, k, f = _moe_model(model)
    if L % p:
        raise ValueError(f"pp={p} must divide layers={L}")
    if a % t or h % t:
        raise ValueError(f"tp={t} must divide heads={a} (and hidden={h})")
    if d % x or E % x:
        raise ValueError(f"ep={x} must divide dp={d} (expert parallelism is carved out of data parallelism) "
                         f"and n_experts={E}")
    if B % (d * b):
        raise ValueError(f"global_batch={B} must be a multiple of dp x micro_batch = {d} x {b}")
    return d, t, p, x, int(z)


def _weights(model, layout):
    """(attention + router weights, expert weights) one rank holds for its l = L/p layers."""
    d, t, p, x, _ = _moe_layout(layout, model)
    L, h, _, _, _, _, E, _, f = _moe_model(model)
    layers = L // p
    return layers * (4.0 * h * h / t + h * E), layers * 2.0 * h * f * E / x


def moe_layout_memory_per_rank(layout, model) -> dict:
    """Bytes per GPU: {"attention_states", "expert_states", "activations", "total"}; 16 bytes per
    weight, ZeRO-1 sharding the 12 optimizer bytes over d (attention) or d / ep (experts) ranks.
    activations: the dense planner's s b h (34/t) per layer (sequence parallelism), with the MLP's
    share (about 19 of the 34) scaled by the k f / (4 h) of the routed experts' hidden width, times
    the min(p, m) micro-batches the first 1F1B stage holds."""
    d, t, p, x, z = _moe_layout(layout, model)
    L, h, _, s, B, b, E, k, f = _moe_model(model)
    att, exp = _weights(model, layout)
    shard = 12.0 if z == 1 else 0.0
    att_states = att * (16.0 - shard) + att * shard / d
    exp_states = exp * (16.0 - shard) + exp * shard / (d // x)
    per_layer = s * b * h * (15.0 / t + 19.0 * k * f / (4.0 * h))
    m = B // (d * b)
    acts = (L // p) * min(p, m) * per_layer
    return {"attention_states": att_states, "expert_states": exp_states, "activations": acts,
            "total": att_states + exp_states + acts}


def moe_layout_step_time(layout, model, cluster, imbalance: float = 1.0) -> dict:
    """Seconds of one optimizer step (module docstring): {"compute", "tp", "a2a", "pp", "bubble",
    "dp", "total"}. `imbalance` >= 1 is the most loaded rank's rows over the mean (the expert part
    of the step waits for it; `moe.load_report`)."""
    d, t, p, x, z = _moe_layout(layout, model)
    L, h, _, s, B, b, E, k, f = _moe_model(model)
    N, G, F, _, intra, inter = _cluster(cluster)
    imb = _pos("imbalance", imbalance)
    if imb < 1.0:
        raise ValueError(f"imbalance is max over mean rows, >= 1, got {imbalance!r}")
    if d * t * p != N:
        raise ValueError(f"dp x tp x pp = {d * t * p} must equal n_gpus={N}")
    if G % t:
        raise ValueError(f"tp={t} must divide gpus_per_node={G}: a TP group stays inside one node")
    e, l, m, T = BYTES, L // p, B // (d * b), b * s
    t_c = l * T * (24.0 * h * h / t + 12.0 * k * h * f * imb) / F
    t_tp = 2 * l * _ring_allreduce(t, T * h * e, intra) if t > 1 else 0.0
    a2a_link = intra if G % (t * x) == 0 else inter
    t_a2a = (4 * l * ((x - 1) / x * T * k * h * e / a2a_link[1] + (x - 1) * a2a_link[0])) if x > 1 else 0.0
    pp_link = intra if N <= G else inter
    t_pp = 2 * (pp_link[0] + T * h * e / pp_link[1]) if p > 1 else 0.0
    att, exp = _weights(model, layout)
    dp_link = intra if G % (t * d) == 0 else inter
    t_dp = (_ring_allreduce(d, att * e, dp_link) if d > 1 else 0.0) + \
           (_ring_allreduce(d // x, exp * e, dp_link) if d // x > 1 else 0.0)
    slot = t_c + t_tp + t_a2a + t_pp
    return {"compute": m * t_c, "tp": m * t_tp, "a2a": m * t_a2a, "pp": m * t_pp, "bubble": (p - 1) * slot,
            "dp": t_dp, "total": (m + p - 1) * slot + t_dp}


def candidate_moe_layouts(model, cluster, zero=1) -> list[dict]:
    """Every (dp, tp, pp, ep) the planner considers: t a divisor of gpus_per_node dividing heads
    and hidden, p a divisor of layers, d = N / (t p) whole with B a multiple of d b, x a divisor
    of both d and n_experts. Ordered by (tp, pp, ep)."""
    L, h, a, s, B, b, E, k, f = _moe_model(model)
    N, G, *_ = _cluster(cluster)
    out = []
    for t in range(1, G + 1):
        if G % t or a % t or h % t:
            continue
        for p in range(1, L + 1):
            if L % p or N % (t * p):
                continue
            d = N // (t * p)
            if B % (d * b):
                continue
            out.extend(make_moe_layout(d, t, p, x, zero) for x in range(1, d + 1) if d % x == 0 and E % x == 0)
    return out


def best_moe_layout(model, cluster, zero=1, imbalance: float = 1.0):
    """The fastest layout whose memory fits (exact ties: the smaller tp, pp, then the larger ep);
    None when none fits."""
    _, _, _, M, _, _ = _cluster(cluster)
    best, key = None, None
    for lay in candidate_moe_layouts(model, cluster, zero):
        if moe_layout_memory_per_rank(lay, model)["total"] > M:
            continue
        k = (moe_layout_step_time(lay, model, cluster, imbalance)["total"], lay["tp"], lay["pp"], -lay["ep"])
        if key is None or k < key:
            best, key = lay, k
    return best
