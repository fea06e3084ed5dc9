"""Grading a class: each student autograded on their own by nbgrader, then feedback and a CSV.

A folder of submissions may hold, for an assignment `A` with notebook `N.ipynb`:

    SUBMISSIONS/<student>/A/N.ipynb   nbgrader's own layout (what `nbgrader collect` makes)
    SUBMISSIONS/<student>/N.ipynb     one folder per student
    SUBMISSIONS/<student>.ipynb       one file per student (assignments with one notebook)

A student folder whose only notebook has another name (`N (1).ipynb`) counts as `N.ipynb`
when the assignment has a single notebook. Only notebooks are graded: every other file a
student hands in (an `autograder.py`, a `microgpt/` folder) is left out and reported, and
symbolic links are not followed.

Each student is graded on their own (one `NbGraderAPI.autograde` call), so a notebook that
cannot be graded costs that student only, with the reason in the report:

1. `intake.take_in` reads what was handed in and either gives the reason it cannot be
   graded (empty, not JSON, not a notebook, another assignment's) or repairs it against
   the release (deleted, moved, retyped or edited cells, damaged metadata, bad bytes);
2. nbgrader's autograde runs in the grading process, but its Execute step is
   `sandbox.SandboxedExecute`: the notebook runs in a kernel inside a throwaway sandbox,
   with limits, and the graded test cells in the kernel's hardened runner (gradekernel);
3. nbgrader writes the scores to the gradebook, from the grading process only.

`run_grading` grades a whole folder, `jobs` students at a time (worker processes, one
sandbox uid each), keeps a journal so that an interrupted run resumes where it stopped,
and writes the class report (report.txt, report.csv, report.json) beside nbgrader's
grades.csv.
"""

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from .cells import is_autograded_test, nbgrader_meta
from .course import (
    EXERCISES,
    SOURCE,
    CourseError,
    failure_reason,
    notebook_paths,
    read_notebook,
)
from .report import lost_points, write_report


@dataclass
class CellScore:
    notebook: str
    cell: str  # the grade_id
    score: float
    max_score: float
    autograded: bool  # an autograder test cell (not an answer graded by hand)


@dataclass
class StudentResult:
    student: str
    graded: bool = False
    reason: str = ""  # why the student was not graded
    cells: list = field(default_factory=list)  # CellScore, in notebook order
    feedback: list = field(default_factory=list)  # HTML files
    notes: list = field(default_factory=list)  # things worth knowing, not failures
    seconds: float = 0.0  # autograde wall time
    log: str = ""  # nbgrader's log of the autograde call
    problems: list = field(default_factory=list)  # what cost points besides wrong answers
    flags: list = field(default_factory=list)  # code a human should look at
    withheld: list = field(default_factory=list)  # why the autograded score awaits review
    withheld_score: float = 0.0  # what it would have been
    runs: dict = field(default_factory=dict)  # notebook -> sandbox.NotebookRun as a dict

    def score(self, autograded_only=True):
        cells = [c for c in self.cells if c.autograded or not autograded_only]
        return sum(c.score for c in cells), sum(c.max_score for c in cells)

    def cell(self, grade_id):
        for c in self.cells:
            if c.cell == grade_id:
                return c
        return None

    def to_dict(self):
        data = asdict(self)
        data["feedback"] = [str(p) for p in self.feedback]
        return data

    @classmethod
    def from_dict(cls, data):
        data = dict(data)
        data["cells"] = [CellScore(**c) for c in data.get("cells", [])]
        data["feedback"] = [Path(p) for p in data.get("feedback", [])]
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


# ---------------------------------------------------------------- submissions folder


def student_id(name):
    """(the student id for a file or folder `name`, a note or ""): the name itself when it
    is plain text (letters, digits, ``._@+-`` and spaces, at most 100 characters), else
    `student-` and a digest of its bytes, so that any name is graded and reported."""
    ok = (0 < len(name) <= 100 and name == name.strip() and not name.startswith(".")
          and all(ch.isalnum() or ch in "._@+- " for ch in name)
          and not any(0xD800 <= ord(ch) <= 0xDFFF for ch in name))
    if ok:
        return name, ""
    raw = os.fsencode(name)
    made = "student-" + hashlib.sha256(raw).hexdigest()[:10]
    return made, f"the name {raw!r} is not plain text; graded as {made}"


