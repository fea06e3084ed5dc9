"""Grading a class on Dask distributed: each student a task, one writer to the gradebook.

`residual-pack grade ... --cluster local` starts an embedded `LocalCluster` (one worker
process per job, one thread each); `--cluster tcp://HOST:8786` (or `tls://`, with the
certificates of Dask's own config) uses a running scheduler. Both go through
`grade_on_cluster`; without `--cluster` the class is graded by the local process pool of
`classrun.grade_all`, and Dask need not be installed.

What travels, and what does not:

- The coordinator packs what a worker needs to grade the assignment into a *bundle*
  (`make_bundle`: the course config, `source/`, the reference run's records that the
  coordinator judges with, the limits and the isolation level, as a deterministic tar)
  and leaves it on the scheduler under its SHA-256 (`client.set_metadata`), where every
  worker, including one that joins or is restarted mid-class, can fetch it once. A worker
  checks the bytes against the hash.
- A task (`grade_task`) carries the student's id, the bytes of what they handed in, the
  bundle's hash and the pack's fingerprint (`pack_fingerprint`: version and code); a
  worker running another pack refuses it. No path on the coordinator's disk is sent, nor
  the gradebook's URL.
- On the worker, the student is graded exactly as by the local pool: intake, then
  nbgrader's autograde in a private scratch course whose Execute step runs the notebook in
  our sandbox, in a child process of the worker (`student.Grader`), then feedback. The
  worker returns the result, the autograded and repaired notebooks, the feedback pages and
  the gradebook rows of the submission (`_gradebook_rows`).
- Only the coordinator writes the course's gradebook (`apply_outcome`, through nbgrader's
  `Gradebook` on the course's `db_url`: SQLite by default, PostgreSQL for a course shared
  by several graders), then the journal.

Task keys are deterministic (assignment, student, submission hash, bundle hash), so a task
that Dask reruns after a worker died is the same task, and the coordinator writes each
student once, when the first result arrives. Resuming a killed run is the journal's job,
as with the local pool.
"""

import base64
import contextlib
import hashlib
import io
import json
import logging
import os
import re
import shutil
import tarfile
import tempfile
import threading
import time
from pathlib import Path

from .course import CONFIG_FILE, SOURCE, CourseError, WorkCourse, private_jupyter_dirs
from .sandbox.plan import abandoned
from .student import HANDED_IN, StudentResult

__all__ = ["BUNDLE_KEY", "PackMismatch", "pack_fingerprint", "make_bundle", "grade_task",
           "apply_outcome", "grade_on_cluster", "connect", "task_key", "have_dask"]

BUNDLE_KEY = "residual-pack-bundle"  # scheduler metadata: [BUNDLE_KEY, hash] -> bytes
_PACKAGES = ("autograder", "microgpt", "torchtrack")


class PackMismatch(RuntimeError):
    """A worker runs another version of the pack than the coordinator."""


