"""A scalar autograd engine: microgpt's `Value`, with an iterative backward and fused nodes.

Every `Value` holds a number (`data`), the derivative of the final output with respect to
it (`grad`), the values it was computed from (`_children`) and the partial derivative of
itself with respect to each child (`_local_grads`), stored when the node is made.
`backward()` applies the chain rule in reverse topological order.

Differences from microgpt's engine, all in service of depth and speed:

- the topological sort recurses as microgpt's does, but only a few hundred nodes deep:
  below that it goes on with an explicit stack, so a graph 100,000 nodes deep works (a
  recursive sort stops near 1,000), and the order is microgpt's either way;
- nothing keeps a finished graph alive: there are no closures and no reference cycles,
  so the graph is freed as soon as the last reference to the loss goes;
- `Value.sum`, `dot` and `linear` make one node for a whole sum or dot product, instead
  of a chain of two-input adds (a 16-wide dot product is 1 node, not 32).
"""

import contextlib
import gc
import math
import operator

__all__ = ["Value", "dot", "linear", "zero_grad", "cycle_collector_paused"]

# math.exp overflows a float just above this
_EXP_MAX = 709.782712893384

_new = object.__new__  # a Value with its slots still empty (see __add__)


class Value:
    """A scalar in a computation graph: $data$, $grad = d\\,out/d\\,self$."""

    __slots__ = ("data", "grad", "_children", "_local_grads")
    # the children that have children of their own, when the maker knows them (`_Linear`
    # sets it); None: backward's sort looks at every child. A class attribute, not a slot:
    # a fifth slot and a fourth argument make every node of a per-operation graph (the
    # way students write their code) a fifth slower to build
    _inner = None

    def __init__(self, data, children=(), local_grads=()):
        self.data = data
        self.grad = 0
        self._children = children
        self._local_grads = local_grads

    def __repr__(self):
        return f"Value(data={self.data!r}, grad={self.grad!r})"

    # ---- primitive operations: each stores its local gradients at forward time ----

    # `+` and `*` make most nodes of a per-operation graph (the way students write their
    # code), so they fill the slots of a bare object themselves instead of calling
    # `Value(...)`: the same node, without the cost of running `__init__` from C. A
    # number operand still becomes a leaf `Value`, as in microgpt.

    def __add__(self, other):
        """$f(a, b) = a + b$"""
        out = _new(Value)
        if isinstance(other, Value):
            out.data = self.data + other.data
        else:
            number, other = other, _new(Value)
            other.data = number
            other.grad = 0
            other._children = other._local_grads = ()
            out.data = self.data + number
        out.grad = 0
        out._children = (self, other)
        out._local_grads = (1, 1)
        return out

    def __mul__(self, other):
        """$f(a, b) = a b$"""
        out = _new(Value)
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
        out._children = (self, other)
        out._local_grads = (b, a)
        return out

    def __pow__(self, other):
        """$f(a) = a^n$ for a number $n$ (the exponent gets no gradient)."""
        if isinstance(other, Value) or not isinstance(other, (int, float)):
            kind = type(other).__name__
            raise TypeError(f"Value ** {kind}: the exponent must be an int or float")
        x = self.data
        if x < 0 and not float(other).is_integer():
            raise ValueError(f"power of a negative number: {x!r} ** {other!r} is not real")
        if x == 0 and other < 1 and other != 0:
            raise ZeroDivisionError(f"power at zero: {x!r} ** {other!r} has no finite slope")
        local = other * x ** (other - 1) if other != 0 else 0.0
        return Value(x**other, (self,), (local,))

    def log(self):
        """$f(a) = \\ln a$, defined for $a > 0$."""
        if self.data <= 0:
            raise ValueError(f"log of a non-positive number: log({self.data!r}) is undefined")
        return Value(math.log(self.data), (self,), (1 / self.data,))

    def exp(self):
        """$f(a) = e^a$"""
        if self.data > _EXP_MAX:
            raise OverflowError(f"exp overflows a float: exp({self.data!r}) is above 1.8e308")
        e = math.exp(self.data)
        return Value(e, (self,), (e,))

    def relu(self):
        """$f(a) = \\max(0, a)$"""
        return Value(max(0, self.data), (self,), (float(self.data > 0),))

    def tanh(self):
        """$f(a) = \\tanh a$, $f' = 1 - f^2$"""
        t = math.tanh(self.data)
        return Value(t, (self,), (1 - t * t,))

    def sigmoid(self):
        """$f(a) = 1 / (1 + e^{-a})$, $f' = f (1 - f)$"""
        x = self.data
        if x >= 0:
            s = 1 / (1 + math.exp(-x))
        else:  # the same number, written so that exp cannot overflow
            e = math.exp(x)
            s = e / (1 + e)
        return Value(s, (self,), (s * (1 - s),))

    # ---- derived operations: built from the primitives above, as in microgpt ----

    def __neg__(self):  # -self
        return self * -1

    # other + self is self + other, the same node as microgpt's (self first, the number
    # as a leaf second): the method itself, which saves `sum()` a call per sum
    __radd__ = __add__

    def __sub__(self, other):  # self - other
        return self + (-other)

    def __rsub__(self, other):  # other - self
        return other + (-self)

    __rmul__ = __mul__  # other * self is self * other, the same node as microgpt's

    def __truediv__(self, other):  # self / other
        return self * other**-1

    def __rtruediv__(self, other):  # other / self
        return other * self**-1

    # ---- fused nodes: one node with many children ----

    @staticmethod
    def sum(values):
        """$f(v_1, \\dots, v_n) = \\sum_i v_i$ as one node (plain numbers allowed)."""
        children, total = [], 0
        for v in values:
            if isinstance(v, Value):
                children.append(v)
                total += v.data
            else:
                total += v
        return Value(total, tuple(children), (1,) * len(children))

    # ---- the backward pass ----

    def backward(self):
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
                try:
                    # the fast path, for a two-input node (most nodes of a per-operation
                    # graph): no zip and no loop, the same two additions in the same order
                    (a, b), (local_a, local_b) = v._children, v._local_grads
                except ValueError:  # one input, or many (a fused node): microgpt's loop
                    for child, local in zip(v._children, v._local_grads):
                        child.grad += local * g
                    continue
                a.grad += local_a * g
                b.grad += local_b * g


