"""The grader's end of the requests to a student's kernel (solutions_lib/_remote.py is the
kernel's): `RemoteKernel` sends one request at a time over a blocking client of its own and
decodes the reply (plain data, handles, mirrored arrays/tensors/generators, modules by state);
`RemoteObject` is a kernel object the grader holds. Used by grader_side.py (which explains the
design); nothing here runs student code in the grader."""
from __future__ import annotations

import base64
import builtins
import json
import os
import queue
import sys
import time
import types
import weakref

from .. import _remote as R

#: Largest reply the grader decodes from one request.
REPLY_BYTES = 64 * 2**20
#: seconds to wait for a request's output after the shell reply when neither it nor the idle status came
REPLY_GRACE = 30.0
#: Modules a name in the kernel may stand for in a grader-side cell (by name, imported here).
MODULES = {"numpy", "torch", "scipy", "math", "cmath", "statistics", "random", "itertools", "functools",
           "collections", "fractions", "decimal", "json", "re", "string", "textwrap", "dataclasses",
           "typing", "copy", "operator", "hashlib", "importlib", "types", "warnings", "solutions_lib",
           "matplotlib", "pandas"}


#: Attributes with dunder names a test may read from a kernel object (`fn.__name__`).
READABLE_DUNDERS = {"__name__", "__qualname__", "__doc__", "__module__"}



class RemoteError(Exception):
    """An exception of the student's code whose type is not a Python builtin."""


_REMOTE_TYPES: dict[str, type] = {}
_NOT_RAISED = {"SystemExit", "KeyboardInterrupt", "GeneratorExit", "StopIteration", "StopAsyncIteration"}


class RemoteSystemExit(SystemExit):
    """`SystemExit` raised by the student's code (argparse's error exit): `expect_raises(...,
    SystemExit)` sees it; the grader catches it like any error of the cell, it never exits."""


def remote_exception(info: dict) -> BaseException:
    name = str(info.get("type", "Exception"))[:100]
    msg = str(info.get("message", ""))
    if name == "SystemExit" and info.get("builtin"):
        return RemoteSystemExit(int(msg) if msg.lstrip("-").isdigit() else msg)
    if info.get("builtin") and name not in _NOT_RAISED:
        t = getattr(builtins, name, None)
        if isinstance(t, type) and issubclass(t, Exception):
            try:
                return t(msg)
            except Exception:  # noqa: BLE001  (a builtin that takes other arguments)
                pass
    if name == "GradingError" or name == "DelegationError":
        from .. import grading
        return getattr(grading, name)(msg)
    if not name.isidentifier():
        name = "RemoteError"
    t = _REMOTE_TYPES.get(name)
    if t is None:
        t = _REMOTE_TYPES[name] = type(name, (RemoteError,), {})
    return t(msg)


class CellTimeoutError(TimeoutError):
    pass


class KernelDied(RuntimeError):
    pass


class RequestBudgetExceeded(RuntimeError):
    """A cell too chatty to run grader-side (the trusted run then runs it in the kernel)."""


class RemoteObject:
    """A kernel object that is not plain data (see the module docstring)."""

    __slots__ = ("_tas_kernel", "_tas_id", "_tas_type", "__weakref__")

    def __init__(self, kernel, hid: int, typename: str):
        object.__setattr__(self, "_tas_kernel", kernel)
        object.__setattr__(self, "_tas_id", hid)
        object.__setattr__(self, "_tas_type", typename)

    def _tas(self, op: str, **kw):
        return self._tas_kernel.request({"op": op, "target": {"t": "handle", "id": self._tas_id}, **kw})

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__") and name not in READABLE_DUNDERS:
            raise AttributeError(name)
        return self._tas("getattr", name=name)

    def __enter__(self):
        return self._tas("call", args=self._tas_kernel.encode([]), kwargs=self._tas_kernel.encode({}),
                         method="__enter__")

    def __exit__(self, exc_type, exc, tb):
        self._tas("call", args=self._tas_kernel.encode([None, None, None]), kwargs=self._tas_kernel.encode({}),
                  method="__exit__")
        return False   # the kernel never decides whether the grader's exception is swallowed

    def __setattr__(self, name, value):
        self._tas("setattr", name=name, value=self._tas_kernel.encode(value))

    def __call__(self, *args, **kwargs):
        return self._tas("call", args=self._tas_kernel.encode(list(args)),
                         kwargs=self._tas_kernel.encode(dict(kwargs)))

    def __getitem__(self, key):
        return self._tas("getitem", key=self._tas_kernel.encode(key))

    def __setitem__(self, key, value):
        self._tas("setitem", key=self._tas_kernel.encode(key), value=self._tas_kernel.encode(value))

    def __len__(self):
        n = self._tas("len")
        if type(n) is not int:
            raise TypeError("len() of a kernel object must be an int")
        return n

    def __iter__(self):
        items = self._tas("iter")
        if type(items) is not list:
            raise TypeError("iterating a kernel object must give a list")
        return iter(items)

    def __contains__(self, key):
        return self._tas("contains", key=self._tas_kernel.encode(key)) is True

    def __bool__(self):
        b = self._tas("bool")
        if type(b) is not bool:
            raise TypeError("bool() of a kernel object must be a bool")
        return b

    def __eq__(self, other):
        return self._tas("eq", other=self._tas_kernel.encode(other))

    def __ne__(self, other):
        r = self.__eq__(other)
        return (not r) if type(r) is bool else r

    def __hash__(self):
        return hash((id(self._tas_kernel), self._tas_id))

    def __repr__(self):
        r = self._tas("repr")
        return r if type(r) is str else f"<{self._tas_type} in your kernel>"

    def __str__(self):
        r = self._tas("str")
        return r if type(r) is str else f"<{self._tas_type} in your kernel>"


