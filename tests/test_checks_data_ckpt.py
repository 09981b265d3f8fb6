"""The test machinery of 08 exercises in solutions_lib/checks_data_ckpt.py: each check accepts a correct
answer (the course's reference) and rejects a classic wrong one with a message that names what was
checked; the case generators draw what their docstrings say, from their seed alone."""
from __future__ import annotations

import contextlib
import hashlib
import math

import numpy as np
import pytest

from solutions_lib import checkpointing as ckpt
from solutions_lib import checks_data_ckpt as kit
from solutions_lib import data as ref
from solutions_lib import probes_data, probes_dedup, upstream
from solutions_lib.grading import GradingError

GUARD = contextlib.nullcontext


def _fails(fn, *args, match: str, **kw):
    with pytest.raises(GradingError, match=match):
        fn(*args, **kw)


def test_check_cases_and_check_each():
    cases = kit.io_cases(8208, 5)
    assert len(cases) == 5 and all(1 <= w < 64 for _, _, w in cases)
    kit.check_cases(ckpt.io_seconds, ckpt.io_seconds, cases, GUARD, "io_seconds", rtol=1e-9, unit="s")
    _fails(kit.check_cases, lambda b, bw, w=1: b / bw * w, ckpt.io_seconds, cases, GUARD, "io_seconds",
           rtol=1e-9, match=r"io_seconds\(")
    calls = []
    kit.check_cases(lambda x: (x, 1), lambda x: (x, 1), [(3,), (4,)], GUARD, compare=kit.expect_equal,
                    describe=lambda k, c: calls.append(k) or f"case {k}", convert=kit.as_int_tuple)
    assert calls == [0, 1]
    _fails(kit.check_each, [1.0, 2.5], [1.0, 2.0], ["a", "the second"], rtol=1e-9, match="the second")


def _hashlib_minhash(shingles, num_perm, seed=0):
    p = (1 << 61) - 1
    rng = np.random.default_rng(seed)
    a, b = rng.integers(1, p, num_perm, dtype=np.int64), rng.integers(0, p, num_perm, dtype=np.int64)
    xs = [int(hashlib.md5(" ".join(s).encode()).hexdigest(), 16) % p for s in shingles]
    return np.array([min((int(ai) * x + int(bi)) % p for x in xs) for ai, bi in zip(a, b)])


def test_minhash_checks():
    kit.check_minhash_signature(_hashlib_minhash, probes_data.other_process_hash)

    def on_hash(shingles, num_perm, seed=0):            # the classic slip: Python's salted hash()
        return np.array([min(hash((seed, i, s)) for s in shingles) for i in range(num_perm)])
    _fails(kit.check_minhash_signature, on_hash, probes_data.other_process_hash, match="another Python process")

    cases = probes_dedup.jaccard_cases(8204, 6)
    kit.check_minhash_estimates(upstream.minhash_signature, cases, GUARD, num_perm=256, seed=5)

    def one_hash(shingles, num_perm, seed=0):           # every position the same hash function
        return np.repeat(_hashlib_minhash(shingles, 1, seed), num_perm)
    _fails(kit.check_minhash_estimates, one_hash, cases, GUARD, match="MinHash estimate")


def test_exact_and_near_duplicate_inputs():
    corpora = kit.planted_copy_corpora(8203, 2)
    assert [len(t) for t in corpora] == [36, 36]
    assert all(len(ref.exact_duplicates(t)) >= 6 for t in corpora)
    assert kit.planted_copy_corpora(8203, 2) == corpora
    texts, planted = probes_dedup.planted_near_duplicates(8205, 25, 5)
    kit.check_planted_pairs(set(planted), texts, planted)
    _fails(kit.check_planted_pairs, set(planted[1:]), texts, planted, match="planted near-duplicate pair")
    _fails(kit.check_planted_pairs, set(planted) | {(0, 1)}, texts, planted, match="below 0.25")


