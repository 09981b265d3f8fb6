# loses: first_step_detected_tests
# why: compares with the previous evaluation instead of the best earlier one
def first_step_detected(val_losses, eval_every, tolerance=0.25):
    if eval_every < 1 or len(val_losses) == 0:
        raise ValueError("eval_every must be >= 1 and val_losses non-empty")
    best = float("inf")
    for s in range(0, len(val_losses), eval_every):
        if val_losses[s] > best * (1 + tolerance):
            return s
        best = val_losses[s]
    return None
