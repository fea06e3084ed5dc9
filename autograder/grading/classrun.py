"""Grading a class: every student of a folder of submissions graded on their own, `jobs`
at a time, with a journal so that a run that is killed resumes, then nbgrader's grades.csv
and the class report.

`run_grading` is `residual-pack grade`: it prepares the output folder (a work course),
resumes or starts the journal, grades the folder (`grade_folder`, through `grade_all`:
worker processes, one sandbox uid each) and writes the report (report.txt, report.csv,
report.json) beside nbgrader's grades.csv.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from autograder.grading.course import (
    CONFIG_FILE,
    EXERCISES,
    SOURCE,
    CourseError,
    WorkCourse,
    notebook_paths,
    quiet_nbgrader,
)
from autograder.grading.journal import Journal, run_fingerprint
from autograder.grading.report import write_report
from autograder.grading.session import grading_session
from autograder.grading.student import HANDED_IN, Grader, StudentResult
from autograder.grading.submissions import find_submissions, handed_in_at, submission_hash
from autograder.installs import install_it_with

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor
    from datetime import datetime

    from autograder.grading.plan import Sandbox
    from autograder.sandbox.limits import Limits

__all__ = ["MIN_FOR_WORKERS", "check_run", "feedback_failures", "grade_all", "grade_folder",
           "prepare_out", "run_grading"]


# ---------------------------------------------------------------- students, at once


def _quiet_worker(coordinator: int) -> None:
    import threading

    quiet_nbgrader()
    # the grading run may have been killed while this process was still starting (a
    # spawned worker takes a second to import): compare with the pid it was started by,
    # not with whatever parent it has by now
    if os.getppid() != coordinator:
        os._exit(1)

    def orphaned() -> None:  # the grading run was killed: stop, do not finish on our own
        while True:
            time.sleep(0.5)
            if os.getppid() != coordinator:
                os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()


def _grade_in_worker(course: str | os.PathLike[str], root: str | os.PathLike[str],
                     assignment: str, student: str, feedback: bool,
                     sandbox: Sandbox | None = None,
                     db_url: str | None = None) -> StudentResult:
    work = WorkCourse(course, root, [assignment], copy=False, db_url=db_url)
    grader = Grader(work, assignment, generate=False, sandbox=sandbox)
    return grader.grade(student, feedback=feedback)


# below this many submissions, starting worker processes (each imports nbgrader, a few
# seconds) costs more than grading two at a time saves
MIN_FOR_WORKERS = 6


def _warm_up() -> None:
    """A worker's first task: import what grading a student needs (nbgrader, nbconvert,
    jupyter_client; unpickling this function already imported `classrun`), so that a pool
    started early does it while the grading process is still setting up."""
    import nbgrader.converters.autograde  # noqa: F401
    import nbgrader.preprocessors  # noqa: F401

    from autograder.grading import execute  # noqa: F401


def start_workers(jobs: int) -> ProcessPoolExecutor:
    """`jobs` grading processes (spawned, not forked: no forked kernels, loops or
    sockets), each given `_warm_up` first. Start them once the environment the workers
    should inherit is set (the private Jupyter folders of the session)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_quiet_worker,
                               initargs=(os.getpid(),))
    for _ in range(jobs):
        pool.submit(_warm_up)
    return pool


