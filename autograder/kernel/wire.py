"""What crosses between the grader and a student's kernel while a graded test cell runs.

At grading time a test cell runs in the grader (`autograder.grading.remote`), never in the
student's kernel. The student's functions, classes and variables are reached there as
proxies: each use of one (a call, an attribute, an item) is one message to the kernel
(`agent`), which does it to the student's object and answers with what came of it. Both
ends speak this module's protocol: JSON messages, each preceded by its length, over a Unix
socket in the kernel's sandbox folder.

What a message can hold (`Peer.encode`, `Peer.decode`):

- numbers, strings, None and booleans as themselves; lists, tuples and dicts by value;
- a `microgpt` `Value` as a node of a graph. A node that the other end has not seen goes
  once, with the operation that made it (`Value._op`), its data, its children and, when
  not 0 and None, its grad and what else the operation took (`_Fused._arg`, a power's
  exponent). Its name is a number, the next of the end that sends it (the kernel's count
  up from 1, the grader's down from -1): a message gives its first new node's ("f") and
  the others follow in order, so the receiving end checks one number, not each node's
  name. The receiving end makes the node again with its own engine (`replay`), from its
  own copies of the children (`+` and `*`, most nodes, on a short path of their own), and
  the grader refuses a node whose data is not what its operation gives, or that no
  operation of the engine made. So a `Value` the grader gets back is the grader's own,
  and its gradients are the grader's `backward()`, not the kernel's word;
- the data and grad of the leaves a message holds, again whenever they changed, and, after
  each call, of every leaf the call was given (a student's `backward()` or update shows);
- a function, class or module of the library (`LIBRARY`), from the grader, by its name:
  the kernel uses its own copy (`remote.GraderPeer.handle`);
- an object of the library's classes (a net, a config) and the lists and dicts the grader
  sends, by value, with a name, so that what the student's code changes in them comes back
  (`KernelPeer.changed_mirrors`); an object's public attributes only (`state`: a private
  one is a cache of each end's own). An object sent again while its lists, dicts and
  objects hold the same goes as its name, with the leaves that changed (`Whole`): a
  training check hands the student's block the model at every position of every step;
- the grader's own functions (a layer a test hands in, a lambda) as a name the kernel calls
  back; the kernel's own objects (the student's functions, a student's object) as a name
  the grader calls through;
- numpy arrays, by value.

The grader reads every message as untrusted data: nothing in one can name code for the
grader to run but the library's own (`LIBRARY`), and a malformed message is an error of
the call it answers, never of the grader.
"""

import contextlib
import functools
import gc
import importlib
import json
import numbers
import random
import socket
import struct
from collections.abc import Iterator
from typing import Any, cast

from microgpt import nn
from microgpt.engine import Value, _Fused, _Linear, _Op, dot

__all__ = ["WireError", "Closed", "UnverifiedValue", "LIBRARY", "MAX_MESSAGE", "Peer", "Whole",
           "replay", "send", "receive", "library_name", "state", "whole_leaves",
           "collector_paused"]

LIBRARY = ("microgpt", "autograder.kernel", "torchtrack")  # what both ends hold
MAX_MESSAGE = 256 << 20  # bytes in one message
MAX_DEPTH = 100  # nesting of lists, dicts and objects in one message
_FRAME = struct.Struct("!Q")
Name = str | int  # of a Value, a number; of anything else, a string (`Peer.objects`)
_UNARY = ("log", "exp", "relu", "tanh", "sigmoid")
_INT_LIMIT = 2**63  # the largest integer the grader takes as a node's data or a grad


# the grader's connection while a graded test runs in the grader (`autograder.grading.
# remote` sets it; None in JupyterLab): code of the library that must run where the
# student's objects live asks it (`autograder.kernel.torchchecks.in_kernel`)
REMOTE: Any = None


class WireError(Exception):
    """A message that breaks the protocol (malformed, too large, the other end gone)."""


class Closed(WireError):
    """The other end closed the connection (it ended, or its process is gone)."""


