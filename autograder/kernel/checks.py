"""Checks that the notebooks' graded test cells call.

Each check observes the student's code (calls it, and turns what came back into plain
data) and then settles the observation (`witness.settle`): in a student's kernel it is
compared with the expected value at once, and a wrong answer raises `CheckFailed` (an
`AssertionError`, so nbgrader scores the cell as failed) with a message for the student:
what was checked, the expected value, and what came back. At grading time the same check
only records what it observed; the grader compares.

    with task("Task 1.1"):
        check_value(residual_stack(Value(1.0), depth=20), 1.1**20,
                    what="residual_stack(Value(1.0), depth=20)", expected_text="1.1**20")

An expected value that takes work (a reference run, a model answer) is passed as
`expected(lambda: ...)`, so that it is computed only where something compares with it.
"""

import numbers
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Literal

from autograder.kernel import crash
from autograder.kernel.compare import MAX_ITEMS, encode, short_repr
from autograder.kernel.diagnosis import diagnose_raised
from autograder.kernel.witness import CheckFailed, Expected, NotAnswered, expected, resolve, settle
from microgpt import engine as _engine
from microgpt.engine import Value

__all__ = [
    "CheckFailed",
    "NotAnswered",
    "BrokenAnswer",
    "Expected",
    "expected",
    "task",
    "check_value",
    "check_values",
    "check_numbers",
    "check_gradient",
    "check_gradients",
    "check_range",
    "check_same",
    "central_difference",
    "central_gradients",
    "observe_number",
    "observe_numbers",
    "backward_alone",
]


class task:
    """`with task("Task 1.1"):` turns a missing answer into a failure naming the task, and
    an error in the student's code into a wrong answer that says where it went wrong.

    - A stub's NotImplementedError becomes one short `NotAnswered` message (its traceback
      says nothing a student needs).
    - A NameError raised in the test's own line (the task's function, or a name of the
      notebook, is not defined) is `NotAnswered` with "run the cells above", unless the
      answer cell that defines the name does not compile (then `BrokenAnswer` says which
      SyntaxError, where) or the notebook defines a name much like it (a misspelt `def`).
    - Any other error, a NameError raised in the student's own code included, stays the
      error it is, shown with the student's lines only and the hint of a known slip
      (`crash`), and the known mistake it looks like, if any (`diagnosis`).
    - An interrupt (Stop, or Validate's time for the cell) stays a KeyboardInterrupt,
      shown as "Interrupted" with the test's line and the student's line that was running
      (`crash.interrupted`), not the frames of the checks or the library.
    """

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id

    def __enter__(self) -> "task":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        __tracebackhide__ = True  # IPython leaves this frame out of the traceback
        task_id = self.task_id
        remote = getattr(exc, "kernel_lines", None) is not None  # raised in the student's
        # kernel while the grader ran this test: the kernel rendered its lines
        if isinstance(exc, KeyboardInterrupt):  # Stop, or Validate's time for the cell
            if not remote:
                crash.interrupted(exc, tb, f"{task_id}'s test")
            return False
        if kind is None or not isinstance(exc, Exception) or getattr(exc, "from_check", False):
            return False
        if isinstance(exc, NotImplementedError):
            raise NotAnswered(
                f"{task_id} is not done yet: the code still raises NotImplementedError ({exc}). "
                f"Replace the stub in the {task_id} cell with your code and run that cell."
            ) from None
        if isinstance(exc, CheckFailed):
            # raised outside a check (a probe's own verdict): its message is what it says
            diagnose_raised(task_id, exc, in_message=True)
            return False
        if remote:
            diagnose_raised(task_id, exc)  # the known mistake it looks like, as a note
            return False
        frames = crash.frames_of(tb)
        if isinstance(exc, NameError) and crash.who_raised(frames) == "test":
            name = getattr(exc, "name", None) or ""
            broken = crash.broken_lines(name) if name else None
            if broken is not None:
                raise BrokenAnswer(broken) from None
            like = crash.defined_like(name, frames[-1])
            if like:
                raise NotAnswered(
                    f"{task_id}: {exc}, but your notebook defines '{like}': is the name "
                    f"misspelt there? The test calls it '{name}'."
                ) from None
            raise NotAnswered(
                f"{task_id}: {exc}. Run the notebook's cells above this one, in order, "
                f"so that the code this check needs is defined."
            ) from exc
        diagnose_raised(task_id, exc)  # the known mistake it looks like, as a note
        if isinstance(exc, NameError):
            name = getattr(exc, "name", None) or ""
            crash.explain(exc, tb, headline=f"NameError in your answer: {exc}",
                          hints=[crash.name_hint(name, frames[-1])])
        else:
            crash.explain(exc, tb)
        return False


