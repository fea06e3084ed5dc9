"""The verdict on one graded test cell, given in the grading process.

The cell's witness version ran in the grading process against the student's kernel
(`remote`), and its checks recorded what the student's code gave (`records`). The
reference run (`reference_run`) ran the reference version of the
same cell on the instructor's solution and kept, for each check, the expected observation
and how to compare. `verdict` pairs them in order and compares each with `compare`, the
same code that compares in a student's own kernel. The cell passes only when every
expected check was observed, in the same order and from the same line, and agrees.

A cell that ran no check, or stopped before one, fails. A failure in the hidden tests is reported
without the check's inputs or expected value.

A gradient check (`records.OWN_EXPECTED`) is compared with the reference's too, but in a
student's kernel it compares the student's `.grad` with the central difference of the
student's own function, so a wrong function whose gradient fits it passes there and the
cell fails at its next check (the value), which names the mistake. The judge says the
same: where the student's gradient fits their own function, the reference's failure waits
for the end of the cell and a later check's failure is reported first. What passes and
fails is the reference's comparison alone.
"""

from collections.abc import Collection
from dataclasses import dataclass

from autograder.kernel.compare import compare
from autograder.kernel.diagnosis import check_name

__all__ = ["Verdict", "verdict", "HIDDEN_FAILURE"]

HIDDEN_FAILURE = ("a check that runs only at grading failed (check {n} of {total} in this "
                  "cell); its inputs and expected value are not shown")


@dataclass
class Verdict:
    passed: bool
    message: str = ""  # why it failed, in words for the student
    checks: int = 0  # checks the reference makes in this cell
    hidden: bool = False  # the failure is in the hidden tests
    # for the instructor only (the report, never the student's page): what a hidden check
    # that failed compared, in full
    detail: str = ""


def _short(text: object, limit: int = 2000) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _own_message(got: dict, kind: str, params: dict, passed: set | None) -> str | None:
    """What a student's kernel says of a check compared with the student's own code
    (`records.OWN_EXPECTED`): None when it agrees; `passed` kept as the kernel keeps it."""
    if "own_error" in got:
        if passed is not None:
            passed.discard(check_name(params.get("what", "")))
        return str(got["own_error"])
    return compare(kind, got.get("observed"), got.get("own"), params, passed)


def verdict(records: list, reply_status: str, kernel_error: tuple[str, str] | None,
            expected: list, hidden_lines: Collection[int],
            passed: set | None = None) -> "Verdict":
    """The verdict on one test cell.

    records: what the cell's checks recorded in the grader (`records`).
    reply_status: "ok" or "error" (or "" when there was no reply).
    kernel_error: (ename, evalue) of the cell's error, if it raised.
    expected: the reference run's records for this cell.
    hidden_lines: the lines of the cell that hold hidden tests.
    passed: a set kept over the notebook's test cells, of the checks whose latest run
    passed (`compare`): a failure's message names only the known mistakes that pass them.
    """
    total = len(expected)
    ename, evalue = kernel_error or ("", "")

    def stopped(n: int, hidden: bool) -> str:
        if ename:
            if hidden:
                return f"{ename} in a check that runs only at grading (check {n} of {total})"
            return _short(f"{ename}: {evalue}" if evalue else ename)
        return f"the test stopped before check {n} of {total}"

    def failed(n: int, message: str, hidden: bool, line: object) -> Verdict:
        if hidden:
            return Verdict(False, HIDDEN_FAILURE.format(n=n, total=total), total, True,
                           detail=_short(f"hidden check {n} of {total} (line {line}): "
                                         f"{message}"))
        return Verdict(False, _short(message), total)

    deferred = None  # the first failure that a student's kernel would not stop at

    def then(later: Verdict) -> Verdict:
        # a failure after a deferred one: the kernel's, unless it is hidden where the
        # deferred one is not (the student can act on a visible one)
        return deferred if deferred and later.hidden and not deferred.hidden else later

    for i, want in enumerate(expected):
        hidden = want.get("line") in hidden_lines
        if i >= len(records):
            return then(Verdict(False, stopped(i + 1, hidden), total, hidden))
        got = records[i]
        if not isinstance(got, dict) or got.get("line") != want.get("line") \
                or got.get("kind") != want.get("kind"):
            return Verdict(False, f"check {i + 1} of {total} was not the one the test makes "
                                  f"there (the checks ran out of order)", total, hidden)
        kind, params = want.get("kind"), want.get("params") or {}
        own = "own" in got or "own_error" in got
        message = compare(kind, got.get("observed"), want.get("expected"), params,
                          None if hidden or own else passed)
        if own:
            # the student's kernel compares this check with the student's own code (the
            # central difference of their function), and keeps `passed` by that: where it
            # agrees, the kernel goes on to the cell's next check, and so does the judge,
            # failing the cell at its end if nothing after fails; where it disagrees, the
            # message is the kernel's
            kernels = _own_message(got, kind, params, None if hidden else passed)
            if message is not None:
                if kernels is None:
                    deferred = deferred or failed(i + 1, message, hidden, want.get("line"))
                    continue
                message = kernels
        if message is not None:
            return then(failed(i + 1, message, hidden, want.get("line")))
    if deferred is not None:
        return deferred
    if len(records) > total:
        return Verdict(False, f"the test made {len(records)} checks on this notebook where it "
                              f"makes {total} on the solution", total)
    if reply_status != "ok":
        why = _short(f"{ename}: {evalue}" if evalue else ename) if ename else \
            "the kernel did not finish the test"
        return Verdict(False, why, total)
    return Verdict(True, "", total)
