# loses: drop_spans_tests
# why: leaves out documents that became empty: no longer one list per document
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
        stream.append(-1 - d)            # a separator of this document's own: no prefix crosses it
        owner.append((d, len(doc)))
        lengths.append(len(doc))
    # the suffix array, cut at k tokens: the window starts sorted by their first k tokens
    starts = [i for i in range(len(stream)) if owner[i][1] + k <= lengths[owner[i][0]]]
    starts.sort(key=lambda i: stream[i:i + k])
    repeated = set()
    for a, b in zip(starts, starts[1:]):
        if stream[a:a + k] == stream[b:b + k]:      # neighbours with LCP >= k
            repeated.update((a, b))
    runs = []
    for i in sorted(repeated):
        d, s = owner[i]
        if runs and runs[-1][0] == d and s <= runs[-1][2]:
            runs[-1][2] = s + k
        else:
            runs.append([d, s, s + k])
    return [tuple(r) for r in runs]


def drop_spans(docs, spans):
    keep = [[True] * len(doc) for doc in docs]
    for d, s, e in spans:
        for p in range(s, e):
            keep[d][p] = False
    out = [[int(t) for t, k in zip(doc, row) if k] for doc, row in zip(docs, keep)]
    return [doc for doc in out if doc]

