"""Training data in tokens: budgets, packing short sequences into fixed blocks, packed token
streams with per-document attention, deduplication (exact, MinHash near-duplicates, LSH banding),
heuristic quality filters and n-gram contamination checks.

Units: tokens. A "block" is one row of the batch, `block_size` tokens long.

Sources:
- token budget: data is counted in tokens, D = sum over documents of tokens(doc); a run of S
  steps at a global batch of B sequences of L tokens sees S * B * L token slots;
- bin packing: first-fit decreasing uses at most 11/9 OPT + 6/9 bins (Dosa 2007);
- packed causal LM batches with per-document position ids and block-diagonal masks: the
  "packing without cross-contamination" recipe (e.g. Krell et al. 2021, "Efficient Sequence
  Packing without Cross-contamination");
- MinHash: Broder 1997, "On the resemblance and containment of documents": for a random
  permutation pi, P[min pi(A) = min pi(B)] = |A n B| / |A u B| (the Jaccard similarity).
- LSH banding: Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets", ch. 3.4: b bands of
  r rows make a pair of Jaccard s a candidate with probability 1 - (1 - s^r)^b;
- quality filters: Rae et al. 2021 (Gopher, appendix A.1.1), Raffel et al. 2020 (C4, sec. 2.2);
  contamination by 13-gram overlap: Brown et al. 2020 (GPT-3, appendix C).
Bad arguments raise ValueError with the reason.
"""
from __future__ import annotations

import hashlib
import math
import re
from numbers import Integral

import numpy as np
import torch

from solutions_lib._checks import count, fraction, positive

IGNORE_INDEX = -100  # the label torch's cross_entropy skips by default
MERSENNE_31 = (1 << 31) - 1  # prime modulus of the MinHash permutation family


# ---------------------------------------------------------------- token budgets


def token_budget(steps, global_batch, seq_len, utilization=1.0):
    """Real tokens a run trains on: steps x global batch (sequences) x seq_len x utilization.

    `utilization` is the fraction of token slots that hold real tokens (1 for perfectly
    packed blocks, real/allocated for padded batches). Units: tokens.
    """
    positive("steps", steps, integer=True)
    positive("global_batch", global_batch, integer=True)
    positive("seq_len", seq_len, integer=True)
    fraction("utilization", utilization, open_low=True)
    return float(steps) * float(global_batch) * float(seq_len) * float(utilization)


def corpus_tokens(doc_lengths):
    """D = sum over documents of tokens(doc): a corpus is measured in tokens, not documents."""
    lengths = _lengths(doc_lengths, allow_zero=True)
    return int(sum(lengths))


def epochs(tokens, corpus_size_tokens):
    """How many passes over a corpus of `corpus_size_tokens` a budget of `tokens` makes."""
    positive("tokens", tokens)
    positive("corpus_size_tokens", corpus_size_tokens)
    return float(tokens) / float(corpus_size_tokens)


def steps_for_tokens(tokens, global_batch, seq_len, utilization=1.0):
    """Optimizer steps needed to see `tokens` real tokens: ceil(tokens / (B x L x utilization))."""
    positive("tokens", tokens)
    per_step = token_budget(1, global_batch, seq_len, utilization)
    return int(math.ceil(float(tokens) / per_step - 1e-9))


# ---------------------------------------------------------------- packing lengths into blocks


def _lengths(lengths, allow_zero=False):
    out = []
    for i, n in enumerate(list(lengths)):
        if isinstance(n, bool) or not isinstance(n, (Integral, np.integer)):
            raise ValueError(f"lengths[{i}] must be a whole number of tokens, got {n!r}")
        if n < 0 or (n == 0 and not allow_zero):
            raise ValueError(f"lengths[{i}] must be {'>= 0' if allow_zero else '> 0'}, got {n!r}")
        out.append(int(n))
    return out


