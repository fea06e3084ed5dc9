"""Hostile and broken submissions, graded for real, as one class.

The class (`tests/hostile`: 57 bad submissions and 3 honest ones, made from the released
notebook) is graded by `residual-pack grade` with parallel workers and sandboxed kernels
(HOSTILE_CASES=name,name grades only those cases and the honest ones, for trying a case;
the kill-and-resume test needs the whole class). The first run is killed (SIGKILL to its
process group) once some students are done; the second run resumes it. Then, for every
submission: the class finished, it scored no more than an honest submission with the same
answers, the report gives the reason, and nobody else was affected. A control grades some
of the attacks with nbgrader's own kernels, to show that they are real: there they earn
points.
"""

import copy
import csv
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from isolation import cli, processes_of, require_isolation

from autograder.authoring.madeup import filled_in
from autograder.grading.course import (
    EXERCISES,
    SOURCE,
    WorkCourse,
    private_jupyter_dirs,
    read_notebook,
)
from autograder.grading.feedback import html_text
from autograder.grading.intake import take_in
from hostile import ASSIGNMENT, FULL, Context, build_class, case_names

COURSE = Path(__file__).resolve().parents[2]
HAVE_ASSIGNMENT = (COURSE / EXERCISES / ASSIGNMENT).is_dir()
JOBS = 2
CELL_TIMEOUT = 8  # seconds; an honest cell of the notebook takes under 3 on a loaded machine
KILL_AFTER = 8  # students done when the first run is killed

needs_assignment = pytest.mark.skipif(not HAVE_ASSIGNMENT, reason=f"no {ASSIGNMENT} release")
STUDENTS = case_names(COURSE) if HAVE_ASSIGNMENT else []


def _journal_entries(out):
    path = out / ".grading" / "journal.jsonl"
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except OSError:
        return 0


class Run:
    pass


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    require_isolation()
    return grade_the_hostile_class(tmp_path_factory)


def grade_the_hostile_class(tmp_path_factory):
    """Grade the hostile class twice (the first run killed after KILL_AFTER students, the
    second resuming); a `Run`."""
    base = tmp_path_factory.mktemp("hostile")
    submissions, out = base / "submissions", base / "graded"
    cases = build_class(submissions, Context(course=COURSE, out=out, submissions=submissions))
    originals = {p: p.read_bytes() for p in submissions.rglob("*.ipynb") if not p.is_symlink()}
    # outside the default range (64000-64999, where every other grading run on the machine
    # takes its uids from the bottom) and the every-assignment classes' (63000-63949): the
    # count of leftovers below would take another run's kernels for this one's
    uid_base = 62000 + 50 * (os.getpid() % 19)
    env = dict(os.environ, SANDBOX_UIDS=f"{uid_base}-{uid_base + 49}")  # bubblewrap's
    command = [*cli(), "grade", ASSIGNMENT, str(submissions), "--out", str(out),
               "-j", str(JOBS), "--cell-timeout", str(CELL_TIMEOUT),
               "--notebook-timeout", "150"]
    run = Run()
    run.cases = {c.student: c for c in cases}
    run.start = time.perf_counter()
    with open(base / "first.log", "w") as log:
        first = subprocess.Popen(command, cwd=COURSE, stdout=log, stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True)
        deadline = time.monotonic() + 400
        while first.poll() is None and time.monotonic() < deadline:
            if _journal_entries(out) >= KILL_AFTER:
                os.killpg(first.pid, signal.SIGKILL)
                break
            time.sleep(0.2)
        first.wait(60)
    run.killed_with = _journal_entries(out)
    run.first_log = (base / "first.log").read_text()
    # whatever the killed run had started in sandboxes goes away with it
    uids = set(range(uid_base, uid_base + 50))
    left = processes_of(uids)
    for _ in range(50):
        if not left:
            break
        time.sleep(0.2)
        left = processes_of(uids)
    run.leftovers = left
    for pid in left:  # a failure, reported below; not left on the machine
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    second = subprocess.run(command, cwd=COURSE, capture_output=True, text=True, env=env,
                            timeout=900)
    run.seconds = time.perf_counter() - run.start
    run.second = second
    run.out = out
    run.submissions = submissions
    run.originals = originals
    run.report = json.loads((out / "report.json").read_text()) if second.returncode == 0 \
        else {"students": []}
    run.students = {s["student"]: s for s in run.report["students"]}
    print(f"\nhostile class: {len(cases)} submissions, killed after {run.killed_with}, "
          f"both runs {run.seconds:.0f} s; load {os.getloadavg()[0]:.1f}")
    print(second.stdout[-6000:])
    return run


