"""The kernel's end of a graded test cell: it answers the grader's calls, and does nothing
else.

At grading time the grader sends a graded test cell to the kernel as `MARKER` and a JSON
header (the cell's grade id and the path of a Unix socket), never the cell's source:
`gradekernel` hands that to `serve`, which listens on the socket, takes the grader's one
connection, and answers its requests (`wire`) until the grader says the test is over:

- ``get``: the value of a name of the notebook (or, when the notebook lacks it, what a
  student should hear: the answer cell that did not compile, a name like it);
- ``call``, ``attr``, ``setattr``, ``item``, ``setitem``, ``delitem``, ``len``, ``iter``,
  ``repr``: that operation on one of the kernel's objects, with what the grader sent;
- ``end``: the test is over.

An error in the student's code goes back as its kind, message and the lines a notebook
shows for it (`crash`: the student's frames and the hint of a known slip), never with the
kernel's own frames. A function the grader handed in (a layer of the test's, a probe) is a
stub here that calls the grader back and waits for its answer, serving the grader's own
requests meanwhile. What the student's code prints during a call goes to the test cell's
output, as in JupyterLab.

Nothing here decides anything: the grader checks what comes back (`wire`: every Value is
made again from its operations on the grader's side).
"""

import builtins
import operator
import os
import random
import socket
import sys
from typing import Any

from autograder.kernel import crash
from autograder.kernel.wire import (
    Peer,
    Whole,
    WireError,
    collector_paused,
    receive,
    send,
    state,
    whole_leaves,
)
from microgpt.engine import Value

__all__ = ["serve", "KernelPeer", "Stub"]

CONNECT_WAIT = 60.0  # seconds the kernel waits for the grader to connect


