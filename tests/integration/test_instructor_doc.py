"""docs/instructors.md, followed literally: the instructor's commands as the doc prints
them, read from the doc, run on a fresh `git clone` of this repository, with two students
who are unix users and nbgrader's exchange at the doc's /srv/nbgrader/exchange.

Every command the doc's list of steps prints is either run here, in the doc's order, or
named in NOT_RUN with the reason; a command added to the doc, changed or moved fails
tests/unit/test_instructor_doc_commands.py until this test follows it. The doc's
placeholders are filled in: ASSIGNMENT (the first assignment), STUDENT (each student),
/opt/residuals (the environment running this test). The exchange folder is a temporary one
bound at /srv/nbgrader/exchange in a private mount namespace per command (the host is not
changed); `sudo -u STUDENT` runs as the student through runuser (sudo may be missing).

One student hands in the solution, the other the release as fetched. Twice: with
nbgrader's SQLite gradebook, and with a PostgreSQL one named in the course config as the
doc says (skipped without PostgreSQL unless POSTGRES_REQUIRED is set). Needs root
(useradd, runuser, unshare) and the namespace sandbox; skipped otherwise, failed instead
when EXCHANGE_TEST_REQUIRED is set.
"""

import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from clusterparts import PostgresServer, require_postgres
from exchangeparts import (
    Workflow,
    make_user,
    require_exchange,
    scores,
    students_on_the_host,
)
from hostile import as_bytes
from instructordoc import (
    ASSIGNMENT,
    EXCHANGE,
    FULL_MARKS,
    INSTRUCTOR,
    MANUAL,
    NOTEBOOK,
    POSTGRES_CONFIG,
    POSTGRES_URL,
    REPO,
    SCRIPT,
)

from autograder.authoring.madeup import filled_in
from autograder.grading.course import read_notebook

pytestmark = pytest.mark.slow

