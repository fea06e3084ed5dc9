"""The engine: every operation against central differences, hand-computed graphs, depth,
memory, numerical edge cases and the semantics of a second backward."""

import gc
import math
import random
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import (
    derivative_check,
    divisors,
    exp_inputs,
    floats,
    int_exponents,
    positive_floats,
    pow_bases,
    pow_exponents,
    relu_inputs,
    small_floats,
    squashing_inputs,
    vector_pairs,
    vectors,
)

from microgpt import GPT, Adam, CharTokenizer, Value, dot, linear, zero_grad

# ---- claim 1: every operation's value and gradient against central differences ----

UNARY = [
    ("neg", lambda a: -a, lambda a: -a, small_floats),
    ("log", lambda a: a.log(), math.log, positive_floats),
    ("exp", lambda a: a.exp(), math.exp, exp_inputs),
    ("relu", lambda a: a.relu(), lambda a: max(0.0, a), relu_inputs),
    ("tanh", lambda a: a.tanh(), math.tanh, squashing_inputs),
    ("sigmoid", lambda a: a.sigmoid(), lambda a: 1 / (1 + math.exp(-a)), squashing_inputs),
]

# the same lambda runs on floats (the reference) and on Values (the engine)
BINARY = [
    ("add", lambda a, b: a + b, small_floats),
    ("sub", lambda a, b: a - b, small_floats),
    ("mul", lambda a, b: a * b, small_floats),
    ("truediv", lambda a, b: a / b, divisors),  # the strategy is that of b
]


@pytest.mark.parametrize(("name", "fn", "ref", "inputs"), UNARY, ids=[u[0] for u in UNARY])
@given(data=st.data())
def test_unary_op_matches_central_difference(name, fn, ref, inputs, data):
    x = data.draw(inputs, label="x")
    derivative_check(lambda v: fn(v[0]), lambda y: ref(y[0]), [x], name)


@pytest.mark.parametrize(("name", "fn", "b_inputs"), BINARY, ids=[b[0] for b in BINARY])
@given(data=st.data())
def test_binary_op_matches_central_difference(name, fn, b_inputs, data):
    a, b = data.draw(small_floats, label="a"), data.draw(b_inputs, label="b")
    derivative_check(lambda v: fn(v[0], v[1]), lambda y: fn(y[0], y[1]), [a, b], name)


@pytest.mark.parametrize(("name", "fn", "b_inputs"), BINARY, ids=[b[0] for b in BINARY])
@given(data=st.data())
def test_binary_op_with_a_number_on_the_right(name, fn, b_inputs, data):
    a, c = data.draw(small_floats, label="a"), data.draw(b_inputs, label="c")
    derivative_check(lambda v: fn(v[0], c), lambda y: fn(y[0], c), [a], f"{name} by {c}")


@pytest.mark.parametrize(("name", "fn", "a_inputs"), BINARY, ids=[b[0] for b in BINARY])
@given(data=st.data())
def test_binary_op_on_one_value_used_twice(name, fn, a_inputs, data):
    """$a + a$, $a - a$, $a a$, $a / a$: both edges into one node must add up."""
    a = data.draw(a_inputs, label="a")
    derivative_check(lambda v: fn(v[0], v[0]), lambda y: fn(y[0], y[0]), [a], f"{name}(a, a)")


REFLECTED = [
    ("radd", lambda c, a: c + a, small_floats),
    ("rsub", lambda c, a: c - a, small_floats),
    ("rmul", lambda c, a: c * a, small_floats),
    ("rtruediv", lambda c, a: c / a, divisors),  # the strategy is that of a
]


@pytest.mark.parametrize(("name", "fn", "a_inputs"), REFLECTED, ids=[r[0] for r in REFLECTED])
@given(data=st.data())
def test_reflected_op_with_a_number_on_the_left(name, fn, a_inputs, data):
    c, a = data.draw(small_floats, label="c"), data.draw(a_inputs, label="a")
    derivative_check(lambda v: fn(c, v[0]), lambda y: fn(c, y[0]), [a], f"{name} of {c}")


@given(a=pow_bases, n=pow_exponents)
def test_pow_of_a_positive_base(a, n):
    derivative_check(lambda v: v[0] ** n, lambda y: y[0] ** n, [a], f"pow by {n}")


