# loses: trust_ratio_tests
# why: no r = 1 rule: ||w|| = 0 gives r = 0 (a zero-initialised layer never moves)
def trust_ratio(w, u):
    """LAMB's trust ratio ||w|| / ||u|| for one tensor; 1.0 when either norm is zero."""
    wn = float(np.sqrt(np.sum(np.asarray(w, dtype=float) ** 2)))
    un = float(np.sqrt(np.sum(np.asarray(u, dtype=float) ** 2)))
    return wn / un if un > 0 else 0.0
