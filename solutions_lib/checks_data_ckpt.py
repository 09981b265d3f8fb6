"""Checks of 08 exercises (deduplication, LSH, filtering, checkpoint intervals, regression detection),
kept here so that each test cell reads as a few lines of intent (issue 28).

The test cells keep their hidden inputs (`term_seed(...)` literals), their `expect_own` calls and their
`no_delegation` blocks: a check that calls the student's function takes the cell's block as `guard`
(a zero-argument callable returning the context manager), because in a grader-side cell
`no_delegation` is the grader's version that watches the kernel (solutions_lib/course/grader_side.py).
Expected values come from the reference function the cell passes in (`ref_fn`) or from an oracle
computed here from the inputs; nothing expected is hard-coded in this module. The checks make the
same calls to `solutions_lib.grading` (same descriptions, same order) as the cells they came from.

Whatever must happen inside the student's kernel (counting Python steps with `sys.settrace`, salting
`hash()` as another process would) is passed in by the cell (`probes_dedup.count_steps`,
`probes_data.other_process_hash`), so that the cell's own source says it runs beside the kernel.
"""
from __future__ import annotations

import numpy as np

from .grading import expect_between, expect_close, expect_equal, expect_true


# ------------------------------------------------------------------------ generic case runner

def check_cases(fn, ref_fn, cases, guard, name: str = "", describe=None, compare=expect_close,
                convert=None, **kw) -> None:
    """Compute `ref_fn(*case)` for every case first, then call `fn(*case)` for every case inside
    `guard()` (the cell's no_delegation), then compare each answer with `compare(got, want, what, **kw)`
    (expect_close or expect_equal), in case order. `what` is `describe(k, case)` (k: the case's index)
    when given, else f"{name}{case}"; `convert(got)` (e.g. to a tuple of ints) is applied to each answer first."""
    want = [ref_fn(*c) for c in cases]
    with guard():
        got = [fn(*c) for c in cases]
    for k, (c, g, w) in enumerate(zip(cases, got, want)):
        compare(convert(g) if convert else g, w, describe(k, c) if describe else f"{name}{c}", **kw)


def check_each(got, want, whats, compare=expect_close, **kw) -> None:
    """`compare(g, w, what, **kw)` for the answers `got` (already computed by the cell) against `want`."""
    for g, w, what in zip(got, want, whats):
        compare(g, w, what, **kw)


# -------------------------------------------------------------------- Part B1: exact duplicates

def planted_copy_corpora(seed: int, n: int = 3) -> list[list[str]]:
    """`n` corpora: 30 stdlib docstrings (json, textwrap, functools, collections; 20 words or more) in a
    random order, with 6 copies inserted at random places, each upper-cased, re-spaced, re-punctuated
    or lower-cased (a normalised text equals its source)."""
    import collections
    import functools
    import inspect
    import json
    import textwrap

    rng = np.random.default_rng(seed)
    base = []
    for mod in (json, textwrap, functools, collections):
        for _, obj in sorted(vars(mod).items()):
            doc = inspect.getdoc(obj) if (inspect.isfunction(obj) or inspect.isclass(obj)) else None
            if doc and len(doc.split()) >= 20 and doc not in base:
                base.append(doc)
    corpora = []
    for _ in range(n):
        texts = [base[i] for i in rng.permutation(len(base))[:30]]
        for _ in range(6):
            src = texts[int(rng.integers(0, len(texts)))]
            variant = [src.upper(), "  " + src.replace(" ", "   ") + " ", src.replace(".", " . ") + "!",
                       src.lower()][int(rng.integers(0, 4))]
            texts.insert(int(rng.integers(0, len(texts) + 1)), variant)
        corpora.append(texts)
    return corpora


# ------------------------------------------------------------------------ Part B1: MinHash

