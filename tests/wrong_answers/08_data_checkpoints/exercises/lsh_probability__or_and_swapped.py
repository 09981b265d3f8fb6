# loses: lsh_probability_tests
# why: (1 - (1 - s)^r)^b: a band agrees when ANY row agrees, and all bands must
def lsh_candidate_probability(s, bands, rows):
    p = (1.0 - (1.0 - np.asarray(s, dtype=float)) ** rows) ** bands
    return float(p) if p.ndim == 0 else p
