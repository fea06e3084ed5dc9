"""`residual-pack`: the instructors' command line, a thin layer over nbgrader's API.

    residual-pack generate [ASSIGNMENT ...]     exercises/ and solutions/ from source/, for
                                                what changed since the last generation
    residual-pack check-drift [ASSIGNMENT ...]  fail if those differ from a fresh generate,
                                                or a solution fails the notebook guard
    residual-pack selfcheck [ASSIGNMENT ...]    do the graded tests tell right from wrong?
    residual-pack grade ASSIGNMENT SUBMISSIONS  grade a class: scores, grades.csv, feedback
    residual-pack demo [ASSIGNMENT]             grade a made-up class of three and show it
    residual-pack progress [FOLDER]             a student's visible tests, task by task
    residual-pack fingerprints [ASSIGNMENT ...] the mutants' fingerprints on the visible
                                                tests: a failing check names the mistake
    residual-pack check-exchange                can the students' unix accounts run this
                                                Python and the pack (nbgrader's exchange)?
    residual-pack stored                        the numbers the visible tests of 2-4 compare
                                                with, from the model answers
    residual-pack student-release DIR [ASSIGNMENT ...]
    residual-pack lite DIR [ASSIGNMENT ...] [--pyodide-url URL]
                                                what a student installs: the engine, the
                                                kernel side, the released notebooks

Every command finds the course from the working directory (or --course) and runs nbgrader
in a work copy of it, never in the repository.
"""

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autograder.grading.course import (
    DB_URL_VARIABLE,
    CourseError,
    check_assignments,
    find_course,
    quiet_nbgrader,
)
from autograder.sandbox.limits import Limits, SandboxError, default_jobs


def _say(text: str) -> None:
    print(text, flush=True)


def cmd_generate(args: argparse.Namespace, course: Path) -> int:
    from autograder.authoring.generate import generate

    names = check_assignments(course, args.assignments) if args.assignments else None
    start = time.perf_counter()
    done = generate(course, names, force=args.force, progress=_say)
    for step, s in done.seconds.items():
        _say(f"  {step}: {s:.1f} s")
    for name, why in done.skipped.items():
        _say(f"{name}: skipped: {why}")
    if done.written:
        _say(f"wrote exercises/ and solutions/ for {', '.join(done.written)}")
    for name, problems in done.failed.items():
        _say(f"{name}: NOT written (the committed exercises/ and solutions/ stay): its "
             f"solution's run is broken:")
        for p in problems:
            _say(f"    {p}")
    for message in done.refused.values():
        _say(message)
    took = f"{time.perf_counter() - start:.1f} s"
    if not done.ok:
        bad = [*done.refused, *done.failed]
        _say(f"generate FAILED for {', '.join(bad)} ({took}); commit only what was written")
        return 1
    _say(f"generate done in {took}"
         + ("" if done.written else ": nothing to do (use --force to run them anyway)"))
    return 0


def cmd_check_drift(args: argparse.Namespace, course: Path) -> int:
    from autograder.authoring.generate import GUARD, drift

    names = check_assignments(course, args.assignments) if args.assignments else None
    problems = drift(course, names, progress=_say)
    stale = [p for p in problems if not p.startswith(GUARD)]
    guard = [p.removeprefix(GUARD) for p in problems if p.startswith(GUARD)]
    if stale:
        _say("generated folders or fingerprints are out of date (run `residual-pack "
             "generate` or `residual-pack fingerprints`):")
        for p in stale:
            _say(f"  {p}")
    if guard:
        from autograder.authoring import notebook_guard

        _say(f"committed solutions or README fail the notebook guard (its rules: "
             f"{notebook_guard.__file__}):")
        for p in guard:
            _say(f"  {p}")
    from autograder.authoring.generate import pending

    for name, why in pending(course, names).items():  # not a failure: outputs are not compared
        _say(f"note: `residual-pack generate` would run {name} again: {'; '.join(why)}")
    if problems:
        return 1
    _say("exercises/ and solutions/ match source/, and pass the notebook guard")
    return 0


