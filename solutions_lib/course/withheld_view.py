"""The copy of `solutions_lib` that a grading kernel sees: reference answers withheld.

A student's kernel at grading time must not be able to compute the expected values of the
hidden tests, nor call the reference instead of building an answer. The sandbox (sandbox.py)
therefore binds this *view* of the package where the real one would be: the same modules, but
every name in `WITHHELD` (the reference answers that the tests use as oracles) replaced by a
`solutions_lib.withheld.Withheld` stand-in. The course tooling (`solutions_lib.course`) is left
out entirely. Test cells run unchanged: `ref.step_decay(*case)` gives a Withheld value, the
check records what the student's function returned, and the grader compares it with the
trusted run (trusted.py, integrity.py).

Everything that is not an answer stays real: the lab kit (launcher, counters, models, data
generators), plotting and simulation helpers, published constants. `withheld_names()` lists
what is withheld; `tests/test_withheld_view.py` checks that every withheld name exists and that
the view imports.
"""
from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent

#: module (relative to solutions_lib) -> names withheld at grading time: each is an answer a
#: student builds, or the oracle a test compares an answer with.
WITHHELD: dict[str, tuple[str, ...]] = {
    "attention": ("FlashAttention2", "attention_io_roofline", "crossover_seq_len", "fa1_block_sizes",
                  "flash_attention2_forward", "flash_attention_backward", "flash_attention_forward",
                  "flash_attention_hbm_bytes", "gqa_attention", "kv_cache_bytes", "online_softmax", "score_saturation",
                  "standard_attention_hbm_bytes", "varlen_attention"),
    "batch_scaling": ("linear_scaling_table", "loglog_slope", "plan_per_gpu_batch", "scale_lr"),
    "checkpointing": ("adaptive_interval", "checkpoint_overhead", "daly_interval", "first_order_waste",
                      "hazard_from_probability", "io_seconds", "young_interval"),
    "comms": ("all_gather_time", "allreduce_crossover_bytes", "alpha_beta_time", "amdahl_from_profile",
              "amdahl_speedup", "bucket_comm_times", "bucketed_step_time", "bus_bandwidth", "expected_max_step_time",
              "fit_alpha_beta", "flat_allreduce_time", "hierarchical_allreduce_time", "overlap_step_time",
              "rabenseifner_allreduce_time", "reduce_scatter_time", "ring_allreduce_time", "speedup_from_step_time", "steps_per_epoch",
              "tree_allreduce_time",
              "all_to_all_time", "best_protocol", "binary_tree_depth", "moe_alltoall_bytes", "optimal_tree_chunks",
              "pipelined_tree_allreduce_time", "pipelined_tree_best_time", "protocol_crossover_bytes", "protocol_time",
              "tp_allreduce_bytes_per_layer"),
    "compute": ("gemm_arithmetic_intensity", "square_gemm_ridge_dim", "training_flops"),
    "capstone": ("build_rank", "calibrate_projection", "load_rank", "project_run", "save_rank", "train_step"),
    "cost": ("TrainingCostEstimator",),
    "data": ("choose_bands", "corpus_tokens", "epochs", "exact_duplicates", "filter_corpus", "first_step_detected",
             "jaccard", "lsh_candidate_pairs", "lsh_candidate_probability", "minhash_signature", "ngram_overlap",
             "drop_spans", "pack_documents", "pack_sequences", "packing_utilization", "quality_flags",
             "repeated_spans", "token_budget"),
    # not debugging.clip_grad_norm: the kit's train_small/resume_matches (which 09's answers may use) clip with it
    # the planner's option terms: pieces of the withheld planner answers (parallel.layout_*)
    "planner_terms": ("_cp_exposed_time", "_dp_time", "_layer_activation_bytes", "_state_bytes_per_param"),
    "debugging": ("causal_mask_problems", "label_shift_problems", "padding_mask_problems", "run_launch_checklist"),
    "dist.expert_parallel": ("ep_moe",),
    "dist.vocab_parallel": ("VocabParallelEmbedding", "vocab_parallel_cross_entropy"),
    "dist.tp_dropout": ("TPDropoutRNG",),
    "dist.ring_backward": ("ring_attention_backward",),
    "attention_roofs": ("attention_time_roofs", "largest_exp_bound_head_dim"),
    "dist.fsdp": ("FSDP",),
    "dist.zero": ("ShardedOptimizer",),
    "dist.comm_bound": ("dp_crossover_from", "predicted_dp_crossover", "time_dp_step", "time_tp_mlp",
                        "tp_crossover_from"),
    "dist.context_parallel": ("causal_pairs_per_rank", "merge_partials", "ring_attention", "zigzag_indices"),
    "dist.mesh": ("average_gradients", "init_mesh", "mesh_coordinates"),
    "dist.pipeline": ("InterleavedStage", "PipelineStage", "run_1f1b", "run_afab", "schedule_order"),
    "fp8": ("DelayedScaler", "FP8LinearFunction", "cast_counts", "convert_to_fp8", "fp8_cast", "fp8_linear",
            "fp8_matmul", "quantize_mx", "quantize_tensorwise"),
    "memory": ("activation_bytes_per_layer", "checkpoint_epoch_time", "checkpoint_layout_bytes",
               "checkpointed_activation_bytes", "fits_on", "min_zero_stage", "model_state_bytes", "optimal_interval",
               "optimal_segment_interval", "predicted_transformer_activation_bytes", "recompute_overhead",
               "segment_checkpoint_bytes", "training_memory", "zero_bytes_per_rank", "zero_table"),
    "moe": ("balancing_loss", "biased_route", "capacity_keep", "expert_capacity", "load_report", "moe_layer",
            "router_z_loss", "top_k_route", "update_bias"),
    "moe_fp8_theory": ("capacity_report", "ep_vs_dp_bytes", "fa2_tile_budget", "fp_format", "moe_param_counts",
                       "tile_roofline"),
    "numerics": ("accumulate_updates", "ieee_limits", "kahan_bf16_step", "scaled_roundtrip", "simulate_grad_scaler",
                 "stochastic_round_bf16", "trailing_median"),
    "optim": ("adamw_step", "clip_grad_norm", "trust_ratio"),
    "parallel": ("best_layout", "candidate_layouts", "cp_comm_compute_times", "cp_crossover_tokens", "layer_comm_bytes",
                 "layout_memory_per_rank", "layout_step_time",
                 "column_parallel_shard", "dp_comm_bytes_per_step", "dp_comm_compute_times", "dp_crossover_tokens",
                 "heads_per_rank", "min_micro_batches_for_bubble", "pp_comm_compute_times", "pp_crossover_tokens",
                 "tp_comm_compute_times", "tp_crossover_hidden",
                 "pipeline_bubble_fraction", "pipeline_bubble_ratio", "pipeline_bubble_zb_h1", "row_parallel_shard",
                 "sharding_bytes_per_rank",
                 "tp_comm_bytes_per_layer"),
    "roofline": ("fit_roofline",),
    "scaling": ("bootstrap_chinchilla_fit", "chinchilla_loss", "chinchilla_optimal", "compute_multiplier_with_floor",
                "fit_chinchilla_law", "fit_loss_law", "inference_aware_optimal", "isoflop_fit", "tokens_for_loss"),
    # check_pretraining_design is not withheld: a rule checker that the tests apply to the student's design, not an answer
    "schedules": ("cosine_with_restarts", "design_pretraining_schedule",
                  "diagnose_lr_trace", "fit_schedule_to_budget", "inverse_sqrt", "linear_warmup", "one_cycle",
                  "polynomial_decay", "sgdr_restarts", "step_decay", "steps_from_fraction", "tokens_before_cooldown", "warmup_cosine",
                  "wsd"),
    # the kernels too: the answers are Triton code, so the student edition must not ship them
    "triton_kernels": ("_attention_fwd_kernel", "_ce_fwd_kernel", "_ce_grad_kernel", "_matmul_kernel", "_softmax_kernel",
                       "cross_entropy", "cross_entropy_grad", "flash_attention", "matmul", "softmax"),
}


