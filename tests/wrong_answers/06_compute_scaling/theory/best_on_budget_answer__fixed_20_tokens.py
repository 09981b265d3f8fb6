# loses: best_on_budget_tests
# why: the 20 tokens-per-parameter rule of thumb instead of the loss: N = sqrt(C / 120)
def best_on_budget(compute, n_grid):
    '''(N, D) on the grid of model sizes that minimises hoffmann_loss subject to 6 N D = compute.'''
    n_grid = np.asarray(n_grid, dtype=float)
    if not compute > 0:
        raise ValueError(f"compute must be > 0, got {compute}")
    if n_grid.size == 0:
        raise ValueError("n_grid is empty")
    d_grid = compute / (6.0 * n_grid)
    i = int(np.argmin(np.abs(np.log(d_grid / n_grid / 20.0))))
    return float(n_grid[i]), float(d_grid[i])
