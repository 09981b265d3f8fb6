# loses: fp8_matmul_tests
# why: torch's float8 @ float8, whose output is rounded to float8
def fp8_matmul(qa, sa, qb, sb, block=None):
    """Emulated FP8 GEMM: fp8 operands, per-tensor or MX block scales, fp32 accumulation."""
    a, b = qa.float(), qb.float()
    if block is None:
        return (qa @ qb).float() * (float(sa) * float(sb))
    a = a * torch.as_tensor(sa).float().repeat_interleave(block, dim=1)     # exact: powers of two
    b = b * torch.as_tensor(sb).float().repeat_interleave(block, dim=0)
    return a @ b
