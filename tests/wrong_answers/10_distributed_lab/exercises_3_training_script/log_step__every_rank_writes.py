# loses: log_step_tests
# why: every rank appends to metrics.jsonl (and prints), not only rank 0
def log_step(rank, world_size, out_dir, step, loss, lr, tokens_per_s):
    total = loss.detach().clone().double()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    mean = total.item() / world_size
    if True:
        os.makedirs(out_dir, exist_ok=True)
        print(f"step {step:5d}  loss {mean:.4f}  lr {lr:.3e}  {tokens_per_s:,.0f} tok/s")
        with open(os.path.join(out_dir, "metrics.jsonl"), "a") as f:
            f.write(json.dumps({"step": step, "loss": mean, "lr": lr, "tokens_per_s": tokens_per_s}) + "\n")
    return mean