def have_dask():
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def pack_fingerprint():
    """The pack's version and a digest of its code (every .py file of its packages): what
    a worker must share with the coordinator to grade for it."""
    import importlib.metadata
    import importlib.util

    try:
        version = importlib.metadata.version("microgpt-residuals")
    except importlib.metadata.PackageNotFoundError:
        version = "0+unknown"
    digest = hashlib.sha256()
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0])
        for path in sorted(folder.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            digest.update(f"{name}/{path.relative_to(folder)}".encode() + b"\0")
            digest.update(path.read_bytes())
    return f"{version}+{digest.hexdigest()[:16]}"


# ---------------------------------------------------------------- the bundle


def _add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def make_bundle(course, assignment, sandbox):
    """(bytes, sha256) of what a worker needs to grade `assignment`: the course config,
    every assignment's source (intake names another assignment's notebook by its cells),
    the reference records the coordinator judges with (`sandbox.references`), and the
    run's limits and isolation."""
    from dataclasses import asdict

    course = Path(course)
    files = {CONFIG_FILE: (course / CONFIG_FILE).read_bytes()}
    for path in sorted((course / SOURCE).rglob("*")):
        parts = path.relative_to(course).parts
        if path.is_file() and not any(p in ("__pycache__", ".ipynb_checkpoints") for p in parts):
            files["/".join(parts)] = path.read_bytes()
    if sandbox is not None and assignment in sandbox.references:
        # the expected observations this run judges with: the workers judge with the same
        references = sandbox.references[assignment]
        files["references.json"] = json.dumps(references, sort_keys=True).encode()
    about = {"assignment": assignment, "pack": pack_fingerprint(),
             "limits": asdict(sandbox.limits) if sandbox is not None else None,
             "level": sandbox.level if sandbox is not None else None}
    files["bundle.json"] = json.dumps(about, sort_keys=True).encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            _add(tar, name, files[name])
    data = raw.getvalue()
    return data, hashlib.sha256(data).hexdigest()


def _unpack(data, folder):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            if not member.isfile() or member.name.startswith("/") or ".." in member.name.split("/"):
                raise PackMismatch(f"bad bundle entry {member.name!r}")
        try:
            tar.extractall(folder, filter="data")
        except TypeError:  # a Python without extraction filters: the members were checked
            tar.extractall(folder)


# ---------------------------------------------------------------- the worker's side

_STATE = {}  # bundle hash -> _WorkerCourse (one per worker process and bundle)
_LOCK = threading.Lock()  # one student at a time per worker process (the sandbox channel)
_SAFE = re.compile(r"^[^/\\\0]+\.(ipynb|html)$")


class _WorkerCourse:
    """A worker's scratch course for one bundle: the course unpacked, a work course with
    its own SQLite gradebook (nobody else's), a sandbox, and a Grader, kept across tasks."""

    def __init__(self, data, digest):
        import atexit
        import logging
        import multiprocessing.util
        import warnings

        log = logging.getLogger("residual_pack.nbgrader")
        log.propagate = False
        log.addHandler(logging.NullHandler())
        warnings.filterwarnings("ignore", message=".*not in session.*")
        self.digest = digest
        _remove_stale_folders()
        self.folder = Path(tempfile.mkdtemp(prefix=_FOLDER_PREFIX))
        os.chmod(self.folder, 0o700)
        (self.folder / "owner").write_text(str(os.getpid()))
        self._env = contextlib.ExitStack()
        self.sandbox = None
        try:
            self._setup(data)
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)
        # a worker process started by a nanny ends through multiprocessing, not atexit
        multiprocessing.util.Finalize(self, self.close, exitpriority=10)

    def _setup(self, data):
        from .sandbox.limits import Limits
        from .sandbox.plan import Sandbox, remove_stale_roots
        from .student import Grader

        course = self.folder / "course"
        _unpack(data, course)
        about = json.loads((course / "bundle.json").read_text())
        if about["pack"] != pack_fingerprint():
            raise PackMismatch(f"the bundle is for pack {about['pack']}, this worker runs "
                               f"{pack_fingerprint()}")
        self.assignment = about["assignment"]
        self._env.enter_context(private_jupyter_dirs(self.folder / "jupyter"))
        sandbox = None
        if about["level"] is not None:
            remove_stale_roots()
            sandbox = Sandbox(Limits(**about["limits"]))
            if sandbox.level != about["level"]:
                sandbox.close()
                raise PackMismatch(
                    f"this worker isolates at level {sandbox.level!r} ({sandbox.why}); the "
                    f"coordinator graded the reference at {about['level']!r}")
        self.sandbox = sandbox
        if sandbox is not None:  # judge with the coordinator's reference, not a rerun
            references = course / "references.json"
            if not references.is_file():
                raise PackMismatch("the bundle holds no reference records")
            sandbox.references[self.assignment] = json.loads(references.read_text())
        work = WorkCourse(course, self.folder / "work", [self.assignment])
        self.grader = Grader(work, self.assignment, generate=True, sandbox=sandbox)

    def grade(self, task):
        grader = self.grader
        student = task["student"]
        work = grader.work
        for folder in (grader.submission_folder(student), grader.handed_in_folder(student)):
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
            for name, data in task["files"].items():
                if not _SAFE.match(name):
                    raise ValueError(f"bad notebook name {name!r}")
                (folder / name).write_bytes(data)
        start = time.perf_counter()
        try:
            result = grader.grade(student, feedback=task["feedback"])
        except Exception as exc:  # noqa: BLE001 (our failure costs that student only)
            result = StudentResult(student, reason=f"grading failed: {type(exc).__name__}: {exc}")
        result.graded_by = _where()
        rows = _gradebook_rows(work, self.assignment, student) if result.graded else None
        folders = {"submitted": grader.submission_folder(student),
                   "autograded": work.path("autograded", student, self.assignment),
                   "feedback": work.path("feedback", student, self.assignment)}
        outcome = {
            "student": student, "result": result.to_dict(), "gradebook": rows,
            "worker": _where(), "seconds": time.perf_counter() - start,
        }
        for kind, folder in folders.items():
            outcome[kind] = {p.name: p.read_bytes() for p in sorted(Path(folder).glob("*"))
                             if p.is_file() and _SAFE.match(p.name)}
        # the scratch course keeps nothing of the student
        for folder in [*folders.values(), work.path(HANDED_IN, student)]:
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(Exception), work.api().gradebook as gb:
            gb.remove_submission(self.assignment, student)
        return outcome

    def close(self):
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        self._env.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_FOLDER_PREFIX = "residual-pack-worker-"


