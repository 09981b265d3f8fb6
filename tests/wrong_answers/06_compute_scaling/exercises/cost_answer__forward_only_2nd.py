# loses: cost_tests
# why: 6ND with 2ND: forward FLOPs only
def compute_optimal_cost(n_params, tokens_per_param=20):
    '''Training FLOPs of a model trained on tokens_per_param tokens per parameter: 6 P (r P).'''
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    if not tokens_per_param > 0:
        raise ValueError(f"tokens_per_param must be > 0, got {tokens_per_param}")
    return 2.0 * n_params * (tokens_per_param * n_params)


cost_exponent = 2
print(f"70B at 20 tokens/parameter: {compute_optimal_cost(70e9):.3e} FLOPs; cost grows as P^{cost_exponent}")
