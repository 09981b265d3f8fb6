# loses: smoke_test_tests
# why: checks only that the loss fell, not that the run reproduces
def smoke_test(losses_a, losses_b):
    a, b = list(losses_a), list(losses_b)
    if len(a) < 2:
        raise ValueError("need at least two losses")
    return a[-1] < a[0]