def cmd_selfcheck(args: argparse.Namespace, course: Path) -> int:
    from autograder.authoring.selfcheck import report, selfcheck

    names = check_assignments(course, args.assignments)
    if args.mutant:
        _check_mutant_words(names, args.mutant)
    if args.jobs < 1:
        raise CourseError(f"--jobs {args.jobs}: grade at least one submission at a time")
    start = time.perf_counter()
    workdir = args.workdir
    if args.keep and not workdir:
        workdir = tempfile.mkdtemp(prefix="residual-pack-selfcheck-")
    if workdir:
        _say(f"working in {workdir} (kept)")
    checks = selfcheck(
        course, names, workdir=workdir, validate=not args.no_validate,
        feedback=not args.no_feedback, only=args.mutant or None, jobs=args.jobs, progress=_say,
        whole=args.whole_notebooks,
    )
    _say(report(checks))
    failed = [c.assignment for c in checks if not c.ok]
    _say(f"self-check {'FAILED for ' + ', '.join(failed) if failed else 'passed'} "
         f"in {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


def _check_mutant_words(names: list[str], words: list[str]) -> None:
    """Each `--mutant WORDS` names some registered mutant of `names`: a typo graded only
    the solution and the stub, and the self-check passed."""
    from autograder.answers import mutants as mutant_registry

    known = [m.name for name in names for m in mutant_registry.load(name)]
    unmatched = [w for w in words if not any(w in m for m in known)]
    if unmatched:
        raise CourseError(
            f"--mutant {', '.join(repr(w) for w in unmatched)}: no mutant of "
            f"{', '.join(names)} has that in its name (they are: {', '.join(known) or 'none'})")


def _line(result: Any) -> str:
    if result.graded:
        got, top = result.score()
        return f"  {result.student}: {got:g}/{top:g} ({result.seconds:.1f} s)"
    return f"  {result.student}: not graded: {result.reason}"


def _progress(result: Any) -> None:
    _say(_line(result))


class ClassProgress:
    """`residual-pack grade`'s progress: a tqdm bar over the students to grade (rate and
    time left), with a line per student above it. `start(total, done_before)` is called
    once the class is known."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.bar: Any = None

    def start(self, total: int, done_before: int = 0) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="student", desc="grading", file=self.stream,
                        dynamic_ncols=True, mininterval=0.5, smoothing=0.1)

    def __call__(self, result: Any) -> None:
        if self.bar is None:
            _progress(result)
            return
        self.bar.write(_line(result), file=sys.stdout)
        sys.stdout.flush()
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _feedback_list(results: Sequence[Any], root: str | os.PathLike[str]) -> None:
    for r in results:
        for page in r.feedback:
            _say(f"  {r.student}: {page.relative_to(root)}")


def _limits(args: argparse.Namespace, course: Path) -> Limits:
    from autograder.grading.session import course_limits

    return course_limits(course, cell_timeout=args.cell_timeout or None,
                         notebook_timeout=args.notebook_timeout, memory=args.memory << 20,
                         processes=args.processes, cpus=args.cpus)


def cmd_grade(args: argparse.Namespace, course: Path) -> int:
    from autograder.grading.classrun import check_run

    assignment = check_assignments(course, [args.assignment])[0]
    if args.jobs < 1:
        raise CourseError(f"--jobs {args.jobs}: grade at least one submission at a time")
    out = Path(args.out or Path("runs") / f"grade-{assignment}").resolve()
    # read once, then gone from the environment that workers and kernels inherit
    from_env = os.environ.pop(DB_URL_VARIABLE, None)
    db_url = args.db_url or from_env or None
    # what would fail once started is refused now: nothing printed or made before
    found = check_run(course, assignment, args.submissions, out, duedate=args.duedate,
                      db_url=db_url, cluster=args.cluster)
    return stoppable(lambda ready: _grade(args, course, assignment, out, db_url, ready),
                     out, sorted(found))


def _grade(args: argparse.Namespace, course: Path, assignment: str, out: Path,
           db_url: str | None, journal_ready: Callable[[], object]) -> int:
    from autograder.grading.classrun import feedback_failures, run_grading
    from autograder.grading.report import score_table

    where = f"on the Dask cluster {args.cluster}" if args.cluster else "in local processes"
    _say(f"grading {args.submissions} for {assignment} in {out} ({args.jobs} at a time, "
         f"{where})")
    start = time.perf_counter()
    bar = ClassProgress()
    try:
        grader, results, csv = run_grading(
            course, assignment, args.submissions, out, jobs=args.jobs, progress=bar,
            limits=_limits(args, course), fresh=args.fresh, feedback=not args.no_feedback,
            say=_say, cluster=args.cluster, db_url=db_url, duedate=args.duedate,
            journal_ready=journal_ready,
        )
    finally:
        bar.close()
    _say("")
    _say(score_table(grader, results))
    seconds = time.perf_counter() - start
    _say(f"\n{len(results)} submission(s) in {seconds:.1f} s "
         f"({seconds / max(1, len(results)):.2f} s per submission)")
    _say(f"report: {out / 'report.txt'} (and report.csv, report.json, "
         f"score_distribution.png)")
    _say(f"grades: {csv}\nfeedback (under {out}):")
    _feedback_list(results, out)
    ungraded = [r.student for r in results if not r.graded]
    if ungraded:
        _say(f"not graded: {', '.join(ungraded)} (see the reasons above)")
    # a page missing is the grader's failure, not the student's: the run has not done its job
    failed = [] if args.no_feedback else feedback_failures(results)
    if failed:
        _say(f"FEEDBACK FAILED for {len(failed)} student(s): graded (their scores are in "
             f"grades.csv) but without the feedback page they are owed:")
        for line in failed:
            _say(f"  {line}")
        return 1
    return 0


class _Stop(BaseException):
    """Ctrl-C (SIGINT) or SIGTERM while a grading run runs."""


def stoppable(work: Callable[[Callable[[], object]], int], out: str | os.PathLike[str],
              students: Sequence[str]) -> int:
    """Run `work(journal_ready)`, a grading run into `out` of the submissions of
    `students`, in a child process that leads a process group of its own, and wait for it.
    Ctrl-C (SIGINT) or SIGTERM here ends that group at once, the run's workers and
    sandboxed kernels with it, as when a run is killed (its journal resumes it), and says
    in one line what was kept and how to resume; returns the exit status (130 for Ctrl-C).

    Why a child: while nbgrader runs a notebook in the grading process, its kernel client
    (nbclient) takes SIGINT for itself and only shuts that kernel down, so the run would
    record the student as failed and go on; in a group of its own the run never gets the
    terminal's Ctrl-C. `work` calls `journal_ready()` once the journal is in place."""
    import signal

    ready_r, ready_w = os.pipe()
    parent = os.getpid()

    def stop(signum: int, frame: Any) -> Any:
        raise _Stop(signum)

    before = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the run: never returns
        _child(work, parent, ready_r, ready_w)
    os.close(ready_w)
    try:
        with contextlib.suppress(OSError):  # the child sets it too: whichever comes first
            os.setpgid(pid, pid)
        try:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        except _Stop as stopped:
            for s in before:  # once is enough
                signal.signal(s, signal.SIG_IGN)
            _end_tree(pid)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.set_blocking(ready_r, False)
            try:
                ready = bool(os.read(ready_r, 16))
            except BlockingIOError:
                ready = False
            # the progress bar's line: cleared on a terminal, else ended
            sys.stderr.write("\r\033[K" if sys.stderr.isatty() else "\n")
            print(f"residual-pack: {interrupted_line(out, students, ready)}",
                  file=sys.stderr, flush=True)
            return 128 + stopped.args[0]
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        os.close(ready_r)


def _end_tree(pid: int) -> None:
    """SIGKILL the process `pid` leads, its group, and every process below it: the
    kernels start sessions of their own, and would otherwise outlive it for a moment and
    print that their parent is gone."""
    import signal

    below = {pid}
    try:
        parents: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    with open(f"/proc/{entry.name}/stat", encoding="ascii",
                              errors="replace") as f:
                        parents.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]),
                                           []).append(int(entry.name))
        todo = [pid]
        while todo:
            for child in parents.get(todo.pop(), []):
                if child not in below:
                    below.add(child)
                    todo.append(child)
    except OSError:  # no /proc: the group only
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for p in below:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


