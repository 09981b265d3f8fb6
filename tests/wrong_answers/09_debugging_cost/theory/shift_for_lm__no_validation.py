# loses: shift_for_lm_tests_validation
# why: no shape check: rows of length 1 give empty inputs instead of a ValueError
def shift_for_lm(rows):
    rows = torch.as_tensor(rows)
    return rows[:, :-1], rows[:, 1:]
