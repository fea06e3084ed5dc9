"""A graded test cell, run in the grader against the student's kernel.

The cell's code runs here, in the grading process, never in the student's kernel. Its
names that the cell does not define itself (the student's functions, the notebook's
variables) are looked up in the kernel when the code first reads them (`Namespace`), and
come as data (numbers, lists, Values) or as proxies (`KernelProxy`: a function, a class or
an object of the student's), through which each call, attribute or item is one request to
the kernel (`autograder.kernel.agent`, over `autograder.kernel.wire`). What comes back is
the grader's own: a Value is made again here, node by node, from the operations of the
engine, and a node that no operation makes is refused (`wire.UnverifiedValue`); gradients are
this process's `backward()`.

The checks (`autograder.kernel.checks`, the same code as in JupyterLab) run here and record
in the mode the grader asks (`records`: `witness`, what the student's code gave, for
`judge`; `reference`, the instructor's solution, what is expected). Nothing of the
cell's source, its hidden inputs or the checks reaches the kernel, only the arguments of
each call, when it is made.

`run_test` runs one cell and returns a `TestOutcome`.
"""

import builtins
import contextlib
import dataclasses
import operator
import os
import random
import socket
import sys
import tempfile
import threading
import time
from typing import Any

from autograder.grading.records import recording
from autograder.kernel import crash, wire
from autograder.kernel.wire import (
    Closed,
    Peer,
    UnverifiedValue,
    WireError,
    library_name,
    receive,
    send,
)

__all__ = ["KernelError", "KernelGone", "KernelProxy", "Session", "TestOutcome", "run_test",
           "short_socket_path"]


class KernelGone(WireError):
    """The kernel stopped answering (it died, was stopped, or closed the connection)."""


class KernelError(Exception):
    """What the grader's code sees for an error of the student's code of a kind that is not
    Python's own (the kind's name, its message and what the notebook shows for it): an
    instance of a subclass named as the kernel's kind (`kernel_error`), whose message is
    the kernel's, so that it reads "Kind: message" as in the student's kernel, and the
    test's `task` fingerprints it as a student's kernel does (`diagnosis.diagnose_raised`
    hashes the type's name and the message: a known mistake that raises is named in the
    graded notebook as in JupyterLab)."""


def kernel_error(kind: str, message: str) -> KernelError:
    """A `KernelError` of the kernel's `kind` (a class of that name, made for it: the name
    is data, never looked up) with the kernel's `message`."""
    cls = type(kind, (KernelError,), {"__module__": __name__})
    exc = cls(message)
    exc.kind = kind  # type: ignore[attr-defined]
    return exc


_PROXY_ATTRIBUTES = ("__globals__", "__dict__", "__module__", "__name__", "__qualname__",
                     "__doc__")


