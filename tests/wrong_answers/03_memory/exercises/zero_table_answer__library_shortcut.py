# loses: zero_table_tests
# why: the shortcut: calls the course library's zero_table
def zero_table(n_params, world_size, weight_bytes, grad_bytes, optimizer_bytes):
    """{stage: model-state bytes per GPU} for ZeRO stages 0-3."""
    if not world_size >= 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    from solutions_lib.memory import zero_table as course_zero_table
    return course_zero_table(n_params, world_size, weight_bytes, grad_bytes, optimizer_bytes)


def min_stage(n_params, world_size, capacity_bytes, activation_bytes, weight_bytes, grad_bytes, optimizer_bytes):
    """The lowest ZeRO stage whose state + activations fits in capacity_bytes, or None."""
    for stage, b in zero_table(n_params, world_size, weight_bytes, grad_bytes, optimizer_bytes).items():
        if b + activation_bytes <= capacity_bytes:
            return stage
    return None


t = zero_table(7e9, 8, 4, 4, 8)
ch26_18_gb = {"DDP": t[0] / GB, "ZeRO-1": t[1] / GB, "ZeRO-2": t[2] / GB, "ZeRO-3": t[3] / GB}
ch26_18_stage = min_stage(7e9, 8, 40e9, 15e9, 4, 4, 8)
print(f"{'':<8} {'state GB':>9} {'+ 15 GB act.':>13}  fits 40 GB?")
for name, gb in ch26_18_gb.items():
    print(f"{name:<8} {gb:9.2f} {gb + 15:13.2f}  {'yes' if gb + 15 <= 40 else 'no'}")
print("lowest stage that fits:", ch26_18_stage)
