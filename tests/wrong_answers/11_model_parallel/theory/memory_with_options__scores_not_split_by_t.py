# loses: memory_with_options_tests
# why: adds the 5 a s^2 b bytes of scores on every TP rank, though each rank holds a/t heads
def memory_with_options(layout, model, chunks=1, recompute="selective"):
    """memory_per_rank's {"states", "activations", "total"} with v = `chunks` model chunks per device
    (interleaved 1F1B) and the `recompute` choice ("none", "selective", "full")."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunks must be an int >= 1, got {chunks!r}")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute must be 'none', 'selective' or 'full', got {recompute!r}")
    base = memory_per_rank(layout, model)          # checks the layout; its states do not change
    d, t, p, c, sp = (layout[k] for k in ("dp", "tp", "pp", "cp", "sp"))
    L, h, a, s, B, b = (model[k] for k in ("layers", "hidden", "heads", "seq_len", "global_batch", "micro_batch"))
    l, m, s1 = L // p, B // (d * b), s / c
    if p > 1 and chunks > 1 and (l % chunks or m % p):
        raise ValueError(f"interleaving needs chunks={chunks} to divide the {l} layers of a stage "
                         f"and pp={p} to divide the {m} micro-batches")
    selective = 34 / t if sp else 10 + 24 / t
    factor = {"selective": selective, "none": selective + 5 * a * s1 / h, "full": 2 / t if sp else 2}[recompute]
    held = min(p + (p - 1) / chunks, m) if (p > 1 and chunks > 1) else min(p, m)
    activations = l * held * factor * s1 * b * h
    return {"states": base["states"], "activations": activations, "total": base["states"] + activations}


lay = make_layout(8, 1, 4, 1, 1, True)
for kw in ({}, {"chunks": 2}, {"recompute": "full"}, {"recompute": "none"}):
    print(kw, {k: f"{v / GB:.1f} GB" for k, v in memory_with_options(lay, MODEL_13B, **kw).items()})

