"""solutions_lib.data against independent oracles: the seed's utilization numbers, brute-force
optimal bin counts, a tiny torch attention run per document, exact Jaccard, and the ValueError
cases."""
import math

import numpy as np
import pytest
import torch

from solutions_lib import data as D

torch.set_num_threads(1)


# ---------------------------------------------------------------- budgets


def test_token_budget_and_epochs():
    assert D.token_budget(1000, 512, 2048) == 1000 * 512 * 2048
    assert D.token_budget(10, 4, 100, utilization=0.5) == 2000
    assert D.corpus_tokens([3, 4, 0, 5]) == 12
    assert D.epochs(3e9, 1e9) == pytest.approx(3.0)
    assert D.steps_for_tokens(1_048_576, 8, 1024) == 128
    assert D.steps_for_tokens(1_048_577, 8, 1024) == 129
    for bad in (lambda: D.token_budget(0, 1, 1), lambda: D.token_budget(1, -2, 1),
                lambda: D.token_budget(1, 1, 1, utilization=1.5), lambda: D.corpus_tokens([1, -1]),
                lambda: D.epochs(1, 0)):
        with pytest.raises(ValueError):
            bad()


# ---------------------------------------------------------------- packing lengths


SEED_LENGTHS = [128, 512, 900, 64, 256, 700, 1024, 300]


def test_seed_packing_utilization():
    real = sum(SEED_LENGTHS)
    naive = D.packing_utilization(SEED_LENGTHS, None, 1024)
    assert naive == pytest.approx(real / (8 * 1024)) and round(naive, 3) == 0.474
    blocks = D.pack_sequences(SEED_LENGTHS, 1024)
    assert len(blocks) == math.ceil(real / 1024) == 4  # FFD reaches the lower bound here
    assert round(D.packing_utilization(SEED_LENGTHS, blocks, 1024), 3) == 0.948


def _optimal_bins(lengths, cap):
    # exact: try k = lower bound, ... with a backtracking search
    n = len(lengths)
    order = sorted(range(n), key=lambda i: -lengths[i])
    for k in range(max(1, math.ceil(sum(lengths) / cap)), n + 1):
        loads = [0] * k

        def place(t):
            if t == n:
                return True
            L, tried = lengths[order[t]], set()
            for b in range(k):
                if loads[b] + L <= cap and loads[b] not in tried:
                    tried.add(loads[b])
                    loads[b] += L
                    if place(t + 1):
                        return True
                    loads[b] -= L
            return False
        if place(0):
            return k
    return n


def test_ffd_against_brute_force_optimum():
    rng = np.random.default_rng(0)
    for _ in range(60):
        cap = int(rng.integers(10, 40))
        lengths = [int(x) for x in rng.integers(1, cap + 1, size=int(rng.integers(1, 10)))]
        blocks = D.pack_sequences(lengths, cap)
        assert sorted(i for b in blocks for i in b) == list(range(len(lengths)))
        assert all(sum(lengths[i] for i in b) <= cap for b in blocks)
        opt = _optimal_bins(lengths, cap)
        assert opt <= len(blocks) <= 11 / 9 * opt + 6 / 9


def test_packing_errors():
    with pytest.raises(ValueError, match="block_size"):
        D.pack_sequences([10, 2000], 1024)
    with pytest.raises(ValueError):
        D.pack_sequences([10, 0], 1024)
    with pytest.raises(ValueError):
        D.packing_utilization([10, 20], [[0]], 32)  # sequence 1 missing
    with pytest.raises(ValueError):
        D.packing_utilization([10, 30], [[0, 1]], 32)  # block over capacity


# ---------------------------------------------------------------- packed token streams


