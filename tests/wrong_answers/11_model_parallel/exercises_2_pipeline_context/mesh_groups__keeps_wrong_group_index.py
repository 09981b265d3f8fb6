# loses: mesh_groups_tests
# why: keeps the TP group of index t and the DP group of index d (the coordinates swapped when picking its groups)
def build_mesh(dp, tp):
    world, rank = dist.get_world_size(), dist.get_rank()
    if isinstance(dp, bool) or isinstance(tp, bool) or not isinstance(dp, int) or not isinstance(tp, int) \
            or dp * tp != world:
        raise ValueError(f"dp x tp = {dp} x {tp} must equal the world size {world}")
    layout = mesh_layout(dp, tp)
    d, t = layout["coords"][rank]
    tp_group = dp_group = None
    for i, ranks in enumerate(layout["tp_groups"]):
        g = dist.new_group(list(ranks))
        if i == t:
            tp_group = g
    for j, ranks in enumerate(layout["dp_groups"]):
        g = dist.new_group(list(ranks))
        if j == d:
            dp_group = g
    return {"dp_rank": d, "tp_rank": t, "tp_group": tp_group, "dp_group": dp_group}
