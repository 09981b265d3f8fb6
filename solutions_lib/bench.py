"""Benchmarks that print numbers: `python -m solutions_lib bench [memory] [comms]`.

memory  predicted (closed form) vs measured (saved-tensor hooks; CUDA allocator on a GPU)
        activation bytes of small transformers. Goal: every row within 10%.
comms   gloo all-reduce on 2 local ranks from 1 KiB to 64 MiB; an alpha-beta model fitted on
        the sizes up to 8 MiB predicts 16-64 MiB. Goal: within 25% above 8 MiB.
ddp     step time of torch DDP vs data parallelism by hand (one all-reduce per parameter;
        buckets launched from gradient hooks) on 2 gloo ranks, with calls and bytes per step.
        Goal: bucketed within 5% of torch DDP (median step time).
grading stock `nbgrader autograde` of one solved student vs plain nbclient execution of the
        same notebooks, with the fixed costs broken down (course/speed.py). Goal: <= 1.3x.
        Not in the default set (minutes); `--assignments 01_optimizers,03_memory` picks some,
        `--baseline` also grades with nbgrader's stock settings (before the course's speed cuts).
attention
        forward+backward time and memory of naive attention, SDPA, FlashAttention2 in PyTorch
        (tile loops) and, on CUDA with triton, the Triton kernels, causal, s = 128..16k on CUDA
        (bf16), 128..2048 on CPU (fp32; 35-60 s on 2 shared cores, so not in the default set).
        Goal: FlashAttention2 below naive attention's memory once s spans two tiles (1024 for Triton).
mutants the wrong-answer bank (tests/wrong_answers, course/mutants.py): each wrong answer in an
        otherwise solved notebook, graded with stock autograde; prints the cells each lost.
        Goal: every wrong answer loses points on the cells it names. `--assignments`, `--only
        NAME` pick some. Not in the default set (about 10 s of grading per wrong answer).
cheat   a generic cheat cell (course/cheat.py: every check replaced by one that publishes a
        passing record) added to each blank release notebook, graded with stock autograde.
        Goal (issue 26): at most 2% of any assignment's auto-graded points.
studentkit
        the student edition (course/student_kit.py): the wheel built with every assignment's
        visible values, installed in a fresh venv; every solved release notebook must pass
        `nbgrader validate` there and every blank one fail. Not in the default set (minutes).
notebooks
        every solved source notebook top to bottom in a plain kernel (course_times.py): seconds per
        notebook and its slowest cells, against 30 s each and 6 min for the course. Not in the
        default set (minutes); `--assignments` picks some.
class   the grading engine (course/engine.py): a LocalCluster of 2 workers grades 3 solved students
        of 05_communication; student-notebooks per second per worker and the projected time for
        150 students x 11 assignments on 1, 2, 4 and 8 workers. Not in the default set (minutes).
exp_roof
        07 exercises_2 D4: attention's three roofs (matmul, memory, exponentials on the SFUs) on an
        H100 SXM, and the head dims below which the exponentials bind.
gqa     07 exercises_2 Part E: Llama 2 70B's KV cache with and without grouped queries, a packed
        batch's scores against padding and a block mask, checked against SDPA.
parallel
        lab part 2 on 2-4 gloo ranks (dist/parallel_bench.py): measured pipeline bubble (AFAB,
        1F1B) and peak in-flight micro-batches, TP/SP, ring-attention and DP x TP mesh calls and
        bytes, each against its formula and one process. Goal: all equal. Not in the default set.
"""
from __future__ import annotations

import sys

