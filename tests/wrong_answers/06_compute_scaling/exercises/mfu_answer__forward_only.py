# loses: mfu_tests
# why: times forward passes only: no backward, no optimizer step, so not a training step
def measure_tokens_per_second(model, batch_size, seq_len, vocab, steps=3, warmup_steps=1):
    '''Training tokens per second of `model` (AdamW, next-token cross-entropy, random tokens).'''
    if steps < 1 or warmup_steps < 0:
        raise ValueError(f"need steps >= 1 and warmup_steps >= 0, got {steps} and {warmup_steps}")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, vocab, (batch_size, seq_len + 1))
    x, y = data[:, :-1], data[:, 1:]

    def step():
        loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        return loss

    for _ in range(warmup_steps):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return batch_size * seq_len * steps / (time.perf_counter() - start)


from solutions_lib.roofline import gemm_flops, time_gemm


def measure_peak():
    """The best FLOP/s of the large square fp32 GEMMs, now (best of three trials each)."""
    return max(gemm_flops(d, d, d) / time_gemm(d, d, d) for d in (256, 512, 1024))


peak_before = measure_peak()
tokens_per_s = measure_tokens_per_second(model, BATCH, CFG["seq_len"], CFG["vocab"])
peak_now = max(peak_before, measure_peak())
mfu_measured = tokens_per_s * flops_per_token / peak_now
print(f"{tokens_per_s:,.0f} tokens/s x {flops_per_token:,.0f} FLOPs/token = {tokens_per_s * flops_per_token / 1e9:.1f} GFLOP/s; "
      f"peak now {peak_now / 1e9:.1f} GFLOP/s; MFU = {mfu_measured:.2f}")