def _said(entry):
    withheld = ["autograded score withheld for review"] if entry.get("withheld") else []
    return "\n".join([entry.get("reason", ""), *entry.get("problems", []), *withheld,
                      *entry.get("withheld", []), *entry.get("notes", []),
                      *entry.get("flags", [])])


@needs_assignment
@pytest.mark.slow
def test_the_class_finishes_after_a_kill_and_a_resume(hostile_run):
    run = hostile_run
    assert run.second.returncode == 0, run.second.stdout[-3000:] + run.second.stderr[-3000:]
    assert 0 < run.killed_with < len(run.cases), (
        f"the first run was not killed part way ({run.killed_with} done)\n{run.first_log}")
    assert not run.leftovers, f"sandbox processes outlived the killed run: {run.leftovers}"
    resumed = (f"graded before in this folder (same assignment, sources, limits and "
               f"gradebook): {run.killed_with} student(s), not graded again")
    assert resumed in run.second.stdout, run.second.stdout[:2000]
    # nobody graded twice: one journal line per student, the ones done before the kill kept
    lines = (run.out / ".grading" / "journal.jsonl").read_text().splitlines()[1:]
    graded = [json.loads(line)["student"] for line in lines]  # every line whole
    ids = sorted(c.report_as or c.student for c in run.cases.values())
    assert sorted(graded) == ids, "a student was graded twice, or not at all"
    assert sorted(run.students) == ids
    # the gradebook survived the kill and holds what the report says
    db = sqlite3.connect(run.out / "gradebook.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with open(run.out / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == ids
    for student, entry in run.students.items():
        assert float(rows[student]["score"]) == pytest.approx(entry["autograded_score"]), student
    assert (run.out / "report.txt").is_file() and (run.out / "report.csv").is_file()


@needs_assignment
@pytest.mark.slow
@pytest.mark.parametrize("student", STUDENTS)
def test_submission(hostile_run, student):
    case = hostile_run.cases[student]
    entry = hostile_run.students.get(case.report_as or student)
    assert entry is not None, f"{student} is missing from the report"
    said = _said(entry)
    assert entry["graded"] == case.graded, f"{case.what}: {said}"
    got = entry["autograded_score"]
    assert got <= case.max_score, f"{case.what}: scored {got} > {case.max_score}\n{said}"
    if case.score is not None:
        assert got == case.score, f"{case.what}: scored {got}, want {case.score}\n{said}"
    for words in case.reason:
        assert words in said, f"{case.what}: the report does not say {words!r}:\n{said}"
    assert bool(entry.get("withheld")) == case.withheld, (
        f"{case.what}: {'not ' if case.withheld else ''}held back for review\n{said}")
    # held back or not, what it would have scored is no more than its honest content
    would = entry.get("withheld_score", 0)
    assert would <= case.max_score, f"{case.what}: would score {would} > {case.max_score}"
    if case.graded:
        assert entry["runs"], "graded without running the notebook"
        assert entry["feedback"], "no feedback page"
    if case.honest:
        assert not entry["problems"] and not entry["notes"] and not entry["flags"], said


@needs_assignment
@pytest.mark.slow
def test_no_student_reached_what_it_must_not(hostile_run):
    run = hostile_run
    # the victim's files, as handed in and in the work course, are untouched
    for path, data in run.originals.items():
        assert path.read_bytes() == data, f"{path} was changed"
    assert run.students["honest-full"]["autograded_score"] == FULL
    db = sqlite3.connect(run.out / "gradebook.db")
    top = db.execute("SELECT MAX(auto_score) FROM grade").fetchone()[0]
    assert top <= 2, "a score in the gradebook is above any cell's points"
    secret_places = (str(COURSE / SOURCE), str(COURSE / "solutions"), str(run.out),
                     str(run.submissions))
    printed = _printed(run.out, "read-hidden-tests")
    found = [line for line in printed.splitlines() if line.startswith("found:")]
    assert found, printed[:2000]
    assert not any(place in found[0] for place in secret_places), found[0][:2000]
    assert "network: reachable" not in printed
    printed = _printed(run.out, "write-gradebook")
    assert "gradebook written" not in printed and "overwrote" not in printed, printed


@needs_assignment
@pytest.mark.slow
def test_the_grading_process_is_safe_from_the_kernel(hostile_run):
    run = hostile_run
    # a 70 MiB message never reached the graded notebook (the client refused it)
    graded = run.out / "autograded" / "big-message" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert graded.stat().st_size < 10 << 20, graded.stat().st_size
    # the sockets' folder is a small tmpfs: 300 MiB did not land on the machine's disk
    printed = _printed(run.out, "socket-filler")
    wrote = [line for line in printed.splitlines() if line.startswith("socket folder: wrote")]
    assert wrote and int(wrote[0].split()[3]) <= 1, printed[-2000:]
    # student text in the report is escaped: no made-up line, and the report exists
    text = (run.out / "report.txt").read_text(encoding="utf-8")
    assert not any(line.startswith("honest-full: not graded") for line in text.splitlines())
    assert "\\x0a" in text  # the newline of the grade id, shown as an escape
    assert "\\ud800" in text


LIMIT = 10 << 20  # 8 MiB of output kept per notebook, and the notebook's own cells


def _graded_and_page(run, student):
    if student not in run.cases:
        pytest.skip(f"{student} is not in this class (HOSTILE_CASES)")
    graded = run.out / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    [page] = (run.out / "feedback" / student).rglob("*.html")
    return graded, page


@needs_assignment
@pytest.mark.slow
def test_display_updates_count_as_output(hostile_run):
    """The 8 MiB of output kept per notebook holds for display updates, which nbclient
    writes into every earlier output with their display id (40 MiB asked for)."""
    graded, page = _graded_and_page(hostile_run, "display-update-flood")
    assert graded.stat().st_size < LIMIT, graded.stat().st_size
    assert page.stat().st_size < LIMIT, page.stat().st_size
    nb = read_notebook(graded)
    updated = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if o.get("data", {}).get("text/plain", "").startswith("uuu")]
    assert not updated, f"{len(updated)} outputs took the 1 MiB update past the limit"