def interrupted_line(out: str | os.PathLike[str], students: Sequence[str], ready: bool) -> str:
    """The one line a grading run stopped by Ctrl-C ends with: what was kept, how to go
    on. `ready`: whether the run's journal was in place."""
    from autograder.grading.journal import students_kept

    if not ready:
        return ("interrupted before grading began; nothing graded by this run. Run the same "
                "command again to start")
    kept = len(students_kept(out) & set(students))
    return (f"interrupted: {kept} of {len(students)} student(s) graded and kept in {out}; "
            f"run the same command again to grade the other {len(students) - kept} "
            f"(--fresh grades everyone again)")


def _child(work: Callable[[Callable[[], object]], int], parent: int, ready_r: int,
           ready_w: int) -> None:
    import ctypes
    import signal
    import traceback

    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        os.close(ready_r)
        os.setpgid(0, 0)  # out of the terminal's foreground group: no Ctrl-C here
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(OSError, AttributeError):  # die with the waiting process
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
        if os.getppid() != parent:  # it was gone already
            os._exit(1)
        code = work(lambda: os.write(ready_w, b"1"))
    except _Stop:
        code = 130
    except (CourseError, SandboxError) as exc:
        print(f"residual-pack: {exc}", file=sys.stderr)
        code = 2
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 (as Python would: the traceback, status 1)
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def cmd_demo(args: argparse.Namespace, course: Path) -> int:
    from autograder.authoring.demo import demo_problems, run_demo
    from autograder.grading.report import score_table

    start = time.perf_counter()
    grader, results, about, csv, out = run_demo(course, args.assignment, args.out,
                                                jobs=args.jobs, progress=_progress)
    _say("")
    _say(f"{grader.assignment}: a class of three, graded by nbgrader")
    for student, what in about.items():
        _say(f"  {student}: {what}")
    _say("")
    _say(score_table(grader, results))
    _say(f"\ngrades: {csv}\nfeedback (under {out / 'course'}):")
    _feedback_list(results, out / "course")
    problems = demo_problems(grader, results)
    for p in problems:
        _say(f"DEMO FAILED: {p}")
    _say(f"done in {time.perf_counter() - start:.1f} s")
    return 1 if problems else 0


