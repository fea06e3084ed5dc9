"""One student's grading: `Grader` hands in, autogrades and gives feedback to each
student of one assignment on their own, in a work course.

Each student is graded on their own (one `NbGraderAPI.autograde` call, with the course's
own steps: `nbgrader_steps`), so a notebook that cannot be graded costs that student only,
with the reason in the report:

1. hand-in: each notebook is copied to nbgrader's `submitted/` folder as a notebook
   nbgrader can read (`intake.read_handed_in`), or the student is not graded, with the
   reason (too big, empty, not JSON, not a notebook);
2. nbgrader's autograde, with the steps the course's `nbgrader_config.py` names: the
   notebook repaired against the release (`IntakeRepairs`), run in a kernel inside a
   throwaway sandbox with the graded test cells judged by the grader
   (`SandboxedExecute`), scored by nbgrader, and held back for review or flagged in the
   gradebook (`WithholdForReview`);
3. what the steps saw is read from the autograded notebooks nbgrader wrote (our steps
   keep it in their metadata: `record`), the scores from the gradebook.

The result (`StudentResult`) holds the scores per cell and, in plain words, what else
happened (`report` words it).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from autograder.cells import grade_id, is_autograded_test, is_grade, is_solution
from autograder.grading.course import (
    EXERCISES,
    SOURCE,
    assignments,
    failure_reason,
    notebook_paths,
    read_notebook,
)
from autograder.grading.intake import read_handed_in, too_big
from autograder.grading.notebook_record import read_seen, stamp
from autograder.grading.reference_run import cached_reference
from autograder.grading.report import lost_points

if TYPE_CHECKING:
    from autograder.grading.course import WorkCourse
    from autograder.grading.plan import Sandbox

__all__ = ["CellScore", "StudentResult", "Grader", "HANDED_IN", "refusals", "graded_cells"]


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
    late_penalty: float = 0.0  # points nbgrader's late-submission plugin took off
    runs: dict = field(default_factory=dict)  # notebook -> record.NotebookRun as a dict
    graded_by: str = ""  # the Dask worker (host:pid) that graded it, on a cluster
    # [name, wall time] as the grader went through this student (`notebook_record.stamp`); each
    # notebook's run has its own, from the Execute step
    phases: list = field(default_factory=list)

    def score(self, autograded_only: bool = True) -> tuple[float, float]:
        cells = [c for c in self.cells if c.autograded or not autograded_only]
        return sum(c.score for c in cells), sum(c.max_score for c in cells)

    def cell(self, grade_id: str) -> CellScore | None:
        for c in self.cells:
            if c.cell == grade_id:
                return c
        return None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["feedback"] = [str(p) for p in self.feedback]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudentResult:
        data = dict(data)
        data["cells"] = [CellScore(**c) for c in data.get("cells", [])]
        data["feedback"] = [Path(p) for p in data.get("feedback", [])]
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def graded_cells(source: Path) -> tuple[list, dict, set]:
    """The cells of the source notebooks in the folder `source` that matter to a report:
    (notebook, grade_id) of the graded cells in notebook order, {that key: True for an
    autograded test cell}, and the keys of the students' answer cells."""
    order, autograded, answers = [], {}, set()
    for path in notebook_paths(source):
        for cell in read_notebook(path).cells:
            if is_solution(cell):
                answers.add((path.stem, grade_id(cell)))
            if is_grade(cell):
                key = (path.stem, grade_id(cell))
                order.append(key)
                autograded[key] = bool(is_autograded_test(cell))
    return order, autograded, answers


HANDED_IN = "handed-in"  # the work course keeps what each student handed in, byte for byte


