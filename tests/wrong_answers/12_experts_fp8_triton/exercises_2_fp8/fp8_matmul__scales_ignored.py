# loses: fp8_matmul_tests
# why: multiplies the fp8 codes' values without their scales
def fp8_matmul(qa, sa, qb, sb, block=None):
    """Emulated FP8 GEMM: fp8 operands, per-tensor or MX block scales, fp32 accumulation."""
    a, b = qa.float(), qb.float()
    if block is None:
        return a @ b
    return a @ b
