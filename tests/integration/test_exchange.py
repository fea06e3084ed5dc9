"""nbgrader's own exchange workflow, end to end, with two students who are unix users.

The instructor (this process's user, root) and two students run nbgrader's commands, each
as themselves: the instructor generates and releases the first assignment into an
exchange folder; each student fetches it, works on it in their home and submits it; the
instructor collects, autogrades with plain `nbgrader autograde` (the course's
nbgrader_config.py puts our sandbox, intake and withholding in nbgrader's steps),
generates and releases feedback, and exports the grades; the students fetch their
feedback. One student is honest (the solution); the other is hostile: its answer to task
1.1 is wrong and patches the checks (tests/hostile's PATCH_CHECKS), and a cell of its own
looks for the hidden tests, the solution and the gradebook on disk and runs the solution
it finds (READ_SECRETS).

A control grades the same hostile submission with nbgrader's stock steps (the course
config without our lists): there it earns task 1.1's points with a wrong answer, which
shows the attacks are real.

Needs root (to make the users) and the namespace sandbox; skipped with the reason
otherwise, failed instead when EXCHANGE_TEST_REQUIRED is set (CI sets it).
"""

import ast
import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from exchangeparts import (
    BIN,
    Workflow,
    make_user,
    require_exchange,
    scores,
    students_on_the_host,
)
from hostile import answer, as_bytes, insert_after
from hostile.attacks import PATCH_CHECKS, READ_SECRETS

from autograder.authoring.madeup import filled_in
from autograder.grading.course import read_notebook
from autograder.grading.feedback import hidden_test_lines, html_text, leaked_lines

pytestmark = pytest.mark.slow

COURSE = Path(__file__).resolve().parents[2]
ASSIGNMENT = NOTEBOOK = "01_residual_stack"
COURSE_ID = "residuals"
FULL_MARKS = 6.0  # autograded points of the assignment (2 + 2 + 2)
MANUAL = 2.0  # its written answer, graded by hand
# the course config up to here is the course's settings; below it, our steps
OUR_STEPS = "\n# ---- our steps in nbgrader's lists"


def _exchange_args(workflow):
    return [f"--Exchange.root={workflow.exchange}"]


def _stock_config(course):
    """The course config without our steps: nbgrader's own autograde and feedback."""
    text = (course / "nbgrader_config.py").read_text()
    assert OUR_STEPS in text, "the course config no longer marks where our steps begin"
    return text.split(OUR_STEPS)[0]


@pytest.fixture(scope="module")
def exchange(request):
    require_exchange()
    base = Path(tempfile.mkdtemp(prefix="rp-exchange-test-"))
    os.chmod(base, 0o755)  # the students must reach their homes and the exchange
    w = Workflow(base)
    suffix = str(os.getpid() % 100000)
    w.honest, w.hostile = f"rphonest{suffix}", f"rphostile{suffix}"
    users = [w.honest, w.hostile]
    with students_on_the_host(w, base, users, "exchange workflow"):
        _run_workflow(w, users)
        yield w


