"""A Dask worker's side: grading one student as a task (`grade_task`), in a scratch course
made once per bundle and kept across tasks.

Dask sends `grade_task` by its module path: this module is what a worker imports. It
never imports the coordinator's side (`client`).
"""

import base64
import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from autograder.grading.cluster.bundle import (
    BUNDLE_KEY,
    REFERENCES,
    SAFE_NAME,
    PackMismatch,
    pack_fingerprint,
    read_about,
    unpack_bundle,
)
from autograder.grading.course import quiet_nbgrader
from autograder.grading.plan import abandoned
from autograder.grading.student import HANDED_IN, StudentResult

__all__ = ["grade_task", "WorkerCourse", "remove_stale_folders"]

FOLDER_PREFIX = "residual-pack-worker-"
_STATE: dict[str, Any] = {}  # bundle hash -> WorkerCourse, the most recently used last
# how many bundles' scratch courses a worker process keeps (each holds a sandbox and its
# library): the least recently used one is closed beyond that
KEEP_BUNDLES_VARIABLE = "RESIDUAL_PACK_WORKER_BUNDLES"
KEEP_BUNDLES = 2
_LOCK = threading.Lock()  # one student at a time per worker process (its one scratch course)


class WorkerCourse:
    """A worker's scratch course for one bundle: the course unpacked, and a grading
    session in it (a work course with its own SQLite gradebook, nobody else's, a sandbox,
    and a Grader), kept across tasks."""

    def __init__(self, data: bytes, digest: str) -> None:
        import atexit
        import multiprocessing.util

        quiet_nbgrader()
        self.digest = digest
        remove_stale_folders()
        self.folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        os.chmod(self.folder, 0o700)
        (self.folder / "owner").write_text(str(os.getpid()))
        self._env = contextlib.ExitStack()
        try:
            self._setup(data)
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)
        # a worker process started by a nanny ends through multiprocessing, not atexit
        multiprocessing.util.Finalize(self, self.close, exitpriority=10)

    def _setup(self, data: bytes) -> None:
        from autograder.grading.session import grading_session
        from autograder.sandbox.limits import Limits

        course = self.folder / "course"
        unpack_bundle(data, course)
        about = read_about(course)
        self.assignment = about["assignment"]
        level = about["level"]
        session = self._env.enter_context(grading_session(
            course, self.folder / "work", [self.assignment], isolate=level is not None,
            limits=Limits(**about["limits"]) if level is not None else None,
            jupyter=self.folder / "jupyter"))
        sandbox = session.sandbox
        if sandbox is not None:
            if sandbox.level != level:
                raise PackMismatch(
                    f"this worker isolates at level {sandbox.level!r} ({sandbox.describe()}); the "
                    f"coordinator graded the reference at {level!r}")
            # judge with the coordinator's reference, not a rerun
            references = course / REFERENCES
            if not references.is_file():
                raise PackMismatch("the bundle holds no reference records")
            sandbox.references[self.assignment] = json.loads(references.read_text())
        self.grader = session.grader(self.assignment)

    def grade(self, task: dict[str, Any]) -> dict[str, Any]:
        grader = self.grader
        student = task["student"]
        work = grader.work
        for folder in (grader.submission_folder(student), grader.handed_in_folder(student)):
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            for name, data in task["files"].items():
                if not SAFE_NAME.match(name):
                    raise ValueError(f"bad notebook name {name!r}")
                (folder / name).write_bytes(data)
        self._due(work, student, task)
        start = time.perf_counter()
        try:
            result = grader.grade(student, feedback=task["feedback"])
        except Exception as exc:  # noqa: BLE001 (our failure costs that student only)
            result = StudentResult(student, reason=f"grading failed: {type(exc).__name__}: {exc}")
        result.graded_by = _where()
        rows = gradebook_rows(work, self.assignment, student) if result.graded else None
        folders = {"submitted": grader.submission_folder(student),
                   "autograded": work.path("autograded", student, self.assignment),
                   "feedback": work.path("feedback", student, self.assignment)}
        outcome = {
            "student": student, "result": result.to_dict(), "gradebook": rows,
            "worker": _where(), "seconds": time.perf_counter() - start,
        }
        for kind, folder in folders.items():
            outcome[kind] = {p.name: p.read_bytes() for p in sorted(Path(folder).glob("*"))
                             if p.is_file() and SAFE_NAME.match(p.name)}
        # the scratch course keeps nothing of the student
        for folder in [*folders.values(), work.path(HANDED_IN, student)]:
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(Exception), work.api().gradebook as gb:
            gb.remove_submission(self.assignment, student)
        return outcome

    def _due(self, work: Any, student: str, task: dict[str, Any]) -> None:
        """When `task`'s student handed in (nbgrader's timestamp.txt beside the notebooks),
        and the coordinator's due date and extension in this scratch gradebook, so that
        nbgrader's autograde here gives the late penalty the course's gradebook would."""
        import datetime

        from autograder.grading.submissions import TIMESTAMP_FILE

        if task.get("timestamp"):
            (self.grader.submission_folder(student) / TIMESTAMP_FILE).write_text(
                task["timestamp"] + "\n", encoding="utf-8")
        duedate = task.get("duedate")
        with work.api().gradebook as gb:
            gb.update_or_create_assignment(
                self.assignment,
                duedate=datetime.datetime.fromisoformat(duedate) if duedate else None)
            if task.get("extension"):
                gb.update_or_create_student(student)
                gb.update_or_create_submission(
                    self.assignment, student,
                    extension=datetime.timedelta(seconds=task["extension"]))

    def close(self) -> None:
        """Close the session (its sandbox first of all) and remove the scratch course."""
        self._env.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def remove_stale_folders() -> None:
    """Remove the scratch courses of worker processes that are gone (killed ones)."""
    for folder in abandoned(Path(tempfile.gettempdir()).glob(FOLDER_PREFIX + "*")):
        shutil.rmtree(folder, ignore_errors=True)