class Literal(Workflow):
    """Each command through `sh -c` as printed, in a mount namespace where the exchange
    is at the doc's path (and, for a student and for the instructor's check, where this
    environment's base Python can be reached when it is in a private folder, as the
    exchange test does: the students' accounts must be able to run it, step 5)."""

    def shell(self, who, printed, cwd, user=None, home=None, check=True):
        text = (re.sub(r"\bASSIGNMENT\b", ASSIGNMENT, printed)
                .replace("/opt/residuals", sys.prefix))
        if self.postgres:
            text = text.replace(POSTGRES_URL, self.postgres)
        if user:
            text = text.replace("sudo -u STUDENT ", "")
        command = ["sh", "-c", text]
        if user:
            env = dict(self.env, HOME=str(home), USER=user, LOGNAME=user)
            env.pop("PGPASSWORD", None)  # the instructor's
            command = [shutil.which("runuser"), "-u", user, "--", "env", "-i",
                       *[f"{k}={v}" for k, v in env.items()], *command]
        if EXCHANGE in text:  # (autograde's sandbox makes namespaces of its own)
            command = self.exchange_view(command)
        if (user or "check-exchange" in printed) and self.hidden_python:
            command = self.python_view(command)
        done = subprocess.run(command, cwd=cwd, env=self.env, capture_output=True,
                              text=True, timeout=900)
        self.transcript.append(f"[{who}] $ {printed}  (exit {done.returncode})")
        if check and done.returncode != 0:
            raise AssertionError(f"{who}: {printed} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def exchange_view(self, command):
        script = (f'mount -t tmpfs -o mode=755 tmpfs /srv && mkdir -p "{EXCHANGE}" && '
                  f'mount --bind "{self.exchange}" "{EXCHANGE}" && exec "$@"')
        return [shutil.which("unshare"), "--mount", "--propagation", "private", "--",
                "sh", "-c", script, "sh", *command]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def followed(request):
    """The doc followed once per gradebook: nbgrader's SQLite default, and a PostgreSQL
    one named in the course config as the doc says (a private server, clusterparts)."""
    require_exchange()
    if not shutil.which("unshare") or not shutil.which("git"):
        pytest.fail("unshare and git are needed to follow the doc")
    server = None
    if request.param == "postgresql":
        require_postgres()
        server = PostgresServer().start()
    base = Path(tempfile.mkdtemp(prefix="rp-instructor-doc-"))
    os.chmod(base, 0o755)
    w = Literal(base)
    w.postgres = None
    w.gradebook = w.course / "gradebook.db"
    if server is not None:
        w.postgres = f"{server.user}@127.0.0.1:{server.port}/{server.database}"
        w.env["PGPASSWORD"] = server.password
        w.gradebook = server.url()
    suffix = str(os.getpid() % 100000)
    w.honest, w.untouched = f"rpdocsol{suffix}", f"rpdocstub{suffix}"
    users = [w.honest, w.untouched]
    try:
        with students_on_the_host(w, base, users, "instructor doc"):
            _follow(w, users)
            yield w
    finally:
        if server is not None:
            server.stop()


def _follow(w, users):
    w.exchange.mkdir(mode=0o700)  # the doc's mkdir and chmod open it
    subprocess.run(["git", "clone", "-q", str(REPO), str(w.course)], check=True,
                   capture_output=True)
    w.note(f"git clone {REPO} $BASE/course")
    w.homes = {}
    (w.base / "home").mkdir()
    os.chmod(w.base / "home", 0o755)
    for user in users:
        w.homes[user] = w.base / "home" / user
        make_user(user, w.homes[user])
    source = read_notebook(w.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    handout = w.base / "handout"
    handout.mkdir()
    os.chmod(handout, 0o755)
    w.done = {}
    for who, printed in SCRIPT:
        if printed == POSTGRES_CONFIG and not w.postgres:
            continue
        if who == INSTRUCTOR:
            w.done[printed] = w.shell(who, printed, w.course)
            continue
        for user in users:
            home = w.homes[user]
            if printed.startswith("nbgrader submit"):  # the student's work, before it
                fetched = home / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
                if user == w.honest:
                    draft = handout / f"{user}.ipynb"
                    draft.write_bytes(as_bytes(filled_in(read_notebook(fetched), source)))
                    os.chmod(draft, 0o644)
                    w.run(user, ["cp", str(draft), str(fetched)], home, user=user, home=home)
                    w.note(f"{user} writes the solution of every task")
                else:
                    w.note(f"{user} hands in the release as fetched")
            w.done[(printed, user)] = w.shell(user, printed, home, user=user, home=home)
    with open(w.course / "grades.csv", newline="") as f:
        w.grades = {row["student_id"]: row for row in csv.DictReader(f)}
    w.cells = scores(w.gradebook, ASSIGNMENT)
    for student, row in sorted(w.grades.items()):
        w.note(f"grades.csv: {student}: score {row['score']} of {row['max_score']}")


def test_the_check_and_a_student_agree_the_environment_is_reachable(followed):
    w = followed
    assert "the students' accounts can reach" in \
        w.done["/opt/residuals/bin/residual-pack check-exchange"].stdout
    as_student = next(c for _, c in SCRIPT if c.startswith("sudo -u STUDENT"))
    for user in (w.honest, w.untouched):
        assert w.done[(as_student, user)].returncode == 0


def test_autograde_scores_the_solution_in_full_and_the_release_nothing(followed):
    w = followed
    assert "residual-pack: student kernels run in the sandbox" in \
        w.done["nbgrader autograde ASSIGNMENT"].stderr
    assert float(w.grades[w.honest]["score"]) == FULL_MARKS
    assert float(w.grades[w.honest]["max_score"]) == FULL_MARKS + MANUAL
    assert float(w.grades[w.untouched]["score"]) == 0.0
    assert set(w.cells) == {w.honest, w.untouched}  # in the gradebook the doc names
    assert (w.course / "gradebook.db").exists() == (w.postgres is None)


def test_each_student_fetched_feedback(followed):
    w = followed
    for user in (w.honest, w.untouched):
        pages = sorted((w.homes[user] / ASSIGNMENT / "feedback").rglob("*.html"))
        assert len(pages) == 1, f"{user}: {pages}"


def test_the_lms_exports_have_a_row_per_student(followed):
    w = followed
    with open(w.course / "canvas.csv", newline="") as f:
        canvas = list(csv.DictReader(f))
    rows = {row["SIS Login ID"]: row for row in canvas if row["Student"] != "Points Possible"}
    assert set(rows) == {w.honest, w.untouched}
    assert {row["Section"] for row in rows.values()} == {"Lecture A"}
    assert float(rows[w.honest][ASSIGNMENT]) == FULL_MARKS
    with open(w.course / "moodle.csv", newline="") as f:
        moodle = {row["Username"]: row for row in csv.DictReader(f)}
    assert set(moodle) == {w.honest, w.untouched}
    assert float(moodle[w.untouched][ASSIGNMENT]) == 0.0
