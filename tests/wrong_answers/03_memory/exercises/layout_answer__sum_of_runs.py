# loses: layout_tests
# why: adds every dropped run, not only the largest (the backward rebuilds one segment at a time)
def layout_memory(layer_bytes, kept):
    """Peak activation bytes: the kept layers' sizes plus the largest run of dropped layers."""
    keep = set(kept)
    for i in keep:
        if not 0 <= i < len(layer_bytes):
            raise ValueError(f"kept index {i} is outside 0..{len(layer_bytes) - 1}")
    run = worst = 0.0
    for i, x in enumerate(layer_bytes):
        run = 0.0 if i in keep else run + x
        worst += 0 if i in keep else x
    return sum(layer_bytes[i] for i in keep) + worst


uniform_c = {k: layout_memory(sizes_c, range(k - 1, 48, k)) for k in range(1, 49)}
best_uniform_k_c = min(uniform_c, key=lambda k: (uniform_c[k], k))
best_uniform_c = uniform_c[best_uniform_k_c]
# keep the small layer just before every big one: the big layers are never kept, each run is
# (big, small, small) = 12 A, and the 12 kept layers cost 12 A
my_kept_c = [i for i in range(48) if i % 4 == 2]
print(f"best uniform interval k = {best_uniform_k_c}: {best_uniform_c:.0f} A;  k = 4: {uniform_c[4]:.0f} A;  "
      f"k = 7 (sqrt rule): {uniform_c[7]:.0f} A;  your layout: {layout_memory(sizes_c, my_kept_c):.0f} A")
