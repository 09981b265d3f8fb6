"""The lab kit's launcher and collective counter on 2 gloo ranks."""
from __future__ import annotations

import multiprocessing as mp
import os
import time

import pytest
import torch
import torch.distributed as dist

from solutions_lib.dist import CommCounter, LaunchError, launch


def _sum_of_ranks(rank, world_size, n):
    x = torch.full((n,), float(rank + 1))
    dist.all_reduce(x)
    return rank, world_size, x.tolist(), os.getpid()


def test_results_come_back_by_rank():
    out = launch(_sum_of_ranks, 2, args=(3,))
    assert [o[:3] for o in out] == [(0, 2, [3.0] * 3), (1, 2, [3.0] * 3)]
    assert out[0][3] != out[1][3] != os.getpid()
    assert not mp.active_children()


def test_a_local_closure_runs_like_a_notebook_function():
    scale = 10.0

    def work(rank, world_size):
        t = torch.tensor([scale * rank])
        dist.all_reduce(t)
        return t.item()

    assert launch(work, 2) == [10.0, 10.0]


def _tensor_result(rank, world_size):
    t = torch.arange(4.0) * (rank + 1)
    dist.all_reduce(t)
    return {"t": t, "rank": rank}


def test_tensors_come_back_by_value():
    out = launch(_tensor_result, 2)
    assert [o["rank"] for o in out] == [0, 1]
    assert all(torch.equal(o["t"], torch.arange(4.0) * 3) for o in out)


def _raise_on_rank_one(rank, world_size):
    if rank == 1:
        raise ValueError("planted failure on rank one")
    dist.barrier()


def test_a_rank_that_raises_fails_the_run_with_its_traceback():
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match=r"(?s)rank 1 failed.*planted failure on rank one"):
        launch(_raise_on_rank_one, 2, collective_timeout=10)
    assert time.monotonic() - t0 < 5
    assert not mp.active_children()


def _exit_on_rank_zero(rank, world_size):
    if rank == 0:
        os._exit(7)
    dist.barrier()


def test_a_rank_that_dies_fails_the_run():
    with pytest.raises(LaunchError, match="rank 0 died without a result: exit code 7"):
        launch(_exit_on_rank_zero, 2, collective_timeout=10)


def _hang_rank_zero(rank, world_size, pid_dir):
    (pid_dir / f"{rank}.pid").write_text(str(os.getpid()))
    if rank == 0:
        time.sleep(600)
    dist.all_reduce(torch.ones(4))


def test_a_hung_collective_times_out_and_leaves_no_process(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match=r"(?s)rank 1 failed.*[Tt]imed out"):
        launch(_hang_rank_zero, 2, args=(tmp_path,), collective_timeout=2)
    assert time.monotonic() - t0 < 10
    time.sleep(0.2)
    for f in tmp_path.glob("*.pid"):
        with pytest.raises(ProcessLookupError):
            os.kill(int(f.read_text()), 0)


def _spin(rank, world_size):
    while True:
        pass


def test_the_run_time_limit_kills_an_endless_loop():
    t0 = time.monotonic()
    with pytest.raises(LaunchError, match="exceeded its 2 s limit"):
        launch(_spin, 2, timeout=2)
    assert time.monotonic() - t0 < 6
    assert not mp.active_children()


@pytest.mark.parametrize("kwargs, reason", [
    (dict(world_size=0), "world_size"),
    (dict(world_size=2, backend="mpi"), "backend"),
    (dict(world_size=2, timeout=0), "timeout"),
])
def test_bad_arguments_raise_value_error(kwargs, reason):
    with pytest.raises(ValueError, match=reason):
        launch(_sum_of_ranks, **kwargs)


def _count(rank, world_size):
    x = torch.ones(10)                       # 40 bytes
    full = torch.ones(4 * world_size)        # the unsharded buffer for RS / AG
    shard = torch.empty(4)
    with CommCounter() as comm:
        dist.all_reduce(x)
        dist.all_reduce(x)
        dist.reduce_scatter_tensor(shard, full)
        dist.all_gather_into_tensor(full, shard)   # deprecated alias of all_gather_single
        dist.broadcast(x, src=0)
    after = CommCounter()
    dist.all_reduce(x)                        # outside the block: not counted
    return comm.summary(), dict(after.calls), dist.all_reduce is dist.distributed_c10d.all_reduce


def test_comm_counter_counts_calls_and_full_buffer_bytes():
    summary, after, restored = launch(_count, 2)[0]
    assert summary == {"all_reduce": (2, 80), "reduce_scatter_tensor": (1, 32),
                       "all_gather_into_tensor": (1, 32), "broadcast": (1, 40)}
    assert after == {} and restored


def _count_p2p(rank, world_size):
    peer = 1 - rank
    a, b = torch.full((6,), float(rank)), torch.empty(6)        # 24 bytes each
    with CommCounter() as comm:
        reqs = [dist.isend(a, peer), dist.irecv(b, peer)]
        for r in reqs:
            r.wait()
        got_isend = float(b[0])
        ops = [dist.P2POp(dist.isend, a, peer), dist.P2POp(dist.irecv, b, peer)]
        for r in dist.batch_isend_irecv(ops):
            r.wait()
        if rank == 0:
            dist.send(a, 1)
        else:
            dist.recv(b, 0)
    return comm.summary(), got_isend


def test_comm_counter_counts_point_to_point():
    """isend/irecv and batch_isend_irecv (pipeline and ring-attention code) are counted too,
    each batched P2POp once, not again through the isend/irecv it calls."""
    out = launch(_count_p2p, 2)
    s0, s1 = out[0][0], out[1][0]
    assert s0 == {"isend": (1, 24), "irecv": (1, 24), "batch_isend_irecv": (1, 48), "send": (1, 24)}
    assert s1 == {"isend": (1, 24), "irecv": (1, 24), "batch_isend_irecv": (1, 48), "recv": (1, 24)}
    assert out[0][1] == 1.0 and out[1][1] == 0.0


