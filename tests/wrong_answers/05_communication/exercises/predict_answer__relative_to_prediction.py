# loses: predict_tests
# why: relative error (measured - predicted) / predicted: sign and denominator swapped
from solutions_lib import upstream

fit_mask = S <= FIT_MAX
alpha_fit, bw_fit = upstream.fit_alpha_beta(S[fit_mask], measured[fit_mask])
predicted = alpha_fit + S / bw_fit
rel_error = (measured - predicted) / predicted
max_abs_error_large = float(np.max(np.abs(rel_error[~fit_mask])))
print(f"alpha = {alpha_fit * 1e6:.1f} us, B = {bw_fit / 1e9:.3f} GB/s")
for size, e in zip(S[~fit_mask], rel_error[~fit_mask]):
    print(f"predicted vs measured at {size / 2 ** 20:.0f} MiB: {e:+.1%}")
print(f"largest held-out error: {max_abs_error_large:.1%}")
