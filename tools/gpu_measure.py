"""Measure and check the GPU paths of the training script and the memory lab on one CUDA GPU.

    PYTHONPATH=. python tools/gpu_measure.py --parts env,pytest,plain,torchrun,memory,large --out OUTDIR

Each part runs in its own child process (a hang or crash loses one part, not the call) and
adds its numbers to OUTDIR/results.json; everything printed goes to OUTDIR/log.txt too.
Parts:
  env       GPU, driver, torch, pytest
  fork      evidence for the fork bug: checkpointing.rng_state() in a gloo child forked after
            the parent initialised CUDA
  pytest    the test files with CUDA/NCCL/launcher paths (conftest-free: nbformat is not needed)
  plain     `train()` through the lab launcher (NCCL, world size 1): default small GPT, fp32 /
            bf16 / fp16, 300 steps straight vs 150 + resume 150 (losses ==, parameters equal);
            the same with --no-deterministic twice (run-to-run equality, speed)
  torchrun  `torchrun --standalone --nproc_per_node=1 -m solutions_lib.dist.train`: same checks
            through the CLI (metrics.jsonl losses, final DCP checkpoints tensor by tensor)
  memory    estimate_memory_consumption CPU vs CUDA; `python -m solutions_lib bench memory`
  large     a GPU-sized GPT (d_model 1024, 16 layers, seq 1024, batch 16) in bf16 / fp16 / fp32
  mfu       that GPT in bf16: eager vs --compile, deterministic or not, batch 16 and 32
  attention the Triton FlashAttention-2 kernels: correctness vs SDPA, a launch-config sweep, 1k-16k times
  tritonlab the lab's student-level Triton kernels (solutions_lib.triton_kernels.bench_triton) vs torch
  clock     time_dp_step's regions on a GPU with and without torch.cuda.synchronize, vs CUDA events
GPU_MEASURE_SMALL=1 shrinks everything (gloo, tiny models) so the script can be checked on a
CPU machine first; GPU_MEASURE_TESTS="a.py b.py" picks the pytest part's files.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEAK_BF16 = 989.4e12   # H100 SXM dense bf16/fp16 tensor core peak, FLOP/s
PEAK_TF32 = 494.7e12   # H100 SXM dense tf32 tensor core peak, FLOP/s
PEAK_FP32 = 66.9e12    # H100 SXM fp32 (CUDA cores, no tensor cores), FLOP/s
SMALL = dict(steps=300, stop=150)
LARGE = dict(d_model=1024, layers=16, heads=8, seq_len=1024, local_batch=16, base_batch=16, lr=6e-4)


def _small_cpu() -> bool:
    return os.environ.get("GPU_MEASURE_SMALL") == "1"


def _flops_per_token(cfg, vocab):
    import torch

    from solutions_lib.compute import palm_flops_per_token
    from solutions_lib.dist.gpt import GPT, non_embedding_params
    with torch.device("meta"):
        m = GPT(vocab, cfg.seq_len, cfg.layers, cfg.d_model, cfg.heads)
    n = non_embedding_params(m)
    return n, 6.0 * n, palm_flops_per_token(n, cfg.layers, cfg.heads, cfg.d_model // cfg.heads, cfg.seq_len)


def _summ(cfg, r, vocab):
    """The numbers of one straight run."""
    n, f6, fpalm = _flops_per_token(cfg, vocab)
    tps = r["tokens_per_s"]
    tokens_per_step = cfg.global_batch * cfg.seq_len
    total_tokens = tokens_per_step * len(r["steps"])
    out = {"amp": cfg.amp, "deterministic": cfg.deterministic, "steps": len(r["steps"]),
           "d_model": cfg.d_model, "layers": cfg.layers, "heads": cfg.heads, "seq_len": cfg.seq_len,
           "global_batch": cfg.global_batch, "tokens_per_step": tokens_per_step,
           "n_params": r["n_params"], "n_non_embedding": n,
           "median_tokens_per_s": tps, "median_step_ms": 1e3 * tokens_per_step / tps,
           "wall_s": r["wall_s"], "wall_tokens_per_s": total_tokens / r["wall_s"],
           "peak_cuda_MiB": (r.get("peak_cuda_bytes") or 0) / 2**20,
           "final_loss": r["final_loss"], "final_loss_avg5": r["final_loss_avg5"],
           "flops_per_token_6N": f6, "flops_per_token_palm": fpalm,
           "tflops_palm": tps * fpalm / 1e12,
           "mfu_palm_vs_bf16_peak": tps * fpalm / PEAK_BF16,
           "mfu_6N_vs_bf16_peak": tps * f6 / PEAK_BF16}
    if cfg.amp == "none":
        out["mfu_palm_vs_tf32_peak"] = tps * fpalm / PEAK_TF32
        out["mfu_palm_vs_fp32_peak"] = tps * fpalm / PEAK_FP32
    return out


def _equal_runs(a, b_first, b_second=None):
    """(losses ==, every parameter torch.equal) of run a vs run b (or b_first + b_second)."""
    import torch
    losses = b_first["losses"] + (b_second["losses"] if b_second else [])
    last = b_second or b_first
    same_loss = a["losses"] == losses
    first_diff = next((i for i, (x, y) in enumerate(zip(a["losses"], losses)) if x != y), None)
    params = all(torch.equal(p, last["params"][k]) for k, p in a["params"].items())
    maxdiff = max(float((p.float() - last["params"][k].float()).abs().max()) for k, p in a["params"].items())
    return {"losses_equal": same_loss, "first_differing_step": first_diff, "params_equal": params,
            "max_abs_param_diff": maxdiff}


# ---------------------------------------------------------------- parts (run in a child)


def part_env(res, tmp):
    import torch
    for cmd in (["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit",
                 "--format=csv"], ["nvidia-smi", "topo", "-m"]):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            print(p.stdout + p.stderr)
        except OSError as e:
            print(f"{cmd[0]}: {e}")
    res["torch"] = torch.__version__
    res["cuda"] = torch.version.cuda
    res["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
    res["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    res["python"] = sys.version.split()[0]
    res["tf32_matmul_default"] = torch.backends.cuda.matmul.allow_tf32
    try:
        import pytest
        res["pytest"] = pytest.__version__
    except ImportError:
        res["pytest"] = None
    for mod in ("matplotlib", "numpy", "xdist", "pytest_timeout", "nbformat"):
        try:
            __import__(mod)
            res[f"has_{mod}"] = True
        except ImportError:
            res[f"has_{mod}"] = False
    print(json.dumps(res, indent=1))


def part_fork(res, tmp):
    """Old behaviour, shown directly: the CUDA RNG snapshot in a forked child of a CUDA parent."""
    import multiprocessing as mp

    import torch

    from solutions_lib.checkpointing import rng_state
    torch.zeros(1, device="cuda")  # the parent initialises CUDA (a notebook that used the GPU)

    def child(q):
        try:
            rng_state()
            q.put("ok")
        except Exception as e:  # noqa: BLE001
            q.put(f"{type(e).__name__}: {e}".splitlines()[0])
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    p.join(60)
    res["checkpointing.rng_state_in_forked_child_after_cuda_init"] = q.get(timeout=5)
    print(res)


def part_pytest(res, tmp):
    files = ["tests/test_cuda_paths.py", "tests/test_dist_train.py", "tests/test_memory.py",
             "tests/test_checkpointing.py"]
    files = os.environ.get("GPU_MEASURE_TESTS", "").split() or files
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "-rs",
           "-n", os.environ.get("GPU_MEASURE_WORKERS", "8"), "--dist", "load", "--durations", "20", *files]
    t = time.perf_counter()
    log = Path(os.environ["GPU_MEASURE_OUT"], "pytest.txt")
    with open(log, "w") as f:  # streamed: a part killed at its budget still leaves what ran
        p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, text=True, cwd=ROOT, timeout=420)
    res["pytest_rc"] = p.returncode
    res["pytest_s"] = time.perf_counter() - t
    text = log.read_text()
    res["pytest_tail"] = text.strip().splitlines()[-1] if text.strip() else ""
    print(text[-6000:])


def part_plain(res, tmp):
    from solutions_lib.dist.train import CharCorpus, TrainConfig, default_corpus_text, train
    vocab = CharCorpus(default_corpus_text()).vocab
    steps, stop = SMALL["steps"], SMALL["stop"]
    backend = None
    if _small_cpu():
        steps, stop, backend = 30, 15, "gloo"
    rows = []
    for amp in ("none", "bf16", "fp16"):
        peak = PEAK_TF32 if amp == "none" else PEAK_BF16
        base = TrainConfig(steps=steps, amp=amp, progress=False, return_params=True, peak_flops=peak,
                           timeout=300.0, backend=backend)
        t0 = time.perf_counter()
        a = train(base, out=str(tmp / f"p_{amp}_a"))
        t_straight = time.perf_counter() - t0
        b1 = train(base, out=str(tmp / f"p_{amp}_b"), stop_after=stop)
        b2 = train(base, out=str(tmp / f"p_{amp}_b"), resume=True)
        row = _summ(base, a, vocab)
        row["launcher_wall_s"] = t_straight
        row["script_mfu"] = a.get("mfu")
        row["resume"] = _equal_runs(a, b1, b2)
        row["resume_start_step"] = b2["start_step"]
        # the same without deterministic algorithms, twice: run-to-run equality and speed
        nd = dataclasses.replace(base, deterministic=False)
        c = train(nd, out=str(tmp / f"p_{amp}_c"))
        d = train(nd, out=str(tmp / f"p_{amp}_d"))
        row["nondet"] = _summ(nd, c, vocab)
        row["nondet_run_to_run"] = _equal_runs(c, d)
        row["nondet_vs_det"] = _equal_runs(a, c)
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    res["plain"] = rows


def _torchrun(args, out):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
           "-m", "solutions_lib.dist.train", *args, "--out", str(out), "--no-progress"]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t
    print("$ torchrun ... " + " ".join(args) + f"  [rc {p.returncode}, {wall:.1f} s]")
    print(p.stdout[-1500:])
    if p.returncode:
        print(p.stderr[-4000:])
        raise RuntimeError(f"torchrun failed rc={p.returncode}")
    losses = [json.loads(ln)["loss"] for ln in (out / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    done = [ln for ln in p.stdout.splitlines() if ln.startswith("done:")]
    head = [ln for ln in p.stdout.splitlines() if ln.startswith("world ")]
    return {"losses": losses, "done": done[-1] if done else None, "head": head[-1] if head else None,
            "wall_s": wall}


def _ckpt_tensors(ckdir):
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    from solutions_lib.dist.train import latest_checkpoint
    path = latest_checkpoint(ckdir)
    f = Path(tempfile.mkdtemp()) / "ck.pt"
    dcp_to_torch_save(str(path), str(f))
    sd = torch.load(f, weights_only=False)

    def flat(d, prefix=""):
        for k, v in d.items():
            if isinstance(v, dict):
                yield from flat(v, f"{prefix}{k}.")
            elif isinstance(v, torch.Tensor):
                yield f"{prefix}{k}", v
    return path.name, dict(flat(sd))


def part_torchrun(res, tmp):
    import torch
    steps, stop = SMALL["steps"], SMALL["stop"]
    extra = []
    if _small_cpu():
        steps, stop, extra = 30, 15, ["--backend", "gloo"]
    rows = []
    for amp in ("none", "bf16", "fp16"):
        peak = PEAK_TF32 if amp == "none" else PEAK_BF16
        common = ["--steps", str(steps), "--amp", amp, "--peak-flops", str(peak), *extra]
        a = _torchrun(common, tmp / f"t_{amp}_a")
        b1 = _torchrun(common + ["--stop-after", str(stop)], tmp / f"t_{amp}_b")
        b2 = _torchrun(common + ["--resume"], tmp / f"t_{amp}_b")
        na, ta = _ckpt_tensors(tmp / f"t_{amp}_a" / "checkpoints")
        nb, tb = _ckpt_tensors(tmp / f"t_{amp}_b" / "checkpoints")
        same = sorted(ta) == sorted(tb) and all(torch.equal(ta[k], tb[k]) for k in ta)
        row = {"amp": amp, "straight_done": a["done"], "head": a["head"], "resumed_done": b2["done"],
               "losses_equal": a["losses"] == b2["losses"], "n_losses": len(a["losses"]),
               "checkpoints": [na, nb], "checkpoint_tensors_equal": same, "n_tensors": len(ta),
               "wall_s": a["wall_s"]}
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    res["torchrun"] = rows


def part_memory(res, tmp):
    import torch

    from solutions_lib import memory as M
    from solutions_lib.models import CheckpointedTransformer
    dev = "cuda" if torch.cuda.is_available() and not _small_cpu() else "cpu"
    rows = []
    cfgs = [dict(hidden=64, heads=4, layers=3, max_seq=32, batch=4, ckpt=False),
            dict(hidden=64, heads=4, layers=4, max_seq=48, batch=2, ckpt=True, every=2),
            dict(hidden=512, heads=8, layers=4, max_seq=256, batch=8, ckpt=False),
            dict(hidden=512, heads=8, layers=4, max_seq=256, batch=8, ckpt=True, every=1)]
    for c in cfgs:
        model = CheckpointedTransformer(vocab=64, hidden=c["hidden"], heads=c["heads"], layers=c["layers"],
                                        max_seq=c["max_seq"], checkpoint_every=c.get("every", 1))
        batch = model.example_batch(c["batch"], c["max_seq"])
        cpu = M.estimate_memory_consumption(model, batch, checkpointing=c["ckpt"])
        gpu = M.estimate_memory_consumption(model.to(dev), batch.to(dev), checkpointing=c["ckpt"])
        row = {"config": c, "cpu": cpu.as_dict(), "cuda": gpu.as_dict(),
               "formula_saved_bytes": model.saved_bytes(c["batch"], c["max_seq"], checkpointing=c["ckpt"]),
               "fields_equal": all(getattr(cpu, f) == getattr(gpu, f) for f in
                                   ("parameter_bytes", "gradient_bytes", "optimizer_bytes", "activation_bytes"))}
        rows.append(row)
        print(json.dumps(row), flush=True)
    res["estimate_memory_consumption"] = rows
    p = subprocess.run([sys.executable, "-m", "solutions_lib", "bench", "memory"], capture_output=True, text=True,
                       cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    res["bench_memory_rc"] = p.returncode
    res["bench_memory"] = p.stdout
    print(p.stdout + p.stderr[-3000:])


def part_large(res, tmp):
    """GPU-sized runs; bf16 twice with and twice without deterministic algorithms (run-to-run equality)."""
    from solutions_lib.dist.train import CharCorpus, TrainConfig, default_corpus_text, train
    vocab = CharCorpus(default_corpus_text()).vocab
    big = dict(LARGE)
    runs = [("bf16", True, 120), ("bf16", True, 120), ("bf16", False, 120), ("bf16", False, 120),
            ("fp16", True, 80), ("none", True, 30)]
    backend = None
    if _small_cpu():
        big.update(d_model=64, layers=2, heads=2, seq_len=64, local_batch=4, base_batch=4)
        runs = [(a, d, 12) for a, d, _ in runs]
        backend = "gloo"
    rows, losses = [], {}
    for amp, det, steps in runs:
        peak = PEAK_TF32 if amp == "none" else PEAK_BF16
        cfg = TrainConfig(steps=steps, warmup=min(20, steps // 4), amp=amp, deterministic=det, progress=False,
                          peak_flops=peak, timeout=400.0, backend=backend, **big)
        try:
            r = train(cfg, out=str(tmp / f"l_{amp}_{det}_{len(rows)}"))
        except Exception as e:  # noqa: BLE001
            print(f"large {amp} det={det}: {type(e).__name__}: {str(e)[-3000:]}", flush=True)
            rows.append({"amp": amp, "deterministic": det, "error": f"{type(e).__name__}: {str(e)[-600:]}"})
            continue
        row = _summ(cfg, r, vocab)
        row["first_loss"] = r["losses"][0]
        key = (amp, det)
        if key in losses:
            prev = losses[key]
            row["same_losses_as_previous_identical_run"] = prev == r["losses"]
            row["first_differing_step"] = next((i for i, (x, y) in enumerate(zip(prev, r["losses"])) if x != y), None)
            row["max_abs_loss_diff"] = max(abs(x - y) for x, y in zip(prev, r["losses"]))
        losses[key] = r["losses"]
        rows.append(row)
        print(json.dumps(row, indent=1), flush=True)
    res["large"] = rows


def part_mfu(res, tmp):
    """The 203M model in bf16: eager vs --compile, deterministic or not, and a larger batch (issue 29's
    MFU goal, >= 40%). Runs of 60 steps; the median step excludes the first (compilation)."""
    from solutions_lib.dist.train import CharCorpus, TrainConfig, default_corpus_text, train
    vocab = CharCorpus(default_corpus_text()).vocab
    big = dict(LARGE)
    runs = [(False, False, 16, 40), (False, True, 16, 50), (True, True, 16, 50), (False, True, 32, 30)]
    if os.environ.get("GPU_MEASURE_MFU_RUNS"):  # "det,compile,batch,steps;..." with det/compile as 0/1
        runs = [(bool(int(a)), bool(int(b)), int(c), int(d))
                for a, b, c, d in (r.split(",") for r in os.environ["GPU_MEASURE_MFU_RUNS"].split(";"))]
    backend = None
    if _small_cpu():
        big.update(d_model=64, layers=2, heads=2, seq_len=64, base_batch=4)
        runs = [(d, c, 4, 6) for d, c, _, _ in runs][:2]
        backend = "gloo"
    rows = []
    for det, comp, batch, steps in runs:
        cfg = TrainConfig(steps=steps, warmup=min(20, steps // 4), amp="bf16", deterministic=det, compile=comp,
                          progress=False, peak_flops=PEAK_BF16, timeout=500.0, backend=backend,
                          **dict(big, local_batch=batch))
        t0 = time.time()
        try:
            r = train(cfg, out=str(tmp / f"m_{det}_{comp}_{batch}"))
        except Exception as e:  # noqa: BLE001
            print(f"mfu det={det} compile={comp} batch={batch}: {type(e).__name__}: {str(e)[-3000:]}", flush=True)
            rows.append({"deterministic": det, "compile": comp, "local_batch": batch, "error": str(e)[-600:]})
            continue
        row = dict(_summ(cfg, r, vocab), compile=comp, local_batch=batch, total_s=time.time() - t0)
        rows.append(row)
        print(f"MFU det={det} compile={comp} batch={batch}: step {row['median_step_ms']:.1f} ms, "
              f"{row['median_tokens_per_s']:,.0f} tok/s, MFU {100 * row['mfu_palm_vs_bf16_peak']:.1f}%, "
              f"peak {row['peak_cuda_MiB']:.0f} MiB, final loss {row['final_loss']:.4f}, {row['total_s']:.0f} s",
              flush=True)
    res["mfu"] = rows


def part_attention(res, tmp):
    """The Triton FlashAttention-2 kernels: correctness vs SDPA, a launch-config sweep per kernel at
    4k and 16k (causal bf16, batch 1, 8 heads, d 64), then the 1k-16k sweep with the best configs."""
    import torch
    import torch.nn.functional as F
    from solutions_lib import attention as A
    from solutions_lib import attention_triton as T
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    small = _small_cpu()
    out = {"correctness": [], "tune": {}, "sweep": []}
    for dt in (torch.float16, torch.bfloat16):
        for shape in ((2, 4, 256, 64), (1, 3, 1000, 64), (1, 2, 77, 128)) if not small else ((1, 1, 40, 16),):
            for causal in (False, True):
                g = torch.Generator().manual_seed(0)
                q, k, v, do = (torch.randn(*shape, generator=g).to(dev, dt) for _ in range(4))
                o, lse = T.flash_attention_forward(q, k, v, causal)
                grads = T.flash_attention_backward(q, k, v, o, lse, do, causal)
                qs, ks, vs = (t.float().requires_grad_() for t in (q, k, v))
                ref = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
                refs = (ref, *torch.autograd.grad(ref, (qs, ks, vs), do.float()))
                qs, ks, vs = (t.clone().requires_grad_() for t in (q, k, v))
                low = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
                lows = (low, *torch.autograd.grad(low, (qs, ks, vs), do))
                err = [float((a.float() - b.detach()).abs().max()) for a, b in zip((o, *grads), refs)]
                yard = [float((a.detach().float() - b.detach()).abs().max()) for a, b in zip(lows, refs)]
                row = {"dtype": str(dt), "shape": shape, "causal": causal, "triton": err, "sdpa_low": yard,
                       "ok": all(e <= 2 * y + 2e-3 for e, y in zip(err, yard))}
                out["correctness"].append(row)
                print(f"correct {row['dtype']:>15} {shape} causal={causal}: triton {['%.1e' % e for e in err]} "
                      f"sdpa-low {['%.1e' % e for e in yard]} {'ok' if row['ok'] else 'CHECK'}", flush=True)
    if dev != "cuda":
        res["attention"] = out
        return
    from triton.testing import do_bench
    cands = {"fwd": [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3), (128, 32, 4, 4),
                     (128, 64, 8, 4), (128, 128, 8, 2), (256, 64, 8, 3)],
             "dkdv": [(64, 128, 8, 3), (32, 128, 4, 3), (64, 64, 4, 3), (32, 64, 4, 4), (64, 128, 4, 2),
                      (128, 128, 8, 2), (64, 128, 8, 2)],
             "dq": [(128, 64, 8, 3), (128, 32, 4, 3), (64, 64, 4, 3), (128, 64, 4, 2), (64, 32, 4, 4),
                    (128, 128, 8, 2)]}
    best = dict(T.CONFIGS_16)
    if os.environ.get("GPU_MEASURE_TUNE") == "near":  # around the configs the first sweep chose
        cands = {"fwd": [(64, 64, 4, 3), (64, 64, 4, 4), (64, 128, 4, 3), (128, 64, 8, 4), (64, 64, 8, 3)],
                 "dkdv": [(64, 64, 4, 3), (64, 64, 4, 4), (64, 64, 8, 3), (128, 64, 8, 3), (64, 32, 4, 3),
                          (32, 64, 4, 3)],
                 "dq": [(64, 64, 4, 3), (64, 64, 4, 4), (64, 64, 8, 3), (64, 128, 4, 3), (32, 64, 4, 3),
                        (64, 32, 4, 3)]}
    tune_at = {"0": (), "near": (16384,)}.get(os.environ.get("GPU_MEASURE_TUNE", ""), (4096, 16384))
    for s in tune_at:
        g = torch.Generator().manual_seed(1)
        q, k, v, do = (torch.randn(1, 8, s, 64, generator=g).to(dev, torch.bfloat16) for _ in range(4))
        o, lse = T.flash_attention_forward(q, k, v, True)
        for kern in ("fwd", "dkdv", "dq"):
            times = {}
            for c in cands[kern]:
                T.CONFIGS_16.update(best)
                T.CONFIGS_16[kern] = c
                fn = ((lambda: T.flash_attention_forward(q, k, v, True)) if kern == "fwd"
                      else (lambda: T.flash_attention_backward(q, k, v, o, lse, do, True)))
                try:
                    times[c] = do_bench(fn, warmup=10, rep=40)
                except Exception as e:  # noqa: BLE001 - a config that does not fit (shared memory)
                    times[c] = float("inf")
                    print(f"tune {kern} {c}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            out["tune"][f"{kern}@{s}"] = {str(c): t for c, t in times.items()}
            if s == 16384:
                best[kern] = min(times, key=times.get)
            print(f"tune s={s} {kern}: " + ", ".join(f"{c}: {t:.3f} ms" for c, t in sorted(times.items(), key=lambda x: x[1])),
                  flush=True)
        sd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        print(f"sdpa fwd s={s}: {do_bench(sd, warmup=10, rep=40):.3f} ms", flush=True)
    T.CONFIGS_16.update(best)
    out["best"] = {k: list(c) for k, c in best.items()}
    print(f"best configs: {best}", flush=True)
    for s in (1024, 2048, 4096, 8192, 16384):
        g = torch.Generator().manual_seed(2)
        q, k, v, do = (torch.randn(1, 8, s, 64, generator=g).to(dev, torch.bfloat16).requires_grad_() for _ in range(4))
        def fb_sdpa():
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.autograd.grad(y, (q, k, v), do)
        def fb_tri():
            y = A.FlashAttention2.apply(q, k, v, True, None, "triton")
            torch.autograd.grad(y, (q, k, v), do)
        def f_tri():
            T.flash_attention_forward(q, k, v, True)
        def f_sdpa():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
        def graph_ms(fn):  # GPU time alone: the pass captured in a CUDA graph and replayed
            try:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(3):
                        fn()
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    fn()
                return do_bench(graph.replay, warmup=5, rep=50)
            except Exception as e:  # noqa: BLE001
                print(f"graph capture failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
                return float("nan")
        r = {"seq": s, "sdpa_fb_graph_ms": graph_ms(fb_sdpa), "triton_fb_graph_ms": graph_ms(fb_tri),
             "sdpa_fb_ms": do_bench(fb_sdpa, warmup=10, rep=50), "triton_fb_ms": do_bench(fb_tri, warmup=10, rep=50),
             "sdpa_f_ms": do_bench(f_sdpa, warmup=10, rep=50), "triton_f_ms": do_bench(f_tri, warmup=10, rep=50)}
        r["speed_vs_sdpa_fb"] = r["sdpa_fb_ms"] / r["triton_fb_ms"]
        r["speed_vs_sdpa_f"] = r["sdpa_f_ms"] / r["triton_f_ms"]
        out["sweep"].append(r)
        print(f"sweep s={s}: fwd+bwd sdpa {r['sdpa_fb_ms']:.3f} ms, triton {r['triton_fb_ms']:.3f} ms "
              f"({r['speed_vs_sdpa_fb']:.2f}x SDPA's speed); fwd sdpa {r['sdpa_f_ms']:.3f}, triton {r['triton_f_ms']:.3f} "
              f"({r['speed_vs_sdpa_f']:.2f}x); CUDA graph fwd+bwd sdpa {r['sdpa_fb_graph_ms']:.3f}, triton "
              f"{r['triton_fb_graph_ms']:.3f} ({r['sdpa_fb_graph_ms'] / r['triton_fb_graph_ms']:.2f}x)", flush=True)
    res["attention"] = out


def part_tritonlab(res, tmp):
    """The Triton kernels of the course's lab (solutions_lib.triton_kernels.bench_triton), timed against torch."""
    import importlib
    try:
        mod = importlib.import_module("solutions_lib.triton_kernels")
    except ImportError as e:
        print(f"tritonlab: {e}", flush=True)
        res["tritonlab"] = {"error": str(e)}
        return
    lines = []
    ok = mod.bench_triton(out=lambda *a: (lines.append(" ".join(map(str, a))), print(*a, flush=True)))
    res["tritonlab"] = {"ok": ok, "lines": lines}


