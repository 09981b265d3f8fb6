"""Checkpoint operations: how often to save (Young, Daly, adaptive to the failure rate), what a
save costs, and a CheckpointManager that saves everything a bit-exact resume needs, atomically,
optionally in a background thread, with an integrity check on load.

Units: seconds everywhere (checkpoint write time C, mean time between failures M, intervals).

Sources:
- Young 1974, "A first order approximation to the optimum checkpoint interval": with a
  failure rate 1/M, the wasted fraction is about C/tau + tau/(2M), minimised at
  tau = sqrt(2 C M);
- Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart dumps":
  tau = sqrt(2 C M) (1 + sqrt(C/(2M))/3 + C/(18 M)) - C for C < 2M, else tau = M; and the
  expected wall time with exponential failures, T_w = M e^{R/M} (e^{(tau+C)/M} - 1) T_s / tau.
Bad arguments raise ValueError with the reason.
"""
from __future__ import annotations

import copy
import hashlib
import io
import math
import os
import random
import re
import struct
import tempfile
import threading
import warnings

import numpy as np
import torch

from solutions_lib._checks import count, fraction, non_negative, positive

# ---------------------------------------------------------------- intervals and overhead


def young_interval(checkpoint_seconds, mtbf_seconds):
    """Young's first-order optimum compute time between checkpoints: sqrt(2 C M), seconds."""
    positive("checkpoint_seconds", checkpoint_seconds)
    positive("mtbf_seconds", mtbf_seconds)
    return math.sqrt(2.0 * checkpoint_seconds * mtbf_seconds)


def daly_interval(checkpoint_seconds, mtbf_seconds):
    """Daly's higher-order optimum: sqrt(2CM) [1 + (1/3) sqrt(C/2M) + (1/9)(C/2M)] - C when
    C < 2M, else M. Seconds of compute between checkpoints."""
    positive("checkpoint_seconds", checkpoint_seconds)
    positive("mtbf_seconds", mtbf_seconds)
    C, M = float(checkpoint_seconds), float(mtbf_seconds)
    if C >= 2 * M:
        return M
    r = C / (2 * M)
    return math.sqrt(2 * C * M) * (1 + math.sqrt(r) / 3 + r / 9) - C


def checkpoint_overhead(checkpoint_seconds, interval_steps, step_seconds):
    """Fraction of wall time spent writing checkpoints when saving every K steps, without
    failures: C / (K * t_step + C)."""
    non_negative("checkpoint_seconds", checkpoint_seconds)
    positive("interval_steps", interval_steps)
    positive("step_seconds", step_seconds)
    return checkpoint_seconds / (interval_steps * step_seconds + checkpoint_seconds)


def first_order_waste(interval_seconds, checkpoint_seconds, mtbf_seconds):
    """Young's model of the wasted fraction of time: C/tau (saving) + tau/(2M) (work redone
    after a failure, which lands on average half way through an interval)."""
    positive("interval_seconds", interval_seconds)
    non_negative("checkpoint_seconds", checkpoint_seconds)
    positive("mtbf_seconds", mtbf_seconds)
    return checkpoint_seconds / interval_seconds + interval_seconds / (2.0 * mtbf_seconds)


def expected_lost_work(interval_seconds, mtbf_seconds, total_seconds):
    """Expected compute redone over a run of `total_seconds`: (total/M) failures x tau/2 each."""
    positive("interval_seconds", interval_seconds)
    positive("mtbf_seconds", mtbf_seconds)
    non_negative("total_seconds", total_seconds)
    return total_seconds / mtbf_seconds * interval_seconds / 2.0


def expected_wall_time(work_seconds, interval_seconds, checkpoint_seconds, mtbf_seconds, restart_seconds=0.0):
    """Daly's expected wall time to finish `work_seconds` of compute with exponential failures
    (mean M), checkpoints of C every tau of compute and a restart cost R after each failure:
    T_w = M e^{R/M} (e^{(tau + C)/M} - 1) T_s / tau."""
    positive("work_seconds", work_seconds)
    positive("interval_seconds", interval_seconds)
    non_negative("checkpoint_seconds", checkpoint_seconds)
    positive("mtbf_seconds", mtbf_seconds)
    non_negative("restart_seconds", restart_seconds)
    M = float(mtbf_seconds)
    return (M * math.exp(restart_seconds / M) * math.expm1((interval_seconds + checkpoint_seconds) / M)
            * work_seconds / interval_seconds)


