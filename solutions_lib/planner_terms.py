"""Extra terms of the layout planner (`solutions_lib.parallel`: `layout_memory_per_rank`,
`layout_step_time`, `best_layout`), each a keyword option whose default gives the planner's
original numbers exactly:

chunks = v      interleaved 1F1B (Narayanan et al. 2021, sec. 2.2): each device holds v chunks of
                l / v layers. Bubble (p-1)/v slots, i.e. the fraction (p-1)/(v m + p - 1) of the
                pipelined part (`pipeline_bubble_fraction(p, m, "interleaved", v)`); v times the
                point-to-point messages (every chunk boundary is a device boundary); the first
                stage holds `pipeline_peak_activations(p, m, "interleaved", v)` micro-batches of
                activations, p (1 + (p-1)/(p v)) once v m >= 2(p-1) + (v-1) p + 1. Needs v | l
                and p | m (Megatron-LM); applies when p > 1.
recompute       "selective" (default, the original model), "none" or "full"; activation bytes per
                layer from Korthikanti et al. 2022, Table 2 (`memory.activation_bytes_per_layer`):
                none s b h (34 + 5 a s / h)/t with SP (10 + 24/t + 5 a s/(h t) without), selective
                34/t (10 + 24/t), full 2 s b h / t with SP (2 s b h without): only the layer input.
                Time: full re-runs each layer's forward in the backward, compute x 4/3 (72 -> 96 h^2
                FLOPs per token) and its TP traffic x 3/2 (the forward's 2 of the 4 collectives again;
                its CP forward ring again). Selective recomputes the attention core, whose s^2
                FLOPs the 12 h^2-per-layer count leaves out: none and selective take the same time.
grad_bytes = g  bytes of a stored gradient: 2 (default, 16-bit) or 4 (fp32 main gradients, Megatron's
                --accumulate-allreduce-grads-in-fp32). States 2 + g + 12 bytes per parameter, ZeRO
                shards 12 (z=1), 12 + g (z=2), 14 + g (z=3); the gradient reduce-scatter /
                all-reduce moves g bytes per parameter, the weight all-gathers 2.
vocab = V       embedding (V h / t, vocab-parallel) on the first stage, an untied LM head (V h / t)
                on the last; the head costs 6 V h FLOPs per token (forward + backward), and the
                last stage keeps 4 s b V / t bytes of fp32 logits for one micro-batch (Korthikanti
                et al. 2022, sec. 4.3). The slowest stage paces the pipeline: every slot lasts the
                last stage's time. Memory reports the stage with the larger total ("stage" key).
cp > 1          context parallelism in the step time: every rank works on s / c tokens; per layer
                the ring attention (`layer_comm_bytes("cp")`, 6(c-1)+2 chunks) sends c-1 K/V hops
                forward, c-1 K/V/dK/dV hops backward, each overlapped with one block of causal
                (zig-zag) attention (`cp_comm_compute_times(s/c, h/t, ..., causal=True)`, backward
                2x bytes and 2x FLOPs), only max(0, comm - compute) exposed, plus the last dK/dV
                hop exposed in full. GQA is not modelled (K/V of h/t per rank).
order           the rank order, innermost axis first (default ("tp", "cp", "dp", "pp"),
                Megatron-LM's). The group of an axis of degree n and stride k (the product of the
                degrees inside it) stays in one node iff G % (k n) == 0 (the outermost axis: iff
                the whole job fits one node); otherwise it is charged the inter-node link (the
                slowest boundary or ring hop sets the time). An order that puts tp outside dp
                can thus make TP cross nodes.
"""
from __future__ import annotations

from . import memory as _memory

__all__ = ["DEFAULT_ORDER", "RECOMPUTE", "check_extras"]

DEFAULT_ORDER = ("tp", "cp", "dp", "pp")
RECOMPUTE = ("none", "selective", "full")