def check_minhash_signature(minhash_signature, other_process_hash) -> None:
    """A MinHash of four shingles with 64 hash functions: 64 entries, the same twice for one seed, and the
    same inside `other_process_hash()` (probes_data: `hash()` of a str salted as in another Python
    process, which a MinHash built on hash() notices and a hashlib one does not)."""
    s1 = {("a", "b", "c"), ("b", "c", "d"), ("c", "d", "e"), ("d", "e", "f")}
    sig = minhash_signature(s1, 64, seed=1)
    expect_true(np.asarray(sig).shape == (64,),
                f"minhash_signature(..., num_perm=64) must have 64 entries, got shape {np.asarray(sig).shape}")
    expect_true(np.array_equal(np.asarray(sig), np.asarray(minhash_signature(s1, 64, seed=1))),
                "minhash_signature must be deterministic for a given seed (use hashlib, not hash()).")
    with other_process_hash():
        sig_elsewhere = np.asarray(minhash_signature(s1, 64, seed=1))
    expect_equal(int(np.sum(sig_elsewhere != np.asarray(sig))), 0,
                 "entries of minhash_signature(s1, 64, seed=1) that change in another Python process",
                 hint="Python's hash() of a str is salted per process (PYTHONHASHSEED). Hash each shingle with "
                      "hashlib (e.g. int(hashlib.md5(' '.join(s).encode()).hexdigest(), 16) % p).")


def check_minhash_estimates(minhash_signature, cases, guard, num_perm: int = 256, seed: int = 5) -> None:
    """For each (A, B, J) of `cases` (probes_dedup.jaccard_cases), the share of equal entries of the two
    signatures (`num_perm` hash functions, inside `guard()`) must be within 5 standard errors of the exact
    Jaccard J; then the mean error over all pairs within 0.03 (no bias)."""
    errs = []
    with guard():
        for n, (A, B, J) in enumerate(cases):
            est = float(np.mean(np.asarray(minhash_signature(A, num_perm, seed=seed))
                                == np.asarray(minhash_signature(B, num_perm, seed=seed))))
            errs.append(est - J)
            expect_close(est, J, f"MinHash estimate of the Jaccard similarity of pair {n} with {num_perm} hash functions",
                         atol=5 * np.sqrt(max(J * (1 - J), 0.01) / num_perm),
                         hint="Too far from the exact Jaccard. Each position must be the minimum of one random hash "
                              "function over the whole set.")
    expect_close(np.mean(errs), 0.0, f"mean error of the MinHash estimates over {len(cases)} pairs", atol=0.03,
                 hint="A biased estimate: are the hash functions independent of each other?")


def check_planted_pairs(got, texts, planted, low: float = 0.25) -> None:
    """Near-duplicate pairs `got` (a set of (i, j)) against the `planted` pairs of `texts`: every planted
    pair reported, and no reported pair whose exact Jaccard of 3-word shingles is below `low`."""
    from .data import shingles

    def jaccard(i, j):
        a, b = shingles(texts[i], 3), shingles(texts[j], 3)
        return len(a & b) / len(a | b) if a | b else 1.0

    for i, j in planted:
        expect_equal((i, j) in got, True, f"planted near-duplicate pair ({i}, {j}) with Jaccard {jaccard(i, j):.2f} reported")
    expect_equal(sorted((i, j, round(jaccard(i, j), 2)) for i, j in got if jaccard(i, j) < low), [],
                 f"pairs reported as near-duplicates (i, j, exact Jaccard) whose exact Jaccard is below {low}")


# ---------------------------------------------------------------------- Part B2: LSH candidates

def lsh_pairs_oracle(signatures, b: int, r: int) -> list[tuple[int, int]]:
    """Every pair (i, j), i < j, whose signatures agree on all `r` rows of some band (of `b`), sorted:
    signatures grouped by (band index, band values), pairs inside each group."""
    groups: dict = {}
    for i, s in enumerate(signatures):
        for k in range(b):
            groups.setdefault((k, tuple(int(v) for v in s[k * r:(k + 1) * r])), []).append(i)
    return sorted({(g[x], g[y]) for g in groups.values() for x in range(len(g)) for y in range(x + 1, len(g))})


def pairs_of(got) -> list[tuple[int, ...]]:
    """An answer's pairs as a sorted list of tuples of ints."""
    return sorted(tuple(int(x) for x in p) for p in got)


def lsh_cases(seed: int) -> list[tuple]:
    """Five (bands, rows, signatures): 30 to 80 random signatures over 2 to 20 values, so that bands collide."""
    rng = np.random.default_rng(seed)
    return [(b, r, rng.integers(0, vals, size=(n, b * r)))
            for b, r, n, vals in [(4, 2, 60, 3), (3, 3, 50, 2), (1, 6, 40, 2), (8, 1, 30, 20), (5, 4, 80, 2)]]


