"""autograder/grading/cluster/worker.py: a worker's refusals, its scratch course (a grading
session of its own, gone when it closes) and the folders that killed workers leave."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.grading.cluster import bundle, worker
from autograder.sandbox.limits import Limits

COURSE = Path(__file__).resolve().parents[2]
ASSIGNMENT = "01_residual_stack"


def _mine(folders):
    """The folders among `folders` whose `owner` file names this process: the test's own,
    not those of another test process working on the same machine at the same time."""
    found = set()
    for folder in folders:
        try:
            if int((folder / "owner").read_text()) == os.getpid():
                found.add(folder)
        except (OSError, ValueError):
            continue
    return found


def _scratch():
    return _mine(Path(tempfile.gettempdir()).glob(worker.FOLDER_PREFIX + "*"))


def test_a_worker_refuses_another_pack_or_a_bundle_that_is_not_its_hash():
    task = {"student": "ann", "assignment": ASSIGNMENT, "files": {}, "feedback": False,
            "pack": "0.0.1+elsewhere", "bundle": "0" * 64, "bundle_bytes": b"x"}
    with pytest.raises(bundle.PackMismatch, match="another|this worker"):
        worker.grade_task(task)
    task["pack"] = bundle.pack_fingerprint()
    with pytest.raises(bundle.PackMismatch, match="do not match"):
        worker.grade_task(task)
    assert task["bundle"] not in worker._STATE


def test_a_worker_that_refuses_a_bundle_leaves_nothing_behind(monkeypatch):
    monkeypatch.setattr(bundle, "pack_fingerprint", lambda: "0.0.1+elsewhere")
    data, digest = bundle.make_bundle(COURSE, ASSIGNMENT, None)
    monkeypatch.undo()
    before = _scratch()
    home = os.environ.get("HOME")
    with pytest.raises(bundle.PackMismatch, match="the bundle is for pack 0.0.1"):
        worker.WorkerCourse(data, digest)
    assert _scratch() <= before
    assert os.environ.get("HOME") == home


def test_a_worker_that_cannot_isolate_as_the_coordinator_did_refuses_and_closes_its_sandbox():
    made_by = SimpleNamespace(limits=Limits(), level="elsewhere", references={})
    data, digest = bundle.make_bundle(COURSE, ASSIGNMENT, made_by)
    before, roots = _scratch(), _mine(Path("/tmp").glob("rp-*"))
    home = os.environ.get("HOME")
    with pytest.raises(bundle.PackMismatch, match="the coordinator graded the reference at "
                                                 "'elsewhere'"):
        worker.WorkerCourse(data, digest)
    assert _scratch() <= before
    assert _mine(Path("/tmp").glob("rp-*")) <= roots  # the sandbox it made is closed
    assert os.environ.get("HOME") == home


def test_a_scratch_course_grades_in_a_session_of_its_own_and_keeps_nothing():
    data, digest = bundle.make_bundle(COURSE, ASSIGNMENT, None)
    home = os.environ.get("HOME")
    course = worker.WorkerCourse(data, digest)
    try:
        assert course.assignment == ASSIGNMENT
        # the session's private Jupyter folders, inside the scratch course
        assert Path(os.environ["HOME"]).is_relative_to(course.folder)
        assert course.grader.work.root.is_relative_to(course.folder)
        outcome = course.grade({"student": "ann", "files": {}, "feedback": False})
        assert outcome["student"] == "ann" and outcome["gradebook"] is None
        assert outcome["result"]["reason"] == "no notebook handed in"
        assert outcome["result"]["graded_by"] == outcome["worker"]
        assert outcome["submitted"] == outcome["autograded"] == outcome["feedback"] == {}
        with pytest.raises(ValueError, match="bad notebook name"):
            course.grade({"student": "bob", "files": {"../x.ipynb": b"{}"}, "feedback": False})
    finally:
        course.close()
    assert not course.folder.exists()
    assert os.environ.get("HOME") == home
    course.close()  # atexit and the nanny's finalizer may both call it


def test_only_the_folders_of_dead_workers_are_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dead, alive, unowned = (tmp_path / f"{worker.FOLDER_PREFIX}{n}" for n in "abc")
    for folder, owner in ((dead, gone), (alive, str(os.getpid())), (unowned, None)):
        folder.mkdir()
        if owner:
            (folder / "owner").write_text(owner)
    worker.remove_stale_folders()
    assert not dead.exists() and alive.exists() and unowned.exists()


def test_a_long_lived_worker_keeps_the_scratch_courses_of_two_bundles_only(monkeypatch):
    """Issue #28, trap 6: a worker kept a scratch course (and its sandbox's warm parent,
    about 80 MB) for every bundle it ever saw; now the least recently used beyond two is
    closed (WorkerCourse.close, which closes the session's sandbox too: the bundles here
    are made without one, so no kernel runs), and a bundle used again is kept."""
    monkeypatch.delenv("RESIDUAL_PACK_WORKER_BUNDLES", raising=False)
    made = {name: bundle.make_bundle(COURSE, name, None)
            for name in (ASSIGNMENT, "02_degradation", "07_check_understanding")}
    pack = bundle.pack_fingerprint()
    folders = {}
    try:
        for name in (ASSIGNMENT, "02_degradation", ASSIGNMENT, "07_check_understanding"):
            data, digest = made[name]
            outcome = worker.grade_task({
                "student": "ann", "assignment": name, "files": {}, "feedback": False,
                "pack": pack, "bundle": digest, "bundle_bytes": data})
            assert outcome["result"]["reason"] == "no notebook handed in"
            folders[name] = worker._STATE[digest].folder
        assert list(worker._STATE) == [made[ASSIGNMENT][1], made["07_check_understanding"][1]]
        assert not folders["02_degradation"].exists()  # WorkerCourse.close()
        assert folders[ASSIGNMENT].exists()
    finally:
        while worker._STATE:
            worker._STATE.popitem()[1].close()