class BrokenAnswer(CheckFailed):
    """The answer cell a test needs does not compile (a SyntaxError, an IndentationError):
    its lines say which error, where."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__(lines[0])
        self.lines = list(lines)

    def _render_traceback_(self) -> list[str]:
        return list(self.lines)


# ---------------------------------------------------------------- observing


def _real(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def observe_number(obj: Any, what: str, allow_value: bool = True) -> dict[str, Any]:
    """`obj` (a number, or a Value holding one) as an observation; else the problem.
    `allow_value` false: the task asks for a plain number, and the problem says so."""
    is_value = isinstance(obj, Value)
    inner = obj.data if is_value else obj
    if _real(inner):
        try:
            seen = {"number": encode(float(inner)), "is_value": is_value}
            if is_value:
                seen["repr"] = short_repr(obj)
            return seen
        except (OverflowError, ValueError, TypeError):
            pass
    wanted, single = (("a number or a Value", "a single number or Value") if allow_value
                      else ("a number", "a single number"))
    if obj is None:
        problem = f"{what}: expected {wanted}, got None. Does the function end with `return`?"
    elif isinstance(obj, (list, tuple)):
        problem = (f"{what}: expected {single}, got a {type(obj).__name__} "
                   f"of {len(obj)} items: {short_repr(obj)}")
    elif is_value:
        problem = (f"{what}: expected a Value holding a number, got a Value whose .data is "
                   f"a {type(inner).__name__}: {short_repr(inner)}")
    else:
        problem = f"{what}: expected {wanted}, got a {type(obj).__name__}: {short_repr(obj)}"
    return {"problem": problem}


class _TooMuch(Exception):
    pass


def _nested(obj: Any, budget: list[int], depth: int = 0) -> Any:
    """Numbers and Values (at any depth of lists and tuples) as encoded floats; anything
    else as a marker saying what it was."""
    if isinstance(obj, Value) and _real(obj.data):
        obj = obj.data
    if _real(obj):
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMuch
        try:
            return encode(float(obj))
        except (OverflowError, ValueError, TypeError):
            return {"not": type(obj).__name__, "repr": short_repr(obj)}
    if isinstance(obj, (list, tuple)) and depth < 8:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooMuch
        return [_nested(item, budget, depth + 1) for item in obj]
    return {"not": type(obj).__name__, "repr": short_repr(obj)}


def observe_numbers(obj: Any, what: str) -> dict[str, Any]:
    """Nested lists of numbers or Values as an observation (see `compare`)."""
    try:
        return {"numbers": _nested(obj, [MAX_ITEMS])}
    except _TooMuch:
        return {"problem": f"{what}: more than {MAX_ITEMS} numbers came back"}
    except RecursionError:
        return {"problem": f"{what}: the result is nested too deeply to read"}


def _expected_numbers(value: Any) -> dict[str, Any]:
    return {"numbers": _nested(resolve(value), [MAX_ITEMS * 10])}


def _expected_number(value: Any) -> dict[str, Any]:
    value = resolve(value)
    return {"number": encode(float(value.data if isinstance(value, Value) else value))}


# ---------------------------------------------------------------- the checks


def _reproducible(flag: bool) -> dict[str, Any]:
    """The params entry of a check whose numbers come from a training run (none else)."""
    return {} if flag else {"reproducible": False}



def check_value(actual: Any, expected: Any, what: str, expected_text: str = "", rtol: float = 1e-9,
                atol: float = 0.0, value_ok: bool = True, reproducible: bool = True) -> Any:
    """Fail unless $|actual - expected| \\le atol + rtol\\,|expected|$; `actual`: number or Value.

    `value_ok=False` also fails a `Value` where a plain number (such as a `.grad`) is due.
    `reproducible=False` says that the number comes from a training run, whose last
    digits differ from one machine (or thread count) to another: a wrong answer's number
    is then not part of the fingerprint that names a known mistake (`diagnosis`).
    """
    params = {"what": what, "expected_text": expected_text, "rtol": rtol, "atol": atol,
              "value_ok": value_ok, **_reproducible(reproducible)}
    return settle("number", observe_number(actual, what, allow_value=value_ok),
                  lambda: _expected_number(expected), params)


def check_values(actual: Any, expected: Any, what: str, expected_text: str = "",
                 rtol: float = 1e-9, atol: float = 0.0, reproducible: bool = True,
                 numbers_only: bool = False) -> Any:
    """`check_value` on each item: `actual` must be a list or tuple as long as `expected`."""
    return check_numbers(actual, expected, what, expected_text=expected_text, rtol=rtol,
                         atol=atol, reproducible=reproducible, numbers_only=numbers_only)


def check_numbers(actual: Any, expected: Any, what: str, expected_text: str = "",
                  rtol: float = 1e-9, atol: float = 0.0, labels: Sequence[str] = (),
                  reproducible: bool = True, numbers_only: bool = False) -> Any:
    """Nested lists (of lists ...) of numbers or Values, equal in shape and item by item.
    `labels[d]` names the items at depth d in a message ("position", "component");
    unnamed depths are shown as "item [i]". `reproducible`: as in `check_value`.
    `numbers_only`: the task asks for plain numbers (gradient norms, losses), and the
    messages say "numbers", not "numbers or Values" (a Value still passes)."""
    params = {"what": what, "expected_text": expected_text, "rtol": rtol, "atol": atol,
              "labels": list(labels), **_reproducible(reproducible),
              **({"numbers_only": True} if numbers_only else {})}
    return settle("numbers", observe_numbers(actual, what), lambda: _expected_numbers(expected),
                  params)


def central_difference(f: Callable[..., Any], x: float, h: float = 1e-6) -> float:
    """$f'(x) \\approx (f(x+h) - f(x-h)) / 2h$ in float64; `f` may return a number or a Value."""
    x = float(x)

    def number(t: float) -> float:
        out = f(t)
        seen = observe_number(out, f"f({t!r})")
        if "problem" in seen:
            raise CheckFailed(seen["problem"])
        return float(out.data if isinstance(out, Value) else out)

    return (number(x + h) - number(x - h)) / (2 * h)