class Stub:
    """A function of the grader's, as the kernel's code sees it: calling it asks the
    grader to run it (a layer the test hands in, a probe)."""

    def __init__(self, peer: "KernelPeer", name: str, label: str) -> None:
        self._peer = peer
        self._name = name
        self.__name__ = self.__qualname__ = label or "function"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._peer.call_back(self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<function {self.__name__} of the test>"


class GraderRaised(Exception):
    """The grader's function raised; the kernel's code sees an error of the same kind."""


def _same_kind(kind: str, message: str) -> BaseException:
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001
            pass
    return GraderRaised(f"{kind}: {message}")


def _shallow(obj: Any) -> Any:
    """What a sent list, dict or object holds, item by item (the items themselves, compared
    by identity: a number or string replaced by an equal one counts as a change, which
    only sends it back again)."""
    if type(obj) is random.Random:
        return obj.getstate()
    if isinstance(obj, list):
        return tuple(obj)
    items = obj if isinstance(obj, dict) else state(obj)
    return tuple(items), tuple(items.values())


def _unchanged(before: Any, now: Any) -> bool:
    if isinstance(before, tuple) and len(before) == 2 and isinstance(before[0], tuple) \
            and isinstance(now, tuple) and len(now) == 2:
        return _same_items(before[0], now[0]) and _same_items(before[1], now[1])
    if type(before) is tuple and type(now) is tuple and before and isinstance(before[0], int) \
            and len(before) == 3 and isinstance(before[1], tuple):  # a generator's state
        return before == now
    return _same_items(before, now)


def _same_items(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


class KernelPeer(Peer):
    side = "k"

    def __init__(self, sock: socket.socket, namespace: dict) -> None:
        super().__init__(sock)
        self.namespace = namespace
        # what the grader sent whole and then by name ("S"): its leaves and its lists,
        # dicts and objects by name; the ones of the current request, watched until its reply
        self.wholes: dict[str, tuple[Whole, list[tuple[str, Any]]]] = {}
        self.in_wholes: dict[str, set[str]] = {}  # a list's, dict's or object's name -> the
        # wholes that hold it (a model's every row: `_forget_wholes` runs for each container
        # received, and a look through every whole's rows took 8.7% of the kernel's CPU
        # samples in 05's reference run: results/benchmarks/wire-cuts-2026-12-06.txt)
        self.watched: list[Whole] = []

    # ---- what the kernel sends: data, Values, and its own things by handle (a function
    # of the library too: the grader never runs the kernel's library in its stead)

    def container(self, obj: Any, depth: int) -> Any:
        if isinstance(obj, (list, tuple, dict)):
            return super().container(obj, depth)
        return self.handle(obj)  # an object of the library's classes: the kernel's own

    def handle(self, obj: Any, depth: int = 0) -> Any:
        name = self._known(obj) or self._name(obj)
        if isinstance(obj, type):
            kind = "class"
        elif callable(obj):
            kind = "function"
        elif type(obj).__name__ == "module":
            kind = "module"
        else:
            kind = "object"
        label = getattr(obj, "__qualname__", None) if kind != "object" else None
        return {"K": name, "t": kind, "n": str(label or type(obj).__name__)[:200]}

    def changed_mirrors(self) -> list:
        """The sent lists, dicts and objects that the call changed, with what they hold
        now."""
        out = []
        for name, (obj, before) in list(self.mirrors.items()):
            now = _shallow(obj)
            if _unchanged(before, now):
                continue
            self.mirrors[name] = (obj, now)
            self._forget_wholes(name)
            if type(obj) is random.Random:
                out.append([name, Peer.generator(self, obj)])
                continue
            if isinstance(obj, list):
                body: Any = {"L": [self.encode(x, 1) for x in obj]}
            else:
                items = obj if isinstance(obj, dict) else state(obj)
                body = {"D": [[self.encode(k, 1), self.encode(v, 1)] for k, v in items.items()]}
            out.append([name, body])
        return out

    def _forget_wholes(self, name: str) -> None:
        """Stop taking `name` as the same: it, or a list, dict or object in it, changed."""
        for key in (name, *self.in_wholes.get(name, ())):
            kept = self.wholes.pop(key, None)
            if kept is not None:
                for shell, _ in kept[1]:
                    holders = self.in_wholes.get(shell)
                    if holders is not None:
                        holders.discard(key)
                        if not holders:
                            del self.in_wholes[shell]

    def reply(self, **fields: Any) -> dict:
        mirrors = self.changed_mirrors()
        for whole in self.watched:
            whole.changed(self)
        for name in list(self.touched):
            value = self.objects.get(name)
            if value is not None:
                self._sync_leaf(name, value)
        self.touched = set()
        return self.message(w=mirrors, **fields)

    # ---- what the kernel receives

    def received_container(self, out: Any, data: dict, depth: int) -> Any:
        name = data.get("m")
        if name is None:
            return out
        if not isinstance(name, str) or not name.startswith("g"):
            raise WireError("a sent container whose name is not the grader's")
        known = self.objects.get(name)
        if known is not None and type(known) is type(out) and isinstance(out, (list, dict)):
            if isinstance(out, list):  # the same object as before, holding what was sent
                known[:] = out
            else:
                known.clear()
                known.update(out)
            out = known
        else:
            self.objects[name] = out
            self.names[id(out)] = name
        self.mirrors[name] = (out, _shallow(out))
        self._forget_wholes(name)
        return out

    def received_generator(self, state: tuple, data: dict) -> Any:
        name = data.get("m")
        rng = self.objects.get(name) if isinstance(name, str) else None
        if type(rng) is not random.Random:
            rng = random.Random()
            if isinstance(name, str) and name.startswith("g"):
                self.objects[name] = rng
                self.names[id(rng)] = name
        rng.setstate(state)
        if isinstance(name, str):
            self.mirrors[name] = (rng, state)
        return rng

    def decode_other(self, tag: str, body: Any, data: dict, depth: int) -> Any:
        if tag == "K":
            obj = self.objects.get(body) if isinstance(body, str) else None
            if obj is None or not body.startswith("k"):
                raise WireError(f"{body!r} is not an object of this kernel")
            return obj
        if tag == "P":  # a list or dict the grader sent before, holding the same items
            known = self.objects.get(body) if isinstance(body, str) else None
            if not isinstance(known, (list, dict)) or not body.startswith("g"):
                raise WireError(f"{body!r} is not a list or dict the grader sent")
            for item in known if isinstance(known, list) else known.values():
                if isinstance(item, Value):
                    name = self._known(item)
                    if name is not None and name in self.leaves:
                        self.touched.add(name)
            self.mirrors[body] = (known, _shallow(known))
            return known
        if tag == "G":
            known = self.objects.get(body)
            if known is None:
                known = Stub(self, body, str(data.get("n") or ""))
                self.objects[body] = known
                self.names[id(known)] = body
            return known
        if tag == "F":
            from autograder.kernel.wire import _resolve

            if not isinstance(body, str):
                raise WireError("a library name that is not a string")
            return _resolve(body)
        if tag == "B":
            if not (isinstance(body, list) and len(body) == 2 and isinstance(body[1], str)
                    and not body[1].startswith("_")):
                raise WireError("a method that is not [object, name]")
            return getattr(self.decode(body[0], depth + 1), body[1])
        if tag == "TM":  # a torch module the grader built (a model a test hands in)
            import base64
            import io

            import torch

            return torch.load(io.BytesIO(base64.b64decode(body)), weights_only=False)
        if tag == "O":
            from autograder.kernel.wire import _resolve

            cls_name, public = body
            cls = _resolve(cls_name)
            name = data.get("m")
            if not isinstance(name, str):
                raise WireError("an object sent without a name")
            obj = self.objects.get(name)
            if obj is None or type(obj) is not cls:
                obj = cls.__new__(cls)
                self.objects[name] = obj
                self.names[id(obj)] = name
            fields = self.decode(public, depth + 1)
            own = {k: v for k, v in vars(obj).items() if k.startswith("_")}
            vars(obj).clear()
            vars(obj).update(fields)
            vars(obj).update(own)
            self.mirrors[name] = (obj, _shallow(obj))
            self._forget_wholes(name)
            return obj
        if tag == "S":  # what the grader sent whole before, the same but for its leaves
            return self._same_whole(body)
        return super().decode_other(tag, body, data, depth)

    def _same_whole(self, name: Any) -> Any:
        obj = self.objects.get(name) if isinstance(name, str) else None
        if obj is None or not name.startswith("g"):
            raise WireError(f"{name!r} is not something the grader sent")
        kept = self.wholes.get(name)
        if kept is None:
            shells: list[tuple[str, Any]] = []

            def shell(x: Any, known: str | None) -> bool:
                if known is not None:
                    shells.append((known, x))
                return True

            whole = whole_leaves(self, obj, shell)
            if whole is None:
                raise WireError(f"{name!r} holds something else than the grader sent")
            kept = self.wholes[name] = (whole, shells)
            for known, _ in shells:
                self.in_wholes.setdefault(known, set()).add(name)
        for known, x in kept[1]:  # the student's code may change them: watched
            self.mirrors[known] = (x, _shallow(x))
        self.watched.append(kept[0])
        return obj

    # ---- serving

    def serve(self) -> None:
        """Answer the grader's requests until it says `end`."""
        while True:
            try:
                request = receive(self.sock)
            except WireError:
                return  # the grader is gone, or broke the protocol: nothing to answer
            if isinstance(request, dict) and request.get("do") == "end":
                return
            send(self.sock, self.safe_answer(request))

    def safe_answer(self, request: dict) -> dict:
        """`answer`, or, when even the answer cannot be written, that error alone."""
        try:
            return self.answer(request)
        except Exception as exc:  # noqa: BLE001 (what came back cannot be sent)
            self.drop_queued()
            return {"n": [], "s": [], "w": [], "error": {
                "type": type(exc).__name__, "message": str(exc)[:2000], "lines": []}}

    def answer(self, request: dict) -> dict:
        """Do one request; the lists, dicts and leaves it was given are watched until its
        reply says what the student's code changed in them."""
        outer = (self.mirrors, self.touched, self.watched)
        self.mirrors, self.touched, self.watched = {}, set(), []
        try:
            return self._answer(request)
        finally:
            self.mirrors, self.touched, self.watched = outer

    def _answer(self, message: Any) -> dict:
        try:
            request = self.take(message)
            result = self.perform(request)
        except _Missing as missing:
            return self.reply(missing=missing.info)
        except WireError as exc:
            return self.reply(error={"type": "WireError", "message": str(exc), "lines": []})
        except KeyboardInterrupt as exc:
            lines = crash.interrupted_lines(crash.frames_of(exc.__traceback__), "this test")
            return self.reply(error={"type": "KeyboardInterrupt", "message": "",
                                     "lines": lines})
        except Exception as exc:  # noqa: BLE001 (the student's code raised)
            return self.reply(error=_error(exc))
        try:
            encoded = self.encode(result)
        except WireError as exc:
            return self.reply(error={"type": "WireError", "message": str(exc), "lines": []})
        return self.reply(ok=encoded)

    def perform(self, request: dict) -> Any:
        do = request.get("do")
        if do == "get":
            name = request.get("name")
            if not isinstance(name, str):
                raise WireError("a name that is not a string")
            if name not in self.namespace:
                raise _Missing(_absent(name, self.namespace))
            value = self.namespace[name]
            return value
        target = self.decode(request.get("t"))
        if do == "call":
            args = self.decode(request.get("a", {"L": []}))
            kwargs = self.decode(request.get("k", {"D": []}))
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise WireError("a call whose arguments are malformed")
            return target(*args, **kwargs)
        if do == "attr":
            attr = str(request.get("name"))
            value = getattr(target, attr)
            if attr in ("__globals__", "__dict__"):  # a namespace: the grader works in it
                return _Handle(value)
            return value
        if do == "setattr":
            setattr(target, str(request.get("name")), self.decode(request.get("v")))
            return None
        if do == "item":
            return target[self.decode(request.get("key"))]
        if do == "setitem":
            target[self.decode(request.get("key"))] = self.decode(request.get("v"))
            return None
        if do == "delitem":
            del target[self.decode(request.get("key"))]
            return None
        if do == "len":
            return len(target)
        if do == "iter":
            return list(target)
        if do == "repr":
            return repr(target)[:2000]
        raise WireError(f"a request the kernel does not know: {do!r}")

    def encode(self, obj: Any, depth: int = 0) -> Any:
        if isinstance(obj, _Handle):
            return self.handle(obj.value)
        return super().encode(obj, depth)

    def call_back(self, name: str, args: tuple, kwargs: dict) -> Any:
        """Run the grader's function `name`; serve the grader's requests until it answers."""
        message = self.reply(cb=name, a={"L": [self.encode(x, 1) for x in args]},
                             k={"D": [[k, self.encode(v, 1)] for k, v in kwargs.items()]})
        send(self.sock, message)
        while True:
            message = receive(self.sock)
            do = message.get("do") if isinstance(message, dict) else None
            if do in ("return", "raise"):
                request = self.take(message)
            if do == "return":
                return self.decode(request.get("v"))
            if do == "raise":
                error = request.get("error") or {}
                raise _same_kind(str(error.get("type", "Exception")),
                                 str(error.get("message", "")))
            if do == "end":
                raise WireError("the test ended while its function was running")
            send(self.sock, self.safe_answer(message))


class _Handle:
    """A value the kernel hands over by name, not by value (a function's globals)."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _Missing(Exception):
    def __init__(self, info: dict) -> None:
        super().__init__(info.get("name", ""))
        self.info = info


def _absent(name: str, namespace: dict) -> dict:
    """What a student should hear of a name the notebook does not define."""
    info: dict[str, Any] = {"name": name}
    try:
        broken = crash.broken_lines(name)
        if broken is not None:
            info["broken"] = broken
        like = crash.name_like(name, namespace)
        if like:
            info["like"] = like
    except Exception:  # noqa: BLE001 (only words for the student)
        pass
    return info


def _error(exc: BaseException) -> dict:
    """An error of the student's code as the grader gets it."""
    try:
        frames = crash.frames_of(exc.__traceback__)
        if isinstance(exc, RecursionError) or len(frames) > 200:
            frames = frames[:100] + frames[-100:]
        lines = crash.render(exc, frames, hints=[crash.slip_hint(exc, frames)])
    except Exception:  # noqa: BLE001
        lines = []
    error: dict[str, Any] = {"type": type(exc).__name__, "message": _text(exc),
                             "lines": [str(x)[:2000] for x in lines[:200]]}
    for attr in ("name", "not_yet_released"):
        value = getattr(exc, attr, None)
        if isinstance(value, (str, bool)):
            error[attr] = value
    return error


def _text(exc: BaseException) -> str:
    try:
        return str(exc)[:4000]
    except Exception:  # noqa: BLE001
        return "<the error's message could not be shown>"


def serve(header: dict, namespace: dict) -> None:
    """Answer the grader on the socket the header names, until the test is over."""
    path = header.get("socket")
    if not isinstance(path, str):
        raise WireError("no socket to answer the grader on")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(1)
        listener.settimeout(CONNECT_WAIT)
        connection, _ = listener.accept()
    finally:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass
    connection.settimeout(None)
    peer = KernelPeer(connection, namespace)
    try:
        with collector_paused():
            peer.serve()
    finally:
        connection.close()
        del peer
        sys.last_traceback = None