MEMORY_GOAL = 0.10
COMMS_GOAL = 0.25
COMMS_FIT_MAX = 8 << 20
DDP_GOAL = 0.05


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def memory(out=print) -> bool:
    from .memory import activation_benchmark

    rows = activation_benchmark()
    out("activation memory: predicted (closed form) vs measured (bytes saved for backward)")
    out(f"{'config':<58} {'predicted':>11} {'measured':>11} {'error':>7}")
    ok = True
    for r in rows:
        c = r["config"]
        name = (f"B={c['batch']} s={c['seq_len']} h={c['hidden']} a={c['heads']} L={c['layers']}"
                + (f" ckpt every {c.get('checkpoint_every', 1)}" if c.get("checkpointing") else ""))
        ok &= abs(r["rel_error"]) <= MEMORY_GOAL
        out(f"{name:<58} {_fmt_bytes(r['predicted_bytes']):>11} {_fmt_bytes(r['measured_bytes']):>11} "
            f"{100 * r['rel_error']:>+6.1f}%")
        if "cuda_forward_bytes" in r:
            out(f"{'  (CUDA allocator after the forward)':<58} {'':>11} {_fmt_bytes(r['cuda_forward_bytes']):>11}")
    out(f"goal: |error| <= {MEMORY_GOAL:.0%} on every row -> {'met' if ok else 'NOT met'} (device: {rows[0]['device']})")
    return ok


def comms(out=print) -> bool:
    import numpy as np

    from .comms import DEFAULT_SIZES, alpha_beta_report, measure_allreduce

    sizes = np.asarray(DEFAULT_SIZES, dtype=float)
    seconds = measure_allreduce(DEFAULT_SIZES, world_size=2)
    rep = alpha_beta_report(sizes, seconds, COMMS_FIT_MAX)
    out(f"all-reduce on 2 local ranks, fitted on sizes <= {_fmt_bytes(COMMS_FIT_MAX)}: "
        f"alpha = {rep['alpha'] * 1e6:.1f} us, bandwidth = {rep['bandwidth'] / 1e9:.2f} GB/s")
    out(f"{'size':>10} {'measured':>12} {'model':>12} {'error':>8}")
    for s, t, p, e, fitted in zip(sizes, seconds, rep["predicted"], rep["rel_error"], rep["fit_mask"]):
        out(f"{_fmt_bytes(s):>10} {t * 1e3:>10.3f}ms {p * 1e3:>10.3f}ms {100 * e:>+7.1f}%"
            + ("  (fitted)" if fitted else ""))
    held_out = np.abs(rep["rel_error"][~rep["fit_mask"]])
    ok = bool(held_out.size) and float(held_out.max()) <= COMMS_GOAL
    out(f"goal: |error| <= {COMMS_GOAL:.0%} on the sizes above the fit -> {'met' if ok else 'NOT met'} "
        f"(worst {100 * float(held_out.max()):.1f}%)")
    return ok


def ddp(out=print, **config) -> bool:
    from .dist.ddp import ddp_step_benchmark

    res = ddp_step_benchmark(**config)
    rows = res["rows"]
    torch_s = next(r["median_s"] for r in rows if r["method"] == "torch_ddp")
    out(f"data-parallel step on {res['world_size']} gloo ranks, {_fmt_bytes(res['grad_bytes'])} of fp32 gradients "
        f"(median of the timed steps, rank 0)")
    out(f"{'method':<22} {'step':>10} {'fastest':>10} {'calls':>6} {'bytes/step':>11} {'vs torch':>9}")
    ok = True
    for r in rows:
        name = r["method"] + (f" cap {_fmt_bytes(r['cap_bytes'])}" if r["cap_bytes"] else "")
        calls = "-" if r["method"] == "torch_ddp" else str(r["calls"])  # torch's run in C++, unseen
        nbytes = "-" if r["method"] == "torch_ddp" else _fmt_bytes(r["bytes"])
        ratio = r["median_s"] / torch_s
        out(f"{name:<22} {r['median_s'] * 1e3:>8.1f}ms {r['min_s'] * 1e3:>8.1f}ms {calls:>6} {nbytes:>11} {ratio:>8.2f}x")
        if r["predicted_calls"] is not None and (r["calls"], r["bytes"]) != (r["predicted_calls"], r["predicted_bytes"]):
            ok = False
            out(f"  counted calls/bytes differ from the formula: {r['predicted_calls']} calls, {r['predicted_bytes']:.0f} B")
    best = min(r["median_s"] for r in rows if r["method"] == "bucketed") / torch_s
    ok &= best <= 1 + DDP_GOAL
    out(f"goal: bucketed within {DDP_GOAL:.0%} of torch DDP -> {'met' if ok else 'NOT met'} "
        f"(best bucketed/torch = {best:.3f}; a shared machine moves this by several %, run it a few times)")
    return ok


