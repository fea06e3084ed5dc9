"""autograder/grading/session.py: one grading session for grade, demo and selfcheck, with
the sandbox replaced by a stand-in (the real one is graded for real in test_pipeline)."""

import os
from pathlib import Path

import pytest

from autograder import cli
from autograder.grading import session
from autograder.grading.course import CONFIG_FILE
from autograder.sandbox.limits import Limits

COURSE = Path(__file__).resolve().parents[2]


def _course(tmp_path, timeout):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / CONFIG_FILE).write_text(f"c = get_config()\nc.Execute.timeout = {timeout}\n")
    (tmp_path / "source").mkdir()
    return tmp_path


def test_the_cell_limit_comes_from_the_course_config(tmp_path):
    course = _course(tmp_path, 77)
    assert session.course_limits(course) == Limits(cell_timeout=77)
    assert session.course_limits(course, cell_timeout=None, processes=9) == \
        Limits(cell_timeout=77, processes=9)
    assert session.course_limits(course, cell_timeout=5).cell_timeout == 5
    (course / CONFIG_FILE).write_text("this is not python")
    assert session.course_limits(course) == Limits()


def test_the_command_lines_defaults_are_limits_defaults():
    args = cli.parser().parse_args(["grade", "01_residual_stack", "subs"])
    assert cli._limits(args, COURSE) == session.course_limits(COURSE)
    assert (args.notebook_timeout, args.memory << 20, args.processes) == (
        Limits.notebook_timeout, Limits.memory, Limits.processes)
    args = cli.parser().parse_args(["grade", "a", "s", "--cell-timeout", "9", "--memory", "64"])
    limits = cli._limits(args, COURSE)
    assert (limits.cell_timeout, limits.memory) == (9, 64 << 20)


class FakeSandbox:
    made = []

    def __init__(self, limits):
        self.limits = limits
        self.closed = False
        FakeSandbox.made.append(self)

    def close(self):
        self.closed = True

    def describe(self):
        return "fake"


@pytest.fixture
def fake_sandbox(monkeypatch):
    swept = []
    FakeSandbox.made = []
    monkeypatch.setattr(session, "Sandbox", FakeSandbox)
    monkeypatch.setattr(session, "remove_stale_roots", lambda: swept.append(True))
    return swept


def test_a_session_sweeps_builds_and_closes(tmp_path, fake_sandbox):
    course = _course(tmp_path / "course", 33)
    home = os.environ.get("HOME")
    with session.grading_session(course, tmp_path / "work", jupyter=tmp_path / "j") as s:
        assert fake_sandbox == [True]
        assert s.sandbox.limits == Limits(cell_timeout=33) and s.describe() == "fake"
        assert os.environ["HOME"] == str(tmp_path / "j" / "home")
        assert not (tmp_path / "work").exists()  # the work course is made on first use
    assert s.sandbox.closed and os.environ.get("HOME") == home


def test_a_session_closes_its_sandbox_when_grading_fails(tmp_path, fake_sandbox):
    course = _course(tmp_path / "course", 33)
    with pytest.raises(RuntimeError), session.grading_session(course, tmp_path / "w",
                                                              limits=Limits(processes=3)):
        raise RuntimeError("a grader failed")
    box, = FakeSandbox.made
    assert box.closed and box.limits == Limits(processes=3)


def test_without_isolation_there_is_no_sandbox(tmp_path, fake_sandbox):
    course = _course(tmp_path / "course", 33)
    with session.grading_session(course, tmp_path / "w", isolate=False) as s:
        assert s.sandbox is None and s.describe() == ""
    assert fake_sandbox == [] and FakeSandbox.made == []


def test_a_new_sandbox_sweeps_first_and_takes_the_course_limits(tmp_path, fake_sandbox):
    """The one sandbox set-up that `grading_session`, a cluster worker and nbgrader's own
    autograde (`session.own_sandbox`) share."""
    course = _course(tmp_path / "course", 41)
    box = session.new_sandbox(course)
    assert fake_sandbox == [True] and box.limits == Limits(cell_timeout=41)
    assert session.new_sandbox(course, Limits(memory=5)).limits == Limits(memory=5)
    assert not any(b.closed for b in FakeSandbox.made)  # the caller closes it
