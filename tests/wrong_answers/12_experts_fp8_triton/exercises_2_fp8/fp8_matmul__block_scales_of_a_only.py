# loses: fp8_matmul_tests
# why: applies A's block scales and forgets B's
def fp8_matmul(qa, sa, qb, sb, block=None):
    """Emulated FP8 GEMM: fp8 operands, per-tensor or MX block scales, fp32 accumulation."""
    a, b = qa.float(), qb.float()
    if block is None:
        return (a @ b) * (float(sa) * float(sb))
    a = a * torch.as_tensor(sa).float().repeat_interleave(block, dim=1)     # exact: powers of two
    return a @ b