def _remove_stale_folders():
    """Remove the scratch courses of worker processes that are gone (killed ones)."""
    for folder in abandoned(Path(tempfile.gettempdir()).glob(_FOLDER_PREFIX + "*")):
        shutil.rmtree(folder, ignore_errors=True)


def _where():
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


def _gradebook_rows(work, assignment, student):
    """The submission's rows in a worker's gradebook, as plain data for the coordinator."""
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


def _fetch_bundle(digest):
    from distributed import get_client

    data = get_client().get_metadata([BUNDLE_KEY, digest], None)
    if data is None:
        raise PackMismatch(f"bundle {digest[:12]} is not on the scheduler")
    if isinstance(data, str):
        data = base64.b64decode(data)
    return data


def grade_task(task):
    """Grade one student on a worker (a Dask task): `task` holds `student`, `files`
    ({notebook file name: bytes}), `assignment`, `bundle` (the hash), `pack` and
    `feedback`. Returns the outcome that `apply_outcome` writes on the coordinator."""
    with _LOCK:
        mine = pack_fingerprint()
        if task["pack"] != mine:
            raise PackMismatch(f"the coordinator runs pack {task['pack']}, this worker {mine}")
        digest = task["bundle"]
        state = _STATE.get(digest)
        if state is None:
            data = task.get("bundle_bytes") or _fetch_bundle(digest)
            if hashlib.sha256(data).hexdigest() != digest:
                raise PackMismatch(f"bundle {digest[:12]}: the bytes do not match the hash")
            state = _STATE[digest] = _WorkerCourse(data, digest)
        return state.grade(task)


# ---------------------------------------------------------------- the coordinator's side


def apply_outcome(grader, outcome):
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
            if not _SAFE.match(name):
                raise ValueError(f"bad file name {name!r} from a worker")
            (folder / name).write_bytes(data)
    result.feedback = sorted(folders["feedback"].glob("*.html"))
    write_gradebook(work, grader.assignment, student, outcome.get("gradebook"))
    return result


def write_gradebook(work, assignment, student, rows):
    """Put `student` in the gradebook and, if graded, their submission with `rows` (what
    the worker's nbgrader autograde wrote), replacing an earlier one."""
    from nbgrader.api import MissingEntry

    with work.api().gradebook as gb:
        gb.update_or_create_student(student)
        if rows is None:
            return
        with contextlib.suppress(MissingEntry):
            gb.remove_submission(assignment, student)
        extra = {"timestamp": rows["timestamp"]} if rows.get("timestamp") else {}
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


def task_key(assignment, student, digest, bundle):
    """The Dask key of a student's task: the same inputs, the same key."""
    name = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"residual-pack-grade-{assignment}-{name}-{digest[:12]}-{bundle[:12]}"


@contextlib.contextmanager
def connect(cluster, jobs=1):
    """A Dask client: `cluster` "local" starts a LocalCluster of `jobs` worker processes
    (one thread each) on the loopback address; else it is a scheduler's address."""
    if not have_dask():
        raise CourseError("--cluster needs Dask: install the pack with its 'dask' extra "
                          "(pip install 'microgpt-residuals[dask]')")
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


def check_workers(client, timeout=60):
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


def grade_on_cluster(grader, students, cluster, feedback=True, jobs=1, done=None, say=None):
    """Grade `students` (already handed in to `grader`'s work course) as Dask tasks on
    `cluster` ("local" or a scheduler address); `done(student, result)` is called here as
    each result has been written to the gradebook."""
    from distributed import as_completed

    from .submissions import submission_hash

    say = say or (lambda *_: None)
    work = grader.work
    bundle, digest = make_bundle(work.course, grader.assignment, grader.sandbox)
    pack = pack_fingerprint()
    with connect(cluster, jobs) as client:
        workers = check_workers(client)
        say(f"cluster: {client.scheduler.address}, {workers} worker(s) now, pack {pack}, "
            f"bundle {digest[:12]}")
        client.set_metadata([BUNDLE_KEY, digest], bundle)
        futures = {}
        for student in students:
            folder = grader.handed_in_folder(student)
            paths = {p.stem: p for p in sorted(folder.glob("*.ipynb"))} if folder.is_dir() else {}
            task = {"student": student, "assignment": grader.assignment, "bundle": digest,
                    "pack": pack, "feedback": feedback,
                    "files": {f"{n}.ipynb": p.read_bytes() for n, p in paths.items()}}
            key = task_key(grader.assignment, student, submission_hash(paths), digest)
            futures[client.submit(grade_task, task, key=key, pure=False)] = student
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
            written.add(student)
            future.release()
            if done:
                done(student, result)