def _run_workflow(w, users):
    exchange = _exchange_args(w)
    w.exchange.mkdir()
    os.chmod(w.exchange, 0o777)  # as nbgrader's docs set up /srv/nbgrader/exchange
    w.course.mkdir()
    shutil.copy2(COURSE / "nbgrader_config.py", w.course / "nbgrader_config.py")
    shutil.copytree(COURSE / "source" / ASSIGNMENT, w.course / "source" / ASSIGNMENT)
    w.homes = {}
    for user in users:
        home = w.base / "home" / user
        home.parent.mkdir(exist_ok=True)
        os.chmod(home.parent, 0o755)
        make_user(user, home)
        w.homes[user] = home
        w.note(f"useradd {user} (home {home})")

    # the instructor releases the assignment
    w.run("instructor", ["nbgrader", "generate_assignment", ASSIGNMENT, "--force"], w.course)
    w.run("instructor", ["nbgrader", "release_assignment", ASSIGNMENT, *exchange], w.course)

    # each student fetches it, works on it in their home, and submits it
    source = read_notebook(w.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    handout = w.base / "handout"
    handout.mkdir()
    os.chmod(handout, 0o755)
    w.secrets = secrets = [
        str(w.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb"),
        str(w.course / "gradebook.db"),
        str(w.course / "nbgrader_config.py"),
        str(w.homes[w.honest] / ASSIGNMENT / f"{NOTEBOOK}.ipynb"),
    ]
    for user in users:
        home = w.homes[user]
        w.run(user, ["nbgrader", "fetch_assignment", ASSIGNMENT, "--course", COURSE_ID,
                     *exchange], home, user=user, home=home)
        fetched_path = home / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        fetched = read_notebook(fetched_path)
        w.quote_lists = [c for c in fetched.cells if "residual_pack" in c.metadata]
        if user == w.honest:
            work = filled_in(fetched, source)
            w.note(f"{user} writes the solution of every task")
        else:
            work = insert_after(answer(fetched, "task1_1_residual_stack", PATCH_CHECKS),
                                "task1_1_residual_stack",
                                READ_SECRETS.format(targets=secrets))
            w.note(f"{user} answers task 1.1 with `x * 2` and patches autograder.kernel.checks "
                   "(PATCH_CHECKS); a cell of its own reads the course's source notebook, "
                   "the gradebook, the config and the classmate's notebook, walks / for "
                   "notebooks with hidden tests or solutions and runs the solution it finds, "
                   "and tries the network (READ_SECRETS); task 1.2 left as released")
        draft = handout / f"{user}.ipynb"
        draft.write_bytes(as_bytes(work))
        os.chmod(draft, 0o644)
        w.run(user, ["cp", str(draft), str(fetched_path)], home, user=user, home=home)
        w.run(user, ["nbgrader", "submit", ASSIGNMENT, "--course", COURSE_ID, *exchange],
              home, user=user, home=home)

    # the instructor collects, autogrades, gives feedback, exports
    w.run("instructor", ["nbgrader", "collect", ASSIGNMENT, *exchange], w.course)
    w.autograde = w.run("instructor", ["nbgrader", "autograde", ASSIGNMENT], w.course)
    for line in w.autograde.stderr.splitlines():
        if "residual-pack" in line:
            w.note(line.split("] ", 1)[-1][:400])
    w.run("instructor", ["nbgrader", "generate_feedback", ASSIGNMENT], w.course)
    w.run("instructor", ["nbgrader", "release_feedback", ASSIGNMENT, *exchange], w.course)
    w.run("instructor", ["nbgrader", "export"], w.course)
    with open(w.course / "grades.csv", newline="") as f:
        w.grades = {row["student_id"]: row for row in csv.DictReader(f)}
    for student, row in sorted(w.grades.items()):
        w.note(f"grades.csv: {student}: score {row['score']} of {row['max_score']}")
    w.cells = scores(w.course / "gradebook.db", ASSIGNMENT)
    for student, cells in sorted(w.cells.items()):
        w.note(f"gradebook: {student}: " + ", ".join(
            f"{k}={v[0]:g}{' (needs manual grade)' if v[1] else ''}"
            for k, v in sorted(cells.items())))

    # the students fetch their feedback
    w.feedback = {}
    for user in users:
        home = w.homes[user]
        w.run(user, ["nbgrader", "fetch_feedback", ASSIGNMENT, "--course", COURSE_ID,
                     *exchange], home, user=user, home=home)
        pages = sorted((home / ASSIGNMENT / "feedback").rglob("*.html"))
        w.feedback[user] = pages
        w.note(f"{user} fetched " + ", ".join(str(p.relative_to(home)) for p in pages))
    text = html_text(w.feedback[w.hostile][0].read_text()) if w.feedback[w.hostile] else ""
    for line in text.splitlines():
        if line.startswith(("found:", "network:", str(w.base))):
            w.note(f"{w.hostile}'s feedback shows: {line.strip()}")


def test_the_instructor_sees_the_sandbox_in_nbgrader_autograde(exchange):
    log = exchange.autograde.stderr
    assert "residual-pack: student kernels run in the sandbox: sandbox: bubblewrap as a " \
        "fresh uid per kernel" in log
    assert "FALLING BACK" not in log
    assert log.count("residual-pack: student kernels run in the sandbox") == 1  # once per run


def test_scores_the_honest_student_in_full_and_the_hostile_one_nothing(exchange):
    honest, hostile = exchange.grades[exchange.honest], exchange.grades[exchange.hostile]
    assert float(honest["score"]) == FULL_MARKS
    assert float(honest["max_score"]) == FULL_MARKS + MANUAL
    assert float(hostile["score"]) == 0.0
    # its code reached into the grader: its score (nothing, here) is held back for review
    assert f"{exchange.hostile}/{NOTEBOOK}: autograded score (0) withheld for review" \
        in exchange.autograde.stderr
    assert f"residual-pack: {exchange.honest}/" not in exchange.autograde.stderr
    assert not any(manual for name, (_, manual) in exchange.cells[exchange.honest].items()
                   if name.startswith("task1_") and "test" in name)


def test_the_hostile_student_found_nothing_on_disk(exchange):
    pages = exchange.feedback[exchange.hostile]
    assert pages, "the hostile student got no feedback"
    text = html_text(pages[0].read_text())
    # every file it went for is missing from the kernel's view of the disk
    for target in exchange.secrets:
        assert f"{target} FileNotFoundError" in text
    # its walk of / found notebooks with solutions (and a gradebook) only among nbgrader's
    # own tests and docs, in the environment that the kernel sees read-only: nothing of
    # the course, the exchange or a student
    found = [ast.literal_eval(line.split(":", 1)[1].strip()) for line in text.splitlines()
             if line.startswith("found:")]
    assert len(found) == 1
    assert [p for p in found[0] if "/site-packages/nbgrader/" not in p] == []
    assert "network: [Errno 101] Network is unreachable" in text


def test_each_student_fetched_feedback_without_hidden_tests(exchange):
    source = read_notebook(exchange.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    release = read_notebook(exchange.course / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    hidden = [line for cell in source.cells if cell.cell_type == "code"
              for line in hidden_test_lines(cell.source)]
    assert hidden, "the assignment has no hidden tests to look for"
    for user in (exchange.honest, exchange.hostile):
        # what the student had anyway: the release and their own notebook
        handed_in = read_notebook(exchange.course / "submitted" / user / ASSIGNMENT /
                                  f"{NOTEBOOK}.ipynb")
        visible = "\n".join(c.source for c in [*release.cells, *handed_in.cells])
        pages = exchange.feedback[user]
        assert len(pages) == 1, f"{user}: {pages}"
        assert pages[0].stat().st_uid == _uid(user)  # fetched by the student, as the student
        assert leaked_lines(pages[0].read_text(), hidden, visible) == []


def test_the_release_carries_no_figures_of_the_model_answer(exchange):
    """The source lists the figures its cells quote (for the notebook guard); plain
    `nbgrader generate_assignment` with the course config leaves those lists out."""
    source = read_notebook(exchange.course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    assert [c for c in source.cells if "residual_pack" in c.metadata]
    assert exchange.quote_lists == []


def test_export_gives_the_grades_csv(exchange):
    assert set(exchange.grades) == {exchange.honest, exchange.hostile}
    assert all(row["assignment"] == ASSIGNMENT for row in exchange.grades.values())


def test_stock_nbgrader_gives_the_hostile_student_points_it_did_not_earn(exchange):
    """The control: the same submission, graded by nbgrader's stock steps, forges its way
    to points (so the attacks are real, and the course config is what stops them)."""
    w = exchange
    control = w.base / "control"
    control.mkdir()
    (control / "nbgrader_config.py").write_text(_stock_config(w.course))
    for folder in ("source", "exercises"):
        shutil.copytree(w.course / folder, control / folder)
    shutil.copy2(w.course / "gradebook.db", control / "gradebook.db")
    shutil.copytree(w.course / "submitted" / w.hostile, control / "submitted" / w.hostile)
    done = w.run("instructor (stock nbgrader, the control)",
                 ["nbgrader", "autograde", ASSIGNMENT, "--student", w.hostile, "--force"],
                 control)
    assert "residual-pack" not in done.stderr
    cells = scores(control / "gradebook.db", ASSIGNMENT)[w.hostile]
    auto = sum(score for name, (score, _) in cells.items() if "test" in name)
    w.note(f"stock nbgrader: {w.hostile}: autograded {auto:g} of {FULL_MARKS:g}")
    graded = read_notebook(control / "autograded" / w.hostile / ASSIGNMENT /
                           f"{NOTEBOOK}.ipynb")
    found = [line for cell in graded.cells for out in cell.get("outputs", [])
             for line in out.get("text", "").splitlines() if line.startswith("found:")]
    w.note(f"stock nbgrader: {w.hostile}'s kernel printed: {found[0][:300] if found else ''}")
    # task 1.1's four points, for an answer that is wrong (x * 2); task 1.2 stays
    # unanswered (the stub raises before any check could be forged)
    assert cells["task1_1_test_output"][0] == cells["task1_1_test_gradient"][0] == 2.0
    assert auto == 4.0


def _uid(user):
    import pwd

    return pwd.getpwnam(user).pw_uid



def test_nbgrader_autograde_as_a_non_root_instructor_uses_bubblewrap(exchange):
    """An instructor who is not root (here: a student's unix user grading a copy of the
    course) on a machine that allows unprivileged user namespaces (ours do) gets
    bubblewrap's sandbox in a user namespace, and nbgrader's log says so once, with what
    is lost without root; the scores are still the grader's."""
    w = exchange
    user, home = w.honest, w.homes[w.honest]
    course = home / "own-course"
    course.mkdir()
    shutil.copy2(w.course / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(w.course / "source", course / "source")
    shutil.copytree(w.course / "submitted" / w.honest, course / "submitted" / w.honest)
    subprocess.run(["chown", "-R", f"{user}:", str(course)], check=True)
    w.run(f"{user} as an instructor", ["nbgrader", "generate_assignment", ASSIGNMENT],
          course, user=user, home=home)
    done = w.run(f"{user} as an instructor", ["nbgrader", "autograde", ASSIGNMENT], course,
                 user=user, home=home)
    said = [line.split("] ", 1)[-1] for line in done.stderr.splitlines()
            if "residual-pack: student kernels run in" in line or "FALLING BACK" in line]
    for line in said:
        w.note(line)
    assert len(said) == 1, done.stderr[-3000:]
    assert "sandbox: bubblewrap in an unprivileged user namespace" in said[0]
    assert "FALLING BACK" not in done.stderr
    cells = scores(course / "gradebook.db", ASSIGNMENT)[w.honest]
    assert sum(score for name, (score, _) in cells.items() if "test" in name) == FULL_MARKS


def _formgrader_lab(course):
    """JupyterLab on the whole course (formgrader serves only a course inside the
    server's root; scripts/lab roots it at exercises/, for students), as scripts/lab
    starts it otherwise: loopback, offline, allowed to run as root."""
    return [str(BIN / "jupyter-lab"), "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.root_dir={course}", "--LabApp.extension_manager=readonly",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            *(["--allow-root"] if os.geteuid() == 0 else [])]


@pytest.mark.browser
def test_formgrader_manual_grade_shows_in_the_export(exchange):
    """The written answer is graded by hand in formgrader, in JupyterLab on the course,
    in headless Chromium: the gradebook's list of submissions, the honest student's
    submission, a manual score typed into its written answer; `nbgrader export` then
    counts it."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "browser"))
    import lab_helpers as lh

    missing = lh.missing_requirements()
    if missing:
        if os.environ.get("BROWSER_TEST_REQUIRED") == "1":
            pytest.fail(f"BROWSER_TEST_REQUIRED=1 but {missing}", pytrace=False)
        pytest.skip(f"browser test skipped: {missing}")
    from nbgrader.api import Gradebook
    from playwright.sync_api import sync_playwright

    w = exchange
    gradebook = f"sqlite:///{w.course / 'gradebook.db'}"
    with Gradebook(gradebook) as gb:
        submission = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, w.honest).id
    shots = Path(os.environ.get("ARTIFACTS_DIR") or Path(__file__).parents[1] / "browser" /
                 "artifacts")
    shots.mkdir(parents=True, exist_ok=True)
    env = lh.jupyter_env(w.base / "formgrader-jupyter")
    server = lh.LabServer(w.course, env, w.base / "formgrader.log",
                          command=_formgrader_lab(w.course))
    saved = None
    try:
        server.start()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(lh.CHROMIUM), headless=True,
                                         args=lh.CHROMIUM_FLAGS)
            try:
                # every request carries the token: formgrader's pages call its API
                page = browser.new_page(
                    viewport={"width": 1400, "height": 1000},
                    extra_http_headers={"Authorization": f"token {server.token}"})
                page.set_default_timeout(120_000)
                page.goto(f"{server.url}/formgrader/gradebook/{ASSIGNMENT}/{NOTEBOOK}")
                link = page.locator(f'a[href$="/formgrader/submissions/{submission}"]').first
                link.wait_for()
                page.screenshot(path=str(shots / "formgrader-submissions.png"))
                link.click()
                score = page.locator("input.score#task1_3_answer")
                score.wait_for()
                page.wait_for_load_state("networkidle")  # formgrader has its grades
                score.fill(str(MANUAL))
                score.press("Tab")  # formgrader saves on change
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    with Gradebook(gradebook) as gb:
                        grade = gb.find_grade("task1_3_answer", NOTEBOOK, ASSIGNMENT, w.honest)
                        saved = grade.manual_score
                    if saved is not None:
                        break
                    time.sleep(0.5)
                page.screenshot(path=str(shots / "formgrader-manual-grade.png"))
            finally:
                browser.close()
    finally:
        server.stop()
    w.note(f"formgrader (JupyterLab, headless Chromium): {w.honest}'s task1_3_answer "
           f"given {saved} by hand")
    assert saved == MANUAL
    w.run("instructor", ["nbgrader", "export"], w.course)
    with open(w.course / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    w.note(f"grades.csv after the manual grade: {w.honest}: score "
           f"{rows[w.honest]['score']} of {rows[w.honest]['max_score']}")
    assert float(rows[w.honest]["score"]) == FULL_MARKS + MANUAL
