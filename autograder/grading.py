"""Grading a class: each student autograded on their own by nbgrader, then feedback and a CSV.

A folder of submissions may hold, for an assignment `A` with notebook `N.ipynb`:

    SUBMISSIONS/<student>/A/N.ipynb   nbgrader's own layout (what `nbgrader collect` makes)
    SUBMISSIONS/<student>/N.ipynb     one folder per student
    SUBMISSIONS/<student>.ipynb       one file per student (assignments with one notebook)

A student folder whose only notebook has another name (`N (1).ipynb`) counts as `N.ipynb`
when the assignment has a single notebook. Only notebooks are graded: every other file a
student hands in (an `autograder.py`, a `microgpt/` folder) is left out and reported, so
nothing of theirs can stand in for the helpers the test cells import. The kernel also
runs with its working directory off sys.path (see `course.KERNEL_ARGUMENTS`).

Each student is one `NbGraderAPI.autograde` call, so a notebook nbgrader cannot grade
(malformed JSON, a copied graded cell, a kernel that dies) costs that student only; the
reason is reported and the rest of the class is graded.
"""

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .course import (
    EXERCISES,
    CourseError,
    failure_reason,
    is_autograded_test,
    nbgrader_meta,
    notebook_paths,
    read_notebook,
)


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

    def score(self, autograded_only=True):
        cells = [c for c in self.cells if c.autograded or not autograded_only]
        return sum(c.score for c in cells), sum(c.max_score for c in cells)

    def cell(self, grade_id):
        for c in self.cells:
            if c.cell == grade_id:
                return c
        return None


# ---------------------------------------------------------------- submissions folder


def find_submissions(folder, assignment, notebooks):
    """{student: ({notebook name: path}, [notes])} for every student in `folder`."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CourseError(f"{folder} is not a folder of submissions")
    found = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "_")):
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
    return found


def _match_notebooks(folder, notebooks):
    files = {p.stem: p for p in notebook_paths(folder)}
    notes = []
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
        for p in folder.rglob("*")
        if p.is_file() and p.suffix != ".ipynb" and ".ipynb_checkpoints" not in p.parts
    )
    if others:
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        notes.append(f"left out {len(others)} file(s) that are not notebooks: {shown}")
    return matched, notes


def notebook_problem(path):
    """Why nbgrader could not grade this notebook, or "" when it looks gradable."""
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{Path(path).name} is not a readable notebook ({type(exc).__name__}: {exc})"
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return f"{Path(path).name} is not a notebook (no list of cells)"
    try:
        nb = nbformat.from_dict(raw)
    except Exception as exc:  # noqa: BLE001 (any failure here is the notebook's)
        return f"{Path(path).name} is not a readable notebook ({exc})"
    ids = Counter(
        nbgrader_meta(c).get("grade_id")
        for c in nb.cells
        if nbgrader_meta(c).get("grade_id")
    )
    doubled = sorted(i for i, n in ids.items() if n > 1)
    if doubled:
        return (f"{Path(path).name}: graded cell(s) {', '.join(doubled)} appear more than "
                "once (a copied cell?); delete the copies and hand it in again")
    return ""


# ---------------------------------------------------------------- the grader


class Grader:
    """One assignment graded in a work course: release generated once, then each student
    submitted, autograded and given feedback on their own."""

    def __init__(self, work, assignment, generate=True):
        self.work = work
        self.assignment = assignment
        if generate:
            work.generate_assignment(assignment)
        self.release = work.path(EXERCISES, assignment)
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

    def release_notebook(self, name):
        return read_notebook(self.work.path(EXERCISES, self.assignment, f"{name}.ipynb"))

    def submission_folder(self, student):
        return self.work.path("submitted", student, self.assignment)

    def submit(self, student, notebooks):
        """Hand in `notebooks` ({name: path or NotebookNode}) as `student`'s submission."""
        dest = self.submission_folder(student)
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for name, nb in notebooks.items():
            target = dest / f"{name}.ipynb"
            if isinstance(nb, (str, Path)):
                shutil.copyfile(nb, target)  # bytes as handed in: nbgrader reads them
            else:
                nbformat.write(nb, str(target))
        return dest

    def grade(self, student, feedback=True):
        """Autograde what `student` handed in; then feedback. Never raises for a bad
        submission: the result says why it was not graded."""
        result = StudentResult(student)
        folder = self.submission_folder(student)
        handed_in = {p.stem: p for p in notebook_paths(folder)}
        missing = [n for n in self.notebooks if n not in handed_in]
        if len(missing) == len(self.notebooks):
            result.reason = "no notebook handed in"
            self._register(student)
            return result
        if missing:
            result.notes.append("missing notebook(s), scored zero: " + ", ".join(missing))
        problems = [p for p in map(notebook_problem, handed_in.values()) if p]
        if problems:
            result.reason = "; ".join(problems)
            self._register(student)
            return result
        api = self.work.api()
        start = time.perf_counter()
        outcome = api.autograde(self.assignment, student, force=True, create=True)
        result.seconds = time.perf_counter() - start
        result.log = outcome.get("log", "")
        if not outcome["success"]:
            result.reason = "nbgrader could not grade it: " + failure_reason(outcome)
            self._register(student)
            return result
        result.graded = True
        result.cells = self.scores(student)
        if feedback:
            done = api.generate_feedback(self.assignment, student, force=True)
            if not done["success"]:
                result.notes.append("no feedback: " + failure_reason(done))
            result.feedback = sorted(
                self.work.path("feedback", student, self.assignment).glob("*.html")
            )
        return result

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


