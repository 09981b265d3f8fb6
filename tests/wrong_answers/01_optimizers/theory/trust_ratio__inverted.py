# loses: trust_ratio_tests
# why: ||u||/||w|| instead of ||w||/||u||
def trust_ratio(w, u):
    """LAMB's trust ratio ||w|| / ||u|| for one tensor; 1.0 when either norm is zero."""
    wn = float(np.sqrt(np.sum(np.asarray(w, dtype=float) ** 2)))
    un = float(np.sqrt(np.sum(np.asarray(u, dtype=float) ** 2)))
    return un / wn if wn > 0 and un > 0 else 1.0