def check_lsh_pairs(lsh_candidate_pairs, cases, guard) -> None:
    """Inside `guard()`: the candidate pairs of each (b, r, signatures) of `cases`, given a list of 1-D
    signatures, must equal `lsh_pairs_oracle`; then the first case given as one 2-D array, the same."""
    with guard():
        for b, r, S in cases:
            got = lsh_candidate_pairs(list(S), b, r)
            expect_equal(pairs_of(got), lsh_pairs_oracle(S, b, r),
                         f"lsh_candidate_pairs on {len(S)} random signatures, {b} bands of {r} rows",
                         hint="Every pair that agrees on all rows of some band, once, (i, j) with i < j.")
        b, r, S = cases[0]
        got2d = lsh_candidate_pairs(S, b, r)
    expect_equal(pairs_of(got2d), lsh_pairs_oracle(S, b, r),
                 "lsh_candidate_pairs given a 2-D array of signatures (one row per document)")


LSH_STEPS_HINT = ("A loop over all pairs takes at least one step per pair, 4.5 million here, and was stopped at the budget. "
                  "Bucket each band in a dictionary keyed by (band index, band values) and form pairs inside a bucket only.")


def check_lsh_steps(lsh_candidate_pairs, signatures, b: int, r: int, count_steps, steps_what: str, pairs_what: str,
                    show: bool = False) -> None:
    """`count_steps(lsh_candidate_pairs, signatures, b, r)` (probes_dedup.count_steps, run by a beside cell)
    must stay within its budget, and the pairs must equal `lsh_pairs_oracle`. `show` prints the count."""
    from .probes_dedup import STEP_BUDGET

    steps, got = count_steps(lsh_candidate_pairs, signatures, b, r)
    if show:
        n = len(signatures)
        print(f"{n:,} signatures ({n * (n - 1) // 2:,} pairs), {b} bands of {r} rows: {steps:,} Python steps "
              f"(budget {STEP_BUDGET:,})" + ("" if got is None else f", {len(got)} candidate pairs"))
    expect_between(steps, None, STEP_BUDGET, steps_what, unit="steps", hint=LSH_STEPS_HINT)
    expect_equal(pairs_of(got), lsh_pairs_oracle(signatures, b, r), pairs_what)


def lsh_probability_cases(seed: int) -> tuple[list[tuple], np.ndarray]:
    """30 (s, bands, rows) with s in [0, 1), 1 to 39 bands of 1 to 11 rows, then 17 similarities in [0, 1)."""
    rng = np.random.default_rng(seed)
    cases = [(float(rng.uniform(0, 1)), int(rng.integers(1, 40)), int(rng.integers(1, 12))) for _ in range(30)]
    return cases, rng.uniform(0, 1, 17)


def choose_bands_cases(seed: int, n: int = 25) -> list[tuple[int, float]]:
    """`n` (num_perm, threshold): num_perm among 1, 7, 60 ... 256, threshold in [0.05, 0.95) to 3 decimals."""
    rng = np.random.default_rng(seed)
    return [(int(rng.choice([60, 64, 96, 100, 120, 128, 200, 256, 7, 1])), float(np.round(rng.uniform(0.05, 0.95), 3)))
            for _ in range(n)]


def as_int_tuple(got) -> tuple[int, ...]:
    """An answer's tuple, as a tuple of ints."""
    return tuple(int(x) for x in got)


# -------------------------------------------------------------- Part B4: exact substrings

REPEATED_SPANS_HINT = ("A position is covered when a window of k tokens holding it occurs again (another document, or another "
                       "start in the same one, overlaps allowed), never across a document boundary; return the maximal "
                       "runs, sorted.")

