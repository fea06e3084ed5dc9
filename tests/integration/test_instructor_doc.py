"""docs/instructors.md, followed literally: the instructor's commands as the doc prints
them, read from the doc, run on a fresh `git clone` of this repository, with two students
who are unix users and nbgrader's exchange at the doc's /srv/nbgrader/exchange.

Every command the doc's list of steps prints is either run here, in the doc's order, or
named in NOT_RUN with the reason; a command added to the doc, changed or moved fails
tests/unit/test_instructor_doc_commands.py until this test follows it. The doc's
placeholders are filled in: ASSIGNMENT (the first assignment), STUDENT (each student, made
with the doc's useradd), /opt/residuals (the environment running this test). The exchange
folder is a temporary one bound at /srv/nbgrader/exchange in a private mount namespace per
command (the host is not changed).

One student hands in the solution, one the release as fetched, and one the solution with
a cell of its own that imports `gc` (code that reaches into the interpreter: its score is
withheld for review). After autograde, formgrader is started as step 7 prints it and
opened in headless Chromium (Playwright): the students, their scores, the withheld one
marked as needing a manual grade with the reason as the comment; screenshots go to the
test's tmp folder (skipped without Chromium or Playwright unless BROWSER_TEST_REQUIRED
is set). Step 8's batch command then grades what collect gathered into `batch/` (with
PostgreSQL, into a second database named by $RESIDUAL_PACK_DB_URL). Twice: with
nbgrader's SQLite gradebook, and with a PostgreSQL one made by step 4's commands as printed
(test_instructor_doc_postgresql.py; skipped without PostgreSQL unless POSTGRES_REQUIRED is
set). Needs root (useradd, runuser, unshare) and the namespace sandbox; skipped otherwise,
failed instead when EXCHANGE_TEST_REQUIRED is set.
"""

import csv
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from exchangeparts import (
    Workflow,
    require_exchange,
    scores,
    students_on_the_host,
)
from hostile import as_bytes, insert_after
from instructordoc import (
    ASSIGNMENT,
    DIR,
    EXCHANGE,
    FOR_EACH_STUDENT,
    FORMGRADER,
    FULL_MARKS,
    INSTRUCTOR,
    MANUAL,
    NOTEBOOK,
    POSTGRES_COMMANDS,
    REPO,
    SCRIPT,
    SUBMISSIONS,
)

from autograder.authoring.madeup import filled_in
from autograder.grading.course import read_notebook

pytestmark = pytest.mark.slow

# a cell that carries the source notebook's markers (a copy of the instructor's source, the
# kind of submission still held back for a person now that the tests run in the grader)
PEEK = ('# pasted from a copy of the course\'s source notebook\n### BEGIN SOLUTION\n'
        'seen = True\n### END SOLUTION')


class Literal(Workflow):
    """Each command through `sh -c` as printed, in a mount namespace where the exchange
    is at the doc's path (and, for a student and for the instructor's check, where this
    environment's base Python can be reached when it is in a private folder, as the
    exchange test does: the students' accounts must be able to run it, step 5)."""

    def shell(self, who, printed, cwd, user=None, home=None, check=True, student=None):
        """`printed` through `sh -c`, as the instructor (root), or as `user` (a student);
        `student` fills in STUDENT of a command the instructor runs for each student."""
        text = re.sub(r"\bASSIGNMENT\b", ASSIGNMENT, printed).replace("/opt/residuals",
                                                                      sys.prefix)
        text = re.sub(r"\bDIR\b", DIR, re.sub(r"\bSUBMISSIONS\b", SUBMISSIONS, text))
        if student:
            text = re.sub(r"\bSTUDENT\b", student, text)
        command = ["sh", "-c", text]
        if user:
            env = dict(self.env, HOME=str(home), USER=user, LOGNAME=user)
            env.pop("PGPASSWORD", None)  # the instructor's
            env.pop("RESIDUAL_PACK_DB_URL", None)
            command = [shutil.which("runuser"), "-u", user, "--", "env", "-i",
                       *[f"{k}={v}" for k, v in env.items()], *command]
        if EXCHANGE in text:  # (autograde's sandbox makes namespaces of its own)
            command = self.exchange_view(command)
        if (user or student or "check-exchange" in printed) and self.hidden_python:
            command = self.python_view(command)
        started = time.monotonic()
        done = subprocess.run(command, cwd=cwd, env=self.env, capture_output=True,
                              text=True, timeout=900)
        seconds = time.monotonic() - started
        self.transcript.append(f"[{who}] $ {printed}  (exit {done.returncode}, "
                               f"{seconds:.0f} s)"
                               + (f"  STUDENT={student}" if student else ""))
        if check and done.returncode != 0:
            raise AssertionError(f"{who}: {printed} failed:\n{done.stdout}\n{done.stderr}")
        return done

    def exchange_view(self, command):
        script = (f'mount -t tmpfs -o mode=755 tmpfs /srv && mkdir -p "{EXCHANGE}" && '
                  f'mount --bind "{self.exchange}" "{EXCHANGE}" && exec "$@"')
        return [shutil.which("unshare"), "--mount", "--propagation", "private", "--",
                "sh", "-c", script, "sh", *command]


