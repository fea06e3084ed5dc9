"""The parts of the exchange tests: root, student unix users made with useradd, and a
transcript of every command run as the instructor or as a student.

Needs root (to make the users) and the namespace sandbox; skipped with the reason
otherwise, failed instead when EXCHANGE_TEST_REQUIRED is set (CI sets it).
"""

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from isolation import sandbox_level

BIN = Path(sys.executable).parent


def require_exchange():
    """Root with useradd and runuser, and the namespace sandbox: else skip (or fail in
    CI, where EXCHANGE_TEST_REQUIRED is set)."""
    why = ""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        why = "making the students' unix users needs root"
    elif not (shutil.which("useradd") and shutil.which("userdel") and shutil.which("runuser")):
        why = "useradd, userdel and runuser are needed to make and act as the students"
    else:
        level = sandbox_level()
        if not level.root:
            why = f"the sandbox cannot isolate kernels here: {level.message}"
    if why:
        if os.environ.get("EXCHANGE_TEST_REQUIRED"):
            pytest.fail(f"EXCHANGE_TEST_REQUIRED is set, but {why}")
        pytest.skip(why)


class Workflow:
    """The exchange, the course, the students' homes, and a transcript of every command."""

    def __init__(self, base):
        self.base = base
        self.course = base / "course"
        self.exchange = base / "exchange"
        self.transcript = []
        self.env = {
            "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "LANG": "C.UTF-8",
            "HOME": str(base / "instructor"),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        (base / "instructor").mkdir()

    def run(self, who, args, cwd, user=None, home=None, check=True):
        """Run `nbgrader ARGS` (or a plain command) as the instructor or as `user`."""
        env = dict(self.env)
        command = list(args)
        if user:
            env.update(HOME=str(home), USER=user, LOGNAME=user)
            command = [shutil.which("runuser"), "-u", user, "--", "env", "-i",
                       *[f"{k}={v}" for k, v in env.items()], *command]
            if self.hidden_python:
                command = self.python_view(command)
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=900)
        shown = " ".join(str(a) for a in args).replace(str(self.base), "$BASE")
        self.transcript.append(f"[{who}] $ {shown}  (exit {done.returncode})")
        if check and done.returncode != 0:
            raise AssertionError(f"{who}: {shown} failed:\n{done.stdout}\n{done.stderr}")
        return done

    @property
    def hidden_python(self):
        """The folder holding this environment's base Python when other users cannot
        reach it (a pyenv under /root, say), else None."""
        if not hasattr(self, "_hidden"):
            self._hidden = None
            folder = Path(sys.base_prefix).resolve()
            for parent in [*reversed(folder.parents), folder]:
                if parent.is_dir() and not parent.stat().st_mode & 0o001:
                    self._hidden = (parent, folder)
                    break
        return self._hidden

    def python_view(self, command):
        """`command` in a private mount namespace where the base Python's folder can be
        reached by other users: a tmpfs (mode 755) over the folder that keeps them out,
        with only the Python folder bound back into it. The host is not changed."""
        closed, folder = self.hidden_python
        view = self.base / "python-view"
        view.mkdir(exist_ok=True)
        inner = folder.relative_to(closed)
        script = (
            f'mount --bind "{folder}" "{view}" && '
            f'mount -t tmpfs -o mode=755 tmpfs "{closed}" && '
            f'mkdir -p "{closed / inner}" && mount --bind "{view}" "{closed / inner}" && '
            'exec "$@"')
        return [shutil.which("unshare"), "--mount", "--propagation", "private", "--",
                "sh", "-c", script, "sh", *command]

    def note(self, text):
        self.transcript.append("    " + text.replace(str(self.base), "$BASE"))


@contextlib.contextmanager
def students_on_the_host(w, base, users, title):
    """While inside: the workflow `w` with its unix `users` in `base`. On the way out,
    whatever happened: `w`'s transcript printed under `title`, the users and their homes
    removed, `base` removed."""
    try:
        yield w
    finally:
        print("\n".join(["", f"{title} transcript:", *w.transcript]))
        for user in users:
            subprocess.run(["userdel", "-r", user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def make_user(name, home):
    subprocess.run(["userdel", "-r", name], capture_output=True)
    subprocess.run(["useradd", "-m", "-d", str(home), "-s", "/bin/sh", name], check=True,
                   capture_output=True)


def scores(gradebook, assignment):
    """{student: {grade_id: (auto_score, needs_manual_grade)}} from nbgrader's gradebook
    (a SQLite file, or a database URL)."""
    return _scores(gradebook if "://" in str(gradebook) else f"sqlite:///{gradebook}",
                   assignment)


def _scores(url, assignment):
    """{student: {grade_id: (auto_score, needs_manual_grade)}} from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(url) as gb:
        for student in gb.students:
            try:
                submission = gb.find_submission(assignment, student.id)
            except Exception:  # noqa: BLE001 (no submission: nothing to list)
                continue
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    found.setdefault(student.id, {})[grade.name] = (
                        float(grade.auto_score or 0.0), bool(grade.needs_manual_grade))
    return found
