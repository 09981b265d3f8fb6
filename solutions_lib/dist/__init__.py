"""The distributed lab kit.

* running ranks: `launch` (gloo on CPU, NCCL on GPUs), `launch_graded`, `CommCounter`;
* data parallelism by hand: `NaiveDDP`, `BucketedDDP`, `bucket_plan` (module `ddp`);
* sharding by hand: `ZeroOneAdamW` and `ShardedOptimizer` (any optimizer; `zero`),
  `FlatShardFSDP` and the per-layer, mixed-precision `FSDP` (`fsdp`);
* beyond data parallelism (import the modules): `tensor_parallel` (TP, SP), `pipeline` (AFAB,
  1F1B), `context_parallel` (ring attention), `mesh` (DP x TP);
* correctness: `verify_parameter_sync` (`sync`), `detect_missing_set_epoch` (`sampling`),
  async and local SGD simulators (`async_sgd`), fault injection (`faults`);
* the complete training script: `python -m solutions_lib.dist.train` (module `train`:
  `train(config)`, `TrainConfig`). It is not imported here: `python -m` must be the first to
  run it, and the name `solutions_lib.dist.train` must keep meaning the module.
"""
from .async_sgd import simulate_async_sgd, simulate_local_sgd, simulate_sync_sgd
from .counting import CommCounter
from .ddp import BucketedDDP, NaiveDDP, bucket_plan, grad_accumulation_reference
from .fsdp import FSDP, FlatShardFSDP
from .gpt import GPT
from .graded import launch_graded
from .launch import LaunchError, default_backend, launch
from .sampling import detect_missing_set_epoch, sampler_orders
from .sync import best_check_interval, verify_parameter_sync, weak_fingerprint
from .zero import ShardedOptimizer, ZeroOneAdamW

__all__ = ["BucketedDDP", "CommCounter", "FSDP", "FlatShardFSDP", "GPT", "LaunchError", "NaiveDDP",
           "ShardedOptimizer", "ZeroOneAdamW",
           "best_check_interval", "bucket_plan", "default_backend", "detect_missing_set_epoch",
           "grad_accumulation_reference", "launch", "launch_graded", "sampler_orders",
           "simulate_async_sgd", "simulate_local_sgd", "simulate_sync_sgd", "verify_parameter_sync",
           "weak_fingerprint"]
