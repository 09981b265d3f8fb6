"""Sandboxed grading kernels (on by default for autograde: `TAS_SANDBOX`, see config.py).

`SandboxKernelManager` is a jupyter_client `AsyncKernelManager` whose kernel command is wrapped
in bubblewrap (`bwrap`) and `prlimit`, so that the student's kernel started by stock
`nbgrader autograde`

- sees only a whitelisted filesystem: the system (`/usr` and a few files of `/etc`, read-only),
  the Python installation and the virtual environment (read-only), the `solutions_lib` package
  (read-only; it is installed for students anyway), a private `/tmp` and `$HOME` (tmpfs), and
  its own working folder: a *scratch copy* of the autograded notebook's folder (its regular
  files but the notebooks, no links; in the private per-kernel folder, deleted with the
  kernel) mounted at the real folder's path, so paths look the same to student code while the
  real folder, where nbgrader writes the results, is never writable by the kernel (a link
  planted there would make nbgrader write through it, and its permission step chmod the
  target). Every `*.ipynb` name of the folder is masked (the autograded copy on disk already
  holds the hidden tests). Only the executed notebook comes back, as data over the kernel
  protocol. `source/`, the gradebook, `submitted/`, other students' folders, the instructor's
  home are not mounted;
- has no network (`--unshare-net`: only a loopback device of its own, nothing listens there),
  its own PID/IPC/UTS namespaces, no capabilities, an empty environment (no `TAS_DB_URL`);
- has CPU-time (`RLIMIT_CPU`), address-space (`RLIMIT_AS`) and file-size (`RLIMIT_FSIZE`: a
  write past it fails with EFBIG) limits per process, and, where
  the machine allows it, a cgroup of its own (cgroups.py) with one memory limit and one
  process+thread limit for everything it starts (`fork` cannot multiply the budget);
- talks to the grader over ZMQ **ipc** sockets (Unix socket files) in a private per-kernel
  folder bound into the sandbox: TCP on 127.0.0.1 cannot cross a network namespace.

Interrupts (nbgrader's cell timeout) are sent as `interrupt_request` messages on the control
channel, not as SIGINT to the process group (that group holds `bwrap` itself, which SIGINT
would kill).

Use: `enable_sandbox(c, root)` on the nbgrader Config, after `apply_course_config(c, root)`.
"""
from __future__ import annotations

import glob
import os
import shutil
import stat
import subprocess
import sys
import tempfile

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, List, Unicode, default

from .cgroups import KernelCgroup, cgroup_support
from .limits import KERNEL_FILE_BYTES

#: /etc entries a Python/torch kernel needs (everything else in /etc stays hidden).
ETC_WHITELIST = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf",
                 "passwd", "group", "hosts", "ssl", "ca-certificates", "alternatives", "fonts",
                 "mime.types", "os-release", "debian_version", "python3", "matplotlibrc"]
SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]

DEFAULT_CPU_SECONDS = 1800            # total CPU time of one kernel (all threads)
DEFAULT_MEMORY_BYTES = 16 * 2**30     # address space per process; torch reserves a lot of virtual memory
DEFAULT_GROUP_MEMORY_BYTES = 8 * 2**30  # resident memory of the whole sandbox (cgroup)
DEFAULT_MAX_TASKS = 2048              # processes + threads of the whole sandbox (cgroup)
DEFAULT_FILE_BYTES = KERNEL_FILE_BYTES  # largest file one process may write (RLIMIT_FSIZE)
SANDBOX_UID = 65534                   # "nobody" inside the user namespace


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def _prlimit() -> str | None:
    return shutil.which("prlimit")


