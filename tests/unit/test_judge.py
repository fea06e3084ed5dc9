"""`grading/judge.py` and `kernel/compare.py`: the verdict on one test cell, given in the
grading process from the kernel's observations and the reference run's."""

import math

from witnessing import in_mode

from autograder.grading import judge
from autograder.grading.records import REFERENCE, WITNESS
from autograder.kernel import compare
from autograder.kernel.checks import (
    check_gradient,
    check_value,
)

# ---------------------------------------------------------------- compare and judge


def test_numbers_that_json_cannot_hold_travel_as_words():
    for x in (math.inf, -math.inf):
        assert compare.decode(compare.encode(x)) == x
    assert math.isnan(compare.decode(compare.encode(math.nan)))
    assert compare.compare("number", {"number": "nan"}, {"number": 1.0}, {"what": "x"})
    assert compare.compare("number", {"number": "inf"}, {"number": "inf"}, {"what": "x"}) is None


def test_malformed_observations_fail_the_check_and_never_crash():
    for bad in (None, [], {"number": [1]}, {"numbers": {"x": 1}}, "text"):
        message = compare.compare("number", bad, {"number": 1.0}, {"what": "x"})
        assert message, bad
    assert compare.compare("nonsense", {}, {}, {"what": "x"})


def _check_f(value, expected_value):
    check_value(value, expected_value, what="f(1)")  # one line, as in a test cell


def _one_cell(student_value):
    """(student's report, reference records) for one cell that checks f(1) == 2."""
    expected_records = in_mode(REFERENCE, lambda: _check_f(2.0, 2.0))
    observed = in_mode(WITNESS, lambda: _check_f(student_value, None))
    return observed, expected_records


def test_the_judge_passes_only_what_it_compared():
    report, want = _one_cell(2.0)
    assert judge.verdict(report, "ok", None, want, set()).passed
    report, want = _one_cell(3.0)
    found = judge.verdict(report, "ok", None, want, set())
    assert not found.passed and found.message == "f(1): expected 2, got 3"


def test_a_cell_passes_only_with_every_check_in_place():
    report, want = _one_cell(2.0)
    assert not judge.verdict([], "ok", None, want, set()).passed
    twice = report * 2
    assert not judge.verdict(twice, "ok", None, want, set()).passed
    moved = [dict(report[0], line=999)]
    assert "out of order" in judge.verdict(moved, "ok", None, want, set()).message
    # the kernel's error fails the cell even when every observation agrees
    assert not judge.verdict(report, "error", ("ValueError", "x"), want, set()).passed


def test_a_hidden_failure_shows_neither_inputs_nor_expected_value():
    report, want = _one_cell(3.0)
    found = judge.verdict(report, "ok", None, want, {want[0]["line"]})
    assert found.hidden and "f(1)" not in found.message and "2" not in found.message.split(
        "check")[0]


def test_a_student_gradient_is_compared_with_the_reference_not_with_itself():
    def cell(f):
        check_gradient(f, 3.0, what="d")

    want = in_mode(REFERENCE, lambda: cell(lambda x: x * x))
    # a "gradient" that agrees with central differences of the student's own wrong function
    seen = in_mode(WITNESS, lambda: cell(lambda x: x * 4))
    found = judge.verdict(seen, "ok", None, want, set())
    assert not found.passed and "expected 6" in found.message


def _gradient_then_value(f, value_expected):
    grad = check_gradient(f, 3.0, what="d f/dx at 3")
    check_value(grad, value_expected, what="the slope", expected_text="2x")


def test_a_gradient_that_fits_the_students_own_function_fails_at_the_next_check():
    """As in a student's kernel (issue 42, item 7): the student's `.grad` fits the central
    difference of their own (wrong) function, so the cell's next check, on the value, is
    the one that fails and names the mistake; the score is the reference's comparison's."""
    want = in_mode(REFERENCE, lambda: _gradient_then_value(lambda x: x * x, 6.0))
    seen = in_mode(WITNESS, lambda: _gradient_then_value(lambda x: x * 4, None))
    assert "own" in seen[0]  # the witness made the student's own central difference
    found = judge.verdict(seen, "ok", None, want, set())
    assert not found.passed and found.message == "the slope: expected 6 (2x), got 4"
    # the value checked in the hidden part: the student sees the visible check's failure
    found = judge.verdict(seen, "ok", None, want, {want[1]["line"]})
    assert not found.passed and not found.hidden and "(central difference" in found.message
    # nothing after it fails (a value check that happens to agree): the reference's failure
    lucky = [seen[0], dict(seen[1], observed=want[1]["expected"])]
    found = judge.verdict(lucky, "ok", None, want, set())
    assert not found.passed and "d f/dx at 3: expected 6" in found.message


def test_the_witness_makes_the_students_own_central_difference_with_the_cells_step():
    from autograder.grading.testsource import prepare

    split = prepare("from autograder.kernel.checks import check_gradient\n"
                    "check_gradient(f, 3.0, what='d', h=0.5, rtol=0.1)\n")
    assert "h=0.5" in split.witness and "rtol" not in split.witness
    cube = in_mode(WITNESS, lambda: exec(split.witness, {"f": lambda x: x ** 3}))
    assert cube[0]["own"] == {"number": 27.25}  # ((3.5)**3 - (2.5)**3) / 1, not 27


def test_a_gradient_that_fits_neither_fails_with_the_students_own_comparison():
    def broken(x):  # a gradient of 1 for a function of slope 4
        out = x * 4
        out._da = 0.25  # the local derivative, forged in the student's own engine
        return out

    want = in_mode(REFERENCE, lambda: _gradient_then_value(lambda x: x * x, 6.0))
    seen = in_mode(WITNESS, lambda: _gradient_then_value(broken, None))
    found = judge.verdict(seen, "ok", None, want, set())
    assert not found.passed and found.message.startswith("d f/dx at 3: expected 4")


def test_a_hidden_failure_is_kept_in_full_for_the_instructor_only():
    report, want = _one_cell(3.0)
    found = judge.verdict(report, "ok", None, want, {want[0]["line"]})
    assert "f(1): expected 2, got 3" in found.detail
    assert "expected 2" not in found.message
    assert judge.verdict(report, "ok", None, want, set()).detail == ""