class RemoteKernel:
    """Requests to one kernel (see the module docstring), over a blocking client of its own."""

    def __init__(self, connection_info: dict, *, on_stream=None):
        from jupyter_client.blocking import BlockingKernelClient

        info = {k: v for k, v in connection_info.items() if k != "session"}
        self.kc = BlockingKernelClient()
        self.kc.load_connection_info(info)
        self.kc.start_channels()
        self.on_stream = on_stream
        self.deadline = float("inf")
        self.handles: dict[int, RemoteObject] = {}
        self.mirrors: dict[int, weakref.ref] = {}
        self.mirror_of: dict[int, int] = {}
        self.signatures: dict[int, tuple] = {}
        self.next_mirror = 1
        self.drops: list[int] = []
        self.watches: list[dict] = []
        self.states: dict[int, weakref.ref] = {}
        self.requests = 0                       # in the running cell
        self.next_watch = 0
        self.budget: int | None = None          # the trusted run's limit (grader_side.TRUSTED_REQUESTS)
        self.state_of: dict[int, int] = {}

    def close(self) -> None:
        try:
            self.kc.stop_channels()
        except Exception:  # noqa: BLE001
            pass

    # -- encoding --
    def _mirror_id(self, obj) -> int:
        rid = self.mirror_of.get(id(obj))
        if rid is not None and self.mirrors.get(rid, lambda: None)() is obj:
            return rid
        rid = self.next_mirror
        self.next_mirror += 1

        def gone(_ref, rid=rid, key=id(obj)):
            self.mirrors.pop(rid, None)
            self.signatures.pop(rid, None)
            if self.mirror_of.get(key) == rid:
                del self.mirror_of[key]
            self.drops.append(rid)

        self.mirrors[rid] = weakref.ref(obj, gone)
        self.mirror_of[id(obj)] = rid
        self.signatures[rid] = R.signature(obj)
        return rid

    def _handle_out(self, obj) -> dict:
        if isinstance(obj, RemoteObject):
            if obj._tas_kernel is not self:
                raise R.RemoteDataError("a proxy of another kernel")
            return {"t": "handle", "id": obj._tas_id}
        if isinstance(obj, types.ModuleType):
            return {"t": "module", "name": obj.__name__}
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.nn.Module):
            return self._state_out(obj)
        names = [(getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)),
                 (getattr(obj, "__module__", None), getattr(obj, "__name__", None))]   # torch.softmax
        owner = getattr(obj, "__objclass__", None)     # a method of a C type (torch.Tensor.softmax)
        if owner is not None:
            names.append((getattr(owner, "__module__", None),
                          f"{getattr(owner, '__qualname__', '')}.{getattr(obj, '__name__', '')}"))
        for mod, qual in names:
            if isinstance(mod, str) and isinstance(qual, str) and "<" not in qual and mod in sys.modules:
                found = sys.modules[mod]
                try:
                    for part in qual.split("."):
                        found = getattr(found, part)
                except AttributeError:
                    found = None
                if found is obj:
                    return {"t": "qualname", "module": mod, "qualname": qual}
        raise R.RemoteDataError(f"a {type(obj).__name__} made by the test cannot be sent to your kernel")

    def _state_out(self, obj) -> dict:
        """An nn.Module of torch's or the kit's own classes, sent by its state the first time (its
        parameters and buffers mirrored, so training in the kernel shows here) and by id after."""
        sid = self.state_of.get(id(obj))
        if sid is not None and self.states.get(sid, lambda: None)() is obj:
            return {"t": "state", "id": sid}
        cls = type(obj)
        mod, qual = cls.__module__, cls.__qualname__
        if not (mod.startswith("torch.") or mod.startswith("solutions_lib.")) or "<" in qual:
            raise R.RemoteDataError(f"a {cls.__name__} made by the test cannot be sent to your kernel "
                                    "(only torch's and the course's own modules can)")
        found = sys.modules.get(mod)
        for part in qual.split("."):
            found = getattr(found, part, None)
        if found is not cls:
            raise R.RemoteDataError(f"a {cls.__name__} made by the test cannot be sent to your kernel")
        sid = self.next_mirror
        self.next_mirror += 1
        self.states[sid] = weakref.ref(obj)
        self.state_of[id(obj)] = sid
        return {"t": "state", "id": sid, "module": mod, "qualname": qual, "state": self.encode(dict(vars(obj)))}

    def encode(self, x):
        return R.encode(x, mirror=self._mirror_id, handle=self._handle_out)

    def decode(self, p):
        def mirror(rid, payload):
            ref = self.mirrors.get(int(rid))
            obj = ref() if ref is not None else None
            if obj is None:
                raise R.RemoteDataError("a mirrored array that no longer exists")
            return obj

        def handle(d):
            if d.get("t") == "state":
                ref = self.states.get(int(d.get("id", -1)))
                obj = ref() if ref is not None else None
                if obj is None:
                    raise R.RemoteDataError("an object the grader did not send")
                return obj
            if d.get("t") == "module":
                name = str(d.get("name", ""))
                if name.split(".")[0] not in MODULES:
                    raise R.RemoteDataError(f"module {name!r} is not one a test may use")
                import importlib
                return importlib.import_module(name)
            if d.get("t") != "handle":
                raise R.RemoteDataError("the kernel may only send handles")
            hid = int(d["id"])
            h = self.handles.get(hid)
            if h is None:
                h = self.handles[hid] = RemoteObject(self, hid, str(d.get("type", "object"))[:100])
            return h

        return R.decode(p, mirror=mirror, handle=handle)

    # -- requests --
    def _outgoing_sync(self) -> dict:
        out = {}
        for rid, ref in list(self.mirrors.items()):
            obj = ref()
            if obj is None:
                continue
            sig = R.signature(obj)
            if sig != self.signatures.get(rid):
                out[str(rid)] = R.mirror_payload(obj)
                self.signatures[rid] = sig
        return out

    def _incoming_sync(self, sync: dict) -> None:
        for rid, payload in (sync or {}).items():
            ref = self.mirrors.get(int(rid))
            obj = ref() if ref is not None else None
            if obj is None:
                continue
            new = R.apply_mirror(obj, payload)
            if new is not obj:
                torch = sys.modules.get("torch")
                if torch is not None and isinstance(obj, torch.Tensor):
                    with torch.no_grad():
                        obj.data = new.detach()
                    obj.grad = new.grad
            self.signatures[int(rid)] = R.signature(obj)

    def request(self, req: dict):
        self.requests += 1
        if self.budget is not None and self.requests > self.budget:
            raise RequestBudgetExceeded(f"the cell made more than {self.budget} requests to the kernel")
        req = dict(req)
        req["sync"] = self._outgoing_sync()
        if self.drops:
            req["drop"], self.drops = self.drops, []
        if self.watches and req["op"] not in ("resolve", "own", "swap", "unswap", "lookup", "reset", "seed"):
            spec = self.watches[-1]["spec"]
            req["watch"] = spec
            if spec.get("sent"):       # the kernel keeps the forbidden objects of a watch it has seen
                req["watch"] = {k: v for k, v in spec.items() if k not in ("forbidden", "sent")}
            spec["sent"] = True
        b64 = base64.b64encode(json.dumps(req).encode()).decode("ascii")
        code = f"__import__('solutions_lib._remote', fromlist=['serve']).serve('{b64}')"
        if time.monotonic() >= self.deadline:
            raise CellTimeoutError("the cell ran past the grader's time limit")
        self.drain()
        reply, error = None, None
        if os.environ.get("TAS_GRADER_SIDE_DEBUG"):
            print(f"[grader-side] {req['op']} {req.get('name', '')}", file=sys.__stderr__, flush=True)
        for attempt in range(2):
            msg_id = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False, stop_on_error=False)
            status = self._wait(msg_id, collect := {})
            reply, error = collect.get("reply"), collect.get("error")
            if status != "aborted":
                break   # an aborted request (the kernel was aborting after an error) never ran: send it again
        if not isinstance(reply, dict):
            if error is not None:
                raise remote_exception({"type": error.get("ename", "Exception"), "builtin": error.get("ename") in
                                        dir(builtins), "message": error.get("evalue", "")})
            raise RemoteError(f"your kernel did not answer the grader's request ({req['op']} "
                              f"{req.get('name', '')}; was solutions_lib._remote replaced?)".replace(" ;", ";"))
        if len(json.dumps(reply)) > REPLY_BYTES:
            raise R.RemoteDataError(f"a reply from your kernel over {REPLY_BYTES // 2**20} MiB")
        self._incoming_sync(reply.get("sync"))
        if reply.get("delegation") and self.watches:
            self.watches[-1]["problems"].append(str(reply["delegation"])[:2000])
        if "error" in reply:
            if os.environ.get("TAS_GRADER_SIDE_DEBUG") and isinstance(reply["error"], dict):
                print(f"[grader-side] {req['op']} raised in the kernel: {reply['error'].get('where', '')}",
                      file=sys.__stderr__, flush=True)
            raise remote_exception(reply["error"] if isinstance(reply["error"], dict) else {})
        ok = reply.get("ok")
        if isinstance(ok, dict) and ok.get("t") == "names":
            found = {}
            for k, v in (ok.get("v") or {}).items():
                try:
                    found[str(k)] = self.decode(v)
                except R.RemoteDataError:
                    pass   # a name the test may not take from the kernel stays unbound
            return found
        return self.decode(ok)

    def drain(self) -> None:
        """Drop what this client's queues hold from the cells the kernel ran meanwhile: a queue
        left full (a cell that publishes thousands of messages) would drop the next replies."""
        for channel in (self.kc.iopub_channel, self.kc.shell_channel):
            for _ in range(1_000_000):
                try:
                    if not channel.msg_ready():
                        break
                    channel.get_msg(timeout=0)
                except queue.Empty:
                    break

    def _wait(self, msg_id: str, collect: dict) -> str:
        """Read the kernel's messages for request `msg_id` until its output is complete (the idle
        status; when the status never comes, 2 s after the shell reply once the reply or an error
        has been read, else REPLY_GRACE s: the output on iopub can trail the shell reply by seconds
        on a loaded machine); returns the reply's status ("ok", "error", "aborted" or "" when none
        came)."""
        status, grace, last = "", None, None
        while True:
            now = time.monotonic()
            if now >= self.deadline:
                self.interrupt()
                raise CellTimeoutError("your code ran past the grader's time limit for this cell")
            if grace is not None and now >= (grace if collect else last):
                return status
            if not status:
                try:
                    while self.kc.shell_channel.msg_ready():
                        m = self.kc.get_shell_msg(timeout=0)
                        if (m.get("parent_header") or {}).get("msg_id") == msg_id:
                            status = str((m.get("content") or {}).get("status", "ok"))
                            grace, last = time.monotonic() + 2.0, time.monotonic() + REPLY_GRACE
                            if status == "aborted":
                                return status
                except queue.Empty:
                    pass
            try:
                msg = self.kc.get_iopub_msg(timeout=min(self.deadline - now, 0.2))
            except queue.Empty:
                if not status and not self.kc.is_alive():
                    raise KernelDied("your notebook's kernel died while the grader was calling your code "
                                     "(out of memory, or the process was killed)") from None
                continue
            if (msg.get("parent_header") or {}).get("msg_id") != msg_id:
                continue
            kind, content = msg.get("msg_type"), msg.get("content") or {}
            if kind == "display_data" and R.MIME in (content.get("data") or {}):
                collect["reply"] = content["data"][R.MIME]
            elif kind == "stream" and self.on_stream is not None:
                self.on_stream(str(content.get("text", "")))
            elif kind == "error":
                collect["error"] = content
            elif kind == "status" and content.get("execution_state") == "idle":
                if not status:   # the shell reply trails the idle status: take it now
                    t_end = time.monotonic() + max(min(self.deadline - time.monotonic(), 60), 1)
                    while time.monotonic() < t_end:
                        try:
                            m = self.kc.get_shell_msg(timeout=1)
                        except queue.Empty:
                            continue
                        if (m.get("parent_header") or {}).get("msg_id") == msg_id:
                            status = str((m.get("content") or {}).get("status", "ok"))
                            break
                return status or "ok"

    def interrupt(self) -> None:
        """Stop what the kernel runs (an interrupt request on the control channel)."""
        try:
            msg = self.kc.session.msg("interrupt_request", {})
            self.kc.control_channel.send(msg)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 10:
                try:
                    m = self.kc.get_iopub_msg(timeout=1)
                except queue.Empty:
                    continue
                if m.get("msg_type") == "status" and (m.get("content") or {}).get("execution_state") == "idle":
                    break
        except Exception:  # noqa: BLE001
            pass
