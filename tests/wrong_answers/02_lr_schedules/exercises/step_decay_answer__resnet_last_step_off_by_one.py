# loses: step_decay_tests
# why: the last step of 90 epochs taken as 90 * steps_per_epoch (one past the run): 3 decays
def step_decay(step, base_lr, step_size, gamma):
    """base_lr * gamma ** (step // step_size) at the 0-based optimizer step `step`."""
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if step_size < 1:
        raise ValueError(f"step_size must be at least 1 step, got {step_size}")
    if gamma <= 0:
        raise ValueError(f"gamma must be > 0, got {gamma}")
    return base_lr * gamma ** (step // step_size)


steps_per_epoch = 5005
last_step = 90 * steps_per_epoch
resnet_last_lr = step_decay(last_step, 0.1, 30 * steps_per_epoch, 0.1)
resnet_decays = last_step // (30 * steps_per_epoch)
print(f"last step uses lr = {resnet_last_lr:.3g} after {resnet_decays} decays")
