# loses: moe_param_counts_tests
# why: leaves out the router's d x E weights
def moe_param_counts(d_model, d_ff, n_layers, n_experts, top_k, vocab_size, n_heads, n_kv_heads, head_dim,
                     n_shared=0):
    """Total and active parameters and training FLOPs per token of a top-k MoE decoder."""
    args = dict(d_model=d_model, d_ff=d_ff, n_layers=n_layers, n_experts=n_experts, top_k=top_k,
                vocab_size=vocab_size, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim)
    for name, v in list(args.items()) + [("n_shared", n_shared)]:
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "n_shared" else 1):
            raise ValueError(f"{name} must be an int >= {0 if name == 'n_shared' else 1}, got {v!r}")
    if top_k > n_experts:
        raise ValueError(f"top_k = {top_k} > n_experts = {n_experts}")
    if n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads = {n_kv_heads} must divide n_heads = {n_heads}")
    d, L, V = d_model, n_layers, vocab_size
    attention = 2 * d * n_heads * head_dim + 2 * d * n_kv_heads * head_dim
    shared_per_layer = attention + 2 * d
    expert = 3 * d * d_ff
    outside = d + 2 * V * d
    total = L * (shared_per_layer + (n_experts + n_shared) * expert) + outside
    active = L * (shared_per_layer + (top_k + n_shared) * expert) + outside
    flops = 6 * (active - V * d - (2 * L + 1) * d)
    return {"total": total, "active": active, "train_flops_per_token": flops}
    ### END SOLUTION
