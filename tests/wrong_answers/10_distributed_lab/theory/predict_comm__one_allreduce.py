# loses: predict_comm_tests
# why: the two all_reduce calls counted once
def predict_comm(n, m, k, world_size):
    return {"all_reduce": (1, 4 * n),
            "all_gather_single": (1, 4 * world_size * m),
            "broadcast": (3, 3 * 8 * k),
            "reduce_scatter_single": (1, 4 * world_size * m)}