def find_submissions(folder, assignment, notebooks):
    """{student: ({notebook name: path}, [notes])} for every student in `folder`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CourseError(f"{folder} is not a folder of submissions")
    found = {}
    for entry in sorted(folder.iterdir(), key=lambda p: os.fsencode(p.name)):
        if entry.name.startswith((".", "_")):
            continue
        found_before = set(found)
        if entry.is_symlink():  # it could point at anything, another student's work included
            found[entry.name.removesuffix(".ipynb")] = (
                {}, [f"{entry.name} is a symbolic link; links are not followed"])
            continue
        if entry.is_file() and entry.suffix == ".ipynb":
            if len(notebooks) != 1:
                found[entry.stem] = (
                    {},
                    [f"{entry.name}: one file per student works only for one-notebook "
                     f"assignments; {assignment} has {notebooks}"],
                )
            else:
                found[entry.stem] = ({notebooks[0]: entry}, [])
        elif entry.is_dir():
            inner = entry / assignment if (entry / assignment).is_dir() else entry
            found[entry.name] = _match_notebooks(inner, notebooks)
        for raw in set(found) - found_before:  # the id the gradebook and the report use
            made, note = student_id(raw)
            if note:
                files, notes = found.pop(raw)
                found[made] = (files, [note, *notes])
    return found


def _match_notebooks(folder, notebooks):
    notes = []
    files = {}
    for p in notebook_paths(folder):
        if p.is_symlink():
            notes.append(f"{p.name} is a symbolic link; links are not followed")
        else:
            files[p.stem] = p
    matched = {name: files.pop(name) for name in notebooks if name in files}
    if len(notebooks) == 1 and not matched and len(files) == 1:
        (stem, path), = files.items()
        matched[notebooks[0]] = path
        files.clear()
        notes.append(f"graded {path.name} as {notebooks[0]}.ipynb")
    if files:
        notes.append("ignored notebook(s) not in the assignment: "
                     + ", ".join(sorted(p.name for p in files.values())))
    others = sorted(
        str(p.relative_to(folder))
        for p in _walk_files(folder)
        if p.suffix != ".ipynb" and ".ipynb_checkpoints" not in p.parts
    )
    if others:
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        notes.append(f"left out {len(others)} file(s) that are not notebooks: {shown}")
    return matched, notes


def _walk_files(folder, limit=10000):
    """Files under `folder` (links not followed), at most `limit` of them."""
    count = 0
    for root, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            yield Path(root) / name
            count += 1
            if count >= limit:
                return


# ---------------------------------------------------------------- the grader


HANDED_IN = "handed-in"  # the work course keeps what each student handed in, byte for byte


class Grader:
    """One assignment graded in a work course: release generated once, then each student
    submitted, autograded and given feedback on their own.

    With a `sandbox` (`sandbox.Sandbox`), notebooks run in sandboxed kernels with the
    hardened test runner; without one, in nbgrader's own kernels (trusted notebooks only:
    the instructor's, or the control runs of the tests)."""

    def __init__(self, work, assignment, generate=True, sandbox=None):
        self.work = work
        self.assignment = assignment
        self.sandbox = sandbox
        if sandbox is not None:
            from .reference_run import reference_records
            from .sandbox.channel import CHANNEL

            work.use_sandbox()
            CHANNEL.use(sandbox)
            if assignment not in sandbox.references:
                sandbox.references[assignment] = reference_records(
                    work.path("source", assignment), assignment, work.path(".grading"),
                    timeout=sandbox.limits.cell_timeout)
        if generate:
            work.generate_assignment(assignment)
        self.release = work.path(EXERCISES, assignment)
        if sandbox is not None:
            sandbox.add_release(assignment, self.release)
        self.notebooks = [p.stem for p in notebook_paths(self.release)]
        self.autograded = {}  # (notebook, grade_id) -> True for autograder test cells
        self.order = []  # (notebook, grade_id) of graded cells in notebook order
        self.answer_cells = set()  # (notebook, grade_id) of the students' answer cells
        for path in notebook_paths(work.path("source", assignment)):
            for cell in read_notebook(path).cells:
                meta = nbgrader_meta(cell)
                if meta.get("solution"):
                    self.answer_cells.add((path.stem, meta["grade_id"]))
                if meta.get("grade"):
                    key = (path.stem, meta["grade_id"])
                    self.order.append(key)
                    self.autograded[key] = bool(is_autograded_test(cell))
        self._foreign = None

    def release_notebook(self, name):
        return read_notebook(self.work.path(EXERCISES, self.assignment, f"{name}.ipynb"))

    def submission_folder(self, student):
        return self.work.path("submitted", student, self.assignment)

    def handed_in_folder(self, student):
        return self.work.path(HANDED_IN, student, self.assignment)

    def submit(self, student, notebooks):
        """Hand in `notebooks` ({name: path or NotebookNode}) as `student`'s submission."""
        dest = self.submission_folder(student)
        kept = self.handed_in_folder(student)
        for folder in (dest, kept):
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir(parents=True)
        for name, nb in notebooks.items():
            target = kept / f"{name}.ipynb"
            if isinstance(nb, (str, Path)):
                shutil.copyfile(nb, target)  # bytes as handed in
            else:
                nbformat.write(nb, str(target))
            shutil.copyfile(target, dest / f"{name}.ipynb")
        return dest

    def foreign_ids(self):
        """{other assignment: its grade ids}, to say whose notebook a stray one is."""
        if self._foreign is None:
            from .course import assignments

            self._foreign = {}
            for other in assignments(self.work.course):
                if other == self.assignment:
                    continue
                ids = set()
                for path in notebook_paths(self.work.course / SOURCE / other):
                    try:
                        ids |= {nbgrader_meta(c).get("grade_id") for c in read_notebook(path).cells}
                    except Exception:  # noqa: BLE001 (an unreadable source is skipped)
                        continue
                ids.discard(None)
                self._foreign[other] = ids
        return self._foreign

    def take_in(self, student, result):
        """Read and repair what `student` handed in (see `intake`); the repaired notebooks
        go where nbgrader reads submissions. False when nothing can be graded."""
        from .intake import take_in

        folder = self.submission_folder(student)
        kept = self.handed_in_folder(student)
        handed = {p.stem: p for p in notebook_paths(kept)} if kept.is_dir() else \
            {p.stem: p for p in notebook_paths(folder)}
        missing = [n for n in self.notebooks if n not in handed]
        if len(missing) == len(self.notebooks):
            result.reason = "no notebook handed in"
            return False
        if missing:
            result.notes.append("missing notebook(s), scored zero: " + ", ".join(missing))
        limit = self.sandbox.limits.notebook_bytes if self.sandbox else None
        problems = []
        repaired = {}
        for name, path in handed.items():
            if name not in self.notebooks:
                continue
            size = path.stat().st_size
            if limit and size > limit:
                problems.append(f"{path.name} is {size / (1 << 20):.1f} MiB, more than the "
                                f"{limit / (1 << 20):g} MiB a notebook may be")
                continue
            intake = take_in(path.read_bytes(), path.name, self.release_notebook(name),
                             self.assignment, self.foreign_ids(), limit)
            if intake.problem:
                problems.append(intake.problem)
                continue
            many = len(self.notebooks) > 1
            result.notes += [f"{name}: {n}" if many else n for n in intake.notes]
            result.flags += [f"{name}: {n}" if many else n for n in intake.flags]
            result.withheld += [f"{name}: {n}" if many else n for n in intake.withhold]
            repaired[name] = intake.notebook
        if problems:
            result.reason = "; ".join(problems)
            return False
        for name, nb in repaired.items():
            nbformat.write(nb, str(folder / f"{name}.ipynb"))
        return True

    def grade(self, student, feedback=True):
        """Autograde what `student` handed in; then feedback. Never raises for a bad
        submission: the result says why it was not graded."""
        result = StudentResult(student)
        if not self.take_in(student, result):
            self._register(student)
            return result
        api = self.work.api()
        start = time.perf_counter()
        outcome = api.autograde(self.assignment, student, force=True, create=True)
        result.seconds = time.perf_counter() - start
        result.log = outcome.get("log", "")
        if self.sandbox is not None:
            self._collect_runs(student, result)
        if not outcome["success"]:
            result.reason = "nbgrader could not grade it: " + failure_reason(outcome)
            self._register(student)
            return result
        result.graded = True
        result.cells = self.scores(student)
        if self.sandbox is not None:
            result.withheld += tampering_seen(result)
        if result.withheld:
            self.withhold(student, result)
        result.problems += lost_points(result, self.sandbox.limits if self.sandbox else None,
                                       self.autograded)
        if feedback:
            done = api.generate_feedback(self.assignment, student, force=True)
            if not done["success"]:
                result.notes.append("no feedback: " + failure_reason(done))
            result.feedback = sorted(
                self.work.path("feedback", student, self.assignment).glob("*.html")
            )
        return result

    def _collect_runs(self, student, result):
        from .sandbox.channel import CHANNEL

        for name in self.notebooks:
            run = CHANNEL.take(student, name)
            if run is not None:
                result.runs[name] = run.to_dict()

    def withhold(self, student, result):
        """Hold `student`'s autograded points back until a person looks (the reasons are
        in `result.withheld`): in the gradebook each autograded cell that scored is set to
        0 and marked as needing a manual grade, which formgrader lists; the grader gives
        the points back there."""
        result.withheld_score = result.score()[0]
        if not result.withheld_score:
            return
        with self.work.api().gradebook as gb:
            submission = gb.find_submission(self.assignment, student)
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if self.autograded.get((notebook.name, grade.name)) and grade.auto_score:
                        grade.auto_score = 0.0
                        grade.needs_manual_grade = True
            gb.db.commit()
        result.cells = self.scores(student)

    def _register(self, student):
        """Put an ungraded student in the gradebook, so the CSV lists them (with zero)."""
        with self.work.api().gradebook as gb:
            gb.update_or_create_student(student)

    def scores(self, student):
        with self.work.api().gradebook as gb:
            submission = gb.find_submission(self.assignment, student)
            found = {}
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    found[(notebook.name, grade.name)] = (
                        float(grade.score or 0.0),
                        float(grade.max_score or 0.0),
                    )
        return [
            CellScore(nb, gid, *found[(nb, gid)], self.autograded[(nb, gid)])
            for nb, gid in self.order
            if (nb, gid) in found
        ]

    def export_csv(self, path):
        """nbgrader's CSV export of this assignment's grades."""
        from nbgrader.plugins import CsvExportPlugin

        api = self.work.api()
        plugin = CsvExportPlugin(parent=api)
        plugin.to = str(path)
        plugin.assignment = [self.assignment]
        with api.gradebook as gb:
            plugin.export(gb)
        return Path(path)


