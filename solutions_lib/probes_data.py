"""Test machinery for assignments 08 (data pipeline) and 09 (reading a profiler trace).

Kept out of the test cells so that each cell reads as a few lines of intent:

- `other_process_hash()`: while it is active, the builtin `hash()` of a string (bytes, or a
  tuple/frozenset holding one) returns what it could return in another Python process, one
  started with another `PYTHONHASHSEED`. A MinHash built on `hash()` then gives another
  signature for the same set and the same seed, which is exactly what breaks deduplication
  sharded over worker processes; one built on `hashlib` does not notice.
- `values_of(got, keys, what)`: read `got[k]` for each key of a dict an answer returned, after a
  check that says which keys are missing (a `GradingError` with a hint, not a bare `KeyError`).
"""
from __future__ import annotations

import builtins
import math
from contextlib import contextmanager

from .grading import GradingError, expect_equal

#: The salt `other_process_hash` mixes into every salted hash (any constant works).
OTHER_PROCESS_SALT = 0x5BD1E995


def _salted(o) -> bool:
    """True for the values whose hash Python salts per process: str and bytes, and tuples or
    frozensets that hold one (ints, floats and None hash the same in every process)."""
    if isinstance(o, (str, bytes)):
        return True
    if isinstance(o, (tuple, frozenset)):
        return any(_salted(v) for v in o)
    return False


@contextmanager
def other_process_hash(salt: int = OTHER_PROCESS_SALT):
    """Within the block, `hash(x)` of a salted value (see `_salted`) is the hash another Python
    process could give it; every other value hashes as before. Restores `builtins.hash` on exit."""
    original = builtins.hash

    def hash_in_another_process(o):
        return original((salt, o)) if _salted(o) else original(o)

    builtins.hash = hash_in_another_process
    try:
        yield
    finally:
        builtins.hash = original


def values_of(got, keys, what: str, hint: str = "") -> list:
    """`[got[k] for k in keys]`, after checking (a recorded check) that `got` is a dict holding
    every key; a missing key fails with the list of missing keys and `hint`, not a KeyError."""
    keys = list(keys)
    missing = [k for k in keys if not isinstance(got, dict) or k not in got]
    expect_equal(missing, [], f"{what}: keys missing from the returned dict",
                 hint=hint or "Return a dict with one entry per key asked for.")
    if not isinstance(got, dict):  # pragma: no cover  (expect_equal has raised)
        raise GradingError(f"{what}: expected a dict, got {type(got).__name__}")
    return [got.get(k, math.nan) for k in keys]


# ------------------------------------------------------------- 08 part 3: the quality filter's texts

#: The rule names of 08's `quality_flags`, in the order of the notebook's table.
QUALITY_RULES = ["word_count", "mean_word_length", "symbol_ratio", "ellipsis_lines", "alphabetic_words", "stop_words",
                 "duplicate_lines", "curly_brace"]


def check_quality_flags_visible(quality_flags) -> None:
    """Five texts whose flags follow from the rule table: a clean paragraph (with and without a dict
    literal), a spam page of repeated lines, symbol soup, and the empty string."""
    clean = ("The cat sat on the mat and looked at the dog with some interest.\n"
             "It was a quiet afternoon, and nothing much happened in the garden that day.")
    spam = "\n".join(["Click here to win a prize!"] * 6 + ["Offers of the day and the best deals..."] * 2)
    soup = " ".join(["#tag", "$$", "%", "@@@", "!!", "#", "..."] * 5)
    none = dict.fromkeys(QUALITY_RULES, False)
    for what, text, want in [
        ("a clean two-line paragraph", clean, none),
        ("a clean paragraph with a dict literal {}", clean + " {}", {**none, "curly_brace": True}),
        ("eight lines, six of them one repeated line", spam, {**none, "duplicate_lines": True}),
        ("35 tokens of symbol soup on one line ending in ...", soup, {**none, "mean_word_length": True, "symbol_ratio": True,
         "ellipsis_lines": True, "alphabetic_words": True, "stop_words": True}),
        ("the empty string", "", {**none, "word_count": True, "mean_word_length": True, "symbol_ratio": True,
                                  "alphabetic_words": True, "stop_words": True}),
    ]:
        got = quality_flags(text)
        print(f"{what}: flagged {[k for k in QUALITY_RULES if isinstance(got, dict) and got.get(k)]}")
        expect_equal(got, want, f"quality_flags of {what}",
                     hint="A dict with the eight rule names as keys and True where the rule flags the text.")