def pack_sequences(lengths, block_size):
    """First-fit decreasing: indices of sequences grouped into blocks of at most `block_size`.

    Sequences are taken longest first (ties by index) and each goes into the first open block
    with room for it; a new block opens when none has. A sequence longer than `block_size`
    raises ValueError (we never split a sequence here; truncate or chunk it beforehand).
    Returns a list of blocks, each a list of sequence indices in the order they were placed.
    FFD uses at most 11/9 OPT + 6/9 blocks (Dosa 2007).
    """
    block_size = count("block_size", block_size)
    lens = _lengths(lengths)
    for i, n in enumerate(lens):
        if n > block_size:
            raise ValueError(f"sequence {i} has {n} tokens, more than block_size={block_size}; "
                             "truncate or chunk it before packing")
    order = sorted(range(len(lens)), key=lambda i: (-lens[i], i))
    blocks, free = [], []
    for i in order:
        for b, room in enumerate(free):
            if lens[i] <= room:
                blocks[b].append(i)
                free[b] -= lens[i]
                break
        else:
            blocks.append([i])
            free.append(block_size - lens[i])
    return blocks


def packing_utilization(lengths, blocks=None, block_size=None):
    """Real tokens / allocated tokens = sum(lengths) / (number of blocks x block_size).

    `blocks=None` means the naive layout: every sequence padded to its own block. Otherwise
    `blocks` must place every sequence exactly once with no block over `block_size`.
    """
    block_size = count("block_size", block_size)
    lens = _lengths(lengths)
    if not lens:
        raise ValueError("lengths is empty: utilization of nothing is undefined")
    if max(lens) > block_size:
        raise ValueError(f"a sequence of {max(lens)} tokens does not fit a block of {block_size}")
    if blocks is None:
        n_blocks = len(lens)
    else:
        seen = sorted(i for b in blocks for i in b)
        if seen != list(range(len(lens))):
            raise ValueError("blocks must contain every sequence index exactly once")
        for b in blocks:
            if sum(lens[i] for i in b) > block_size:
                raise ValueError(f"block {b} holds {sum(lens[i] for i in b)} tokens > block_size={block_size}")
        n_blocks = len(blocks)
    return sum(lens) / (n_blocks * block_size)


# ---------------------------------------------------------------- packed token streams


def pack_documents(docs, block_size, eos_id, pad_id=None):
    """Pack tokenised documents into causal-LM blocks without cross-document attention.

    Each document (a non-empty list of token ids) gets `eos_id` appended. Documents are placed
    in the given order; one that does not fit in the space left in the current block starts a
    new block (documents are never split; one longer than block_size - 1 raises ValueError).
    The rest of a block is padding (`pad_id`, default `eos_id`).

    Returns a dict of tensors, n = number of blocks, T = block_size:
    - ``input_ids`` (n, T) long;
    - ``labels`` (n, T) long: labels[i] = input_ids[i + 1] when token i+1 is in the same
      document, else -100 (the last token of each document, i.e. its EOS, and all padding):
      no target ever crosses a document boundary;
    - ``position_ids`` (n, T) long: 0, 1, 2, ... restarting at every document (0 on padding);
    - ``attention_mask`` (n, T, T) bool, True where query i may attend key j: j <= i and both
      in the same document (block-diagonal causal); a padding token attends only to itself;
    - ``loss_mask`` (n, T) bool: labels != -100;
    - ``segment_ids`` (n, T) long: the document index, -1 on padding.
    """
    block_size = count("block_size", block_size, minimum=2)
    if isinstance(eos_id, bool) or not isinstance(eos_id, (Integral, np.integer)):
        raise ValueError(f"eos_id must be an int token id, got {eos_id!r}")
    pad_id = eos_id if pad_id is None else pad_id
    rows, row, used = [], [], 0
    for d, doc in enumerate(docs):
        toks = [int(t) for t in doc]
        if not toks:
            raise ValueError(f"document {d} is empty")
        if len(toks) + 1 > block_size:
            raise ValueError(f"document {d} has {len(toks)} tokens + EOS > block_size={block_size}; "
                             "chunk long documents before packing")
        if used + len(toks) + 1 > block_size:
            rows.append(row)
            row, used = [], 0
        row.append((d, toks + [int(eos_id)]))
        used += len(toks) + 1
    if row:
        rows.append(row)
    n, T = len(rows), block_size
    input_ids = torch.full((n, T), int(pad_id), dtype=torch.long)
    labels = torch.full((n, T), IGNORE_INDEX, dtype=torch.long)
    position_ids = torch.zeros((n, T), dtype=torch.long)
    segment_ids = torch.full((n, T), -1, dtype=torch.long)
    for r, placed in enumerate(rows):
        start = 0
        for d, toks in placed:
            k = len(toks)
            t = torch.tensor(toks, dtype=torch.long)
            input_ids[r, start:start + k] = t
            labels[r, start:start + k - 1] = t[1:]
            position_ids[r, start:start + k] = torch.arange(k)
            segment_ids[r, start:start + k] = d
            start += k
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    real = (segment_ids >= 0)
    attention_mask = same & causal & real[:, :, None]
    attention_mask |= torch.eye(T, dtype=torch.bool) & ~real[:, :, None]
    return {"input_ids": input_ids, "labels": labels, "position_ids": position_ids,
            "attention_mask": attention_mask, "loss_mask": labels != IGNORE_INDEX,
            "segment_ids": segment_ids}


