# loses: io_time_tests
# why: more writers make it slower: multiplies by writers
def io_seconds(checkpoint_bytes, bandwidth_bytes_per_s, writers=1):
    if checkpoint_bytes <= 0 or bandwidth_bytes_per_s <= 0 or writers < 1:
        raise ValueError("bytes and bandwidth must be > 0 and writers >= 1")
    return checkpoint_bytes * writers / bandwidth_bytes_per_s


t_nvme = io_seconds(15e9, 3e9, writers=8)
t_nas = io_seconds(15e9, 1e9)
t_object = io_seconds(15e9, 200e6)
print(f"NVMe {t_nvme:.3f} s, NAS {t_nas:.1f} s, object storage {t_object:.1f} s")