def test_pack_documents_layout():
    out = D.pack_documents([[5, 6, 7], [8, 9], [10, 11, 12, 13]], block_size=8, eos_id=0)
    assert out["input_ids"].tolist() == [[5, 6, 7, 0, 8, 9, 0, 0], [10, 11, 12, 13, 0, 0, 0, 0]]
    assert out["labels"].tolist() == [[6, 7, 0, -100, 9, 0, -100, -100], [11, 12, 13, 0, -100, -100, -100, -100]]
    assert out["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1, 2, 0], [0, 1, 2, 3, 4, 0, 0, 0]]
    assert out["segment_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 1, -1], [2, 2, 2, 2, 2, -1, -1, -1]]
    assert torch.equal(out["loss_mask"], out["labels"] != -100)
    m = out["attention_mask"][0]
    assert m[5, 4] and not m[4, 3] and not m[3, 4] and m[3, 0] and m[7, 7] and not m[7, 6]
    with pytest.raises(ValueError):
        D.pack_documents([[1] * 8], 8, 0)  # 8 tokens + EOS > 8
    with pytest.raises(ValueError):
        D.pack_documents([[1], []], 8, 0)


class TinyAttention(torch.nn.Module):
    """One causal attention layer with learned absolute positions: the independent oracle."""

    def __init__(self, vocab=50, dim=16, max_pos=64):
        super().__init__()
        self.emb, self.pos = torch.nn.Embedding(vocab, dim), torch.nn.Embedding(max_pos, dim)
        self.qkv, self.out = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, vocab)

    def forward(self, ids, pos, mask):
        x = self.emb(ids) + self.pos(pos)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        s = s.masked_fill(~mask, float("-inf"))
        return self.out(s.softmax(-1) @ v + x)


def test_block_diagonal_mask_equals_per_document_run():
    torch.manual_seed(0)
    model = TinyAttention().double()
    rng = np.random.default_rng(1)
    docs = [rng.integers(1, 50, size=int(rng.integers(1, 12))).tolist() for _ in range(9)]
    out = D.pack_documents(docs, 16, eos_id=0)
    logits = model(out["input_ids"], out["position_ids"], out["attention_mask"])
    for d, doc in enumerate(docs):
        r, cols = (out["segment_ids"] == d).nonzero(as_tuple=True)
        ids = torch.tensor(doc + [0])
        n = len(ids)
        alone = model(ids[None], torch.arange(n)[None], torch.tril(torch.ones(n, n, dtype=torch.bool))[None])
        assert torch.allclose(logits[r, cols], alone[0], atol=1e-12)
        # and the plain causal mask (no block diagonal) would differ for any later document
    plain = torch.tril(torch.ones(16, 16, dtype=torch.bool)).expand_as(out["attention_mask"])
    assert not torch.allclose(model(out["input_ids"], out["position_ids"], plain), logits)


def test_loss_on_packed_batch_equals_sum_of_document_losses():
    rng = np.random.default_rng(2)
    docs = [rng.integers(1, 50, size=int(rng.integers(1, 10))).tolist() for _ in range(7)]
    out = D.pack_documents(docs, 12, eos_id=0)
    # the targets the packed batch trains on are exactly each document's own next tokens
    got = out["labels"][out["loss_mask"]].tolist()
    want = [t for doc in docs for t in (doc + [0])[1:]]
    assert got == want


# ---------------------------------------------------------------- dedup


def _corpus():
    import this  # noqa: F401  (the Zen of Python, shipped with Python)
    import codecs
    zen = codecs.decode(this.s, "rot13").split("\n")
    return [line for line in zen if len(line.split()) >= 6]


def test_exact_duplicates_normalise():
    texts = ["Hello,  World!", "hello world", "something else", "HELLO world."]
    assert D.exact_duplicates(texts) == [1, 3]
    assert D.text_hash("A  b") == D.text_hash("a b")


def test_minhash_estimates_jaccard():
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(200)]
    errs = []
    for _ in range(30):
        a = " ".join(rng.choice(words, 60))
        toks = a.split()
        k = int(rng.integers(0, 60))
        b = " ".join(toks[:k] + list(rng.choice(words, 60 - k)))
        sa, sb = D.shingles(a, 3), D.shingles(b, 3)
        exact = D.jaccard(sa, sb)
        est = D.minhash_jaccard(D.minhash_signature(sa, 256, seed=7), D.minhash_signature(sb, 256, seed=7))
        errs.append(est - exact)
        assert abs(est - exact) <= 4 * math.sqrt(max(exact * (1 - exact), 0.01) / 256) + 1e-9
    assert abs(np.mean(errs)) < 0.02  # unbiased
    s = D.shingles("one two three four five six", 3)
    assert D.minhash_jaccard(D.minhash_signature(s, 64, 1), D.minhash_signature(s, 64, 1)) == 1.0