def hazard_from_probability(probability, window_seconds):
    """Constant hazard rate (1/s) that gives failure probability p within a window:
    p = 1 - exp(-h w), so h = -ln(1 - p) / w."""
    fraction("probability", probability)
    positive("window_seconds", window_seconds)
    if probability >= 1:
        raise ValueError("probability must be < 1 (certain failure has no finite hazard rate)")
    return -math.log1p(-probability) / window_seconds


def adaptive_interval(checkpoint_seconds, hazard_per_second, min_seconds=0.0, max_seconds=math.inf):
    """Young's interval with MTBF = 1/hazard, clipped to [min_seconds, max_seconds]: as the
    termination hazard rises (spot prices spike), the interval shrinks like 1/sqrt(hazard)."""
    positive("checkpoint_seconds", checkpoint_seconds)
    positive("hazard_per_second", hazard_per_second)
    non_negative("min_seconds", min_seconds)
    if not max_seconds > min_seconds:
        raise ValueError(f"max_seconds ({max_seconds}) must exceed min_seconds ({min_seconds})")
    tau = young_interval(checkpoint_seconds, 1.0 / hazard_per_second)
    return min(max(tau, min_seconds), max_seconds)


def io_seconds(checkpoint_bytes, bandwidth_bytes_per_second, writers=1):
    """Time to write a checkpoint: bytes / (bandwidth x parallel writers), seconds. `writers`
    counts independent paths (e.g. one NVMe per node, each writing its shard)."""
    positive("checkpoint_bytes", checkpoint_bytes)
    positive("bandwidth_bytes_per_second", bandwidth_bytes_per_second)
    writers = count("writers", writers)
    return checkpoint_bytes / (bandwidth_bytes_per_second * writers)


# ---------------------------------------------------------------- RNG and state snapshots


def rng_state():
    """Every random stream a training step can draw from: python, numpy, torch CPU (and CUDA)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def snapshot(obj):
    """A deep copy whose tensors are detached CPU clones: nothing later done to the live
    model or optimizer can change it."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return type(obj)((k, snapshot(v)) for k, v in obj.items()) if not hasattr(obj, "default_factory") \
            else {k: snapshot(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        out = [snapshot(v) for v in obj]
        return type(obj)(out) if not hasattr(obj, "_fields") else type(obj)(*out)
    return copy.deepcopy(obj)


# ---------------------------------------------------------------- file format

_MAGIC = b"LLMCKPT1"
_HEADER = struct.Struct("<8s32sQ")  # magic, sha256 of payload, payload length