# ---------------------------------------------------------------- deduplication


def normalise_text(text):
    """Lower case, punctuation removed, runs of whitespace collapsed to one space."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def text_hash(text):
    """sha256 hex digest of the normalised text: equal for texts that differ only in case,
    punctuation or spacing."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def exact_duplicates(texts):
    """Indices of texts whose normalised hash equals that of an earlier text (the ones to drop)."""
    seen, drop = set(), []
    for i, t in enumerate(texts):
        h = text_hash(t)
        if h in seen:
            drop.append(i)
        seen.add(h)
    return drop


def shingles(text, n=5):
    """The set of word n-grams (tuples of n words) of the normalised text; a text shorter than
    n words gives one shingle, the whole text."""
    n = count("n", n)
    words = normalise_text(text).split()
    if len(words) <= n:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def jaccard(a, b):
    """|A n B| / |A u B| for two sets (1.0 for two empty sets)."""
    a, b = set(a), set(b)
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _shingle_ids(shingle_set):
    return np.array([int.from_bytes(hashlib.blake2b(" ".join(s).encode("utf-8"), digest_size=8).digest(), "little")
                     % MERSENNE_31 for s in shingle_set], dtype=np.int64)


def minhash_signature(shingle_set, num_perm=128, seed=0):
    """MinHash signature: for each of `num_perm` hash functions h(x) = (a x + b) mod (2^31 - 1),
    with (a, b) drawn from np.random.default_rng(seed), the minimum of h over the set.

    Two signatures agree in each position with probability equal to the sets' Jaccard
    similarity, so the fraction of equal positions estimates it (standard error about
    sqrt(J (1 - J) / num_perm)).
    """
    num_perm = count("num_perm", num_perm)
    if not shingle_set:
        raise ValueError("cannot MinHash an empty set")
    rng = np.random.default_rng(seed)
    a = rng.integers(1, MERSENNE_31, size=num_perm, dtype=np.int64)
    b = rng.integers(0, MERSENNE_31, size=num_perm, dtype=np.int64)
    x = _shingle_ids(shingle_set)
    return ((a[:, None] * x[None, :] + b[:, None]) % MERSENNE_31).min(axis=1)


def minhash_jaccard(sig_a, sig_b):
    """Estimated Jaccard similarity: the fraction of positions where two signatures agree."""
    sig_a, sig_b = np.asarray(sig_a), np.asarray(sig_b)
    if sig_a.shape != sig_b.shape or sig_a.ndim != 1:
        raise ValueError(f"signatures must be 1-D of equal length, got {sig_a.shape} and {sig_b.shape}")
    return float(np.mean(sig_a == sig_b))


def near_duplicates(texts, threshold=0.7, n=5, num_perm=128, seed=0):
    """Pairs (i, j), i < j, whose MinHash-estimated Jaccard similarity of word n-gram shingles
    is at least `threshold`. All pairs are compared (fine for small corpora; large ones bucket
    signatures with locality-sensitive hashing first)."""
    fraction("threshold", threshold, open_low=True)
    sigs = [minhash_signature(shingles(t, n), num_perm, seed) for t in texts]
    pairs = []
    for i in range(len(sigs)):
        for j in range(i + 1, len(sigs)):
            if minhash_jaccard(sigs[i], sigs[j]) >= threshold:
                pairs.append((i, j))
    return pairs


