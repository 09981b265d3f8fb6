# loses: training_flops_tests
# why: counts only the forward pass: 2ND instead of 6ND
def training_flops(n_params, n_tokens):
    '''FLOPs to train n_params parameters on n_tokens tokens: 6 N D.'''
    if not n_params > 0:
        raise ValueError(f"n_params must be > 0, got {n_params}")
    if not n_tokens >= 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    return 2.0 * n_params * n_tokens


C_7b = training_flops(7e9, 300e9)
print(f"7B parameters, 300B tokens: C = {C_7b:.3e} FLOPs")
