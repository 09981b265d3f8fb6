"""A control group per grading kernel: one memory limit and one task limit for the whole
sandbox, whatever it forks.

`prlimit` limits each *process* (`RLIMIT_AS` per process, and `RLIMIT_NPROC` is ignored for a
grader running as root), so a submission that forks could multiply its memory and fill the
machine's process table. A cgroup counts the kernel and every process or thread it starts:

- `memory` (v1 `memory.limit_in_bytes`, v2 `memory.max`): resident memory of the whole sandbox;
  past it the kernel's OOM killer stops a process *inside* the group (a child, or the kernel,
  which then shows as a notebook that failed to run, never as a silent zero);
- `pids` (`pids.max`): processes plus threads; `fork()`/`clone()` past it fail with EAGAIN.

Where it works: cgroup v1 hierarchies writable by the grader (root in a container or VM), or a
cgroup v2 folder delegated to the grader whose controllers can be enabled for children (e.g.
run the grader inside `systemd-run --scope -p Delegate=yes ...`). Elsewhere `KernelCgroup.create`
returns None with the reason in `cgroup_support()`, and only the per-process rlimits apply.
"""
from __future__ import annotations

import os
import shlex
import signal
import time
import uuid

CGROUP_ROOT = "/sys/fs/cgroup"


def _own_paths() -> dict[str, str]:
    """{controller or '' for v2: path of this process's cgroup} from /proc/self/cgroup."""
    out = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(",") if ctrls else [""]:
                    out[c] = path
    except OSError:
        pass
    return out


def _mounts() -> dict[str, str]:
    """{'memory'|'pids'|'' (v2): mount point} from /proc/self/mountinfo."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fstype, _, opts = (right.split() + ["", ""])[:3]
                point = left.split()[4]
                if fstype == "cgroup2":
                    out.setdefault("", point)
                elif fstype == "cgroup":
                    for c in ("memory", "pids"):
                        if c in opts.split(","):
                            out.setdefault(c, point)
    except OSError:
        pass
    return out


PREFIX = "tas-kernel-"
#: An empty kernel cgroup older than this was left by a grader that was killed before its
#: clean-up ran; younger ones may belong to a kernel another grader is starting right now.
STALE_AFTER_S = 600


def sweep_stale(parent: str, max_age_s: float = STALE_AFTER_S) -> int:
    """Remove empty kernel cgroups under `parent` older than `max_age_s`; returns how many.
    (rmdir fails on a cgroup that still holds a process, so a live kernel's group stays.)"""
    removed = 0
    try:
        names = [n for n in os.listdir(parent) if n.startswith(PREFIX)]
    except OSError:
        return 0
    now = time.time()
    for n in names:
        d = os.path.join(parent, n)
        try:
            if now - os.stat(d).st_mtime > max_age_s:
                os.rmdir(d)
                removed += 1
        except OSError:
            pass
    return removed


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


class KernelCgroup:
    """The cgroup folder(s) of one kernel, with their limits already written."""

    def __init__(self, folders: list[str], version: int):
        self.folders = folders
        self.version = version

    @classmethod
    def create(cls, memory_bytes: int, max_tasks: int, name: str | None = None) -> "KernelCgroup | None":
        """Make the cgroup and write its limits; None when this machine does not allow it."""
        if memory_bytes <= 0 or max_tasks <= 0:
            raise ValueError(f"cgroup limits must be positive, got memory {memory_bytes} B and {max_tasks} tasks")
        name = name or f"{PREFIX}{uuid.uuid4().hex[:12]}"
        mounts, own = _mounts(), _own_paths()
        made: list[str] = []
        try:
            if "memory" in mounts and "pids" in mounts:
                for ctrl in ("memory", "pids"):
                    parent = os.path.join(mounts[ctrl], own.get(ctrl, "/").lstrip("/"))
                    sweep_stale(parent)
                    d = os.path.join(parent, name)
                    os.mkdir(d)
                    made.append(d)
                mem, pids = made
                _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory_bytes))
                swap = os.path.join(mem, "memory.memsw.limit_in_bytes")
                if os.path.exists(swap):
                    _write(swap, str(memory_bytes))
                _write(os.path.join(pids, "pids.max"), str(max_tasks))
                return cls(made, 1)
            if "" in mounts:
                parent = os.path.join(mounts[""], own.get("", "/").lstrip("/"))
                with open(os.path.join(parent, "cgroup.subtree_control")) as f:
                    enabled = f.read().split()
                missing = [c for c in ("memory", "pids") if c not in enabled]
                if missing:
                    _write(os.path.join(parent, "cgroup.subtree_control"), " ".join("+" + c for c in missing))
                sweep_stale(parent)
                d = os.path.join(parent, name)
                os.mkdir(d)
                made.append(d)
                _write(os.path.join(d, "memory.max"), str(memory_bytes))
                swap = os.path.join(d, "memory.swap.max")
                if os.path.exists(swap):
                    _write(swap, "0")
                _write(os.path.join(d, "pids.max"), str(max_tasks))
                return cls(made, 2)
        except OSError:
            cls(made, 0).remove()
            return None
        return None

    def wrap(self, cmd: list[str]) -> list[str]:
        """`cmd` started by a shell that first moves itself into the cgroup(s), then execs."""
        moves = " && ".join(f"echo $$ > {shlex.quote(os.path.join(d, 'cgroup.procs'))}" for d in self.folders)
        return ["/bin/sh", "-c", f'{moves} && exec "$@"', "tas-cgroup", *cmd]

    def pids(self) -> list[int]:
        out: set[int] = set()
        for d in self.folders:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    out |= {int(x) for x in f.read().split()}
            except OSError:
                pass
        return sorted(out)

    def remove(self, wait_s: float = 5.0) -> None:
        """Kill whatever is left in the group and delete its folders."""
        deadline = time.monotonic() + wait_s
        for d in reversed(self.folders):
            while True:
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
        self.folders = []


_SUPPORT: tuple[bool, str] | None = None


def cgroup_support() -> tuple[bool, str]:
    """(True, 'cgroup v1'|'cgroup v2') when a kernel cgroup can be made here, else (False, why)."""
    global _SUPPORT
    if _SUPPORT is None:
        if not os.path.isdir(CGROUP_ROOT):
            _SUPPORT = (False, f"no {CGROUP_ROOT}")
        else:
            g = KernelCgroup.create(2**30, 64, name=f"tas-probe-{os.getpid()}")
            if g is None:
                _SUPPORT = (False, "no writable cgroup with the memory and pids controllers "
                                   "(grade as root, or inside a delegated cgroup v2 scope)")
            else:
                _SUPPORT = (True, f"cgroup v{g.version}")
                g.remove()
    return _SUPPORT