@given(a=small_floats, n=int_exponents)
def test_pow_by_a_positive_integer_on_any_base(a, n):
    derivative_check(lambda v: v[0] ** n, lambda y: y[0] ** n, [a], f"pow by {n}")


@given(xs=vectors(max_size=5), cs=vectors(min_size=0, max_size=3), data=st.data())
def test_fused_sum_of_values_and_numbers(xs, cs, data):
    slots = data.draw(st.permutations([("v", i) for i in range(len(xs))] + [("c", c) for c in cs]))

    def items(v):
        return [v[i] if kind == "v" else i for kind, i in slots]

    derivative_check(lambda v: Value.sum(items(v)), lambda y: math.fsum(items(y)), xs, "sum")


@given(xs=vectors(max_size=4))
def test_fused_sum_of_one_value_listed_twice(xs):
    derivative_check(
        lambda v: Value.sum([*v, v[0]]), lambda y: math.fsum([*y, y[0]]), xs, "sum with a repeat"
    )


def _fsum_products(ws, xs):
    return math.fsum(w * x for w, x in zip(ws, xs))


@given(pair=vector_pairs())
def test_dot_of_values(pair):
    ws, xs = pair
    n = len(ws)
    derivative_check(
        lambda v: dot(v[:n], v[n:]), lambda y: _fsum_products(y[:n], y[n:]), ws + xs, "dot"
    )


@given(pair=vector_pairs(), data=st.data())
def test_dot_of_values_and_numbers(pair, data):
    """Either side may hold plain numbers, in any positions; only the Values get gradients."""
    ws, xs = pair
    n = len(ws)
    # which of the 2n entries are Values (the rest are numbers); at least one Value
    is_value = data.draw(
        st.lists(st.booleans(), min_size=2 * n, max_size=2 * n).filter(any), label="is_value"
    )
    entries = ws + xs
    value_slots = [i for i in range(2 * n) if is_value[i]]

    def fill(v):  # put the leaves (or their float stand-ins) into the Value slots
        full = list(entries)
        for leaf, i in zip(v, value_slots):
            full[i] = leaf
        return full

    def engine(v):
        full = fill(v)
        return dot(full[:n], full[n:])

    def reference(y):
        full = fill(y)
        return _fsum_products(full[:n], full[n:])

    derivative_check(engine, reference, [entries[i] for i in value_slots], f"dot {is_value}")


@given(xs=vectors(max_size=5))
def test_dot_of_a_vector_with_itself(xs):
    derivative_check(lambda v: dot(v, v), lambda y: _fsum_products(y, y), xs, "dot(x, x)")


@st.composite
def linear_inputs(draw):
    n_in = draw(st.integers(1, 4))
    n_out = draw(st.integers(1, 3))
    w = draw(st.lists(vectors(min_size=n_in, max_size=n_in), min_size=n_out, max_size=n_out))
    x = draw(vectors(min_size=n_in, max_size=n_in))
    return w, x


def _rows(flat, n_out, n_in):
    return [flat[r * n_in : (r + 1) * n_in] for r in range(n_out)]


@given(wx=linear_inputs())
def test_linear_of_values(wx):
    w, x = wx
    n_out, n_in = len(w), len(x)
    k = n_out * n_in
    flat = [a for row in w for a in row] + x

    def engine(v):
        return linear(v[k:], _rows(v[:k], n_out, n_in))

    def reference(y):
        return [_fsum_products(row, y[k:]) for row in _rows(y[:k], n_out, n_in)]

    derivative_check(engine, reference, flat, "linear")


@given(wx=linear_inputs())
def test_linear_of_numbers_by_value_weights(wx):
    w, x = wx
    n_out, n_in = len(w), len(x)
    flat = [a for row in w for a in row]

    def engine(v):
        return linear(x, _rows(v, n_out, n_in))

    def reference(y):
        return [_fsum_products(row, x) for row in _rows(y, n_out, n_in)]

    derivative_check(engine, reference, flat, "linear of numbers")


