"""`kernel/witness.py` and `grading/records.py`: a check compares at once in a student's
kernel, and records in the grader (witness, reference)."""


import pytest
from witnessing import in_mode

from autograder.grading.records import REFERENCE, WITNESS
from autograder.kernel.checks import (
    CheckFailed,
    check_numbers,
    check_range,
    check_same,
    check_value,
    check_values,
    expected,
)
from microgpt import Value

# ---------------------------------------------------------------- witness modes


def test_a_witness_records_what_it_saw_and_never_computes_the_expected_value():
    def never():
        raise AssertionError("the expected value was computed in a witness kernel")

    records = in_mode(WITNESS, lambda: check_value(Value(3.0), expected(never),
                                                            what="x"))
    assert records == [{"line": records[0]["line"], "kind": "number",
                        "observed": {"number": 3.0, "is_value": True, "repr": records[0][
                            "observed"]["repr"]}}]
    assert records[0]["line"] > 0  # the line of this file the check was called from


def test_a_witness_stops_on_an_answer_that_cannot_be_right():
    with pytest.raises(CheckFailed, match="got None"):
        in_mode(WITNESS, lambda: check_value(None, 1.0, what="x"))


def test_the_reference_records_the_expected_value_and_fails_a_wrong_solution():
    records = in_mode(REFERENCE, lambda: check_value(2.0, expected(lambda: 2.0),
                                                              what="x", rtol=1e-3))
    assert records[0]["expected"] == {"number": 2.0}
    assert records[0]["params"]["rtol"] == 1e-3
    with pytest.raises(CheckFailed, match="the reference solution fails this check"):
        in_mode(REFERENCE, lambda: check_value(2.5, 2.0, what="x"))


def test_the_check_mode_compares_at_once():
    check_values([1.0, Value(2.0)], [1.0, 2.0], what="v")
    with pytest.raises(CheckFailed, match=r"^v, item \[1\]: expected 2, got 3$"):
        check_values([1.0, 3.0], [1.0, 2.0], what="v")
    check_range(0.1, None, 0.25, what="gate")
    with pytest.raises(CheckFailed, match="expected below 0.25"):
        check_range(0.3, None, 0.25, what="gate")
    check_same(["W", "b"], ["W", "b"], what="keys")
    with pytest.raises(CheckFailed, match="keys"):
        check_same(["W"], ["W", "b"], what="keys")
    check_numbers([[1.0, 2.0], [3.0]], [[1.0, 2.0], [3.0]], what="n", labels=("row", "col"))
    with pytest.raises(CheckFailed, match=r"^n, row 1, col 0: expected 3, got 4$"):
        check_numbers([[1.0, 2.0], [4.0]], [[1.0, 2.0], [3.0]], what="n",
                      labels=("row", "col"))