def grade_all(grader: Grader, students: Iterable[str], feedback: bool = True, jobs: int = 1,
              progress: Callable[[StudentResult], object] | None = None,
              on_result: Callable[[StudentResult], object] | None = None,
              cluster: str | None = None, say: Callable[[str], object] | None = None,
              pool: ProcessPoolExecutor | None = None,
              lost: list[str] | None = None) -> list[StudentResult]:
    """Grade the handed-in `students`, each on their own, `jobs` at a time (in separate
    processes sharing the gradebook: `pool`, from `start_workers`, when the caller started
    them early; it stays open), or as tasks on the Dask `cluster` ("local" or a
    scheduler's address; see `cluster/`: there only this process writes the gradebook).
    Results come back in the order of `students`; `on_result(result)` is called in this
    process as each one is done. On a cluster, `lost` (a list) gets a line per worker
    lost during the run."""
    students = list(students)
    results = {}

    def done(student: str, result: StudentResult) -> None:
        results[student] = result
        if on_result:
            on_result(result)
        if progress:
            progress(result)

    if cluster:
        from autograder.grading.cluster.client import grade_on_cluster

        if students:
            grade_on_cluster(grader, students, cluster, feedback=feedback, jobs=jobs,
                             done=done, say=say, lost=lost)
        return [results[s] for s in students]

    if jobs <= 1 or len(students) < MIN_FOR_WORKERS:
        for student in students:
            try:
                result = grader.grade(student, feedback=feedback)
            except Exception as exc:  # noqa: BLE001 (our failure costs that student only)
                result = StudentResult(
                    student, reason=f"grading failed: {type(exc).__name__}: {exc}"
                )
            done(student, result)
        return [results[s] for s in students]

    from concurrent.futures import as_completed

    work = grader.work
    own = pool is None
    if own:
        pool = start_workers(jobs)
    try:
        futures = {
            pool.submit(_grade_in_worker, work.course, work.root,  # type: ignore[union-attr]
                        grader.assignment, s,
                        feedback, grader.sandbox, work.db_url): s
            for s in students
        }
        for future in as_completed(futures):
            student = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 (a worker died: that student only)
                result = StudentResult(
                    student, reason=f"the grading process failed: {type(exc).__name__}: {exc}"
                )
            done(student, result)
    finally:
        if own:
            pool.shutdown()  # type: ignore[union-attr]
    return [results[s] for s in students]


# ---------------------------------------------------------------- a whole folder


def grade_folder(grader: Grader, submissions: str | os.PathLike[str], jobs: int = 1,
                 progress: Any = None, feedback: bool = True, journal: Journal | None = None,
                 cluster: str | None = None, say: Callable[[str], object] | None = None,
                 pool: ProcessPoolExecutor | None = None,
                 exclude: Iterable[str | os.PathLike[str]] = (),
                 lost: list[str] | None = None) -> tuple[list[StudentResult], Path]:
    """Grade every student in the folder `submissions` with `grader`, each on their own,
    and export nbgrader's grades.csv into the work course. Returns (results, csv path).
    With a `journal`, students it has as done (same submission) are not graded again."""
    found = find_submissions(submissions, grader.assignment, grader.notebooks, exclude)
    if not found:
        raise CourseError(f"no submissions in {submissions}")
    # when each was handed in (nbgrader's timestamp.txt), for nbgrader's due date
    stamps = {s: handed_in_at(nbs, submissions) for s, (nbs, _) in found.items()}
    digests = {s: submission_hash(nbs, stamps[s]) for s, (nbs, _) in found.items()}
    earlier = {}
    if journal is not None:
        earlier = {s: r for s, (h, r) in journal.done.items()
                   if s in found and h == digests[s]}
    todo = [s for s in found if s not in earlier]
    if journal is not None and journal.done and say:
        anew = sum(1 for s in journal.done if s in found and s not in earlier)
        say(f"graded before in this folder (same assignment, sources, limits and "
            f"gradebook): {len(earlier)} student(s), not graded again: their submission is "
            f"unchanged" + (f"; {anew} handed in anew since: graded again" if anew else "")
            + " (--fresh grades everyone again)")
    for student in todo:
        grader.submit(student, found[student][0], timestamp=stamps[student])

    def record(result: StudentResult) -> None:
        result.notes[:0] = found[result.student][1]
        if result.graded:
            lateness(grader, result)
        if journal is not None:
            journal.append(result, digests[result.student])

    start = getattr(progress, "start", None)
    if start:  # a progress bar: how many there are to grade
        start(len(todo), len(earlier))
    fresh = grade_all(grader, todo, feedback=feedback, jobs=jobs, progress=progress,
                      on_result=record, cluster=cluster, say=say, pool=pool, lost=lost)
    by_student = {r.student: r for r in fresh}
    by_student.update(earlier)
    results = [by_student[s] for s in found]
    csv = grader.export_csv(grader.work.path("grades.csv"))
    return results, csv


NO_FEEDBACK = "no feedback: "  # how Grader.grade notes a feedback step that failed


def feedback_failures(results: list[StudentResult]) -> list[str]:
    """One line per graded student whose feedback was asked for and not made (nbgrader's
    generate_feedback failed, or wrote no page), with nbgrader's reason: grades without
    the pages the students are owed, which a run must not report as a success."""
    lines = []
    for r in results:
        if not r.graded:
            continue
        why = [n[len(NO_FEEDBACK):] for n in r.notes if n.startswith(NO_FEEDBACK)]
        if why or not r.feedback:
            lines.append(f"{r.student}: {'; '.join(why) or 'no feedback page was written'}")
    return lines


