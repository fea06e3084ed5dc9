"""The coordinator's side (`residual-pack grade --cluster`): the Dask client, a task per
student, and what comes back written into the course, where this process is the only
writer of the gradebook.

The function it sends, `worker.grade_task`, runs in the workers; the bundle it leaves on
the scheduler is `bundle.make_bundle`'s.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from autograder.grading.cluster.bundle import BUNDLE_KEY, SAFE_NAME, make_bundle, pack_fingerprint
from autograder.grading.cluster.worker import grade_task
from autograder.grading.course import CourseError
from autograder.grading.student import StudentResult
from autograder.installs import install_it_with

if TYPE_CHECKING:
    from autograder.grading.course import WorkCourse
    from autograder.grading.student import Grader

__all__ = ["DASK_MISSING", "have_dask", "connect", "check_workers", "task_key", "grade_on_cluster",
           "apply_outcome", "write_gradebook", "LostWorkers"]


# what --cluster says without Dask: the extra's install line, with the Python running this
# named in full (a bare `pip` is often another environment's) at the end of the line, to
# copy; pip installs the extra of the pack already installed, from a wheel or a checkout
DASK_MISSING = ("--cluster needs Dask, the pack's 'dask' extra; "
                + install_it_with("microgpt-residuals[dask]"))


def have_dask() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True



def apply_outcome(grader: Grader, outcome: dict[str, Any]) -> StudentResult:
    """Write what a worker returned into the course: the repaired, autograded and feedback
    files, and the submission's rows in the gradebook (this process is its only writer).
    Returns the StudentResult, its feedback paths on this machine."""
    result = StudentResult.from_dict(outcome["result"])
    student = result.student
    work = grader.work
    folders = {"autograded": work.path("autograded", student, grader.assignment),
               "feedback": work.path("feedback", student, grader.assignment)}
    if outcome.get("submitted"):
        folders["submitted"] = grader.submission_folder(student)
    for kind, folder in folders.items():
        if folder.exists():
            shutil.rmtree(folder)
        files = outcome.get(kind) or {}
        if files:
            folder.mkdir(parents=True)
        for name, data in files.items():
            if not SAFE_NAME.match(name):
                raise ValueError(f"bad file name {name!r} from a worker")
            (folder / name).write_bytes(data)
    result.feedback = sorted(folders["feedback"].glob("*.html"))
    write_gradebook(work, grader.assignment, student, outcome.get("gradebook"))
    return result


def write_gradebook(work: WorkCourse, assignment: str, student: str,
                    rows: dict[str, Any] | None) -> None:
    """Put `student` in the gradebook and, if graded, their submission with `rows` (what
    the worker's nbgrader autograde wrote), replacing an earlier one."""
    from nbgrader.api import MissingEntry

    with work.api().gradebook as gb:
        gb.update_or_create_student(student)
        if rows is None:
            return
        extra = {"timestamp": rows["timestamp"]} if rows.get("timestamp") else {}
        with contextlib.suppress(MissingEntry):  # an extension granted here stays
            extension = gb.find_submission(assignment, student).extension
            if extension is not None:
                extra["extension"] = extension
            gb.remove_submission(assignment, student)
        sub = gb.add_submission(assignment, student, **extra)
        for nb in sub.notebooks:
            saved = rows["notebooks"].get(nb.name)
            if saved is None:
                continue
            nb.late_submission_penalty = saved["late_submission_penalty"]
            nb.flagged = saved["flagged"]
            for grade in nb.grades:
                if grade.name in saved["grades"]:
                    grade.auto_score, grade.needs_manual_grade = saved["grades"][grade.name]
            for comment in nb.comments:
                if comment.name in saved["comments"]:
                    comment.auto_comment = saved["comments"][comment.name]
        gb.db.commit()


def due(work: WorkCourse, grader: Grader, student: str) -> dict[str, Any]:
    """What a worker needs to judge lateness as nbgrader does here: when the student
    handed in (nbgrader's timestamp.txt, or None), the assignment's due date in this
    gradebook and the student's extension there (ISO text and seconds, or None)."""
    from nbgrader.api import MissingEntry

    from autograder.grading.submissions import TIMESTAMP_FILE

    stamp = grader.submission_folder(student) / TIMESTAMP_FILE
    found = {"timestamp": stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else None,
             "duedate": None, "extension": None}
    with work.api().gradebook as gb:
        duedate = gb.find_assignment(grader.assignment).duedate
        found["duedate"] = duedate.isoformat() if duedate else None
        with contextlib.suppress(MissingEntry):
            extension = gb.find_submission(grader.assignment, student).extension
            found["extension"] = extension.total_seconds() if extension else None
    return found


def task_key(assignment: str, student: str, digest: str, bundle: str) -> str:
    """The Dask key of a student's task: the same inputs, the same key."""
    name = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"residual-pack-grade-{assignment}-{name}-{digest[:12]}-{bundle[:12]}"


@contextlib.contextmanager
def connect(cluster: str, jobs: int = 1) -> Iterator[Any]:
    """A Dask client: `cluster` "local" starts a LocalCluster of `jobs` worker processes
    (one thread each) on the loopback address; else it is a scheduler's address."""
    if not have_dask():
        raise CourseError(DASK_MISSING)
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.daemon": False,
                          "distributed.scheduler.allowed-failures": 3}):
        if cluster == "local":
            with LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                              host="127.0.0.1", dashboard_address=None,
                              silence_logs=logging.ERROR) as local, Client(local) as client:
                yield client
        else:
            try:
                client = Client(cluster, timeout="30s")
            except (OSError, TimeoutError) as exc:
                raise CourseError(f"cannot reach the Dask scheduler at {cluster}: {exc}") from None
            with client:
                yield client


