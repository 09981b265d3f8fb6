# loses: parse_config_tests
# why: --lr has no type, so the value stays a string
import argparse

def parse_config(argv):
    p = argparse.ArgumentParser(prog="train", description="Train a small GPT with DDP.")
    p.add_argument("--steps", type=int, default=300, help="optimizer steps of the whole run")
    p.add_argument("--local-batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--lr", default=3e-3, help="peak learning rate at the base batch")
    p.add_argument("--amp", choices=("none", "bf16", "fp16"), default="none", help="autocast dtype")
    p.add_argument("--backend", choices=("gloo", "nccl"), default=None, help="default: nccl with CUDA, else gloo")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    cfg = vars(p.parse_args(list(argv)))
    for name in ("steps", "local_batch"):
        if cfg[name] < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {cfg[name]}")
    if not (math.isfinite(cfg["lr"]) and cfg["lr"] > 0):
        raise ValueError(f"--lr must be a positive finite number, got {cfg['lr']}")
    return cfg