def lateness(grader: Grader, result: StudentResult) -> None:
    """Say in `result` when its submission was handed in after the due date, as nbgrader's
    gradebook has it (the assignment's due date, the student's extension), and the late
    penalty nbgrader's AssignLatePenalties gave: a penalty is among what cost points."""
    from nbgrader.api import MissingEntry

    with grader.work.api().gradebook as gb:
        try:
            sub = gb.find_submission(grader.assignment, result.student)
        except MissingEntry:
            return
        late = sub.total_seconds_late
        if not late or late <= 0:
            return
        penalty = float(sub.late_submission_penalty or 0.0)
        when = (f"handed in at {sub.timestamp:%Y-%m-%d %H:%M:%S} UTC, "
                f"{_duration(late)} after the due date ({sub.duedate:%Y-%m-%d %H:%M:%S} UTC)")
    result.late_penalty = penalty
    if penalty:
        result.problems.append(f"{when}: late penalty {penalty:g} point(s), "
                               f"by the course's late-submission plugin")
    else:
        result.notes.append(f"{when}: no late penalty (the course's late-submission "
                            f"plugin gave none)")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days} d"] * bool(days) + [f"{hours} h"] * bool(hours) + \
        [f"{minutes} min"] * bool(minutes) + [f"{secs} s"] * bool(secs)
    return " ".join(parts[:2]) or "0 s"


def parse_duedate(duedate: str) -> datetime:
    """`duedate` (nbgrader's formats, e.g. "2026-12-01 17:00:00 UTC"; a time without a zone
    is UTC) as nbgrader stores it (naive UTC), or a CourseError saying why not."""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(duedate)
    except Exception as exc:  # noqa: BLE001 (dateutil's errors vary; the text says what)
        raise CourseError(f"the due date {duedate!r} is not a date nbgrader reads: {exc}") \
            from None


def set_duedate(work: WorkCourse, assignment: str, duedate: str | datetime) -> datetime:
    """Set `assignment`'s due date in the work course's gradebook, as `nbgrader db
    assignment add ASSIGNMENT --duedate` does (`duedate`: text that `parse_duedate` reads,
    or a naive UTC datetime). Returns it as nbgrader stores it (naive UTC)."""
    when = parse_duedate(duedate) if isinstance(duedate, str) else duedate
    with work.api().gradebook as gb:
        gb.update_or_create_assignment(assignment, duedate=when)
    return when


def gradebook_duedate(work: WorkCourse, assignment: str) -> datetime | None:
    """`assignment`'s due date in the work course's gradebook (naive UTC), or None."""
    with work.api().gradebook as gb:
        return gb.find_assignment(assignment).duedate


def course_gradebook(course: str | os.PathLike[str]) -> str | None:
    """The course's own gradebook, where nbgrader's commands and formgrader started in the
    course set due dates: the URL its config names (without a password), else nbgrader's
    default, gradebook.db in the course folder; None when that file is not there."""
    from traitlets.config.loader import PyFileConfigLoader

    try:
        cfg = PyFileConfigLoader(CONFIG_FILE, path=str(course)).load_config()
        url = cfg.CourseDirectory.get("db_url")
    except Exception:  # noqa: BLE001 (a config we cannot read: nbgrader's default)
        url = None
    if url:
        return str(url)
    path = Path(course) / "gradebook.db"
    return f"sqlite:///{path}" if path.is_file() else None


def course_duedate(course: str | os.PathLike[str], assignment: str,
                   ) -> tuple[datetime | None, str]:
    """(`assignment`'s due date in the course's own gradebook, naive UTC, or None; a line
    saying where it was read, or why it could not be). Read only: the course's gradebook
    is not changed, nor created."""
    import datetime

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from autograder.grading.course import without_password

    url = course_gradebook(course)
    if url is None:
        return None, ""
    shown = without_password(url)
    query = "SELECT duedate FROM assignment WHERE name = :name"
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":  # opened read only: never made or changed
            import sqlite3

            with contextlib.closing(sqlite3.connect(
                    f"file:{parsed.database}?mode=ro", uri=True, timeout=10)) as db:
                row = db.execute(query.replace(":name", "?"), (assignment,)).fetchone()
        else:
            args = {"connect_timeout": 5} if parsed.get_backend_name() == "postgresql" else {}
            engine = create_engine(parsed, connect_args=args)
            try:
                with engine.connect() as db:
                    row = db.execute(text(query), {"name": assignment}).first()
            finally:
                engine.dispose()
    except Exception as exc:  # noqa: BLE001 (no gradebook to read there: said, not fatal)
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        return None, (f"could not read the course's gradebook {shown} for a due date "
                      f"({type(exc).__name__}: {first})")
    when = row[0] if row else None
    if isinstance(when, str):  # SQLite gives the text nbgrader wrote
        when = datetime.datetime.fromisoformat(when)
    return when, (f"from the course's gradebook {shown}" if when else "")


