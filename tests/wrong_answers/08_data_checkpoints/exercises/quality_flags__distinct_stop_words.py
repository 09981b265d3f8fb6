# loses: quality_flags_tests
# why: counts distinct stop words instead of stop words with repeats
def quality_flags(text):
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    words = text.split()
    n = len(words)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    mean_len = sum(len(w) for w in words) / n if n else 0.0
    symbols = text.count("#") + text.count("...") + text.count("…")
    ellipsis = sum(ln.endswith(("...", "…")) for ln in lines) / len(lines) if lines else 0.0
    alphabetic = sum(any(c.isalpha() for c in w) for w in words) / n if n else 0.0
    stops = len({w.strip(string.punctuation).lower() for w in words} & {"the", "be", "to", "of", "and", "that", "have", "with"})
    repeated = (len(lines) - len(set(lines))) / len(lines) if lines else 0.0
    return {
        "word_count": n < 20 or n > 100_000,
        "mean_word_length": n == 0 or not 3 <= mean_len <= 10,
        "symbol_ratio": n == 0 or symbols / n > 0.1,
        "ellipsis_lines": ellipsis > 0.3,
        "alphabetic_words": n == 0 or alphabetic < 0.8,
        "stop_words": stops < 2,
        "duplicate_lines": repeated > 0.3,
        "curly_brace": "{" in text or "}" in text,
    }