def test_lsh_checks():
    cases = kit.lsh_cases(8311)
    for b, r, S in cases:
        assert kit.lsh_pairs_oracle(S, b, r) == kit.pairs_of(ref.lsh_candidate_pairs(list(S), b, r))
    kit.check_lsh_pairs(ref.lsh_candidate_pairs, cases, GUARD)

    def without_band(signatures, b, r):                 # the bucket key forgets the band index
        groups = {}
        for i, s in enumerate(signatures):
            for k in range(b):
                groups.setdefault(tuple(int(v) for v in s[k * r:(k + 1) * r]), set()).add(i)
        return sorted({(x, y) for g in groups.values() for x in g for y in g if x < y})
    _fails(kit.check_lsh_pairs, without_band, cases, GUARD, match="random signatures")

    big = np.random.default_rng(1).integers(0, 1000, size=(3000, 8))
    kit.check_lsh_steps(ref.lsh_candidate_pairs, big, 4, 2, probes_dedup.count_steps, "steps", "pairs")

    def all_pairs(signatures, b, r):
        n = len(signatures)
        return [(i, j) for i in range(n) for j in range(i + 1, n)
                if any(np.array_equal(signatures[i][k * r:(k + 1) * r], signatures[j][k * r:(k + 1) * r]) for k in range(b))]
    _fails(kit.check_lsh_steps, all_pairs, big, 4, 2, probes_dedup.count_steps, "Python steps taken", "pairs",
           match="Python steps taken")


def test_lsh_probability_and_bands_inputs():
    cases, s = kit.lsh_probability_cases(8315)
    assert len(cases) == 30 and s.shape == (17,) and all(0 <= c[0] < 1 and 1 <= c[1] < 40 and 1 <= c[2] < 12 for c in cases)
    bands = kit.choose_bands_cases(8316, 25)
    assert len(bands) == 25 and all(n in (60, 64, 96, 100, 120, 128, 200, 256, 7, 1) and 0.05 <= t <= 0.95 for n, t in bands)
    kit.check_cases(ref.choose_bands, ref.choose_bands, bands, GUARD, "choose_bands", compare=kit.expect_equal,
                    convert=kit.as_int_tuple)
    _fails(kit.check_cases, lambda n, t: ref.choose_bands(n, t)[::-1], ref.choose_bands, bands[:5], GUARD,
           "choose_bands", compare=kit.expect_equal, convert=kit.as_int_tuple, match=r"choose_bands\(")


def test_repeated_and_drop_spans_checks():
    kit.check_repeated_spans_examples(ref.repeated_spans)
    _fails(kit.check_repeated_spans_examples, lambda docs, k: ref.repeated_spans(docs, k + 1), match="repeated_spans")
    cases = kit.repeated_spans_cases(8802, 10)
    assert len(cases) == 10 and all(isinstance(d, np.ndarray) for d in cases[-1][0])
    assert all(1 <= k < 8 and 2 <= len(docs) for docs, k in cases)

    kit.check_drop_spans_examples(ref.drop_spans)
    _fails(kit.check_drop_spans_examples, lambda docs, spans: docs, match="drop_spans on three documents")
    dcases = kit.drop_spans_cases(8803, 6)
    assert len(dcases) == 6 and all(0 <= s <= e <= len(docs[d]) for docs, spans in dcases for d, s, e in spans)
    kit.check_drop_spans_cases(ref.drop_spans, ref.drop_spans, dcases, GUARD)
    shifting = lambda docs, spans: [[t for i, t in enumerate(doc) if not any(d == j and s <= i < e for d, s, e in spans[:1])]
                                    for j, doc in enumerate(docs)]   # drops only the first span
    _fails(kit.check_drop_spans_cases, shifting, ref.drop_spans, dcases, GUARD, match="drop_spans on hidden case")


def test_interval_checks():
    cases = kit.interval_cases(8206, 10)
    assert all(1 <= c < 1000 and 10 <= m < 1e6 for c, m in cases)
    kit.check_intervals(ckpt.young_interval, ckpt.daly_interval, ckpt.young_interval, ckpt.daly_interval, cases, GUARD)
    _fails(kit.check_intervals, lambda c, m: math.sqrt(c * m), ckpt.daly_interval, ckpt.young_interval, ckpt.daly_interval,
           cases, GUARD, match=r"young_interval\(")
    _fails(kit.check_intervals, ckpt.young_interval, lambda c, m: ckpt.daly_interval(c, m) + c, ckpt.young_interval,
           ckpt.daly_interval, cases, GUARD, match=r"daly_interval\(")
    assert all(5 <= c < 600 and 0.001 <= p < 0.9 and w in (600.0, 3600.0, 86400.0) for c, p, w in kit.adaptive_cases(8207, 10))


def test_first_step_checks():
    cases = kit.first_step_cases(8210, ref.first_step_detected, 12)
    assert len(cases) == 12 and all(len(c[0]) == 301 for c in cases)
    kit.check_first_steps([ref.first_step_detected(list(c), k, tol) for c, k, tol, _, _ in cases], cases)
    late = [ref.first_step_detected(list(c), k, tol) for c, k, tol, _, _ in cases]
    k = next(i for i, g in enumerate(late) if g is not None)
    late[k] += 1
    _fails(kit.check_first_steps, late, cases, match="first_step_detected on a run with")
