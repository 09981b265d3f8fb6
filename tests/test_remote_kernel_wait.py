"""A grader-side request reads its reply from iopub, which can trail the shell reply by seconds on
a loaded machine. `RemoteKernel._wait` must keep reading until the reply arrives (or the idle
status, or REPLY_GRACE seconds with neither), not give up 2 s after the shell reply: that was the
flake of session 37 ("your kernel did not answer the grader's request (reset ...)")."""
from __future__ import annotations

import queue
import time

from solutions_lib import _remote as R
from solutions_lib.course import remote_kernel
from solutions_lib.course.remote_kernel import RemoteKernel


class _Channel:
    def __init__(self, client):
        self.client = client

    def msg_ready(self):
        return bool(self.client.shell)


class _LaggingClient:
    """The shell reply is ready at once; the reply and the idle status reach iopub `lag` s later."""

    def __init__(self, msg_id, lag, idle=True):
        self.shell = [{"parent_header": {"msg_id": msg_id}, "content": {"status": "ok"}}]
        self.shell_channel = _Channel(self)
        parent = {"msg_id": msg_id}
        self.iopub = [{"parent_header": parent, "msg_type": "display_data", "content": {"data": {R.MIME: {"ok": 7}}}}]
        if idle:
            self.iopub.append({"parent_header": parent, "msg_type": "status", "content": {"execution_state": "idle"}})
        self.ready_at = time.monotonic() + lag

    def get_shell_msg(self, timeout=0):
        if not self.shell:
            raise queue.Empty
        return self.shell.pop(0)

    def get_iopub_msg(self, timeout=0):
        if time.monotonic() < self.ready_at or not self.iopub:
            time.sleep(min(timeout, 0.05))
            raise queue.Empty
        return self.iopub.pop(0)

    def is_alive(self):
        return True


def _kernel(client):
    k = RemoteKernel.__new__(RemoteKernel)
    k.kc, k.deadline, k.on_stream = client, time.monotonic() + 60, None
    return k


def test_a_reply_that_trails_the_shell_reply_by_seconds_is_still_read():
    collect = {}
    status = _kernel(_LaggingClient("m1", lag=3.0))._wait("m1", collect)
    assert status == "ok"
    assert collect.get("reply") == {"ok": 7}


def test_without_an_idle_status_the_wait_ends_soon_after_the_reply(monkeypatch):
    monkeypatch.setattr(remote_kernel, "REPLY_GRACE", 5.0)
    collect = {}
    t0 = time.monotonic()
    status = _kernel(_LaggingClient("m2", lag=0.5, idle=False))._wait("m2", collect)
    assert (status, collect.get("reply")) == ("ok", {"ok": 7})
    assert time.monotonic() - t0 < 4.5      # the 2 s after the shell reply, not REPLY_GRACE


def test_with_neither_reply_nor_idle_status_the_wait_gives_up_after_the_grace(monkeypatch):
    monkeypatch.setattr(remote_kernel, "REPLY_GRACE", 1.0)
    client = _LaggingClient("m3", lag=0.0, idle=False)
    client.iopub = []
    collect = {}
    assert _kernel(client)._wait("m3", collect) == "ok"
    assert collect == {}