def deduplicate(texts, threshold=0.7, n=5, num_perm=128, seed=0):
    """Indices of texts to keep: drop exact duplicates, then the later text of every
    near-duplicate pair whose earlier text is kept."""
    drop = set(exact_duplicates(texts))
    for i, j in near_duplicates(texts, threshold, n, num_perm, seed):
        if i not in drop:
            drop.add(j)
    return [i for i in range(len(texts)) if i not in drop]


# ---------------------------------------------------------------- validation cadence


def simulate_validation_run(seed, steps=300, bug_step=None, dim=8, batch=32, lr=0.02, noise=0.1):
    """Held-out loss of a small linear-regression SGD run, after every step (length steps + 1).

    Data: y = x . w_true + noise * N(0, 1), x ~ N(0, I). From step `bug_step` on, each training
    batch comes from a corrupted shard: its labels are shuffled within the batch, so they no
    longer depend on x and the weights drift away from w_true. The held-out set is clean.
    Deterministic for a given seed.
    """
    steps = count("steps", steps)
    if bug_step is not None:
        bug_step = count("bug_step", bug_step, minimum=0)
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=dim)
    x_val = rng.normal(size=(256, dim))
    y_val = x_val @ w_true + noise * rng.normal(size=256)
    w = np.zeros(dim)
    val = [float(np.mean((x_val @ w - y_val) ** 2))]
    for t in range(steps):
        xb = rng.normal(size=(batch, dim))
        yb = xb @ w_true + noise * rng.normal(size=batch)
        if bug_step is not None and t >= bug_step:
            yb = rng.permutation(yb)
        w -= lr * 2.0 / batch * xb.T @ (xb @ w - yb)
        val.append(float(np.mean((x_val @ w - y_val) ** 2)))
    return np.array(val)


def first_step_detected(val_losses, eval_every, tolerance=0.25):
    """First evaluation step at which the held-out loss exceeds the best value seen at earlier
    evaluations by more than a factor (1 + tolerance); None when that never happens.

    `val_losses[s]` is the held-out loss after s steps; evaluations happen at steps
    0, eval_every, 2 eval_every, ... (those < len(val_losses)). A validation run every k steps
    detects a bug up to k steps late: the cadence bounds the damage.
    """
    eval_every = count("eval_every", eval_every)
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
    vals = np.asarray(val_losses, dtype=float)
    if vals.ndim != 1 or vals.size == 0:
        raise ValueError("val_losses must be a non-empty 1-D sequence")
    best = math.inf
    for s in range(0, vals.size, eval_every):
        if vals[s] > best * (1 + tolerance):
            return s
        best = min(best, vals[s])
    return None


# ---------------------------------------------------------------- locality-sensitive hashing


def _signature_matrix(signatures, bands, rows):
    bands = count("bands", bands)
    rows = count("rows", rows)
    sigs = [np.asarray(s) for s in signatures]
    for k, s in enumerate(sigs):
        if s.ndim != 1 or s.size != bands * rows:
            raise ValueError(f"signature {k} must be 1-D of length bands * rows = {bands * rows}, got shape {s.shape}")
    return sigs, bands, rows


def lsh_candidate_pairs(signatures, bands, rows):
    """Candidate pairs of MinHash LSH banding: the sorted list of pairs (i, j), i < j, whose
    signatures agree on all `rows` values of at least one of the `bands` bands.

    Each signature (length bands * rows) is cut into `bands` consecutive bands of `rows`
    values; every band goes into a bucket keyed by (band index, its values); the pairs inside
    each bucket are the candidates. Work grows with the number of signatures and of candidate
    pairs, not with all n (n - 1) / 2 pairs (Broder 1997; Leskovec, Rajaraman & Ullman,
    "Mining of Massive Datasets", ch. 3.4).
    """
    sigs, bands, rows = _signature_matrix(signatures, bands, rows)
    buckets = {}
    for i, s in enumerate(sigs):
        for band in range(bands):
            key = (band, tuple(int(v) for v in s[band * rows:(band + 1) * rows]))
            buckets.setdefault(key, []).append(i)
    pairs = set()
    for members in buckets.values():
        for a in range(len(members)):
            for b in range(a + 1, len(members)):
                pairs.add((members[a], members[b]))
    return sorted(pairs)


