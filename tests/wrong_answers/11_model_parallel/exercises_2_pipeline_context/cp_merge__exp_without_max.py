# loses: cp_merge_tests
# why: merges with exp(lse) directly (no running maximum): overflows for large scores, 0/0 for very negative ones
def merge_partials(o_a, lse_a, o_b, lse_b):
    ea, eb = torch.exp(lse_a), torch.exp(lse_b)
    lse = torch.log(ea + eb)
    w_a = (ea / (ea + eb)).unsqueeze(-1)
    w_b = (eb / (ea + eb)).unsqueeze(-1)
    return w_a * o_a + w_b * o_b, lse
