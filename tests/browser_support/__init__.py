"""Helpers of the browser end-to-end test (tests/test_browser.py): availability of Chromium and
Playwright, a JupyterLab server in an isolated home, and a process-tree killer.

JupyterLab runs as a subprocess in its own session, with HOME, JUPYTER_CONFIG_DIR,
JUPYTER_DATA_DIR, JUPYTER_RUNTIME_DIR, IPYTHONDIR and the lab's user-settings and workspace
folders under a temporary folder, so nothing of the real user's setup applies. The venv's
own share/jupyter and etc/jupyter stay on the search paths (sys.prefix), so the nbgrader lab
and server extensions installed there are on, exactly as for a student of the course.
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

#: Debian's Chromium; Playwright drives it (never `playwright install`: its CDN is unreachable).
CHROMIUM = os.environ.get("TAS_CHROMIUM", "/usr/bin/chromium")
INSTALL_HINT = ("apt-get install -y chromium && .venv/bin/pip install 'playwright>=1.40' "
                "(or: make venv, which installs the dev extras); never `playwright install`")


def browser_missing() -> str | None:
    """Why the browser test cannot run here, or None when it can."""
    why = []
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        why.append(f"no Chromium executable at {CHROMIUM}")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as e:
        why.append(f"Playwright for Python is not importable ({e})")
    return "; ".join(why) or None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: JupyterLab user settings: no news / update prompts, no extension manager (no network), every
#: cell rendered (no windowing: off-screen cells would not be in the DOM), no bracket closing.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/extensionmanager-extension/plugin.jupyterlab-settings": {"enabled": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings":
        {"windowingMode": "none", "codeCellConfig": {"autoClosingBrackets": False}},
    "@jupyterlab/codemirror-extension/plugin.jupyterlab-settings":
        {"defaultConfig": {"autoClosingBrackets": False}},
    "@jupyterlab/apputils-extension/sessionDialogs.jupyterlab-settings": {},
}

SERVER_CONFIG = {
    # No language servers (nothing here needs them; they slow the start).
    "ServerApp": {"jpserver_extensions": {"jupyter_lsp": False}},
    "LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"},
}


def isolated_env(base: Path) -> dict:
    """The environment of a JupyterLab run whose user-level state all lives under `base`."""
    home = base / "home"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "IPYTHON", "PYTEST", "PW_"))}
    env.update(
        HOME=str(home),
        JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
        JUPYTER_DATA_DIR=str(home / ".local" / "share" / "jupyter"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(base / "lab" / "user-settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "lab" / "workspaces"),
        IPYTHONDIR=str(home / ".ipython"),
        PYTHONUNBUFFERED="1",
        PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    )
    for key in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                "JUPYTERLAB_WORKSPACES_DIR", "IPYTHONDIR"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    settings = Path(env["JUPYTERLAB_SETTINGS_DIR"])
    for rel, value in LAB_SETTINGS.items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(value, indent=1))
    (home / ".jupyter" / "jupyter_server_config.json").write_text(json.dumps(SERVER_CONFIG, indent=1))
    return env


def kill_tree(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM `pid` (a server: it shuts its kernels down), then SIGKILL whatever of its process
    tree is left, kernels included (jupyter_client starts them in sessions of their own, so a
    process-group kill alone would miss them)."""
    try:
        import psutil
    except ImportError:  # psutil comes with the Jupyter stack; this is a fallback
        psutil = None
    procs = []
    if psutil is not None:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    if psutil is not None:
        _, alive = psutil.wait_procs(procs, timeout=timeout)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=5)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class LabServer:
    """`jupyter lab` on 127.0.0.1 (free port, random token) in `root_dir`, isolated under `base`."""

    def __init__(self, root_dir: Path, base: Path, name: str, start_timeout: float = 60.0):
        self.root_dir = Path(root_dir)
        self.base = Path(base)
        self.name = name
        self.start_timeout = start_timeout
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.base / f"{name}-jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "LabServer":
        """Launch and wait until it answers."""
        self.launch()
        self.wait_ready()
        return self

    def launch(self) -> "LabServer":
        """Launch without waiting (start two servers side by side, then `wait_ready` each)."""
        self.base.mkdir(parents=True, exist_ok=True)
        env = isolated_env(self.base)
        cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
               f"--port={self.port}", "--port-retries=0",
               f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root_dir}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI run as root
            cmd.append("--allow-root")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=self.root_dir, env=env, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return self

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        req = urllib.request.Request(f"{self.url}/api/status",
                                     headers={"Authorization": f"token {self.token}"})
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} JupyterLab exited with {self.proc.returncode} "
                                   f"before answering; log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(req, timeout=2) as r:
                    if r.status == 200:
                        return
                    last = f"HTTP {r.status}"
            except (urllib.error.URLError, OSError) as e:
                last = str(e)
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"{self.name} JupyterLab did not answer {self.url}/api/status within "
                           f"{self.start_timeout:.0f} s ({last}); log {self.log_path}:\n{self.log_tail()}")

    def get_json(self, path: str):
        req = urllib.request.Request(f"{self.url}{path}",
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def page_url(self, path: str) -> str:
        return f"{self.url}{path}{'&' if '?' in path else '?'}token={self.token}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_tree(self.proc.pid)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def artifacts_dir(repo: Path) -> Path:
    """$TAS_ARTIFACTS/browser (default <repo>/artifacts/browser)."""
    base = Path(os.environ.get("TAS_ARTIFACTS") or repo / "artifacts")
    out = base / "browser"
    out.mkdir(parents=True, exist_ok=True)
    return out
