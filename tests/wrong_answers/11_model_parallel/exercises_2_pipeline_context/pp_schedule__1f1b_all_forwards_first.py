# loses: pp_schedule_tests
# why: the shortcut: a '1F1B' that runs every forward before any backward (AFAB under another name)
def pipeline_schedule(kind, stage, n_stages, m):
    for name, v in (("n_stages", n_stages), ("m", m)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage < n_stages:
        raise ValueError(f"stage must be an int in 0..{n_stages - 1}, got {stage!r}")
    if kind == "afab":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    if kind != "1f1b":
        raise ValueError(f"kind must be 'afab' or '1f1b', got {kind!r}")
    return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
