# loses: exact_substring_tests, exact_substring_scaling_tests
# why: concatenates the documents without separators: a repeat may run across a document boundary
def repeated_spans(docs, k=50):
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    k = int(k)
    stream, owner, lengths = [], [], []
    for d, doc in enumerate(docs):
        for p, t in enumerate(doc):
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)) or t < 0:
                raise ValueError(f"token {p} of document {d} must be an integer >= 0, got {t!r}")
            stream.append(int(t))
            owner.append((d, p))
        lengths.append(len(doc))
    # the suffix array, cut at k tokens: the window starts sorted by their first k tokens
    starts = list(range(len(stream) - k + 1))    # windows of the concatenated stream
    starts.sort(key=lambda i: stream[i:i + k])
    repeated = set()
    for a, b in zip(starts, starts[1:]):
        if stream[a:a + k] == stream[b:b + k]:      # neighbours with LCP >= k
            repeated.update((a, b))
    runs = []
    for i in sorted(repeated):
        d, s = owner[i]
        if runs and runs[-1][0] == d and s <= runs[-1][2]:
            runs[-1][2] = min(s + k, lengths[d])
        else:
            runs.append([d, s, min(s + k, lengths[d])])
    return [tuple(r) for r in runs]


def drop_spans(docs, spans):
    keep = [[True] * len(doc) for doc in docs]
    for d, s, e in spans:
        for p in range(s, e):
            keep[d][p] = False
    return [[int(t) for t, k in zip(doc, row) if k] for doc, row in zip(docs, keep)]

