# loses: smoke_test_tests
# why: zip() comparison: runs of different length count as identical
def smoke_test(losses_a, losses_b):
    a, b = list(losses_a), list(losses_b)
    if len(a) < 2:
        raise ValueError("need at least two losses")
    return a[-1] < a[0] and all(p == q for p, q in zip(a, b))
