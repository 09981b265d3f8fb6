# loses: shift_for_lm_tests
# why: targets are the inputs themselves: the model learns to copy, not to predict the next token
def shift_for_lm(rows):
    rows = torch.as_tensor(rows)
    if rows.dim() != 2 or rows.shape[1] < 2:
        raise ValueError(f"rows must be (batch, T+1) with T+1 >= 2, got shape {tuple(rows.shape)}")
    return rows[:, :-1], rows[:, :-1]
