# loses: filter_corpus_tests
# why: returns the indices of the texts to remove
def filter_corpus(texts):
    return [i for i, t in enumerate(texts) if any(quality_flags(t).values())]
