"""Grading on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on
127.0.0.1, one of them killed (SIGKILL, with everything it started) while it grades a
student. Every student must end up graded exactly once in the gradebook, with the score
their notebook earns, the killed worker's student graded by the other worker, and nothing
lost: the journal, grades.csv and the report list each student once.
"""

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from clusterparts import (
    ASSIGNMENT,
    BIN,
    COURSE,
    DaskCluster,
    children,
    cli,
    cmdline,
    kill_group,
    make_class,
    require_dask,
    wait_for,
)

from autograder.grading.course import EXERCISES
from autograder.sandbox import bubblewrap

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (COURSE / EXERCISES / ASSIGNMENT).is_dir(),
                                 reason=f"no {ASSIGNMENT} release")]

CLASS = {f"s{i:02d}": ("solution" if i % 3 != 1 else "stub") for i in range(9)}
CLASS["s09"] = "empty"


def _grading_on(cluster, name):
    """The student a worker is grading now (from the label its kernel's plan folder
    keeps), or None."""
    worker = cluster.workers[name].pid
    family = {str(p) for p in [worker, *children(worker)]}
    # bubblewrap: the kernel's writable folder is a tmpfs named after the grading process
    for line in Path("/proc/self/mounts").read_text().splitlines():
        source, target = line.split()[:2]
        if source.startswith(bubblewrap.RUN_MOUNT) and \
                source.removeprefix(bubblewrap.RUN_MOUNT) in family:
            try:
                return (Path(target).parent / "label").read_text().split("/")[0]
            except OSError:
                continue
    return None


def test_a_killed_worker_loses_no_student(tmp_path):
    require_dask()
    from isolation import require_isolation

    require_isolation()
    submissions, out = tmp_path / "class", tmp_path / "out"
    expected = make_class(submissions, CLASS)
    cluster = DaskCluster(tmp_path / "dask")
    run = None
    try:
        cluster.start_scheduler()
        cluster.start_worker("w-kept")
        cluster.start_worker("w-killed")
        start = time.monotonic()
        run = subprocess.Popen(
            [*cli(), "grade", ASSIGNMENT, str(submissions), "--out", str(out),
             "--cluster", cluster.address],
            cwd=COURSE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        victim = {}

        def busy():
            student = _grading_on(cluster, "w-killed")
            if student:
                victim["student"] = student
            return bool(student)

        assert wait_for(busy, 300, step=0.05), (
            "the worker to kill never graded a student\n" + cluster.log("w-killed"))
        time.sleep(0.5)  # its kernel is running the student's notebook
        before_kill = {p for p in cluster.worker_pids("w-killed")}
        kill_group(cluster.workers["w-killed"])
        output, _ = run.communicate(timeout=600)
        text = output.decode(errors="replace")
        assert run.returncode == 0, text + cluster.log("scheduler") + cluster.log("w-kept")
        seconds = time.monotonic() - start
        # everything the killed worker started is gone with it
        assert wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in before_kill),
                        20), "processes of the killed worker outlived it"
    finally:
        if run is not None and run.poll() is None:
            kill_group(run)
        cluster.stop()

    # the gradebook: each student once, with the score the notebook earns
    db = sqlite3.connect(out / "gradebook.db")
    rows = db.execute(
        "SELECT s.student_id, SUM(COALESCE(g.auto_score, 0)), COUNT(DISTINCT s.id) "
        "FROM submitted_assignment s JOIN submitted_notebook n ON n.assignment_id = s.id "
        "JOIN grade g ON g.notebook_id = n.id GROUP BY s.student_id").fetchall()
    students = {r[0] for r in db.execute("SELECT id FROM student")}
    db.close()
    assert students == set(CLASS)
    graded = {student: score for student, score, _ in rows}
    assert all(count == 1 for *_, count in rows), rows
    assert graded == {s: v for s, v in expected.items() if v is not None}, text

    journal = (out / ".grading" / "journal.jsonl").read_text().splitlines()[1:]
    entries = [json.loads(line) for line in journal]
    assert sorted(e["student"] for e in entries) == sorted(CLASS)  # once each
    by_worker = {e["student"]: e["result"]["graded_by"] for e in entries}
    # the student the killed worker was grading was graded again, on the other worker
    assert by_worker[victim["student"]], by_worker
    assert by_worker[victim["student"]].split(":")[-1] not in {str(p) for p in before_kill}
    report = json.loads((out / "report.json").read_text())
    assert sorted(s["student"] for s in report["students"]) == sorted(CLASS)
    # the lost worker is in the report, with whom it was grading (issue #28, trap 6)
    lost = [line for line in (out / "report.txt").read_text().splitlines()
            if line.startswith("cluster: worker ")]
    assert len(lost) == 1, (out / "report.txt").read_text()
    assert "was lost during the run, holding the task(s) of " in lost[0], lost
    assert victim["student"] in lost[0].split("holding the task(s) of ")[1], lost
    assert lost[0] in text  # said while the run went on, too
    (notes,) = [s["notes"] for s in report["students"] if s["student"] == victim["student"]]
    assert any("was lost while it held this student's task (running or queued); graded on "
               + by_worker[victim["student"]] in n for n in notes), notes
    csv_students = (out / "grades.csv").read_text().splitlines()[1:]
    assert len(csv_students) == len(CLASS)
    print(f"\n{len(CLASS)} students on 2 workers, one killed mid-class, in {seconds:.1f} s; "
          f"killed while grading {victim['student']}\n{lost[0]}")


