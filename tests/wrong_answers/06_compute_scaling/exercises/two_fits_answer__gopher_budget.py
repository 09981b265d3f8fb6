# loses: two_fits_tests
# why: the wrong budget: 5.76e22 FLOPs
from solutions_lib import upstream

n_h, d_h = upstream.chinchilla_optimal(5.76e22, "hoffmann")
n_e, d_e = upstream.chinchilla_optimal(5.76e22, "epoch")
tpp_hoffmann = d_h / n_h
tpp_epoch = d_e / n_e
print(f"tokens per parameter at 5.76e23 FLOPs: Hoffmann fit {tpp_hoffmann:.1f}, Epoch refit {tpp_epoch:.1f}")
