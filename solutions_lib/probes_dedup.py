"""Test machinery for 08's deduplication at scale (Parts B2 and B4), kept out of the test cells.

- `count_steps(fn, *args, budget=STEP_BUDGET)`: the Python steps a call takes, as `sys.settrace`
  reports them (each line executed, each call, return and exception of Python code, the
  answer's and any Python code it calls; a numpy or builtin operation runs in C and counts as
  part of its line). The same code on the same input takes the same steps on any machine under
  any load, so a step budget grades "not quadratic" deterministically where a timing cannot.
  The call is stopped once it passes the budget.
- `planted_corpus(rng, ...)`: random token documents with known repeats planted in them (copies
  across documents and inside one, a self-overlapping periodic run, and a document that equals
  the text across the boundary of two others, which no correct answer may report).
- `brute_force_spans(docs, k)`: the definition of Part B4, every pair of k-token windows
  compared: the oracle of the visible tests (quadratic: the test cells forbid answers to call it).
- `spans_of(got, what)`: an answer's spans as a list of (doc, start, end) tuples of ints, or a
  GradingError that says what was expected.
"""
from __future__ import annotations

import itertools
import sys
import threading

import numpy as np

from .grading import GradingError

#: the step budget of 08's scaling checks; an all-pairs loop over 3,000 items needs >= 4.5 million
STEP_BUDGET = 2_000_000

#: the corpus of Part B4's scaling check: about 6,000 tokens in 30 documents, about 4,500 windows of k = 50 tokens
#: (10 million pairs of windows, 18 million pairs of positions)
SCALING_CORPUS = dict(n_docs=30, k=50, vocab=1000, min_len=150, max_len=250, copies=10)


class _OverBudget(BaseException):
    """Stops the counted call once it passes the budget (not an Exception: `except Exception` lets it through)."""


def count_steps(fn, *args, budget: int = STEP_BUDGET):
    """(steps, list(fn(*args))): the Python steps the call takes, as sys.settrace reports them: each
    line executed and each call, return and exception of Python code, the answer's and any Python
    code it calls (a numpy operation runs in C: it counts as part of its line). The same code on the
    same input takes the same steps on any machine under any load. The call is stopped after
    budget + 1 steps: then (budget + 1, None); also when the call replaced the tracer."""
    steps = 0

    def tracer(frame, event, arg):
        nonlocal steps
        steps += 1
        if steps > budget:
            raise _OverBudget()
        return tracer

    old, old_thread = sys.gettrace(), threading.gettrace()
    result = None
    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        result = list(fn(*args))
    except _OverBudget:
        pass
    finally:
        intact = sys.gettrace() is tracer
        sys.settrace(old)
        threading.settrace(old_thread)
    if steps > budget or not intact:
        return budget + 1, None
    return steps, result


def brute_force_spans(docs, k):
    """Part B4's definition, literally: position p of document d is covered when a k-token window
    of d that holds p equals some other k-token window of the corpus (another document, or another
    start in d, overlapping allowed); the covered positions as sorted maximal runs (d, start, end)."""
    docs = [[int(t) for t in doc] for doc in docs]
    k = int(k)
    windows = [(d, s) for d, doc in enumerate(docs) for s in range(len(doc) - k + 1)]
    covered = [bytearray(len(doc)) for doc in docs]
    for (d, s), (e, t) in itertools.combinations(windows, 2):
        if docs[d][s:s + k] == docs[e][t:t + k]:
            covered[d][s:s + k] = b"\x01" * k
            covered[e][t:t + k] = b"\x01" * k
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


def planted_corpus(rng, n_docs=8, k=4, vocab=6, min_len=10, max_len=30, copies=4):
    """(docs, planted): `n_docs` random documents of `min_len`..`max_len` tokens in 0..vocab-1, with
    repeats planted by overwriting (positions never shift): `copies` copies of a segment of k - 1,
    k, k + 1 or 2k tokens into another document or the same one, one periodic run (a repeat that
    overlaps itself), and a last document made of the last k//2 + 1 tokens of document 0 and the
    first k//2 + 1 of document 1, a match only across their boundary. `planted` lists the planted
    spans (d, start, end) of >= k tokens whose copies still stand: every correct answer covers them.
    `rng` is a numpy Generator."""
    docs = [[int(t) for t in rng.integers(0, vocab, size=int(rng.integers(min_len, max_len + 1)))]
            for _ in range(n_docs)]
    pairs = []
    for _ in range(copies):
        length = int(rng.choice([k - 1, k, k + 1, 2 * k]))
        big = [d for d in range(n_docs) if len(docs[d]) >= length > 0]
        if not big:
            continue
        src, dst = int(rng.choice(big)), int(rng.choice(big))
        a = int(rng.integers(0, len(docs[src]) - length + 1))
        b = int(rng.integers(0, len(docs[dst]) - length + 1))
        docs[dst][b:b + length] = docs[src][a:a + length]
        if length >= k and (src, a) != (dst, b):
            pairs.append(((src, a, a + length), (dst, b, b + length)))
    period = int(rng.integers(1, 4))                      # a run that repeats itself, shifted by `period`
    d = int(rng.integers(0, n_docs))
    if len(docs[d]) >= k + period:
        motif = [int(t) for t in rng.integers(0, vocab, size=period)]
        docs[d][:k + period] = (motif * (k + period))[:k + period]
        pairs.append(((d, 0, k), (d, period, k + period)))
    h = k // 2 + 1                                         # only across the boundary of documents 0 and 1
    if n_docs >= 2 and len(docs[0]) >= h and len(docs[1]) >= h:
        docs.append(docs[0][-h:] + docs[1][:h])
    planted = sorted({span for pair in pairs for span in pair
                      if docs[pair[0][0]][pair[0][1]:pair[0][2]] == docs[pair[1][0]][pair[1][1]:pair[1][2]]})
    return docs, planted


