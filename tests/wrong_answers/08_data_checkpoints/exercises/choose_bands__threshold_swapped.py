# loses: choose_bands_tests
# why: threshold computed as (1/r)^(1/b)
def choose_bands(num_perm, threshold):
    options = [(b, num_perm // b) for b in range(1, num_perm + 1) if num_perm % b == 0]
    return min(options, key=lambda br: (abs((1 / br[1]) ** (1 / br[0]) - threshold), -br[1]))