#: (documents, k, the spans the text's rule gives, what the case shows): the examples of the visible test.
REPEATED_SPANS_EXAMPLES = [
    ([[1, 2, 3, 4, 9, 9], [7, 1, 2, 3, 4, 8], [5, 6, 7, 8]], 4, [(0, 0, 4), (1, 1, 5)], "a 4-token repeat in two documents, k = 4"),
    ([[1, 2, 3, 9], [1, 2, 3, 8]], 4, [], "a repeat of k - 1 = 3 tokens, k = 4"),
    ([[1, 2, 3, 9], [1, 2, 3, 8]], 3, [(0, 0, 3), (1, 0, 3)], "a repeat of exactly k = 3 tokens"),
    ([[5, 1, 2, 1, 2, 1, 2, 6]], 4, [(0, 1, 7)], "a run that repeats itself shifted by 2 tokens, k = 4"),
    ([[1, 2], [3, 4], [1, 2, 3, 4]], 4, [], "a document equal to the two before it joined, k = 4"),
    ([[1, 2, 3, 4], [1, 2, 9], [8, 3, 4]], 2, [(0, 0, 4), (1, 0, 2), (2, 1, 3)], "two touching repeats in one document, k = 2"),
]


def check_repeated_spans_examples(repeated_spans) -> None:
    """`repeated_spans` on each of REPEATED_SPANS_EXAMPLES, then on 7 random documents over 4 token ids
    (k = 4) against the brute force over every pair of windows."""
    from .probes_dedup import brute_force_spans, check_spans, planted_corpus

    for docs, k, want, what in REPEATED_SPANS_EXAMPLES:
        check_spans(repeated_spans, docs, k, want, f"repeated_spans, {what}", hint=REPEATED_SPANS_HINT)
    docs, _ = planted_corpus(np.random.default_rng(8801), n_docs=6, k=4, vocab=4)
    check_spans(repeated_spans, docs, 4, brute_force_spans(docs, 4),
                "repeated_spans on 7 random documents over 4 token ids, k = 4, against every pair of windows",
                hint=REPEATED_SPANS_HINT)


def repeated_spans_cases(seed: int, n: int = 10) -> list[tuple]:
    """`n` (documents, k): k in [1, 8), 2 to 8 planted-repeat documents (probes_dedup.planted_corpus) of up
    to 36 tokens over 2 to 6 ids; the last case's documents are int64 numpy arrays."""
    from .probes_dedup import planted_corpus

    rng = np.random.default_rng(seed)
    cases = []
    for case in range(n):
        k = int(rng.integers(1, 8))
        docs, _ = planted_corpus(rng, n_docs=int(rng.integers(2, 9)), k=k, vocab=int(rng.integers(2, 7)), min_len=0, max_len=36)
        cases.append(([np.asarray(d, dtype=np.int64) for d in docs] if case == n - 1 else docs, k))
    return cases


DROP_SPANS_HINT = "Remove every position some span covers (end exclusive), keep the rest in order, one list per document."


def check_drop_spans_examples(drop_spans) -> None:
    """`drop_spans` on three documents [[1..5], [6, 7], [8]]: two spans of one document, overlapping spans
    out of order, no spans."""
    from .probes_dedup import docs_of

    for spans, want, what in [([(0, 1, 2), (0, 3, 4)], [[1, 3, 5], [6, 7], [8]], "two spans of document 0"),
                              ([(0, 3, 5), (0, 0, 2), (0, 1, 3), (1, 0, 2)], [[], [], [8]], "overlapping spans out of order"),
                              ([], [[1, 2, 3, 4, 5], [6, 7], [8]], "no spans")]:
        got = drop_spans([[1, 2, 3, 4, 5], [6, 7], [8]], spans)
        expect_equal(docs_of(got, what), want, f"drop_spans on three documents, {what}", hint=DROP_SPANS_HINT)


def drop_spans_cases(seed: int, n: int = 6) -> list[tuple]:
    """`n` (documents, spans): 1 to 6 documents of 0 to 29 tokens, 0 to 7 spans in any order, overlaps and
    empty spans allowed."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        docs = [[int(t) for t in rng.integers(0, 50, size=int(rng.integers(0, 30)))] for _ in range(int(rng.integers(1, 7)))]
        spans = []
        for _ in range(int(rng.integers(0, 8))):
            d = int(rng.integers(0, len(docs)))
            s = int(rng.integers(0, len(docs[d]) + 1))
            spans.append((d, s, int(rng.integers(s, len(docs[d]) + 1))))
        cases.append((docs, spans))
    return cases


def check_drop_spans_cases(drop_spans, ref_fn, cases, guard) -> None:
    """The documents `drop_spans` keeps for each (documents, spans) of `cases` (given fresh copies, inside
    `guard()`) must equal `ref_fn`'s."""
    from .probes_dedup import docs_of

    expected = [ref_fn(*c) for c in cases]
    with guard():
        for c, ((docs, spans), want) in enumerate(zip(cases, expected)):
            got = drop_spans([list(d) for d in docs], list(spans))
            expect_equal(docs_of(got, "drop_spans"), want, f"drop_spans on hidden case {c} ({len(spans)} spans, any order, overlaps)",
                         hint=DROP_SPANS_HINT)


