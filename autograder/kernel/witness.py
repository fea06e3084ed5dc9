"""Where a check's observation goes: compared now, or to the grader's recorder.

Every check in `checks` observes first (calls the student's code and turns what came back
into plain data, see `compare`) and then calls `settle`:

- in a student's kernel (JupyterLab, nbgrader's Validate), `settle` computes the expected
  observation and compares at once; a mismatch raises `CheckFailed` with the message;
- at grading time the test cell runs in the grader (`autograder.grading.remote`), which
  sets `RECORDER` around it: the observation goes to the grader's recorder
  (`autograder.grading.records`), which keeps it, with the line of the test cell it came
  from, for the judge (or, on the instructor's solution, keeps the expected one). That
  code runs only in the grader, so it is not in this package.
"""

from typing import Any, Callable  # noqa: UP035 (a kernel module imports typing only)

__all__ = ["CheckFailed", "NotAnswered", "Expected", "expected", "failure", "settle",
           "RECORDER"]

# while a graded test cell runs in the grader, what takes its checks' observations
# instead of comparing them here (`autograder.grading.records`); None everywhere else
RECORDER: Any = None


class CheckFailed(AssertionError):
    """A graded check failed; the message says what was expected and what came back.

    In a notebook it shows as that one line: the checks' own frames say nothing a
    student needs (IPython asks an exception for `_render_traceback_`)."""

    from_check: bool  # set on a check's own verdict (`failure`)

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def failure(message: str) -> CheckFailed:
    """The CheckFailed a check raises, marked as a check's verdict (its message already
    names a known mistake when there is one, see `diagnosis`)."""
    exc = CheckFailed(message)
    exc.from_check = True
    return exc


class NotAnswered(CheckFailed):
    """The answer a check needs is missing: its cell was not run or still holds the stub."""


class Expected:
    """An expected value computed only when something compares with it: `expected(lambda:
    ...)` in a check helper spares the reference's work where only the observation is
    kept (a student's run at grading time)."""

    __slots__ = ("compute",)

    def __init__(self, compute: Callable[[], Any]) -> None:
        self.compute = compute


def expected(compute: Callable[[], Any]) -> Expected:
    """`compute()` as an expected value, evaluated only where something compares with it."""
    return Expected(compute)


def resolve(value: Any) -> Any:
    """The expected value itself (an `Expected` is computed now)."""
    return value.compute() if isinstance(value, Expected) else value


# the names of the checks whose latest run in this kernel passed: what tells apart two
# known mistakes that fail one check alike (`diagnosis`); messages only
_PASSED: set[str] = set()


def settle(kind: str, observed: Any, make_expected: Callable[[], Any], params: dict[str, Any],
           result: Any = None) -> Any:
    """Compare one observation with the expected one; returns `result` (what the check
    returns to the test cell) unless the check fails. At grading time the grader's
    `RECORDER` takes it instead.

    `make_expected()` gives the expected observation (called only where it is compared);
    `params` (JSON data: what, tolerances, ...) says how to compare."""
    if RECORDER is not None:
        return RECORDER(kind, observed, make_expected, params, result)
    from autograder.kernel.compare import compare
    from autograder.kernel.diagnosis import check_name, diagnose

    problem = observed.get("problem") if isinstance(observed, dict) else None
    if problem is not None:  # it fails whatever was expected
        _PASSED.discard(check_name((params or {}).get("what", "")))
        raise failure(diagnose(kind, observed, params, str(problem), _PASSED))
    message = compare(kind, observed, make_expected(), params, _PASSED)
    if message is not None:
        raise failure(message)
    return result