@needs_assignment
@pytest.mark.slow
def test_widget_state_is_not_kept(hostile_run):
    """Widget state (30 MiB sent) never reaches the notebook's metadata: the grader is not
    a widget front end."""
    graded, page = _graded_and_page(hostile_run, "widget-state-flood")
    assert graded.stat().st_size < LIMIT, graded.stat().st_size
    assert page.stat().st_size < LIMIT, page.stat().st_size
    assert "widgets" not in read_notebook(graded).metadata


@needs_assignment
@pytest.mark.slow
def test_the_feedback_page_holds_no_script_of_the_students(hostile_run):
    """The page made from `script-outputs` (tests/browser/test_pages_browser.py opens one
    in Chromium): no script element, event handler or javascript: URL that the student
    wrote; the student's code is still shown, as text."""
    import re

    _, page = _graded_and_page(hostile_run, "script-outputs")
    html = page.read_text(encoding="utf-8")
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S | re.I)
    assert not [s for s in scripts if "pwned" in s], "a script of the student's is on the page"
    tags = re.findall(r"<[a-zA-Z][^>]*>", html)
    assert not [t for t in tags if re.search(r"\son[a-z]+\s*=", t, re.I)], "an event handler"
    assert not [t for t in tags if "javascript:" in t.lower()], "a javascript: URL"
    assert not [t for t in tags if t.lower().startswith(("<iframe", "<svg"))]
    assert "window.pwned" in html_text(html)  # the code cell, shown as code
    assert "A note of mine." in html_text(html)  # the markdown cell, shown