# changes the kernel undid before a test that an honest notebook may make
HARMLESS_CHANGES = ("sys.path",)


def tampering_seen(result):
    """Reasons to withhold a score from what the graded kernels saw: a test during which
    the code it called changed what the tests rely on, or changes that earlier cells
    made to the grader's modules, the engine or the interpreter (undone before the test)."""
    reasons = []
    for run in result.runs.values():
        for c in run.get("cells", []):
            if c.get("kind") != "test":
                continue
            changed = [x for x in c.get("changed", []) if not x.startswith(HARMLESS_CHANGES)]
            restored = [x for x in c.get("restored", []) if not x.startswith(HARMLESS_CHANGES)]
            if changed:
                reasons.append(f"while {c['grade_id']} ran, the code it called changed "
                               + ", ".join(changed[:6]))
            if restored:
                reasons.append(f"before {c['grade_id']} ran, the grader undid changes earlier "
                               f"cells made to " + ", ".join(restored[:6]))
    seen = set()
    return [r for r in reasons if not (r in seen or seen.add(r))][:10]


# ---------------------------------------------------------------- a whole folder


def _quiet_worker():
    import logging
    import threading
    import warnings

    log = logging.getLogger("residual_pack.nbgrader")
    log.propagate = False
    log.addHandler(logging.NullHandler())
    warnings.filterwarnings("ignore", message=".*not in session.*")
    parent = os.getppid()

    def orphaned():  # the grading run was killed: stop, do not finish on our own
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=orphaned, daemon=True).start()


