# loses: predict_comm_tests
# why: all_gather counted by its input (m entries), not its output of N m
def predict_comm(n, m, k, world_size):
    return {"all_reduce": (2, 2 * 4 * n),
            "all_gather_single": (1, 4 * m),
            "broadcast": (3, 3 * 8 * k),
            "reduce_scatter_single": (1, 4 * world_size * m)}
