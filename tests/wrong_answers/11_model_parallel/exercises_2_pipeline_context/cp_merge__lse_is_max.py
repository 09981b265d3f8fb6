# loses: cp_merge_tests
# why: takes the larger log-sum-exp as the union's (max instead of logaddexp): weights do not sum to 1
def merge_partials(o_a, lse_a, o_b, lse_b):
    lse = torch.maximum(lse_a, lse_b)
    w_a = torch.exp(lse_a - lse).unsqueeze(-1)
    w_b = torch.exp(lse_b - lse).unsqueeze(-1)
    return w_a * o_a + w_b * o_b, lse
