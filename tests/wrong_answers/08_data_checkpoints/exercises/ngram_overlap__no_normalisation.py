# loses: ngram_overlap_tests
# why: splits the raw text: case and punctuation make n-grams differ
def ngram_overlap(train_text, eval_text, n=13):
    def grams(text):
        w = text.split()
        return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}
    ev = grams(eval_text)
    return len(ev & grams(train_text)) / len(ev) if ev else 0.0
