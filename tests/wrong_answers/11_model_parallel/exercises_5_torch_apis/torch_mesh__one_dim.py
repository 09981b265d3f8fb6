# loses: torch_mesh_tests
# why: a 1-D mesh over all ranks named "tp": no DP dimension at all
def torch_mesh(dp, tp):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (dp * tp,), mesh_dim_names=("tp",))
