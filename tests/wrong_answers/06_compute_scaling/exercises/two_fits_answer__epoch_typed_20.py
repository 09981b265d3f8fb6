# loses: two_fits_tests
# why: skips the Epoch computation and types in Chinchilla's 20
from solutions_lib import upstream

n_h, d_h = upstream.chinchilla_optimal(5.76e23, "hoffmann")
n_e, d_e = upstream.chinchilla_optimal(5.76e23, "epoch")
tpp_hoffmann = d_h / n_h
tpp_epoch = 20.0
print(f"tokens per parameter at 5.76e23 FLOPs: Hoffmann fit {tpp_hoffmann:.1f}, Epoch refit {tpp_epoch:.1f}")
