# loses: noise_scale_tests
# why: B_simple = |G|^2 / tr(Sigma), upside down
def two_batch_noise_scale(sq_norms_small, sq_norms_big, b_small, b_big):
    """(|G|^2, tr Sigma, B_simple) from mean |G_B|^2 measured at two batch sizes."""
    if not b_big > b_small > 0:
        raise ValueError(f"need 0 < b_small < b_big, got {b_small}, {b_big}")
    small = float(np.mean(sq_norms_small))
    big = float(np.mean(sq_norms_big))
    g2 = (b_big * big - b_small * small) / (b_big - b_small)
    trace = (small - big) / (1 / b_small - 1 / b_big)
    return g2, trace, g2 / trace


def exact_b_simple(w, w_star, noise_std):
    """tr(Sigma) / |G|^2 for Gaussian-input linear regression at w."""
    delta = np.asarray(w, dtype=float) - np.asarray(w_star, dtype=float)
    d2 = float(delta @ delta)
    return (delta.size * (d2 + noise_std ** 2) + d2) / d2
