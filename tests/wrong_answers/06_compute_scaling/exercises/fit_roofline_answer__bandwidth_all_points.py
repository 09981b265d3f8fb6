# loses: fit_roofline_tests
# why: bandwidth from every point, ignoring memory_bound_below
def fit_roofline(intensity, flops_per_second, memory_bound_below=4.0):
    '''(peak FLOP/s, bandwidth bytes/s): the roofline that sits on top of the measured points.'''
    i = np.asarray(intensity, dtype=float)
    f = np.asarray(flops_per_second, dtype=float)
    if i.shape != f.shape or i.size == 0:
        raise ValueError(f"need two arrays of the same, non-zero length; got {i.shape} and {f.shape}")
    if np.any(~np.isfinite(i)) or np.any(~np.isfinite(f)) or np.any(i <= 0) or np.any(f <= 0):
        raise ValueError("intensities and FLOP/s must be finite and > 0")
    low = i < memory_bound_below
    if not np.any(low):
        raise ValueError(f"no point below {memory_bound_below} FLOP/byte: cannot fit the memory roof")
    return float(f.max()), float(np.max(f / i))


peak, bandwidth = fit_roofline(intensity, achieved)
ridge = peak / bandwidth
print(f"peak {peak / 1e9:.1f} GFLOP/s, bandwidth {bandwidth / 1e9:.1f} GB/s, ridge {ridge:.1f} FLOP/byte")
