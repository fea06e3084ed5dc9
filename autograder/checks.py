"""Checks that the notebooks' graded test cells call.

Each check returns quietly when the answer is right and raises `CheckFailed` (an
`AssertionError`, so nbgrader scores the cell as failed) when it is wrong. The message is
written for the student: what was checked, the expected value, and what came back.

    with task("Task 1.1"):
        check_value(residual_stack(Value(1.0), depth=20), 1.1**20,
                    what="residual_stack(Value(1.0), depth=20)", expected_text="1.1**20")
"""

import math
import numbers

from microgpt.engine import Value

__all__ = [
    "CheckFailed",
    "NotAnswered",
    "task",
    "check_value",
    "check_gradient",
    "check_values",
    "check_gradients",
    "central_difference",
]


class CheckFailed(AssertionError):
    """A graded check failed; the message says what was expected and what came back."""


class NotAnswered(CheckFailed):
    """The answer a check needs is missing: its cell was not run or still holds the stub."""


class task:
    """`with task("Task 1.1"):` turns a missing or unfinished answer into a failure naming the task.

    A stub's NotImplementedError becomes one short `NotAnswered` message (its traceback
    says nothing a student needs); a NameError keeps its traceback, since it may come
    from a bug in the student's own code rather than from a cell that was not run.
    """

    def __init__(self, task_id):
        self.task_id = task_id

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        __tracebackhide__ = True  # IPython leaves this frame out of the traceback
        task_id = self.task_id
        if kind is not None and issubclass(kind, NameError):
            raise NotAnswered(
                f"{task_id}: {exc}. Run the notebook's cells above this one, in order, "
                f"so that the code this check needs is defined."
            ) from exc
        if kind is not None and issubclass(kind, NotImplementedError):
            raise NotAnswered(
                f"{task_id} is not done yet: the code still raises NotImplementedError ({exc}). "
                f"Replace the stub in the {task_id} cell with your code and run that cell."
            ) from None
        return False


def _fmt(x):
    """A short form of the number `x` (5 significant digits)."""
    return f"{x:.5g}"


def _fmt_pair(expected, actual):
    """`expected` and `actual` as text, with all digits when the short forms look equal."""
    e, a = _fmt(expected), _fmt(actual)
    if e == a:
        e, a = repr(float(expected)), repr(float(actual))
    return e, a


def _short_repr(obj, limit=60):
    """`repr(obj)`, cut to `limit` characters."""
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_number(obj, what):
    """The float inside `obj` (a `Value` or a real number), or a `CheckFailed` saying why not."""
    inner = obj.data if isinstance(obj, Value) else obj
    if isinstance(inner, numbers.Real) and not isinstance(inner, bool):
        return float(inner)
    if obj is None:
        raise CheckFailed(
            f"{what}: expected a number or a Value, got None. "
            f"Does the function end with `return`?"
        )
    if isinstance(obj, (list, tuple)):
        raise CheckFailed(
            f"{what}: expected a single number or Value, got a {type(obj).__name__} "
            f"of {len(obj)} items: {_short_repr(obj)}"
        )
    if isinstance(obj, Value):
        raise CheckFailed(
            f"{what}: expected a Value holding a number, got a Value whose .data is a "
            f"{type(inner).__name__}: {_short_repr(inner)}"
        )
    raise CheckFailed(
        f"{what}: expected a number or a Value, got a {type(obj).__name__}: {_short_repr(obj)}"
    )


def check_value(actual, expected, what, expected_text="", rtol=1e-9, atol=0.0, value_ok=True):
    """Fail unless $|actual - expected| \\le atol + rtol\\,|expected|$; `actual`: number or Value.

    `value_ok=False` also fails a `Value` where a plain number (such as a `.grad`) is due.
    """
    if isinstance(actual, Value) and not value_ok:
        raise CheckFailed(
            f"{what}: expected a plain number, got a Value ({_short_repr(actual)}). "
            f"Return the number itself (a `.grad`, say), not the Value that holds it."
        )
    a = _as_number(actual, what)
    if not math.isclose(a, expected, rel_tol=0.0, abs_tol=atol + rtol * abs(expected)):
        e_text, a_text = _fmt_pair(expected, a)
        because = f" ({expected_text})" if expected_text else ""
        raise CheckFailed(f"{what}: expected {e_text}{because}, got {a_text}")


