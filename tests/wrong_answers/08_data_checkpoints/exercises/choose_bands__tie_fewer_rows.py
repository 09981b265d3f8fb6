# loses: choose_bands_tests
# why: on a tie keeps the option with fewer rows
def choose_bands(num_perm, threshold):
    options = [(b, num_perm // b) for b in range(1, num_perm + 1) if num_perm % b == 0]
    return min(options, key=lambda br: (abs((1 / br[0]) ** (1 / br[1]) - threshold), br[1]))
