# loses: ngram_overlap_tests
# why: divides by the train text's n-grams instead of the eval text's
def ngram_overlap(train_text, eval_text, n=13):
    def grams(text):
        w = re.sub(r"[^\w\s]", " ", text.lower()).split()
        return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}
    ev, tr = grams(eval_text), grams(train_text)
    return len(ev & tr) / len(tr) if ev and tr else 0.0
