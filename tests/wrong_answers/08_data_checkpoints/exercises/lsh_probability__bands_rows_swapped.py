# loses: lsh_probability_tests
# why: 1 - (1 - s^b)^r: bands and rows swapped
def lsh_candidate_probability(s, bands, rows):
    p = 1.0 - (1.0 - np.asarray(s, dtype=float) ** bands) ** rows
    return float(p) if p.ndim == 0 else p