def _no_graph(what: str, out: Any, inputs: str = "the input") -> dict[str, Any]:
    if out is None:
        got = "None. Does the function end with `return`?"
    else:
        got = (f"a {type(out).__name__} ({short_repr(out)}), "
               f"so there is no graph to run backward on")
    return {"problem": f"{what}: expected a Value built from {inputs}, got {got}"}


DETACHED_HINT = ("No path in the output's graph leads back to {inputs}, so backward() cannot "
                 "reach {them}: the output no longer depends on {them}. Was a result rebuilt "
                 "from numbers (Value(... .data ...))? Build it from {inputs} with Value "
                 "operations.")
GRAPH_WALK_LIMIT = 200_000  # nodes; a bigger graph is not searched for the hint


def _reaches(out: Value, leaves: Sequence[Value]) -> bool:
    """Does the graph of `out` reach any of `leaves`? (True when too big to tell.)"""
    wanted = {id(v) for v in leaves}
    stack, seen = [out], set()
    while stack:
        v = stack.pop()
        if id(v) in wanted:
            return True
        if id(v) in seen:
            continue
        seen.add(id(v))
        if len(seen) > GRAPH_WALK_LIMIT:
            return True
        stack.extend(getattr(v, "_children", ()))
    return False


def _with_detached_hint(observed: dict[str, Any], out: Value, leaves: Sequence[Value],
                        inputs: str) -> dict[str, Any]:
    if isinstance(observed, dict) and "problem" not in observed and not _reaches(out, leaves):
        observed["hint"] = DETACHED_HINT.format(
            inputs=inputs, them="them" if inputs.endswith("s") else "it")
    return observed


# What a gradient check's own backward() trusts, taken when the checks are imported, before
# any code of the student's runs: the engine's node classes and its backward. A student's
# subclass (a `grad` or `_local_grads` that is a property, say) would run the student's code
# in the middle of that backward, and a `.grad` written by the student's function would be
# read as if backward() had put it there.
_ENGINE_NODES = (Value, _engine._Op, _engine._Fused, _engine._Linear)
_BACKWARD = Value.backward
_NUMBERS = (int, float, bool)
_PLAIN = frozenset(_NUMBERS)
_SEQUENCES = frozenset((tuple, list))
_NOT_A_NUMBER = "a node of the graph holds a gradient that is not a plain number"


