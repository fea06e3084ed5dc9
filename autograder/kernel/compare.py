"""The comparisons behind every graded check, and the words a failing one says.

A check works in two halves. The first *observes*: it calls the student's code and turns
what came back into plain data (an observation: numbers, or a problem such as "got None").
The second *compares* the observation with the expected one and words the verdict. This
module is the second half, written once and used in both places that compare:

- in a student's kernel (`checks`, in JupyterLab or nbgrader's Validate), right away;
- in the grading process (`judge`), where a graded test's observations, made in the
  grader from what the student's kernel sent back, meet the expected observations of the
  reference run.

Observations are JSON-ready dicts: ``{"number": x}``, ``{"numbers": [...]}`` (nested
lists), ``{"tensors": [[name, {"shape": [...], "data": [...]}], ...]}``, or
``{"problem": "..."}``.
Numbers that JSON cannot hold (nan, inf) travel as the strings "nan", "inf", "-inf".
`compare(kind, observed, expected, params)` returns None when they agree, else the message,
with the known mistake it looks like when the observation has a known fingerprint
(`diagnosis`).
"""

import math
from typing import Any, Sequence  # noqa: UP035 (a kernel module imports typing only)

from autograder.kernel.diagnosis import check_name, diagnose

__all__ = ["encode", "decode", "compare", "number_text", "pair_text", "short_repr",
           "KINDS", "MAX_ITEMS"]

MAX_ITEMS = 200_000  # numbers in one observation; more is a problem, not data

_SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def encode(x: float) -> float | str:
    """A float as JSON holds it: itself when finite, else "nan", "inf" or "-inf"."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def decode(x: object) -> float | None:
    """The float that `encode` gave; anything else is not a number (None)."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str) and x in _SPECIAL:
        return _SPECIAL[x]
    return None


def number_text(x: float) -> str:
    """A short form of the number `x` (5 significant digits)."""
    return f"{x:.5g}"


def pair_text(expected: float, actual: float) -> tuple[str, str]:
    """`expected` and `actual` as text, with all digits when the short forms look equal."""
    e, a = number_text(expected), number_text(actual)
    if e == a:
        e, a = repr(float(expected)), repr(float(actual))
    return e, a