def _grade_in_worker(course, root, assignment, student, feedback, sandbox=None):
    from .course import WorkCourse

    work = WorkCourse(course, root, [assignment], copy=False)
    grader = Grader(work, assignment, generate=False, sandbox=sandbox)
    return grader.grade(student, feedback=feedback)


# below this many submissions, starting worker processes (each imports nbgrader, a few
# seconds) costs more than grading two at a time saves
MIN_FOR_WORKERS = 6


def grade_all(grader, students, feedback=True, jobs=1, progress=None, on_result=None):
    """Grade the handed-in `students`, each on their own, `jobs` at a time (in separate
    processes sharing the gradebook). Results come back in the order of `students`;
    `on_result(result)` is called in this process as each one is done."""
    students = list(students)
    results = {}

    def done(student, result):
        results[student] = result
        if on_result:
            on_result(result)
        if progress:
            progress(result)

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

    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    work = grader.work
    context = multiprocessing.get_context("spawn")  # no forked kernels, loops or sockets
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_quiet_worker) as pool:
        futures = {
            pool.submit(_grade_in_worker, work.course, work.root, grader.assignment, s,
                        feedback, grader.sandbox): s
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
    return [results[s] for s in students]


def submission_hash(notebooks):
    """A fingerprint of what a student handed in ({name: path})."""
    digest = hashlib.sha256()
    for name in sorted(notebooks):
        digest.update(name.encode() + b"\0")
        with open(notebooks[name], "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


class Journal:
    """`.grading/journal.jsonl` in the work course: one line per student done, written
    (and flushed to disk) by the coordinating process once the student's grades are in
    the gradebook. A run that is killed resumes from it: a student whose line is there,
    with the same submission fingerprint, is not graded again."""

    def __init__(self, root, header):
        self.folder = Path(root) / ".grading"
        self.path = self.folder / "journal.jsonl"
        self.header = header
        self.done = {}  # student -> (hash, StudentResult)

    def load(self):
        """Read an earlier run's journal; False (and nothing read) if it is not for the
        same assignment, sources and settings."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False
        if text and not text.endswith("\n"):  # the kill cut the last line short: drop it
            text = text[: text.rfind("\n") + 1]
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        lines = text.splitlines()
        try:
            if json.loads(lines[0]) != self.header:
                return False
        except (IndexError, ValueError):
            return False
        for line in lines[1:]:
            try:  # a line cut short by the kill is simply not there
                entry = json.loads(line)
                self.done[entry["student"]] = (entry["hash"],
                                               StudentResult.from_dict(entry["result"]))
            except (ValueError, KeyError, TypeError):
                continue
        return True

    def start(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.header) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def append(self, result, digest):
        entry = {"student": result.student, "hash": digest, "result": result.to_dict()}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done[result.student] = (digest, result)


def run_fingerprint(course, assignment, sandbox):
    """What the scores depend on besides the submissions: the assignment's source, the
    limits and the isolation level."""
    digest = hashlib.sha256()
    folder = Path(course) / SOURCE / assignment
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    if sandbox is not None:
        digest.update(json.dumps(asdict(sandbox.limits), sort_keys=True).encode())
        digest.update(sandbox.level.encode())
    return digest.hexdigest()[:16]


def grade_folder(grader, submissions, jobs=1, progress=None, feedback=True, journal=None):
    """Grade every student in the folder `submissions` with `grader`, each on their own,
    and export nbgrader's grades.csv into the work course. Returns (results, csv path).
    With a `journal`, students it has as done (same submission) are not graded again."""
    found = find_submissions(submissions, grader.assignment, grader.notebooks)
    if not found:
        raise CourseError(f"no submissions in {submissions}")
    digests = {s: submission_hash(nbs) for s, (nbs, _) in found.items()}
    earlier = {}
    if journal is not None:
        earlier = {s: r for s, (h, r) in journal.done.items()
                   if s in found and h == digests[s]}
    todo = [s for s in found if s not in earlier]
    for student in todo:
        grader.submit(student, found[student][0])

    def record(result):
        result.notes[:0] = found[result.student][1]
        if journal is not None:
            journal.append(result, digests[result.student])

    fresh = grade_all(grader, todo, feedback=feedback, jobs=jobs, progress=progress,
                      on_result=record)
    by_student = {r.student: r for r in fresh}
    by_student.update(earlier)
    results = [by_student[s] for s in found]
    csv = grader.export_csv(grader.work.path("grades.csv"))
    return results, csv


# nbgrader's outputs in a work course, cleared before a new run there
_RUN_OUTPUTS = ("submitted", "autograded", "feedback", "gradebook.db", "grades.csv",
                "exercises", "source", HANDED_IN, ".grading/journal.jsonl", "report.txt",
                "report.csv", "report.json")


def prepare_out(out, keep=False):
    """Make `out` ready to be a work course: new, empty, or one of our earlier runs
    (whose outputs are cleared, unless `keep`)."""
    from .course import CONFIG_FILE

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


def _lock(out):
    """Hold `out`'s run lock (until this process exits): one grading run at a time."""
    import fcntl

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


_LOCKS = []


def run_grading(course, assignment, submissions, out, jobs=1, progress=None, limits=None,
                fresh=False, feedback=True, isolate=True, say=None):
    """`residual-pack grade`: grade the folder `submissions` in the work course `out`.

    Every notebook runs in a sandbox (`limits`; see `sandbox`) unless `isolate` is False.
    A run interrupted earlier in `out` (same assignment, sources and limits) is resumed:
    students graded then are not graded again, unless `fresh`. Writes grades.csv and the
    class report. Returns (grader, results, grades.csv)."""
    import tempfile

    from .course import WorkCourse, jupyter_sandbox
    from .sandbox.limits import Limits
    from .sandbox.plan import Sandbox, remove_stale_roots

    say = say or (lambda *_: None)
    sandbox = None
    if isolate:
        remove_stale_roots()
    out = prepare_out(out, keep=True)
    _lock(out)
    if isolate:
        sandbox = Sandbox(limits or Limits())
    try:
        header = {"assignment": assignment,
                  "fingerprint": run_fingerprint(course, assignment, sandbox)}
        journal = Journal(out, header)
        resumed = not fresh and journal.load() and (out / EXERCISES / assignment).is_dir()
        if not resumed:
            journal.done.clear()
            prepare_out(out)
            journal.start()
        elif journal.done:
            say(f"resuming an interrupted run: {len(journal.done)} student(s) already graded "
                f"are not graded again")
        with tempfile.TemporaryDirectory(prefix="residual-pack-jupyter-") as home, \
                jupyter_sandbox(home):
            work = WorkCourse(course, out, [assignment])
            grader = Grader(work, assignment, generate=not resumed, sandbox=sandbox)
            if sandbox is not None:
                say(f"isolation: {sandbox.describe()}")
            results, csv = grade_folder(grader, submissions, jobs=jobs, progress=progress,
                                        feedback=feedback, journal=journal)
            header_text = f"{assignment}: {len(results)} submission(s)"
            if sandbox is not None:
                header_text += f"\nisolation: {sandbox.describe()}"
            write_report(grader, results, out, header_text)
    finally:
        if sandbox is not None:
            sandbox.close()
    return grader, results, csv
