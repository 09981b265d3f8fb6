# loses: trust_ratio_tests
# why: np.linalg.norm(w, 2): the spectral norm of a matrix, not the Frobenius norm over all entries
def trust_ratio(w, u):
    """LAMB's trust ratio ||w|| / ||u|| for one tensor; 1.0 when either norm is zero."""
    wn = float(np.linalg.norm(np.asarray(w, dtype=float), 2))
    un = float(np.linalg.norm(np.asarray(u, dtype=float), 2))
    return wn / un if wn > 0 and un > 0 else 1.0
