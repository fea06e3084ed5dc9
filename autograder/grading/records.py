"""What a graded test cell's checks record at grading time, in the grader. (What the
grading steps keep of a whole notebook, verdicts included, is `notebook_record`'s.)

A graded test cell runs in the grader (`remote.run_test`), its checks (`autograder.kernel.
checks`, the same code as in a student's JupyterLab) observing the student's objects
through the kernel. While it runs, `recording` puts a `Recorder` in
`autograder.kernel.witness.RECORDER`, so that each check's observation comes here instead
of being compared where it was made. It records in one of two modes:

- ``witness`` (a student's notebook): only the observation, with the line of the test
  cell it came from. The expected value is not computed (the cell runs without it), and
  nothing here decides the score: `judge` compares the records with the reference run's.
- ``reference`` (the same test cell run on the instructor's solution, `reference_run`):
  the expected observation, after checking that the solution meets it (else the test
  itself is wrong), with the tolerances for the judge.

None of this is in `autograder.kernel`: the student's kernel never runs a check at grading
time, and JupyterLab only compares.
"""

import contextlib
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from autograder.kernel import witness
from autograder.kernel.compare import compare
from autograder.kernel.witness import CheckFailed

__all__ = ["WITNESS", "REFERENCE", "MAX_RECORDS", "OWN_EXPECTED", "Recorder", "recording"]

WITNESS, REFERENCE = "witness", "reference"
MAX_RECORDS = 10_000  # records kept per test cell; a cell making more is cut off
# kinds of check whose expected value, in a student's kernel, is made from the student's
# own code (`check_gradient`: the central difference of the student's function). A witness
# makes it too, in the grader, so that the judge can say what the student's kernel says
# where the student's gradient disagrees with the reference's (`judge.verdict`)
OWN_EXPECTED = frozenset({"gradient"})


class Recorder:
    """The checks' observations of one test cell run as `filename`, in `mode`."""

    def __init__(self, mode: str, filename: str) -> None:
        if mode not in (WITNESS, REFERENCE):
            raise ValueError(f"no recording mode {mode!r}")
        self.mode, self.filename = mode, filename
        self.records: list[dict] = []

    def _line(self) -> int:
        """The line of the test cell that the current check was called from (0: none)."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == self.filename:
                return frame.f_lineno
            frame = frame.f_back
        return 0

    def _append(self, record: dict) -> None:
        if len(self.records) >= MAX_RECORDS:
            raise CheckFailed(f"this test cell made more than {MAX_RECORDS} checks")
        self.records.append(record)

    def __call__(self, kind: str, observed: Any, make_expected: Callable[[], Any],
                 params: dict, result: Any = None) -> Any:
        """`witness.settle` at grading time: record, and stop the cell where the check
        would (an observation that cannot be right whatever was expected)."""
        problem = observed.get("problem") if isinstance(observed, dict) else None
        if self.mode == WITNESS:
            record = {"line": self._line(), "kind": kind, "observed": observed}
            if kind in OWN_EXPECTED and problem is None:
                record.update(_own_expected(make_expected))
            self._append(record)
        elif problem is not None:
            self._append({"line": self._line(), "kind": kind, "failed": str(problem)})
        if problem is not None:
            raise witness.failure(str(problem))
        if self.mode == WITNESS:
            return result
        wanted = make_expected()
        message = compare(kind, observed, wanted, params, None)
        if message is not None:
            self._append({"line": self._line(), "kind": kind, "failed": message})
            raise CheckFailed("the reference solution fails this check: " + message)
        self._append({"line": self._line(), "kind": kind, "expected": wanted,
                      "params": params})
        return result


def _own_expected(make_expected: Callable[[], Any]) -> dict:
    """{"own": the expected observation made from the student's code} or, when making it
    failed (the student's function at a neighbouring input), {"own_error": why}."""
    try:
        return {"own": make_expected()}
    except Exception as exc:  # noqa: BLE001 (the student's code: what it raised is the answer)
        kind = getattr(exc, "kind", None) or type(exc).__name__
        return {"own_error": f"{kind}: {exc}" if str(exc) else kind}


@contextlib.contextmanager
def recording(mode: str, filename: str) -> Iterator[list[dict]]:
    """While inside, the checks record in `mode` (a test cell compiled as `filename`);
    yields the list the records go to."""
    recorder = Recorder(mode, filename)
    witness.RECORDER = recorder
    try:
        yield recorder.records
    finally:
        witness.RECORDER = None