def exp_roof(out=print) -> bool:
    from .attention_roofs import bench_exp_roof

    return bench_exp_roof(out=out)


def class_(out=print) -> bool:
    from .course.engine_bench import bench_class

    return bench_class(out)


def grading(out=print, assignments=None, baseline=False) -> bool:
    from .course.speed import grading as grading_bench

    return grading_bench(assignments, out=out, baseline=baseline)


def fairness(out=print, assignments=None, sweep="both") -> bool:
    from .course.fairness import main as fairness_main

    kinds = ("warnings", "cascades") if sweep == "both" else (sweep,)
    return fairness_main(assignments, kinds, out=out)


def attention(out=print, **config) -> bool:
    from .attention import _blocks, attention_benchmark

    rows = attention_benchmark(**config)
    r0 = rows[0]
    out(f"attention forward+backward on {r0['device']} ({r0['dtype']}, causal={r0['causal']}, batch={r0['batch']}, "
        f"heads={r0['heads']}, head_dim={r0['head_dim']}; fa2_torch tiles {next((r['block_size'] for r in rows if r['block_size']), '-')}); "
        f"memory: {next((r['memory_kind'] for r in rows if 'memory_kind' in r), '-')}")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    out(f"{'seq':>6} " + " ".join(f"{m + ' ms':>14} {m + ' mem':>14}" for m in methods))
    ok = True
    for s in dict.fromkeys(r["seq_len"] for r in rows):
        cells = []
        by = {r["method"]: r for r in rows if r["seq_len"] == s}
        for m in methods:
            r = by[m]
            if "error" in r:
                cells.append(f"{r['error'][:14]:>14} {'':>14}")
            else:
                cells.append(f"{r['ms']:>14.2f} {_fmt_bytes(r['peak_bytes']):>14}")
        out(f"{s:>6} " + " ".join(cells))
        naive = by.get("naive")
        for m in ("fa2_torch", "fa2_triton"):
            fa = by.get(m)
            start = 2 * max(_blocks(fa["block_size"])) if fa and fa["block_size"] else 1024
            if fa and naive and "peak_bytes" in fa and "peak_bytes" in naive and s >= start:
                ok &= fa["peak_bytes"] < naive["peak_bytes"]
    out("goal: FlashAttention2 uses less memory than naive attention from s = 1024 (Triton) and from two "
        f"tiles per row (PyTorch tile loops) -> {'met' if ok else 'NOT met'}")
    return ok


def parallel(out=print, **config) -> bool:
    from .dist.parallel_bench import run

    return run(out=out, **config)


def mutants(out=print, assignments=None, only=None, workers=None) -> bool:
    from .course.mutants import main as mutants_main

    return mutants_main(assignments, only=only, workers=workers, out=out)


def studentkit(out=print, assignments=None, only=None) -> bool:
    from .course.student_kit import bench as kit_bench

    return kit_bench(assignments, out=out, only=only)


def cheat(out=print, assignments=None) -> bool:
    from .course.cheat import main as cheat_main

    return cheat_main(assignments, out=out)


def moe(out=print) -> bool:
    """Lab part 3: expert parallelism on gloo ranks, bytes per step, imbalance and step time vs prediction."""
    from .dist.expert_parallel import bench_moe

    return bench_moe(out=out)


def fp8(out=print) -> bool:
    """Lab part 3: FP8 casts and scalings, their errors, and the loss gap of FP8 training vs bf16."""
    from .fp8 import bench_fp8

    return bench_fp8(out=out)


