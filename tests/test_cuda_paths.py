"""The GPU paths of the training script and the memory lab (skipped without CUDA), and the
CPU-side checks of what they rely on.

On one GPU: NCCL with world size 1 (the launcher's default backend when CUDA has a GPU per
rank), bit-exact resume with the CUDA RNG state, GradScaler on CUDA, peak CUDA memory in the
result, gloo ranks started after the caller used CUDA and ran backward (spawned by the
training script, forked by a notebook-style `launch`), and the CUDA allocator path of
`estimate_memory_consumption` / `activation_benchmark`. Measured numbers: docs/gpu_measurements_2026-11.md.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from solutions_lib import memory as M
from solutions_lib.checkpointing import set_rng_state
from solutions_lib.dist import launch
from solutions_lib.dist.gpt import GPT
from solutions_lib.dist.train import TrainConfig, _rank_rng_state, parse_args, train
from solutions_lib.models import CheckpointedTransformer

ROOT = Path(__file__).resolve().parents[1]
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
TINY = dict(steps=40, base_batch=8, local_batch=8, seq_len=32, layers=2, d_model=32, heads=2, max_chars=6000,
            warmup=5, lr=3e-3, progress=False, threads=1, return_params=True, timeout=180.0)


# ---------------------------------------------------------------- CPU side


def test_cpu_rank_rng_state_never_touches_cuda(monkeypatch):
    """A gloo rank forked from a parent that used CUDA must not call into CUDA: the CPU
    model's RNG snapshot holds python, numpy and torch CPU streams only."""
    def boom(*a, **k):
        raise RuntimeError("Cannot re-initialize CUDA in forked subprocess")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", boom)
    model = GPT(vocab=5, seq_len=4, layers=1, d_model=8, heads=2)
    state = _rank_rng_state(model)
    assert set(state) == {"python", "numpy", "torch"}
    a = torch.rand(3)
    set_rng_state(state)
    assert torch.equal(torch.rand(3), a), "restoring the snapshot must replay the CPU stream"


def test_deterministic_flag():
    assert TrainConfig().deterministic is True and parse_args([]).deterministic is True
    assert parse_args(["--no-deterministic"]).deterministic is False
    with pytest.raises(ValueError, match="deterministic"):
        TrainConfig(deterministic="yes").validate()


