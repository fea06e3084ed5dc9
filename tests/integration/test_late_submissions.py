"""Late hand-ins in the batch path (issue #28, trap 9): a student folder that holds
nbgrader's timestamp.txt is handed to nbgrader with the notebook, so nbgrader's own due
date and late penalty (AssignLatePenalties, with the course config's LateSubmissionPlugin)
apply under `residual-pack grade` as under plain `nbgrader autograde`: one class, graded
both ways, with an on-time, a late and an unstamped student.

Issue 40, item 5: the course's nbgrader_config.py turns the penalty on by itself (nbgrader's
"zero"), so these tests grade with the course's config as it is; and a batch run that has
no due date while submissions carry timestamp.txt says so loudly, or takes the due date
from the course's own gradebook."""

import csv
import datetime
import os
import shutil
import subprocess

import pytest
from clusterparts import ASSIGNMENT, BIN, COURSE, cli, make_class

from autograder.grading.course import CONFIG_FILE, EXERCISES, SOURCE

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (COURSE / EXERCISES / ASSIGNMENT).is_dir(),
                                 reason=f"no {ASSIGNMENT} release")]

DUE = "2026-12-01 17:00:00 UTC"
STAMPS = {"ann": "2026-12-01 16:59:00.000000 UTC",  # a minute early
          "bob": "2026-12-01 18:30:00.000000 UTC"}  # 90 minutes late; cy has no stamp


def course_copy(folder):
    """The course's config as it is (its late penalty: 'zero', a late notebook scores
    nothing) and this assignment's source."""
    folder.mkdir()
    shutil.copy(COURSE / CONFIG_FILE, folder / CONFIG_FILE)
    shutil.copytree(COURSE / SOURCE / ASSIGNMENT, folder / SOURCE / ASSIGNMENT)
    return folder


def test_the_course_config_turns_nbgraders_late_penalty_on():
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader(CONFIG_FILE, path=str(COURSE)).load_config()
    assert config.LateSubmissionPlugin.penalty_method == "zero"


