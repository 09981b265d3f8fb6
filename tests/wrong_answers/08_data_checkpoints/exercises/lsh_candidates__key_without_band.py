# loses: lsh_candidates_tests
# why: the bucket key is the band's values only: equal values in different bands collide
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
        for k in range(bands):
            key = tuple(sig[k * rows:(k + 1) * rows].tolist())
            buckets.setdefault(key, []).append(i)
    pairs = set()
    for members in buckets.values():
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                pairs.add((members[a], members[b]))
    return sorted(pairs)