def _where() -> str:
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def gradebook_rows(work: Any, assignment: str, student: str) -> dict[str, Any]:
    """The submission's rows in a worker's gradebook, as plain data for the coordinator
    (`client.write_gradebook` writes them back)."""
    with work.api().gradebook as gb:
        sub = gb.find_submission(assignment, student)
        return {
            "timestamp": sub.timestamp.isoformat() if sub.timestamp else None,
            "notebooks": {
                nb.name: {
                    "late_submission_penalty": nb.late_submission_penalty,
                    "flagged": bool(nb.flagged),
                    "grades": {g.name: [g.auto_score, g.needs_manual_grade] for g in nb.grades},
                    "comments": {c.name: c.auto_comment for c in nb.comments},
                }
                for nb in sub.notebooks
            },
        }


def _fetch_bundle(digest: str) -> bytes:
    from distributed import get_client

    data = get_client().get_metadata([BUNDLE_KEY, digest], None)
    if data is None:
        raise PackMismatch(f"bundle {digest[:12]} is not on the scheduler")
    if isinstance(data, str):
        data = base64.b64decode(data)
    return data


def grade_task(task: dict[str, Any]) -> dict[str, Any]:
    """Grade one student on a worker (a Dask task): `task` holds `student`, `files`
    ({notebook file name: bytes}), `assignment`, `bundle` (the hash), `pack` and
    `feedback`. Returns the outcome that `client.apply_outcome` writes on the coordinator."""
    with _LOCK:
        mine = pack_fingerprint()
        if task["pack"] != mine:
            raise PackMismatch(f"the coordinator runs pack {task['pack']}, this worker {mine}")
        digest = task["bundle"]
        state = _STATE.pop(digest, None)
        if state is None:
            data = task.get("bundle_bytes") or _fetch_bundle(digest)
            if hashlib.sha256(data).hexdigest() != digest:
                raise PackMismatch(f"bundle {digest[:12]}: the bytes do not match the hash")
            state = WorkerCourse(data, digest)
        _STATE[digest] = state  # the most recently used, last
        _forget_old_bundles()
        return state.grade(task)


def _forget_old_bundles() -> None:
    """Close the scratch courses of the least recently used bundles beyond what a worker
    keeps (`RESIDUAL_PACK_WORKER_BUNDLES`, default 2): a long-lived worker that grades
    many courses or assignments holds a few sandboxes, not one per bundle it ever saw."""
    try:
        keep = max(1, int(os.environ.get(KEEP_BUNDLES_VARIABLE, KEEP_BUNDLES)))
    except ValueError:
        keep = KEEP_BUNDLES
    while len(_STATE) > keep:
        oldest = next(iter(_STATE))
        _STATE.pop(oldest).close()
