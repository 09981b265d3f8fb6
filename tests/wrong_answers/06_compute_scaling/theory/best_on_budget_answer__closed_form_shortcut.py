# loses: best_on_budget_tests
# why: skips the search: the closed-form optimum, which is not a point of the grid it was given
def best_on_budget(compute, n_grid):
    '''(N, D) on the grid of model sizes that minimises hoffmann_loss subject to 6 N D = compute.'''
    n_grid = np.asarray(n_grid, dtype=float)
    if not compute > 0:
        raise ValueError(f"compute must be > 0, got {compute}")
    if n_grid.size == 0:
        raise ValueError("n_grid is empty")
    g = (0.34 * 406.4 / (0.28 * 410.7)) ** (1 / 0.62)
    n = g * (compute / 6.0) ** (0.28 / 0.62)
    return float(n), float(compute / (6.0 * n))
