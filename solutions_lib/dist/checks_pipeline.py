"""Test kit of 11 exercises 2 for the checks that only call the student's functions and compare
what they return (they may run grader-side, docs/GRADING.md): how an answer is read for the
comparison, the test's own exact versions of the small answers (so a later cell grades its own
answer alone), and the case generator of the merge. No expected value of a hidden case is stored
here: the test cells name their cases and compute their expected values.

    as_lists(x), as_ints(x), as_table(layout)      # an answer as plain ints, or a sentence saying why not
    exact_schedule(kind, s, p, m)                  # AFAB / 1F1B order of stage s (the tests' own)
    exact_merge(o_a, lse_a, o_b, lse_b)            # the log-sum-exp merge (the tests' own)
    exact_zigzag(seq_len, p)                       # the zig-zag layout (the tests' own)
    exact_layout(dp, tp)                           # the 2-D mesh table, TP innermost (the tests' own)
    merge_case(shape, split, seed, scale)          # two partial attention results and their union

The exact versions are the tests' oracles for OTHER cells (a pipeline stage driven by the right
order, a ring that merges right, a pair count on the right layout): an answer that calls them
instead of being built scores zero (its cell forbids this module in `no_delegation`).
"""
from __future__ import annotations

import torch

__all__ = ["as_lists", "as_ints", "as_table", "exact_schedule", "exact_merge", "exact_zigzag", "exact_layout",
           "merge_case"]


def as_lists(x):
    """`x` as a list of lists of ints (what the zig-zag tests compare), or a sentence saying why not."""
    try:
        return [[int(i) for i in ranks] for ranks in x]
    except Exception as e:  # noqa: BLE001
        return f"not a list of lists of ints ({type(e).__name__}: {e})"


def as_ints(x):
    """`x` as a list of ints (what the pair-count tests compare), or a sentence saying why not."""
    try:
        return [int(w) for w in x]
    except Exception as e:  # noqa: BLE001
        return f"not a list of ints ({type(e).__name__}: {e})"


def as_table(layout):
    """A mesh layout dict as plain lists of tuples of ints, or a sentence saying why not."""
    try:
        return {key: [tuple(int(x) for x in item) for item in layout[key]] for key in ("coords", "tp_groups", "dp_groups")}
    except Exception as e:  # noqa: BLE001
        return f"not a dict of lists of tuples of ints ({type(e).__name__}: {e})"


def exact_schedule(kind, s, p, m):
    """The tests' own AFAB / 1F1B order of stage s of p over m micro-batches."""
    if kind == "afab":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    w = min(p - s - 1, m)
    order = [("F", i) for i in range(w)]
    for j in range(m - w):
        order += [("F", w + j), ("B", j)]
    return order + [("B", i) for i in range(m - w, m)]


def exact_merge(o_a, lse_a, o_b, lse_b):
    """The tests' own merge of two partial attention results by their log-sum-exps."""
    lse = torch.logaddexp(lse_a, lse_b)
    return torch.exp(lse_a - lse).unsqueeze(-1) * o_a + torch.exp(lse_b - lse).unsqueeze(-1) * o_b, lse


def exact_zigzag(seq_len, p):
    """The tests' own zig-zag layout (ValueError unless 2p divides seq_len, both ints >= 1)."""
    if isinstance(seq_len, bool) or isinstance(p, bool) or not isinstance(seq_len, int) or not isinstance(p, int) \
            or seq_len < 1 or p < 1 or seq_len % (2 * p):
        raise ValueError(f"2p must divide seq_len (ints >= 1), got seq_len={seq_len!r}, p={p!r}")
    h = seq_len // (2 * p)
    return [list(range(r * h, (r + 1) * h)) + list(range((2 * p - 1 - r) * h, (2 * p - r) * h)) for r in range(p)]


def exact_layout(dp, tp):
    """The tests' own 2-D mesh table, TP innermost: rank = d * tp + t."""
    n = dp * tp
    return {"coords": [(r // tp, r % tp) for r in range(n)],
            "tp_groups": [tuple(range(d * tp, d * tp + tp)) for d in range(dp)],
            "dp_groups": [tuple(range(t, n, tp)) for t in range(tp)]}


def merge_case(shape, split, seed, scale=1.0):
    """Scores of rows over keys split into A = [0, split) and B = [split, keys), in one process with
    plain softmax: ((o_A, lse_A), (o_B, lse_B), (o, lse) over all keys); shape = (..., n, keys)."""
    g = torch.Generator().manual_seed(seed)
    s = scale * torch.randn(*shape[:-1], shape[-1], generator=g, dtype=torch.float64)   # (..., n, keys)
    v = torch.randn(shape[-1], 4, generator=g, dtype=torch.float64)
    part = lambda lo, hi: (torch.softmax(s[..., lo:hi], -1) @ v[lo:hi], torch.logsumexp(s[..., lo:hi], -1))  # noqa: E731
    return part(0, split), part(split, shape[-1]), part(0, shape[-1])