@pytest.fixture(scope="module", params=["sqlite"])
def followed(request, tmp_path_factory):
    """The doc followed with nbgrader's SQLite gradebook (its default); with a PostgreSQL
    one in test_instructor_doc_postgresql.py, which runs these same tests in a file of its
    own so that the suite's workers (`--dist loadfile`) follow the doc twice at once."""
    yield from follow_the_doc(request, tmp_path_factory)


def follow_the_doc(request, tmp_path_factory, postgres=None):
    """The doc followed once for the gradebook `request.param`: "sqlite", or "postgresql",
    where `postgres` runs step 4's PostgreSQL commands (test_instructor_doc_postgresql.py):
    it sets `w.postgres`, `w.password`, `w.gradebook` and `w.batch_gradebook`, and
    $RESIDUAL_PACK_DB_URL for step 8."""
    require_exchange()
    if not shutil.which("unshare") or not shutil.which("git"):
        pytest.fail("unshare and git are needed to follow the doc")
    if postgres is not None:
        postgres.require()
    base = Path(tempfile.mkdtemp(prefix="rp-instructor-doc-"))
    os.chmod(base, 0o755)
    w = Literal(base)
    w.pg = postgres
    w.postgres = w.batch_gradebook = w.password = None
    w.gradebook = w.course / "gradebook.db"
    suffix = str(os.getpid() % 100000)
    w.honest, w.untouched = f"rpdocsol{suffix}", f"rpdocstub{suffix}"
    w.peek = f"rpdocpeek{suffix}"
    w.shots = tmp_path_factory.mktemp(f"formgrader-{request.param}")
    users = [w.honest, w.untouched, w.peek]
    try:
        with students_on_the_host(w, base, users, "instructor doc"):
            _follow(w, users)
            yield w
    finally:
        if postgres is not None:
            postgres.stop(w)


