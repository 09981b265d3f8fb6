# loses: ch26_01_a_tests
# why: the global batch taken as the local 256: the 8 GPUs each see 256 images per step
def steps_per_epoch(n_samples, global_batch, drop_last=False):
    """Optimizer steps per epoch: ceil(n_samples / global_batch), or floor with drop_last."""
    if n_samples < 1 or global_batch < 1:
        raise ValueError(f"n_samples and global_batch must be >= 1, got {n_samples} and {global_batch}")
    if drop_last:
        return n_samples // global_batch
    return -(-n_samples // global_batch)


global_batch = 256
steps_seed = steps_per_epoch(1_280_000, global_batch)
steps_imagenet = steps_per_epoch(1_281_167, global_batch)
steps_imagenet_drop_last = steps_per_epoch(1_281_167, global_batch, drop_last=True)
print(f"global batch {global_batch}; steps per epoch: {steps_seed} (1.28M), {steps_imagenet} "
      f"(1,281,167), {steps_imagenet_drop_last} (drop_last)")