def _ours(before):
    """Processes of this checkout's grading (ours, Dask's) not running `before`."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in before:
            continue
        args = b" ".join(cmdline(pid)).decode(errors="replace")
        if args.startswith(str(BIN)) and any(
                w in args for w in ("autograder.", "residual-pack", "multiprocessing",
                                    "distributed")):
            found[int(pid)] = args[:160]
    return found


@pytest.mark.alone  # counts every process of this checkout's Python
def test_a_killed_local_cluster_run_leaves_nothing_and_resumes(tmp_path):
    """The coordinator of `--cluster local` killed (SIGKILL, alone) after its first
    student: its LocalCluster's workers and their kernels go too; the next run with the
    same --out resumes from the journal, and every student is in the gradebook once."""
    require_dask()
    from isolation import require_isolation

    require_isolation()
    submissions, out = tmp_path / "class", tmp_path / "out"
    students = {f"s{i}": ("solution" if i % 2 else "stub") for i in range(4)}
    expected = make_class(submissions, students)
    command = [*cli(), "grade", ASSIGNMENT, str(submissions), "--out", str(out),
               "--cluster", "local", "-j", "2", "--no-feedback"]
    before = set(_ours(set()))
    run = subprocess.Popen(command, cwd=COURSE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    journal = out / ".grading" / "journal.jsonl"

    def written():
        try:
            return len(journal.read_text().splitlines()) - 1
        except OSError:
            return 0

    try:
        assert wait_for(lambda: written() >= 1, 400), "no student was graded"
        os.kill(run.pid, 9)  # the coordinator only
        run.wait(10)
        assert wait_for(lambda: not _ours(before), 30), _ours(before)
    finally:
        if run.poll() is None:
            kill_group(run)
    done_before = written()
    assert done_before < len(students), "the run finished before it was killed"
    again = subprocess.run(command, cwd=COURSE, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"gradebook): {done_before} student(s), not graded again" in again.stdout
    entries = [json.loads(x) for x in journal.read_text().splitlines()[1:]]
    assert sorted(e["student"] for e in entries) == sorted(students)
    db = sqlite3.connect(out / "gradebook.db")
    rows = db.execute(
        "SELECT s.student_id, SUM(COALESCE(g.auto_score, 0)) FROM submitted_assignment s "
        "JOIN submitted_notebook n ON n.assignment_id = s.id "
        "JOIN grade g ON g.notebook_id = n.id GROUP BY s.id").fetchall()
    db.close()
    # when a student is missing, say what the journal says happened to them
    why = {e["student"]: e["result"].get("reason") for e in entries}
    assert sorted(r[0] for r in rows) == sorted(students), why  # one submission each
    assert dict(rows) == expected, why
    assert "grading:" in again.stderr and "student" in again.stderr  # the progress bar
