# loses: noise_experiment_tests
# why: one gradient per batch size: n_batches ignored
def estimate_noise_scale(batch_grad, b_small, b_big, n_batches):
    """B_simple measured with the two-batch estimator from n_batches gradients of each size."""
    small = [float((batch_grad(b_small) ** 2).sum()) for _ in range(1)]
    big = [float((batch_grad(b_big) ** 2).sum()) for _ in range(1)]
    return two_batch_noise_scale(small, big, b_small, b_big)[2]


b_simple_measured = estimate_noise_scale(batch_grad, 8, 512, 400)
b_simple_true = exact_b_simple(w, w_star, 1.0)
print(f"B_simple measured {b_simple_measured:.1f}, exact {b_simple_true:.1f}")