@given(xs=vectors(max_size=4))
def test_linear_whose_input_is_also_a_weight_row(xs):
    """$y = [x \\cdot x, 2 x \\cdot x]$ with the rows holding the input's own Values."""
    derivative_check(
        lambda v: linear(v, [v, [2 * a for a in v]]),
        lambda y: [_fsum_products(y, y), 2 * _fsum_products(y, y)],
        xs,
        "linear(x, [x, 2x])",
    )


@given(wx=linear_inputs())
def test_linear_with_the_callers_hints(wx):
    """`w_data` and `leaf_weights` change nothing but speed, also when the input is inner."""
    w, x = wx
    n_out, n_in = len(w), len(x)
    k = n_out * n_in

    def engine(v):
        rows = _rows(v[:k], n_out, n_in)  # leaves: what leaf_weights promises
        doubled = [2 * a for a in v[k:]]  # inner nodes, which the sort must still reach
        return linear(doubled, rows, [[p.data for p in r] for r in rows], leaf_weights=True)

    def reference(y):
        return [_fsum_products(row, [2 * a for a in y[k:]]) for row in _rows(y[:k], n_out, n_in)]

    derivative_check(engine, reference, [a for row in w for a in row] + x, "linear, hinted")


def test_mismatched_lengths_are_errors():
    a = [Value(1.0), Value(2.0)]
    with pytest.raises(ValueError, match="different lengths"):
        dot(a, [Value(1.0)])
    with pytest.raises(ValueError, match="different lengths"):
        dot(a, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="linear"):
        linear(a, [[Value(1.0)]])
    with pytest.raises(ValueError, match="rows of numbers"):
        linear(a, [a, a], w_data=[[1.0, 2.0]])


def test_a_value_exponent_is_refused():
    with pytest.raises(TypeError, match="exponent"):
        Value(2.0) ** Value(3.0)


# ---- claim 2: small graphs computed by hand ----


def test_node_used_twice_then_squared():
    """$b = a^2 + a$, $c = b^2$ at $a = 3$: $b = 12$, $c = 144$,
    $dc/db = 2b = 24$, $dc/da = 2b (2a + 1) = 168$."""
    a = Value(3.0)
    b = a * a + a
    c = b * b
    c.backward()
    assert (b.data, c.data) == (12.0, 144.0)
    assert c.grad == 1
    assert b.grad == 24.0, f"Expected db = 24, got {b.grad}"
    assert a.grad == 168.0, f"Expected da = 168, got {a.grad}"


def test_diamond():
    """$b = 2a$, $c = a + 1$, $d = b c$ at $a = 3$: $d = 24$,
    $dd/db = c = 4$, $dd/dc = b = 6$, $dd/da = 2c + b = 14$."""
    a = Value(3.0)
    b = a * 2
    c = a + 1
    d = b * c
    d.backward()
    assert d.data == 24.0
    assert (b.grad, c.grad) == (4.0, 6.0), f"Expected (4, 6), got {(b.grad, c.grad)}"
    assert a.grad == 14.0, f"Expected da = 14, got {a.grad}"


def test_inner_node_reused_by_a_later_node():
    """$b = a + a$, $c = b + b$: $dc/da = 4$ (a recursive backward without a sort gets 6)."""
    a = Value(-1.5)
    b = a + a
    c = b + b
    c.backward()
    assert c.data == -6.0
    assert (b.grad, a.grad) == (2, 4), f"Expected (2, 4), got {(b.grad, a.grad)}"


def test_fused_nodes_in_a_small_graph():
    """$b = a^2$, $s = b + b + a + 5$, $t = b \\cdot s$ (a dot) at $a = 2$:
    $b = 4$, $s = 15$, $t = 60$; $dt/ds = b = 4$; $dt/db = s + 2b = 23$;
    $dt/da = dt/db \\cdot 2a + dt/ds = 92 + 4 = 96$."""
    a = Value(2.0)
    b = a**2
    s = Value.sum([b, b, a, 5])
    t = dot([b], [s])
    t.backward()
    assert (b.data, s.data, t.data) == (4.0, 15.0, 60.0)
    assert s.grad == 4.0 and b.grad == 23.0, f"Expected (4, 23), got {(s.grad, b.grad)}"
    assert a.grad == 96.0, f"Expected da = 96, got {a.grad}"