REPEATED_SPANS_STEPS_HINT = ("Comparing every pair of positions or of k-token windows takes at least one step per pair, 10 million "
                             "here, and was stopped at the budget. Sort the windows (a suffix array) or bucket them by their "
                             "tokens: compare neighbours only.")


# --------------------------------------------------------------- Part C: checkpoint intervals

def interval_cases(seed: int, n: int = 30) -> list[tuple[float, float]]:
    """`n` (checkpoint seconds in [1, 1000), MTBF seconds in [10, 1e6)), log-uniform."""
    rng = np.random.default_rng(seed)
    return [(float(10 ** rng.uniform(0, 3)), float(10 ** rng.uniform(1, 6))) for _ in range(n)]


def check_intervals(young_interval, daly_interval, ref_young, ref_daly, cases, guard) -> None:
    """Young's and Daly's intervals for every (C, M) of `cases` (both called inside `guard()`) against the
    reference functions, to 1e-9: Young's for every case first, then Daly's."""
    want_y = [ref_young(c, m) for c, m in cases]
    want_d = [ref_daly(c, m) for c, m in cases]
    with guard():
        got_y = [young_interval(c, m) for c, m in cases]
        got_d = [daly_interval(c, m) for c, m in cases]
    for (c, m), g, w in zip(cases, got_y, want_y):
        expect_close(g, w, f"young_interval({c:.4g}, {m:.4g})", rtol=1e-9, unit="s")
    for (c, m), g, w in zip(cases, got_d, want_d):
        expect_close(g, w, f"daly_interval({c:.4g}, {m:.4g})", rtol=1e-9, unit="s")


def adaptive_cases(seed: int, n: int = 25) -> list[tuple[float, float, float]]:
    """`n` (checkpoint seconds in [5, 600), termination probability in [0.001, 0.9), window of 10 min, 1 h or 1 day)."""
    rng = np.random.default_rng(seed)
    return [(float(rng.uniform(5, 600)), float(rng.uniform(0.001, 0.9)), float(rng.choice([600.0, 3600.0, 86400.0])))
            for _ in range(n)]


def io_cases(seed: int, n: int = 20) -> list[tuple[float, float, int]]:
    """`n` (bytes in [1e8, 1e12), bytes/s in [1e7, 1e10), 1 to 63 writers), log-uniform sizes."""
    rng = np.random.default_rng(seed)
    return [(float(10 ** rng.uniform(8, 12)), float(10 ** rng.uniform(7, 10)), int(rng.integers(1, 64))) for _ in range(n)]


# ------------------------------------------------------------ Part D: regression detection

def first_step_cases(seed: int, ref_first_step, n: int = 12) -> list[tuple]:
    """`n` (curve, every, tolerance, bug step or None, expected): simulated 300-step validation curves (301 losses)
    (solutions_lib.data.simulate_validation_run), a quarter without a bug; `expected` from `ref_first_step`."""
    from .data import simulate_validation_run

    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        run_seed = int(rng.integers(0, 10**6))
        bug = None if rng.random() < 0.25 else int(rng.integers(30, 250))
        curve = simulate_validation_run(run_seed, 300, bug_step=bug)
        k, tol = int(rng.choice([1, 7, 10, 25, 50])), float(rng.choice([0.1, 0.25, 0.5]))
        cases.append((curve, k, tol, bug, ref_first_step(curve, k, tol)))
    return cases


def check_first_steps(got, cases) -> None:
    """The steps `got` (one per case of `first_step_cases`, None or an int) against the expected ones."""
    for (c, k, tol, bug, want), g in zip(cases, got):
        expect_equal(None if g is None else int(g), want,
                     f"first_step_detected on a run with {'no bug' if bug is None else f'a bug from step {bug}'}, "
                     f"every {k} steps, tolerance {tol}")
