# loses: project_run_tests
# why: MFU counts only the bubble as lost time (compute / (compute + bubble))
def project_run(layout, model, cluster, train_tokens):
    """The planner's projection of a whole training run: step time, tokens/s, MFU, days, memory."""
    if isinstance(train_tokens, bool) or not isinstance(train_tokens, (int, float)) \
            or not math.isfinite(train_tokens) or train_tokens <= 0:
        raise ValueError(f"train_tokens must be a finite number > 0, got {train_tokens!r}")
    step = upstream.layout_step_time(layout, model, cluster)
    mem = upstream.layout_memory_per_rank(layout, model)["total"]
    tokens = model["global_batch"] * model["seq_len"]
    return {"step_time": step["total"], "tokens_per_second": tokens / step["total"],
            "mfu": step["compute"] / (step["compute"] + step["bubble"]), "days": train_tokens / tokens * step["total"] / 86400,
            "memory_gb": mem / 1e9, "fits": mem <= cluster["memory"]}