def spans_of(got, what: str) -> list:
    """An answer's spans as a list of (doc, start, end) tuples of ints (lists, tuples, numpy ints
    accepted), or a GradingError that says what was expected."""
    if got is None:
        raise GradingError(f"{what}: got None. Did your function forget to `return` its result?")
    try:
        out = []
        for span in got:
            d, s, e = span
            if any(isinstance(x, (bool, np.bool_)) or int(x) != x for x in (d, s, e)):
                raise ValueError
            out.append((int(d), int(s), int(e)))
        return out
    except (TypeError, ValueError):
        raise GradingError(f"{what}: expected a list of (doc, start, end) tuples of ints, got "
                           f"{str(got)[:200]}") from None


def covered_by(spans, planted) -> list:
    """The planted spans that no span of `spans` contains: [] when every planted repeat was found."""
    return [p for p in planted if not any(d == p[0] and s <= p[1] and p[2] <= e for d, s, e in spans)]


def check_spans(fn, docs, k, expected, what: str, hint: str = "") -> None:
    """Call `fn(docs, k)` (an answer like repeated_spans) and check its spans equal `expected`."""
    from .grading import expect_equal
    expect_equal(spans_of(fn(docs, k), what), expected, what, hint=hint)


def docs_of(got, what: str) -> list:
    """An answer's documents as a list of lists of ints (lists, tuples, numpy arrays accepted), or a
    GradingError that says what was expected."""
    if got is None:
        raise GradingError(f"{what}: got None. Did your function forget to `return` its result?")
    try:
        out = []
        for doc in got:
            if isinstance(doc, (str, bytes)):
                raise TypeError
            row = []
            for t in doc:
                if isinstance(t, (bool, np.bool_)) or int(t) != t:
                    raise ValueError
                row.append(int(t))
            out.append(row)
        return out
    except (TypeError, ValueError):
        raise GradingError(f"{what}: expected a list with one list of token ids per document, got "
                           f"{str(got)[:200]}") from None


def bench_exact_substring(out=print) -> bool:
    """Part B4's step budget in numbers: the course's repeated_spans against every pair of windows
    compared, on the scaling corpus. True when the first fits the budget and the second does not."""
    from . import data
    docs, planted = planted_corpus(np.random.default_rng(8804), **SCALING_CORPUS)
    k = SCALING_CORPUS["k"]
    n = sum(map(len, docs))
    windows = sum(max(0, len(d) - k + 1) for d in docs)
    fast, spans = count_steps(data.repeated_spans, docs, k)
    slow, _ = count_steps(brute_force_spans, docs, k)
    out(f"exact substrings: {len(docs)} documents, {n:,} tokens, {windows:,} windows of k = {k} "
        f"({windows * (windows - 1) // 2:,} pairs); budget {STEP_BUDGET:,} Python steps")
    out(f"  suffix array (windows sorted by their k tokens): {fast:,} steps, {len(spans or [])} runs, "
        f"{sum(e - s for _, s, e in spans or []):,} tokens covered, {len(planted)} planted spans")
    out(f"  every pair of windows: {'stopped at the budget' if slow > STEP_BUDGET else f'{slow:,} steps'}")
    return fast <= STEP_BUDGET < slow


# --------------------------------------------------- 08 part B: MinHash and near-duplicate inputs

def jaccard_cases(seed: int, n: int = 40, vocab: int = 300) -> list[tuple[set, set, float]]:
    """`n` pairs of 3-word shingle sets of two 80-word texts that share a random prefix (of 0 to 79
    words), drawn from `seed`, with their exact Jaccard similarity: (A, B, J)."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(vocab)]
    cases = []
    for _ in range(n):
        a = list(rng.choice(words, 80))
        k = int(rng.integers(0, 80))
        b = a[:k] + list(rng.choice(words, 80 - k))
        A = {tuple(a[i:i + 3]) for i in range(78)}
        B = {tuple(b[i:i + 3]) for i in range(78)}
        cases.append((A, B, len(A & B) / len(A | B)))   # exact Jaccard
    return cases


def planted_near_duplicates(seed: int, n_texts: int = 25, n_planted: int = 5) -> tuple[list[str], list[tuple[int, int]]]:
    """(texts, planted pairs): `n_texts` stdlib docstrings of 40 words or more, then `n_planted` edited
    copies of some of them (every 20th word replaced, a sentence appended), each paired with its original."""
    import collections
    import functools
    import inspect
    import json
    import shutil
    import textwrap

    rng = np.random.default_rng(seed)
    base = []
    for mod in (json, textwrap, functools, collections, shutil):
        for name, obj in sorted(vars(mod).items()):
            doc = inspect.getdoc(obj) if (inspect.isfunction(obj) or inspect.isclass(obj)) else None
            if doc and len(doc.split()) >= 40 and doc not in base:
                base.append(doc)
    texts = [base[i] for i in rng.permutation(len(base))[:n_texts]]
    planted = []
    for _ in range(n_planted):
        i = int(rng.integers(0, n_texts))
        w = texts[i].split()
        for k in range(int(rng.integers(0, 20)), len(w), 20):
            w[k] = "zzz"
        texts.append(" ".join(w) + " See also the notes.")
        planted.append((i, len(texts) - 1))
    return texts, planted
