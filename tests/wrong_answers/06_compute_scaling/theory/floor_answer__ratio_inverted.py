# loses: floor_tests
# why: the reducible losses in the wrong order: (now - L_inf) / (target - L_inf)
def compute_multiplier_with_floor(loss_now, loss_target, l_inf, alpha):
    """Compute factor C'/C from loss_now to loss_target when L(C) = l_inf + a C^-alpha."""
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if loss_now <= l_inf or loss_target <= l_inf:
        raise ValueError(f"both losses must lie above the irreducible loss {l_inf}: got {loss_now} and {loss_target}")
    return ((loss_now - l_inf) / (loss_target - l_inf)) ** (-1.0 / alpha)


mult_no_floor = compute_multiplier_with_floor(2.5, 2.25, 0.0, 0.15)
mult_with_floor = compute_multiplier_with_floor(2.5, 2.25, 1.69, 0.15)
print(f"10% lower loss: {mult_no_floor:.2f}x the compute without a floor, {mult_with_floor:.1f}x with L_inf = 1.69")