class UnverifiedValue(WireError):
    """A `Value` the kernel sent that its operations do not make: a node made by hand, an
    operation the engine does not have, or data that is not what the operation gives."""


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a test's messages go back and forth.

    Both ends keep every node of the test (`Peer.objects`), and the engine's graphs hold no
    cycles (reference counting frees them, as `microgpt.train`, which pauses the collector
    for a whole run, relies on), so each collection only walks the same growing set of
    nodes again: with it on, the kernel's end of a layer call took a quarter longer and the
    grader's nearly a third (`benchmarks/wire_cost.py --in-process [--collector-on]`,
    `results/benchmarks/wire-cost-2026-12-05.txt`). What the student's code makes in cycles
    meanwhile waits for the collector's next run after the test, within the kernel's
    memory limit."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def send(sock: socket.socket, message: Any) -> None:
    data = json.dumps(message, separators=(",", ":"), allow_nan=True).encode()
    if len(data) > MAX_MESSAGE:
        raise WireError(f"a message of {len(data) >> 20} MiB, above the {MAX_MESSAGE >> 20} "
                        f"MiB one message may hold")
    sock.sendall(_FRAME.pack(len(data)) + data)


def _exactly(sock: socket.socket, n: int) -> bytes:
    parts, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise Closed("the other end closed the connection")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def receive(sock: socket.socket) -> Any:
    (size,) = _FRAME.unpack(_exactly(sock, _FRAME.size))
    if size > MAX_MESSAGE:
        raise WireError(f"a message of {size >> 20} MiB, above the {MAX_MESSAGE >> 20} MiB "
                        f"one message may hold")
    try:
        return json.loads(_exactly(sock, size))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a message that is not JSON ({exc})") from None


# ---------------------------------------------------------------- making a node again

def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _interleave(layout: Any, kids: list[Value]) -> list[Any]:
    """The operands of a sum or dot: `layout` holds the plain numbers and None where a
    child goes, the children in order."""
    if not isinstance(layout, list) or not all(a is None or _number(a) for a in layout):
        raise UnverifiedValue("the numbers of a sum or dot are not numbers")
    it = iter(kids)
    try:
        return [next(it) if a is None else a for a in layout]
    except StopIteration:
        raise UnverifiedValue("a sum or dot with fewer children than its operands") from None