def _number(x: object) -> bool:
    """A plain number, of a type no student code can define (numpy's scalars included)."""
    t = type(x)
    return t in _NUMBERS or (t.__module__ == "numpy" and isinstance(x, numbers.Real))


def _graph_problem(out: Any) -> str | None:
    """Why the engine's backward cannot be run on `out`'s graph without running code of
    the student's, or None: every node must be one of the engine's own classes, its
    inputs in a tuple or list, its local gradients plain numbers, and a leaf's grad a
    plain number (backward adds to it). An inner node's grad is not read: backward's
    sort sets it to 0 first. One pass over the graph, about as long as backward's own."""
    op, nodes, plain = _engine._Op, _ENGINE_NODES, _PLAIN
    stack: list[Any] = [out]
    seen: set[int] = set()
    push, pop, see = stack.append, stack.pop, seen.add
    while stack:
        v = pop()
        key = id(v)
        if key in seen:
            continue
        see(key)
        kind = type(v)
        if kind is op:
            if type(v._da) not in plain and not _number(v._da):
                return _NOT_A_NUMBER
            push(v._a)
            b = v._b
            if b is not None:
                if type(v._db) not in plain and not _number(v._db):
                    return _NOT_A_NUMBER
                push(b)
            continue
        if kind not in nodes:
            return (f"a node of the graph is a {kind.__name__}, not the engine's Value: "
                    "build the graph with Value's own operations")
        children, local, inner = v._children, v._local_grads, v._inner
        if type(children) not in _SEQUENCES or type(local) not in _SEQUENCES or \
                (inner is not None and type(inner) not in _SEQUENCES):
            return ("a node of the graph keeps its inputs or its local gradients in a "
                    f"{type(children).__name__}, not in a tuple")
        if not children:  # a leaf: backward adds to its grad
            if type(v.grad) not in plain and not _number(v.grad):
                return _NOT_A_NUMBER
            continue
        for g in local:
            if type(g) not in plain and not _number(g):
                return _NOT_A_NUMBER
        stack.extend(children)
    return None


def backward_alone(out: Value, leaves: Sequence[Value]) -> str | None:
    """Run the engine's own backward() from `out`, after setting the `.grad` of each of
    `leaves` (the inputs whose gradients a check reads) to 0; a problem message when the
    graph has a part that is not the engine's (then nothing is run), else None.

    The `.grad` a check then reads comes from backward() alone: not from a function of the
    student's that wrote into it, nor from code of theirs run inside backward."""
    problem = _graph_problem(out)
    if problem is not None:
        return problem
    for leaf in leaves:
        leaf.grad = 0
    _BACKWARD(out)
    return None


WROTE_GRAD_HINT = ("The input's .grad was already {before} when the function returned: it "
                   "wrote into .grad (or ran backward()) itself. The check sets .grad to 0 "
                   "and runs backward() alone: the gradient must come from the graph.")


def _written(grad: Any) -> str:
    """What an input's .grad held when the function returned, for a message ("" for 0)."""
    if not _number(grad):  # an object of the student's: its repr is their code, not run
        return f"a {type(grad).__name__}"
    return "" if grad == 0 else f"{float(grad):.5g}"


def _with_written_hint(observed: dict[str, Any], before: Any) -> None:
    """Say so (first) when an input's .grad was not 0 before the check's backward()."""
    if before and isinstance(observed, dict) and "problem" not in observed:
        said = WROTE_GRAD_HINT.format(before=before)
        observed["hint"] = f"{said} {observed['hint']}" if observed.get("hint") else said


def _gradients_observed(out: Value, leaves: Sequence[Value], what: str, observe: Callable[..., Any],
                        inputs: str) -> tuple[dict[str, Any], Any]:
    """(observation, grads) of `leaves` after the check's own backward from `out`
    (`backward_alone`); grads is None when the graph could not be run. `observe` turns
    the list of grads into the observation; `inputs` names the leaves in a hint."""
    before = next((w for w in map(_written, (leaf.grad for leaf in leaves)) if w), "")
    problem = backward_alone(out, leaves)
    if problem is not None:
        return {"problem": f"{what}: {problem}"}, None
    grads = [leaf.grad for leaf in leaves]
    observed = observe(grads)
    if not any(grads):
        observed = _with_detached_hint(observed, out, leaves, inputs)
    _with_written_hint(observed, before)
    return observed, grads


