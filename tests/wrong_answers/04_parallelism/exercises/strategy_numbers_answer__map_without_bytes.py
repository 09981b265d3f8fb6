# loses: strategy_numbers_tests
# why: feature_map_gb ignores bytes_per_element (elements, not bytes)
def state_gb(n_params, bytes_per_param=16):
    """Weights + gradients + optimizer state in GB (1e9 bytes)."""
    if n_params < 0 or bytes_per_param <= 0:
        raise ValueError("n_params must be >= 0 and bytes_per_param > 0")
    return n_params * bytes_per_param / 1e9


def feature_map_gb(height, width, channels, bytes_per_element=2):
    """One sample's activation map of shape (channels, height, width), in GB."""
    if min(height, width, channels) < 1 or bytes_per_element <= 0:
        raise ValueError("height, width, channels must be >= 1 and bytes_per_element > 0")
    return height * width * channels / 1e9


bert_state_gb = state_gb(300e6)
llm_state_gb = state_gb(13e9)
llm_state_tp8_gb = llm_state_gb / 8
embedding_min_gpus = math.ceil(200 / 80)
dense_state_gb = state_gb(100e6)
seg_state_gb = state_gb(500e6)
seg_map_gb = feature_map_gb(4096, 4096, 64)
seg_maps_that_fit = math.floor((80 - seg_state_gb) / seg_map_gb)
for name in ("bert_state_gb", "llm_state_gb", "llm_state_tp8_gb", "embedding_min_gpus", "dense_state_gb",
             "seg_state_gb", "seg_map_gb", "seg_maps_that_fit"):
    print(f"{name:>20} = {globals()[name]:.4g}")
