"""autograder/grading/cluster/client.py, the coordinator's side, without a cluster: task
keys, the pack check of the workers, and writing a worker's outcome into the course."""

import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.grading.cluster import bundle, client
from autograder.grading.course import CourseError

ASSIGNMENT = "01_residual_stack"


def test_task_keys_are_deterministic():
    key = client.task_key(ASSIGNMENT, "ann", "a" * 64, "b" * 64)
    assert key == client.task_key(ASSIGNMENT, "ann", "a" * 64, "b" * 64)
    assert key != client.task_key(ASSIGNMENT, "ann", "c" * 64, "b" * 64)
    assert key != client.task_key(ASSIGNMENT, "bob", "a" * 64, "b" * 64)
    assert key != client.task_key(ASSIGNMENT, "ann", "a" * 64, "d" * 64)
    assert "ann" not in key  # a student's id is hashed, not shown to the scheduler


def test_the_function_sent_to_workers_is_the_workers_by_module_path():
    assert client.grade_task.__module__ == "autograder.grading.cluster.worker"


def test_without_dask_the_cluster_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(client, "have_dask", lambda: False)
    with pytest.raises(CourseError, match=r"microgpt-residuals\[dask\]"), \
            client.connect("local"):
        pass


class _Client:
    def __init__(self, prints, joins=True):
        self.prints, self.joins = prints, joins

    def wait_for_workers(self, n, timeout):
        if not self.joins:
            raise TimeoutError

    def run(self, function):
        assert function is bundle.pack_fingerprint
        return self.prints


def test_the_workers_must_run_this_pack():
    mine = bundle.pack_fingerprint()
    assert client.check_workers(_Client({"tcp://a": mine, "tcp://b": mine})) == 2
    with pytest.raises(CourseError, match=r"tcp://b: 0\.0\.1\+elsewhere"):
        client.check_workers(_Client({"tcp://a": mine, "tcp://b": "0.0.1+elsewhere"}))
    with pytest.raises(CourseError, match="no worker joined"):
        client.check_workers(_Client({}, joins=False), timeout=0)


class _Work:
    def __init__(self, root):
        self.root = root

    def path(self, *parts):
        return self.root.joinpath(*parts)


def _grader(root):
    return SimpleNamespace(work=_Work(root), assignment=ASSIGNMENT,
                           submission_folder=lambda s: root / "submitted" / s / ASSIGNMENT)


def _outcome(student, **files):
    result = {"student": student, "graded": True, "reason": "", "cells": [], "feedback": [],
              "notes": [], "seconds": 1.0, "log": "", "problems": [], "flags": [],
              "withheld": [], "withheld_score": 0.0, "runs": {}, "graded_by": "w:1"}
    return {"student": student, "result": result, "gradebook": {"rows": student},
            "worker": "w:1", "seconds": 1.0, **files}


def test_an_outcome_is_written_into_the_course(tmp_path, monkeypatch):
    written = []
    monkeypatch.setattr(client, "write_gradebook", lambda *a: written.append(a))
    grader = _grader(tmp_path)
    stale = tmp_path / "feedback" / "ann" / ASSIGNMENT / "old.html"
    stale.parent.mkdir(parents=True)
    stale.write_text("an earlier run")
    result = client.apply_outcome(grader, _outcome(
        "ann", submitted={"nb.ipynb": b"1"}, autograded={"nb.ipynb": b"2"},
        feedback={"nb.html": b"3"}))
    assert result.student == "ann" and result.graded and result.graded_by == "w:1"
    assert result.feedback == [tmp_path / "feedback" / "ann" / ASSIGNMENT / "nb.html"]
    assert not stale.exists()  # replaced, not added to
    assert (tmp_path / "autograded" / "ann" / ASSIGNMENT / "nb.ipynb").read_bytes() == b"2"
    assert (tmp_path / "submitted" / "ann" / ASSIGNMENT / "nb.ipynb").read_bytes() == b"1"
    assert written == [(grader.work, ASSIGNMENT, "ann", {"rows": "ann"})]


@pytest.mark.parametrize("name", ["../../escape.html", "a/b.html", "run.py"])
def test_an_outcome_naming_a_file_outside_its_folder_is_refused(tmp_path, monkeypatch, name):
    monkeypatch.setattr(client, "write_gradebook", lambda *a: pytest.fail("written"))
    with pytest.raises(ValueError, match="bad file name"):
        client.apply_outcome(_grader(tmp_path / "course"), _outcome("ann", feedback={name: b"x"}))
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_the_gradebook_gets_a_student_without_a_submission_when_nothing_was_graded(monkeypatch):
    calls = []

    class _Gradebook:
        def update_or_create_student(self, student):
            calls.append(("student", student))

        def add_submission(self, *a, **kw):
            calls.append(("submission", a))

    @contextlib.contextmanager
    def gradebook():
        yield _Gradebook()

    work = SimpleNamespace(api=lambda: SimpleNamespace(gradebook=gradebook()))
    client.write_gradebook(work, ASSIGNMENT, "ann", None)
    assert calls == [("student", "ann")]


def test_the_worker_never_loads_the_client():
    """One way: the worker's module never loads the coordinator's."""
    import subprocess
    import sys

    code = ("import sys, autograder.grading.cluster.worker\n"
            "print('autograder.grading.cluster.client' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2])
    assert run.stdout.strip() == "False"