def check_gradient(f: Callable[..., Any], x: float, what: str, h: float = 1e-6, rtol: float = 1e-5,
                   atol: float = 1e-8) -> Any:
    """Fail unless `.grad` of the input after `f(Value(x)).backward()` matches central differences.

    `f` takes a `Value` and returns a `Value` built from it. Returns the `.grad` it checked.
    Central differences cannot tell a gradient below `atol` from 0, and a graph cut off from
    its input agrees with them when the output is constant: check the values too.
    """
    x = float(x)
    leaf = Value(x)
    out = f(leaf)
    grad = None
    if not isinstance(out, Value):
        observed = _no_graph(what, out)
    else:
        observed, grads = _gradients_observed(
            out, [leaf], what, lambda g: observe_number(g[0], f"{what} (the input's .grad)"),
            "the input")
        grad = None if grads is None else grads[0]
    params = {"what": what, "h": h, "rtol": rtol, "atol": atol}
    return settle("gradient", observed,
                  lambda: {"number": encode(central_difference(lambda t: f(Value(t)), x, h))},
                  params, result=grad)


def central_gradients(f: Callable[..., Any], xs: Sequence[float], h: float = 1e-6,
                      on_floats: bool = True) -> list[Any]:
    """The central difference of `f` in each input `i` of `xs`, as encoded floats: `f`
    takes a list of floats (`on_floats`) or of Values."""
    xs = [float(x) for x in xs]
    found = []
    for i in range(len(xs)):

        def moved(t: float, i: int = i) -> Any:
            inputs = [t if j == i else x for j, x in enumerate(xs)]
            return f(inputs if on_floats else [Value(v) for v in inputs])

        found.append(encode(central_difference(moved, xs[i], h)))
    return found


def check_gradients(f: Callable[..., Any], xs: Sequence[float], what: str,
                    names: Sequence[str] | None = None,
                    reference: Callable[..., Any] | None = None, reference_text: str = "",
                    h: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-8,
                    expected: Any = None) -> Any:
    """`check_gradient` for a function of many inputs: after `f(vs).backward()`, with
    `vs = [Value(x) for x in xs]`, each `vs[i].grad` must match the central difference in
    input `i` of `reference` (a function of a list of floats; `f` itself when None), or
    `expected`, those central differences computed once and stored (`stored`).
    `names[i]` says which input that is in a message. Returns the grads."""
    xs = [float(x) for x in xs]
    names = list(names or [f"input {i}" for i in range(len(xs))])
    leaves = [Value(x) for x in xs]
    out = f(leaves)
    grads = None
    if not isinstance(out, Value):
        observed = _no_graph(what, out, "the inputs")
    else:
        observed, grads = _gradients_observed(
            out, leaves, what, lambda g: observe_numbers(g, what), "the inputs")

    def central() -> dict[str, Any]:
        if expected is not None:
            return _expected_numbers(expected)
        if reference is None:
            return {"numbers": central_gradients(f, xs, h, on_floats=False)}
        return {"numbers": central_gradients(reference, xs, h)}

    source = f"central difference of {reference_text}" if reference_text else \
        "central difference"
    params = {"what": what, "names": names, "h": h, "rtol": rtol, "atol": atol,
              "source": source}
    return settle("gradients", observed, central, params, result=grads)


def check_range(actual: Any, low: float, high: float, what: str, expected_text: str = "") -> Any:
    """Fail unless low < actual < high (a bound of None is no bound)."""
    params = {"what": what, "expected_text": expected_text,
              "low": None if low is None else float(low),
              "high": None if high is None else float(high)}
    return settle("range", observe_number(actual, what), lambda: {}, params)


def check_same(actual: Any, expected: Any, what: str, expected_text: str = "") -> Any:
    """Plain data (strings, booleans, numbers, lists and dicts of them) equal to `expected`."""
    params = {"what": what, "expected_text": expected_text}
    return settle("same", {"data": _plain(actual)}, lambda: {"data": _plain(resolve(expected))},
                  params)


def _plain(obj: Any, depth: int = 0) -> Any:
    """`obj` as JSON data (lists for tuples, strings for other objects)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if _real(obj):
        return encode(obj)
    if isinstance(obj, (list, tuple)) and depth < 8:
        return [_plain(x, depth + 1) for x in obj[:1000]]
    if isinstance(obj, dict) and depth < 8:
        return {str(k): _plain(v, depth + 1) for k, v in list(obj.items())[:1000]}
    return f"<{type(obj).__name__}>"
