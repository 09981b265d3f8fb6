"""`python -m solutions_lib bench parallel`: the lab-part-2 references measured on gloo ranks
against their formulas.

* pipeline (2 and 4 ranks): AFAB and 1F1B on a small transformer; bubble = idle slots of the
  executed orders (unit-cost slots) vs (p-1)/(m+p-1) (Huang et al. 2019; Narayanan et al. 2021);
  peak in-flight micro-batches per stage (measured: activations held) vs m (AFAB) and
  min(p - s, m) <= p (1F1B); point-to-point bytes per stage vs `pipeline_p2p_bytes`.
  Interleaved 1F1B (Narayanan et al. 2021, sec. 2.2; v chunks per rank, one row per (p, v)):
  bubble of the executed orders (unit slot per chunk action) vs (p-1)/(v m + p - 1) of the step
  and (p-1)/(v m) of the ideal time (1F1B: (p-1)/m); peak chunk activations per rank vs
  min(w + 1, v m) with w = 2 (p - r - 1) + (v - 1) p; bytes per rank vs
  (2 v - [r = 0] - [r = p-1]) m a e (`interleaved_p2p_bytes`).
* tensor / sequence parallelism (2 ranks): collective calls and bytes of one layer's forward +
  backward vs `tp_comm_calls_per_step` / `tp_comm_bytes_per_step` (Shoeybi et al. 2019;
  Korthikanti et al. 2022).
* context parallelism (4 ranks): bytes and calls of ring attention vs `ring_attention_bytes`
  (Liu et al. 2023); score entries each rank evaluates, contiguous vs zig-zag chunks, vs
  `ring_attention_pairs` (Brandon et al. 2023: the zig-zag layout balances the causal work).
* mesh (4 ranks, 2 x 2): all-reduces per group vs 4 L per step in each TP group, 1 per step in
  each DP group.
* when communication wins (EXT-COMMBOUND): the closed-form crossover of every strategy for a GPU
  cluster, then DP and TP on 2 ranks measured in parts (comm_bound.py): compute against
  communication as the batch and the width grow, fitted crossovers, and the DP prediction from an
  alpha-beta fit and the measured FLOP rate. Trends, not speeds: the goal is their shape.
Every row also checks the result against one process (max abs difference, float64).
"""
from __future__ import annotations

from collections import Counter

import torch
import torch.nn.functional as F

from .launch import launch

_V, _H, _A, _S, _MB = 11, 8, 2, 8, 2


def _pp_rank(rank, world, m):
    from solutions_lib.models import CheckpointedTransformer

    from .pipeline import PipelineStage, run_1f1b, run_afab, split_transformer

    g = torch.Generator().manual_seed(1)
    inputs = [torch.randint(0, _V, (_MB, _S), generator=g) for _ in range(m)]
    targets = [torch.randint(0, _V, (_MB, _S), generator=g) for _ in range(m)]

    def loss_fn(logits, y):
        return F.cross_entropy(logits.reshape(-1, _V), y.reshape(-1))

    ref = CheckpointedTransformer(vocab=_V, hidden=_H, heads=_A, layers=world, max_seq=_S, seed=0).double()
    for x, y in zip(inputs, targets):
        (loss_fn(ref(x), y) / m).backward()
    ref_grads = dict(ref.named_parameters())
    out = {}
    for name, run in (("afab", run_afab), ("1f1b", run_1f1b)):
        model = CheckpointedTransformer(vocab=_V, hidden=_H, heads=_A, layers=world, max_seq=_S, seed=0).double()
        names = {id(p): n for n, p in model.named_parameters()}
        part = split_transformer(model, world)[rank]
        r = run(PipelineStage(part, (_MB, _S, _H), torch.float64, loss_fn=loss_fn), inputs, targets)
        r["max_diff"] = max(float((p.grad - ref_grads[names[id(p)]].grad).abs().max()) for p in part.parameters())
        out[name] = r
    return out


