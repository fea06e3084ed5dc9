"""`residual-pack grade` fails, naming the students, when a graded student got no feedback
page (issue 40: every page failed on an install without the template, and the run exited
0). The real failure, on an installed wheel, is
tests/integration/test_wheel_install.py::test_a_feedback_page_that_cannot_be_made_fails_the_run_and_says_so."""

from pathlib import Path

from autograder.grading.classrun import feedback_failures
from autograder.grading.student import StudentResult


def test_a_graded_student_without_a_page_is_a_failure_with_nbgraders_reason():
    page = [Path("feedback/a/01/01.html")]
    results = [
        StudentResult("fine", graded=True, feedback=page),
        StudentResult("refused", graded=True, notes=["no feedback: ValueError: No template"]),
        StudentResult("silent", graded=True),
        StudentResult("not-graded", reason="not a notebook"),  # its own line says why
        StudentResult("half", graded=True, feedback=page, notes=["no feedback: KeyError: x"]),
    ]
    assert feedback_failures(results) == [
        "refused: ValueError: No template",
        "silent: no feedback page was written",
        "half: KeyError: x",
    ]
    assert feedback_failures(results[:1] + results[3:4]) == []
