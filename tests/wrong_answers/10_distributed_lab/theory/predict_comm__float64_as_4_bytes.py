# loses: predict_comm_tests
# why: the float64 broadcast counted at 4 bytes per entry
def predict_comm(n, m, k, world_size):
    return {"all_reduce": (2, 2 * 4 * n),
            "all_gather_single": (1, 4 * world_size * m),
            "broadcast": (3, 3 * 4 * k),
            "reduce_scatter_single": (1, 4 * world_size * m)}