def lsh_candidate_probability(s, bands, rows):
    """Probability that a pair with Jaccard similarity s becomes a candidate under banding:
    1 - (1 - s^rows)^bands (each band agrees with probability s^rows, bands independently).
    Works elementwise on arrays."""
    bands = count("bands", bands)
    rows = count("rows", rows)
    s_arr = np.asarray(s, dtype=float)
    if not np.all((s_arr >= 0) & (s_arr <= 1)):
        raise ValueError(f"s must lie in [0, 1], got {s!r}")
    p = 1.0 - (1.0 - s_arr ** rows) ** bands
    return float(p) if p.ndim == 0 else p


def lsh_threshold(bands, rows):
    """The similarity where the S-curve 1 - (1 - s^r)^b rises steepest, about (1/b)^(1/r)."""
    return (1.0 / count("bands", bands)) ** (1.0 / count("rows", rows))


def choose_bands(num_perm, threshold):
    """The (bands, rows) with bands * rows = num_perm whose threshold (1/bands)^(1/rows) is
    closest to `threshold` (ties: the larger number of rows)."""
    num_perm = count("num_perm", num_perm)
    fraction("threshold", threshold, open_low=True)
    best = None
    for b in range(1, num_perm + 1):
        if num_perm % b == 0:
            r = num_perm // b
            gap = abs(lsh_threshold(b, r) - threshold)
            if best is None or gap < best[0]:
                best = (gap, b, r)
    return best[1], best[2]


# ---------------------------------------------------------------- quality filtering

#: the words of the Gopher stop-word rule (Rae et al. 2021, appendix A.1.1)
STOP_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})

#: the rule names of `quality_flags`, in order
QUALITY_RULES = ("word_count", "mean_word_length", "symbol_ratio", "ellipsis_lines", "alphabetic_words",
                 "stop_words", "duplicate_lines", "curly_brace")


def quality_flags(text):
    """Heuristic quality rules in the style of Gopher's MassiveWeb filters (Rae et al. 2021,
    "Scaling Language Models: Methods, Analysis & Insights from Training Gopher", appendix A.1.1)
    and C4 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
    Text-to-Text Transformer", section 2.2). Returns {rule: bool}, True where the rule flags the
    text as low quality.

    words = text.split(); lines = the stripped non-empty lines of text.splitlines(); n = len(words).
    - word_count: n < 20 or n > 100_000
    - mean_word_length: n == 0, or the mean of len(w) over words is < 3 or > 10
    - symbol_ratio: n == 0, or (text.count("#") + text.count("...") + text.count("…")) / n > 0.1
    - ellipsis_lines: more than 30% of lines end with "..." or "…" (False without lines)
    - alphabetic_words: n == 0, or fewer than 80% of words contain an alphabetic character
      (str.isalpha on some character)
    - stop_words: fewer than 2 words, counted with repeats, are in STOP_WORDS after
      w.strip(string.punctuation).lower()
    - duplicate_lines: more than 30% of lines are equal to an earlier line (False without lines)
    - curly_brace: the text contains "{" or "}" (C4's rule against code)
    """
    import string

    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    words = text.split()
    n = len(words)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    mean_len = sum(len(w) for w in words) / n if n else 0.0
    symbols = text.count("#") + text.count("...") + text.count("\u2026")
    ell = sum(ln.endswith(("...", "\u2026")) for ln in lines) / len(lines) if lines else 0.0
    alpha = sum(any(c.isalpha() for c in w) for w in words) / n if n else 0.0
    stops = sum(w.strip(string.punctuation).lower() in STOP_WORDS for w in words)
    seen, dup = set(), 0
    for ln in lines:
        dup += ln in seen
        seen.add(ln)
    return {
        "word_count": n < 20 or n > 100_000,
        "mean_word_length": n == 0 or not 3 <= mean_len <= 10,
        "symbol_ratio": n == 0 or symbols / n > 0.1,
        "ellipsis_lines": ell > 0.3,
        "alphabetic_words": n == 0 or alpha < 0.8,
        "stop_words": stops < 2,
        "duplicate_lines": (dup / len(lines) if lines else 0.0) > 0.3,
        "curly_brace": "{" in text or "}" in text,
    }


def filter_corpus(texts):
    """Indices (ascending) of the texts that no rule of `quality_flags` flags."""
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise ValueError("texts must be a sequence of str")
    return [i for i, t in enumerate(texts) if not any(quality_flags(t).values())]


