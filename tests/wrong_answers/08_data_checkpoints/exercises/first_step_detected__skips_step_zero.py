# loses: first_step_detected_tests
# why: evaluates at k, 2k, ... instead of 0, k, 2k
def first_step_detected(val_losses, eval_every, tolerance=0.25):
    if eval_every < 1 or len(val_losses) == 0:
        raise ValueError("eval_every must be >= 1 and val_losses non-empty")
    best = float("inf")
    for s in range(eval_every, len(val_losses), eval_every):
        if val_losses[s] > best * (1 + tolerance):
            return s
        best = min(best, val_losses[s])
    return None