def test_a_rank_stuck_in_start_up_is_retried_once(tmp_path, monkeypatch):
    real_init = dist.init_process_group
    flag = tmp_path / "stuck-once"

    def init_that_hangs_once_on_rank_one(*args, rank, **kwargs):
        if rank == 1 and not flag.exists():
            flag.write_text("hung")
            time.sleep(600)
        return real_init(*args, rank=rank, **kwargs)

    monkeypatch.setattr(dist, "init_process_group", init_that_hangs_once_on_rank_one)  # inherited by fork
    t0 = time.monotonic()
    assert [o[:3] for o in launch(_sum_of_ranks, 2, args=(2,), collective_timeout=2)] == \
        [(0, 2, [3.0, 3.0]), (1, 2, [3.0, 3.0])]
    assert flag.exists() and time.monotonic() - t0 < 15
    flag.unlink()
    with pytest.raises(LaunchError, match="could not form a process group"):
        launch(_sum_of_ranks, 2, args=(2,), collective_timeout=2, rendezvous_retries=0)


def test_a_run_whose_every_rank_is_stuck_in_start_up_is_retried(tmp_path, monkeypatch):
    """With no peer to time out (one rank, or every rank stuck before its process group forms),
    the run is started afresh after the start-up limit instead of waiting out its whole timeout
    (CI, session 36: a world-1 run hung 120 s with no report of where)."""
    import sys
    launch_module = sys.modules["solutions_lib.dist.launch"]   # the package re-exports launch() under the same name
    real_init = dist.init_process_group
    flag = tmp_path / "stuck-once"

    def init_that_hangs_once(*args, **kwargs):
        if not flag.exists():
            flag.write_text("hung")
            time.sleep(600)
        return real_init(*args, **kwargs)

    monkeypatch.setattr(dist, "init_process_group", init_that_hangs_once)  # inherited by fork
    monkeypatch.setattr(launch_module, "_STARTUP_LIMIT", 2.0)
    t0 = time.monotonic()
    assert [o[:3] for o in launch(_sum_of_ranks, 1, args=(1,), collective_timeout=1)] == [(0, 1, [1.0])]
    assert flag.exists() and time.monotonic() - t0 < 15
    flag.unlink()
    with pytest.raises(LaunchError, match=r"ranks \[0\] had not started the function .*start-up"):
        launch(_sum_of_ranks, 1, args=(1,), collective_timeout=1, rendezvous_retries=0)


def _threads_after_a_parallel_op(rank, world_size):
    a = torch.randn(512, 512)
    (a @ a).exp().sum()
    return torch.get_num_threads()


def test_a_forked_rank_computes_after_the_parent_used_openmp_threads():
    """The CI failure of sessions 36 and 37: a one-rank run (cores // 1 = 2 threads) hung in its
    first matmul because the parent pytest worker had computed with 2 OpenMP threads before the
    fork. Forked ranks now default to one intra-op thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = torch.randn(2000, 2000)
        (x @ x).exp_().sum()            # the parent's OpenMP pool is now live
        assert launch(_threads_after_a_parallel_op, 1, timeout=60) == [1]
    finally:
        torch.set_num_threads(before)


def _grades_on_ranks(rank, world_size, fail_on):
    from solutions_lib.grading import expect_equal
    expect_equal(rank == fail_on, False, f"check on rank {rank}")
    return rank


def test_launch_graded_reports_a_rank_check_as_a_grading_error():
    from solutions_lib.dist import launch_graded
    from solutions_lib.grading import GradingError
    assert launch_graded(_grades_on_ranks, 2, args=(-1,)) == [0, 1]
    with pytest.raises(GradingError, match=r"^rank 1: check on rank 1: expected False, got True"):
        launch_graded(_grades_on_ranks, 2, args=(1,))


def test_comm_counter_skips_ops_this_torch_lacks(monkeypatch):
    """torch 2.11 has no c10d.reduce_scatter_single (seen on the GPU machine): the counter must
    still work, counting the operations that exist."""
    import torch.distributed.distributed_c10d as c10d

    from solutions_lib.dist.counting import CommCounter

    monkeypatch.delattr(c10d, "reduce_scatter_single", raising=False)
    with CommCounter() as cc:
        pass
    assert cc.summary() == {}


def _first_backward_with_grad(rank, world):
    import sys

    preloaded = "torch.fx.experimental.symbolic_shapes" in sys.modules
    y = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    y.backward(torch.ones_like(y))      # torch imports symbolic_shapes (and sympy) here if not yet
    return preloaded


def test_forked_ranks_inherit_the_lazy_import_of_a_first_backward_with_a_gradient():
    # A first `y.backward(grad)` imports torch.fx.experimental.symbolic_shapes (0.3-0.5 s); a
    # pipeline stage's peer then waits that long for a message. The launcher imports it once in
    # the parent, so no forked rank pays it.
    res = launch(_first_backward_with_grad, 2)
    assert res == [True, True]


def test_the_backend_can_be_pinned_by_the_environment(monkeypatch):
    from solutions_lib.dist.launch import default_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setenv("TAS_LAB_BACKEND", "")
    assert default_backend(2) == "nccl" and default_backend(16) == "gloo"
    monkeypatch.setenv("TAS_LAB_BACKEND", "gloo")
    assert default_backend(2) == "gloo"
    monkeypatch.setenv("TAS_LAB_BACKEND", "mpi")
    with pytest.raises(ValueError, match="TAS_LAB_BACKEND"):
        default_backend(2)