def penalties(db_url):
    """{student: (seconds late, late penalty, score)} in a gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        return {s.student.id: (s.total_seconds_late, s.late_submission_penalty, s.score)
                for s in gb.assignment_submissions(ASSIGNMENT)}


def test_a_late_hand_in_gets_nbgraders_penalty_in_the_batch_path(tmp_path):
    from isolation import require_isolation

    require_isolation()
    course = course_copy(tmp_path / "course")
    submissions, out = tmp_path / "class", tmp_path / "out"
    make_class(submissions, {"ann": "solution", "bob": "solution", "cy": "solution"})
    for student, stamp in STAMPS.items():  # where nbgrader's collect leaves it
        (submissions / student / "timestamp.txt").write_text(stamp)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    run = subprocess.run(
        [*cli(), "grade", "--course", str(course), ASSIGNMENT, str(submissions),
         "--out", str(out), "-j", "1", "--duedate", DUE],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "due date of 01_residual_stack: 2026-12-01 17:00:00 UTC" in run.stdout

    batch = penalties(f"sqlite:///{out / 'gradebook.db'}")
    assert batch == {"ann": (0, 0.0, 6.0), "bob": (5400.0, 6.0, 6.0), "cy": (0, 0.0, 6.0)}
    rows = {r["student_id"]: r for r in csv.DictReader(open(out / "grades.csv"))}
    assert {s: (r["timestamp"], r["raw_score"], r["late_submission_penalty"], r["score"])
            for s, r in rows.items()} == {
        "ann": ("2026-12-01 16:59:00", "6.0", "0.0", "6.0"),
        "bob": ("2026-12-01 18:30:00", "6.0", "6.0", "0.0"),
        "cy": ("", "6.0", "0.0", "6.0"),  # no timestamp.txt: never late
    }
    assert all(r["duedate"] == "2026-12-01 17:00:00" for r in rows.values())
    report = (out / "report.txt").read_text()
    assert ("bob: handed in at 2026-12-01 18:30:00 UTC, 1 h 30 min after the due date "
            "(2026-12-01 17:00:00 UTC): late penalty 6 point(s)") in report, report
    assert "ann: handed in" not in report and "timestamp.txt" not in report

    # the LMS files, by nbgrader's own export command with our plugins, from that gradebook
    exports = {}
    canvas_id = f'--CanvasExport.assignment_ids={{"{ASSIGNMENT}": 4711}}'
    for name, options in (("CanvasExport", ["--CanvasExport.section=Lecture A", canvas_id]),
                          ("MoodleExport", [])):  # by username, the default
        done = subprocess.run(
            [str(BIN / "nbgrader"), "export",
             f"--exporter=autograder.grading.lms_export.{name}", "--to", f"{name}.csv",
             *options], cwd=out, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        exports[name] = list(csv.reader(open(out / f"{name}.csv", newline="")))
        assert "Traceback" not in done.stderr, done.stderr
    assert exports["CanvasExport"] == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", f"{ASSIGNMENT} (4711)"],
        ["Points Possible", "", "", "", "", "8"],  # 6 autograded, 2 by hand
        ["ann", "", "", "ann", "Lecture A", "6"],
        ["bob", "", "", "bob", "Lecture A", "0"],  # late: nbgrader's penalty 'zero'
        ["cy", "", "", "cy", "Lecture A", "6"],
    ]
    assert exports["MoodleExport"] == [["Username", ASSIGNMENT], ["ann", "6"], ["bob", "0"],
                                       ["cy", "6"]]

    # the same class under plain nbgrader: the same penalties
    plain = tmp_path / "plain"
    shutil.copytree(course, plain)
    for student, stamp in STAMPS.items():
        folder = plain / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        shutil.copy(submissions / student / f"{ASSIGNMENT}.ipynb", folder)
        (folder / "timestamp.txt").write_text(stamp)
    folder = plain / "submitted" / "cy" / ASSIGNMENT
    folder.mkdir(parents=True)
    shutil.copy(submissions / "cy" / f"{ASSIGNMENT}.ipynb", folder)
    nbgrader = str(BIN / "nbgrader")
    for command in (["generate_assignment", ASSIGNMENT, "--force"],
                    ["db", "assignment", "add", ASSIGNMENT, f"--duedate={DUE}"],
                    ["autograde", ASSIGNMENT]):
        done = subprocess.run([nbgrader, *command], cwd=plain, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, (command, done.stdout + done.stderr)
    assert penalties(f"sqlite:///{plain / 'gradebook.db'}") == batch


def test_on_dask_the_worker_judges_lateness_by_the_coordinators_due_date(tmp_path,
                                                                        monkeypatch):
    """On a cluster the worker grades in a scratch gradebook of its own: the task carries
    the hand-in time, the due date and the student's extension there, so nbgrader's
    penalty comes out as in the course's gradebook; an extension granted there stays."""
    from clusterparts import require_dask
    from isolation import require_isolation

    require_isolation()
    require_dask()
    course = course_copy(tmp_path / "course")
    submissions, out = tmp_path / "class", tmp_path / "out"
    make_class(submissions, {"ann": "solution", "bob": "solution", "cy": "solution"})
    for student, stamp in STAMPS.items():
        (submissions / student / "timestamp.txt").write_text(stamp)
    (submissions / "cy" / "timestamp.txt").write_text("2026-12-01 18:30:00 UTC")
    # cy has two hours more: an extension granted in the gradebook before grading
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")  # alembic
    from autograder.grading.course import WorkCourse

    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    WorkCourse(course, tmp_path / "setup", [ASSIGNMENT], db_url=shared) \
        .generate_assignment(ASSIGNMENT)  # the assignment in the gradebook, as nbgrader's
    with Gradebook(shared) as gb:
        gb.add_student("cy")
        gb.update_or_create_submission(ASSIGNMENT, "cy", extension=datetime.timedelta(hours=2))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
               RESIDUAL_PACK_DB_URL=shared)
    run = subprocess.run(
        [*cli(), "grade", "--course", str(course), ASSIGNMENT, str(submissions),
         "--out", str(out), "-j", "1", "--duedate", DUE, "--cluster", "local"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert penalties(shared) == {
        "ann": (0, 0.0, 6.0), "bob": (5400.0, 6.0, 6.0), "cy": (0, 0.0, 6.0)}, run.stdout


def test_without_a_due_date_the_batch_path_says_so_loudly_or_reads_the_courses(tmp_path):
    """No --duedate and none in the run's gradebook, while submissions carry nbgrader's
    timestamp.txt: no one can be late, and the output and report.txt say so in capitals.
    With the due date in the course's own gradebook (where `nbgrader db assignment add
    --duedate` and formgrader put it), the run takes it from there, read only."""
    from isolation import require_isolation
    from nbgrader.api import Gradebook

    require_isolation()
    course = course_copy(tmp_path / "course")
    submissions = tmp_path / "class"
    make_class(submissions, {"ann": "solution", "bob": "solution", "cy": "solution"})
    for student, stamp in STAMPS.items():
        (submissions / student / "timestamp.txt").write_text(stamp)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("RESIDUAL_PACK_DB_URL", None)

    def grade(out):
        return subprocess.run(
            [*cli(), "grade", "--course", str(course), ASSIGNMENT, str(submissions),
             "--out", str(out), "-j", "1"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)

    run = grade(tmp_path / "undated")
    assert run.returncode == 0, run.stdout + run.stderr
    warning = (f"WARNING: NO DUE DATE for {ASSIGNMENT}, so NO LATE PENALTY: 2 of 3 "
               f"submission(s) carry nbgrader's timestamp.txt (ann, bob), and none is "
               f"judged late.")
    assert warning in run.stdout, run.stdout
    assert warning in (tmp_path / "undated" / "report.txt").read_text()
    assert penalties(f"sqlite:///{tmp_path / 'undated' / 'gradebook.db'}") == {
        "ann": (0, 0.0, 6.0), "bob": (0, 0.0, 6.0), "cy": (0, 0.0, 6.0)}

    # the due date in the course's own gradebook, as nbgrader's command sets it there
    done = subprocess.run([str(BIN / "nbgrader"), "db", "assignment", "add", ASSIGNMENT,
                           f"--duedate={DUE}"], cwd=course, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    before = (course / "gradebook.db").read_bytes()
    run = grade(tmp_path / "dated")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (f"due date of {ASSIGNMENT}: 2026-12-01 17:00:00 UTC (from the course's gradebook "
            f"sqlite:///{course / 'gradebook.db'})") in run.stdout, run.stdout
    assert "NO DUE DATE" not in run.stdout
    assert penalties(f"sqlite:///{tmp_path / 'dated' / 'gradebook.db'}") == {
        "ann": (0, 0.0, 6.0), "bob": (5400.0, 6.0, 6.0), "cy": (0, 0.0, 6.0)}
    assert (course / "gradebook.db").read_bytes() == before  # read, not written
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_assignment(ASSIGNMENT).num_submissions == 0