# the smallest limits `grade` takes: far below them no kernel starts, and every student
# would be "not graded" for a reason that names the kernel ("Kernel died before replying
# to kernel_info"), not the option. Measured with 01_residual_stack in the full sandbox:
# the kernel died at --memory 24 and --processes 12, and started at 32 and 16
MIN_MEMORY_MIB = 64
MIN_PROCESSES = 16


def _at_least(low: float, kind: Callable[[str], Any] = int) -> Callable[[str], Any]:
    """An argparse type: a number of `kind`, at least `low`."""
    def read(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{text} is less than {low:g}, the least it "
                                             f"may be")
        return value
    read.__name__ = kind.__name__
    return read


def _jobs_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-j", "--jobs", type=int, default=default_jobs(),
                   help="submissions graded at a time, each in its own process and kernel "
                        "(default: %(default)s, one per core)")


def cmd_progress(args: argparse.Namespace, course: Path) -> int:
    from autograder.grading.course import EXERCISES
    from autograder.student.progress import format_table, no_folder, not_found, progress

    folder = Path(args.folder) if args.folder else course / EXERCISES
    if not folder.is_dir():
        raise CourseError(no_folder(folder, default=False))
    if (why := not_found(folder, args.assignments)) is not None:
        raise CourseError(why)
    rows = progress(folder, args.assignments or None, timeout=args.timeout, say=_say,
                    jobs=args.jobs, fresh=args.fresh)
    if not rows:
        raise CourseError(f"no assignment notebooks with graded tests under {folder}")
    _say(format_table(rows))
    return 0


