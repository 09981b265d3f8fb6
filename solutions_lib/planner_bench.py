"""`python -m solutions_lib bench planner`: how the layout planner's pick for the course's
examples moves with each of its options (planner_terms.py, parallel.py)."""
from __future__ import annotations

from . import parallel as P


def bench_planner_extras(out=print) -> bool:
    """How the planner's pick for the course's examples (GPT-3 175B on Selene-like A100 nodes,
    13B on PCIe + Ethernet) moves with each option. True when every call gives a layout."""
    gpt3 = dict(layers=96, hidden=12288, heads=96, seq_len=2048, global_batch=1536, micro_batch=1)
    selene = dict(n_gpus=1024, gpus_per_node=8, flops=150e12, memory=80e9, intra=(5e-6, 300e9), inter=(10e-6, 25e9))
    m13 = dict(layers=40, hidden=5120, heads=40, seq_len=2048, global_batch=512, micro_batch=1)
    pcie = dict(n_gpus=32, gpus_per_node=8, flops=400e12, memory=80e9, intra=(10e-6, 16e9), inter=(30e-6, 12.5e9 / 8))
    long = dict(m13, seq_len=32768, global_batch=64)
    options = [("defaults", {}), ("chunks=2", dict(chunks=2)), ("chunks=4", dict(chunks=4)),
               ("recompute=none", dict(recompute="none")), ("recompute=full", dict(recompute="full")),
               ("grad_bytes=4", dict(grad_bytes=4)), ("vocab=50257", dict(vocab=50257)),
               ("order=dp,tp,cp,pp", dict(order=("dp", "tp", "cp", "pp"))), ("cp in (1,2,4,8)", dict(cp=(1, 2, 4, 8)))]
    ok = True
    for name, model, cluster, z in (("GPT-3 175B / Selene, ZeRO-0", gpt3, selene, 0), ("13B / PCIE_ETH, ZeRO-1", m13, pcie, 1),
                                    ("13B at s = 32k / 80 GB x 32, ZeRO-1", long, dict(pcie, intra=(5e-6, 300e9),
                                                                                    inter=(10e-6, 25e9)), 1)):
        out(f"{name}:")
        for label, kw in options:
            lay = P.best_layout(model, cluster, zero=z, **kw)
            if lay is None:
                out(f"  {label:<20} nothing fits")
                ok = ok and label not in ("defaults",)
                continue
            kt = {k: v for k, v in kw.items() if k != "cp"}
            tt = P.layout_step_time(lay, model, cluster, **kt)
            mem = P.layout_memory_per_rank(lay, model, **{k: v for k, v in kt.items() if k != "order"})
            out(f"  {label:<20} (dp, tp, pp, cp) = ({lay['dp']}, {lay['tp']}, {lay['pp']}, {lay['cp']})  "
                f"step {tt['total']:7.2f} s (bubble {tt['bubble']:5.2f}, tp {tt['tp']:5.2f}, pp {tt['pp']:5.2f}, "
                f"dp {tt['dp']:5.2f}, cp {tt.get('cp', 0.0):5.2f})  {mem['total'] / 1e9:5.1f} GB")
    return ok
