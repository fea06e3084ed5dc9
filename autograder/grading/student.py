"""One student's grading: `Grader` hands in, repairs, autogrades and gives feedback to
each student of one assignment on their own, in a work course.

Each student is graded on their own (one `NbGraderAPI.autograde` call), so a notebook that
cannot be graded costs that student only, with the reason in the report:

1. `intake.take_in` reads what was handed in and either gives the reason it cannot be
   graded (empty, not JSON, not a notebook, another assignment's) or repairs it against
   the release (deleted, moved, retyped or edited cells, damaged metadata, bad bytes);
2. nbgrader's autograde runs in the grading process, but its Execute step is
   `sandbox.execute.SandboxedExecute`: the notebook runs in a kernel inside a throwaway
   sandbox, with limits, and the graded test cells in the kernel's hardened runner
   (gradekernel);
3. nbgrader writes the scores to the gradebook, from the grading process only.

The result (`StudentResult`) holds the scores per cell and, in plain words, what else
happened (`report` words it).
"""

import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

from autograder.cells import grade_id, is_autograded_test, is_grade, is_solution
from autograder.grading.channel import CHANNEL, stamp
from autograder.grading.course import (
    EXERCISES,
    SOURCE,
    assignments,
    failure_reason,
    notebook_paths,
    read_notebook,
)
from autograder.grading.gradebook import flag_in_gradebook
from autograder.grading.intake import take_in, too_big
from autograder.grading.reference_run import reference_records
from autograder.grading.report import lost_points, tampering_seen

__all__ = ["CellScore", "StudentResult", "Grader", "HANDED_IN"]


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
    runs: dict = field(default_factory=dict)  # notebook -> sandbox.channel.NotebookRun as a dict
    graded_by: str = ""  # the Dask worker (host:pid) that graded it, on a cluster
    # [name, wall time] as the grader went through this student (`channel.stamp`); each
    # notebook's run has its own, from the Execute step and the launcher
    phases: list = field(default_factory=list)

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


HANDED_IN = "handed-in"  # the work course keeps what each student handed in, byte for byte


class Grader:
    """One assignment graded in a work course: release generated once, then each student
    submitted, autograded and given feedback on their own.

    With a `sandbox` (`sandbox.plan.Sandbox`), notebooks run in sandboxed kernels with the
    hardened test runner; without one, in nbgrader's own kernels (trusted notebooks only:
    the instructor's, or the control runs of the tests)."""

    def __init__(self, work, assignment, generate=True, sandbox=None):
        self.work = work
        self.assignment = assignment
        self.sandbox = sandbox
        if sandbox is not None:
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
                if is_solution(cell):
                    self.answer_cells.add((path.stem, grade_id(cell)))
                if is_grade(cell):
                    key = (path.stem, grade_id(cell))
                    self.order.append(key)
                    self.autograded[key] = bool(is_autograded_test(cell))
        self._foreign = None

    def release_notebook(self, name):
        return read_notebook(self.work.path(EXERCISES, self.assignment, f"{name}.ipynb"))

    def submission_folder(self, student):
        return self.work.path("submitted", student, self.assignment)

    def handed_in_folder(self, student):
        return self.work.path(HANDED_IN, student, self.assignment)

    def submit(self, student, notebooks, timestamp=None):
        """Hand in `notebooks` ({name: path or NotebookNode}) as `student`'s submission,
        handed in at `timestamp` (the text of nbgrader's timestamp.txt) when given: it goes
        beside the notebooks as nbgrader's `collect` leaves it, so that nbgrader's autograde
        records it and applies the assignment's due date and late penalty."""
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
        if timestamp is not None:
            from autograder.grading.submissions import TIMESTAMP_FILE

            (dest / TIMESTAMP_FILE).write_text(timestamp + "\n", encoding="utf-8")
        return dest

    def foreign_ids(self):
        """{other assignment: its grade ids}, to say whose notebook a stray one is."""
        if self._foreign is None:
            self._foreign = {}
            for other in assignments(self.work.course):
                if other == self.assignment:
                    continue
                ids = set()
                for path in notebook_paths(self.work.course / SOURCE / other):
                    try:
                        ids |= {grade_id(c) for c in read_notebook(path).cells}
                    except Exception:  # noqa: BLE001 (an unreadable source is skipped)
                        continue
                ids.discard(None)
                self._foreign[other] = ids
        return self._foreign

    def take_in(self, student, result):
        """Read and repair what `student` handed in (see `intake`); the repaired notebooks
        go where nbgrader reads submissions. False when nothing can be graded."""
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
            big = too_big(path.name, path.stat().st_size, limit)  # before reading it
            if big:
                problems.append(big)
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
        stamp(result.phases, "start")
        if not self.take_in(student, result):
            self._register(student)
            return result
        stamp(result.phases, "taken in")
        api = self.work.api()
        stamp(result.phases, "autograde")
        start = time.perf_counter()
        outcome = api.autograde(self.assignment, student, force=True, create=True)
        result.seconds = time.perf_counter() - start
        stamp(result.phases, "autograded")
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
        if result.flags:
            with self.work.api().gradebook as gb:
                flag_in_gradebook(gb, self.assignment, student, result.flags)
        result.problems += lost_points(result, self.sandbox.limits if self.sandbox else None,
                                       self.autograded)
        stamp(result.phases, "scores read")
        if feedback:
            done = api.generate_feedback(self.assignment, student, force=True)
            if not done["success"]:
                result.notes.append("no feedback: " + failure_reason(done))
            result.feedback = sorted(
                self.work.path("feedback", student, self.assignment).glob("*.html")
            )
            stamp(result.phases, "feedback")
        return result

    def _collect_runs(self, student, result):
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
