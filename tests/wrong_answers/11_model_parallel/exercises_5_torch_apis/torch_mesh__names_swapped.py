# loses: torch_mesh_tests
# why: the dimension names are swapped, so mesh["tp"] is the strided (DP) group
def torch_mesh(dp, tp):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (dp, tp), mesh_dim_names=("tp", "dp"))
