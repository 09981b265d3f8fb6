# loses: mesh_groups_tests
# why: the shortcut: uses the whole world as the TP group instead of creating the row groups
def build_mesh(dp, tp):
    world, rank = dist.get_world_size(), dist.get_rank()
    if isinstance(dp, bool) or isinstance(tp, bool) or not isinstance(dp, int) or not isinstance(tp, int) \
            or dp * tp != world:
        raise ValueError(f"dp x tp = {dp} x {tp} must equal the world size {world}")
    layout = mesh_layout(dp, tp)
    d, t = layout["coords"][rank]
    tp_group = dp_group = None
    tp_group = dist.group.WORLD
    for j, ranks in enumerate(layout["dp_groups"]):
        g = dist.new_group(list(ranks))
        if j == t:
            dp_group = g
    return {"dp_rank": d, "tp_rank": t, "tp_group": tp_group, "dp_group": dp_group}
