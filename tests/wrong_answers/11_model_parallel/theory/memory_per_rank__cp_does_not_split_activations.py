# loses: memory_per_rank_tests
# why: context parallelism left out of the activations (s tokens per rank instead of s/c)
def memory_per_rank(layout, model):
    """{"states", "activations", "total"}: bytes per GPU of `layout` for `model`."""
    d, t, p, c, z, sp = (layout[k] for k in ("dp", "tp", "pp", "cp", "zero", "sp"))
    L, h, a, s, B, b = (model[k] for k in ("layers", "hidden", "heads", "seq_len", "global_batch", "micro_batch"))
    if z not in (0, 1, 2, 3):
        raise ValueError(f"zero must be 0, 1, 2 or 3, got {z!r}")
    if L % p or a % t or s % c or B % (d * b):
        raise ValueError(f"pp={p} must divide layers={L}, tp={t} heads={a}, cp={c} seq_len={s}, "
                         f"and dp x micro_batch = {d * b} must divide global_batch={B}")
    P = 12 * h * h * (L // p) / t
    k = {0: 0, 1: 12, 2: 14, 3: 16}[z]
    states = P * (16 - k) + P * k / (d * c)
    per_layer = s * b * h * (34 / t if sp else 10 + 24 / t)
    activations = (L // p) * min(p, B // (d * b)) * per_layer
    return {"states": states, "activations": activations, "total": states + activations}