def _follow(w, users):
    w.exchange.mkdir(mode=0o700)  # the doc's mkdir and chmod open it
    subprocess.run(["git", "clone", "-q", str(REPO), str(w.course)], check=True,
                   capture_output=True)
    w.note(f"git clone {REPO} $BASE/course")
    w.homes = {}
    for user in users:  # a student of an earlier run that was killed
        subprocess.run(["userdel", "-r", user], capture_output=True)
    source = read_notebook(w.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    handout = w.base / "handout"
    handout.mkdir()
    os.chmod(handout, 0o755)
    w.done = {}
    for who, printed in SCRIPT:
        if printed in POSTGRES_COMMANDS:
            if w.pg is not None:
                w.done[printed] = w.pg.run(w, printed)
            continue
        if who == FOR_EACH_STUDENT:  # useradd, runuser: root, STUDENT filled in
            for user in users:
                w.done[(printed, user)] = w.shell(who, printed, w.course, student=user)
                if printed.startswith("useradd"):
                    w.homes[user] = Path(pwd.getpwnam(user).pw_dir)
            continue
        if printed == FORMGRADER:
            w.formgrader = _formgrader(w, printed)
            continue
        if who == INSTRUCTOR:
            w.done[printed] = w.shell(who, printed, w.course)
            continue
        for user in users:
            home = w.homes[user]
            if printed.startswith("nbgrader submit"):  # the student's work, before it
                fetched = home / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
                if user in (w.honest, w.peek):
                    work = filled_in(read_notebook(fetched), source)
                    if user == w.peek:
                        work = insert_after(work, "task1_2_input_gradient", PEEK)
                    draft = handout / f"{user}.ipynb"
                    draft.write_bytes(as_bytes(work))
                    os.chmod(draft, 0o644)
                    w.run(user, ["cp", str(draft), str(fetched)], home, user=user, home=home)
                    w.note(f"{user} writes the solution of every task"
                           + (", and a cell of its own pasted from the source notebook"
                              if user == w.peek else ""))
                else:
                    w.note(f"{user} hands in the release as fetched")
            w.done[(printed, user)] = w.shell(user, printed, home, user=user, home=home)
    with open(w.course / "grades.csv", newline="") as f:
        w.grades = {row["student_id"]: row for row in csv.DictReader(f)}
    w.cells = scores(w.gradebook, ASSIGNMENT)
    for student, row in sorted(w.grades.items()):
        w.note(f"grades.csv: {student}: score {row['score']} of {row['max_score']}")


# what formgrader's pages show, read from the page as rendered
STUDENTS_JS = """() => Array.from(document.querySelectorAll('#main-table tr')).map(r => ({
  id: (r.querySelector('.id') || {}).textContent,
  score: (r.querySelector('.score') || {}).textContent
})).filter(r => r.id)"""
SUBMISSIONS_JS = """() => Array.from(document.querySelectorAll('#main-table tr')).map(r => {
  const a = r.querySelector('.name a.name-shown');
  return a && {student: a.textContent, href: a.href,
               score: (r.querySelector('.score') || {}).textContent,
               manual: !!r.querySelector('.needs-manual-grade .glyphicon'),
               flagged: !!r.querySelector('.flagged .glyphicon')};
}).filter(r => r)"""
SUBMISSION_JS = """() => ({
  comments: Object.fromEntries(Array.from(document.querySelectorAll('textarea.comment'))
    .map(t => [t.id, t.placeholder])),
  manual: Array.from(document.querySelectorAll('input.score.needs_manual_grade')).map(i => i.id)
})"""


def _formgrader(w, printed):
    """Step 7 as the doc prints it: the server started in the course folder, the address
    it prints opened with /formgrader in place of /lab, in headless Chromium. Returns
    what the pages show, {"missing": why} without a browser, or {"error": ...}."""
    sys.path.insert(0, str(REPO / "tests" / "browser"))
    import lab_helpers as lh

    missing = lh.missing_requirements()
    if missing:
        w.note(f"formgrader not opened: {missing}")
        return {"missing": missing}
    log_path = w.base / "formgrader.log"
    with open(log_path, "w", encoding="utf-8") as log:
        server = subprocess.Popen(["sh", "-c", printed], cwd=w.course, env=w.env,
                                  stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    w.transcript.append(f"[instructor] $ {printed}  (a server: stopped after the visit)")
    try:
        address = _printed_address(server, log_path)
        seen = _visit(w, lh, address)
    except Exception as exc:  # noqa: BLE001 (the formgrader test shows it; the rest go on)
        log = log_path.read_text(errors="replace").splitlines()[-30:]
        seen = {"error": f"{type(exc).__name__}: {exc}\nserver log:\n" + "\n".join(log)}
    finally:
        _stop(server)
    for shot in sorted(w.shots.glob("*.png")):
        w.note(f"formgrader screenshot: {shot}")
    return seen


def _printed_address(server, log_path, timeout=180):
    """The address with its token that `jupyter lab` prints (the 127.0.0.1 one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"http://127\.0\.0\.1:\d+/lab\?token=\w+", log_path.read_text())
        if found:
            return found.group(0)
        if server.poll() is not None:
            raise AssertionError(f"jupyter lab ended with {server.returncode}")
        time.sleep(0.5)
    raise AssertionError(f"jupyter lab printed no address in {timeout} s")


def _stop(server):
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        if server.poll() is not None:
            return
        try:
            os.killpg(server.pid, sig)
            server.wait(wait)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def _visit(w, lh, address):
    from playwright.sync_api import sync_playwright

    root = address.split("/lab?")[0]
    students = {w.honest, w.untouched, w.peek}
    seen = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(lh.CHROMIUM), headless=True,
                                     args=lh.CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(address.replace("/lab?", "/formgrader?"))  # as the doc says
            page.get_by_text(ASSIGNMENT).first.wait_for()
            page.screenshot(path=str(w.shots / "1-assignments.png"))
            page.goto(f"{root}/formgrader/manage_students")
            page.wait_for_function(f"() => ({STUDENTS_JS})().length >= {len(students)}")
            seen["students"] = page.evaluate(STUDENTS_JS)
            page.screenshot(path=str(w.shots / "2-students.png"))
            page.goto(f"{root}/formgrader/gradebook/{ASSIGNMENT}/{NOTEBOOK}")
            page.wait_for_function(f"() => ({SUBMISSIONS_JS})().length >= {len(students)}")
            seen["submissions"] = page.evaluate(SUBMISSIONS_JS)
            page.get_by_text("Show All Names").click()
            page.screenshot(path=str(w.shots / "3-submissions.png"))
            peek = next((r for r in seen["submissions"] if r["student"] == w.peek), None)
            if peek is not None:
                page.goto(peek["href"])
                page.wait_for_function(  # formgrader loads the comments after the page
                    "() => Array.from(document.querySelectorAll('textarea.comment'))"
                    ".some(t => t.placeholder.includes('residual-pack'))")
                # ... and the grades apart from them: a slow machine read the page between
                page.wait_for_function(
                    "() => document.querySelectorAll('input.score.needs_manual_grade')"
                    ".length > 0", timeout=60000)
                seen["withheld"] = page.evaluate(SUBMISSION_JS)
                page.locator("textarea.comment").first.scroll_into_view_if_needed()
                page.screenshot(path=str(w.shots / "4-withheld.png"))
        finally:
            browser.close()
    return seen


def test_the_check_and_a_student_agree_the_environment_is_reachable(followed):
    w = followed
    assert "the students' accounts can reach" in \
        w.done["/opt/residuals/bin/residual-pack check-exchange"].stdout
    as_student = next(c for _, c in SCRIPT if c.startswith("runuser -u STUDENT"))
    for user in (w.honest, w.untouched, w.peek):
        assert w.done[(as_student, user)].returncode == 0


def test_autograde_scores_the_solution_in_full_and_the_release_nothing(followed):
    """Issue #28, trap 1: the doc's generate_assignment (with --force) puts the assignment
    in the gradebook on a fresh clone; without --force autograde fails for every student
    ("No assignment with ID ... exists in the database"). Trap 4: nbgrader's three
    "checksum has changed" warnings per student no longer bury the lines that matter."""
    w = followed
    log = w.done["nbgrader autograde ASSIGNMENT"].stderr
    assert "residual-pack: student kernels run in the sandbox" in log
    assert "Attribute 'checksum'" not in log
    assert float(w.grades[w.honest]["score"]) == FULL_MARKS
    assert float(w.grades[w.honest]["max_score"]) == FULL_MARKS + MANUAL
    assert float(w.grades[w.untouched]["score"]) == 0.0
    assert set(w.cells) == {w.honest, w.untouched, w.peek}  # in the gradebook the doc names
    assert (w.course / "gradebook.db").exists() == (w.postgres is None)


def test_each_student_fetched_feedback(followed):
    w = followed
    for user in (w.honest, w.untouched, w.peek):
        pages = sorted((w.homes[user] / ASSIGNMENT / "feedback").rglob("*.html"))
        assert len(pages) == 1, f"{user}: {pages}"


def test_the_lms_exports_have_a_row_per_student(followed):
    w = followed
    with open(w.course / "canvas.csv", newline="") as f:
        canvas = list(csv.DictReader(f))
    rows = {row["SIS Login ID"]: row for row in canvas if row["Student"] != "Points Possible"}
    assert set(rows) == {w.honest, w.untouched, w.peek}
    assert {row["Section"] for row in rows.values()} == {"Lecture A"}
    assert float(rows[w.honest][ASSIGNMENT]) == FULL_MARKS
    with open(w.course / "moodle.csv", newline="") as f:
        moodle = {row["Username"]: row for row in csv.DictReader(f)}
    assert set(moodle) == {w.honest, w.untouched, w.peek}
    assert float(moodle[w.untouched][ASSIGNMENT]) == 0.0


def test_a_score_withheld_for_review_is_in_the_gradebook_for_a_person(followed):
    """The student whose cell carries the source notebook's markers: nbgrader's log says
    what was held back, and the gradebook has the test cells at 0 marked as needing a
    manual grade."""
    w = followed
    assert f"{w.peek}/{NOTEBOOK}: autograded score ({FULL_MARKS:g}) withheld for review" \
        in w.done["nbgrader autograde ASSIGNMENT"].stderr
    assert float(w.grades[w.peek]["score"]) == 0.0
    tests = {k: v for k, v in w.cells[w.peek].items() if "_test_" in k}
    assert tests and all(v == (0.0, True) for v in tests.values()), tests
    honest = {k: v for k, v in w.cells[w.honest].items() if "_test_" in k}
    assert honest.keys() == tests.keys() and not any(m for _, m in honest.values())


def _score(text):
    got, top = text.split("/")
    return float(got), float(top)


@pytest.mark.browser
def test_formgrader_shows_the_students_their_scores_and_what_was_withheld(followed):
    """Step 7: formgrader, started as the doc prints it, reads the gradebook the doc's
    steps wrote (SQLite or PostgreSQL): every student with their score, and the withheld
    student marked as needing a manual grade, with the reason as the answers' comment."""
    w = followed
    seen = w.formgrader
    if "missing" in seen:
        if os.environ.get("BROWSER_TEST_REQUIRED") == "1":
            pytest.fail(f"BROWSER_TEST_REQUIRED=1 but {seen['missing']}", pytrace=False)
        pytest.skip(seen["missing"])
    assert "error" not in seen, seen.get("error")
    top = FULL_MARKS + MANUAL
    expected = {w.honest: (FULL_MARKS, top), w.untouched: (0.0, top), w.peek: (0.0, top)}
    assert {r["id"]: _score(r["score"]) for r in seen["students"]} == expected
    rows = {r["student"]: r for r in seen["submissions"]}
    assert {s: _score(r["score"]) for s, r in rows.items()} == expected
    # the honest student's written answer waits for a person too; the untouched one's
    # (as released) does not
    assert w.peek in [s for s, r in rows.items() if r["manual"]]
    assert not rows[w.untouched]["manual"]
    comments = seen["withheld"]["comments"]
    assert "task1_1_residual_stack-comment" in comments
    for comment in comments.values():
        assert "residual-pack: score withheld for review" in comment
        assert "carries the instructor's markers" in comment
    assert {"task1_1_test_output", "task1_1_test_gradient",
            "task1_2_test_input_gradient"} <= set(seen["withheld"]["manual"])


def test_the_batch_command_grades_the_collected_class_into_its_gradebook(followed):
    """Step 8 as printed, on what `nbgrader collect` gathered: the same scores as
    autograde, and `cd DIR && nbgrader db student list` sees the class in the gradebook
    the run wrote: SQLite in DIR, or the PostgreSQL one $RESIDUAL_PACK_DB_URL names, which
    DIR/nbgrader_config.py then names without its password (issue #28, trap 3)."""
    w = followed
    out = w.course / DIR
    with open(out / "grades.csv", newline="") as f:
        grades = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)}
    assert grades == {w.honest: FULL_MARKS, w.untouched: 0.0, w.peek: 0.0}
    report = (out / "report.txt").read_text()
    assert f"{w.peek}: " in report and "withheld" in report
    listed = w.done["cd DIR && nbgrader db student list"].stdout
    assert "There are 3 students in the database" in listed
    assert all(s in listed for s in (w.honest, w.untouched, w.peek))
    assert (out / "gradebook.db").exists() == (w.postgres is None)
    if w.postgres:
        config = (out / "nbgrader_config.py").read_text()
        database = w.batch_gradebook.rsplit("/", 1)[1]
        assert f"/{database}'" in config and w.password not in config
        assert set(scores(w.batch_gradebook, ASSIGNMENT)) == {w.honest, w.untouched, w.peek}
