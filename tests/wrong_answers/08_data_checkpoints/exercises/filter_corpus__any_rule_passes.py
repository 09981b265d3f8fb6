# loses: filter_corpus_tests
# why: keeps a text when any rule passes instead of when every rule passes
def filter_corpus(texts):
    return [i for i, t in enumerate(texts) if not all(quality_flags(t).values())]
