"""Checks of 08 exercises (data pipeline) whose test cells run grader-side, kept here so that each test
cell reads as a few lines of intent. Nothing here runs inside the student's kernel on its own: the
checks call the student's functions (proxies, grader-side) and compare with oracles computed here from
the inputs: a small attention model run by torch (packing), the S-curve 1 - (1 - s^r)^b of the text (LSH).

The test cells keep their hidden inputs (`term_seed(...)` literals, case lists) and their
`no_delegation` blocks; the checks make the same calls to `solutions_lib.grading` (same descriptions,
same order) as the cells they came from.
"""
from __future__ import annotations

import numpy as np
import torch

from .grading import expect_close, expect_true


# ------------------------------------------------------------- Part A: packing equals per-document

def attention_oracle(seed: int):
    """A seeded one-layer attention model in float64 (vocabulary 1000, width 16, 64 positions):
    run(ids, positions, bool mask) -> logits. The oracle that packing must not change a document's logits."""
    torch.manual_seed(seed)
    emb, pos = torch.nn.Embedding(1000, 16).double(), torch.nn.Embedding(64, 16).double()
    qkv, head = torch.nn.Linear(16, 48).double(), torch.nn.Linear(16, 1000).double()

    def run(ids, positions, mask):
        x = emb(ids) + pos(positions)
        q, k, v = qkv(x).chunk(3, dim=-1)
        s = (q @ k.transpose(-1, -2) / 4.0).masked_fill(~mask, float("-inf"))
        return head(s.softmax(-1) @ v + x)
    return run


def check_packed_equals_alone(pack_documents, docs, T: int, eos: int, seed: int) -> None:
    """Pack `docs` into blocks of `T` with `pack_documents`; each document (with its EOS) run inside its
    packed block through `attention_oracle(seed)` must give the logits it gets when run alone."""
    run = attention_oracle(seed)
    out = pack_documents(docs, T, eos)
    ids, positions = torch.as_tensor(out["input_ids"]), torch.as_tensor(out["position_ids"])
    mask = torch.as_tensor(out["attention_mask"]).bool()
    with torch.no_grad():
        packed = run(ids, positions, mask)
        flat_ids = ids.reshape(-1).tolist()
        where = 0
        for d, doc in enumerate(docs):
            full = list(doc) + [eos]
            n = len(full)
            # find the document in the packed stream (documents are placed in order)
            while flat_ids[where:where + n] != full or (where % T) + n > T:
                where += 1
                expect_true(where < len(flat_ids), f"document {d} ({n} tokens with EOS) not found in input_ids")
            b, c = divmod(where, T)
            alone = run(torch.tensor(full)[None], torch.arange(n)[None], torch.tril(torch.ones(n, n, dtype=torch.bool))[None])[0]
            expect_true(torch.allclose(packed[b, c:c + n], alone, atol=1e-10),
                        f"document {d}: logits in the packed block differ from the document run alone "
                        f"(max diff {float((packed[b, c:c + n] - alone).abs().max()):.2e}). Check the position ids "
                        "(restart at 0) and that the mask blocks attention to earlier documents.")
            where += n