def _inner_nodes_in_topological_order(root):
    """The nodes reachable from `root` that have children, children before parents.

    microgpt's depth-first search: children are visited first to last and a node is
    listed after all of its children, so the order (and with it the order in which
    gradients are summed) is microgpt's. Leaves are not listed (they have nothing to
    pass a gradient on to); `root` always is. Each listed node's `grad` is set to 0.

    A node is marked as seen by setting its `grad` to a marker made for this call (the
    listed nodes' grads are reset to 0 at the end anyway), which is cheaper than a set of
    seen nodes. The search recurses, as microgpt's does, while it is less than
    `_RECURSION_DEPTH` nodes deep; below that it goes on with an explicit stack, so a
    graph 100,000 nodes deep works too.
    """
    order = []
    seen = object()  # a fresh marker: no node's grad can hold it before this call
    root.grad = seen
    try:
        try:
            _visit(root, order.append, seen, 0)
        except RecursionError:  # called from deep inside a caller's own recursion
            _unmark(root, seen)
            order.clear()
            root.grad = seen
            _visit_with_a_stack(root, order.append, seen)
    except BaseException:  # a child that is not a Value, say: leave no marker behind
        _unmark(root, seen)
        raise
    for node in order:
        node.grad = 0
    return order


# How deep the sort recurses before it goes on with an explicit stack. Recursion is
# microgpt's own sort and the common case (microgpt's graphs are 200-300 nodes deep, a
# few layers more stay under 1,000): a Python call per node instead of pushing and
# popping iterators on two lists (on microgpt's graphs the two took about the same CPU
# time on our machines, within their noise). Kept well below CPython's default recursion
# limit (1,000), so the sort also works when backward is called from some depth inside
# the caller's own code; deeper still, it starts again with the stack alone.
_RECURSION_DEPTH = 400


def _visit(node, append, seen, depth):
    """List the unseen inner nodes below `node` (already marked), then `node` itself."""
    inner = node._inner  # a `_Linear` node lists the children that are not weights
    for child in node._children if inner is None else inner:
        if child._children and child.grad is not seen:
            child.grad = seen
            if depth < _RECURSION_DEPTH:
                _visit(child, append, seen, depth + 1)
            else:
                _visit_with_a_stack(child, append, seen)
    append(node)


def _visit_with_a_stack(node, append, seen):
    """`_visit` without recursion, for any depth: the same nodes in the same order.

    It keeps its own stack of the nodes being visited and of the iterators over their
    children; the iterator of the node on top of the stack is in a local variable.
    """
    nodes, iters = [node], []
    push_node, pop_node, push_iter, pop_iter = nodes.append, nodes.pop, iters.append, iters.pop
    inner = node._inner
    it = iter(node._children if inner is None else inner)
    while True:
        for child in it:
            if child._children and child.grad is not seen:
                child.grad = seen
                push_node(child)
                push_iter(it)
                inner = child._inner
                it = iter(child._children if inner is None else inner)
                break
        else:  # every child of the node on top is listed: list the node
            append(pop_node())
            if not iters:
                return
            it = pop_iter()


def _unmark(root, seen):
    """Set `grad` to 0 on every node still marked `seen` (the sort stopped half way)."""
    stack = [root]
    while stack:
        v = stack.pop()
        if getattr(v, "grad", None) is seen:
            v.grad = 0
            stack.extend(v._children)


class _Linear(Value):
    """An output of `linear` whose weights are all leaves: `_inner` holds the inputs that
    have children of their own, so backward's sort skips the weights."""

    __slots__ = ("_inner",)

    def __init__(self, data, children, local_grads, inner):
        self.data = data
        self.grad = 0
        self._children = children
        self._local_grads = local_grads
        self._inner = inner


def dot(ws, xs):
    """$f(w, x) = \\sum_i w_i x_i$ as one node; either side may hold plain numbers."""
    if len(ws) != len(xs):
        raise ValueError(f"dot of sequences of different lengths: {len(ws)} and {len(xs)}")
    try:  # the hot path: Values on both sides
        wd = [w.data for w in ws]
        xd = [x.data for x in xs]
    except AttributeError:
        return _dot_mixed(ws, xs)
    return Value(sum(map(operator.mul, wd, xd)), (*ws, *xs), (*xd, *wd))


def _dot_mixed(ws, xs):
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
    return Value(total, tuple(children), tuple(local))


def linear(x, w, w_data=None, leaf_weights=False):
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
        node, extra = Value, ()
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


def zero_grad(params):
    """Set `grad` to 0 on every parameter, before the next backward."""
    for p in params:
        p.grad = 0


@contextlib.contextmanager
def cycle_collector_paused():
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