def test_a_forked_rank_sees_no_gpu(monkeypatch):
    """On a GPU machine a forked gloo rank must not call into CUDA (the parent's driver state
    does not survive fork; torch's optimizers probe CUDA in every step): it sees none."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # inherited by fork, then hidden

    def cell(rank, world_size):
        import torch.distributed as dist
        p = torch.nn.Parameter(torch.ones(2))
        p.grad = torch.full((2,), float(rank))
        dist.all_reduce(p.grad)
        torch.optim.AdamW([p], lr=0.1).step()
        return torch.cuda.is_available(), p.detach().tolist()

    out = launch(cell, 2)
    assert [o[0] for o in out] == [False, False] and out[0][1] == out[1][1]


def test_train_spawns_its_ranks_on_a_gpu_machine(monkeypatch, tmp_path):
    import importlib
    L = importlib.import_module("solutions_lib.dist.launch")  # the module (the package exports the function)
    T = importlib.import_module("solutions_lib.dist.train")
    seen = {}

    def fake_launch(fn, world_size, **kw):
        seen.update(kw, fn=fn)
        return [{"rank": r} for r in range(world_size)]
    monkeypatch.setattr(L, "launch", fake_launch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    train(TrainConfig(world_size=2, out=str(tmp_path)))
    assert seen["start_method"] == "spawn" and seen["fn"] is T._rank_main
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    train(TrainConfig(world_size=2, out=str(tmp_path)))
    assert seen["start_method"] is None  # fork on a CPU machine, as before


# ---------------------------------------------------------------- GPU


def _cfg(tmp, name, **kw):
    return TrainConfig(out=str(tmp / name), **{**TINY, **kw})


@needs_cuda
@pytest.mark.parametrize("amp", ["none", "bf16", "fp16"])
def test_nccl_one_rank_resume_is_bit_exact(tmp_path, amp):
    kw = dict(backend="nccl", amp=amp)
    straight = train(_cfg(tmp_path, "a", **kw))
    first = train(_cfg(tmp_path, "b", stop_after=20, **kw))
    second = train(_cfg(tmp_path, "b", resume=True, **kw))
    assert second["start_step"] == 20
    assert straight["losses"] == first["losses"] + second["losses"], f"{amp}: resumed losses differ"
    for name, p in straight["params"].items():
        assert torch.equal(p, second["params"][name]), f"{amp}: parameter {name} differs after resume"
    assert straight["peak_cuda_bytes"] > 0
    assert straight["losses"][-1] < straight["losses"][0] - 0.5, "the tiny model did not learn"


@needs_cuda
def test_gloo_ranks_after_the_parent_used_cuda(tmp_path):
    """On a GPU machine, after the caller used CUDA and ran backward passes (a notebook that used
    the GPU, say): the training script's gloo ranks (spawned there) train, and a forked rank
    (a notebook-cell function) can step an optimizer: it sees no GPU instead of failing."""
    code = ("import sys, torch, torch.distributed as dist\n"
            "x = torch.ones(3, device='cuda', requires_grad=True); (x * 2).sum().backward()\n"
            "w = torch.ones(3, requires_grad=True); (w * 2).sum().backward()\n"
            "from solutions_lib.dist import launch\n"
            "from solutions_lib.dist.train import TrainConfig, train\n"
            "r = train(TrainConfig(world_size=2, local_batch=4, backend='gloo', steps=6, warmup=1, seq_len=16,"
            " d_model=16, heads=2, layers=1, max_chars=3000, progress=False, threads=1, out=sys.argv[1]))\n"
            "print('final', r['final_loss'])\n"
            "def cell(rank, world_size):\n"
            "    p = torch.nn.Parameter(torch.ones(4)); p.grad = torch.full((4,), float(rank))\n"
            "    dist.all_reduce(p.grad); torch.optim.AdamW([p], lr=0.1).step()\n"
            "    return torch.cuda.is_available(), p.detach().tolist()\n"
            "print('cell', launch(cell, 2))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "g")], capture_output=True, text=True,
                       timeout=180, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "final" in p.stdout and "cell [(False, [0.899" in p.stdout, p.stdout


@needs_cuda
def test_estimate_memory_consumption_cuda_matches_cpu():
    model = CheckpointedTransformer(vocab=64, hidden=64, heads=4, layers=3, max_seq=32)
    batch = model.example_batch(4, 32)
    cpu = M.estimate_memory_consumption(model, batch)
    gpu = M.estimate_memory_consumption(model.cuda(), batch.cuda())
    assert cpu.peak_bytes is None and gpu.peak_bytes is not None
    for f in ("parameter_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes"):
        assert getattr(gpu, f) == getattr(cpu, f), f
    assert gpu.activation_bytes == model.saved_bytes(4, 32, checkpointing=False)
    assert gpu.peak_bytes >= gpu.activation_bytes


@needs_cuda
def test_cuda_peak_of_the_first_estimate_excludes_cublas_workspace():
    """In a fresh process the first matmul allocates cuBLAS's workspace; it is not the model's."""
    code = ("import torch\n"
            "from solutions_lib import memory as M\n"
            "from solutions_lib.models import CheckpointedTransformer\n"
            "m = CheckpointedTransformer(vocab=64, hidden=64, heads=4, layers=3, max_seq=32).cuda()\n"
            "e = M.estimate_memory_consumption(m, m.example_batch(4, 32).cuda())\n"
            "print(e.peak_bytes, e.activation_bytes + e.gradient_bytes)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    peak, act_grad = map(int, p.stdout.split())
    assert 0 < peak <= 3 * act_grad, (peak, act_grad)  # 70 MB before the warm-up, for 2.5 MB of work


@needs_cuda
def test_activation_benchmark_on_cuda():
    rows = M.activation_benchmark(M.DEFAULT_BENCH_CONFIGS, device="cuda")
    cpu = M.activation_benchmark(M.DEFAULT_BENCH_CONFIGS, device="cpu")
    for r, c in zip(rows, cpu):
        assert r["device"] == "cuda" and abs(r["rel_error"]) <= 0.10, r
        assert r["measured_bytes"] == c["measured_bytes"], r["config"]
        assert r["cuda_forward_bytes"] > 0