def test_near_duplicates_on_planted_corpus():
    texts = _corpus()
    n0 = len(texts)
    planted = texts[2].replace("better", "nicer", 1) + " indeed"
    texts = texts + [planted, texts[4].upper() + "!!"]
    near = D.near_duplicates(texts, threshold=0.5, n=2)
    assert (2, n0) in near
    assert D.exact_duplicates(texts) == [n0 + 1]
    keep = D.deduplicate(texts, threshold=0.5, n=2)
    assert n0 not in keep and n0 + 1 not in keep and len(keep) == n0
    with pytest.raises(ValueError):
        D.minhash_signature(set(), 8)


# ---------------------------------------------------------------- validation cadence


def test_first_step_detected_by_hand():
    v = [5.0, 3.0, 2.0, 1.0, 1.1, 1.3, 0.9, 2.0]
    assert D.first_step_detected(v, 1) == 5      # 1.3 > 1.0 * 1.25
    assert D.first_step_detected(v, 2) is None  # evaluates 5.0, 2.0, 1.1, 0.9
    assert D.first_step_detected(v, 1, tolerance=0.05) == 4
    assert D.first_step_detected(v, 7) is None   # evaluations at 0 and 7: 2.0 < 5.0
    assert D.first_step_detected([1.0, 1.0], 1, tolerance=0.0) is None
    with pytest.raises(ValueError):
        D.first_step_detected(v, 0)
    with pytest.raises(ValueError):
        D.first_step_detected([], 1)


def test_validation_catches_planted_bug_within_one_cadence():
    for seed in range(20):
        clean = D.simulate_validation_run(seed, 300)
        assert D.first_step_detected(clean, 1) is None  # no false alarm
        bug = int(np.random.default_rng(seed).integers(50, 250))
        v = D.simulate_validation_run(seed, 300, bug_step=bug)
        assert np.array_equal(v[:bug + 1], clean[:bug + 1])  # identical until the bug
        for k in (1, 10, 25):
            s = D.first_step_detected(v, k)
            assert s is not None and bug < s <= bug + k + k  # caught at the first or second evaluation after it


# ---------------------------------------------------------------- LSH banding and quality filters


def test_lsh_candidates_equal_brute_force_band_agreement():
    rng = np.random.default_rng(31)
    for bands, rows in [(4, 2), (3, 3), (1, 5), (6, 1)]:
        sigs = rng.integers(0, 3, size=(40, bands * rows))
        brute = [(i, j) for i in range(40) for j in range(i + 1, 40)
                 if any(np.array_equal(sigs[i, k * rows:(k + 1) * rows], sigs[j, k * rows:(k + 1) * rows])
                        for k in range(bands))]
        assert D.lsh_candidate_pairs(sigs, bands, rows) == brute
        assert D.lsh_candidate_pairs(list(sigs), bands, rows) == brute
    assert D.lsh_candidate_pairs([], 2, 2) == []
    for bad in (lambda: D.lsh_candidate_pairs([np.zeros(6)], 2, 2), lambda: D.lsh_candidate_pairs([np.zeros(4)], 0, 4),
                lambda: D.lsh_candidate_pairs([np.zeros((2, 2))], 2, 2), lambda: D.lsh_candidate_pairs([np.zeros(4)], 2, 2.5)):
        with pytest.raises(ValueError):
            bad()


def test_lsh_probability_threshold_and_choose_bands():
    assert D.lsh_candidate_probability(0.0, 20, 5) == 0.0
    assert D.lsh_candidate_probability(1.0, 20, 5) == 1.0
    assert D.lsh_candidate_probability(0.5, 1, 1) == pytest.approx(0.5)
    assert D.lsh_candidate_probability(0.8, 20, 5) == pytest.approx(1 - (1 - 0.8 ** 5) ** 20)
    s = np.linspace(0, 1, 11)
    assert np.all(np.diff(D.lsh_candidate_probability(s, 16, 8)) >= 0)
    # the threshold (1/b)^(1/r) sits near the half-way point of the S-curve
    for b, r in [(20, 5), (16, 8), (32, 4)]:
        assert 0.3 < D.lsh_candidate_probability(D.lsh_threshold(b, r), b, r) < 0.7
    assert D.choose_bands(128, 0.7) == (16, 8)
    assert D.choose_bands(128, 0.5) == (32, 4)
    assert D.choose_bands(100, 0.5) == (20, 5)
    assert D.choose_bands(7, 0.9) == (1, 7)
    for bad in (lambda: D.lsh_candidate_probability(1.5, 2, 2), lambda: D.choose_bands(0, 0.5),
                lambda: D.choose_bands(64, 0.0), lambda: D.lsh_threshold(2, 0)):
        with pytest.raises(ValueError):
            bad()