@needs_assignment
@pytest.mark.slow
def test_the_hidden_tests_text_is_not_in_the_kernel_while_they_run(hostile_run):
    """The tests run in the grader: `print-hidden` prints every text of a test cell that
    `linecache` holds while a test runs, and `parent-request` the request the kernel is
    running; neither finds a check, visible or hidden, in its graded notebook or its
    feedback page: the kernel was sent a socket's path, not the cell."""
    for student in ("print-hidden", "parent-request"):
        [graded] = (hostile_run.out / "autograded" / student).rglob("*.ipynb")
        printed = "".join("".join(o.get("text", "")) for c in read_notebook(graded).cells
                          if c.cell_type == "code" for o in c.get("outputs", []))
        assert "check_value" not in printed and "Value(2.5)" not in printed, student
        [page] = (hostile_run.out / "feedback" / student).rglob("*.html")
        assert "Value(2.5)" not in page.read_text(encoding="utf-8"), student
    assert "PARENT: #%residual-pack graded test" in printed  # the attack ran, and saw this


@needs_assignment
@pytest.mark.slow
def test_a_value_made_by_hand_is_refused_with_the_reason(hostile_run):
    """`hand-made-value` returns task 1.1's numbers in a node made by hand: its test cells
    say why the Value was refused."""
    [graded] = (hostile_run.out / "autograded" / "hand-made-value").rglob("*.ipynb")
    errors = [o for c in read_notebook(graded).cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert any("made by hand" in o.get("evalue", "") for o in errors), errors


@needs_assignment
@pytest.mark.slow
def test_the_kernel_stays_in_its_walls(hostile_run):
    """bubblewrap's walls: a memfd is bounded (the file size limit stops the writes; the
    memory cgroup counts what it holds), and no user namespace or keyring entry of the
    kernel's own (seccomp, --disable-userns)."""
    printed = _printed(hostile_run.out, "leave-the-walls")
    said = dict(line.split(": ", 1) for line in printed.splitlines() if ": " in line)
    assert said.get("memfd") in ("refused EFBIG", "refused EPERM"), printed
    assert said.get("namespace", "").startswith("refused"), printed
    assert said.get("keyring", "").startswith("refused"), printed


def _printed(out, student):
    """What the student's cells printed, a cell's stream outputs joined as they came: a
    kernel may send one printed line in several stream messages (seen once under load:
    "memfd: refused" and " EFBIG"), so they are not joined with line breaks."""
    nb = read_notebook(out / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    return "\n".join("".join(o.get("text", "") for o in c.get("outputs", [])
                             if o.get("output_type") == "stream")
                     for c in nb.cells if c.cell_type == "code")


@needs_assignment
@pytest.mark.slow
def test_the_run_says_how_it_isolated(hostile_run):
    assert "isolation: sandbox: bubblewrap as a fresh uid per kernel" in \
        hostile_run.second.stdout, hostile_run.second.stdout[-3000:]


# ---------------------------------------------------------------- the attacks are real

CONTROL = ("patched-checks", "patched-builtins", "patched-mid-test", "ipython-hooks",
           "fake-success")


@needs_assignment
@pytest.mark.slow
def test_the_attacks_earn_points_in_nbgraders_own_kernel(tmp_path):
    """Control: graded by nbgrader's own Execute (a plain IPython kernel), the attacks that
    the sandboxed run scored 0 earn points, so that run defended something real."""
    from autograder.grading.student import Grader

    folder = tmp_path / "submissions"
    cases = build_class(folder, Context(course=COURSE, out=tmp_path / "o", submissions=folder))
    chosen = [c for c in cases if c.student in CONTROL]
    with private_jupyter_dirs(tmp_path / "home"):
        work = WorkCourse(COURSE, tmp_path / "course", [ASSIGNMENT])
        grader = Grader(work, ASSIGNMENT)  # no sandbox: nbgrader's kernel
        for case in chosen:
            data = case.files[f"{ASSIGNMENT}.ipynb"]
            grader.submit(case.student, {ASSIGNMENT: nbformat.reads(data.decode(), 4)})
        results = {c.student: grader.grade(c.student, feedback=False) for c in chosen}
    # nbgrader's own grade (before our grader held flagged scores back for review)
    scores = {s: max(r.score()[0], r.withheld_score) for s, r in results.items()}
    print(scores)
    assert all(score > 0 for score in scores.values()), scores


# ---------------------------------------------------------------- fast: the pieces


def _release_and_solution():
    release = read_notebook(COURSE / EXERCISES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    source = read_notebook(COURSE / SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    return release, filled_in(release, source)


@needs_assignment
def test_intake_leaves_an_honest_notebook_as_it_is():
    release, solution = _release_and_solution()
    for nb in (release, solution):
        got = take_in(nbformat.writes(nb).encode(), "nb.ipynb", release, ASSIGNMENT)
        assert not got.problem and not got.notes and not got.flags
        assert [c.source for c in got.notebook.cells] == [c.source for c in nb.cells]
        assert [c.metadata for c in got.notebook.cells] == [c.metadata for c in nb.cells]


@needs_assignment
def test_intake_puts_cells_back_in_order_and_restores_metadata():
    release, solution = _release_and_solution()
    nb = copy.deepcopy(solution)
    answer = next(i for i, c in enumerate(nb.cells)
                  if c.metadata.get("nbgrader", {}).get("grade_id") == "task1_1_residual_stack")
    nb.cells.append(nb.cells.pop(answer))  # the answer at the very end
    test = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == "task1_1_test_output")
    test.metadata["nbgrader"]["points"] = 99
    got = take_in(nbformat.writes(nb).encode(), "nb.ipynb", release, ASSIGNMENT)

    def graded(notebook):
        return [(c.metadata["nbgrader"]["grade_id"], c.source, c.metadata)
                for c in notebook.cells if "nbgrader" in c.metadata]

    assert graded(got.notebook) == graded(solution)  # order, answers and metadata
    assert len(got.notebook.cells) == len(solution.cells)
    assert any("out of order" in n for n in got.notes), got.notes
    assert any("points: 99, the release's 2" in n for n in got.notes), got.notes


def _settled(outputs, status, ename=""):
    """A graded test cell after SandboxedExecute settled it, scored by nbgrader."""
    from nbgrader.utils import determine_grade

    from autograder.grading.execute import SandboxedExecute
    from autograder.grading.notebook_record import CellRun

    cell = nbformat.v4.new_code_cell("check()")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                 "points": 2, "grade_id": "t", "schema_version": 3}
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    record = CellRun(0, "t", "test", status, ename, "expected 1, got 2")
    SandboxedExecute._settle_test_cell(cell, record)
    return determine_grade(cell)[0]


def test_what_a_test_cell_prints_never_counts():
    """The score of a test cell is the kernel runner's verdict: printed success lines, a
    result nbgrader would read as partial credit, nothing printed changes it."""
    success = {"output_type": "stream", "name": "stdout",
               "text": "Task 1.1: every check in this cell passed.\n"}
    partial = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
               "data": {"text/plain": "2"}}
    error = {"output_type": "error", "ename": "CheckFailed", "evalue": "expected 1, got 2",
             "traceback": []}
    assert _settled([success, partial], "error", "CheckFailed") == 0
    assert _settled([partial, success, error], "error", "CheckFailed") == 0
    assert _settled([success], "ok") == 2
    assert _settled([partial], "ok") == 2  # a result is dropped, not read as a score
    assert _settled([{"output_type": "stream", "name": "stdout", "text": "FAILED\n"}],
                    "ok") == 2