def check_extras(chunks=1, recompute="selective", grad_bytes=2, vocab=None, order=DEFAULT_ORDER):
    """Validated (v, recompute, g, V or None, order tuple)."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunks must be an int >= 1 (model chunks per pipeline stage), got {chunks!r}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
    if isinstance(grad_bytes, bool) or grad_bytes not in (2, 4):
        raise ValueError(f"grad_bytes must be 2 (16-bit gradients) or 4 (fp32 main gradients), got {grad_bytes!r}")
    if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1):
        raise ValueError(f"vocab must be None or an int >= 1, got {vocab!r}")
    if isinstance(order, str):
        order = tuple(x.strip() for x in order.split(","))
    order = tuple(order)
    if sorted(order) != sorted(DEFAULT_ORDER):
        raise ValueError(f"order must list each of {DEFAULT_ORDER} once (innermost first), got {order!r}")
    return chunks, recompute, grad_bytes, vocab, order


def _layer_activation_bytes(s_local, b, h, a, t, sp, recompute) -> float:
    """Bytes one layer keeps per micro-batch (Korthikanti et al. 2022, Table 2); "selective" is
    the planner's original expression, the others `memory.activation_bytes_per_layer`."""
    if recompute == "selective":
        return s_local * b * h * ((34.0 / t) if sp else (10.0 + 24.0 / t))
    return float(_memory.activation_bytes_per_layer(int(s_local), b, h, a, tp=t, sequence_parallel=sp,
                                                    recompute=recompute))


def _state_bytes_per_param(z, grad_bytes=2):
    """(unsharded, sharded) bytes per parameter under ZeRO stage z: 2 + g + 12 in all."""
    g = float(grad_bytes)
    total = 14.0 + g
    sharded = {0: 0.0, 1: 12.0, 2: 12.0 + g, 3: total}[z]
    return total - sharded, sharded


def _axis_links(order, degrees, N, G, intra, inter) -> dict:
    """{axis: link} for the rank order `order` (innermost first) and `degrees` {axis: n}."""
    out, k = {}, 1
    for i, axis in enumerate(order):
        n = degrees[axis]
        inside = N <= G if i == len(order) - 1 else G % (k * n) == 0
        out[axis] = intra if inside else inter
        k *= n
    return out


def _cp_exposed_time(c, s, b, h, t, e, link, flops, full_recompute, hop_times) -> float:
    """Exposed seconds of ring attention for one layer and one micro-batch on a context-parallel
    group of c ranks (see the module docstring). 0 when c == 1. `hop_times` gives one ring hop's
    (communication, compute) seconds: `parallel.cp_comm_compute_times`, passed in so that this
    module does not import the planner that imports it."""
    if c == 1:
        return 0.0
    alpha, bw = link
    comm1, comp1 = hop_times(s // c, h // t, alpha, bw, flops, e, causal=True)
    fwd_c, fwd_a = alpha + b * (comm1 - alpha), b * comp1
    bwd_c, bwd_a = alpha + 2 * b * (comm1 - alpha), 2 * b * comp1
    fwd = (c - 1) * max(0.0, fwd_c - fwd_a)
    return (2 if full_recompute else 1) * fwd + (c - 1) * max(0.0, bwd_c - bwd_a) + fwd_c


def _dp_time(d, m, z, s_w, s_g, link, reshard_after_forward=True) -> float:
    """Data-parallel seconds per step: H(n, S) = (n-1) alpha + (n-1)/n S / bw (ring RS or AG);
    ZeRO-0: 2 H(S_g) (all-reduce); ZeRO-1: H(S_g) + H(S_w); ZeRO-2: m H(S_g) + H(S_w);
    ZeRO-3: m (H(S_w) + H(S_g) + H(S_w) if reshard_after_forward). S_g = S_w: the original model."""
    if d == 1:
        return 0.0
    alpha, bw = link

    def H(nbytes):
        return (d - 1) * alpha + (d - 1) / d * nbytes / bw
    hw, hg = H(s_w), H(s_g)
    if z == 0:
        return 2 * hg
    if z == 1:
        return hg + hw
    if z == 2:
        return m * hg + hw
    return m * (hw + hg + (hw if reshard_after_forward else 0.0))
