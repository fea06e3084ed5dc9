"""A scalar autograd engine: microgpt's `Value`, with an iterative backward and fused nodes.

Every `Value` holds a number (`data`), the derivative of the final output with respect to
it (`grad`), the values it was computed from (`_children`) and the partial derivative of
itself with respect to each child (`_local_grads`), stored when the node is made.
`backward()` applies the chain rule in reverse topological order.

Differences from microgpt's engine, all in service of depth and speed:

- the topological sort is microgpt's depth-first search written as a loop, so a graph
  100,000 nodes deep works (a recursive sort stops near 1,000) and the order, with it
  the order in which gradients are summed, is microgpt's: the same gradients, bit for bit;
- a node made by an operation (`+`, `*`, `**`, `log`, ...) keeps its one or two children
  and their local gradients in slots of its own (`_Op`), not in two tuples: one object
  per node instead of two or three, which is most of what Python's garbage collector
  costs a training script; `_children` and `_local_grads` still read as tuples;
- nothing keeps a finished graph alive: there are no closures and no reference cycles,
  so the graph is freed as soon as the last reference to the loss goes;
- `Value.sum`, `dot` and `linear` make one node for a whole sum or dot product, instead
  of a chain of two-input adds (a 16-wide dot product is 1 node, not 32).
"""

import contextlib
import gc
import math
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

__all__ = ["Value", "dot", "fused", "linear", "zero_grad", "cycle_collector_paused"]

# math.exp overflows a float just above this
_EXP_MAX = 709.782712893384

_new: Any = object.__new__  # a node with its slots still empty (see __add__)