class Grader:
    """One assignment graded in a work course: release generated once, then each student
    submitted, autograded and given feedback on their own.

    With a `sandbox` (`sandbox.plan.Sandbox`), notebooks run in sandboxed kernels with the
    hardened test runner; without one, in nbgrader's own kernels (trusted notebooks only:
    the instructor's, or the control runs of the tests)."""

    def __init__(self, work: WorkCourse, assignment: str, generate: bool = True,
                 sandbox: Sandbox | None = None) -> None:
        self.work = work
        self.assignment = assignment
        self.sandbox = sandbox
        work.use_sandbox(sandbox)
        if sandbox is not None:
            if assignment not in sandbox.references:
                sandbox.references[assignment] = cached_reference(
                    work.root, assignment, timeout=sandbox.limits.cell_timeout)
        if generate:
            work.generate_assignment(assignment)
        self.release = work.path(EXERCISES, assignment)
        self.notebooks = [p.stem for p in notebook_paths(self.release)]
        # (notebook, grade_id): of graded cells in notebook order, True for autograder
        # test cells, of the students' answer cells
        self.order, self.autograded, self.answer_cells = graded_cells(
            work.path("source", assignment))
        self._foreign: dict[str, set[Any]] | None = None

    def release_notebook(self, name: str) -> nbformat.NotebookNode:
        return read_notebook(self.work.path(EXERCISES, self.assignment, f"{name}.ipynb"))

    def submission_folder(self, student: str) -> Path:
        return self.work.path("submitted", student, self.assignment)

    def handed_in_folder(self, student: str) -> Path:
        return self.work.path(HANDED_IN, student, self.assignment)

    def submit(self, student: str, notebooks: Mapping[str, Any],
               timestamp: str | None = None) -> Path:
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

    def foreign_ids(self) -> dict[str, set[Any]]:
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

    def hand_in(self, student: str, result: StudentResult) -> bool:
        """Put what `student` handed in where nbgrader reads submissions, as notebooks it
        can read (`intake.read_handed_in`); nbgrader's first step repairs them against the
        release. False, with the reason, when nothing can be graded."""
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
        readable = {}
        for name, path in handed.items():
            if name not in self.notebooks:
                continue
            big = too_big(path.name, path.stat().st_size, limit)  # before reading it
            if big:
                problems.append(big)
                continue
            read = read_handed_in(path.read_bytes(), path.name, limit)
            if read.problem:
                problems.append(read.problem)
                continue
            result.notes += self._named(name, read.notes)
            readable[name] = read.notebook
        if problems:
            result.reason = "; ".join(problems)
            return False
        for name, nb in readable.items():
            # escaped to ASCII: a lone surrogate (which JSON may carry) stays readable
            # text until intake removes it with the metadata it sat in
            text = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=True)
            (folder / f"{name}.ipynb").write_text(text + "\n", encoding="ascii")
        return True

    def _named(self, name: str, lines: Iterable[str]) -> list[str]:
        many = len(self.notebooks) > 1
        return [f"{name}: {line}" if many else line for line in lines]

    def grade(self, student: str, feedback: bool = True) -> StudentResult:
        """Autograde what `student` handed in; then feedback. Never raises for a bad
        submission: the result says why it was not graded."""
        result = StudentResult(student)
        stamp(result.phases, "start")
        if not self.hand_in(student, result):
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
        refused = refusals(result.log, student)
        if not outcome["success"]:
            # nbgrader's log marks a traceback's lines with "| ": not part of the reason
            result.reason = "; ".join(refused) or \
                "nbgrader could not grade it: " + failure_reason(outcome).lstrip("| ")
            self._register(student)
            return result
        result.graded = True
        self._collect(student, result)
        result.cells = self.scores(student)
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

    def _collect(self, student: str, result: StudentResult) -> None:
        """What nbgrader's steps saw of `student`'s notebooks, as they wrote it into the
        autograded notebooks (`record`), into `result`."""
        folder = self.work.path("autograded", student, self.assignment)
        for name in self.notebooks:
            path = folder / f"{name}.ipynb"
            if not path.is_file():  # not handed in
                continue
            seen = read_seen(read_notebook(path))
            if seen.run is not None:
                result.runs[name] = seen.run
            result.notes += self._named(name, seen.notes)
            result.flags += self._named(name, seen.flags)
            result.withheld += self._named(name, seen.withheld)
            result.withheld_score += seen.held

    def _register(self, student: str) -> None:
        """Put an ungraded student in the gradebook, so the CSV lists them (with zero)."""
        with self.work.api().gradebook as gb:
            gb.update_or_create_student(student)

    def scores(self, student: str) -> list[CellScore]:
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

    def export_csv(self, path: str | os.PathLike[str]) -> Path:
        """nbgrader's CSV export of this assignment's grades."""
        from nbgrader.plugins import CsvExportPlugin

        api = self.work.api()
        plugin = CsvExportPlugin(parent=api)
        plugin.to = str(path)
        plugin.assignment = [self.assignment]
        with api.gradebook as gb:
            plugin.export(gb)
        return Path(path)


def refusals(log: str, student: str) -> list:
    """Why `IntakeRepairs` refused `student`'s notebooks (not the assignment's, or reached
    through a symbolic link), from nbgrader's log of the autograde call: the refusal is
    the exception that stopped it (`nbgrader_steps.NotGradableError`), and nbgrader keeps no
    notebook of a student it could not grade."""
    from autograder.grading.nbgrader_steps import NotGradableError as NotGradable

    marker = f"{NotGradable.__module__}.{NotGradable.__name__}: {student}: "
    found = []
    for line in log.splitlines():
        at = line.find(marker)
        if at >= 0:
            reason = line[at + len(marker):].strip()
            if reason and reason not in found:
                found.append(reason)
    return found