def central_difference(f, x, h=1e-6):
    """$f'(x) \\approx (f(x+h) - f(x-h)) / 2h$ in float64; `f` may return a number or a Value."""
    x = float(x)
    up = _as_number(f(x + h), f"f({x + h!r})")
    down = _as_number(f(x - h), f"f({x - h!r})")
    return (up - down) / (2 * h)


def check_gradient(f, x, what, h=1e-6, rtol=1e-5, atol=1e-8):
    """Fail unless `.grad` of the input after `f(Value(x)).backward()` matches central differences.

    `f` takes a `Value` and returns a `Value` built from it. Returns the `.grad` it checked.
    Central differences cannot tell a gradient below `atol` from 0, and a graph cut off from
    its input agrees with them when the output is constant: check the values too.
    """
    x = float(x)
    leaf = Value(x)
    out = f(leaf)
    if not isinstance(out, Value):
        if out is None:
            got = "None. Does the function end with `return`?"
        else:
            got = (
                f"a {type(out).__name__} ({_short_repr(out)}), "
                f"so there is no graph to run backward on"
            )
        raise CheckFailed(f"{what}: expected a Value built from the input, got {got}")
    out.backward()
    expected = central_difference(lambda t: f(Value(t)), x, h)
    actual = _as_number(leaf.grad, f"{what} (the input's .grad)")
    if not math.isclose(actual, expected, rel_tol=0.0, abs_tol=atol + rtol * abs(expected)):
        e_text, a_text = _fmt_pair(expected, actual)
        raise CheckFailed(
            f"{what}: expected {e_text} (central difference, h={h:g}), "
            f"got {a_text} (the input's .grad after backward)"
        )
    return actual


def check_values(actual, expected, what, expected_text="", rtol=1e-9, atol=0.0):
    """`check_value` on each item: `actual` must be a list or tuple as long as `expected`."""
    if not isinstance(actual, (list, tuple)):
        got = "None. Does the function end with `return`?" if actual is None else (
            f"a {type(actual).__name__}: {_short_repr(actual)}"
        )
        raise CheckFailed(
            f"{what}: expected a list of {len(expected)} numbers or Values, got {got}"
        )
    if len(actual) != len(expected):
        raise CheckFailed(
            f"{what}: expected a list of {len(expected)} numbers or Values, "
            f"got {len(actual)}: {_short_repr(actual)}"
        )
    for i, (a, e) in enumerate(zip(actual, expected)):
        check_value(a, e, what=f"{what}[{i}]", expected_text=expected_text, rtol=rtol, atol=atol)


def check_gradients(f, xs, what, names=None, reference=None, reference_text="",
                    h=1e-6, rtol=1e-5, atol=1e-8):
    """`check_gradient` for a function of many inputs: after `f(vs).backward()`, with
    `vs = [Value(x) for x in xs]`, each `vs[i].grad` must match the central difference in
    input `i` of `reference` (a function of a list of floats; `f` itself when None).
    `names[i]` says which input that is in a message. Returns the grads."""
    xs = [float(x) for x in xs]
    names = names or [f"input {i}" for i in range(len(xs))]
    leaves = [Value(x) for x in xs]
    out = f(leaves)
    if not isinstance(out, Value):
        got = "None. Does the function end with `return`?" if out is None else (
            f"a {type(out).__name__} ({_short_repr(out)}), so there is no graph to run backward on"
        )
        raise CheckFailed(f"{what}: expected a Value built from the inputs, got {got}")
    out.backward()
    grads = []
    of = f if reference is None else reference
    source = f"central difference of {reference_text}" if reference_text else "central difference"
    for i, (leaf, name) in enumerate(zip(leaves, names)):

        def moved(t, i=i):
            inputs = [t if j == i else x for j, x in enumerate(xs)]
            return of(inputs if reference is not None else [Value(v) for v in inputs])

        expected = central_difference(moved, xs[i], h)
        actual = _as_number(leaf.grad, f"{what}, d/d {name} (its .grad)")
        if not math.isclose(actual, expected, rel_tol=0.0, abs_tol=atol + rtol * abs(expected)):
            e_text, a_text = _fmt_pair(expected, actual)
            raise CheckFailed(
                f"{what}, d/d {name}: expected {e_text} ({source}, h={h:g}), "
                f"got {a_text} (its .grad after backward)"
            )
        grads.append(actual)
    return grads