def _ilv_rank(rank, world, v, m):
    from solutions_lib.models import CheckpointedTransformer

    from .pipeline import InterleavedStage, run_interleaved, split_transformer

    g = torch.Generator().manual_seed(1)
    inputs = [torch.randint(0, _V, (_MB, _S), generator=g) for _ in range(m)]
    targets = [torch.randint(0, _V, (_MB, _S), generator=g) for _ in range(m)]

    def loss_fn(logits, y):
        return F.cross_entropy(logits.reshape(-1, _V), y.reshape(-1))

    def model():
        return CheckpointedTransformer(vocab=_V, hidden=_H, heads=_A, layers=world * v, max_seq=_S, seed=0).double()

    ref = model()
    for x, y in zip(inputs, targets):
        (loss_fn(ref(x), y) / m).backward()
    ref_grads = dict(ref.named_parameters())
    mine = model()
    names = {id(p): n for n, p in mine.named_parameters()}
    chunks = split_transformer(mine, world * v)[rank::world]  # virtual stages rank, rank + p, ...
    r = run_interleaved(InterleavedStage(chunks, (_MB, _S, _H), torch.float64, loss_fn=loss_fn), inputs, targets)
    r["max_diff"] = max(float((p.grad - ref_grads[names[id(p)]].grad).abs().max())
                        for c in chunks for p in c.parameters())
    return r


def _tp_rank(rank, world, sp):
    from solutions_lib.dist import CommCounter
    from solutions_lib.models import Block

    from .tensor_parallel import TensorParallelBlock, causal_mask

    torch.manual_seed(0)
    block = Block(_H * 2, _A * 2, 4).double()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(_MB, _S, _H * 2, generator=g, dtype=torch.float64)
    mask = causal_mask(_S)
    ref = block(x, mask).detach()
    tp = TensorParallelBlock(block, sequence_parallel=sp)
    lo, hi = (rank * _S // world, (rank + 1) * _S // world) if sp else (0, _S)
    with CommCounter() as c:
        out = tp(x[:, lo:hi], mask)
        out.sum().backward()
        tp.allreduce_replicated_grads()
    return {"max_diff": float((out.detach() - ref[:, lo:hi]).abs().max()), "comm": c.summary()}


def _cp_rank(rank, world):
    from .context_parallel import ring_attention, split_sequence

    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 16, 8, generator=g, dtype=torch.float64) for _ in range(3))
    s = (q @ k.transpose(-2, -1)) / 8 ** 0.5
    full = torch.softmax(s.masked_fill(torch.ones(16, 16, dtype=torch.bool).triu(1), float("-inf")), -1) @ v
    mine = [split_sequence(t, rank, world).requires_grad_(True) for t in (q, k, v)]
    comm = Counter()
    o = ring_attention(*mine, causal=True, comm=comm)
    o.sum().backward()
    return {"max_diff": float((o.detach() - split_sequence(full, rank, world)).abs().max()), "comm": dict(comm)}


def _cp_balance_rank(rank, world):
    from .context_parallel import ring_attention, split_sequence, zigzag_ring_attention, zigzag_shard

    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 16, 8, generator=g, dtype=torch.float64) for _ in range(3))
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    cont, zig = Counter(), Counter()
    ring_attention(*(split_sequence(t, rank, world) for t in (q, k, v)), causal=True, work=cont)
    o = zigzag_ring_attention(*(zigzag_shard(t, rank, world) for t in (q, k, v)), work=zig)
    return {"contiguous": cont["pairs"], "zigzag": zig["pairs"],
            "max_diff": float((o - zigzag_shard(full, rank, world)).abs().max())}


def _mesh_rank(rank, world, steps=2):
    from solutions_lib.models import Block

    from .mesh import average_gradients, count_by_group, init_mesh
    from .tensor_parallel import TensorParallelBlock, causal_mask

    mesh = init_mesh(2, 2)
    torch.manual_seed(0)
    tpb = TensorParallelBlock(Block(_H * 2, _A * 2, 4).double(), group=mesh.tp_group)
    g = torch.Generator().manual_seed(3 + mesh.dp_rank)
    with count_by_group() as calls:
        for _ in range(steps):
            tpb(torch.randn(_MB, _S, _H * 2, generator=g, dtype=torch.float64), causal_mask(_S)).sum().backward()
            average_gradients(tpb.parameters(), mesh.dp_group)
    return {"calls": dict(calls), "tp_ranks": mesh.tp_ranks, "dp_ranks": mesh.dp_ranks, "steps": steps}