def triton(out=print) -> bool:
    """Lab part 3: the Triton kernels of assignment 12 (timed against torch on CUDA; a correctness pass in
    Triton's interpreter on CPU)."""
    from .triton_kernels import bench_triton

    return bench_triton(out=out)


def published(out=print) -> bool:
    """Assignment 12 theory's calculators against published numbers (Mixtral 8x7B, OLMoE, OCP MX tables)."""
    from .moe_fp8_theory import bench_moe_fp8_theory

    return bench_moe_fp8_theory(out=out)


def capstone(out=print) -> bool:
    """The capstone's trainer on gloo ranks against one process, and the projection calculators."""
    from .capstone import bench_capstone

    return bench_capstone(out=out)


def gqa(out=print) -> bool:
    """07 exercises_2 Part E: the KV cache of Llama 2 70B with and without grouped queries, and the
    scores of a packed batch against its padded and block-masked forms, checked against SDPA."""
    from .attention import bench_gqa_varlen

    return bench_gqa_varlen(out=out)


def dedup(out=print) -> bool:
    """08 B4: exact-substring deduplication on the course's docstrings for k = 3..50, and the
    reference against the brute-force definition."""
    from .probes_dedup import bench_exact_substring

    return bench_exact_substring(out=out)


def planner(out=print) -> bool:
    """The layout planner's options (interleaving, recompute, fp32 main grads, embedding and head,
    context parallelism, rank order): how the best layout of the course's examples moves."""
    from .planner_bench import bench_planner_extras

    return bench_planner_extras(out=out)


def notebooks(out=print, assignments=None, only=None) -> bool:
    """Seconds per solved source notebook, top to bottom in a plain kernel, with the slowest cells,
    against the budget (30 s each, 6 min for the course; course_times.py). Minutes: ask by name."""
    from .course_times import bench_notebook_times

    return bench_notebook_times(out=out, assignments=assignments, only=only)


def prose(out=print) -> bool:
    """Markdown vs test-code lines per notebook (issue 28: notebooks that read as prose)."""
    from .course.prose import bench as prose_bench

    return prose_bench(out=out)


BENCHES = {"cheat": cheat, "studentkit": studentkit, "mutants": mutants, "memory": memory, "comms": comms, "ddp": ddp, "grading": grading, "fairness": fairness, "attention": attention, "parallel": parallel,
           "moe": moe, "fp8": fp8, "triton": triton, "prose": prose, "gqa": gqa, "notebooks": notebooks, "dedup": dedup, "planner": planner, "class": class_, "exp_roof": exp_roof,
           "published": published, "capstone": capstone}
DEFAULT = ["memory", "comms", "ddp"]  # grading and fairness take minutes to hours, attention up to a minute on CPU: ask for them by name


def main(names=None, assignments=None, baseline=False, sweep="both", only=None, workers=None) -> int:
    names = names or list(DEFAULT)
    unknown = sorted(set(names) - set(BENCHES))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; choose from {sorted(BENCHES)}")
    try:   # each line as it is printed, also into a file or pipe: a long sweep shows (and keeps) its progress
        sys.stdout.reconfigure(line_buffering=True)
    except (AttributeError, ValueError):
        pass
    results = []
    for i, name in enumerate(names):
        if i:
            print()
        if name == "grading":
            results.append(grading(assignments=assignments, baseline=baseline))
        elif name == "fairness":
            results.append(fairness(assignments=assignments, sweep=sweep))
        elif name == "cheat":
            results.append(cheat(assignments=assignments))
        elif name == "studentkit":
            results.append(studentkit(assignments=assignments, only=only))
        elif name == "mutants":
            results.append(mutants(assignments=assignments, only=only, workers=workers))
        elif name == "notebooks":
            results.append(notebooks(assignments=assignments, only=only))
        else:
            results.append(BENCHES[name]())
    return 0 if all(results) else 1
