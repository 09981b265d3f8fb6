# loses: best_on_budget_tests
# why: spends the budget as C = 2ND (forward only): D three times too large
def best_on_budget(compute, n_grid):
    '''(N, D) on the grid of model sizes that minimises hoffmann_loss subject to 6 N D = compute.'''
    n_grid = np.asarray(n_grid, dtype=float)
    if not compute > 0:
        raise ValueError(f"compute must be > 0, got {compute}")
    if n_grid.size == 0:
        raise ValueError("n_grid is empty")
    d_grid = compute / (2.0 * n_grid)
    i = int(np.argmin(hoffmann_loss(n_grid, d_grid)))
    return float(n_grid[i]), float(d_grid[i])