def write_checkpoint_file(path, state):
    """Write `state` atomically: torch.save into a temp file in the same directory, with a
    header holding the payload's sha256 and length, flush + fsync, then os.replace (atomic
    on POSIX): a reader sees the old file or the new one, never half of one."""
    path = os.fspath(path)
    buf = io.BytesIO()
    torch.save(state, buf)
    payload = buf.getvalue()
    header = _HEADER.pack(_MAGIC, hashlib.sha256(payload).digest(), len(payload))
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(header)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def read_checkpoint_file(path):
    """Read and verify a checkpoint; a truncated or corrupt file raises ValueError naming the
    path and the reason. Only files that pass the sha256 check are unpickled."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _HEADER.size:
        raise ValueError(f"checkpoint {path} is truncated: {len(data)} bytes, shorter than its header")
    magic, digest, length = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise ValueError(f"checkpoint {path} is not a CheckpointManager file (bad magic {magic!r})")
    payload = data[_HEADER.size:]
    if len(payload) != length:
        raise ValueError(f"checkpoint {path} is truncated or padded: payload has {len(payload)} bytes, "
                         f"header says {length}")
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError(f"checkpoint {path} is corrupt: sha256 of the payload does not match the header")
    # weights_only=False: the RNG states hold numpy arrays and tuples; the checksum above
    # guarantees this is a file we wrote.
    return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)


# ---------------------------------------------------------------- the manager


class CheckpointManager:
    """Save and restore model, optimizer, scheduler, RNG streams and data position.

    Files are ``ckpt_{step:09d}.pt`` in `directory`; only the newest `keep_last` are kept.
    With `async_save=True`, save() takes a CPU snapshot of every state dict *before* it
    returns (so the next optimizer step cannot change what is written) and writes it in a
    background thread; at most one write is in flight (a new save waits for the previous).
    Call wait() before reading the files and close() at the end; an error in the background
    write is raised by the next wait()/save()/close().
    """

    _NAME = re.compile(r"^ckpt_(\d{9})\.pt$")

    def __init__(self, directory, keep_last=3, async_save=False):
        self.directory = os.fspath(directory)
        self.keep_last = count("keep_last", keep_last)
        self.async_save = bool(async_save)
        os.makedirs(self.directory, exist_ok=True)
        self._thread = None
        self._error = None

    def path_for(self, step):
        return os.path.join(self.directory, f"ckpt_{int(step):09d}.pt")

    def checkpoints(self):
        """Paths of the checkpoint files present, oldest step first."""
        found = []
        for name in os.listdir(self.directory):
            m = self._NAME.match(name)
            if m:
                found.append((int(m.group(1)), os.path.join(self.directory, name)))
        return [p for _, p in sorted(found)]

    def save(self, step, model, optimizer=None, scheduler=None, extra=None):
        """Snapshot everything now; write it now (sync) or in a background thread (async)."""
        step = count("step", step, minimum=0)
        self.wait()
        state = {
            "step": step,
            "model": snapshot(model.state_dict()),
            "optimizer": snapshot(optimizer.state_dict()) if optimizer is not None else None,
            "scheduler": snapshot(scheduler.state_dict()) if scheduler is not None else None,
            "rng": snapshot(rng_state()),
            "extra": snapshot(extra) if extra is not None else None,
        }
        path = self.path_for(step)
        if not self.async_save:
            self._write(path, state)
            return path
        self._thread = threading.Thread(target=self._write_background, args=(path, state), daemon=True)
        self._thread.start()
        return path

    def _write(self, path, state):
        write_checkpoint_file(path, state)
        for old in self.checkpoints()[:-self.keep_last]:
            os.remove(old)

    def _write_background(self, path, state):
        try:
            self._write(path, state)
        except BaseException as e:  # noqa: BLE001 (re-raised in the training thread by wait())
            self._error = e

    def wait(self):
        """Block until the background write (if any) has finished; re-raise its error."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            err, self._error = self._error, None
            raise RuntimeError(f"background checkpoint write failed: {err}") from err

    def close(self):
        self.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def latest(self):
        """Path of the newest checkpoint that passes the integrity check (corrupt ones are
        skipped with a warning), or None when there is none."""
        self.wait()
        for path in reversed(self.checkpoints()):
            try:
                read_checkpoint_file(path)
            except (ValueError, OSError, RuntimeError) as e:
                warnings.warn(f"skipping unreadable checkpoint: {e}", RuntimeWarning, stacklevel=2)
                continue
            return path
        return None

    def load(self, model, optimizer=None, scheduler=None, path=None, restore_rng=True):
        """Restore states from `path` (default: latest valid) into the given objects; returns
        {"step": ..., "extra": ...}. Raises FileNotFoundError when there is no checkpoint and
        ValueError when the file is corrupt."""
        self.wait()
        if path is None:
            path = self.latest()
            if path is None:
                raise FileNotFoundError(f"no valid checkpoint in {self.directory}")
        state = read_checkpoint_file(path)
        model.load_state_dict(state["model"])
        if optimizer is not None:
            if state["optimizer"] is None:
                raise ValueError(f"checkpoint {path} has no optimizer state")
            optimizer.load_state_dict(state["optimizer"])
        if scheduler is not None:
            if state["scheduler"] is None:
                raise ValueError(f"checkpoint {path} has no scheduler state")
            scheduler.load_state_dict(state["scheduler"])
        if restore_rng:
            set_rng_state(state["rng"])
        return {"step": state["step"], "extra": state["extra"]}