def packing_cases(seed: int, n: int = 6) -> list[tuple]:
    """`n` random (docs, T): T in [6, 40), 2 to 9 documents of 1 to T - 1 tokens in [1, 1000)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        T = int(rng.integers(6, 40))
        out.append(([rng.integers(1, 1000, size=int(rng.integers(1, T))).tolist() for _ in range(int(rng.integers(2, 10)))], T))
    return out


# ------------------------------------------------------------------- Part B2: LSH, the S-curve

def jaccard_pair_sets(level: int, p: int, s: float) -> tuple[set, set]:
    """Two fresh sets of 100 one-word shingles with Jaccard similarity about `s` (k = round(100 s) in common)."""
    k = int(round(100 * s))
    common = {(f"h{level}-{p}-c{i}",) for i in range(k)}
    A = common | {(f"h{level}-{p}-a{i}",) for i in range((100 - k) // 2)}
    B = common | {(f"h{level}-{p}-b{i}",) for i in range(100 - k - (100 - k) // 2)}
    return A, B


def check_scurve(lsh_candidate_pairs, minhash_signature, seed: int, guard, levels=(0.3, 0.5, 0.6, 0.7, 0.9),
                 b: int = 20, r: int = 5, n_pairs: int = 60) -> None:
    """The S-curve, measured: for each similarity s of `levels`, `n_pairs` pairs of fresh sets with Jaccard s,
    signed by `minhash_signature` (the course's, with `seed`); the share of pairs that `lsh_candidate_pairs`
    (called inside `guard()`, the cell's no_delegation) makes candidates must be 1 - (1 - s^r)^b within
    four standard errors."""
    for level, s in enumerate(levels):
        sigs = []
        for p in range(n_pairs):
            A, B = jaccard_pair_sets(level, p, s)
            sigs += [minhash_signature(A, b * r, seed=seed), minhash_signature(B, b * r, seed=seed)]
        with guard():
            cand = {tuple(int(x) for x in q) for q in lsh_candidate_pairs(sigs, b, r)}
        rate = float(np.mean([(2 * p, 2 * p + 1) in cand for p in range(n_pairs)]))
        P = 1 - (1 - s ** r) ** b
        expect_close(rate, P, f"candidate rate of {n_pairs} pairs with Jaccard {s} (20 bands of 5 rows) against 1 - (1 - s^5)^20",
                     atol=4 * np.sqrt(max(P * (1 - P), 0.01) / n_pairs),
                     hint="Far from the S-curve: do you cut the bands at k*rows .. (k+1)*rows and require all rows to agree?")


# ---------------------------------------------------------------------- Part A: pack_documents

def check_pack_worked_example(pack_documents) -> None:
    """The worked example of the text: [[5, 6, 7], [8, 9], [10, 11, 12, 13]] into blocks of 8, EOS 0."""
    from .grading import expect_equal

    out = pack_documents([[5, 6, 7], [8, 9], [10, 11, 12, 13]], 8, 0)
    expect_equal(torch.as_tensor(out["input_ids"]).tolist(), [[5, 6, 7, 0, 8, 9, 0, 0], [10, 11, 12, 13, 0, 0, 0, 0]],
                 "input_ids of the worked example", hint="Append EOS to each document; start a new block when one does not fit.")
    expect_equal(torch.as_tensor(out["labels"]).tolist(), [[6, 7, 0, -100, 9, 0, -100, -100], [11, 12, 13, 0, -100, -100, -100, -100]],
                 "labels of the worked example", hint="labels[i] = input_ids[i+1] inside a document; -100 at each EOS and on padding.")
    expect_equal(torch.as_tensor(out["position_ids"]).tolist(), [[0, 1, 2, 3, 0, 1, 2, 0], [0, 1, 2, 3, 4, 0, 0, 0]],
                 "position_ids of the worked example", hint="Positions restart at 0 for every document; padding gets 0.")
    m = torch.as_tensor(out["attention_mask"])
    expect_true(bool(m[0, 5, 4]) and not bool(m[0, 4, 3]) and not bool(m[0, 3, 4]) and bool(m[0, 7, 7]) and not bool(m[0, 7, 6]),
                "attention_mask of block 0: token 4 (first of document 2) must not see token 3 (EOS of document 1); "
                "token 5 sees token 4; no token sees the future; padding sees only itself.")


def pack_cases(seed: int, n: int = 12) -> list[tuple]:
    """`n` random (docs, block_size, eos_id): block size in [4, 40), 1 to 14 documents of 1 to T - 1 tokens."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n):
        T = int(rng.integers(4, 40))
        docs = [rng.integers(1, 1000, size=int(rng.integers(1, T))).tolist() for _ in range(int(rng.integers(1, 15)))]
        cases.append((docs, T, int(rng.integers(0, 3))))
    return cases


PACK_KEYS = ("input_ids", "labels", "position_ids", "attention_mask", "loss_mask")


def check_packs(cases, got, want) -> None:
    """Each packed output of `got` against `want` (the expected outputs the test cell computed), key by key:
    the shape, then the values."""
    from .grading import expect_equal

    for (d, T, e), g, w in zip(cases, got, want):
        for key in PACK_KEYS:
            gk = torch.as_tensor(g[key])
            expect_equal(tuple(gk.shape), w[key].shape,
                         f"pack_documents({len(d)} documents, block_size={T}, eos_id={e}): shape of '{key}'")
            expect_equal(gk.long().tolist(), w[key].long().tolist(),
                         f"pack_documents({len(d)} documents, block_size={T}, eos_id={e}): '{key}' differs from the reference")


# ---------------------------------------------------------------------- Part B3: ngram_overlap

def check_ngram_visible(ngram_overlap) -> None:
    """Six pairs whose overlap follows from the text: a copy, unrelated words, one 14-word copied span,
    an eval text shorter than n, a repeated 3-gram, and case and punctuation changes."""
    stream = " ".join(f"w{i}" for i in range(100))
    copied = " ".join([f"w{i}" for i in range(10, 24)] + [f"v{i}" for i in range(14)])   # 28 words, 16 13-grams
    for what, args, want in [("an exact copy", (stream, stream), 1.0),
                             ("unrelated words", (stream, " ".join(f"v{i}" for i in range(30))), 0.0),
                             ("a 14-word copied span then new words", (stream, copied), 2 / 16),
                             ("an eval text of 2 words", (stream, "w1 w2"), 0.0),
                             ("an eval text with a repeated 3-gram, n = 3", ("x y z", "x y z x y z q", 3), 1 / 4),
                             ("case and punctuation changed, n = 3", ("The Cat, sat!", "the cat sat", 3), 1.0)]:
        got = ngram_overlap(*args)
        print(f"ngram_overlap, {what}: {got}")
        expect_close(got, want, f"ngram_overlap, {what}", rtol=1e-12,
                     hint="Distinct n-grams of the eval text found among the train text's n-grams, divided by the "
                          "number of distinct eval n-grams.")


def ngram_cases(seed: int, n: int = 12) -> list[tuple]:
    """`n` random (train text, eval text, n): word streams over 40 words, 70 % of the eval texts ending in
    a span copied from the train text, some eval words upper-cased or followed by a comma."""
    rng = np.random.default_rng(seed)
    vocab = [f"t{i}" for i in range(40)]
    cases = []
    for _ in range(n):
        tr = list(rng.choice(vocab, int(rng.integers(50, 300))))
        ev = list(rng.choice(vocab, int(rng.integers(5, 60))))
        if rng.random() < 0.7 and len(tr) > 30:
            a = int(rng.integers(0, len(tr) - 20)); ev[int(rng.integers(0, len(ev))):] = tr[a:a + int(rng.integers(8, 20))]
        k = int(rng.choice([3, 5, 8, 13]))
        cases.append((" ".join(tr), " ".join(w.upper() if rng.random() < 0.2 else w + ("," if rng.random() < 0.1 else "") for w in ev), k))
    return cases
