# loses: two_fits_tests
# why: N / D instead of D / N
from solutions_lib import upstream

n_h, d_h = upstream.chinchilla_optimal(5.76e23, "hoffmann")
n_e, d_e = upstream.chinchilla_optimal(5.76e23, "epoch")
tpp_hoffmann = n_h / d_h
tpp_epoch = n_e / d_e
print(f"tokens per parameter at 5.76e23 FLOPs: Hoffmann fit {tpp_hoffmann:.1f}, Epoch refit {tpp_epoch:.1f}")