def undated_warning(assignment: str, stamped: Sequence[str], total: int) -> str:
    """The warning of a run without a due date whose submissions carry timestamp.txt."""
    shown = ", ".join(stamped[:5]) + (" ..." if len(stamped) > 5 else "")
    return (f"WARNING: NO DUE DATE for {assignment}, so NO LATE PENALTY: {len(stamped)} of "
            f"{total} submission(s) carry nbgrader's timestamp.txt ({shown}), and none is "
            f"judged late. Give --duedate 'YYYY-MM-DD HH:MM:SS UTC', or set it in the "
            f"course's gradebook (nbgrader db assignment add {assignment} --duedate=...)")


# nbgrader's outputs in a work course, cleared before a new run there
_RUN_OUTPUTS = ("submitted", "autograded", "feedback", "gradebook.db", "grades.csv",
                "exercises", "source", HANDED_IN, ".grading/journal.jsonl", "report.txt",
                "report.csv", "report.json", "score_distribution.png")


def check_run(course: str | os.PathLike[str], assignment: str,
              submissions: str | os.PathLike[str], out: str | os.PathLike[str],
              duedate: str | None = None, db_url: str | None = None,
              cluster: str | None = None) -> dict[str, tuple[dict[str, Path], list[str]]]:
    """Refuse, with the reason, what would fail a grading run once it has started: a
    submissions folder that is missing, a file, or holds no student's notebook of
    `assignment`; an `out` that is a file, someone else's folder or not writable; a due
    date nbgrader cannot read; a gradebook URL SQLAlchemy cannot use; a cluster that is
    neither "local" nor a scheduler's address. Nothing is made or changed. Returns what
    `find_submissions` found."""
    folder = Path(submissions)
    if not folder.exists():
        raise CourseError(f"the submissions folder {folder} does not exist")
    if not folder.is_dir():
        raise CourseError(f"{folder} is a file, not a folder of submissions: give the folder "
                          f"that holds a folder or a notebook per student")
    where = Path(out).resolve()
    notebooks = [p.stem for p in notebook_paths(Path(course) / SOURCE / assignment)]
    try:
        found = find_submissions(folder, assignment, notebooks, exclude=[where])
    except OSError as exc:
        raise CourseError(f"cannot read the submissions folder {folder}: "
                          f"{exc.strerror or exc}") from None
    layouts = (f"<student>/{assignment}/<notebook>.ipynb, <student>/<notebook>.ipynb or "
               f"<student>.ipynb")
    if not found:
        raise CourseError(f"no submissions in {folder}: it holds no student folder and no "
                          f"notebook (expected {layouts})")
    if not any(files for files, _ in found.values()):
        raise CourseError(
            f"no notebook of {assignment} ({', '.join(n + '.ipynb' for n in notebooks)}) "
            f"in {folder} ({len(found)} student entries looked at): is it this "
            f"assignment's folder of submissions? (expected {layouts})")
    if where.exists() and not where.is_dir():
        raise CourseError(f"--out {where} is a file, not a folder")
    if where.is_dir() and any(p.name != ".grading" for p in where.iterdir()) and (
            not (where / CONFIG_FILE).is_file() or (where / ".git").exists()):
        raise CourseError(f"{where} is not empty and not an earlier grading run; pick "
                          f"another --out")
    made = where
    while not made.exists():
        made = made.parent
    if not made.is_dir() or not os.access(made, os.W_OK | os.X_OK):
        raise CourseError(f"cannot write the output folder {where}: {made} is not writable "
                          f"by this user; pick another --out")
    if duedate:
        parse_duedate(duedate)
    if db_url:
        _check_db_url(db_url)
    if cluster:
        _check_cluster(cluster)
    return found