def test_log_exp_relu_graph():
    """$y = \\ln(e^a \\cdot b) + \\mathrm{relu}(-b) + \\mathrm{relu}(b)$ at $a = 0.5$, $b = 2$:
    $y = a + \\ln b + b = 2.5 + \\ln 2$, $dy/da = 1$, $dy/db = 1/b + 1 = 1.5$."""
    a, b = Value(0.5), Value(2.0)
    y = (a.exp() * b).log() + (-b).relu() + b.relu()
    y.backward()
    assert y.data == pytest.approx(2.5 + math.log(2), rel=1e-15)
    assert a.grad == pytest.approx(1.0, rel=1e-15)
    assert b.grad == pytest.approx(1.5, rel=1e-15)


def test_a_node_reads_as_microgpts_node(textbook):
    """Each operation's node has microgpt's `_children` and `_local_grads` (the textbook
    class builds its nodes as microgpt does), the same data and, after backward, the same
    grads to the last bit; it is a `Value` to isinstance and to Python's own messages,
    and survives copy and pickle."""
    import copy
    import pickle

    def build(make):
        a, b = make(1.5), make(-0.75)
        nodes = [a + b, a * b, a + 2.0, 3.0 * b, a**3, a ** -0.5, b**2, a.log(), b.exp(),
                 a.relu(), b.relu(), -a, a - b, 1.0 - b, a / b, 2.0 / a]
        out = nodes[0]
        for v in nodes[1:]:
            out = out * v + v
        out.backward()
        return [a, b, *nodes]

    def shape(v):
        kids = [(c.data, bool(c._children)) for c in v._children]
        return v.data, v.grad, kids, list(v._local_grads)

    ours, theirs = build(Value), build(textbook.TextbookValue)
    for mine, want in zip(ours, theirs, strict=True):
        assert shape(mine) == shape(want)
        assert isinstance(mine, Value) and isinstance(mine._children, tuple)
    node = ours[3]  # a * b
    assert type(node).__name__ == "Value"
    with pytest.raises(TypeError, match="'Value' object is not iterable"):
        iter(node)
    for twin in (copy.deepcopy(node), pickle.loads(pickle.dumps(node))):
        assert shape(twin) == shape(node)
        assert [c.data for c in twin._children] == [1.5, -0.75]


# ---- claim 3: backward never recurses ----


@pytest.fixture
def default_recursion_limit():
    """Run at CPython's default recursion limit (1000), whatever the runner set."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


DEPTH = 100_000


def test_chain_of_adds_deeper_than_the_recursion_limit(default_recursion_limit):
    x0 = Value(0.25)
    x = x0
    for _ in range(DEPTH):
        x = x + 1.0
    x.backward()
    assert x.data == DEPTH + 0.25
    assert x0.grad == 1


# (engine op, float op, float derivative): one lap returns x to where it started
LAP = [
    (lambda x: x + 3.0, lambda x: x + 3.0, lambda x: 1.0),
    (lambda x: x**3, lambda x: x**3, lambda x: 3 * x**2),
    (lambda x: x ** (1 / 3), lambda x: x ** (1 / 3), lambda x: x ** (-2 / 3) / 3),
    (lambda x: x.exp(), math.exp, math.exp),
    (lambda x: x.log(), math.log, lambda x: 1 / x),
    (lambda x: x.relu(), lambda x: max(0.0, x), lambda x: float(x > 0)),
    (lambda x: x * 2.0, lambda x: x * 2.0, lambda x: 2.0),
    (lambda x: x / 2.0, lambda x: x / 2.0, lambda x: 0.5),
    (lambda x: 0.5 - x, lambda x: 0.5 - x, lambda x: -1.0),
    (lambda x: -x, lambda x: -x, lambda x: -1.0),
    (lambda x: x - 2.5, lambda x: x - 2.5, lambda x: 1.0),
]


def test_chain_of_mixed_ops_deeper_than_the_recursion_limit(default_recursion_limit):
    """The derivative of the chain is checked against forward-mode accumulation in floats."""
    x0 = Value(0.3)
    x, xf, deriv = x0, 0.3, 1.0
    for i in range(DEPTH):
        op, fop, dop = LAP[i % len(LAP)]
        x = op(x)
        deriv *= dop(xf)
        xf = fop(xf)
    x.backward()
    assert x.data == pytest.approx(xf, rel=1e-9)
    assert abs(deriv) > 0.1  # the chain did not collapse to a trivial derivative
    assert x0.grad == pytest.approx(deriv, rel=1e-9), f"Expected {deriv}, got {x0.grad}"


def test_wide_fan_in_and_fan_out_deeper_than_the_recursion_limit(default_recursion_limit):
    """Each node feeds the next two, so every node is reached by many paths."""
    a = Value(1.0)
    prev, cur = a, a * 1.0
    for _ in range(20_000):
        prev, cur = cur, (prev + cur) * 0.5
    cur.backward()
    # x_{n+1} = (x_{n-1} + x_n)/2 with both starting at a: every x_n is a, so dx/da = 1
    assert cur.data == pytest.approx(1.0, rel=1e-12)
    assert a.grad == pytest.approx(1.0, rel=1e-9)


def _microgpt_order(root):
    """microgpt's recursive build_topo, leaves left out (run at a raised recursion limit)."""
    topo, visited = [], set()

    def build_topo(v):
        if v not in visited:
            visited.add(v)
            for child in v._children:
                build_topo(child)
            if v._children:
                topo.append(v)

    build_topo(root)
    return topo


