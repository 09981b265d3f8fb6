# loses: slots_tests
# why: count_slots counts None cells as idle; the grid marks idle slots with ""
def count_slots(grid):
    """(total slots, idle slots, idle fraction) of a pipeline grid; idle slots hold ""."""
    g = np.asarray(grid, dtype=object)
    total = int(g.size)
    idle = int(sum(1 for c in g.flat if c is None))
    return total, idle, idle / total


def gpipe_slots(N, M, t_fwd=1, t_bwd=2):
    """(total, idle) device-time of one GPipe step, in time units summed over the N devices."""
    if N < 1 or M < 1:
        raise ValueError(f"need N >= 1 stages and M >= 1 micro-batches, got N={N}, M={M}")
    per_device = (M + N - 1) * (t_fwd + t_bwd)
    return N * per_device, N * (N - 1) * (t_fwd + t_bwd)


a1_total, a1_idle, a1_fraction = count_slots(grid)
print(f"{a1_total} slots, {a1_idle} idle, fraction {a1_fraction:.4f}; formula: {gpipe_slots(4, 8)}")