def run(out=print, timeout: float = 120.0) -> bool:
    from solutions_lib.parallel import pipeline_bubble_fraction

    from .context_parallel import ring_attention_bytes, ring_attention_pairs
    from .pipeline import (interleaved_p2p_bytes, interleaved_peak_in_flight, interleaved_schedule_order,
                           pipeline_p2p_bytes, pipeline_timeline)
    from .tensor_parallel import tp_comm_bytes_per_step, tp_comm_calls_per_step

    ok = True
    out("pipeline (gloo ranks; unit-cost slots from the executed orders; in-flight = activations a stage holds)")
    out(f"{'schedule':<6} {'p':>2} {'m':>3} {'bubble':>8} {'formula':>8} {'peak in-flight by stage':>26} "
        f"{'expected':>14} {'p2p bytes':>10} {'grad diff':>10}")
    for p, m in ((2, 4), (4, 8)):
        res = launch(_pp_rank, p, args=(m,), timeout=timeout)
        for sched in ("afab", "1f1b"):
            rows = [r[sched] for r in res]
            tl = pipeline_timeline([r["order"] for r in rows])
            want = pipeline_bubble_fraction(p, m, "gpipe" if sched == "afab" else "1f1b")
            peaks = [r["peak_in_flight"] for r in rows]
            want_peaks = [m if sched == "afab" else min(p - s, m) for s in range(p)]
            p2p_ok = all({k: v.get("bytes", 0) for k, v in r["p2p"].items()}
                         == pipeline_p2p_bytes(s, p, m, _MB * _S * _H, 8) for s, r in enumerate(rows))
            diff = max(r["max_diff"] for r in rows)
            row_ok = abs(tl["bubble"] - want) < 1e-12 and peaks == want_peaks and p2p_ok and diff < 1e-10
            ok &= row_ok
            out(f"{sched:<6} {p:>2} {m:>3} {tl['bubble']:>8.4f} {want:>8.4f} {str(peaks):>26} {str(want_peaks):>14} "
                f"{'= formula' if p2p_ok else 'DIFFERS':>10} {diff:>10.1e}")
        if p == 2:
            for sched in ("afab", "1f1b"):
                grid = pipeline_timeline([r[sched]["order"] for r in res])["grid"]
                out(f"  {sched} timeline (digit: forward of micro-batch i; letter: its backward; '.': idle): "
                    + " | ".join(grid))

    out("")
    out("interleaved 1F1B (Megatron-LM; v chunks per rank, unit slot per chunk action; bubble as idle / step "
        "time and idle / busy time; peak in chunk activations, 1/v of a stage's each)")
    out(f"{'p':>2} {'v':>2} {'m':>3} {'bubble':>7} {'(p-1)/(vm+p-1)':>14} {'idle/busy':>9} {'(p-1)/(vm)':>10} "
        f"{'1F1B':>6} {'peak by rank':>14} {'expected':>14} {'p2p bytes by rank':>26} {'formula':>9} {'grad diff':>9}")
    for p, v, m in ((2, 2, 4), (2, 4, 4), (4, 2, 8)):
        rows = launch(_ilv_rank, p, args=(v, m), timeout=timeout)
        tl = pipeline_timeline([r["order"] for r in rows])
        want, want_ideal = (pipeline_bubble_fraction(p, m, "interleaved", v),
                            pipeline_bubble_fraction(p, m, "interleaved", v, denominator="ideal"))
        peaks = [r["peak_in_flight"] for r in rows]
        want_peaks = [interleaved_peak_in_flight(s, p, m, v) for s in range(p)]
        sent = [r["p2p"]["send"].get("bytes", 0) for r in rows]
        p2p_ok = all({k: d.get("bytes", 0) for k, d in r["p2p"].items()}
                     == interleaved_p2p_bytes(s, p, m, v, _MB * _S * _H, 8) for s, r in enumerate(rows))
        order_ok = all(r["order"] == interleaved_schedule_order(s, p, m, v) for s, r in enumerate(rows))
        diff = max(r["max_diff"] for r in rows)
        row_ok = (abs(tl["bubble"] - want) < 1e-12 and abs(tl["bubble_ideal"] - want_ideal) < 1e-12
                  and peaks == want_peaks and p2p_ok and order_ok and diff < 1e-10)
        ok &= row_ok
        out(f"{p:>2} {v:>2} {m:>3} {tl['bubble']:>7.4f} {want:>14.4f} {tl['bubble_ideal']:>9.4f} {want_ideal:>10.4f} "
            f"{(p - 1) / m:>6.3f} {str(peaks):>14} {str(want_peaks):>14} {str(sent):>26} "
            f"{'= formula' if p2p_ok else 'DIFFERS':>9} {diff:>9.1e}")
    out("  p2p bytes = (2 v - [r = 0] - [r = p-1]) m a e per rank each way (a = act numel, e = 8): v times 1F1B's "
        "on an inner rank, (2 v - 1) m a e at the ends")

    out("")
    out("tensor / sequence parallelism: one layer forward + backward on 2 ranks (calls, bytes per rank)")
    for sp in (False, True):
        res = launch(_tp_rank, 2, args=(sp,), timeout=timeout)
        comm = res[0]["comm"]
        calls = {op: c for op, (c, _) in comm.items()}
        nbytes = {op: b for op, (_, b) in comm.items()}
        want_c = tp_comm_calls_per_step(1, 2, sp)
        want_b = tp_comm_bytes_per_step(_MB, _S, _H * 2, 1, 2, sp, bytes_per_element=8)
        diff = max(r["max_diff"] for r in res)
        row_ok = calls == want_c and nbytes == want_b and diff < 1e-10
        ok &= row_ok
        out(f"  {'TP+SP' if sp else 'TP':<6} measured {calls} {nbytes}")
        out(f"  {'':<6} formula  {want_c} {want_b}  -> {'equal' if row_ok else 'DIFFER'} (output diff {diff:.1e})")

    out("")
    out("context parallelism: causal ring attention forward + backward on 4 ranks (per rank)")
    res = launch(_cp_rank, 4, timeout=timeout)
    want = ring_attention_bytes(2 * 2 * 4 * 8, 4, 8)
    cp_ok = all(r["comm"] == want for r in res) and max(r["max_diff"] for r in res) < 1e-10
    ok &= cp_ok
    out(f"  measured {res[0]['comm']}")
    out(f"  formula  {want} -> {'equal' if cp_ok else 'DIFFER'} (output diff {max(r['max_diff'] for r in res):.1e})")
    res = launch(_cp_balance_rank, 4, timeout=timeout)
    bal_ok = max(r["max_diff"] for r in res) < 1e-10
    for layout in ("contiguous", "zigzag"):
        got, want = [r[layout] for r in res], ring_attention_pairs(16, 4, layout)
        bal_ok &= got == want
        out(f"  {layout:<10} score entries per rank (s=16, per head) {got}, formula {want}, "
            f"max/min {max(got) / min(got):.2f}")
    ok &= bal_ok
    out(f"  causal load balance: contiguous (r+1)(s/p)^2 (max/min = p), zig-zag (2p+2)(s/2p)^2 (max/min = 1) "
        f"-> {'equal' if bal_ok else 'DIFFER'} (zig-zag output diff {max(r['max_diff'] for r in res):.1e})")

    out("")
    out("2-D mesh DP x TP = 2 x 2 on 4 ranks, 2 steps: all-reduces per group (rank 0)")
    res = launch(_mesh_rank, 4, timeout=timeout)
    mesh_ok = True
    for r in res:
        want = {("all_reduce", r["tp_ranks"]): 4 * r["steps"], ("all_reduce", r["dp_ranks"]): r["steps"]}
        mesh_ok &= r["calls"] == want
    ok &= mesh_ok
    out(f"  measured {res[0]['calls']}; formula: 4 L per step in the TP group, 1 per step in the DP group "
        f"-> {'equal' if mesh_ok else 'DIFFER'}")
    out("")
    trend_ok = _comm_bound(out)
    out("")
    out(f"goal: every measured bubble, in-flight peak, call and byte count equals its formula, every result "
        f"equals one process -> {'met' if ok else 'NOT met'}")
    out(f"goal: the measured compute/communication trends of DP and TP have the closed forms' shape "
        f"-> {'met' if trend_ok else 'NOT met'}")
    return ok and trend_ok


