# loses: smoke_test_tests
# why: compares the two runs with a tolerance: a run that is not bit-reproducible passes
def smoke_test(losses_a, losses_b):
    a, b = list(losses_a), list(losses_b)
    if len(a) < 2:
        raise ValueError("need at least two losses")
    return a[-1] < a[0] and len(a) == len(b) and all(abs(p - q) < 1e-5 for p, q in zip(a, b))