def replay(op: str, kids: list[Value], arg: Any, cache: dict | None = None) -> Value:
    """The node the operation `op` makes of the Values `kids` (and `arg`), made by this
    end's engine. Raises UnverifiedValue when `op` is not one of the engine's or does not fit
    its children."""
    n = len(kids)
    if op in ("+", "*"):
        if n != 2:
            raise UnverifiedValue(f"'{op}' with {n} children")
        return kids[0] + kids[1] if op == "+" else kids[0] * kids[1]
    if op == "**":
        if n != 1 or not _number(arg):
            raise UnverifiedValue("'**' without one child and a number for its exponent")
        if type(kids[0].data) is int and type(arg) is int and abs(arg) > 64:
            raise WireError(f"an integer to the power {arg}: more than this end computes")
        return kids[0] ** arg
    if op in _UNARY:
        if n != 1 or arg is not None:
            raise UnverifiedValue(f"'{op}' with {n} children")
        return getattr(kids[0], op)()
    if op == "sum":
        return Value.sum(kids if arg is None else _interleave(arg, kids))
    if op == "dot":
        if arg is None:
            if n % 2:
                raise UnverifiedValue("'dot' with an odd number of children")
            return dot(kids[: n // 2], kids[n // 2:])
        if not (isinstance(arg, list) and len(arg) == 2 and isinstance(arg[0], list)
                and isinstance(arg[1], list) and len(arg[0]) == len(arg[1])):
            raise UnverifiedValue("'dot' whose operands do not pair up")
        pairs = _interleave([a for pair in zip(*arg) for a in pair], kids)
        return dot(pairs[0::2], pairs[1::2])
    if op == "1/rms":
        if not n or not _number(arg):
            raise UnverifiedValue("'1/rms' without children or eps")
        return nn._inv_rms(kids, arg)
    if op == "mean":
        if not n:
            raise UnverifiedValue("'mean' of nothing")
        return nn._mean(kids)
    if op in ("softmax", "log_softmax", "cross_entropy"):
        if not n or not isinstance(arg, int) or isinstance(arg, bool) or not 0 <= arg < n:
            raise UnverifiedValue(f"'{op}' whose index is not one of its {n} children")
        if op == "cross_entropy":
            return nn.cross_entropy(kids, arg)
        key = (op, tuple(map(id, kids)))
        outs = cache.get(key) if cache is not None else None
        if outs is None:
            outs = (nn.softmax if op == "softmax" else nn.log_softmax)(kids)
            if cache is not None:
                cache[key] = outs
        return outs[arg]
    raise UnverifiedValue(f"a node of operation {op!r}, which the engine does not have" if op
                      else "a node made by hand (Value(data, children, local_grads)), not "
                           "by an operation of the engine")


def _beyond_64_bits(n: int) -> bool:
    return not -_INT_LIMIT <= n <= _INT_LIMIT


def _same(a: Any, b: Any) -> bool:
    """Whether two nodes' data are the same (nan is nan; arrays item by item)."""
    try:
        return bool(a == b) or bool(a != a and b != b)
    except (ValueError, TypeError):  # arrays: == gives an array
        try:
            import numpy as np

            return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
        except Exception:  # noqa: BLE001 (a tensor, or what else cannot be compared)
            return False
    except Exception:  # noqa: BLE001 (a tensor's truth, say)
        return False


def _describe(node: Value) -> tuple[str, tuple, Any]:
    """(operation, children, arg) of a node of this end's engine."""
    try:
        op = node._op
        children = tuple(node._children)
        if type(node) is _Op:
            arg = node._db if op == "**" else None
        else:
            arg = getattr(node, "_arg", None) if isinstance(node, _Fused) else None
        if not isinstance(op, str):
            op = "?"
    except Exception:  # noqa: BLE001 (a node whose parts cannot be read)
        return "?", (), None
    return op, children, arg


# ---------------------------------------------------------------- names of the library

def library_name(obj: Any) -> str | None:
    """"module:qualname" of a function, class or module of the library, when the name
    finds this very object; else None."""
    if type(obj).__name__ == "module":
        name = getattr(obj, "__name__", "")
        return f"{name}:" if _in_library(name) else None
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not (isinstance(module, str) and isinstance(qualname, str)) or "<" in qualname \
            or not _in_library(module):
        return None
    try:
        found = _resolve(f"{module}:{qualname}")
    except WireError:
        return None
    return f"{module}:{qualname}" if found is obj else None


def _in_library(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in LIBRARY)


def _resolve(name: str) -> Any:
    module, _, qualname = name.partition(":")
    if not _in_library(module):
        raise WireError(f"{module} is not a module of the library")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split(".") if qualname else ():
            if part.startswith("__"):
                raise WireError(f"{name}: a private name")
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise WireError(f"{name} is not in the library here ({exc})") from None
    return obj


# ---------------------------------------------------------------- a whole, again

class Whole:
    """The leaves of a list, dict or library object sent whole (a model and its weights),
    with their data and grad as both ends last agreed. When nothing but its leaves has
    changed since, the grader sends the whole as its name (tag "S") and only the leaves that
    changed (`changed`), instead of every list and row of it again; the kernel, after a
    call, looks for the leaves the student's code changed the same way. One comparison of
    two lists of numbers stands in for a look at each leaf."""

    __slots__ = ("names", "leaves", "data", "grads", "shells")

    def __init__(self, names: list[int], leaves: list[Value], shells: Any) -> None:
        self.names, self.leaves, self.shells = names, leaves, shells
        self.data = [v.data for v in leaves]
        self.grads = [v.grad for v in leaves]

    def changed(self, peer: "Peer") -> None:
        """Queue, through `peer._sync_leaf`, every leaf whose data or grad is not what it
        was at the last look (which compares it with what the other end holds)."""
        leaves = self.leaves
        data, grads = [v.data for v in leaves], [v.grad for v in leaves]
        if data == self.data and grads == self.grads:
            return
        for i, (d, g, d0, g0) in enumerate(zip(data, grads, self.data, self.grads)):
            if not (d == d0 and g == g0):
                peer._sync_leaf(self.names[i], leaves[i])
        self.data, self.grads = data, grads


def whole_leaves(peer: "Peer", root: Any, shell: Any) -> Whole | None:
    """A `Whole` of `root`: every leaf in it (through lists, dicts, tuples, library objects
    and bound methods of them) that both ends hold, its data and grad plain numbers.
    `shell(obj, name)` is told of every list, dict and object on the way, and returns False
    to give up (then None): what this end can watch is its own business."""
    names: list[int] = []
    leaves: list[Value] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        cls = type(obj)
        if cls in _PLAIN_ITEMS:
            continue
        if isinstance(obj, Value):
            name = peer._known(obj)
            if name is None:
                return None
            if name in peer.leaves:
                if type(obj.data) not in (float, int) or type(obj.grad) not in (float, int):
                    return None
                names.append(name)
                leaves.append(obj)
            continue
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if cls is tuple:
            stack.extend(obj)
        elif cls is list or cls is dict or _is_instance(obj):
            if not shell(obj, peer._known(obj)):
                return None
            items = obj if cls is list else obj.values() if cls is dict else state(obj).values()
            stack.extend(items)
        elif getattr(obj, "__self__", None) is not None and hasattr(obj, "__func__"):
            stack.append(obj.__self__)  # a bound method: its object
        elif not callable(obj):  # an array, a generator, a tensor: not a leaf, not watched
            return None
    return Whole(names, leaves, None)


# ---------------------------------------------------------------- one end

_SCALARS = (str, int, float, bool, type(None))


class Peer:
    """One end of a test cell's connection: what it has sent and received, and how it
    writes and reads what a message holds. `side` is "g" (the grader) or "k" (the
    kernel); each end names the things it made with its own letter."""

    side = "?"

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        # name -> object, both ends' things: a Value's name is a number (the kernel's
        # positive, the grader's negative, each end's counted up from 1 in the order it
        # sends them), everything else's a string ("k12", "g3"); so a number names a Value
        self.objects: dict[Name, Any] = {}
        self.names: dict[int, Name] = {}  # id(object) -> name (the object is in `objects`)
        self.leaves: dict[int, tuple] = {}  # a shared leaf's name -> (data, grad) last sent
        self.mirrors: dict[str, tuple] = {}  # the kernel: a sent list, dict or object ->
        # its shallow contents as received
        self.touched: set[int] = set()  # the leaves the current call was given
        self._count = 0  # the things this end named, Values apart
        self._values = 0  # the Values this end named
        self._theirs = 0  # the other end's Values this end took (the last one's number)
        self._nodes: list[list] = []  # nodes for the next message
        self._sync: list[list] = []  # leaves for the next message
        self._synced: set[int] = set()  # their names
        self._replayed: dict = {}

    # ---- names

    def _name(self, obj: Any) -> str:
        self._count += 1
        name = f"{self.side}{self._count}"
        self.objects[name] = obj
        self.names[id(obj)] = name
        return name

    def _known(self, obj: Any) -> Any:  # Name | None: an int for a Value, else a str
        name = self.names.get(id(obj))
        return name if name is not None and self.objects.get(name) is obj else None

    # ---- messages

    def message(self, **fields: Any) -> dict:
        """A message of `fields` (already encoded) with the nodes and leaves they need. The
        nodes are the ones this end named last, in order: "f" is the first one's number."""
        out = {"n": self._nodes, "f": self._values - len(self._nodes) + 1, "s": self._sync,
               **fields}
        self.drop_queued()
        return out

    def drop_queued(self) -> None:
        """Forget the nodes and leaves queued for the next message (it will not go)."""
        self._nodes, self._sync, self._synced = [], [], set()

    def take(self, message: Any) -> dict:
        """Read the nodes and leaves of a received message; returns the message."""
        if not isinstance(message, dict):
            raise WireError("a message that is not a JSON object")
        # the leaves first: the new nodes were made from the leaves as they are now
        for entry in _list(message.get("s", [])):
            if not (isinstance(entry, list) and len(entry) == 3):
                raise WireError("a leaf's update that is not [name, data, grad]")
            name, data, grad = entry
            leaf = self.objects.get(name) if type(name) is int else None
            if not isinstance(leaf, Value) or name not in self.leaves:
                raise WireError(f"an update of {name!r}, which is not a leaf both ends hold")
            leaf.data = self._leaf_data(data)
            leaf.grad = self._grad(grad)
            self.leaves[name] = (leaf.data, leaf.grad)
            self.touched.add(name)
        nodes = _list(message.get("n", []))
        if nodes:
            first = message.get("f")
            if type(first) is not int or first <= self._theirs:
                raise WireError(f"nodes numbered from {first!r}, not after the last one taken "
                                f"({self._theirs})")
            self._take_nodes(nodes, first)
        return message

    def _take_nodes(self, nodes: list, first: int) -> None:
        """Make again, with this end's engine, the nodes of a message, in order: each is
        [operation, data, children] and, when not 0 and None, its grad and its arg; the
        children are names of Values this end holds (nodes of the same message among
        them), and the node takes the next number of the other end."""
        objects, names, leaves, touched = self.objects, self.names, self.leaves, self.touched
        get = objects.get
        sign = -1 if self.side == "k" else 1  # the other end's
        count = first
        for node in nodes:
            if type(node) is not list or not 3 <= len(node) <= 5:
                raise WireError("a node that is not [op, data, children(, grad(, arg))]")
            op, data, kids = node[0], node[1], node[2]
            if type(kids) is not list or type(op) is not str:
                raise WireError("a node whose operation or children are malformed")
            if not kids:
                value = Value(self._leaf_data(data))
            elif (op == "+" or op == "*") and len(kids) == 2 and len(node) < 5:
                ka, kb = kids  # most nodes: made here without `replay`'s checks
                a = get(ka) if type(ka) is int else None  # a number names a Value
                b = get(kb) if type(kb) is int else None
                if a is None or b is None:
                    raise WireError(f"a node whose child {ka if a is None else kb!r} is not a "
                                    f"Value this end holds")
                try:
                    value = a + b if op == "+" else a * b
                except Exception as exc:  # noqa: BLE001 (as `_replay`: the engine refused)
                    raise UnverifiedValue(f"a node of operation {op!r} that the engine cannot "
                                          f"make of its children: {type(exc).__name__}: "
                                          f"{exc}") from None
            else:
                value = self._replay(op, kids, node[4] if len(node) == 5 else None)
            if kids:  # what the node says against what its children give here
                d = value.data
                if type(d) is int and _beyond_64_bits(d):
                    # the grader's own integer leaves, squared node by node
                    raise WireError(f"a node of operation {op!r} whose data is an integer "
                                    f"of more than 64 bits")
                if type(data) is not float and not _number(data):
                    data = self.decode(data)  # an array, say: as the student's code made it
                if (type(d) is not float or type(data) is not float or d != data) \
                        and not _same(d, data):
                    raise UnverifiedValue(f"a node of operation {op!r} that says {data!r}, "
                                          f"where its children give {d!r}")
            if len(node) > 3:
                value.grad = self._grad(node[3])
            name = sign * count
            objects[name] = value
            names[id(value)] = name
            if not kids:
                leaves[name] = (value.data, value.grad)
                touched.add(name)
            # used up at once: when a later node of the message is refused, the next message
            # cannot number a node with it again (and so take over a checked node's name)
            self._theirs = count
            count += 1

    def _replay(self, op: str, kids: list, arg: Any) -> Value:
        get = self.objects.get
        children = []
        for kid in kids:
            child = get(kid) if type(kid) is int else None
            if child is None:
                raise WireError(f"a node whose child {kid!r} is not a Value this end holds")
            children.append(child)
        try:
            return replay(op, children, self.decode(arg) if arg is not None else None,
                          self._replayed)
        except WireError:  # refused, or malformed
            raise
        except Exception as exc:  # noqa: BLE001 (the engine refused: log(0), ...)
            raise UnverifiedValue(f"a node of operation {op!r} that the engine cannot make of "
                                  f"its children: {type(exc).__name__}: {exc}") from None

    def _leaf_data(self, data: Any) -> Any:
        """A leaf's data as received. The grader takes only a number from the kernel, and an
        integer only within 64 bits: the grader's engine makes every node again from its
        leaves, so a string or a list there would be repeated by `*`, and a huge integer
        squared node by node, in the grader's memory."""
        if _number(data):
            if type(data) is int and _beyond_64_bits(data):
                raise WireError("a leaf whose data is an integer of more than 64 bits")
            return data
        if self.side == "g":
            array = data.get("A") if isinstance(data, dict) and len(data) == 1 else None
            if array is not None:  # a small flat array: as the student's code made it
                value = _from_array(array)
                if value.ndim <= 1 and value.size <= MAX_LEAF_ARRAY:
                    return value
            raise WireError(f"a leaf whose data is a {type(data).__name__}, not a number")
        return self.decode(data)

    @staticmethod
    def _grad(grad: Any) -> Any:
        if not _number(grad):
            raise WireError("a grad that is not a number")
        if type(grad) is int and _beyond_64_bits(grad):
            raise WireError("a grad that is an integer of more than 64 bits")
        return grad

    # ---- Values

    def _value(self, v: Value) -> dict:
        name = self._known(v)
        if name is None:
            if type(v) is Value and type(v._children) is tuple and not v._children:
                name = self._send_leaf(v)  # a model's weights: most of what goes
            else:
                name = self._send_graph(v)
        elif name in self.leaves:
            self._sync_leaf(name, v)
        return {"V": name}

    def _send_leaf(self, leaf: Value) -> int:
        """`_send_graph` of a leaf (a plain Value without children), without its walk."""
        self._values += 1
        name = (1 if self.side == "k" else -1) * self._values
        self.objects[name] = leaf
        self.names[id(leaf)] = name
        data, grad = leaf.data, leaf.grad
        sent = data if type(data) is float or _number(data) else self.encode(data)
        entry: list[Any] = ["", sent, []]
        if type(grad) is not int or grad:
            entry.append(self._plain_grad(grad))
        self._nodes.append(entry)
        self.leaves[name] = (data, grad)
        self.touched.add(name)
        return name

    def sync_items(self, items: list) -> bool:
        """The items of a list or dict the other end holds already, the same objects as
        when it was sent: queue what changed in their leaves and return True; return False,
        with nothing queued, when an item is a list, dict, tuple or object (then the whole
        container goes again). The graded training checks pass a model's parameters on
        every call, so this loop runs for each of them each time: one pass over the items,
        and `_sync_leaf` only for a leaf not yet synced in this message."""
        values: list[Value] = []
        for x in items:
            cls = type(x)
            if cls is Value or cls is _Op or cls is _Fused:
                values.append(x)
            elif cls in _PLAIN_ITEMS:
                continue
            elif isinstance(x, Value):
                values.append(x)
            elif isinstance(x, (list, dict, tuple)) or _is_instance(x):
                return False
        names, objects, leaves, synced = self.names, self.objects, self.leaves, self._synced
        for v in values:
            name = names.get(id(v))
            if name is None or objects.get(name) is not v:
                self._value(v)  # a node the other end has not seen
            elif name in leaves and name not in synced:
                self._sync_leaf(name, v)
        return True

    def _sync_leaf(self, name: int, v: Value) -> None:
        if name in self._synced:  # once per message
            return
        self._synced.add(name)
        self.touched.add(name)
        state = (v.data, v.grad)
        last = self.leaves.get(name)
        if last is not None:
            try:
                unchanged = last == state  # numbers, the usual leaf
            except (ValueError, TypeError):  # arrays
                unchanged = False
            if unchanged or (_same(last[0], state[0]) and _same(last[1], state[1])):
                return
        self.leaves[name] = state
        self._sync.append([name, self._plain_data(v.data), self._plain_grad(v.grad)])

    def _plain_data(self, data: Any) -> Any:
        return data if _number(data) else self.encode(data)

    @staticmethod
    def _plain_grad(grad: Any) -> Any:
        if _number(grad):
            return grad
        try:
            return float(grad)
        except (TypeError, ValueError, OverflowError):
            return float("nan")

    def _send_graph(self, root: Value) -> int:
        """Name every node of `root`'s graph that the other end has not seen, children
        first, and queue their descriptions (`_take_nodes` reads them)."""
        names, objects, leaves, synced = self.names, self.objects, self.leaves, self._synced
        get_name, get_object, queue = names.get, objects.get, self._nodes.append
        sign = 1 if self.side == "k" else -1
        count = self._values
        # a node stays on the stack until every child has a name: its children go on top
        # of it, and when it comes up again they are named
        stack: list[Any] = [root]
        while stack:
            node = stack[-1]
            name = get_name(id(node))
            if name is not None and get_object(name) is node:  # named meanwhile
                stack.pop()
                if name in leaves:
                    self._sync_leaf(name, cast(Value, node))
                continue
            if type(node) is _Op:  # most nodes: their parts read straight from the slots
                op, b = node._op, node._b
                children: tuple = (node._a,) if b is None else (node._a, b)
                arg = node._db if op == "**" else None
                if type(op) is not str:
                    op = "?"
            else:
                op, children, arg = _describe(node)
            waiting = False
            kids = []  # the children's names, kept for the entry (a dot has dozens)
            for child in children:
                kid = get_name(id(child))
                if kid is None or get_object(kid) is not child:
                    if not isinstance(child, Value):
                        raise WireError(f"a Value whose child is a {type(child).__name__}")
                    stack.append(child)
                    waiting = True
                    continue
                kids.append(kid)
                if kid in leaves and kid not in synced:
                    self._sync_leaf(kid, cast(Value, child))
            if waiting:
                continue
            stack.pop()
            count += 1
            name = sign * count
            objects[name] = node
            names[id(node)] = name
            data, grad = node.data, node.grad
            entry = [op, data if type(data) is float or _number(data) else self.encode(data),
                     kids]
            if arg is not None:
                entry += [self._plain_grad(grad), self.encode(arg)]
            elif type(grad) is not int or grad:  # a new node's grad is 0: left out
                entry.append(self._plain_grad(grad))
            queue(entry)
            if not children:
                leaves[name] = (data, grad)
                self.touched.add(name)
        self._values = count
        return cast(int, names[id(root)])

    # ---- encoding (what this end sends), and decoding (what it receives)

    def encode(self, obj: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError("a value nested too deeply to send")
        if type(obj) in _VALUE_TYPES:  # most of what goes: weights, a layer's nodes
            return self._value(obj)
        if obj is None or isinstance(obj, (str, bool)):
            return obj
        if isinstance(obj, numbers.Integral) and type(obj) is not bool:
            return int(obj)
        if isinstance(obj, float) or (isinstance(obj, numbers.Real)
                                      and type(obj).__module__ == "numpy"):
            return float(obj)
        if isinstance(obj, Value):
            return self._value(obj)
        if isinstance(obj, (list, tuple, dict)) or _is_instance(obj):
            known = self._known(obj)
            if known is not None and known[:1] != self.side:
                return {"M": known}  # the other end's own list, dict or object
            return self.container(obj, depth)
        array = _array(obj)
        if array is not None:
            return array
        tensor = _tensor(obj)
        if tensor is not None:
            return tensor
        if type(obj) is random.Random:
            return self.generator(obj)
        return self.handle(obj, depth)

    def container(self, obj: Any, depth: int) -> Any:
        """A list, tuple, dict or library object, by value."""
        if isinstance(obj, list):
            return {"L": [self.encode(x, depth + 1) for x in obj]}
        if isinstance(obj, tuple):
            return {"T": [self.encode(x, depth + 1) for x in obj]}
        if isinstance(obj, dict):
            return {"D": [[self.encode(k, depth + 1), self.encode(v, depth + 1)]
                          for k, v in obj.items()]}
        return self.handle(obj)

    def generator(self, rng: random.Random) -> Any:
        """A random generator, by its state (the grader's, named, so that the draws the
        student's code makes come back)."""
        version, state, gauss = rng.getstate()
        return {"R": [version, list(state), gauss]}

    def handle(self, obj: Any, depth: int = 0) -> Any:
        """Something only this end can use: named, for the other end to call back (or, from
        the grader, a function of the library by its name: `remote.GraderPeer`)."""
        raise WireError(f"a {type(obj).__name__} cannot be sent")

    def decode(self, data: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError("a value nested too deeply to read")
        if isinstance(data, _SCALARS):
            return data
        if isinstance(data, list):
            raise WireError("a bare list (lists travel tagged)")
        if not (isinstance(data, dict) and 1 <= len(data) <= 3):
            raise WireError("a value that is not tagged")
        tag = next(iter(data))
        body = data[tag]
        if tag == "V":
            value = self.objects.get(body) if type(body) is int else None
            if not isinstance(value, Value):
                raise WireError(f"a Value named {body!r}, which this end does not hold")
            if body in self.leaves:
                self.touched.add(body)
            return value
        if tag in ("L", "T"):
            items = [self.decode(x, depth + 1) for x in _list(body)]
            out: Any = items if tag == "L" else tuple(items)
            return self.received_container(out, data, depth)
        if tag == "D":
            pairs = [_pair(p) for p in _list(body)]
            out = {}
            for k, v in pairs:
                key = self.decode(k, depth + 1)
                try:
                    out[key] = self.decode(v, depth + 1)
                except TypeError:
                    raise WireError("a dict key that cannot be a key") from None
            return self.received_container(out, data, depth)
        if tag == "M":
            known = self.objects.get(body) if isinstance(body, str) else None
            if known is None or body[:1] != self.side:
                raise WireError(f"a reference to {body!r}, which this end did not send")
            return known
        if tag == "A":
            return _from_array(body)
        if tag == "X":
            return _from_tensor(body)
        if tag == "R":
            return self.received_generator(_generator_state(body), data)
        return self.decode_other(tag, body, data, depth)

    def received_container(self, out: Any, data: dict, depth: int) -> Any:
        return out

    def received_generator(self, state: tuple, data: dict) -> Any:
        rng = random.Random()
        rng.setstate(state)
        return rng

    def decode_other(self, tag: str, body: Any, data: dict, depth: int) -> Any:
        raise WireError(f"a value tagged {tag!r}, which this end does not read")


_TENSOR_TYPES = {"float64", "float32", "int64", "int32", "bool"}


def _tensor(obj: Any) -> Any:
    """A torch tensor's numbers (never the tensor's graph or its pickle)."""
    cls = type(obj)
    module = vars(cls).get("__module__") if "__module__" in vars(cls) else None
    if not (isinstance(module, str) and module.startswith("torch")
            and cls.__name__ in ("Tensor", "Parameter")):
        return None
    dtype = str(obj.dtype).removeprefix("torch.")
    if dtype not in _TENSOR_TYPES:
        raise WireError(f"a tensor of {dtype}, which cannot be sent")
    data = obj.detach().cpu()
    return {"X": [dtype, list(data.shape), data.flatten().tolist()]}


def _from_tensor(body: Any) -> Any:
    try:
        import torch
    except ImportError:
        raise WireError("a tensor, where this end has no torch to hold it") from None

    if not (isinstance(body, list) and len(body) == 3 and body[0] in _TENSOR_TYPES
            and isinstance(body[1], list) and isinstance(body[2], list)
            and all(isinstance(d, int) and d >= 0 for d in body[1])
            and all(isinstance(x, (int, float)) for x in body[2])):
        raise WireError("a tensor that is not [dtype, shape, numbers]")
    try:
        return torch.tensor(body[2], dtype=getattr(torch, body[0])).reshape(body[1])
    except (RuntimeError, ValueError) as exc:
        raise WireError(f"a tensor whose shape does not fit its numbers ({exc})") from None


def _generator_state(body: Any) -> tuple:
    if not (isinstance(body, list) and len(body) == 3 and isinstance(body[1], list)
            and len(body[1]) == 625 and all(isinstance(x, int) for x in body[1])
            and (body[2] is None or isinstance(body[2], float))):
        raise WireError("a random generator's state that is not one")
    return (body[0], tuple(body[1]), body[2])


def _list(x: Any) -> list:
    if not isinstance(x, list):
        raise WireError("a list was expected")
    return x


def _pair(x: Any) -> list:
    if not (isinstance(x, list) and len(x) == 2):
        raise WireError("a dict entry that is not [key, value]")
    return x


def state(obj: Any) -> dict:
    """What of a library object travels: its public attributes. A private one (a cache, as
    `GPT._weight_numbers`) is each end's own: never sent, and never taken from the other
    end, whose numbers this end's code would otherwise trust."""
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def _is_instance(obj: Any) -> bool:
    """An object of one of the library's classes that travels by value (a net, a config):
    its class is the library's, and its state is its __dict__."""
    cls: type = type(obj)
    if cls in _PLAIN:
        return False
    return (_travels(cls) and isinstance(getattr(obj, "__dict__", None), dict)
            and not callable(obj))


_PLAIN = frozenset([int, float, str, bool, type(None), list, tuple, dict, Value, _Op, _Fused])
_PLAIN_ITEMS = frozenset([int, float, str, bool, type(None)])
_VALUE_TYPES = frozenset([Value, _Op, _Fused, _Linear])  # the engine's own node classes


@functools.lru_cache(maxsize=512)
def _travels(cls: type) -> bool:
    return library_name(cls) is not None and cls.__module__ != "microgpt.engine"


_DTYPES = ("float64", "float32", "int64", "int32", "bool")
# the items of a numpy array the grader takes as a leaf's data (a Value made from
# np.array([x]), a known mistake whose check must be able to say so). Flat and small, so
# that the nodes the grader makes again from such leaves stay as small: broadcasting
# flat arrays gives nothing longer than the longest of them
MAX_LEAF_ARRAY = 16


def _array(obj: Any) -> Any:
    if type(obj).__module__ != "numpy" or type(obj).__name__ != "ndarray":
        return None
    dtype = str(obj.dtype)
    if dtype not in _DTYPES:
        return None
    return {"A": [dtype, list(obj.shape), obj.ravel().tolist()]}


def _from_array(body: Any) -> Any:
    import numpy as np

    if not (isinstance(body, list) and len(body) == 3 and body[0] in _DTYPES
            and isinstance(body[1], list) and isinstance(body[2], list)):
        raise WireError("an array that is not [dtype, shape, numbers]")
    dtype, shape, flat = body
    if not all(isinstance(d, int) and d >= 0 for d in shape):
        raise WireError("an array whose shape is not sizes")
    if not all(isinstance(x, (int, float)) for x in flat):
        raise WireError("an array whose items are not numbers")
    try:
        return np.array(flat, dtype=dtype).reshape(shape)
    except ValueError as exc:
        raise WireError(f"an array whose shape does not fit its numbers ({exc})") from None
