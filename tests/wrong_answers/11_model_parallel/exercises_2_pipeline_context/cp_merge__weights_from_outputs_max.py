# loses: cp_merge_tests
# why: softmax of the two log-sum-exps with the max taken over the whole tensor, not per row: underflows to 0/0 when rows differ by ~1000
def merge_partials(o_a, lse_a, o_b, lse_b):
    mu = torch.maximum(lse_a.max(), lse_b.max())
    ea, eb = torch.exp(lse_a - mu), torch.exp(lse_b - mu)
    lse = mu + torch.log(ea + eb)
    w_a = (ea / (ea + eb)).unsqueeze(-1)
    w_b = (eb / (ea + eb)).unsqueeze(-1)
    return w_a * o_a + w_b * o_b, lse