class KernelProxy:
    """A function, class or object of the student's kernel, as the grader's code sees it."""

    __slots__ = ("_session", "_ref", "_kind", "_label")

    def __init__(self, session: "Session", ref: str, kind: str, label: str) -> None:
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_ref", ref)
        object.__setattr__(self, "_kind", kind)
        object.__setattr__(self, "_label", label)

    def _do(self, do: str, **fields: Any) -> Any:
        return self._session.request(do, t={"K": self._ref}, **fields)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        peer = self._session.peer
        return self._do("call", a={"L": [peer.encode(x, 1) for x in args]},
                        k={"D": [[k, peer.encode(v, 1)] for k, v in kwargs.items()]})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and name not in _PROXY_ATTRIBUTES:
            raise AttributeError(name)
        return self._do("attr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._do("setattr", name=name, v=self._session.peer.encode(value, 1))

    def __getitem__(self, key: Any) -> Any:
        return self._do("item", key=self._session.peer.encode(key, 1))

    def __setitem__(self, key: Any, value: Any) -> None:
        peer = self._session.peer
        self._do("setitem", key=peer.encode(key, 1), v=peer.encode(value, 1))

    def __delitem__(self, key: Any) -> None:
        self._do("delitem", key=self._session.peer.encode(key, 1))

    def __len__(self) -> int:
        return self._do("len")

    def __iter__(self) -> Any:
        return iter(self._do("iter"))

    def __repr__(self) -> str:
        return f"<{self._kind} {self._label} of the student's notebook>"

    # names an instance would read from this class: asked of the kernel instead
    __module__ = property(lambda self: self.__getattr__("__module__"))  # type: ignore
    __doc__ = property(lambda self: self.__getattr__("__doc__"))  # type: ignore


class GraderPeer(Peer):
    side = "g"

    def __init__(self, sock: socket.socket, session: "Session") -> None:
        super().__init__(sock)
        self.session = session
        self.proxies: dict[str, KernelProxy] = {}
        self.sent: dict[str, tuple] = {}  # a list or dict sent: the items it held then
        # an argument sent whole: its leaves (`wire.Whole`), and its lists, dicts and objects
        # with what they held then (sent as its name while they hold the same)
        self.wholes: dict[str, tuple[wire.Whole, list[tuple[Any, tuple]]]] = {}

    def encode(self, obj: Any, depth: int = 0) -> Any:
        if isinstance(obj, KernelProxy):  # the student's own object, back to the kernel
            return {"K": obj._ref}
        return super().encode(obj, depth)

    def handle(self, obj: Any, depth: int = 0) -> Any:
        # a function, class or module of the library, or a method of a library object: as
        # its name (the kernel uses its own copy). Only the grader sends these: what the
        # kernel holds is the kernel's, and runs there
        name = library_name(obj)
        if name is not None:
            return {"F": name}
        bound = getattr(obj, "__self__", None)
        func = getattr(obj, "__func__", None)
        if bound is not None and func is not None and library_name(func) is not None:
            return {"B": [self.encode(bound, depth + 1), func.__name__]}
        if _is_module(obj):  # a model the test built: the kernel gets its own copy
            import base64
            import io

            import torch

            buffer = io.BytesIO()
            torch.save(obj, buffer)
            return {"TM": base64.b64encode(buffer.getvalue()).decode()}
        if callable(obj):
            name = self._known(obj) or self._name(obj)
            label = getattr(obj, "__name__", None) or type(obj).__name__
            return {"G": name, "n": str(label)[:200]}
        raise WireError(f"the test hands the student's code a {type(obj).__name__}, which "
                        f"cannot be sent")

    def container(self, obj: Any, depth: int) -> Any:
        if isinstance(obj, tuple):
            return super().container(obj, depth)
        name = self._known(obj) or self._name(obj)
        if depth > 1 or isinstance(obj, (list, dict)):  # a list or dict: `_container`
            return self._container(obj, name, depth)
        kept = self.wholes.get(name)
        if kept is not None and all(_same_snapshot(before, _snapshot(shell))
                                    for shell, before in kept[1]):
            kept[0].changed(self)  # the kernel's copy holds the same; only leaves changed
            return {"S": name}
        out = self._container(obj, name, depth)
        shells: list[tuple[Any, tuple]] = []

        def shell(x: Any, _name: str | None) -> bool:
            shells.append((x, _snapshot(x)))
            return True

        whole = wire.whole_leaves(self, obj, shell)
        if whole is not None:
            self.wholes[name] = (whole, shells)
        else:
            self.wholes.pop(name, None)
        return out

    def _container(self, obj: Any, name: str, depth: int) -> Any:
        if isinstance(obj, (list, dict)):
            items = obj if isinstance(obj, list) else list(obj.values())
            snapshot = _snapshot(obj)
            before = self.sent.get(name)
            if before is not None and _same_snapshot(before, snapshot) \
                    and self.sync_items(items):
                # the kernel's copy holds these very items: only their leaves' changes go
                return {"P": name}
            out = super().container(obj, depth)
            out["m"] = name
            self.sent[name] = snapshot
            return out
        cls = library_name(type(obj))
        state = {"D": [[k, self.encode(v, depth + 1)] for k, v in wire.state(obj).items()]}
        return {"O": [cls, state], "m": name}

    def generator(self, rng: Any) -> Any:
        out = super().generator(rng)
        out["m"] = self._known(rng) or self._name(rng)
        return out

    def decode_other(self, tag: str, body: Any, data: dict, depth: int) -> Any:
        if tag == "K":
            if not isinstance(body, str) or not body.startswith("k"):
                raise WireError("a kernel object whose name is not the kernel's")
            proxy = self.proxies.get(body)
            if proxy is None:
                proxy = KernelProxy(self.session, body, str(data.get("t", "object"))[:20],
                                    str(data.get("n", ""))[:200])
                self.proxies[body] = proxy
                self.objects[body] = proxy
            return proxy
        if tag == "G":
            obj = self.objects.get(body) if isinstance(body, str) else None
            if obj is None or not body.startswith("g"):
                raise WireError(f"{body!r} is not a function the grader sent")
            return obj
        return super().decode_other(tag, body, data, depth)

    def write_back(self, entries: Any) -> None:
        """Put what the student's code changed in the grader's lists, dicts and objects into
        them."""
        if not isinstance(entries, list):
            raise WireError("write-backs that are not a list")
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and entry[0].startswith("g")):
                raise WireError("a write-back that is not [name, contents]")
            obj = self.objects.get(entry[0])
            new = self.decode(entry[1], 1)
            self.sent.pop(entry[0], None)  # sent again in full next time
            for key, (_, shells) in list(self.wholes.items()):
                if key == entry[0] or any(shell is obj for shell, _ in shells):
                    del self.wholes[key]
            if isinstance(obj, random.Random) and isinstance(new, random.Random):
                obj.setstate(new.getstate())
            elif isinstance(obj, list) and isinstance(new, list):
                obj[:] = new
            elif isinstance(obj, dict) and isinstance(new, dict):
                obj.clear()
                obj.update(new)
            elif obj is not None and isinstance(new, dict) and hasattr(obj, "__dict__") \
                    and not callable(obj) and all(isinstance(k, str) for k in new):
                own = {k: v for k, v in vars(obj).items() if k.startswith("_")}
                vars(obj).clear()
                vars(obj).update({k: v for k, v in new.items() if not k.startswith("_")})
                vars(obj).update(own)
            else:
                raise WireError(f"a write-back to {entry[0]!r} that does not fit it")


