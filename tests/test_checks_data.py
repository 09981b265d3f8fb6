"""The test machinery of 08 exercises (solutions_lib/checks_data.py, solutions_lib/probes_checkpoints.py
and the functions added to probes_data.py / probes_dedup.py): each check accepts a correct answer (the
course's reference) and rejects a classic wrong one with a message that names what was checked."""
from __future__ import annotations

import contextlib

import pytest
import torch

from solutions_lib import checks_data as ck
from solutions_lib import data as ref
from solutions_lib import probes_checkpoints as pc
from solutions_lib import probes_data, probes_dedup
from solutions_lib.grading import GradingError


def _fails(fn, *args, match: str, **kw):
    with pytest.raises(GradingError, match=match):
        fn(*args, **kw)


def test_packing_checks():
    ck.check_pack_worked_example(ref.pack_documents)
    ck.check_packed_equals_alone(ref.pack_documents, [[5, 6, 7], [8, 9], [10, 11, 12, 13]], 8, 0, 0)

    def causal_only(docs, T, eos):        # the classic slip: a plain causal mask across documents
        out = ref.pack_documents(docs, T, eos)
        n = out["attention_mask"].shape[-1]
        return {**out, "attention_mask": torch.tril(torch.ones(out["attention_mask"].shape[0], n, n, dtype=torch.bool))}
    _fails(ck.check_packed_equals_alone, causal_only, [[5, 6, 7], [8, 9]], 8, 0, 0, match="logits in the packed block")
    _fails(ck.check_pack_worked_example, causal_only, match="attention_mask of block 0")

    cases = ck.pack_cases(8201, 3)
    want = [ref.pack_documents(*c) for c in cases]
    ck.check_packs(cases, want, want)
    bad = [{**w, "position_ids": w["position_ids"] + 1} for w in want]
    _fails(ck.check_packs, cases, bad, want, match="position_ids")
    assert len(ck.packing_cases(8202, 2)) == 2


def test_lsh_scurve():
    from solutions_lib import upstream

    A, B = ck.jaccard_pair_sets(0, 0, 0.7)
    assert abs(len(A & B) / len(A | B) - 0.7) < 0.2
    ck.check_scurve(ref.lsh_candidate_pairs, upstream.minhash_signature, 8312, contextlib.nullcontext,
                    levels=(0.3, 0.9), n_pairs=20)
    _fails(ck.check_scurve, lambda s, b, r: [], upstream.minhash_signature, 8312, contextlib.nullcontext,
           levels=(0.9,), n_pairs=20, match="candidate rate")


def test_ngram_checks():
    ck.check_ngram_visible(ref.ngram_overlap)
    _fails(ck.check_ngram_visible, lambda tr, ev, n=13: 1.0, match="unrelated words")
    assert all(len(c) == 3 for c in ck.ngram_cases(8323, 4))


def test_quality_and_filter_inputs():
    probes_data.check_quality_flags_visible(ref.quality_flags)
    _fails(probes_data.check_quality_flags_visible, lambda t: dict.fromkeys(probes_data.QUALITY_RULES, False),
           match="quality_flags of a clean paragraph with a dict literal")
    texts = probes_data.quality_texts(8321)
    assert len(texts) == 24 + 10 + 16 + 6 and all(isinstance(t, str) for _, t in texts)
    assert len(probes_data.filter_pool(8322, "clean text", 40)) == 40


def test_dedup_inputs():
    cases = probes_dedup.jaccard_cases(8204, 5)
    assert all(0 <= J <= 1 and J == len(A & B) / len(A | B) for A, B, J in cases)
    texts, planted = probes_dedup.planted_near_duplicates(8205, 25, 5)
    assert len(texts) == 30 and all(j >= 25 for _, j in planted)


class _Async:                             # a correct one: snapshot, one background writer, errors re-raised
    def __init__(self, d, writer, swallow=False):
        self.d, self.writer, self.thread, self.error, self.swallow = d, writer, None, None, swallow

    def save(self, step, model, opt):
        import copy, os, threading
        self.wait()
        snap = {"model": {k: v.clone() for k, v in model.state_dict().items()},
                "optimizer": copy.deepcopy(opt.state_dict()), "step": step}

        def work():
            try:
                self.writer(snap, os.path.join(self.d, f"step_{step:06d}.pt"))
            except Exception as e:          # noqa: BLE001
                self.error = e
        self.thread = threading.Thread(target=work)
        self.thread.start()

    def wait(self):
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.error is not None and not self.swallow:
            e, self.error = self.error, None
            raise e

    def load(self, step, model, opt):
        import os
        obj = torch.load(os.path.join(self.d, f"step_{step:06d}.pt"), weights_only=False)
        model.load_state_dict(obj["model"])
        opt.load_state_dict(obj["optimizer"])
        return obj["step"]


class _Sync(_Async):                      # the shortcut: writes inside save(), no background thread
    def save(self, step, model, opt):
        super().save(step, model, opt)
        self.wait()


def test_async_checkpointer_checks():
    pc.check_async_snapshot(_Async, 0, n_saves=2)
    pc.check_write_error_raised(_Async)
    assert pc.saves_in_a_row(_Async, 3)[0] == 1
    _fails(pc.check_async_snapshot, _Sync, 0, match="save\\(\\) returned only after the file was written")
    _fails(pc.check_write_error_raised, lambda d, writer: _Async(d, writer, swallow=True), match="must raise from wait")
    assert [len(c) for c in pc.resume_cases(8209, 3)] == [3, 3, 3]
