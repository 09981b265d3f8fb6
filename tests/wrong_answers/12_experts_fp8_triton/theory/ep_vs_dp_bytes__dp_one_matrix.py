# loses: ep_vs_dp_bytes_tests
# why: the expert gradients of one matrix per expert, not SwiGLU's three
def ep_vs_dp_bytes(tokens, hidden, d_ff, n_experts, top_k, ranks, act_bytes=2, grad_bytes=2):
    """Bytes one rank sends per MoE layer and step: EP's all-to-alls vs DP's all-reduce of expert gradients."""
    for name, v in (("tokens", tokens), ("hidden", hidden), ("d_ff", d_ff), ("n_experts", n_experts),
                    ("top_k", top_k), ("ranks", ranks)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    for name, v in (("act_bytes", act_bytes), ("grad_bytes", grad_bytes)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"{name} must be a number > 0, got {v!r}")
    if top_k > n_experts:
        raise ValueError(f"top_k = {top_k} > n_experts = {n_experts}")
    if n_experts % ranks:
        raise ValueError(f"ranks = {ranks} must divide n_experts = {n_experts}")
    leaving = (ranks - 1) / ranks
    ep = 4 * leaving * tokens * top_k * hidden * act_bytes
    dp = 2 * leaving * n_experts * hidden * d_ff * grad_bytes
    return {"ep": float(ep), "dp": float(dp), "crossover_tokens": 3 * n_experts * d_ff * grad_bytes / (2 * top_k * act_bytes)}
    ### END SOLUTION
