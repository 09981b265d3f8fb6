# loses: memory_table_tests
# why: AMP optimizer state of 8 bytes: the fp32 master copy of the weights forgotten
def layer_activation_bytes(seq_len, batch, hidden, heads, bytes_per_value=2):
    """Bytes one transformer layer keeps for backward: s b h (16 d + 2) + (2 d + 1) a s^2 b."""
    for name, v in (("seq_len", seq_len), ("batch", batch), ("hidden", hidden), ("heads", heads),
                    ("bytes_per_value", bytes_per_value)):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if hidden % heads:
        raise ValueError(f"heads={heads} must divide hidden={hidden}")
    s, b, h, a, d = seq_len, batch, hidden, heads, bytes_per_value
    return s * b * h * (16 * d + 2) + (2 * d + 1) * a * s * s * b


def training_memory(n_params, batch, seq_len, hidden, layers, heads, precision, checkpoint_every=None):
    """Bytes of AdamW training by part: weights, gradients, optimizer, activations, total."""
    if precision == "fp32":
        w, g, o, d = 4, 4, 8, 4
    elif precision == "amp":
        w, g, o, d = 2, 2, 8, 2
    else:
        raise ValueError(f"precision must be 'fp32' or 'amp', got {precision!r}")
    if not n_params > 0 or not layers >= 1:
        raise ValueError("n_params and layers must be positive")
    A = layer_activation_bytes(seq_len, batch, hidden, heads, d)
    if checkpoint_every is None:
        act = layers * A
    else:
        k = checkpoint_every
        if not 1 <= k <= layers:
            raise ValueError(f"checkpoint_every must lie in 1..layers={layers}, got {checkpoint_every}")
        # torch's checkpoint: every segment input (d s b h bytes) + one rebuilt segment of k layers
        act = math.ceil(layers / k) * d * seq_len * batch * hidden + k * A
    out = {"weights": n_params * w, "gradients": n_params * g, "optimizer": n_params * o, "activations": act}
    out["total"] = sum(out.values())
    return out


def fits(total_bytes):
    """{card: does total_bytes fit in its capacity} for the cards of GPUS."""
    return {card: total_bytes <= cap for card, cap in GPUS.items()}


shape = dict(n_params=350e6, batch=16, seq_len=512, hidden=1024, layers=24, heads=16)
ch26_08 = {
    "fp32": training_memory(**shape, precision="fp32"),
    "amp": training_memory(**shape, precision="amp"),
    "amp_ckpt4": training_memory(**shape, precision="amp", checkpoint_every=4),
}
ch26_08_fits = {name: fits(m["total"]) for name, m in ch26_08.items()}
ch26_08_best_k = min(range(1, 25), key=lambda k: (training_memory(**shape, precision="amp", checkpoint_every=k)["activations"], k))
print(f"{'config':<10} {'state GB':>9} {'activ. GB':>10} {'total GB':>9}   " + "   ".join(GPUS))
for name, m in ch26_08.items():
    state = m["weights"] + m["gradients"] + m["optimizer"]
    marks = "   ".join(f"{('fits' if ok else 'NO'):^{len(card)}}" for card, ok in ch26_08_fits[name].items())
    print(f"{name:<10} {state / GB:9.2f} {m['activations'] / GB:10.2f} {m['total'] / GB:9.2f}   {marks}")
print("least AMP activation memory with a checkpoint every", ch26_08_best_k, "layer(s)")