def short_repr(obj: object, limit: int = 60) -> str:
    """`repr(obj)`, cut to `limit` characters (never fails)."""
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 (a student's object whose repr raises)
        text = f"<a {type(obj).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _close(actual: float, expected: float, rtol: float, atol: float) -> bool:
    """|actual - expected| <= atol + rtol |expected|, with nan and inf handled as equals."""
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return actual == expected
    return abs(actual - expected) <= atol + rtol * abs(expected)


def _problem(observed: Any) -> str | None:
    if not isinstance(observed, dict):
        return "the observation is not one a check makes"
    problem = observed.get("problem")
    if problem is not None:
        return str(problem)[:2000]
    return None


def _because(params: dict[str, Any]) -> str:
    text = params.get("expected_text") or ""
    return f" ({text})" if text else ""


def _compare_number(observed: dict[str, Any], expected: dict[str, Any],
                    params: dict[str, Any]) -> str | None:
    what = params.get("what", "the value")
    if not params.get("value_ok", True) and observed.get("is_value"):
        shown = f" ({observed['repr']})" if observed.get("repr") else ""
        return (f"{what}: expected a plain number, got a Value{shown}. Return the number "
                f"itself (a `.grad`, say), not the Value that holds it.")
    a, e = decode(observed.get("number")), decode(expected.get("number"))
    if a is None or e is None:
        return f"{what}: expected a number, got something else"
    if not _close(a, e, params.get("rtol", 1e-9), params.get("atol", 0.0)):
        e_text, a_text = pair_text(e, a)
        return f"{what}: expected {e_text}{_because(params)}, got {a_text}"
    return None


def _compare_gradient(observed: dict[str, Any], expected: dict[str, Any],
                      params: dict[str, Any]) -> str | None:
    what = params.get("what", "the gradient")
    a, e = decode(observed.get("number")), decode(expected.get("number"))
    if a is None or e is None:
        return f"{what}: expected a number for the input's .grad, got something else"
    if not _close(a, e, params.get("rtol", 1e-5), params.get("atol", 1e-8)):
        e_text, a_text = pair_text(e, a)
        source = params.get("source") or f"central difference, h={params.get('h', 1e-6):g}"
        return (f"{what}: expected {e_text} ({source}), "
                f"got {a_text} (the input's .grad after backward)")
    return None


def _where(what: str, path: Sequence[int], labels: Sequence[str] = (),
           names: Sequence[str] | None = None) -> str:
    """Which item of a nested result `path` points at, in words: "what, position 1,
    component 0" for labelled depths, "what, item [1][0]" for the others (never an index
    glued to `what`, which may end in words: "... at width 8[0]" reads like a typo)."""
    if names and len(path) == 1 and path[0] < len(names):
        return f"{what}, d/d {names[path[0]]}"
    text = what
    unlabelled = False  # the previous depth was an unlabelled index: a nested one follows
    for depth, i in enumerate(path):
        label = labels[depth] if depth < len(labels) else None
        if label:
            text, unlabelled = f"{text}, {label} {i}", False
        else:
            text, unlabelled = (f"{text}[{i}]" if unlabelled else f"{text}, item [{i}]"), True
    return text


def _compare_nested(actual: Any, expected: Any, what: str, params: dict[str, Any],
                    path: tuple[int, ...] = ()) -> str | None:
    """The first place where two nested lists of numbers differ, in words (None: none)."""
    labels = params.get("labels") or []
    names = params.get("names")
    # what the task asks for: numbers (a list of gradient norms), or Values as well
    items = "numbers" if params.get("numbers_only") else "numbers or Values"
    item = "a number" if params.get("numbers_only") else "a number or a Value"

    def where(p: Sequence[int]) -> str:
        return _where(what, p, labels, names)

    if isinstance(actual, dict):  # not a number, not a list: what it was instead
        wanted = (f"a list of {len(expected)} {items}" if isinstance(expected, list)
                  else item)
        return f"{where(path)}: expected {wanted}, got {_not_a_number(actual)}"
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return (f"{where(path)}: expected a list of {len(expected)} {items}, "
                    f"got a float: {short_repr(decode(actual))}")
        if len(actual) != len(expected):
            return (f"{where(path)}: expected a list of {len(expected)} {items}, "
                    f"got {len(actual)}: {short_repr(_shown(actual))}"
                    f"{_joined_lists(len(actual), len(expected))}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            found = _compare_nested(a, e, what, params, path + (i,))
            if found:
                return found
        return None
    if isinstance(actual, list):
        return f"{where(path)}: expected a single number, got a list of {len(actual)} items"
    a, e = decode(actual), decode(expected)
    if a is None:
        return f"{where(path)}: expected {item}, got something else"
    if e is None:
        return f"{where(path)}: the expected value is not a number"
    if not _close(a, e, params.get("rtol", 1e-9), params.get("atol", 0.0)):
        e_text, a_text = pair_text(e, a)
        return f"{where(path)}: expected {e_text}{_because(params)}, got {a_text}"
    return None


JOINED_LISTS = (" ({times} as many: `+` on two Python lists joins them end to end, [a, b] + "
                "[c, d] is [a, b, c, d], instead of adding them item by item)")


def _joined_lists(got: int, wanted: int) -> str:
    """The known slip behind a list `got` items long where `wanted` are due, if it fits
    one: two (or more) lists of the right length joined with `+`."""
    if wanted <= 0 or got <= wanted or got % wanted:
        return ""
    times = {2: "twice", 3: "three times"}.get(got // wanted, f"{got // wanted} times")
    return JOINED_LISTS.format(times=times)


def _shown(items: Any) -> Any:
    """An observed nested list as the numbers it held (markers as their repr)."""
    if isinstance(items, list):
        return [_shown(x) for x in items]
    if isinstance(items, dict):
        return items.get("repr", "?")
    return decode(items)


def _not_a_number(leaf: dict[str, Any]) -> str:
    """Words for an observed item that was neither a number nor a list."""
    kind, text = leaf.get("not", "object"), leaf.get("repr", "")
    if kind == "NoneType":
        return "None. Does the function end with `return`?"
    if kind == "Value":
        return f"a Value whose .data is not a number: {text}"
    return f"a {kind}: {text}" if text else f"a {kind}"


def _compare_numbers(observed: dict[str, Any], expected: dict[str, Any],
                     params: dict[str, Any]) -> str | None:
    what = params.get("what", "the values")
    return _compare_nested(observed.get("numbers"), expected.get("numbers"), what, params)


def _compare_gradients(observed: dict[str, Any], expected: dict[str, Any],
                       params: dict[str, Any]) -> str | None:
    what = params.get("what", "the gradients")
    a, e = observed.get("numbers"), expected.get("numbers")
    if not isinstance(a, list) or not isinstance(e, list) or len(a) != len(e):
        return f"{what}: expected one gradient per input"
    names = params.get("names") or [f"input {i}" for i in range(len(e))]
    source = params.get("source") or "central difference"
    for i, (ai, ei) in enumerate(zip(a, e)):
        x, y = decode(ai), decode(ei)
        if x is None or y is None:
            return f"{what}, d/d {names[i]}: expected a number, got something else"
        if not _close(x, y, params.get("rtol", 1e-5), params.get("atol", 1e-8)):
            e_text, a_text = pair_text(y, x)
            return (f"{what}, d/d {names[i]}: expected {e_text} ({source}, "
                    f"h={params.get('h', 1e-6):g}), got {a_text} (its .grad after backward)")
    return None


def _compare_range(observed: dict[str, Any], expected: dict[str, Any],
                   params: dict[str, Any]) -> str | None:
    what = params.get("what", "the value")
    a = decode(observed.get("number"))
    low, high = params.get("low"), params.get("high")
    if a is None:
        return f"{what}: expected a number, got something else"
    if (low is not None and not a > low) or (high is not None and not a < high):
        if low is not None and high is not None:
            bound = f"between {low:g} and {high:g}"
        elif low is not None:
            bound = f"above {low:g}"
        else:
            bound = f"below {high:g}"
        return f"{what}: expected {bound}{_because(params)}, got {number_text(a)}"
    return None


def _tensor_text(shape: Sequence[int], data: Sequence[Any]) -> str:
    head = ", ".join(f"{decode(v):.5g}" for v in data[:3])
    more = ", ..." if len(data) > 3 else ""
    return f"shape {tuple(shape)}, starting [{head}{more}]"


def _compare_tensor(observed: dict[str, Any], expected: dict[str, Any],
                    params: dict[str, Any]) -> str | None:
    what = params.get("what", "the tensor")
    a, e = observed.get("tensor"), expected.get("tensor")
    if not isinstance(a, dict) or not isinstance(e, dict):
        return f"{what}: expected a tensor"
    if list(a.get("shape", [])) != list(e.get("shape", [])):
        return (f"{what}: expected a tensor of shape {tuple(e['shape'])}, "
                f"got shape {tuple(a.get('shape', []))}")
    ad, ed = a.get("data", []), e.get("data", [])
    if len(ad) != len(ed):
        return f"{what}: expected {len(ed)} numbers, got {len(ad)}"
    rtol, atol = params.get("rtol", 1e-9), params.get("atol", 1e-9)
    worst, worst_i = -1.0, None
    for i, (x, y) in enumerate(zip(ad, ed)):
        x, y = decode(x), decode(y)
        if x is None or y is None or not _close(x, y, rtol, atol):
            gap = math.inf if x is None or y is None else abs(x - y)
            if not gap <= worst:
                worst, worst_i = gap, i
    if worst_i is None:
        return None
    x, y = decode(ad[worst_i]), decode(ed[worst_i])
    return (f"{what}: expected {_tensor_text(e['shape'], ed)}; got "
            f"{_tensor_text(a['shape'], ad)}. The largest difference is at flat index "
            f"{worst_i}: expected {y:.6g}, got {x if x is None else format(x, '.6g')}")


def _compare_tensors(observed: dict[str, Any], expected: dict[str, Any],
                     params: dict[str, Any]) -> str | None:
    """Named tensors (a module's output, its input's gradient, each parameter's gradient),
    each as in `_compare_tensor`, in the expected order."""
    what = params.get("what", "the module")
    a, e = observed.get("tensors"), expected.get("tensors")
    if not isinstance(a, list) or not isinstance(e, list):
        return f"{what}: expected tensors"
    got = {str(name): t for name, t in a if isinstance(name, str)} if all(
        isinstance(x, list) and len(x) == 2 for x in a) else {}
    for name, tensor in e:
        if name not in got:
            return f"{what}: no {name}"
        message = _compare_tensor({"tensor": got[name]}, {"tensor": tensor},
                                  dict(params, what=f"{what}, {name}"))
        if message:
            return message
    return None


def _compare_same(observed: dict[str, Any], expected: dict[str, Any],
                  params: dict[str, Any]) -> str | None:
    """Plain data (strings, booleans, lists of them) that must be equal."""
    what = params.get("what", "the result")
    a, e = observed.get("data"), expected.get("data")
    if a != e:
        return f"{what}: expected {short_repr(e)}{_because(params)}, got {short_repr(a)}"
    return None


KINDS = {
    "number": _compare_number,
    "gradient": _compare_gradient,
    "numbers": _compare_numbers,
    "gradients": _compare_gradients,
    "range": _compare_range,
    "tensors": _compare_tensors,
    "same": _compare_same,
}


MAX_HINT = 700  # characters of a hint the checks add to an observation


def compare(kind: str, observed: Any, expected: dict[str, Any] | None,
            params: dict[str, Any] | None, passed: set[str] | None = None) -> str | None:
    """None when `observed` agrees with `expected` for a check of `kind`, else the message.
    `passed`, a set, holds the names of the checks whose latest run passed: this one's is
    added or taken out, and a failure is diagnosed with the others (`diagnosis`)."""
    message = _message(kind, observed, expected, params, passed or set())
    if passed is not None:
        name = check_name((params or {}).get("what", ""))
        if message is None:
            passed.add(name)
        else:
            passed.discard(name)
    return message


def _message(kind: str, observed: Any, expected: dict[str, Any] | None,
             params: Any, passed: set[str]) -> str | None:
    problem = _problem(observed)
    if problem is not None:
        return diagnose(kind, observed, params, problem, passed)
    how = KINDS.get(kind)
    if how is None:
        return f"{params.get('what', 'a check')}: unknown kind of check {kind!r}"
    try:
        message = how(observed, expected or {}, params or {})
    except Exception as exc:  # noqa: BLE001 (malformed data is a failed check, never a crash)
        return f"{params.get('what', 'a check')}: the observation could not be compared ({exc})"
    if message is None:
        return None
    hint = observed.get("hint")
    if isinstance(hint, str) and hint:
        message = f"{message}. {hint[:MAX_HINT]}"
    return diagnose(kind, observed, params, message, passed)