def cmd_fingerprints(args: argparse.Namespace, course: Path) -> int:
    from autograder.authoring.fingerprints import regenerate

    names = check_assignments(course, args.assignments)
    start = time.perf_counter()
    failed = regenerate(course, names, jobs=args.jobs, write=not args.check, say=_say)
    _say(f"fingerprints {'FAILED for ' + ', '.join(failed) if failed else 'ok'} "
         f"in {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


def cmd_stored(args: argparse.Namespace, course: Path | None) -> int:
    from autograder.authoring.stored import regenerate

    apart = regenerate(write=not args.check, say=_say)
    _say(f"stored {'FAILED: ' + str(len(apart)) + ' entries differ' if apart else 'ok'}")
    return 1 if apart else 0


def cmd_student_release(args: argparse.Namespace, course: Path) -> int:
    from autograder.authoring.release import build

    names = check_assignments(course, args.assignments)
    solved = check_assignments(course, args.solved) if args.solved else []
    build(course, args.folder, names, say=_say, solved=solved)
    _say(f"student release in {args.folder}: hand out this folder (see its README.md)")
    return 0


def cmd_lite(args: argparse.Namespace, course: Path) -> int:
    from autograder.authoring.lite import build

    build(course, args.folder, args.assignments, pyodide_url=args.pyodide_url, say=_say)
    _say(f"JupyterLite site in {args.folder}: serve the folder as it is (see its "
         f"files/START.md); `{shlex.quote(sys.executable)} -m http.server -d "
         f"{shlex.quote(str(args.folder))}` tries it locally")
    return 0


def cmd_check_exchange(args: argparse.Namespace, course: Path | None) -> int:
    from autograder.grading.reach import check

    status, message = check(user=args.user)
    print(f"residual-pack: {message}", file=sys.stderr if status else sys.stdout)
    return status


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="residual-pack",
        description="Generate, self-check and grade the residual connections exercise pack "
                    "(with nbgrader).",
    )
    p.add_argument("--course", help="the course directory (default: found from here)")
    p.add_argument("-v", "--verbose", action="store_true", help="show nbgrader's log")
    sub = p.add_subparsers(dest="command", required=True)
    # --course and -v also after the command (`residual-pack grade --course C A DIR`);
    # SUPPRESS keeps a value given before the command when none is given after it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", default=argparse.SUPPRESS,
                        help="the course directory (default: found from here)")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show nbgrader's log")
    sub_add_parser = sub.add_parser

    def add_parser(*args: Any, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.setdefault("parents", []).append(common)
        return sub_add_parser(*args, **kwargs)

    sub.add_parser = add_parser  # type: ignore[method-assign]

    g = sub.add_parser(
        "generate",
        help="write exercises/ and solutions/ from source/ for the assignments that changed "
             "since their last generation (solutions/generated.json); an assignment whose "
             "notebooks need a module this Python lacks (torch) is refused, a solution whose "
             "run shows an error or a timed-out cell is not written; exit 1 if either")
    g.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    g.add_argument("--force", action="store_true",
                   help="generate them even when nothing changed since the last generation")
    g.set_defaults(run=cmd_generate)

    d = sub.add_parser(
        "check-drift",
        help="regenerate in a temporary copy; fail if exercises/ or solutions/ differ, if "
             "autograder/kernel/fingerprints.py was made from other mutants or notebooks, or "
             "a committed solution fails the notebook guard (errors, timeouts, machine "
             "paths, data fallbacks, quoted figures no output shows)",
    )
    d.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    d.set_defaults(run=cmd_check_drift)

    s = sub.add_parser(
        "selfcheck", help="validator + autograde the solution, the stub, the mutants"
    )
    s.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    s.add_argument("--mutant", action="append", metavar="WORDS",
                   help="grade only the mutants whose name contains WORDS (repeatable)")
    s.add_argument("--no-validate", action="store_true", help="skip nbgrader's validator")
    s.add_argument("--no-feedback", action="store_true", help="skip feedback and its leak check")
    s.add_argument("--workdir", help="work in this folder (kept) instead of a temporary one")
    s.add_argument("--keep", action="store_true", help="keep the temporary work folder")
    s.add_argument("--whole-notebooks", action="store_true",
                   help="run every code cell, also the course's cells that grading leaves "
                        "out (after the last autograded test, or tagged skip-when-grading); "
                        "slower, the same scores")
    _jobs_option(s)
    s.set_defaults(run=cmd_selfcheck)

    gr = sub.add_parser(
        "grade", help="grade a folder of submissions",
        description="Grade SUBMISSIONS, a folder holding <student>/<assignment>/<nb>.ipynb, "
                    "<student>/<nb>.ipynb or <student>.ipynb. Only notebooks are graded; each "
                    "student separately, in a sandboxed kernel with time, memory and process "
                    "limits. Writes an nbgrader course folder to --out with grades.csv, "
                    "feedback/<student>/<assignment>/<nb>.html and the class report "
                    "(report.txt, report.csv, report.json). Exits 1 when a graded "
                    "student's feedback page could not be made.",
    )
    gr.add_argument("assignment")
    gr.add_argument("submissions")
    gr.add_argument("--out", help="output folder (default: runs/grade-ASSIGNMENT); an "
                                  "interrupted run there (Ctrl-C, killed) is resumed")
    gr.add_argument("--fresh", action="store_true",
                    help="grade everyone again, even when --out holds an interrupted run")
    gr.add_argument("--cell-timeout", type=_at_least(0), metavar="S",
                    help="seconds a cell may run (default: the course config's Execute.timeout)")
    gr.add_argument("--notebook-timeout", type=_at_least(1), default=Limits.notebook_timeout,
                    metavar="S",
                    help="seconds a whole notebook may run (default: %(default)s)")
    gr.add_argument("--memory", type=_at_least(MIN_MEMORY_MIB), default=Limits.memory >> 20,
                    metavar="MiB",
                    help="memory per kernel process (default: %(default)s)")
    gr.add_argument("--processes", type=_at_least(MIN_PROCESSES), default=Limits.processes,
                    metavar="N",
                    help="processes and threads per kernel (default: %(default)s)")
    gr.add_argument("--cpus", type=_at_least(0, float), default=Limits.cpus, metavar="N",
                    help="CPU per kernel in cores, a cgroup quota where the sandbox can set "
                         "one (as root; 0: none; default: %(default)s)")
    gr.add_argument("--no-feedback", action="store_true", help="skip the feedback pages")
    gr.add_argument("--cluster", metavar="local|ADDRESS",
                    help="grade on Dask distributed (the 'dask' extra): 'local' starts a "
                         "LocalCluster of -j worker processes; tcp://HOST:8786 or "
                         "tls://HOST:8786 uses a running scheduler (default: local processes, "
                         "no Dask)")
    gr.add_argument("--db-url", metavar="URL",
                    help="the gradebook, as nbgrader's db_url, e.g. "
                         "postgresql+psycopg2://USER@HOST/DB (default: SQLite in --out; also "
                         f"read from ${DB_URL_VARIABLE}, which keeps a password off the "
                         "command line). Only this process writes it on a cluster")
    gr.add_argument("--duedate", metavar="WHEN",
                    help="the assignment's due date, set in the gradebook as `nbgrader db "
                         "assignment add --duedate` does, e.g. '2026-12-01 17:00:00 UTC' "
                         "(default: the run's gradebook's own, else the course's own "
                         "gradebook's, read only; with none, the run says so loudly when "
                         "submissions carry timestamp.txt). A submission whose "
                         "timestamp.txt (nbgrader's, beside the notebooks) is later gets the "
                         "course config's late penalty (LateSubmissionPlugin: 'zero')")
    _jobs_option(gr)
    gr.set_defaults(run=cmd_grade)

    dm = sub.add_parser("demo", help="grade a made-up class: solution, stub, partly wrong")
    dm.add_argument("assignment", nargs="?", help="default: 01_residual_stack")
    dm.add_argument("--out", help="output folder (default: a new temporary folder)")
    _jobs_option(dm)
    dm.set_defaults(run=cmd_demo)

    pr = sub.add_parser(
        "progress", help="run your notebooks' visible tests: passed, failing, not started",
        description="Run each assignment notebook under FOLDER (default: exercises/) as "
                    "saved, in a fresh kernel at the graded sizes, and print per task: "
                    "passed, failing (with the message), not started or not run, with its "
                    "points. Only the visible tests run (a released notebook has no others).")
    from autograder.student.progress import add_arguments

    add_arguments(pr)
    pr.set_defaults(run=cmd_progress)

    fp = sub.add_parser(
        "fingerprints", help="run each mutant on the visible tests; write the table that "
                             "names a known mistake in a failing check's message",
        description="Run the solution and every registered mutant of each ASSIGNMENT (all "
                    "by default) on the visible tests (the release notebook) and write "
                    "autograder/kernel/fingerprints.py: for each check a mutant fails, the "
                    "fingerprint of what it observed, with the mutant's hint. Fails when a "
                    "mutant fails a visible test that names no mistake.")
    fp.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    fp.add_argument("--check", action="store_true",
                    help="write nothing; fail when the committed table differs from this run")
    _jobs_option(fp)
    fp.set_defaults(run=cmd_fingerprints)

    ce = sub.add_parser(
        "check-exchange",
        help="fail when the students' unix accounts cannot run this Python and the pack "
             "(for nbgrader's exchange on a shared host)",
        description="Under nbgrader's exchange each student runs nbgrader and the course's "
                    "kernel as their own unix user. This runs this Python as a student "
                    "(--user STUDENT, or else `nobody`) and imports the pack, nbgrader and "
                    "ipykernel; nothing else is started. When that fails it names the "
                    "path the student was refused and says what to do. Run it as root, "
                    "with the Python the students' kernels use "
                    "(/opt/residuals/bin/residual-pack check-exchange).")
    ce.add_argument("--user", metavar="STUDENT",
                    help="try as this student's unix user (default: nobody, uid 65534)")
    ce.set_defaults(run=cmd_check_exchange, needs_course=False)

    st = sub.add_parser(
        "stored", help="write the numbers the visible tests compare with "
                       "(autograder/kernel/stored.py, gptchecks.json, torchchecks.json), "
                       "computed from the model answers",
        description="A student's install holds no model answer, so the visible tests of "
                    "assignments 2-6, 8 and 9 compare with numbers computed once from the "
                    "answers (autograder.answers, microgpt, torchtrack) and stored "
                    "kernel-side. Run it after changing an answer or a visible test's "
                    "inputs, before `residual-pack generate` (the solution's run needs "
                    "them): it reads the visible tests from source/. Entries that still "
                    "agree are kept as committed. Without torch, torchchecks.json is left "
                    "as it is.")
    st.add_argument("--check", action="store_true",
                    help="write nothing; fail when the stored numbers and the answers part")
    st.set_defaults(run=cmd_stored, needs_course=False)

    sr = sub.add_parser(
        "student-release", help="write what a student installs into DIR: a wheel with the "
                                "engine and the kernel side, and the released notebooks",
        description="Write into DIR (new or empty) what a student gets: a wheel with "
                    "microgpt, torchtrack and autograder.kernel (no model answers, no "
                    "grader), the released notebooks of each ASSIGNMENT (all by default) "
                    "from exercises/, the config Validate uses and a README. Fails when "
                    "anything of the instructor's ends up in it.")
    sr.add_argument("folder", metavar="DIR")
    sr.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    sr.add_argument("--solved", nargs="+", metavar="ASSIGNMENT", default=[],
                    help="also a wheel of each ASSIGNMENT's answers held back from the "
                         "engine (02, 05, 06, 08, 09), to hand out after its due date "
                         "(03 and 04 build on 02's, 06 on 05's)")
    sr.set_defaults(run=cmd_student_release)

    li = sub.add_parser(
        "lite", help="build a JupyterLite site into DIR: the torch-free notebooks in the "
                     "browser, nothing to install",
        description="Build into DIR (new or empty), with JupyterLite's own build and its "
                    "Pyodide kernel, a static site with the released notebooks of each "
                    "ASSIGNMENT (all but the torch track by default), the student wheel "
                    "(no model answers), the wheels of the data the notebooks read and a "
                    "start page (START.md). Needs the `lite` extra. See docs/lite.md in the "
                    "pack's repository.")
    li.add_argument("folder", metavar="DIR")
    li.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    li.add_argument("--pyodide-url", metavar="URL",
                    help="where the kernel loads Pyodide from: the URL of its pyodide.mjs "
                         "(default: the Pyodide kernel's own, a CDN)")
    li.set_defaults(run=cmd_lite)
    return p


def course_note(course: str | os.PathLike[str], given: str | None,
                here: str | os.PathLike[str] | None = None) -> str | None:
    """What to say about the course a command uses, when it is not the obvious one: not
    given with --course and not the folder the command runs in or above it (the checkout
    the pack was installed from). None when there is nothing to say."""
    if given is not None:
        return None
    here = Path(here or Path.cwd()).resolve()
    course = Path(course).resolve()
    if here == course or course in here.parents:
        return None
    return (f"no course directory at or above {here}; using {course}, the checkout this "
            f"pack was installed from (pass --course to choose the course)")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    quiet_nbgrader(args.verbose)
    try:
        if not getattr(args, "needs_course", True):
            return args.run(args, None)
        course = find_course(args.course)
        note = course_note(course, args.course)
        if note:
            print(f"residual-pack: {note}", file=sys.stderr)
        return args.run(args, course)
    except (CourseError, SandboxError) as exc:
        print(f"residual-pack: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
