"""autograder/cli.py: the command table, and each command handing its work to the
module that does it."""

import logging
import re
from pathlib import Path

import pytest

from autograder import cli
from autograder.authoring import fingerprints
from autograder.grading.course import NBGRADER_LOG

COURSE = Path(__file__).resolve().parents[2]


def test_every_command_the_docstring_lists_is_in_the_table():
    listed = set(re.findall(r"^    residual-pack ([a-z-]+)", cli.__doc__, re.M))
    commands = cli.parser()._subparsers._group_actions[0].choices
    assert listed and listed == set(commands)
    for name, sub in commands.items():
        assert callable(sub.get_default("run")), name


@pytest.mark.parametrize("verbose,kind", [(True, logging.StreamHandler),
                                          (False, logging.NullHandler)])
def test_nbgrader_log_shows_only_with_verbose(verbose, kind):
    cli.quiet_nbgrader(verbose)
    log = logging.getLogger(NBGRADER_LOG)
    assert not log.propagate and [type(h) for h in log.handlers] == [kind]


def test_fingerprints_says_what_failed_and_fails(monkeypatch, capsys):
    calls = []

    def regenerate(course, names, jobs, write, say):
        calls.append((names, jobs, write))
        return ["01_residual_stack"]

    monkeypatch.setattr(fingerprints, "regenerate", regenerate)
    code = cli.main(["--course", str(COURSE), "fingerprints", "01_residual_stack", "--check",
                     "-j", "3"])
    assert code == 1 and calls == [(["01_residual_stack"], 3, False)]
    assert "fingerprints FAILED for 01_residual_stack" in capsys.readouterr().out


def test_a_course_error_is_one_line_and_exit_code_2(capsys, tmp_path):
    assert cli.main(["--course", str(tmp_path), "generate"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("residual-pack: ") and err.count("\n") == 1
