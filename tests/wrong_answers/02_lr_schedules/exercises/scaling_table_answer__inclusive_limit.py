# loses: scaling_table_tests
# why: flags lr >= lr_limit (the text asks for strictly above)
def linear_scaling_table(rows, lr_limit=0.01):
    """[(scaled_lr, scaled_lr > lr_limit) for each (base_batch, base_lr, target_batch) row]."""
    table = []
    for base_batch, base_lr, target_batch in rows:
        lr = scale_lr(base_lr, base_batch, target_batch, "linear")
        table.append((lr, lr >= lr_limit))
    return table


ch26_15_table = linear_scaling_table([(256, 1e-3, 4096), (64, 5e-4, 2048), (512, 3e-4, 32768)])
for (lr, big) in ch26_15_table:
    print(f"scaled lr {lr:.4g}{'  > 0.01' if big else ''}")
