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


def test_a_sandbox_error_of_bubblewrap_is_a_message_not_a_traceback(monkeypatch, capsys):
    """bubblewrap's own errors ("no free sandbox uid") are the one SandboxError that
    `main` reports in a line (there were two classes, and main caught only the other)."""
    from autograder import cli
    from autograder.sandbox import bubblewrap

    def no_uid(args, course):
        raise bubblewrap.SandboxError("no free sandbox uid in 2100000000-2100000001")

    monkeypatch.setattr(cli, "cmd_check_exchange", no_uid)
    import argparse
    real = cli.parser

    def patched():
        p = real()
        for action in p._subparsers._group_actions:
            for name, sub in action.choices.items():
                if name == "check-exchange":
                    sub.set_defaults(run=no_uid)
        return p

    monkeypatch.setattr(cli, "parser", patched)
    assert isinstance(real(), argparse.ArgumentParser)
    assert cli.main(["check-exchange"]) == 2
    assert capsys.readouterr().err.strip() == (
        "residual-pack: no free sandbox uid in 2100000000-2100000001")