def quality_texts(seed: int) -> list[tuple[str, str]]:
    """(kind, text) pairs for 08's quality filter, drawn from `seed`: 24 docstrings and 10 function
    sources of six stdlib modules (real prose and real code), 16 generated texts (repeated lines,
    symbol soup, short ellipsis lines, hashtags), and six texts at the rules' thresholds."""
    import argparse
    import calendar
    import csv
    import difflib
    import enum
    import inspect
    import logging

    import numpy as np

    rng = np.random.default_rng(seed)
    docs, code = [], []
    for mod in (argparse, calendar, csv, difflib, enum, logging):
        for name, obj in sorted(vars(mod).items()):
            if inspect.isfunction(obj) or inspect.isclass(obj):
                doc = inspect.getdoc(obj)
                if doc and doc not in docs:
                    docs.append(doc)
            if inspect.isfunction(obj) and obj.__module__ == mod.__name__:
                try:
                    src = inspect.getsource(obj)
                except (OSError, TypeError):
                    continue
                if len(src.split()) <= 400 and src not in code:
                    code.append(src)
    vocab = sorted({w for d in docs for w in d.split() if w.isalpha()})
    texts = [("docstring", docs[i]) for i in rng.permutation(len(docs))[:24]]
    texts += [("code", code[i]) for i in rng.permutation(len(code))[:10]]
    for k in range(16):
        words = lambda m: " ".join(rng.choice(vocab, m))  # noqa: E731
        kind = ["repeated lines", "symbol soup", "short ellipsis lines", "hashtags"][k % 4]
        if k % 4 == 0:
            line = words(int(rng.integers(3, 9)))
            lines = [line] * int(rng.integers(2, 8)) + [words(int(rng.integers(3, 9))) for _ in range(int(rng.integers(3, 8)))]
            text = "\n".join(rng.permutation(lines))
        elif k % 4 == 1:
            text = " ".join("".join(rng.choice(list("#@$%&*!?<>=+~^|.1234"), int(rng.integers(1, 6))))
                            for _ in range(int(rng.integers(15, 60))))
        elif k % 4 == 2:
            text = "\n".join(words(int(rng.integers(1, 5))) + str(rng.choice(["...", "…", ".", ""]))
                             for _ in range(int(rng.integers(5, 25))))
        else:
            text = " ".join(("#" if rng.random() < 0.15 else "") + w for w in rng.choice(vocab, int(rng.integers(15, 60))))
        texts.append((kind, text))
    base = " ".join(["the cat"] * 10)                       # 20 words, mean length exactly 3
    texts += [("exactly 20 words", " ".join(["the", "cats"] * 10)), ("19 words", " ".join(["the", "cats"] * 9 + ["cats"])),
              ("mean word length exactly 3", base),
              ("3 of 10 lines repeated", "\n".join(["the same line"] * 4 + [f"line {i} of the text" for i in range(6)])),
              ("whitespace only", "  \n\t \n"),
              ("unicode ellipses", "\n".join(["and the story goes on…"] * 1 + [f"then the part {i}…" for i in range(3)] + ["the end"] * 1))]
    return texts


def filter_pool(seed: int, clean: str, n: int = 40) -> list[str]:
    """`n` texts for 08's `filter_corpus`, drawn from `seed`: docstrings of argparse, difflib and logging,
    and four kinds of junk (a repeated line, symbols, a short text, `clean` with a brace)."""
    import argparse
    import difflib
    import inspect
    import logging

    import numpy as np

    rng = np.random.default_rng(seed)
    pool = []
    for mod in (argparse, difflib, logging):
        for name, obj in sorted(vars(mod).items()):
            if inspect.isfunction(obj) or inspect.isclass(obj):
                doc = inspect.getdoc(obj)
                if doc and doc not in pool:
                    pool.append(doc)
    pool += ["\n".join(["buy now"] * 5), "# $ % & # ! ? " * 6, "short", clean + " {x: 1}"]
    return [pool[i] for i in rng.permutation(len(pool))[:n]]
