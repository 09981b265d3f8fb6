# loses: fp8_matmul_tests
# why: multiplies and accumulates in bf16
def fp8_matmul(qa, sa, qb, sb, block=None):
    """Emulated FP8 GEMM: fp8 operands, per-tensor or MX block scales, fp32 accumulation."""
    a, b = qa.to(torch.bfloat16), qb.to(torch.bfloat16)
    if block is None:
        return ((a @ b) * (float(sa) * float(sb))).float()
    a = a * torch.as_tensor(sa).float().repeat_interleave(block, dim=1)     # exact: powers of two
    b = b * torch.as_tensor(sb).float().repeat_interleave(block, dim=0)
    return (a @ b).float()