class Value:
    """A scalar in a computation graph: $data$, $grad = d\\,out/d\\,self$."""

    __slots__ = ("data", "grad", "_children", "_local_grads")
    # the children that have children of their own, when the maker knows them (`_Linear`
    # sets it); None: backward's sort looks at every child. A class attribute, not a slot:
    # a fifth slot and a fourth argument make every node of a per-operation graph (the
    # way students write their code) a fifth slower to build
    _inner = None
    # the operation that made the node, as micrograd's `_op`: "" for a leaf or a node made
    # by hand (`Value(data, children, local_grads)`); "+", "*", "**", "log", "exp",
    # "relu", "tanh", "sigmoid" for an operation (`_Op` keeps it in a slot of its own); a
    # fused node's name ("sum", "dot", "mean", "softmax", ...) for the fused nodes
    # (`_Fused`, `_Linear`). `microgpt.draw` labels nodes with it.
    _op = ""

    def __init__(self, data: float, children: tuple = (), local_grads: tuple = ()) -> None:
        self.data = data
        self.grad: Any = 0
        self._children = children
        self._local_grads = local_grads

    def __repr__(self) -> str:
        return f"Value(data={self.data!r}, grad={self.grad!r})"

    # ---- primitive operations: each stores its local gradients at forward time ----

    # Each makes an `_Op` node (see below). `+` and `*` make most nodes of a per-operation
    # graph (the way students write their code), so they fill the slots of a bare node
    # themselves instead of calling a constructor: the same node, without the cost of
    # running `__init__`. A number operand still becomes a leaf `Value`, as in microgpt.

    def __add__(self, other: "Value | float") -> "Value":
        """$f(a, b) = a + b$"""
        out = _new(_Op)
        if isinstance(other, Value):
            out.data = self.data + other.data
        else:
            number, other = other, _new(Value)
            other.data = number
            other.grad = 0
            other._children = other._local_grads = ()
            out.data = self.data + number
        out.grad = 0
        out._a = self
        out._b = other
        out._da = out._db = 1
        out._op = "+"
        return out

    def __mul__(self, other: "Value | float") -> "Value":
        """$f(a, b) = a b$"""
        out = _new(_Op)
        a = self.data
        if isinstance(other, Value):
            b = other.data
        else:
            b, other = other, _new(Value)
            other.data = b
            other.grad = 0
            other._children = other._local_grads = ()
        out.data = a * b
        out.grad = 0
        out._a = self
        out._b = other
        out._da = b
        out._db = a
        out._op = "*"
        return out

    def __pow__(self, other: float) -> "Value":
        """$f(a) = a^n$ for a number $n$ (the exponent gets no gradient)."""
        x = self.data
        if x > 0 and (type(other) is float or type(other) is int):  # the common case
            return _unary(x**other, self, other * x ** (other - 1), "**", other)
        if isinstance(other, Value) or not isinstance(other, (int, float)):
            kind = type(other).__name__
            raise TypeError(f"Value ** {kind}: the exponent must be an int or float")
        if x < 0 and not float(other).is_integer():
            raise ValueError(f"power of a negative number: {x!r} ** {other!r} is not real")
        if x == 0 and other < 1 and other != 0:
            raise ZeroDivisionError(f"power at zero: {x!r} ** {other!r} has no finite slope")
        local = other * x ** (other - 1) if other != 0 else 0.0
        return _unary(x**other, self, local, "**", other)

    def log(self) -> "Value":
        """$f(a) = \\ln a$, defined for $a > 0$."""
        if self.data <= 0:
            raise ValueError(f"log of a non-positive number: log({self.data!r}) is undefined")
        return _unary(math.log(self.data), self, 1 / self.data, "log")

    def exp(self) -> "Value":
        """$f(a) = e^a$"""
        if self.data > _EXP_MAX:
            raise OverflowError(f"exp overflows a float: exp({self.data!r}) is above 1.8e308")
        e = math.exp(self.data)
        return _unary(e, self, e, "exp")

    def relu(self) -> "Value":
        """$f(a) = \\max(0, a)$"""
        x = self.data
        # max(0, x) as microgpt
        return _unary(x, self, 1.0, "relu") if x > 0 else _unary(0, self, 0.0, "relu")

    def tanh(self) -> "Value":
        """$f(a) = \\tanh a$, $f' = 1 - f^2$"""
        t = math.tanh(self.data)
        return _unary(t, self, 1 - t * t, "tanh")

    def sigmoid(self) -> "Value":
        """$f(a) = 1 / (1 + e^{-a})$, $f' = f (1 - f)$"""
        x = self.data
        if x >= 0:
            s = 1 / (1 + math.exp(-x))
        else:  # the same number, written so that exp cannot overflow
            e = math.exp(x)
            s = e / (1 + e)
        return _unary(s, self, s * (1 - s), "sigmoid")

    # ---- derived operations: built from the primitives above, as in microgpt ----

    def __neg__(self) -> "Value":  # -self
        return self * -1

    # other + self is self + other, the same node as microgpt's (self first, the number
    # as a leaf second): the method itself, which saves `sum()` a call per sum
    __radd__ = __add__

    def __sub__(self, other: "Value | float") -> "Value":  # self - other
        return self + (-other)

    def __rsub__(self, other: float) -> "Value":  # other - self
        return other + (-self)

    __rmul__ = __mul__  # other * self is self * other, the same node as microgpt's

    def __truediv__(self, other: "Value | float") -> "Value":  # self / other
        return self * other**-1

    def __rtruediv__(self, other: float) -> "Value":  # other / self
        return other * self**-1

    # ---- fused nodes: one node with many children ----

    @staticmethod
    def sum(values: "Iterable[Value | float]") -> "Value":
        """$f(v_1, \\dots, v_n) = \\sum_i v_i$ as one node (plain numbers allowed)."""
        children, total, numbers = [], 0, False
        values = list(values)
        for v in values:
            if isinstance(v, Value):
                children.append(v)
                total += v.data
            else:
                total += v
                numbers = True
        out = _Fused(total, tuple(children), (1,) * len(children), "sum")
        if numbers:  # where the plain numbers were, so that the sum can be made again
            out._arg = [None if isinstance(v, Value) else v for v in values]
        return out

    # ---- the backward pass ----

    def backward(self) -> None:
        """Set `grad` of every node in the graph to $d\\,self / d\\,node$.

        Leaves (nodes with no children, such as parameters) accumulate: a second call
        adds the gradient again, as in microgpt and PyTorch, so clear them with
        `zero_grad` between steps. Inner nodes are reset on every call, so their `grad`
        is always that of the latest backward.
        """
        order = _inner_nodes_in_topological_order(self)  # their grads are 0 now
        self.grad = 1
        for v in reversed(order):
            g = v.grad
            if g:  # a zero gradient adds nothing below this node
                if type(v) is _Op:  # one or two inputs, in slots: microgpt's loop unrolled
                    v._a.grad += v._da * g
                    b = v._b
                    if b is not None:
                        b.grad += v._db * g
                else:  # a node with a tuple of inputs (a leaf has none; a fused node, many)
                    for child, local in zip(v._children, v._local_grads):
                        child.grad += local * g


