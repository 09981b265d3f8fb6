# loses: fa2_tile_budget_tests
# why: one K/V buffer whatever num_stages: the pipelined copies are not counted
def fa2_tile_budget(block_m, block_n, head_dim, stages=2, num_warps=4, in_bytes=2, smem=227 * 1024,
                    regs_per_thread=255):
    """Shared memory and registers of one FlashAttention-2 forward program, and whether they fit."""
    for name, v in (("block_m", block_m), ("block_n", block_n), ("head_dim", head_dim), ("stages", stages),
                    ("num_warps", num_warps)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v in (("in_bytes", in_bytes), ("smem", smem), ("regs_per_thread", regs_per_thread)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{name} must be a number > 0, got {v!r}")
    shared = (block_m * head_dim + 2 * block_n * head_dim) * in_bytes
    register_bytes = 4 * (block_m * head_dim + block_m * block_n + 2 * block_m)
    per_thread = register_bytes / 4 / (32 * num_warps)
    return {"shared_bytes": float(shared), "register_bytes": float(register_bytes), "registers_per_thread": per_thread,
            "fits": shared <= smem and per_thread <= regs_per_thread}
    ### END SOLUTION
