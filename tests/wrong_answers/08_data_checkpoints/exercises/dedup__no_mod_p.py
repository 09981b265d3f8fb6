# loses: minhash_tests
# why: (a x + b) without mod p is increasing in x: every hash function picks the same shingle
def normalise(text):
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def exact_duplicates(texts):
    seen, dups = set(), []
    for i, t in enumerate(texts):
        h = hashlib.sha256(normalise(t).encode()).hexdigest()
        if h in seen:
            dups.append(i)
        seen.add(h)
    return dups


def minhash_signature(shingle_set, num_perm=128, seed=0):
    p = (1 << 31) - 1
    g = np.random.default_rng(seed)
    a = g.integers(1, p, size=num_perm, dtype=np.int64)
    b = g.integers(0, p, size=num_perm, dtype=np.int64)
    x = np.array([int(hashlib.md5(" ".join(s).encode()).hexdigest(), 16) % p for s in shingle_set], dtype=np.int64)
    return (a[:, None] * x[None, :] + b[:, None]).min(axis=1)


def near_duplicate_pairs(texts, threshold=0.5, n=3, num_perm=128):
    sigs = [minhash_signature(shingles(t, n), num_perm) for t in texts]
    return [(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts))
            if np.mean(sigs[i] == sigs[j]) >= threshold]
