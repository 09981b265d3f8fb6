# loses: calibrate_projection_tests
# why: a planner dict's communication is tp alone (pp and dp forgotten)
def calibrate_projection(predicted_big, predicted_small, measured_small):
    """The planner's big-run prediction corrected part by part by the pilot's measured / predicted ratio."""
    parts_of = ("compute", "communication", "bubble")

    def parts(d, what):
        if not isinstance(d, dict):
            raise ValueError(f"{what} must be a dict, got {d!r}")
        if "communication" not in d:
            missing = [k for k in ("tp", "pp", "dp") if k not in d]
            if missing:
                raise ValueError(f"{what} has neither 'communication' nor {missing}")
            d = {**d, "communication": _number(d["tp"], what)}
        out = {}
        for k in parts_of:
            if k not in d:
                raise ValueError(f"{what} has no {k!r}")
            out[k] = _number(d[k], f"{what}[{k!r}]")
        return out

    def _number(v, what):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{what} must be a finite number >= 0, got {v!r}")
        return float(v)

    big, small, meas = (parts(predicted_big, "predicted_big"), parts(predicted_small, "predicted_small"),
                        parts(measured_small, "measured_small"))
    out = {}
    for k in parts_of:
        if small[k] == 0:
            if big[k] != 0:
                raise ValueError(f"the pilot's planner predicts 0 for {k!r}: no ratio for the big run's {big[k]}")
            out[k] = 0.0
        else:
            out[k] = big[k] * meas[k] / small[k]
    out["total"] = sum(out.values())
    return out