def test_lsh_candidate_rate_follows_the_s_curve():
    b, r, n = 20, 5, 80
    for s in (0.4, 0.6, 0.8):
        hits = 0
        for p in range(n):
            m, k = 100, int(round(100 * s))
            common = {(f"c{p}-{i}",) for i in range(k)}
            A = common | {(f"a{p}-{i}",) for i in range((m - k) // 2)}
            B = common | {(f"b{p}-{i}",) for i in range(m - k - (m - k) // 2)}
            hits += (0, 1) in D.lsh_candidate_pairs([D.minhash_signature(A, b * r, 3), D.minhash_signature(B, b * r, 3)], b, r)
        P = D.lsh_candidate_probability(s, b, r)
        assert abs(hits / n - P) < 4 * math.sqrt(max(P * (1 - P), 0.01) / n)


def test_quality_flags_each_rule():
    good = ("The cat sat on the mat and looked at the dog with some interest.\n"
            "It was a quiet afternoon, and nothing much happened in the garden that day.")
    assert not any(D.quality_flags(good).values())
    assert tuple(D.quality_flags(good)) == D.QUALITY_RULES
    assert D.filter_corpus([good]) == [0]
    assert D.quality_flags("the cat and the dog")["word_count"]
    assert D.quality_flags("")["word_count"] and D.quality_flags("")["mean_word_length"]
    assert D.quality_flags(" ".join(["a"] * 30))["mean_word_length"]
    assert D.quality_flags(good + " # # #")["symbol_ratio"] is False            # 3 / 31 < 0.1
    assert D.quality_flags(good + " # # # ...")["symbol_ratio"]                # 4 / 32 > 0.1
    ell = "\n".join([f"line {i} of the story with the dog..." for i in range(4)]
                    + [f"plain line {i} with the cat" for i in range(6)])
    f = D.quality_flags(ell)
    assert f["ellipsis_lines"] and f["symbol_ratio"] is False                   # 4 of 10 lines; 4 / 60 words
    assert D.quality_flags(good + " 1 2 3 4 5 6 7 8")["alphabetic_words"]       # 28 / 36 < 0.8
    assert D.quality_flags(good + " 1 2 3 4 5 6 7")["alphabetic_words"] is False  # 28 / 35 = 0.8
    no_stops = "Cats sit on mats; dogs bark loudly at strangers near gardens, while birds sing songs over trees every single morning."
    assert D.quality_flags(no_stops)["stop_words"]
    assert D.quality_flags(no_stops + " The end.")["stop_words"]                # one stop word only
    assert D.quality_flags(no_stops + " The end, the.")["stop_words"] is False  # repeats count
    rep = "\n".join([good.splitlines()[0]] * 3 + ["a different line with the words", "and another one"])
    assert D.quality_flags(rep)["duplicate_lines"]                              # 2 of 5 lines repeat
    assert D.quality_flags(good + " {x}")["curly_brace"]
    assert D.filter_corpus([good, good + " {x}", "short"]) == [0]
    for bad in (lambda: D.quality_flags(3), lambda: D.filter_corpus("abc"), lambda: D.filter_corpus([good, None])):
        with pytest.raises(ValueError):
            bad()


def test_ngram_overlap():
    train = " ".join(f"w{i}" for i in range(100))
    assert D.ngram_overlap(train, train, 13) == 1.0
    assert D.ngram_overlap(train, " ".join(f"v{i}" for i in range(30)), 13) == 0.0
    assert D.ngram_overlap(train, "too short", 13) == 0.0
    half = " ".join([f"w{i}" for i in range(10, 24)] + [f"v{i}" for i in range(14)])  # 28 words, 16 13-grams
    assert D.ngram_overlap(train, half, 13) == pytest.approx(2 / 16)
    assert D.ngram_overlap("The Cat, sat!", "the cat sat", 3) == 1.0
    with pytest.raises(ValueError):
        D.ngram_overlap(train, train, 0)


def test_upstream_quality_flags_equal_the_reference():
    import inspect
    import json
    import textwrap

    from solutions_lib import upstream as U

    texts = ["", "  \n ", "a b c", "word " * 20, "\u2026 \u2026\nx\u2026\n" * 5, "{}"]
    for mod in (json, textwrap):
        for _, obj in sorted(vars(mod).items()):
            if inspect.isfunction(obj) or inspect.isclass(obj):
                texts.append(inspect.getdoc(obj) or "")
                try:
                    texts.append(inspect.getsource(obj))
                except (OSError, TypeError):
                    pass
    rng = np.random.default_rng(5)
    for _ in range(40):
        texts.append("\n".join(" ".join(rng.choice(["the", "a", "#", "...", "of", "x1", "{", "word"], int(rng.integers(0, 6))))
                               for _ in range(int(rng.integers(0, 8)))))
    for t in texts:
        assert U.quality_flags(t) == D.quality_flags(t)
    assert U.quality_flags in U.ANSWERS


# ---------------------------------------------------------------- 08's LSH scaling cell, attacked


def _lsh_scaling_cell() -> str:
    from pathlib import Path

    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parents[1] / "source/08_data_checkpoints/exercises.ipynb", 4)
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "lsh_scaling_tests")


def _bucketed(signatures, b, r):
    import time

    time.sleep(1.0)              # slow, but sub-quadratic: the cell counts steps, not seconds
    groups = {}
    for i, s in enumerate(signatures):
        for k in range(b):
            groups.setdefault((k, tuple(int(v) for v in s[k * r:(k + 1) * r])), []).append(i)
    return sorted({(g[x], g[y]) for g in groups.values() for x in range(len(g)) for y in range(x + 1, len(g))})


def _all_pairs(signatures, b, r):    # the same pairs, by comparing every pair
    n = len(signatures)
    return [(i, j) for i in range(n) for j in range(i + 1, n)
            if any(np.array_equal(signatures[i][k * r:(k + 1) * r], signatures[j][k * r:(k + 1) * r]) for k in range(b))]


def test_lsh_scaling_cell_counts_steps_not_seconds():
    from solutions_lib.grading import GradingError

    cell = _lsh_scaling_cell()
    exec(compile(cell, "lsh_scaling_tests", "exec"), {"lsh_candidate_pairs": _bucketed})   # slow and correct: passes
    with pytest.raises(GradingError, match="Python steps lsh_candidate_pairs takes"):
        exec(compile(cell, "lsh_scaling_tests", "exec"), {"lsh_candidate_pairs": _all_pairs})


# ---------------------------------------------------------------- test machinery (probes_data)


def test_other_process_hash_changes_a_hash_minhash_only():
    """08 minhash_tests: a MinHash on Python's salted hash() changes 'in another process', the
    course's hashlib MinHash does not; a real second process with another PYTHONHASHSEED agrees
    that hash() of a str moves; ints hash the same; builtins.hash is restored."""
    import builtins
    import subprocess
    import sys

    from solutions_lib.probes_data import other_process_hash, values_of
    from solutions_lib.grading import GradingError

    s = {("a", "b", "c"), ("b", "c", "d"), ("c", "d", "e")}
    p = (1 << 31) - 1

    def salted_minhash(shingles, k=16):
        g = np.random.default_rng(1)
        a, b = g.integers(1, p, k), g.integers(0, p, k)
        x = np.array([hash(t) % p for t in shingles])
        return ((a[:, None] * x[None, :] + b[:, None]) % p).min(axis=1)

    here, good = salted_minhash(s), D.minhash_signature(s, 16, seed=1)
    original = builtins.hash
    with other_process_hash():
        there, good_there = salted_minhash(s), D.minhash_signature(s, 16, seed=1)
        assert hash(12345) == original(12345) and hash((1, 2)) == original((1, 2))
    assert builtins.hash is original
    assert np.sum(here != there) > 0 and np.array_equal(good, good_there)
    cmd = [sys.executable, "-c", "print(hash(('a', 'b')))"]
    outs = {subprocess.run(cmd, env={"PYTHONHASHSEED": str(k)}, capture_output=True, text=True).stdout for k in (1, 2)}
    assert len(outs) == 2
    assert values_of({"a": 1.0, "b": 2.0}, ["b", "a"], "t") == [2.0, 1.0]
    with pytest.raises(GradingError, match="keys missing"):
        values_of({"a": 1.0}, ["a", "b"], "t")
