# loses: pretraining_design_tests
# why: peak lr by the linear rule where the plan asks for the square-root rule
pretraining_problem = {"token_budget": 20 * 10 ** 9, "seq_len": 2048, "n_gpus": 64, "max_micro_batch": 8,
                       "max_batch_tokens": 4 * 2 ** 20, "ref_lr": 3e-4, "ref_batch": 256}


def design_pretraining_schedule(problem):
    """A warmup-stable-decay pretraining plan that meets the rules of exercise 10."""
    seq_len, n_gpus = problem["seq_len"], problem["n_gpus"]
    per_gpu = problem["max_batch_tokens"] // (n_gpus * seq_len)   # sequences per GPU per step
    if per_gpu < 1:
        raise ValueError("one sequence per GPU already exceeds the critical batch")
    micro = min(problem["max_micro_batch"], per_gpu)
    while 2 * micro * (per_gpu // micro) * n_gpus * seq_len < problem["max_batch_tokens"]:
        micro -= 1                                                   # trade micro-batch for accumulation
    accum = per_gpu // micro
    global_batch = micro * accum * n_gpus
    tokens = global_batch * seq_len
    plan = fit_schedule_to_budget(problem["token_budget"], tokens, warmup_ratio=0.02, decay_fraction=0.2)
    peak = scale_lr(problem["ref_lr"], problem["ref_batch"], global_batch, "linear")
    floor = 0.1 * peak
    total, warmup = plan["total_steps"], plan["warmup_steps"]

    def lr_at(step):
        return wsd(step, peak, warmup, total, 0.2, floor, "sqrt")

    return {"micro_batch": micro, "grad_accum": accum, "global_batch": global_batch, "tokens_per_step": tokens,
            "total_steps": total, "warmup_steps": warmup, "decay_steps": plan["decay_steps"],
            "peak_lr": peak, "min_lr": floor, "lr_at": lr_at}


design = design_pretraining_schedule(pretraining_problem)
print({k: v for k, v in design.items() if k != "lr_at"})