def _check_db_url(db_url: str) -> None:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    try:
        url = make_url(db_url)
    except Exception:  # noqa: BLE001 (the text would show a password)
        raise CourseError("the gradebook URL (--db-url or $RESIDUAL_PACK_DB_URL) is not a "
                          "database URL; e.g. postgresql+psycopg2://USER@HOST:PORT/DB") \
            from None
    shown = url.render_as_string(hide_password=True)
    try:
        create_engine(url).dispose()  # the dialect and its driver, no connection
    except ModuleNotFoundError as exc:
        hint = ""
        if exc.name == "psycopg2":
            hint = ", the pack's 'postgres' extra; " + install_it_with(
                "microgpt-residuals[postgres]")
        elif url.get_backend_name() == "postgresql":  # SQLAlchemy 2.1's default driver
            hint = (" (write postgresql+psycopg2://..., the driver of the pack's "
                    "'postgres' extra)")
        raise CourseError(f"the gradebook {shown} needs the Python module {exc.name}, "
                          f"which is not installed{hint}") from None
    except Exception as exc:  # noqa: BLE001 (SQLAlchemy's word on it)
        raise CourseError(f"the gradebook {shown} cannot be used: "
                          f"{type(exc).__name__}: {exc}") from None


def _check_cluster(cluster: str) -> None:
    from autograder.grading.cluster.client import DASK_MISSING, have_dask

    if not have_dask():
        raise CourseError(DASK_MISSING)
    if cluster == "local":
        return
    from distributed.comm.addressing import get_address_host_port

    try:
        get_address_host_port(cluster)
    except Exception as exc:  # noqa: BLE001 (distributed's word on the address)
        raise CourseError(f"--cluster {cluster!r} is neither 'local' nor a scheduler's "
                          f"address such as tcp://HOST:8786 ({exc})") from None


def prepare_out(out: str | os.PathLike[str], keep: bool = False) -> Path:
    """Make `out` ready to be a work course: new, empty, or one of our earlier runs
    (whose outputs are cleared, unless `keep`)."""
    out = Path(out).resolve()
    if out.exists() and any(p.name != ".grading" for p in out.iterdir()):
        if not (out / CONFIG_FILE).is_file() or (out / ".git").exists():
            raise CourseError(
                f"{out} is not empty and not an earlier grading run; pick another --out"
            )
        if not keep:
            for name in _RUN_OUTPUTS:
                path = out / name
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)  # the gradebook and every submission: the grading user's only
    return out


def _lock(out: str | os.PathLike[str]) -> IO[str]:
    """Hold `out`'s run lock (until this process exits): one grading run at a time."""
    folder = Path(out) / ".grading"
    folder.mkdir(parents=True, exist_ok=True)
    f = open(folder / "lock", "a+")  # noqa: SIM115 (kept open: it is the lock)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise CourseError(f"another grading run is using {out}") from None
    _LOCKS.append(f)
    return f


_LOCKS: list[IO[str]] = []