def _ladder(depth):
    """A graph `depth` nodes deep whose nodes are reached by many paths (each feeds two)."""
    a = Value(0.5)
    prev, cur = a, a * 1.0
    for i in range(depth):
        prev, cur = cur, (prev + cur) * (0.5 if i % 3 else 0.25) + prev * 0.1
    return cur


@pytest.mark.parametrize("depth", [1, 10, 400, 2_000])
def test_the_sort_is_microgpts_order(depth):
    """The loop lists the nodes in the order of microgpt's recursive build_topo."""
    from microgpt import engine

    root = _ladder(depth)
    order = engine._inner_nodes_in_topological_order(root)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20 * depth + 1_000))
    try:
        want = _microgpt_order(root)
    finally:
        sys.setrecursionlimit(old)
    assert order == want
    assert all(v.grad == 0 for v in order)


def test_the_sort_is_microgpts_order_through_fused_and_shared_nodes():
    """Fused nodes (many children, a `_Linear` that skips its weights), a node that is
    both children of one node, and numbers among the children: microgpt's order."""
    from microgpt import engine

    w = [[Value(0.1 * (i - j)) for j in range(3)] for i in range(3)]
    x = [Value(0.5), Value(-0.25), Value(2.0)]
    h = [v.relu() for v in linear([xi * xi for xi in x], w, leaf_weights=True)]
    y = Value.sum([h[0] * h[1], dot(h, x), h[2] ** 2, 3.0]) - x[0]
    root = y * y + dot([1.0, h[0]], [y, 2.0])
    order = engine._inner_nodes_in_topological_order(root)
    assert order == _microgpt_order(root)
    assert order[-1] is root and len(order) == len({id(v) for v in order})


def test_backward_from_deep_inside_the_callers_own_recursion(default_recursion_limit):
    """Called a few frames short of the recursion limit, backward (which does not
    recurse) gives the same gradients as from the top."""

    def leaf_grad():
        root = _ladder(600)
        leaf = root._children[1]._children[0]._children[0]._children[0]  # some inner node
        root.backward()
        return root.data, leaf.grad, _ladder_leaf(root).grad

    want = leaf_grad()

    def at_depth(n):
        return at_depth(n - 1) if n else leaf_grad()

    assert at_depth(sys.getrecursionlimit() - 150) == want


def _ladder_leaf(root):
    """The one leaf `_ladder` starts from (the first child all the way down)."""
    v = root
    while v._children:
        v = v._children[0]
    return v


# ---- claim 4: no reference cycles, flat memory ----


def live(cls):
    """How many objects of `cls` (its subclasses included: the nodes an operation makes
    are a subclass of `Value`) the garbage collector knows about."""
    return sum(1 for o in gc.get_objects() if isinstance(o, cls))


@pytest.fixture
def gc_disabled():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


DOC = "isabella"


