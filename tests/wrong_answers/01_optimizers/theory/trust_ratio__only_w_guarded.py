# loses: trust_ratio_tests
# why: guards ||w|| = 0 only: ||u|| = 0 divides by zero
def trust_ratio(w, u):
    """LAMB's trust ratio ||w|| / ||u|| for one tensor; 1.0 when either norm is zero."""
    wn = float(np.sqrt(np.sum(np.asarray(w, dtype=float) ** 2)))
    un = float(np.sqrt(np.sum(np.asarray(u, dtype=float) ** 2)))
    return wn / un if wn > 0 else 1.0
