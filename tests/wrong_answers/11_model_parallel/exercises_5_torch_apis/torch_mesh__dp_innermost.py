# loses: torch_mesh_tests
# why: DP innermost (rank = t * dp + d): the TP groups are strided, not consecutive ranks
def torch_mesh(dp, tp):
    from torch.distributed.device_mesh import DeviceMesh

    grid = torch.arange(dp * tp).reshape(tp, dp).T
    return DeviceMesh("cpu", grid, mesh_dim_names=("dp", "tp"))
