"""`autograder/cli.py` without running a command: what the command line accepts, and what
it says about the course it uses (issue #28's traps 7)."""

from pathlib import Path

from autograder.cli import course_note, parser


def test_course_is_accepted_before_and_after_the_command():
    before = parser().parse_args(["--course", "C", "grade", "A", "DIR"])
    after = parser().parse_args(["grade", "--course", "C", "A", "DIR"])
    assert before.course == after.course == "C"
    assert (after.assignment, after.submissions) == ("A", "DIR")
    assert parser().parse_args(["grade", "A", "DIR"]).course is None
    assert parser().parse_args(["selfcheck", "-v", "A"]).verbose is True


def test_a_course_not_found_from_here_is_named(tmp_path):
    course = tmp_path / "checkout"
    elsewhere = tmp_path / "elsewhere"
    for folder in (course, elsewhere, course / "sub"):
        folder.mkdir(exist_ok=True)
    note = course_note(course, None, here=elsewhere)
    assert str(course) in note and "--course" in note
    assert course_note(course, None, here=course / "sub") is None
    assert course_note(course, None, here=course) is None
    assert course_note(course, str(course), here=elsewhere) is None
    assert isinstance(Path(course), Path)
