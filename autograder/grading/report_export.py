"""The class report (report.txt, report.csv, report.json, the score histogram) as an
nbgrader export plugin, so that nbgrader's own commands give it too:

    nbgrader autograde 01_residual_stack
    nbgrader export --exporter=autograder.grading.report_export.ClassReport \\
        --assignment=01_residual_stack --to report

It reads what `residual-pack grade` reads: the scores from the gradebook (whichever it
is), and what our steps saw from the autograded notebooks nbgrader wrote
(`autograded/<student>/<assignment>/`, their metadata: `record`), and writes the report
with `report.write_report`. `residual-pack grade` writes the same report from its own
results, which also know why a hand-in was refused before nbgrader saw it (too big, not
a notebook); here such a student is one the gradebook has no autograded notebook of.
With several assignments (no --assignment), each gets a folder of its own under --to.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.plugins import ExportPlugin

from autograder.grading.course import notebook_paths, read_notebook
from autograder.grading.notebook_record import read_seen
from autograder.grading.report import lost_points, write_report
from autograder.grading.student import CellScore, StudentResult, graded_cells
from autograder.sandbox.limits import Limits

__all__ = ["ClassReport", "ReportShape", "class_results"]


@dataclasses.dataclass
class ReportShape:
    """What `report.write_report` needs of an assignment besides the results (the
    attributes of a `Grader` it reads)."""

    assignment: str
    notebooks: list  # notebook names, sorted
    order: list  # (notebook, grade_id) of the graded cells, in notebook order
    autograded: dict  # (notebook, grade_id) -> True for autograded test cells


def _shape(coursedir: CourseDirectory, gradebook: Gradebook, assignment: str) -> ReportShape:
    source = Path(coursedir.format_path(coursedir.source_directory, ".", assignment))
    order, autograded, _ = graded_cells(source)
    notebooks = sorted(nb.name for nb in gradebook.find_assignment(assignment).notebooks)
    return ReportShape(assignment, notebooks, order, autograded)


def class_results(coursedir: CourseDirectory, gradebook: Gradebook, shape: ReportShape,
                  students: list) -> list:
    """A `StudentResult` per student of `students`, from the gradebook's scores and the
    records in their autograded notebooks."""
    results = []
    for student in students:
        result = StudentResult(student)
        folder = Path(coursedir.format_path(coursedir.autograded_directory, student,
                                            shape.assignment))
        paths = {p.stem: p for p in notebook_paths(folder)} if folder.is_dir() else {}
        try:
            submission = gradebook.find_submission(shape.assignment, student)
        except MissingEntry:
            submission = None
        if submission is None or not paths:
            result.reason = ("nothing handed in that nbgrader autograded"
                             if submission is None else "no autograded notebook")
            results.append(result)
            continue
        result.graded = True
        many = len(shape.notebooks) > 1
        limits = None
        missing = [name for name in shape.notebooks if name not in paths]
        if missing:  # as `Grader.hand_in` says it
            result.notes.append("missing notebook(s), scored zero: " + ", ".join(missing))
        for name in shape.notebooks:
            if name not in paths:
                continue
            seen = read_seen(read_notebook(paths[name]))
            where = f"{name}: " if many else ""
            if seen.run is not None:
                result.runs[name] = seen.run
                result.seconds += float(seen.run.get("seconds") or 0.0)
                if seen.run.get("limits") and limits is None:
                    known = {f.name for f in dataclasses.fields(Limits)}
                    limits = Limits(**{k: v for k, v in seen.run["limits"].items()
                                       if k in known})
            result.notes += [where + x for x in seen.notes]
            result.flags += [where + x for x in seen.flags]
            result.withheld += [where + x for x in seen.withheld]
            result.withheld_score += seen.held
        found = {}
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                found[(notebook.name, grade.name)] = (float(grade.score or 0.0),
                                                      float(grade.max_score or 0.0))
        result.cells = [CellScore(nb, gid, *found[(nb, gid)], shape.autograded[(nb, gid)])
                        for nb, gid in shape.order if (nb, gid) in found]
        result.late_penalty = float(submission.late_submission_penalty or 0.0)
        result.problems += lost_points(result, limits, shape.autograded)
        results.append(result)
    return results


class ClassReport(ExportPlugin):
    """The class report of each assignment chosen (nbgrader's --assignment; all of the
    gradebook's when none), for the students chosen (--student; all of the gradebook's
    when none), in the folder --to (default: class_report)."""

    def export(self, gradebook: Gradebook) -> None:
        from autograder.grading.nbgrader_steps import coursedir_of

        coursedir = coursedir_of(self)
        wanted = {str(a) for a in self.assignment}
        names = [a.name for a in gradebook.assignments if not wanted or a.name in wanted]
        chosen = {str(s) for s in self.student}
        students = sorted(s.id for s in gradebook.students if not chosen or s.id in chosen)
        out = Path(self.to or "class_report")
        for name in names:
            folder = out if len(names) == 1 else out / name
            folder.mkdir(parents=True, exist_ok=True)
            shape = _shape(coursedir, gradebook, name)
            results = class_results(coursedir, gradebook, shape, students)
            write_report(shape, results, folder,
                         header=f"{name}: the class report from nbgrader's gradebook and "
                                f"autograded notebooks ({len(students)} students)")
            self.log.info("Class report of %s written to %s", name, folder / "report.txt")
