# loses: filter_corpus_tests
# why: ignores the curly-brace rule
def filter_corpus(texts):
    return [i for i, t in enumerate(texts) if not any(v for k, v in quality_flags(t).items() if k != "curly_brace")]
