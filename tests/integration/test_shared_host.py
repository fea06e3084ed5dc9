"""Trap 8 of issue 28: on a shared host the students run nbgrader and the course's kernel
as their own unix users, which fails when the environment sits in the instructor's home
(mode 700). `residual-pack check-exchange` says so before any student meets it, and what
to do; where the environment is reachable it passes, and a real student account agrees
with it both times.

The environment is this test's own, shown to the student at another path in a private
mount namespace (the host is not changed): once under a home folder of mode 700, once where
it is. Needs root (useradd, runuser, unshare).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from exchangeparts import Workflow, make_user, require_exchange

pytestmark = pytest.mark.slow

VENV = Path(sys.prefix)
IMPORTS = "import autograder, microgpt, nbgrader, ipykernel; print('imported')"


@pytest.fixture(scope="module")
def host():
    require_exchange()
    if not shutil.which("unshare"):
        pytest.skip("unshare is needed to show the environment at another path")
    base = Path(tempfile.mkdtemp(prefix="rp-shared-host-"))
    os.chmod(base, 0o755)
    w = Workflow(base)
    w.student = f"rpstudent{os.getpid() % 100000}"
    home = base / "home" / w.student
    home.parent.mkdir()
    os.chmod(home.parent, 0o755)
    make_user(w.student, home)
    w.home = home
    # the instructor's home, as `useradd -m` makes it on many systems: mode 700
    w.private = base / "home" / "instructor"
    (w.private / "course" / ".venv").mkdir(parents=True)
    os.chmod(w.private, 0o700)
    w.hidden_venv = w.private / "course" / ".venv"
    try:
        yield w
    finally:
        print("\n".join(["", "shared host transcript:", *w.transcript]))
        subprocess.run(["userdel", "-r", w.student], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _in_home(w, command):
    """`command` with this environment bound at the instructor's home (mode 700)."""
    return [shutil.which("unshare"), "--mount", "--propagation", "private", "--", "sh", "-c",
            f'mount --bind "{VENV}" "{w.hidden_venv}" && exec "$@"', "sh", *command]


def test_check_exchange_fails_for_an_environment_in_a_private_home(host):
    w = host
    python = str(w.hidden_venv / "bin" / "python")
    # a student cannot run it...
    student = _as_student_in_home(w, python)
    assert student.returncode != 0
    assert "Permission denied" in student.stderr + student.stdout
    # ... and the instructor's check says so before any student tries, naming the folder
    done = w.run("instructor", _in_home(w, [python, "-m", "autograder.cli",
                                            "check-exchange"]), w.base, check=False)
    w.note(done.stderr.strip())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the students' accounts cannot run this course's Python" in done.stderr
    assert f"{w.private} (mode 700, owner root) has no x bit for others" in done.stderr
    assert "/opt/residuals" in done.stderr and "chmod o+x" in done.stderr


def _as_student_in_home(w, python):
    """The student runs the environment at the instructor's home: runuser inside the
    namespace that binds it there (and, when the base Python is hidden too, shows it)."""
    env = dict(w.env, HOME=str(w.home), USER=w.student, LOGNAME=w.student)
    inner = [shutil.which("runuser"), "-u", w.student, "--", "env", "-i",
             *[f"{k}={v}" for k, v in env.items()], python, "-c", IMPORTS]
    if w.hidden_python:
        inner = w.python_view(inner)
    done = subprocess.run(_in_home(w, inner), cwd=w.home, capture_output=True, text=True,
                          timeout=300)
    w.transcript.append(f"[{w.student}] $ {python} -c {IMPORTS!r}  (exit {done.returncode})"
                        .replace(str(w.base), "$BASE"))
    w.note((done.stderr or done.stdout).strip()[-300:])
    return done


def test_check_exchange_passes_where_every_student_can_reach_it(host):
    w = host
    python = str(VENV / "bin" / "python")
    # where the environment is (its base Python shown to others when it is hidden, as the
    # exchange test does), the student can import the pack and nbgrader...
    student = w.run(w.student, [python, "-c", IMPORTS], w.home, user=w.student, home=w.home)
    assert "imported" in student.stdout
    # ... and the check agrees
    command = [python, "-m", "autograder.cli", "check-exchange"]
    if w.hidden_python:
        command = w.python_view(command)
    done = w.run("instructor", command, w.base, check=False)
    w.note((done.stdout + done.stderr).strip())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the students' accounts can reach this course's Python" in done.stdout