def _is_module(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _snapshot(obj: Any) -> tuple:
    """What a list, dict or object holds, item by item (compared by identity)."""
    if isinstance(obj, list):
        return tuple(obj)
    items = obj if isinstance(obj, dict) else wire.state(obj)
    return (tuple(items), tuple(items.values()))


def _same_snapshot(a: tuple, b: tuple) -> bool:
    if len(a) != len(b):
        return False
    if len(a) == 2 and isinstance(a[0], tuple) and isinstance(b[0], tuple):
        return _same_snapshot(a[0], b[0]) and _same_snapshot(a[1], b[1])
    return all(map(operator.is_, a, b))


class Session:
    """The grader's connection to one kernel for one test cell."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.peer = GraderPeer(sock, self)
        self.forged: list[str] = []  # what the kernel sent that its operations do not make

    def request(self, do: str, **fields: Any) -> Any:
        """Send one request; serve the kernel's calls of the grader's functions until the
        answer comes; return the answer as the grader's value (or raise the student's
        error)."""
        peer = self.peer
        self._send(peer.message(do=do, **fields))
        while True:
            message = self._receive()
            if "cb" in message:
                self._call_back(message)
                continue
            try:
                peer.write_back(message.get("w", []))
            except UnverifiedValue as exc:
                self.forged.append(str(exc))
                raise
            if "missing" in message:
                info = message["missing"] if isinstance(message["missing"], dict) else {}
                raise _Absent(info)
            if "error" in message:
                raise _student_error(message["error"])
            if "ok" not in message:
                raise WireError("an answer with neither a result nor an error")
            try:
                return peer.decode(message["ok"])
            except UnverifiedValue as exc:
                self.forged.append(str(exc))
                raise

    def _send(self, message: dict) -> None:
        try:
            send(self.sock, message)
        except OSError as exc:
            raise KernelGone(f"the kernel stopped answering ({exc})") from None

    def _receive(self) -> dict:
        try:
            message = receive(self.sock)
        except OSError as exc:
            raise KernelGone(f"the kernel stopped answering ({exc})") from None
        except Closed:
            raise KernelGone("the kernel stopped answering (it closed the connection)") \
                from None
        try:
            return self.peer.take(message)
        except UnverifiedValue as exc:
            self.forged.append(str(exc))
            raise

    def _call_back(self, message: dict) -> None:
        peer = self.peer
        try:
            function = peer.decode({"G": message.get("cb")})
            args = peer.decode(message.get("a", {"L": []}))
            kwargs = peer.decode(message.get("k", {"D": []}))
            if not isinstance(args, list) or not isinstance(kwargs, dict) or not all(
                    isinstance(k, str) for k in kwargs):
                raise WireError("a call back whose arguments are malformed")
        except WireError as exc:
            self._send(peer.message(do="raise", error={"type": "RuntimeError",
                                                       "message": str(exc)}))
            return
        try:
            result = function(*args, **kwargs)
            answer = peer.message(do="return", v=peer.encode(result))
        except (KernelGone, UnverifiedValue):
            raise
        except Exception as exc:  # noqa: BLE001 (the test's function raised: the
            # student's code that called it sees the error, as in JupyterLab)
            answer = peer.message(do="raise", error={"type": type(exc).__name__,
                                                     "message": str(exc)[:4000]})
        self._send(answer)

    def run_in_kernel(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        """`function` (of the library) called in the student's kernel, on the student's
        objects; what it returns comes back as data."""
        peer = self.peer
        name = library_name(function)
        if name is None:
            raise WireError(f"{function!r} is not a function of the library")
        return self.request("call", t={"F": name}, a={"L": [peer.encode(x, 1) for x in args]},
                            k={"D": [[k, peer.encode(v, 1)] for k, v in kwargs.items()]})

    @staticmethod
    def is_proxy(obj: Any) -> bool:
        return isinstance(obj, KernelProxy)

    def get(self, name: str) -> Any:
        try:
            return self.request("get", name=name)
        except _Absent as absent:  # what the kernel said of it: the words the test's
            crash.ABSENT[name] = absent.info  # `task` gives (`crash.broken_lines`)
            raise KeyError(name) from None

    def end(self) -> None:
        with contextlib.suppress(OSError, WireError):
            send(self.sock, {"do": "end"})


class _Absent(Exception):
    def __init__(self, info: dict) -> None:
        super().__init__(str(info.get("name", "")))
        self.info = info


def _student_error(error: Any) -> BaseException:
    """The student's error, as an exception of the same kind where it is Python's own,
    carrying the lines the notebook shows for it."""
    if not isinstance(error, dict):
        error = {}
    kind = str(error.get("type", "Exception"))[:100]
    message = str(error.get("message", ""))[:4000]
    lines = [str(x)[:2000] for x in error.get("lines", [])[:200]] \
        if isinstance(error.get("lines"), list) else []
    if kind == "KeyboardInterrupt":
        exc: BaseException = KeyboardInterrupt()
    elif kind == "WireError":
        exc = WireError(message)
    else:
        cls = getattr(builtins, kind, None)
        exc = None  # type: ignore[assignment]
        if isinstance(cls, type) and issubclass(cls, Exception) and cls not in (
                SystemExit, GeneratorExit, StopIteration, StopAsyncIteration):
            with contextlib.suppress(Exception):
                exc = cls(message)
        if exc is None:
            exc = kernel_error(kind, message)
    exc.kernel_lines = lines  # type: ignore[attr-defined]
    if isinstance(error.get("name"), str) and isinstance(exc, NameError):
        with contextlib.suppress(AttributeError):
            exc.name = error["name"]
    if error.get("not_yet_released") is True:
        exc.not_yet_released = True  # type: ignore[attr-defined]
    return exc


class Namespace(dict):
    """The test cell's globals: what the cell defines, and the notebook's names, looked up
    in the kernel the first time the cell reads them."""

    def __init__(self, session: Session, filename: str) -> None:
        super().__init__(__name__="__main__", __builtins__=builtins, __file__=filename)
        self.session = session

    def __missing__(self, name: str) -> Any:
        if hasattr(builtins, name) or name.startswith("__"):
            raise KeyError(name)
        value = self.session.get(name)
        self[name] = value
        return value


@dataclasses.dataclass
class TestOutcome:
    records: list  # what the checks recorded (`records`)
    error: tuple | None = None  # (kind, message, lines shown) when the cell raised
    forged: list = dataclasses.field(default_factory=list)  # Values refused, why
    seconds: float = 0.0


def _lines_for(exc: BaseException, filename: str, hidden: frozenset) -> list[str]:
    """What the test cell shows for `exc`: the student's lines as the kernel rendered them,
    after the test's line (when it is not a hidden test's)."""
    render = getattr(exc, "_render_traceback_", None)
    if render is not None and not getattr(exc, "kernel_lines", None):
        with contextlib.suppress(Exception):
            return [str(x) for x in render()]
    kernel = list(getattr(exc, "kernel_lines", None) or [])
    tb = exc.__traceback__
    line = 0
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    head = kernel[:1] or [f"{type(exc).__name__}: {exc}"]
    test = [f"Graded test cell, line {line}, the test:"] if line and line not in hidden else []
    notes = [str(n) for n in getattr(exc, "__notes__", None) or ()]
    return head + test + kernel[1:] + [n for n in notes if n not in kernel]


def run_test(sock: socket.socket, source: str, filename: str, mode: str,
             hidden: frozenset = frozenset()) -> TestOutcome:
    """Run the test cell `source` (its witness or reference version) here, against the
    kernel at the other end of `sock`; its checks record in the mode `mode`."""
    started = time.monotonic()
    session = Session(sock)
    namespace = Namespace(session, filename)
    crash.ABSENT.clear()
    wire.REMOTE = session
    error = None
    with recording(mode, filename) as records, wire.collector_paused():
        try:
            code = compile(source, filename, "exec", dont_inherit=True)
            exec(code, namespace)  # noqa: S102 (the course's own test code)
        except BaseException as exc:  # noqa: BLE001 (every failure fails the test)
            kind = getattr(exc, "kind", None) or type(exc).__name__
            error = (kind, _message(exc), _lines_for(exc, filename, hidden))
        finally:
            wire.REMOTE = None
            crash.ABSENT.clear()
            session.end()
    return TestOutcome(list(records), error, list(session.forged),
                       time.monotonic() - started)


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:4000]
    except Exception:  # noqa: BLE001
        return ""


def short_socket_path(folder: str, name: str) -> tuple[str, str | None]:
    """A path to connect to `folder/name` that fits a Unix socket's 107 bytes: itself, or a
    link to it in a short temporary folder (returned second, to remove afterwards)."""
    path = os.path.join(folder, name)
    if len(path.encode()) < 100:
        return path, None
    short = tempfile.mkdtemp(prefix="rp-")
    link = os.path.join(short, "s")
    os.symlink(path, link)
    return link, short


def connect(path: str, deadline: float, stop: threading.Event) -> socket.socket:
    """Connect to the kernel's socket at `path`, waiting for the kernel to listen."""
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if stop.is_set() or time.monotonic() > deadline:
                raise KernelGone("the kernel did not take the test (no connection)") from None
            time.sleep(0.005)


