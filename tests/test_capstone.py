"""Assignment 13 (capstone): the reference trainer against one process, bit-exact resume, the
quick checks that decide which pieces a test cell swaps in, and the theory's projection
arithmetic against closed forms."""
import math

import pytest
import torch

from solutions_lib import capstone as C
from solutions_lib import upstream
from solutions_lib.dist import probes_capstone as P

GPT3 = dict(layers=96, hidden=12288, heads=96, seq_len=2048, global_batch=1536, micro_batch=1)
CLUSTER = dict(n_gpus=1024, gpus_per_node=8, flops=989e12, memory=80e9, intra=(5e-6, 450e9), inter=(1e-5, 50e9))


def test_reference_trainer_matches_one_process_and_resumes():
    assert C.bench_capstone(out=lambda *a: None)


def test_piece_checks_accept_the_course_copies_and_catch_slips():
    ns = dict(P.COURSE_PIECES)
    assert P.piece_checks(ns) == {}

    def no_average(params, group=None):      # sums instead of averaging
        import torch.distributed as dist
        for p in params:
            dist.all_reduce(p.grad, group=group)

    ns["average_gradients"] = no_average
    del ns["TPBlock"]
    swaps = P.piece_checks(ns)
    assert set(swaps) == {"average_gradients", "TPBlock"}


def test_project_run_closed_form():
    lay = dict(dp=16, tp=8, pp=8, cp=1, zero=1, sp=True)
    got = C.project_run(lay, GPT3, CLUSTER, 300e9)
    st = upstream.layout_step_time(lay, GPT3, CLUSTER)
    tokens = 1536 * 2048
    assert got["step_time"] == pytest.approx(st["total"], rel=1e-12)
    assert got["tokens_per_second"] == pytest.approx(tokens / st["total"], rel=1e-12)
    # MFU from its definition: 6 N FLOPs per token (N = 12 h^2 L) over the cluster's peak
    n = 12 * 12288 ** 2 * 96
    assert got["mfu"] == pytest.approx(6 * n * tokens / (st["total"] * 1024 * 989e12), rel=1e-9)
    assert got["days"] == pytest.approx(300e9 / tokens * st["total"] / 86400, rel=1e-12)
    assert got["fits"] == (upstream.layout_memory_per_rank(lay, GPT3)["total"] <= 80e9)
    with pytest.raises(ValueError):
        C.project_run(lay, GPT3, CLUSTER, 0)


def test_calibrate_projection():
    big = dict(compute=10.0, tp=1.0, pp=0.5, dp=0.5, bubble=2.0, total=14.0)
    small = dict(compute=1.0, communication=0.5, bubble=0.25)
    meas = dict(compute=2.0, communication=0.25, bubble=0.5)
    got = C.calibrate_projection(big, small, meas)
    assert got == pytest.approx(dict(compute=20.0, communication=1.0, bubble=4.0, total=25.0))
    with pytest.raises(ValueError):
        C.calibrate_projection(big, dict(small, bubble=0.0), meas)
    with pytest.raises(ValueError):
        C.calibrate_projection(big, dict(compute=1.0), meas)
    assert C.calibrate_projection(dict(big, bubble=0.0), dict(small, bubble=0.0), meas)["bubble"] == 0.0
