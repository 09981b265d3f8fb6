# loses: token_budget_tests
# why: tokens_trained reported as the budget, not total_steps * tokens_per_step
def fit_schedule_to_budget(token_budget, tokens_per_step, warmup_ratio=0.01, decay_fraction=0.2):
    """Step counts of a warmup-stable-decay run that trains on token_budget tokens."""
    if token_budget < 1 or tokens_per_step < 1:
        raise ValueError(f"token_budget and tokens_per_step must be >= 1, got {token_budget}, {tokens_per_step}")
    total = -(-int(token_budget) // int(tokens_per_step))
    warmup = steps_from_fraction(total, warmup_ratio)
    decay = steps_from_fraction(total, decay_fraction)
    if warmup + decay > total:
        raise ValueError(f"warmup ({warmup}) and cooldown ({decay}) do not fit in {total} steps")
    return {"total_steps": total, "warmup_steps": warmup, "decay_steps": decay,
            "cooldown_start": total - decay, "tokens_trained": int(token_budget)}


budget_plan = fit_schedule_to_budget(20 * 10 ** 9, 1024 * 2048)
print(budget_plan)