@contextlib.contextmanager
def _early_workers(jobs: int, submissions: str | os.PathLike[str],
                   cluster: str | None) -> Iterator[ProcessPoolExecutor | None]:
    """The worker pool of a run that will use one (`jobs` > 1, no cluster, at least
    MIN_FOR_WORKERS student folders), started now: spawning the workers and importing
    nbgrader in them (a few seconds) overlaps the release's generation and the reference
    run. None otherwise."""
    pool = None
    if jobs > 1 and not cluster:
        try:
            folders = sum(1 for p in Path(submissions).iterdir() if p.is_dir())
        except OSError:
            folders = 0
        if folders >= MIN_FOR_WORKERS:
            pool = start_workers(jobs)
    try:
        yield pool
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def gradebook_name(db_url: str | None) -> str:
    """The gradebook a run writes, as the journal records it: the database URL without
    its password, or the SQLite file in the output folder."""
    if not db_url:
        return "sqlite: gradebook.db in the output folder"
    try:
        from sqlalchemy.engine import make_url

        return make_url(db_url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 (an odd URL: its scheme is enough to tell two apart)
        return db_url.split(":", 1)[0] + ": (unparsed)"


def run_grading(course: str | os.PathLike[str], assignment: str,
                submissions: str | os.PathLike[str], out: str | os.PathLike[str],
                jobs: int = 1, progress: Any = None, limits: Limits | None = None,
                fresh: bool = False, feedback: bool = True, isolate: bool = True,
                say: Callable[[str], object] | None = None, cluster: str | None = None,
                db_url: str | None = None, duedate: str | None = None,
                journal_ready: Callable[[], object] | None = None,
                ) -> tuple[Grader, list[StudentResult], Path]:
    """`residual-pack grade`: grade the folder `submissions` in the work course `out`.

    What would fail the run once started is refused first, with nothing made
    (`check_run`). Every notebook runs in a sandbox (`limits`, by default the course's:
    see `session`) unless `isolate` is False.
    A run interrupted earlier in `out` (same assignment, sources and limits) is resumed:
    students graded then are not graded again, unless `fresh`. Writes grades.csv and the
    class report. With `cluster` the students are graded on Dask (see `cluster/`);
    `db_url` is the gradebook's (default: SQLite in `out`). The due date: `duedate` when
    given, set in that gradebook; else the gradebook's own (`nbgrader db assignment add
    --duedate` in a shared one); else the course's own gradebook's (read only). A
    submission handed in with nbgrader's timestamp.txt after it gets the course's late
    penalty from nbgrader's autograde; without any due date, a run whose submissions carry
    timestamp.txt says loudly that no one is late (in its output and report.txt).
    `journal_ready()`, when given, is called once the run's journal is in place in `out`
    (loaded to resume, or started): from then on a killed run resumes. Returns (grader,
    results, grades.csv)."""
    say = say or (lambda *_: None)
    found = check_run(course, assignment, submissions, out, duedate=duedate, db_url=db_url,
                      cluster=cluster)
    return _run(course, assignment, submissions, Path(out).resolve(), found, jobs, progress,
                limits, fresh, feedback, isolate, say, cluster, db_url, duedate,
                journal_ready or (lambda: None))


def _run(course: str | os.PathLike[str], assignment: str, submissions: str | os.PathLike[str],
         out: Path, found: dict[str, Any], jobs: int, progress: Any, limits: Limits | None,
         fresh: bool, feedback: bool, isolate: bool, say: Callable[[str], object],
         cluster: str | None, db_url: str | None, duedate: str | None,
         journal_ready: Callable[[], object]) -> tuple[Grader, list[StudentResult], Path]:
    from_course, about_course = (None, "") if duedate else course_duedate(course, assignment)
    out = prepare_out(out, keep=True)
    _lock(out)
    with grading_session(course, out, [assignment], limits=limits, isolate=isolate,
                         db_url=db_url) as session, _early_workers(jobs, submissions,
                                                                   cluster) as pool:
        header = {"assignment": assignment,
                  "fingerprint": run_fingerprint(course, assignment, session.sandbox),
                  "gradebook": gradebook_name(db_url)}
        if duedate:  # another due date, other penalties: not the same run
            header["duedate"] = duedate
        elif from_course:
            header["duedate"] = f"{from_course:%Y-%m-%d %H:%M:%S} UTC"
        journal = Journal(out, header)
        resumed = not fresh and journal.load() and (out / EXERCISES / assignment).is_dir()
        if not resumed:
            journal.done.clear()
            prepare_out(out)
            journal.start()
        journal_ready()
        grader = session.grader(assignment, generate=not resumed)
        when = set_duedate(grader.work, assignment, duedate) if duedate else \
            gradebook_duedate(grader.work, assignment)
        where = ""
        if not when and from_course:
            when, where = set_duedate(grader.work, assignment, from_course), about_course
        elif about_course and not when:
            say(about_course)
        if when:
            say(f"due date of {assignment}: {when:%Y-%m-%d %H:%M:%S} UTC"
                + (f" ({where})" if where else "")
                + " (handed in later by timestamp.txt: the course's late penalty)")
        undated = ""
        if not when:
            stamped = [s for s, (nbs, _) in found.items() if handed_in_at(nbs, submissions)]
            if stamped:
                undated = undated_warning(assignment, stamped, len(found))
                say(undated)
        if session.sandbox is not None:
            say(f"isolation: {session.describe()}")
        lost: list[str] = []  # the Dask workers lost on the way, in words
        results, csv = grade_folder(grader, submissions, jobs=jobs, progress=progress,
                                    feedback=feedback, journal=journal, cluster=cluster,
                                    say=say, pool=pool, exclude=[out], lost=lost)
        header_text = f"{assignment}: {len(results)} submission(s)"
        if when:
            header_text += f"\ndue date: {when:%Y-%m-%d %H:%M:%S} UTC"
        if undated:
            header_text += "\n" + undated
        if session.sandbox is not None:
            header_text += f"\nisolation: {session.describe()}"
        for line in lost:
            header_text += "\n" + line
        for line in feedback_failures(results) if feedback else []:
            header_text += "\nFEEDBACK FAILED, " + line
        write_report(grader, results, out, header_text)
    return grader, results, csv