class _Op(Value):
    """A node made by one of the operations above: microgpt's node, stored more compactly.

    Its one or two children are in the slots `_a` and `_b` (None for one child), their
    local gradients in `_da` and `_db`, instead of in a `_children` and a `_local_grads`
    tuple. In microgpt a node is two objects (`+`: the node and its children; the local
    gradients `(1, 1)` are one shared constant) or three (every other operation); here
    it is one. Building and freeing a graph allocates less, and Python's garbage
    collector, whose collections are set off by counting new objects that can hold
    others and which then walks all of them, has less than half as much to count and to
    walk. With the collector at its defaults that is most of the time a per-operation
    training script takes. `_children` and `_local_grads` read as microgpt's tuples.
    """

    __slots__ = ("_a", "_b", "_da", "_db", "_op")
    # `_op` names the operation (see `Value._op`); for `**`, whose node has one child,
    # `_db` holds the exponent, so the node says all it was made from
    _a: Value
    _b: Any  # a Value, or None for a node of one child
    _da: Any
    _db: Any

    @property
    def _children(self) -> tuple:  # type: ignore[override]
        return (self._a,) if self._b is None else (self._a, self._b)

    @property
    def _local_grads(self) -> tuple:  # type: ignore[override]
        return (self._da,) if self._b is None else (self._da, self._db)

    def __getstate__(self) -> tuple:  # copy and pickle: the slots that hold the node
        return None, {"data": self.data, "grad": self.grad, "_a": self._a, "_b": self._b,
                      "_da": self._da, "_db": self._db, "_op": self._op}


_Op.__name__ = "Value"  # its __qualname__ stays _Op: repr(type(node)) and pickle find it


def _unary(data: float, child: Value, local: float, op: str, exponent: Any = None) -> Value:
    """A node of one child: $data = f(child)$, $local = f'(child)$, `op` the name of f
    (and for `**` its exponent)."""
    out = _new(_Op)
    out.data = data
    out.grad = 0
    out._a = child
    out._b = None
    out._da = local
    out._db = exponent
    out._op = op
    return out


class _Fused(Value):
    """A node made by a fused operation (`Value.sum`, `dot`, the norms, softmax and
    cross-entropy of `microgpt.nn`): a `Value` with many children that names its
    operation in `_op`."""

    __slots__ = ("_op", "_arg")

    def __init__(self, data: float, children: tuple, local_grads: tuple, op: str,
                 arg: Any = None) -> None:
        self.data = data
        self.grad = 0
        self._children = children
        self._local_grads = local_grads
        self._op = op
        # what the operation needs besides its children to be made again (softmax's index,
        # cross-entropy's target, the norm's eps, the numbers of a sum or dot), or None
        self._arg = arg


_Fused.__name__ = "Value"


def fused(op: str, data: float, children: tuple, local_grads: tuple, arg: Any = None) -> Value:
    """A node of the fused operation `op` (its name, as `microgpt.draw` labels it): `data`,
    its `children` and its local derivative with respect to each; `arg`, what else the
    operation was given (an index, a target, eps), so that the node can be made again from
    its children (`autograder.kernel.wire.replay`)."""
    return _Fused(data, children, local_grads, op, arg)


def _inner_nodes_in_topological_order(root: Value) -> list[Value]:
    """The nodes reachable from `root` that have children, children before parents.

    microgpt's depth-first search, in a loop instead of recursion, so a graph of any
    depth works (a recursive sort stops near CPython's limit of 1,000 frames): children
    are searched first to last and a node is listed after all of its children, so the
    order (and with it the order in which gradients are summed) is microgpt's. Leaves
    are not listed (they have nothing to pass a gradient on to); `root` always is. Each
    listed node's `grad` is set to 0.

    The stack holds the nodes still to search, the next one on top. A node popped for
    the first time is marked `entered` and pushed back under its children (last child
    first, so the first comes off first); popped again, once everything above it is
    done, it is listed and marked `done`. A node reached again through another parent
    is skipped: its mark is `done` (in a graph without cycles, an `entered` node is
    never a child of the nodes above it). The marks live in `grad`, which is cheaper
    than a set of seen nodes; listed nodes' grads are reset to 0 at the end anyway.
    """
    order: list[Value] = []
    listed = order.append
    entered, done = object(), object()  # fresh markers: no grad can hold them yet
    stack = [root]
    push, pop = stack.append, stack.pop
    try:
        while stack:
            v = pop()
            mark = v.grad
            if mark is entered:  # every child of v is listed
                v.grad = done
                listed(v)
            elif mark is not done:
                if type(v) is _Op:  # the common node: one or two children, in slots
                    # a child to search has children of its own and is not listed yet
                    a = v._a
                    b = v._b
                    search_a = (type(a) is _Op or a._children) and a.grad is not done
                    search_b = b is not None and (type(b) is _Op or b._children) \
                        and b.grad is not done
                    if search_a or search_b:
                        v.grad = entered
                        push(v)
                        if search_b:
                            push(b)
                        if search_a:
                            push(a)
                    else:  # nothing below v to list (most nodes of a matrix product:
                        v.grad = done  # a weight and an input already listed)
                        listed(v)
                else:
                    v.grad = entered
                    push(v)
                    inner = v._inner  # a `_Linear` node names the children that are not weights
                    for child in reversed(v._children if inner is None else inner):
                        if (type(child) is _Op or child._children) and child.grad is not done:
                            push(child)
    except BaseException:  # a child that is not a Value, say: leave no marker behind
        for v in stack + order:
            mark = getattr(v, "grad", None)
            if mark is entered or mark is done:
                v.grad = 0
        raise
    for v in order:
        v.grad = 0
    return order