def ngram_overlap(train_text, eval_text, n=13):
    """Fraction of the distinct word n-grams of `eval_text` (normalised as `normalise_text`)
    that also occur in `train_text`: GPT-3's contamination test flags an evaluation example
    that shares any 13-gram with the training data (Brown et al. 2020, appendix C). 0.0 when
    the eval text has fewer than n words."""
    n = count("n", n)
    if not isinstance(train_text, str) or not isinstance(eval_text, str):
        raise ValueError("train_text and eval_text must be str")

    def grams(t):
        w = normalise_text(t).split()
        return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}

    ev = grams(eval_text)
    if not ev:
        return 0.0
    return len(ev & grams(train_text)) / len(ev)


# ---------------------------------------------------------------- exact-substring deduplication


def _token_docs(docs):
    """`docs` as a list of lists of Python ints, after checking every token is an integer >= 0
    (Python or numpy integers; not bool, not float, not str)."""
    out = []
    for d, doc in enumerate(docs):
        if isinstance(doc, (str, bytes)):
            raise ValueError(f"document {d} must be a sequence of token ids, got {type(doc).__name__}")
        toks = []
        for p, t in enumerate(doc):
            if isinstance(t, (bool, np.bool_)) or not isinstance(t, (Integral, np.integer)) or t < 0:
                raise ValueError(f"token {p} of document {d} must be an integer >= 0, got {t!r}")
            toks.append(int(t))
        out.append(toks)
    return out


def repeated_spans(docs, k=50):
    """Exact-substring deduplication (Lee et al. 2022, "Deduplicating Training Data Makes
    Language Models Better", ExactSubstr): the token spans covered by a substring of at least
    `k` tokens that occurs at least twice in the corpus (in another document, or elsewhere in
    the same one, overlapping occurrences included), never across a document boundary.

    Returns the sorted list of maximal runs of covered positions as (doc, start, end) tuples of
    ints, end exclusive. A substring of length >= k repeats iff each of its k-token windows
    repeats, so the covered positions are the union of the repeated k-token windows. They are
    found as Lee et al. find them, with a suffix array: the suffixes sorted, a window repeats iff
    its suffix shares a prefix of >= k tokens (LCP >= k) with a neighbour in the sorted order.
    Only LCP >= k matters, so sorting the suffixes by their first k tokens is enough. Each
    document is closed by a separator token of its own (-1 - doc), which no other position holds,
    so no common prefix runs across a boundary. Deterministic: no hash() anywhere.
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (Integral, np.integer)) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    k = int(k)
    docs = _token_docs(docs)
    stream, owner = [], []
    for d, doc in enumerate(docs):
        stream += doc + [-1 - d]
        owner += [(d, s) for s in range(len(doc) + 1)]
    # the suffixes whose first k tokens lie inside one document, sorted by those k tokens
    starts = [i for i in range(len(stream)) if owner[i][1] + k <= len(docs[owner[i][0]])]
    starts.sort(key=lambda i: stream[i:i + k])
    repeated = set()
    for a, b in zip(starts, starts[1:]):
        if stream[a:a + k] == stream[b:b + k]:      # LCP of the neighbours >= k
            repeated.update((a, b))
    spans = []
    for i in sorted(repeated):
        d, s = owner[i]
        if spans and spans[-1][0] == d and s <= spans[-1][2]:
            spans[-1][2] = s + k                      # overlapping or touching: one run
        else:
            spans.append([d, s, s + k])
    return [tuple(x) for x in spans]


def drop_spans(docs, spans):
    """The documents with every position covered by a (doc, start, end) span removed (end
    exclusive; spans may overlap and come in any order): one list of ints per document, empty
    when everything went. Lee et al. strike every copy of a repeated substring this way."""
    docs = [[int(t) for t in doc] for doc in docs]
    drop = [bytearray(len(doc)) for doc in docs]
    for d, s, e in spans:
        d, s, e = int(d), int(s), int(e)
        if not (0 <= d < len(docs) and 0 <= s <= e <= len(docs[d])):
            raise ValueError(f"span {(d, s, e)} lies outside the documents")
        drop[d][s:e] = b"\x01" * (e - s)
    return [[t for t, x in zip(doc, mask) if not x] for doc, mask in zip(docs, drop)]