# ---------------------------------------------------------------- a whole folder


def _quiet_worker():
    import logging
    import warnings

    log = logging.getLogger("residual_pack.nbgrader")
    log.propagate = False
    log.addHandler(logging.NullHandler())
    warnings.filterwarnings("ignore", message=".*not in session.*")


def _grade_in_worker(course, root, assignment, student, feedback):
    from .course import WorkCourse

    work = WorkCourse(course, root, [assignment], copy=False)
    return Grader(work, assignment, generate=False).grade(student, feedback=feedback)


# below this many submissions, starting worker processes (each imports nbgrader, a few
# seconds) costs more than grading two at a time saves
MIN_FOR_WORKERS = 6


def grade_all(grader, students, feedback=True, jobs=1, progress=None):
    """Grade the handed-in `students`, each on their own, `jobs` at a time (in separate
    processes sharing the gradebook). Results come back in the order of `students`."""
    students = list(students)
    results = {}
    if jobs <= 1 or len(students) < MIN_FOR_WORKERS:
        for student in students:
            try:
                results[student] = grader.grade(student, feedback=feedback)
            except Exception as exc:  # noqa: BLE001 (our failure costs that student only)
                results[student] = StudentResult(
                    student, reason=f"grading failed: {type(exc).__name__}: {exc}"
                )
            if progress:
                progress(results[student])
        return [results[s] for s in students]

    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    work = grader.work
    context = multiprocessing.get_context("spawn")  # no forked kernels, loops or sockets
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_quiet_worker) as pool:
        futures = {
            pool.submit(_grade_in_worker, work.course, work.root, grader.assignment, s,
                        feedback): s
            for s in students
        }
        for future in as_completed(futures):
            student = futures[future]
            try:
                results[student] = future.result()
            except Exception as exc:  # noqa: BLE001 (a worker died: that student only)
                results[student] = StudentResult(
                    student, reason=f"the grading process failed: {type(exc).__name__}: {exc}"
                )
            if progress:
                progress(results[student])
    return [results[s] for s in students]


def grade_folder(grader, submissions, jobs=1, progress=None):
    """Grade every student in the folder `submissions` with `grader`, each on their own,
    and export nbgrader's grades.csv into the work course. Returns (results, csv path)."""
    found = find_submissions(submissions, grader.assignment, grader.notebooks)
    if not found:
        raise CourseError(f"no submissions in {submissions}")
    for student, (notebooks, _) in found.items():
        grader.submit(student, notebooks)
    results = grade_all(grader, found, jobs=jobs, progress=progress)
    for result in results:
        result.notes[:0] = found[result.student][1]
    csv = grader.export_csv(grader.work.path("grades.csv"))
    return results, csv


def score_table(grader, results):
    """The score table as text: one row per student, one column per autograded cell."""
    cells = [key for key in grader.order if grader.autograded[key]]
    many = len(grader.notebooks) > 1
    heads = [f"{nb}:{gid}" if many else gid for nb, gid in cells]
    rows = [["student", *heads, "autograded", "seconds"]]
    for r in results:
        if not r.graded:
            rows.append([r.student, *(["-"] * len(cells)), "not graded", "-"])
            continue
        by_key = {(c.notebook, c.cell): c for c in r.cells}
        row = [r.student]
        for key in cells:
            c = by_key.get(key)
            row.append(f"{_num(c.score)}/{_num(c.max_score)}" if c else "-")
        got, top = r.score()
        row += [f"{_num(got)}/{_num(top)}", f"{r.seconds:.1f}"]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        if r.reason:
            lines.append(f"{r.student}: not graded: {r.reason}")
        for note in r.notes:
            lines.append(f"{r.student}: {note}")
    return "\n".join(lines)


def _num(x):
    return f"{x:g}"


# nbgrader's outputs in a work course, cleared before a new run there
_RUN_OUTPUTS = ("submitted", "autograded", "feedback", "gradebook.db", "grades.csv",
                "exercises", "source")


def prepare_out(out):
    """Make `out` ready to be a work course: new, empty, or one of our earlier runs
    (whose nbgrader outputs are cleared)."""
    from .course import CONFIG_FILE

    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()):
        if not (out / CONFIG_FILE).is_file() or (out / ".git").exists():
            raise CourseError(
                f"{out} is not empty and not an earlier grading run; pick another --out"
            )
        for name in _RUN_OUTPUTS:
            path = out / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    out.mkdir(parents=True, exist_ok=True)
    return out


def run_grading(course, assignment, submissions, out, jobs=1, progress=None):
    """`residual-pack grade`: grade the folder `submissions` in the work course `out`.
    Returns (grader, results, grades.csv)."""
    import tempfile

    from .course import WorkCourse, jupyter_sandbox

    out = prepare_out(out)
    with tempfile.TemporaryDirectory(prefix="residual-pack-jupyter-") as sandbox, \
            jupyter_sandbox(sandbox):
        work = WorkCourse(course, out, [assignment])
        grader = Grader(work, assignment)
        results, csv = grade_folder(grader, submissions, jobs=jobs, progress=progress)
    return grader, results, csv