def check_workers(client: Any, timeout: int = 60) -> int:
    """Wait for a worker; fail when one runs another pack than this process."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise CourseError(f"no worker joined the Dask scheduler within {timeout} s") from None
    mine = pack_fingerprint()
    theirs = client.run(pack_fingerprint)
    other = {addr: fp for addr, fp in theirs.items() if fp != mine}
    if other:
        raise CourseError(f"worker(s) run another pack than this one ({mine}): " +
                          ", ".join(f"{a}: {fp}" for a, fp in sorted(other.items())))
    return len(theirs)


class LostWorkers:
    """The workers the scheduler removes while a class is graded, unannounced (killed, out
    of memory, their machine gone: Dask's "remove-worker" events that are not `expected`,
    as a retired or closed worker's are), heard through the scheduler's event topic, with
    the tasks each held."""

    TOPIC = "all"

    def __init__(self, client: Any) -> None:
        self.client = client
        # (worker address, [task keys it held], stimulus id)
        self.lost: list[tuple[str, list[str], str]] = []
        client.subscribe_topic(self.TOPIC, self._heard)

    def _heard(self, event: tuple[Any, Any]) -> None:
        _, msg = event
        if isinstance(msg, dict) and msg.get("action") == "remove-worker" \
                and not msg.get("expected"):
            self.lost.append((str(msg.get("worker", "?")),
                              [str(k) for k in msg.get("processing-tasks") or ()],
                              str(msg.get("stimulus_id", ""))))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.unsubscribe_topic(self.TOPIC)

    def running(self, key: str) -> list[str]:
        """The lost workers that held the task `key` (running or queued on them)."""
        return [worker for worker, keys, _ in self.lost if key in keys]

    def lines(self, students_by_key: dict[str, str]) -> list[str]:
        """The class report's lines: each lost worker, and whose tasks it held (running
        or queued on it)."""
        found = []
        for worker, keys, why in self.lost:
            whom = sorted(students_by_key[k] for k in keys if k in students_by_key)
            found.append(f"cluster: worker {worker} was lost during the run"
                         + (f", holding the task(s) of {', '.join(whom)}" if whom else "")
                         + (f" ({why})" if why else "")
                         + "; the scheduler gave its tasks to other workers")
        return found


def grade_on_cluster(grader: Grader, students: Sequence[str], cluster: str,
                     feedback: bool = True, jobs: int = 1,
                     done: Callable[[str, StudentResult], object] | None = None,
                     say: Callable[[str], object] | None = None,
                     lost: list[str] | None = None) -> None:
    """Grade `students` (already handed in to `grader`'s work course) as Dask tasks on
    `cluster` ("local" or a scheduler address); `done(student, result)` is called here as
    each result has been written to the gradebook. Workers lost on the way are said, noted
    in the results of the students they were grading, and added to `lost` (a list) as
    lines for the class report."""
    say = say or (lambda *_: None)
    work = grader.work
    bundle, digest = make_bundle(work.course, grader.assignment, grader.sandbox)
    pack = pack_fingerprint()
    with connect(cluster, jobs) as client:
        workers = check_workers(client)
        say(f"cluster: {client.scheduler.address}, {workers} worker(s) now, pack {pack}, "
            f"bundle {digest[:12]}")
        client.set_metadata([BUNDLE_KEY, digest], bundle)
        watch = LostWorkers(client)
        try:
            by_key = _grade_tasks(client, grader, students, digest, pack, feedback, done,
                                  watch)
        finally:
            watch.close()
        for line in watch.lines(by_key):
            say(line)
            if lost is not None:
                lost.append(line)


def _grade_tasks(client: Any, grader: Grader, students: Sequence[str], digest: str, pack: str,
                 feedback: bool, done: Callable[[str, StudentResult], object] | None,
                 watch: LostWorkers) -> dict[str, str]:
    """Submit a task per student, write each result as it comes; {task key: student}."""
    from distributed import as_completed

    from autograder.grading.submissions import submission_hash

    work = grader.work
    futures = {}
    for student in students:
        folder = grader.handed_in_folder(student)
        paths = {p.stem: p for p in sorted(folder.glob("*.ipynb"))} if folder.is_dir() else {}
        task = {"student": student, "assignment": grader.assignment, "bundle": digest,
                "pack": pack, "feedback": feedback,
                "files": {f"{n}.ipynb": p.read_bytes() for n, p in paths.items()},
                **due(work, grader, student)}
        key = task_key(grader.assignment, student,
                       submission_hash(paths, task["timestamp"]), digest)
        futures[client.submit(grade_task, task, key=key, pure=False)] = student
    by_key = {future.key: student for future, student in futures.items()}
    written = set()
    for future in as_completed(futures):
        student = futures[future]
        if student in written:  # never twice, whatever the cluster does
            continue
        try:
            result = apply_outcome(grader, future.result())
        except Exception as exc:  # noqa: BLE001 (that student only, with the reason)
            result = StudentResult(
                student, reason=f"the grading worker failed: {type(exc).__name__}: {exc}")
            write_gradebook(work, grader.assignment, student, None)
        for worker in watch.running(future.key):
            result.notes.append(f"the Dask worker {worker} was lost while it held this "
                                f"student's task (running or queued); graded on "
                                f"{result.graded_by or 'another worker'}")
        written.add(student)
        future.release()
        if done:
            done(student, result)
    return by_key