def test_finished_graph_is_freed_without_the_garbage_collector(gc_disabled):
    model = GPT(seed=0)
    tokens = CharTokenizer(["abcdefghijklmnopqrstuvwxyz"]).encode(DOC)
    before = live(Value)
    loss = model.loss(tokens)
    loss.backward()
    during = live(Value)
    del loss
    after = live(Value)
    assert during - before > 1_000, "the graph should hold thousands of nodes"
    assert after == before, f"Expected {before} live Values after `del loss`, got {after}"
    assert gc.collect() == 0, "the graph left cyclic garbage behind"


def test_the_cycle_check_catches_a_recursive_closure(gc_disabled, textbook):
    """Control for the test above: the textbook backward's recursive closure is a cycle,
    so its graph outlives `del loss` when the garbage collector is off."""
    model = GPT(seed=0)
    sd = {k: [[textbook.TextbookValue(p.data) for p in row] for row in m]
          for k, m in model.state_dict.items()}
    tokens = CharTokenizer(["abcdefghijklmnopqrstuvwxyz"]).encode(DOC)
    before = live(textbook.TextbookValue)
    loss = textbook.gpt_loss(sd, tokens, n_layer=1, n_head=4, block_size=16)
    loss.backward()
    del loss
    assert live(textbook.TextbookValue) - before > 10_000
    assert gc.collect() > 0


def test_memory_stays_flat_over_a_training_run(names):
    """150 steps with the collector at its defaults: the number of allocated blocks after
    step 150 is within a small margin of step 20 (one leaked graph is ~10^5 blocks), and
    no Value outlives its step except the parameters.

    (tracemalloc would measure the same thing but slows these 150 steps about tenfold.)
    """
    assert gc.isenabled()
    docs = list(names)
    random.Random(0).shuffle(docs)
    tok = CharTokenizer(docs)
    model = GPT(vocab_size=tok.vocab_size, seed=0)
    params = model.parameters()
    opt = Adam(params, total_steps=150)
    blocks = {}
    for step in range(1, 151):
        loss = model.loss(tok.encode(docs[step % len(docs)]))
        loss.backward()
        opt.step()
        del loss
        if step in (20, 150):
            blocks[step] = sys.getallocatedblocks()
            assert live(Value) == len(params), f"Values outlived step {step}"
    margin = 5_000
    assert blocks[150] <= blocks[20] + margin, (
        f"allocated blocks grew from {blocks[20]} (step 20) to {blocks[150]} (step 150)"
    )


# ---- claim 5: numerical edge cases ----


@pytest.mark.parametrize("x", [0, 0.0, -1, -1.5, -1e-300])
def test_log_of_a_non_positive_number_names_the_operation_and_the_value(x):
    with pytest.raises(ValueError) as err:
        Value(x).log()
    message = str(err.value)
    assert "log" in message and repr(x) in message, f"unhelpful message: {message!r}"


@pytest.mark.parametrize("x", [1000, 710.0, 1e308, math.inf])
def test_exp_overflow_names_the_operation_and_the_value(x):
    with pytest.raises(OverflowError) as err:
        Value(x).exp()
    message = str(err.value)
    assert "exp" in message and repr(x) in message, f"unhelpful message: {message!r}"


def test_exp_just_below_overflow_is_finite():
    x = math.log(sys.float_info.max)  # the largest argument whose exp is a float
    assert math.isfinite(Value(x).exp().data)
    assert Value(-1000.0).exp().data == 0.0


@given(x=floats(-1000.0, 1000.0))
def test_sigmoid_never_overflows(x):
    s = Value(x)
    y = s.sigmoid()
    y.backward()
    assert 0.0 <= y.data <= 1.0 and 0.0 <= s.grad <= 0.25


def test_zero_exponent_at_zero_has_zero_gradient():
    """$d(a^0)/da = 0$ everywhere, including at $a = 0$ (as in PyTorch).

    Computing the local gradient as $0 \\cdot 0^{-1}$ raises ZeroDivisionError. A relu
    output is often exactly 0, so `[h**k for k in range(n)]` would hit it.
    """
    a = Value(0.0)
    y = a**0
    y.backward()
    assert (y.data, a.grad) == (1.0, 0.0)


