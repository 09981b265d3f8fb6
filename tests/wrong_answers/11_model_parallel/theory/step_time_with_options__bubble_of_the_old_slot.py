# loses: step_time_with_options_tests
# why: divides part 3's slot (with one t_pp) by v: the bubble's slots also carry v sends
def step_time_with_options(layout, model, cluster, reshard_after_forward=True, chunks=1, recompute="selective"):
    """step_time's {"compute", "tp", "pp", "bubble", "dp", "total"} with v = `chunks` model chunks per device
    (interleaved 1F1B) and the `recompute` choice ("none", "selective", "full")."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunks must be an int >= 1, got {chunks!r}")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute must be 'none', 'selective' or 'full', got {recompute!r}")
    base = step_time(layout, model, cluster, reshard_after_forward)     # checks the layout and the cluster
    p, l = layout["pp"], model["layers"] // layout["pp"]
    m = model["global_batch"] // (layout["dp"] * model["micro_batch"])
    v = chunks if p > 1 else 1
    if v > 1 and (l % v or m % p):
        raise ValueError(f"interleaving needs chunks={v} to divide the {l} layers of a stage "
                         f"and pp={p} to divide the {m} micro-batches")
    full = recompute == "full"
    t_c = base["compute"] / m * (4 / 3 if full else 1)
    t_tp = base["tp"] / m * (3 / 2 if full else 1)
    t_pp = base["pp"] / m
    slot = t_c + t_tp + v * t_pp
    out = {"compute": m * t_c, "tp": m * t_tp, "pp": m * v * t_pp, "bubble": (p - 1) / v * (t_c + t_tp + t_pp), "dp": base["dp"]}
    out["total"] = sum(out.values())
    return out


for kw in ({}, {"chunks": 2}, {"recompute": "full"}):
    print(kw, {k: f"{v:.2f} s" for k, v in step_time_with_options(make_layout(16, 8, 8, zero=0), GPT3_175B, SELENE, **kw).items()})

