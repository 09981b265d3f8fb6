# loses: noise_experiment_tests
# why: |G_B| instead of |G_B|^2 fed to the estimator
def estimate_noise_scale(batch_grad, b_small, b_big, n_batches):
    """B_simple measured with the two-batch estimator from n_batches gradients of each size."""
    small = [float((batch_grad(b_small) ** 2).sum()) ** 0.5 for _ in range(n_batches)]
    big = [float((batch_grad(b_big) ** 2).sum()) ** 0.5 for _ in range(n_batches)]
    return two_batch_noise_scale(small, big, b_small, b_big)[2]


b_simple_measured = estimate_noise_scale(batch_grad, 8, 512, 400)
b_simple_true = exact_b_simple(w, w_star, 1.0)
print(f"B_simple measured {b_simple_measured:.1f}, exact {b_simple_true:.1f}")