def _clock_rank(rank, world, hiddens, tokens, repeats):
    """In a rank (NCCL on a GPU): the DP step timed three ways. `async`: the clock read right after
    backward / all_reduce return (what a CPU-only harness does); `sync`: torch.cuda.synchronize()
    before every read; `events`: CUDA events around the same regions. Plus the library's
    time_dp_step and time_tp_mlp, which synchronise."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from solutions_lib.dist.comm_bound import dp_layer, time_dp_step, time_tp_mlp, tp_shards
    dev = torch.device("cuda", rank) if torch.cuda.is_available() else torch.device("cpu")
    cuda = dev.type == "cuda"

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    rows = []
    for h in hiddens:
        net = dp_layer(h).to(dev)
        params = list(net.parameters())
        for t in tokens:
            x = torch.randn(t, h, device=dev)
            res = {"h": h, "tokens": t, "P": sum(p.numel() for p in params)}
            for mode in ("async", "sync", "events"):
                comp, comm = [], []
                for step in range(repeats + 1):
                    for p in params:
                        p.grad = None
                    dist.barrier()
                    sync()
                    if mode == "events" and cuda:
                        e = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
                        e[0].record()
                        net(x).square().mean().backward()
                        e[1].record()
                        flat = torch.cat([p.grad.reshape(-1) for p in params])
                        dist.barrier()
                        e[2].record()
                        dist.all_reduce(flat)
                        e[3].record()
                        sync()
                        c, m = e[0].elapsed_time(e[1]) / 1e3, e[2].elapsed_time(e[3]) / 1e3
                    else:
                        t0 = time.perf_counter()
                        net(x).square().mean().backward()
                        if mode == "sync":
                            sync()
                        t1 = time.perf_counter()
                        flat = torch.cat([p.grad.reshape(-1) for p in params])
                        dist.barrier()
                        if mode == "sync":
                            sync()
                        t2 = time.perf_counter()
                        dist.all_reduce(flat)
                        if mode == "sync":
                            sync()
                        t3 = time.perf_counter()
                        c, m = t1 - t0, t3 - t2
                    sync()
                    if step:
                        comp.append(c)
                        comm.append(m)
                res[mode] = (float(np.median(comp)), float(np.median(comm)))
            lib = time_dp_step(net, x, repeats)
            res["library"] = (float(lib[0]), float(lib[1]))
            res["flop_rate_sync"] = 6 * res["P"] * t / res["sync"][0]
            rows.append(res)
    tp = []
    for h in hiddens:
        w1, w2, _, _ = tp_shards(h, rank, world)
        w1 = w1.detach().to(dev).requires_grad_(True)
        w2 = w2.detach().to(dev).requires_grad_(True)
        x = torch.randn(tokens[-1], h, device=dev).requires_grad_(True)
        c, m, _ = time_tp_mlp(w1, w2, x, repeats)
        tp.append({"h": h, "tokens": tokens[-1], "library": (float(c), float(m))})
    return {"dp": rows, "tp": tp}


def part_clock(res, tmp):
    """Why a timing harness waits for the device: time_dp_step's regions read with and without
    torch.cuda.synchronize, against CUDA events (NCCL, world 1: the all-reduce is a local copy)."""
    from solutions_lib.dist import launch
    small = _small_cpu()
    hiddens = (64, 128) if small else (256, 1024, 4096)
    tokens = (8, 64) if small else (8, 512, 8192)
    out = launch(_clock_rank, 1, args=(hiddens, tokens, 3 if small else 9),
                 backend="gloo" if small else "nccl", timeout=400.0, collective_timeout=120.0)[0]
    for r in out["dp"]:
        line = (f"clock DP h={r['h']:>5} T={r['tokens']:>5} P={r['P']:>11,}: compute async {r['async'][0] * 1e3:8.3f} ms"
                f" sync {r['sync'][0] * 1e3:8.3f} ms events {r['events'][0] * 1e3:8.3f} ms library {r['library'][0] * 1e3:8.3f} ms;"
                f" all-reduce async {r['async'][1] * 1e3:7.3f} sync {r['sync'][1] * 1e3:7.3f} events {r['events'][1] * 1e3:7.3f}"
                f" library {r['library'][1] * 1e3:7.3f} ms; {r['flop_rate_sync'] / 1e12:6.1f} TFLOP/s (sync)")
        print(line, flush=True)
    for r in out["tp"]:
        print(f"clock TP h={r['h']:>5} T={r['tokens']}: library compute {r['library'][0] * 1e3:8.3f} ms, "
              f"all-reduces {r['library'][1] * 1e3:7.3f} ms", flush=True)
    res["clock"] = out


PARTS = {"env": part_env, "fork": part_fork, "pytest": part_pytest, "plain": part_plain,
         "torchrun": part_torchrun, "memory": part_memory, "large": part_large, "mfu": part_mfu,
         "attention": part_attention, "tritonlab": part_tritonlab,
         "clock": part_clock}
BUDGET = {"env": 60, "fork": 60, "pytest": 450, "plain": 420, "torchrun": 360, "memory": 240, "large": 400, "mfu": 330, "attention": 240,
          "tritonlab": 180, "clock": 240}


def _child(name, result_file):
    res = {}
    with tempfile.TemporaryDirectory(prefix=f"gm_{name}_") as tmp:
        try:
            PARTS[name](res, Path(tmp))
            res["ok"] = True
        except BaseException as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            res["ok"] = False
            res["error"] = f"{type(e).__name__}: {e}"
    Path(result_file).write_text(json.dumps(res, indent=1, default=str))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parts", default="env,fork,pytest,plain,torchrun,memory,large")
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_out"))
    ap.add_argument("--deadline", type=float, default=570.0, help="seconds: skip parts that cannot fit")
    ap.add_argument("--child")
    ap.add_argument("--result-file")
    a = ap.parse_args()
    if a.child:
        return _child(a.child, a.result_file)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["GPU_MEASURE_OUT"] = str(out)
    log = open(out / "log.txt", "a")
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    t_start = time.monotonic()
    for name in a.parts.split(","):
        left = a.deadline - (time.monotonic() - t_start)
        if left < 30:
            msg = f"=== {name}: skipped, {left:.0f} s left"
            print(msg, flush=True)
            log.write(msg + "\n")
            results[name] = {"ok": False, "error": "skipped: out of time"}
            continue
        rf = out / f".{name}.json"
        msg = f"=== {name} (budget {min(BUDGET[name], left):.0f} s)"
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()
        t = time.monotonic()
        try:
            p = subprocess.Popen([sys.executable, __file__, "--child", name, "--result-file", str(rf)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1",
                                      "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
                                 start_new_session=False)
            deadline = time.monotonic() + min(BUDGET[name], left)
            import selectors
            sel = selectors.DefaultSelector()
            sel.register(p.stdout, selectors.EVENT_READ)
            while True:
                if time.monotonic() > deadline:
                    p.kill()
                    raise TimeoutError(f"part {name} ran past its budget")
                if sel.select(timeout=1.0):
                    line = p.stdout.readline()
                    if not line:
                        break
                    sys.stdout.write(line)
                    log.write(line)
                    log.flush()
                elif p.poll() is not None:
                    rest = p.stdout.read()
                    sys.stdout.write(rest)
                    log.write(rest)
                    break
            p.wait(30)
            results[name] = json.loads(rf.read_text()) if rf.exists() else {"ok": False, "error": f"rc {p.returncode}"}
            rf.unlink(missing_ok=True)
        except Exception as e:  # noqa: BLE001
            results[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        results[name]["part_s"] = time.monotonic() - t
        msg = f"=== {name}: ok={results[name].get('ok')} in {results[name]['part_s']:.0f} s {results[name].get('error', '')}"
        print(msg, flush=True)
        log.write(msg + "\n")
        results_path.write_text(json.dumps(results, indent=1, default=str))
    log.close()
    print("SUMMARY " + json.dumps({k: (v.get("ok"), round(v.get("part_s", 0))) for k, v in results.items()}))


if __name__ == "__main__":
    sys.exit(main())
