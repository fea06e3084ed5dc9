"""Where a graded check's observation goes: compared now, handed to the grader, or kept as
the expected one.

Every check in `checks` observes first (calls the student's code and turns what came back
into plain data, see `compare`) and then calls `settle`, which does one of three things,
by the mode the kernel is in:

- ``check`` (the default: JupyterLab, nbgrader's Validate): compute the expected
  observation and compare at once; a mismatch raises `CheckFailed` with the message.
- ``witness`` (a graded test cell at grading time, run in the grader against the student's
  kernel, `autograder.grading.remote`): only record the observation, with the line of the
  test cell it came from. The expected value is not computed (the cell runs without it),
  and nothing here decides the score: the grader compares the records with the reference
  run's (`judge`).
- ``reference`` (the same test cell run on the instructor's solution, on the grader's
  side): compute the expected observation, check that the solution meets it (else the
  test itself is wrong), and record it with the tolerances for the judge.

The grader's test runner (`remote.run_test`) sets the mode around each graded test cell,
in its own process: the student's code never runs where the records are kept.
"""

import sys

__all__ = ["CHECK", "WITNESS", "REFERENCE", "CheckFailed", "NotAnswered", "Expected",
           "expected", "mode", "begin", "end", "settle", "MAX_RECORDS"]

CHECK, WITNESS, REFERENCE = "check", "witness", "reference"
MAX_RECORDS = 10_000  # records kept per test cell; a cell making more is cut off


class CheckFailed(AssertionError):
    """A graded check failed; the message says what was expected and what came back.

    In a notebook it shows as that one line: the checks' own frames say nothing a
    student needs (IPython asks an exception for `_render_traceback_`)."""

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


def _failed(message):
    """The CheckFailed a check raises, marked as a check's verdict (its message already
    names a known mistake when there is one, see `diagnosis`)."""
    failure = CheckFailed(message)
    failure.from_check = True
    return failure


class NotAnswered(CheckFailed):
    """The answer a check needs is missing: its cell was not run or still holds the stub."""


class Expected:
    """An expected value computed only when something compares with it: `expected(lambda:
    ...)` in a check helper keeps the reference's work (and the reference itself) out of
    a witness kernel."""

    __slots__ = ("compute",)

    def __init__(self, compute):
        self.compute = compute


def expected(compute):
    """`compute()` as an expected value, evaluated only in the check and reference modes."""
    return Expected(compute)


def resolve(value):
    """The expected value itself (an `Expected` is computed now)."""
    return value.compute() if isinstance(value, Expected) else value


_state = {"mode": CHECK, "records": None, "filename": None}
# the names of the checks whose latest run in this kernel passed (check mode): what tells
# apart two known mistakes that fail one check alike (`diagnosis`); messages only
_PASSED = set()


def mode():
    return _state["mode"]


def begin(new_mode, filename):
    """Start a graded test cell compiled as `filename`; returns the list records go to."""
    records = []
    _state.update(mode=new_mode, records=records, filename=filename)
    return records


def end():
    """Back to the check mode, after a graded test cell."""
    _state.update(mode=CHECK, records=None, filename=None)


def _line():
    """The line of the graded test cell that the current check was called from (0: none)."""
    filename = _state["filename"]
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return frame.f_lineno
        frame = frame.f_back
    return 0


def _append(record):
    records = _state["records"]
    if records is None:
        return
    if len(records) >= MAX_RECORDS:
        raise CheckFailed(f"this test cell made more than {MAX_RECORDS} checks")
    records.append(record)


def settle(kind, observed, make_expected, params, result=None):
    """Act on one observation by the current mode; returns `result` (what the check
    returns to the test cell) unless the check fails here.

    `make_expected()` gives the expected observation (called only in the check and
    reference modes); `params` (JSON data: what, tolerances, ...) says how to compare."""
    from autograder.kernel.compare import compare

    current = _state["mode"]
    problem = observed.get("problem") if isinstance(observed, dict) else None
    if current == WITNESS:
        _append({"line": _line(), "kind": kind, "observed": observed})
    elif current == REFERENCE and problem is not None:
        _append({"line": _line(), "kind": kind, "failed": str(problem)})
    if problem is not None:  # it fails whatever was expected: stop, as the check would
        if current == CHECK:
            from autograder.kernel.diagnosis import check_name, diagnose

            _PASSED.discard(check_name((params or {}).get("what", "")))
            raise _failed(diagnose(kind, observed, params, str(problem), _PASSED))
        raise _failed(str(problem))
    if current == WITNESS:
        return result
    wanted = make_expected()
    message = compare(kind, observed, wanted, params, _PASSED if current == CHECK else None)
    if current == REFERENCE:
        if message is not None:
            _append({"line": _line(), "kind": kind, "failed": message})
            raise CheckFailed("the reference solution fails this check: " + message)
        _append({"line": _line(), "kind": kind, "expected": wanted, "params": params})
        return result
    if message is not None:
        raise _failed(message)
    return result
