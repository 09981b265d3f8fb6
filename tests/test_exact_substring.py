"""08 Part B4: exact-substring deduplication (Lee et al. 2022) against a brute-force oracle, and the
step-count probe that grades 'not quadratic in all pairs of positions'."""
import itertools
import random

import numpy as np
import pytest

from solutions_lib import data, probes_dedup


def brute_force(docs, k):
    """Every pair of k-token windows compared: a position is covered iff a window holding it equals
    another window (any document, overlapping allowed); covered positions as maximal runs."""
    docs = [list(map(int, d)) for d in docs]
    windows = [(d, s) for d, doc in enumerate(docs) for s in range(len(doc) - k + 1)]
    covered = [[False] * len(doc) for doc in docs]
    for (d, s), (e, t) in itertools.combinations(windows, 2):
        if docs[d][s:s + k] == docs[e][t:t + k]:
            for p in range(s, s + k):
                covered[d][p] = True
            for p in range(t, t + k):
                covered[e][p] = True
    spans = []
    for d, row in enumerate(covered):
        p = 0
        while p < len(row):
            if row[p]:
                q = p
                while q < len(row) and row[q]:
                    q += 1
                spans.append((d, p, q))
                p = q
            else:
                p += 1
    return spans


def test_hand_cases():
    assert data.repeated_spans([[1, 2, 3, 4, 9, 9], [7, 1, 2, 3, 4, 8], [5, 6, 7, 8]], 4) == [(0, 0, 4), (1, 1, 5)]
    assert data.repeated_spans([[1, 2, 3, 9], [1, 2, 3, 8]], 4) == []          # k - 1 tokens: not found
    assert data.repeated_spans([[1, 2, 3, 9], [1, 2, 3, 8]], 3) == [(0, 0, 3), (1, 0, 3)]
    assert data.repeated_spans([[5, 1, 2, 1, 2, 1, 2, 6]], 4) == [(0, 1, 7)]   # self-overlapping
    assert data.repeated_spans([[1, 2], [3, 4], [1, 2, 3, 4]], 4) == []        # no match across a boundary
    assert data.repeated_spans([[1, 2, 3, 4], [1, 2, 9], [8, 3, 4]], 2) == [(0, 0, 4), (1, 0, 2), (2, 1, 3)]
    assert data.repeated_spans([[], [1]], 1) == []


@pytest.mark.parametrize("seed", range(40))
def test_against_brute_force(seed):
    rng = random.Random(seed)
    k = rng.choice([1, 2, 3, 4, 6])
    vocab = rng.choice([2, 3, 5, 20])
    docs = [[rng.randrange(vocab) for _ in range(rng.randrange(0, 25))] for _ in range(rng.randrange(1, 6))]
    for _ in range(rng.randrange(0, 4)):                     # planted copies, some overlapping
        if docs and any(len(d) > k for d in docs):
            src = rng.choice([d for d in docs if len(d) > k])
            a = rng.randrange(len(src) - k)
            seg = src[a:a + rng.randrange(k - 1, k + 3)]
            dst = rng.choice(docs)
            p = rng.randrange(len(dst) + 1)
            dst[p:p] = seg
    assert data.repeated_spans(docs, k) == brute_force(docs, k)
    assert probes_dedup.brute_force_spans(docs, k) == brute_force(docs, k)


def test_planted_corpus_and_numpy_inputs():
    rng = np.random.default_rng(8801)
    docs, planted = probes_dedup.planted_corpus(rng, n_docs=12, k=5, vocab=6)
    got = data.repeated_spans([np.asarray(d) for d in docs], 5)
    assert got == brute_force(docs, 5)
    for d, s, e in planted:
        assert any(gd == d and gs <= s and e <= ge for gd, gs, ge in got)


def test_validation():
    for bad_k in (0, -1, 2.5, 3.0, True):
        with pytest.raises(ValueError):
            data.repeated_spans([[1, 2]], bad_k)
    for bad in ([[1, 2.5]], [[1, -1]], [["a"]], ["abc"]):
        with pytest.raises(ValueError):
            data.repeated_spans(bad, 1)
    assert data.repeated_spans([np.array([1, 2, 1, 2])], np.int64(2)) == [(0, 0, 4)]


def test_drop_spans():
    docs = [[1, 2, 3, 4, 5], [6, 7], [8]]
    assert data.drop_spans(docs, [(0, 3, 5), (0, 0, 2), (0, 1, 3), (1, 0, 2)]) == [[], [], [8]]
    assert data.drop_spans(docs, [(0, 1, 2), (0, 3, 4)]) == [[1, 3, 5], [6, 7], [8]]
    assert data.drop_spans(docs, []) == docs
    with pytest.raises(ValueError):
        data.drop_spans(docs, [(1, 0, 3)])


def test_deterministic_under_salted_hash():
    rng = np.random.default_rng(8802)
    docs, _ = probes_dedup.planted_corpus(rng, n_docs=10, k=4, vocab=5)
    want = data.repeated_spans(docs, 4)
    from solutions_lib.probes_data import other_process_hash
    with other_process_hash():
        assert data.repeated_spans(docs, 4) == want


def test_step_budget_separates_linear_from_all_pairs():
    rng = np.random.default_rng(8803)
    docs, _ = probes_dedup.planted_corpus(rng, **probes_dedup.SCALING_CORPUS)
    n = sum(len(d) for d in docs)
    assert n * (n - 1) // 2 > 2 * probes_dedup.STEP_BUDGET
    steps, got = probes_dedup.count_steps(data.repeated_spans, docs, probes_dedup.SCALING_CORPUS["k"])
    assert got == data.repeated_spans(docs, probes_dedup.SCALING_CORPUS["k"])
    assert steps < probes_dedup.STEP_BUDGET / 10, steps

    def all_pairs(docs, k):
        return brute_force(docs, k)
    steps, got = probes_dedup.count_steps(all_pairs, docs, probes_dedup.SCALING_CORPUS["k"])
    assert got is None and steps == probes_dedup.STEP_BUDGET + 1


def test_count_steps_restores_tracing():
    import sys
    steps, got = probes_dedup.count_steps(lambda: [1, 2], budget=100)
    assert got == [1, 2] and 0 < steps < 100 and sys.gettrace() is None


def test_bench_exact_substring():
    lines = []
    assert probes_dedup.bench_exact_substring(out=lines.append)
    assert "stopped at the budget" in lines[-1]