def _comm_bound(out) -> bool:
    """EXT-COMMBOUND: the closed-form crossovers per strategy for a GPU cluster, then the two
    measurable ones (DP, TP) on 2 gloo ranks, as trends (comm_bound.py)."""
    from solutions_lib import comms, parallel
    from solutions_lib import upstream

    from .comm_bound import (dp_crossover_from, dp_layer, measure_dp_sweep, measure_tp_sweep,
                             predicted_dp_crossover, tp_crossover_from)

    F, e, h = 400e12, 2, 8192
    links = {"NVLink (450 GB/s, 3 us)": (3e-6, 450e9), "InfiniBand (50 GB/s, 5 us)": (5e-6, 50e9)}
    out(f"when each strategy is communication-bound (closed forms; one layer, h = {h}, bf16, F = 400 TFLOP/s achieved)")
    out(f"  {'link':<28} {'DDP T*':>9} {'FSDP T*':>9} {'TP(8) h*':>9} {'PP T* (4 layers)':>17} {'CP c* causal':>13}")
    for name, (alpha, B) in links.items():
        out(f"  {name:<28} {parallel.dp_crossover_tokens(h, 64, alpha, B, F, e):>9,.0f} "
            f"{parallel.dp_crossover_tokens(h, 64, alpha, B, F, e, fsdp=True):>9,.0f} "
            f"{parallel.tp_crossover_hidden(4096, 8, alpha, B, F, e):>9,.0f} "
            f"{parallel.pp_crossover_tokens(h, 4, alpha, B, F, e):>17.3g} "
            f"{parallel.cp_crossover_tokens(h, alpha, B, F, e, causal=True):>13,.0f}")
    out("  (DDP/FSDP: tokens per GPU, 64 ranks; TP: the width below which 8-way TP of 4096 tokens waits on "
        "its all-reduces; PP: micro-batch tokens; CP: tokens per chunk)")

    out("")
    out("measured on 2 gloo ranks (trends, not speeds): DP, one Linear(256, 1024) -> GELU -> Linear(1024, 256)")
    tokens = (4, 8, 16, 32, 64, 128, 256, 512)
    dp = measure_dp_sweep(tokens, 256, 7)
    for T, c, m in zip(dp["tokens"], dp["compute_s"], dp["comm_s"]):
        out(f"  T = {T:4d} tokens per rank: compute {c * 1e3:7.2f} ms, all-reduce {m * 1e3:6.2f} ms, "
            f"comm/compute {m / c:5.2f}")
    fit = dp_crossover_from(**dp)
    sizes = [2 ** k for k in range(12, 24, 2)]
    alpha, bw = upstream.fit_alpha_beta(sizes, comms.measure_allreduce(sizes, 2, 7, 1))
    n_params = sum(p.numel() for p in dp_layer(256).parameters())
    pred = predicted_dp_crossover(n_params, 2, alpha, bw, 6 * n_params / fit["per_token_s"], 4)
    out(f"  fit: overhead {fit['overhead_s'] * 1e3:.2f} ms + {fit['per_token_s'] * 1e6:.1f} us/token; "
        f"T* = {fit['crossover_tokens']:.1f} (with the overhead), comm/c1 = {fit['comm_s'] / fit['per_token_s']:.1f}; "
        f"predicted from alpha-beta ({alpha * 1e6:.0f} us, {bw / 1e9:.2f} GB/s) and 6P FLOPs: {pred:.1f}")
    grow_c = dp["compute_s"][-1] / dp["compute_s"][1]
    grow_m = dp["comm_s"][-1] / dp["comm_s"][1]
    dp_ok = grow_c >= 3 and grow_c / grow_m >= 2
    out(f"  8 -> 512 tokens: compute x{grow_c:.1f}, all-reduce x{grow_m:.2f} -> "
        f"{'compute grows, comm does not' if dp_ok else 'NOT the expected shape'}")

    out("measured on 2 gloo ranks: TP, column-then-row MLP, 128 tokens")
    widths = (64, 96, 128, 192, 256, 384, 512)
    tp = measure_tp_sweep(widths, 128, 7)
    ratios = [m / c for c, m in zip(tp["compute_s"], tp["comm_s"])]
    for w, c, m, r in zip(widths, tp["compute_s"], tp["comm_s"], ratios):
        out(f"  h = {w:4d}: compute {c * 1e3:7.2f} ms, all-reduces {m * 1e3:6.2f} ms, comm/compute {r:5.2f}")
    tfit = tp_crossover_from(**tp)
    tp_ok = ratios[0] / ratios[-1] >= 2
    out(f"  fit: h* = {tfit['crossover_width']:.0f}; comm/compute falls x{ratios[0] / ratios[-1]:.1f} from h = 64 to 512 "
        f"(bytes x8, FLOPs x64) -> {'falls like 1/h' if tp_ok else 'NOT the expected shape'}")
    return dp_ok and tp_ok
