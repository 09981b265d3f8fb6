# loses: load_report_tests
# why: step time from the mean rank load: the slowest rank does not set it
def load_report(experts, n_experts, n_ranks, seconds_per_row):
    per_expert = torch.bincount(experts.reshape(-1), minlength=n_experts).tolist()
    m = n_experts // n_ranks
    per_rank = [sum(per_expert[r * m:(r + 1) * m]) for r in range(n_ranks)]
    mean_e, mean_r = sum(per_expert) / n_experts, sum(per_rank) / n_ranks
    return {"tokens_per_expert": per_expert, "expert_imbalance": max(per_expert) / mean_e,
            "tokens_per_rank": per_rank, "rank_imbalance": max(per_rank) / mean_r,
            "step_time": mean_r * seconds_per_row, "balanced_step_time": mean_r * seconds_per_row}