def withheld_names() -> list[str]:
    return [f"solutions_lib.{m}.{n}" for m, names in sorted(WITHHELD.items()) for n in names]


class _Withhold(ast.NodeTransformer):
    def __init__(self, module: str, names: set[str]):
        self.module, self.names, self.done = module, names, set()

    def visit_Module(self, node):
        body = []
        for stmt in node.body:
            name = getattr(stmt, "name", None)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and name in self.names:
                body.append(ast.parse(f"{name} = _Withheld('solutions_lib.{self.module}.{name}')").body[0])
                self.done.add(name)
            else:
                body.append(stmt)
        # after the docstring and `from __future__` imports
        i = 0
        while i < len(body) and (isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__" or
                                 i == 0 and isinstance(body[i], ast.Expr) and isinstance(getattr(body[i], "value", None), ast.Constant)):
            i += 1
        body.insert(i, ast.parse("from solutions_lib.withheld import Withheld as _Withheld").body[0])
        node.body = body
        return node


def withheld_source(module: str, source: str, names=None) -> str:
    """`source` of `solutions_lib.<module>` with its WITHHELD names (or `names`) replaced by
    stand-ins (see the module docstring)."""
    names = set(WITHHELD.get(module, ()) if names is None else names)
    tree = ast.parse(source)
    t = _Withhold(module, names)
    tree = t.visit(tree)
    missing = names - t.done
    if missing:
        raise ValueError(f"solutions_lib.{module} defines no top-level {sorted(missing)} to withhold")
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def _package_hash() -> str:
    h = hashlib.sha256()
    for p in sorted(_PACKAGE.rglob("*.py")):
        h.update(str(p.relative_to(_PACKAGE)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:24]


def private_temp() -> Path:
    """The grader's own folder in the temporary directory (`tas-<uid>`, mode 0700), made on
    first use: a folder there that another user made first (with a forged view in it) is refused,
    not reused (issue 26)."""
    import stat

    d = Path(tempfile.gettempdir()) / f"tas-{os.getuid()}"
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeError(f"{d} is not a private folder of this user (owner uid {st.st_uid}, mode "
                           f"{oct(st.st_mode & 0o777)}): the grader will not use it. Remove it, or set TMPDIR "
                           "to a folder of your own.")
    return d


def build_view(dest_root: str | os.PathLike | None = None) -> Path:
    """The view's `solutions_lib` folder (built once per package version; returns its path)."""
    base = Path(dest_root or private_temp()) / f"tas-view-{_package_hash()}"
    base.parent.mkdir(parents=True, exist_ok=True)
    pkg = base / "solutions_lib"
    if (base / "ready").is_file():
        return pkg
    tmp = Path(tempfile.mkdtemp(prefix="tas-view-build-", dir=base.parent))
    try:
        out = tmp / "solutions_lib"
        for src in sorted(_PACKAGE.rglob("*.py")):
            rel = src.relative_to(_PACKAGE)
            if rel.parts[0] in ("course",) or "__pycache__" in rel.parts:
                continue
            dst = out / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            module = ".".join(rel.with_suffix("").parts)
            text = src.read_text(encoding="utf-8")
            dst.write_text(withheld_source(module, text) if module in WITHHELD else text, encoding="utf-8")
        for d in [tmp, *tmp.rglob("*")]:
            os.chmod(d, 0o755 if d.is_dir() else 0o644)
        (tmp / "ready").write_text("ok\n")
        try:
            os.rename(tmp, base)
        except OSError:          # another grader built it first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return pkg
