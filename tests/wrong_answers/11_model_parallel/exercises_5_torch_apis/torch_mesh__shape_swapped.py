# loses: torch_mesh_tests
# why: the shape is (tp, dp) under the names ("dp", "tp"): right on 2 x 2 only
def torch_mesh(dp, tp):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (tp, dp), mesh_dim_names=("dp", "tp"))
