# loses: launch_checklist_tests
# why: the learning-rate schedule is never looked at: a warmup longer than the run passes
from solutions_lib.debugging import resume_matches, train_small


def my_launch_checklist(cfg):
    res = {}
    l1, norms = train_small(cfg)
    l2, _ = train_small(cfg)
    res["small_run_learns"] = l1[-1] < l1[0] and l1 == l2
    a, b = resume_matches(cfg)
    res["resume_exact"] = a == b
    res["grad_norm_finite"] = all(math.isfinite(n) for n in norms)
    rows = synthetic_tokens(4, cfg.seq_len + 1, cfg.vocab, seed=7)
    x, y = (rows[:, :-1], rows[:, 1:]) if cfg.shift_labels else (rows[:, :-1], rows[:, :-1])
    res["labels_shifted"] = labels_shifted(x, y)
    res["causal_mask"] = mask_is_causal(TinyLM(cfg.vocab, cfg.hidden, cfg.heads).causal_mask(cfg.seq_len))
    s, bt, h, a_ = cfg.target_seq_len, cfg.target_micro_batch, cfg.target_hidden, cfg.target_heads
    need = 16 * cfg.target_params + cfg.target_layers * (34 * s * bt * h + 5 * a_ * s * s * bt)
    res["memory_counts_all"] = set(cfg.memory_counts) >= {"weights", "grads", "optimizer", "activations"}
    res["memory_fits"] = need <= cfg.gpu_memory_bytes
    res["tokens_per_step"] = cfg.micro_batch * cfg.grad_accum * cfg.dp * cfg.seq_len == cfg.planned_tokens_per_step
    res["parallelism"] = cfg.dp * cfg.tp * cfg.pp == cfg.world_size
    lrs = [lr_at(t, cfg) for t in range(cfg.steps)]
    w = cfg.warmup_steps
    res["logging"] = all(k in cfg.logged for k in ("train_loss", "val_loss", "tokens_per_s"))
    res["checkpoint_contents"] = all(k in cfg.checkpoint_includes for k in ("model", "optimizer", "scheduler", "rng", "dataloader"))
    ld = RowLoader(torch.arange(cfg.n_rows)[:, None], cfg.micro_batch, seed=cfg.seed, replacement=cfg.replacement)
    seen = torch.cat([ld.next_indices() for _ in range(cfg.n_rows // cfg.micro_batch)]).tolist()
    res["data_coverage"] = len(set(seen)) == len(seen)
    return res