class _Linear(Value):
    """An output of `linear` whose weights are all leaves: `_inner` holds the inputs that
    have children of their own, so backward's sort skips the weights."""

    __slots__ = ("_inner",)
    _op = "dot"

    def __init__(self, data: float, children: tuple, local_grads: tuple, inner: tuple) -> None:
        self.data = data
        self.grad = 0
        self._children = children
        self._local_grads = local_grads
        self._inner = inner


def dot(ws: Sequence[Value | float], xs: Sequence[Value | float]) -> Value:
    """$f(w, x) = \\sum_i w_i x_i$ as one node; either side may hold plain numbers."""
    if len(ws) != len(xs):
        raise ValueError(f"dot of sequences of different lengths: {len(ws)} and {len(xs)}")
    try:  # the hot path: Values on both sides
        wd = [w.data for w in ws]
        xd = [x.data for x in xs]
    except AttributeError:
        return _dot_mixed(ws, xs)
    return _Fused(sum(map(operator.mul, wd, xd)), (*ws, *xs), (*xd, *wd), "dot")


def _dot_mixed(ws: Sequence[Value | float], xs: Sequence[Value | float]) -> Value:
    total = 0
    children, local = [], []
    for w, x in zip(ws, xs):
        wv, xv = isinstance(w, Value), isinstance(x, Value)
        wd = w.data if wv else w
        xd = x.data if xv else x
        total += wd * xd
        if wv:
            children.append(w)
            local.append(xd)
        if xv:
            children.append(x)
            local.append(wd)
    # the plain numbers on either side, so that the node can be made again from its children
    arg = [[None if isinstance(w, Value) else w for w in ws],
           [None if isinstance(x, Value) else x for x in xs]]
    return _Fused(total, tuple(children), tuple(local), "dot", arg)


def linear(x: Iterable[Value], w: Sequence[Sequence[Value]], w_data: Sequence | None = None,
           leaf_weights: bool = False) -> list[Value]:
    """$y = W x$ for a list of rows `w` (no bias): one node per output, as `dot` makes.

    Two hints for a caller that applies the same weights many times, as a model does at
    every position: `w_data` holds the rows' numbers (`[[p.data for p in row] for row in
    w]`), so they are read once; `leaf_weights=True` promises that every weight is a
    leaf (a parameter), so `backward`'s sort need not look at them.
    """
    x = tuple(x)
    try:
        xd = tuple([v.data for v in x])
    except AttributeError:
        return [dot(row, x) for row in w]
    if w_data is None:
        w_data = [None] * len(w)
    elif len(w_data) != len(w):
        raise ValueError(f"linear: {len(w_data)} rows of numbers for {len(w)} rows of weights")
    if leaf_weights:
        node, extra = _Linear, (tuple([v for v in x if v._children]),)
    else:
        node, extra = _Fused, ("dot",)
    out = []
    for row, wd in zip(w, w_data):
        if len(row) != len(x):
            raise ValueError(f"linear: a row of {len(row)} weights for {len(x)} inputs")
        if wd is None:
            try:
                wd = [p.data for p in row]
            except AttributeError:  # a row holding plain numbers
                out.append(dot(row, x))
                continue
        out.append(node(sum(map(operator.mul, wd, xd)), (*row, *x), (*xd, *wd), *extra))
    return out


def zero_grad(params: Iterable[Value]) -> None:
    """Set `grad` to 0 on every parameter, before the next backward."""
    for p in params:
        p.grad = 0


@contextlib.contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector inside a `with` block, then restore it.

    Safe with this engine: its graphs hold no reference cycles, so reference counting
    frees each one as soon as it is dropped, and the cyclic collector only spends time
    walking live graphs (often a third of a training step, more on deep nets).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
