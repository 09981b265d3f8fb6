# loses: lsh_scaling_tests
# why: compares every pair of signatures band by band: quadratic, the idea of LSH skipped
def lsh_candidate_pairs(signatures, bands, rows):
    for name, v in (("bands", bands), ("rows", rows)):
        if isinstance(v, bool) or not float(v).is_integer() or v < 1:
            raise ValueError(f"{name} must be a positive whole number, got {v!r}")
    bands, rows = int(bands), int(rows)
    buckets = {}
    for i, sig in enumerate(signatures):
        sig = np.asarray(sig)
        if sig.ndim != 1 or sig.size != bands * rows:
            raise ValueError(f"signature {i} must be 1-D of length {bands * rows}, got shape {sig.shape}")
    sigs = [np.asarray(s) for s in signatures]
    pairs = set()
    for i in range(len(sigs)):
        for j in range(i + 1, len(sigs)):
            if any(np.array_equal(sigs[i][k * rows:(k + 1) * rows], sigs[j][k * rows:(k + 1) * rows]) for k in range(bands)):
                pairs.add((i, j))
    return sorted(pairs)
