# loses: ngram_overlap_tests
# why: counts every eval n-gram occurrence, repeats included, instead of the distinct n-grams
def ngram_overlap(train_text, eval_text, n=13):
    def grams(text):
        w = re.sub(r"[^\w\s]", " ", text.lower()).split()
        return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}
    w = re.sub(r"[^\w\s]", " ", eval_text.lower()).split()
    ev = [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]
    tr = grams(train_text)
    return sum(g in tr for g in ev) / len(ev) if ev else 0.0
