# loses: lsh_probability_tests
# why: uses math on a float: an array of similarities fails
def lsh_candidate_probability(s, bands, rows):
    return 1.0 - (1.0 - math.pow(float(s), rows)) ** bands