def _package_dir() -> str:
    """The `solutions_lib` package folder (the kernel imports `solutions_lib.grading`)."""
    return os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def copy_scratch(src: str, dest: str) -> None:
    """Copy the regular files under `src` (not `*.ipynb`, no links, no special files) to
    `dest`, keeping the folder structure: the kernel's working folder (see the module docstring)."""
    os.makedirs(dest, exist_ok=True)
    with os.scandir(src) as it:
        entries = list(it)
    for e in entries:
        target = os.path.join(dest, e.name)
        if e.is_dir(follow_symlinks=False):
            copy_scratch(e.path, target)
        elif e.is_file(follow_symlinks=False) and not e.name.endswith(".ipynb"):
            try:
                fd = os.open(e.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as fin:
                if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
                    continue
                with open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 2**20)


def remove_tree(path: str) -> None:
    """rmtree that also removes what the kernel made unreadable (a folder chmod 000)."""
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                shutil.rmtree(p, ignore_errors=True)
            else:
                func(p)
        except OSError:
            pass
    if os.path.lexists(path):
        shutil.rmtree(path, onerror=fix)


def bwrap_command(kernel_cmd: list[str], cwd: str, runtime_dir: str, *, cpu_seconds: int,
                  memory_bytes: int, ro_binds: list[str] = (), mask_notebooks: bool = True,
                  env: dict[str, str] | None = None, hide: str | None = None,
                  file_bytes: int = DEFAULT_FILE_BYTES, scratch: str | None = None,
                  view_binds: list[tuple[str, str]] = ()) -> list[str]:
    """`prlimit ... bwrap ... -- kernel_cmd`: see the module docstring.

    `view_binds`: (source, path) pairs bound read-only at `path` (the view of `solutions_lib`
    with the reference answers withheld, at the package's own path: withheld_view.py).

    `scratch`: a folder mounted at `cwd` instead of `cwd` itself (the real folder is then not
    mounted at all).

    `hide` (the course root): a read-only empty tmpfs is mounted there before the kernel's own
    folder (and the venv or package, when they live under it) are bound back in, so even the
    skeleton of folders above the kernel's folder cannot be written. A folder under /tmp gets
    the same treatment at its first component below /tmp (else it would sit in the writable
    private /tmp).
    """
    cwd = os.path.realpath(cwd)
    if hide:
        hide = os.path.realpath(hide)
        if not (cwd + "/").startswith(hide.rstrip("/") + "/"):
            hide = None
    if hide is None and cwd.startswith("/tmp/"):
        hide = "/tmp/" + cwd[len("/tmp/"):].split("/")[0]
    args = [_prlimit() or "prlimit", f"--cpu={cpu_seconds}", f"--as={memory_bytes}", "--core=0",
            f"--fsize={file_bytes}",
            "--", _bwrap() or "bwrap",
            "--unshare-all", "--die-with-parent", "--cap-drop", "ALL",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "localhost",  # resolvable through /etc/hosts (gloo and c10d look it up)
            "--clearenv"]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    # A hosts file of its own: names of the loopback addresses resolve without DNS (there is no
    # network; a lookup that falls through to DNS fails with EAI_AGAIN and torch's c10d/gloo
    # print warnings on stderr, which nbgrader scores as a failed test cell).
    hosts = os.path.join(runtime_dir, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                "::ffff:127.0.0.1\tlocalhost\n")
    args += ["--ro-bind", hosts, "/etc/hosts"]
    for name in ETC_WHITELIST:
        if name == "hosts":
            continue
        p = os.path.join("/etc", name)
        if os.path.lexists(p):
            args += ["--ro-bind", os.path.realpath(p), p] if not os.path.islink(p) else ["--symlink", os.readlink(p), p]
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/tmp/home"]
    if hide and hide != cwd:
        args += ["--tmpfs", hide]
    seen = set()
    for p in [sys.base_prefix, sys.prefix, *ro_binds]:
        p = os.path.realpath(p)
        if p in seen or not os.path.exists(p) or p == "/usr" or p.startswith("/usr/"):
            continue
        seen.add(p)
        args += ["--ro-bind", p, p]
    for src, dest in view_binds:
        args += ["--ro-bind", os.path.realpath(src), os.path.realpath(dest)]
    # the private per-kernel folder (connection file, ipc sockets) and the kernel's own folder
    args += ["--bind", runtime_dir, runtime_dir, "--bind", scratch or cwd, cwd]
    if mask_notebooks:
        for nb in sorted(glob.glob(os.path.join(glob.escape(cwd), "*.ipynb"))):
            args += ["--ro-bind", "/dev/null", nb]
    # bwrap builds the tree on a tmpfs; make it read-only so the mount points' parents (e.g. the
    # course root above the kernel's folder) cannot be written even inside the sandbox
    args += ["--remount-ro", "/"]
    if hide and hide != cwd:
        args += ["--remount-ro", hide]
    args += ["--chdir", cwd]
    env = dict(env or {})
    env.setdefault("PATH", os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]))
    env.setdefault("HOME", "/tmp/home")
    env.setdefault("LANG", "C.UTF-8")
    env.setdefault("JPY_PARENT_PID", "1")  # pid 1 is bwrap's init: no parent poller, no console notice
    env.setdefault("MPLCONFIGDIR", "/tmp/home/.mpl")
    for k in ("NBGRADER_EXECUTION", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ", "PYTHONHASHSEED"):
        if k in os.environ:
            env.setdefault(k, os.environ[k])
    for k, v in sorted(env.items()):
        args += ["--setenv", k, v]
    return args + ["--", *kernel_cmd]


class SandboxKernelManager(AsyncKernelManager):
    """An AsyncKernelManager that starts its kernel inside bubblewrap (see module docstring)."""

    cpu_seconds = Integer(DEFAULT_CPU_SECONDS, config=True, help="RLIMIT_CPU of the kernel (s).")
    memory_bytes = Integer(DEFAULT_MEMORY_BYTES, config=True, help="RLIMIT_AS of each process (bytes).")
    file_bytes = Integer(DEFAULT_FILE_BYTES, config=True, help="RLIMIT_FSIZE of each process (bytes).")
    use_scratch = Bool(True, config=True, help="Run the kernel in a scratch copy of its folder "
                       "(the real folder is not writable by the kernel).")
    group_memory_bytes = Integer(DEFAULT_GROUP_MEMORY_BYTES, config=True,
                                 help="Resident memory of the kernel and all it starts (cgroup; bytes).")
    max_tasks = Integer(DEFAULT_MAX_TASKS, config=True,
                        help="Processes + threads of the kernel and all it starts (cgroup pids.max).")
    use_cgroup = Bool(True, config=True, help="Put each kernel in a cgroup of its own where the machine allows.")
    extra_ro_binds = List(Unicode(), config=True, help="More paths bound read-only into the sandbox.")
    mask_notebooks = Bool(True, config=True, help="Hide the *.ipynb files of the kernel's folder.")
    course_root = Unicode("", config=True, help="Mounted as an empty read-only folder (but for the "
                          "kernel's own folder, the venv and solutions_lib when they live under it).")

    withhold_references = Bool(True, config=True, help="Bind the view of solutions_lib with the reference "
                               "answers withheld (withheld_view.py) instead of the package itself.")

    def _package_binds(self) -> tuple[list[str], list[tuple[str, str]]]:
        """(plain read-only binds, view binds) for the `solutions_lib` package."""
        if not self.withhold_references:
            return [_package_dir()], []
        from .withheld_view import build_view
        return [], [(str(build_view()), _package_dir())]

    @default("transport")
    def _default_transport(self):
        return "ipc"

    async def _async_pre_start_kernel(self, **kw):
        if self.transport != "ipc":
            raise RuntimeError("SandboxKernelManager needs transport='ipc' (no TCP across network namespaces)")
        # A private folder per kernel for the connection file and the ipc socket files; it is the
        # only grader-side folder, besides the notebook's own, that the sandbox can write to.
        # (Kept across a restart: the connection file and sockets stay where clients expect them.)
        if not getattr(self, "_sandbox_dir", None):
            self._sandbox_dir = tempfile.mkdtemp(prefix="tas-kernel-")
            os.chmod(self._sandbox_dir, 0o700)
            self.connection_file = os.path.join(self._sandbox_dir, "kernel.json")
            self.ip = os.path.join(self._sandbox_dir, "zmq")
        # SIGINT to the process group would hit bwrap, not the kernel: interrupt by message.
        self.kernel_spec.interrupt_mode = "message"
        kernel_cmd, kw = await super()._async_pre_start_kernel(**kw)
        cwd = kw.get("cwd") or os.getcwd()
        env = {k: v for k, v in (kw.get("env") or {}).items() if k.startswith(("JPY_SESSION", "NBGRADER_")) or k == "TAS_TERM_SEED"}
        scratch = None
        if self.use_scratch:
            # a fresh copy at every start (a restart begins again from the folder as nbgrader made it)
            scratch = os.path.join(self._sandbox_dir, "work")
            remove_tree(scratch)
            copy_scratch(os.path.realpath(cwd), scratch)
        wrapped = bwrap_command(kernel_cmd, cwd, self._sandbox_dir, cpu_seconds=self.cpu_seconds,
                                memory_bytes=self.memory_bytes,
                                ro_binds=[*self._package_binds()[0], *self.extra_ro_binds],
                                view_binds=self._package_binds()[1],
                                mask_notebooks=self.mask_notebooks, env=env, hide=self.course_root or None,
                                file_bytes=self.file_bytes, scratch=scratch)
        if self.use_cgroup and getattr(self, "_cgroup", None) is None:
            self._cgroup = KernelCgroup.create(self.group_memory_bytes, self.max_tasks)
        if getattr(self, "_cgroup", None) is not None:
            wrapped = self._cgroup.wrap(wrapped)
        return wrapped, kw

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        d = getattr(self, "_sandbox_dir", None)
        if d and not restart:
            remove_tree(d)
            self._sandbox_dir = None
        group = getattr(self, "_cgroup", None)
        if group is not None and not restart:
            group.remove()
            self._cgroup = None


# The async base class binds these names to its own coroutine methods at class creation;
# point them at ours.
SandboxKernelManager.cleanup_resources = SandboxKernelManager._async_cleanup_resources
SandboxKernelManager.pre_start_kernel = SandboxKernelManager._async_pre_start_kernel


def _sandbox_execute_class():
    from .execute import CourseExecute

    class SandboxExecute(CourseExecute):
        """The course's Execute preprocessor (execute.py: nbgrader's, with an output cap) with
        sandboxed kernels.

        `c.Execute.kernel_manager_class` alone does not work: nbgrader's `Execute.__init__`
        passes `kernel_manager_class=AsyncKernelManager` as a keyword argument, which wins over
        the config. Settings under `c.Execute` (timeout, extra_arguments...) still apply here.
        """

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
            super().__init__(*args, **kwargs)

    return SandboxExecute


SandboxExecute = None  # set on first use (nbgrader imports are slow)


def get_sandbox_execute():
    global SandboxExecute
    if SandboxExecute is None:
        SandboxExecute = _sandbox_execute_class()
    return SandboxExecute


_AVAILABLE: tuple[bool, str] | None = None


def sandbox_available() -> tuple[bool, str]:
    """(True, "") when `bwrap` can start a sandbox here, else (False, why)."""
    global _AVAILABLE
    if _AVAILABLE is not None:
        return _AVAILABLE
    if not sys.platform.startswith("linux"):
        _AVAILABLE = (False, f"sandboxed grading needs Linux (this is {sys.platform})")
    elif not _bwrap():
        _AVAILABLE = (False, "bubblewrap is not installed (apt-get install -y bubblewrap)")
    elif not _prlimit():
        _AVAILABLE = (False, "prlimit (util-linux) is not installed")
    else:
        d = tempfile.mkdtemp(prefix="tas-sbx-probe-")
        try:
            cmd = bwrap_command([sys.executable, "-c", "import os; print(os.getuid())"], d, d,
                                cpu_seconds=10, memory_bytes=DEFAULT_MEMORY_BYTES)
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if p.returncode == 0 and p.stdout.strip() == str(SANDBOX_UID):
                _AVAILABLE = (True, "")
            else:
                why = (p.stderr.strip().splitlines() or ["no output"])[-1]
                _AVAILABLE = (False, f"bwrap cannot create a sandbox here (user namespaces?): {why}")
        except (OSError, subprocess.SubprocessError) as e:
            _AVAILABLE = (False, f"bwrap failed: {e}")
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return _AVAILABLE


def enable_sandbox(c, root: str, *, cpu_seconds: int = DEFAULT_CPU_SECONDS,
                   memory_bytes: int = DEFAULT_MEMORY_BYTES,
                   group_memory_bytes: int = DEFAULT_GROUP_MEMORY_BYTES,
                   max_tasks: int = DEFAULT_MAX_TASKS, file_bytes: int = DEFAULT_FILE_BYTES) -> None:
    """Make `nbgrader autograde` (the Execute preprocessor) start sandboxed kernels.

    Call after `apply_course_config(c, root)`. Everything under the course `root` is hidden
    from the kernel but its own folder, the venv and `solutions_lib`. `cpu_seconds` and
    `memory_bytes` and `file_bytes` bind each process (prlimit); `group_memory_bytes` and `max_tasks` bind the
    whole sandbox where a cgroup can be made (cgroups.py), and are skipped silently elsewhere
    (`describe_limits()` says which apply on this machine).
    """
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    from .execute import CourseExecute

    sandbox_execute = get_sandbox_execute()
    current = c.Autograde.autograde_preprocessors if "autograde_preprocessors" in c.Autograde else \
        list(Autograde.class_traits()["autograde_preprocessors"].default())
    c.Autograde.autograde_preprocessors = [sandbox_execute if p in (Execute, CourseExecute) else p for p in current]
    # Only autograde's Execute is sandboxed: `nbgrader validate` (the student's Validate, which
    # also reads `c.Execute`) must run the student's own kernel with the real package, or a
    # solved notebook whose visible tests use references fails Validate (issue 25).
    c.SandboxKernelManager.transport = "ipc"
    c.SandboxKernelManager.course_root = os.path.abspath(root)
    c.SandboxKernelManager.cpu_seconds = int(cpu_seconds)
    c.SandboxKernelManager.memory_bytes = int(memory_bytes)
    c.SandboxKernelManager.group_memory_bytes = int(group_memory_bytes)
    c.SandboxKernelManager.max_tasks = int(max_tasks)
    c.SandboxKernelManager.file_bytes = int(file_bytes)


def describe_limits(cpu_seconds: int = DEFAULT_CPU_SECONDS, memory_bytes: int = DEFAULT_MEMORY_BYTES,
                    group_memory_bytes: int = DEFAULT_GROUP_MEMORY_BYTES,
                    max_tasks: int = DEFAULT_MAX_TASKS, file_bytes: int = DEFAULT_FILE_BYTES) -> list[str]:
    """What a grading kernel on this machine is held to, one line per mechanism."""
    ok, why = sandbox_available()
    if not ok:
        return [f"sandbox: NOT available ({why}); kernels run with the grader's rights"]
    lines = ["sandbox: bubblewrap (own mount, PID, network, IPC, UTS and user namespaces; no network; "
             "course root hidden but the kernel's folder)",
             f"per process: {cpu_seconds} s CPU, {memory_bytes / 2**30:g} GiB address space, "
             f"{file_bytes / 2**20:g} MiB per file written (prlimit)",
             "working folder: a scratch copy of the notebook's folder, deleted with the kernel"]
    cg_ok, cg = cgroup_support()
    lines.append(f"whole sandbox: {group_memory_bytes / 2**30:g} GiB resident memory, {max_tasks} processes+threads ({cg})"
                 if cg_ok else f"whole sandbox: no cgroup limits ({cg}); only the per-process limits apply")
    return lines