def test_fractional_power_of_a_negative_base_is_not_complex():
    """A fractional power of a negative number is undefined on the reals. The engine may
    raise an ArithmeticError/ValueError (as `log` does) or give nan (as PyTorch does), but
    must not silently put a complex number in the graph (Python's `(-8.0) ** (1/3)` is
    `(1+1.732j)`).
    """
    try:
        y = Value(-8.0) ** (1 / 3)
    except (ValueError, ArithmeticError):
        return
    assert isinstance(y.data, float), f"Expected a real number or an error, got {y.data!r}"


# ---- claim 6: a second backward, and zero_grad ----


def test_second_backward_accumulates_leaves_and_resets_inner_nodes():
    a = Value(3.0)
    b = a * a  # inner
    c = b + a  # dc/da = 2a + 1 = 7, dc/db = 1
    c.backward()
    assert (a.grad, b.grad, c.grad) == (7.0, 1, 1)
    c.backward()
    assert a.grad == 14.0, f"leaves accumulate: expected 14, got {a.grad}"
    assert (b.grad, c.grad) == (1, 1), f"inner nodes reset: expected (1, 1), got {(b.grad, c.grad)}"


def test_backward_from_an_inner_node_after_the_root():
    a = Value(3.0)
    b = a * a
    c = b * 2.0  # dc/da = 4a = 12
    d = c + b  # dd/da = 6a = 18, dd/db = 3
    d.backward()
    assert (a.grad, b.grad, c.grad) == (18.0, 3.0, 1)
    c.backward()  # c is the root now: its own grad is 1 and b's is that of this backward
    assert (c.grad, b.grad) == (1, 2.0)
    assert a.grad == 30.0, f"Expected 18 + 12 = 30, got {a.grad}"


def test_a_backward_that_raises_leaves_numbers_in_every_grad():
    a = Value(2.0)
    b = a * 3.0
    bad = Value(1.0, (b, 5.0), (1, 1))  # a child that is not a Value
    top = bad + b
    with pytest.raises(AttributeError):
        top.backward()
    assert all(isinstance(v.grad, (int, float)) for v in (a, b, bad, top))
    b.backward()  # the rest of the graph still works
    assert a.grad == 3.0


def test_backward_docstring_states_the_semantics():
    doc = Value.backward.__doc__
    assert "accumulate" in doc and "zero_grad" in doc and "reset" in doc


def test_zero_grad_clears_every_parameter():
    model = GPT(seed=0)
    params = model.parameters()
    tokens = [26, 0, 1, 2, 26]
    model.loss(tokens).backward()
    first = [p.grad for p in params]
    assert sum(g != 0 for g in first) > len(params) // 2
    zero_grad(params)
    assert all(p.grad == 0 for p in params)
    model.loss(tokens).backward()
    assert [p.grad for p in params] == first, "a backward after zero_grad repeats the first"


# ---- each node records the operation that made it (micrograd's `_op`) ----


def test_every_node_records_its_operation_and_a_power_its_exponent():
    from microgpt.engine import fused
    from microgpt.nn import cross_entropy, layernorm, log_softmax, rmsnorm, softmax

    a, b = Value(1.5), Value(-0.5)
    made = {
        "+": a + b, "*": a * b, "relu": b.relu(), "exp": a.exp(), "log": a.log(),
        "tanh": a.tanh(), "sigmoid": b.sigmoid(), "**": a**-2, "sum": Value.sum([a, b]),
        "dot": dot([a, b], [b, a]), "softmax": softmax([a, b])[0],
        "log_softmax": log_softmax([a, b])[1], "cross_entropy": cross_entropy([a, b], 0),
        "1/rms": rmsnorm([a, b])[0]._children[1],
        "mean": layernorm([a, b])[0]._children[0]._children[1]._children[0],
    }
    assert {op: v._op for op, v in made.items()} == {op: op for op in made}
    assert made["**"]._db == -2 and made["**"]._local_grads == (-2 * 1.5**-3,)
    assert linear([a, b], [[b, a]])[0]._op == "dot"
    assert linear([a, b], [[b, a]], leaf_weights=True)[0]._op == "dot"
    assert a._op == "" and Value(1.0, (a,), (2.0,))._op == ""  # a leaf, a node by hand
    node = fused("mine", 3.0, (a, b), (1.0, 2.0))
    node.backward()
    assert node._op == "mine" and (a.grad, b.grad) == (1.0, 2.0)
    assert type(node).__name__ == "Value" and isinstance(node, Value)
