# loses: cost_tests
# why: D = P / r instead of r P
def compute_optimal_cost(n_params, tokens_per_param=20):
    '''Training FLOPs of a model trained on tokens_per_param tokens per parameter: 6 P (r P).'''
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    if not tokens_per_param > 0:
        raise ValueError(f"tokens_per_param must be > 0, got {tokens_per_param}")
    return 6.0 * n_params * (n_params / tokens_per_param)


cost_exponent = 2
print(f"70B at 20 tokens/parameter: {compute_optimal_cost(70e9):.3e} FLOPs; cost grows as P^{cost_exponent}")
