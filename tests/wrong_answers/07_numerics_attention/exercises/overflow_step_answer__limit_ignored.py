# loses: overflow_step_tests
# why: the limit argument is ignored (65504 hard-coded)
def first_overflow_step(losses, max_abs_out, limit=65504.0):
    """First step with a non-finite loss or a non-finite / above-limit max |output|; None if none."""
    losses = np.asarray(losses, dtype=float)
    max_abs_out = np.asarray(max_abs_out, dtype=float)
    for t, (l, o) in enumerate(zip(losses, max_abs_out)):
        if not math.isfinite(l) or not math.isfinite(o) or o > 65504.0:
            return t
    return None


break_steps = {name: first_overflow_step(run["loss"], run["max_abs_out"]) for name, run in runs.items()}
for name, step in break_steps.items():
    run = runs[name]
    first_nan = next((t for t, l in enumerate(run["loss"]) if not math.isfinite(l)), None)
    print(f"{name:>13}: beyond the fp16 range at step {step}, first non-finite loss at step {first_nan}")
