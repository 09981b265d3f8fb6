# loses: step_time_tests
# why: 4 all-reduces per stage instead of per layer (the l layers of a stage forgotten in the TP term)
def step_time(layout, model, cluster, reshard_after_forward=True):
    """{"compute", "tp", "pp", "bubble", "dp", "total"}: seconds of one optimizer step."""
    d, t, p = layout["dp"], layout["tp"], layout["pp"]
    L, h, s, B, b = (model[k] for k in ("layers", "hidden", "seq_len", "global_batch", "micro_batch"))
    N, G, F = cluster["n_gpus"], cluster["gpus_per_node"], cluster["flops"]
    if layout["cp"] != 1:
        raise ValueError("this step-time model covers cp = 1 only")
    if d * t * p != N:
        raise ValueError(f"dp x tp x pp = {d * t * p} must equal n_gpus = {N}")
    if G % t:
        raise ValueError(f"tp = {t} must divide gpus_per_node = {G}")

    def allreduce(n, nbytes, link):
        alpha, bw = link
        return 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes / bw

    l, m, T, e = L // p, B // (d * b), b * s, 2
    t_c = 72 * h * h * l * T / (t * F)
    t_tp = 4 * allreduce(t, T * h * e, cluster["intra"]) if t > 1 else 0.0
    alpha, bw = cluster["intra"] if N <= G else cluster["inter"]
    t_pp = 2 * (alpha + T * h * e / bw) if p > 1 else 0.0
    link = cluster["intra"] if G % (t * d) == 0 else cluster["inter"]
    half = allreduce(d, 12 * h * h * l * e / t, link) / 2       # one reduce-scatter or all-gather
    z = layout["zero"]
    if d == 1:
        t_dp = 0.0
    elif z <= 1:
        t_dp = 2 * half                                          # one all-reduce after the flush
    elif z == 2:
        t_dp = (m + 1) * half                                    # reduce-scatter per micro-batch, one all-gather
    else:
        t_dp = m * (3 if reshard_after_forward else 2) * half    # gather (twice) + reduce-scatter per micro-batch
    slot = t_c + t_tp + t_pp
    return {"compute": m * t_c, "tp": m * t_tp, "pp": m * t_pp, "bubble": (p - 1) * slot, "dp": t_dp,
            "total": (m + p - 1) * slot + t_dp}
