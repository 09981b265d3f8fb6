# loses: cp_merge_tests
# why: the shortcut: averages the two outputs instead of weighting them by exp(lse - lse_union)
def merge_partials(o_a, lse_a, o_b, lse_b):
    lse = torch.logaddexp(lse_a, lse_b)
    w_a = torch.exp(lse_a - lse).unsqueeze(-1)
    w_b = torch.exp(lse_b - lse).unsqueeze(-1)
    return (o_a + o_b) / 2, lse