async def graded_cell(run_cell: Any, kc: Any, *, grade_id: str, source: str, mode: str,
                      hidden: frozenset, host_folder: str, kernel_folder: str,
                      wait: float) -> TestOutcome:
    """Run a graded test cell: `run_cell()` (nbclient's execution of the cell, awaited)
    sends the kernel only `MARKER` and a header naming a socket in its folder
    (`kernel_folder`, which is `host_folder` here); meanwhile a thread of this process
    connects to that socket and runs the test's `source` against the kernel (`run_test`).
    `wait`: seconds to wait for the kernel to take the test. Returns what the test did."""
    import asyncio
    import json
    import secrets

    from autograder.grading.testsource import sending
    from autograder.kernel.policy import MARKER

    name = f"c{secrets.token_hex(6)}.sock"
    host_path, short = short_socket_path(host_folder, name)
    code = f"{MARKER}{json.dumps({'grade_id': grade_id, 'socket': f'{kernel_folder}/{name}'})}\n"
    filename = f"<graded test cell {grade_id}>"
    stop = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            sock = connect(host_path, time.monotonic() + wait, stop)
        except KernelGone as exc:
            box["outcome"] = TestOutcome([], ("KernelGone", str(exc), [f"KernelGone: {exc}"]))
            return
        box["sock"] = sock
        try:
            box["outcome"] = run_test(sock, source, filename, mode, hidden)
        finally:
            with contextlib.suppress(OSError):
                sock.close()

    thread = threading.Thread(target=work, name=f"test {grade_id}", daemon=True)
    thread.start()
    try:
        with sending(kc, code):
            await run_cell()
    finally:
        stop.set()
        await asyncio.to_thread(thread.join, 10)
        if thread.is_alive():  # the kernel is gone or stuck: the test cannot go on
            sock = box.get("sock")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            await asyncio.to_thread(thread.join, 10)
        if short is not None:
            import shutil

            shutil.rmtree(short, ignore_errors=True)
    outcome = box.get("outcome")
    if outcome is None:
        outcome = TestOutcome([], ("KernelGone", "the kernel stopped answering during the test",
                                   ["KernelGone: the kernel stopped answering during the test"]))
    return outcome
