"""Grades for a learning management system: Canvas's and Moodle's CSV grade imports, as
nbgrader export plugins (`nbgrader.plugins.ExportPlugin`), so that nbgrader's own command
writes them from the course's gradebook, whichever it is (SQLite, PostgreSQL):

    nbgrader export --exporter=autograder.grading.lms_export.CanvasExport --to canvas.csv
    nbgrader export --exporter=autograder.grading.lms_export.MoodleExport --to moodle.csv

Each writes one row per student of the gradebook and one column per assignment, the
score as nbgrader's own CSV export computes it: the submission's score less its late
penalty, never below zero, and 0 for an assignment a student did not hand in. Every
student of the gradebook has a row that the LMS can match, also those who came through
nbgrader's exchange, whom the gradebook knows by their login only (no email, no name, no
LMS id). The plugins' options (`CanvasExport.section`, `CanvasExport.assignment_ids`,
`CanvasExport.columns`, `MoodleExport.identify_by`, `MoodleExport.columns`) are nbgrader
config, on the command line (`--CanvasExport.section=...`) or in `nbgrader_config.py`.
"""

import csv
import re
from typing import Any

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Dict, Enum, Int, Unicode

__all__ = ["CanvasExport", "MoodleExport", "lms_score", "points"]


def lms_score(gradebook: Any, assignment: str, student: str) -> float:
    """`student`'s score in `assignment` as nbgrader's CSV export has it: the score less
    the late penalty, at least zero; 0.0 when nothing was handed in."""
    try:
        sub = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return 0.0
    return max(0.0, float(sub.score or 0.0) - float(sub.late_submission_penalty or 0.0))


def points(value: float) -> str:
    """A score as an LMS reads it: a plain decimal number, at most four decimals, no
    trailing zeros (6, 4.5, 0.3333)."""
    text = f"{float(value):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


class _LmsExport(ExportPlugin):
    """What both exports share: the assignments and students chosen (nbgrader's
    `--assignment` and `--student`), a column heading per assignment, the CSV file."""

    columns = Dict(
        {}, help="The heading of an assignment's column, by nbgrader assignment name "
                 "(default: the assignment's name)").tag(config=True)

    default_to = "grades.csv"

    def chosen(self, gradebook: Any) -> tuple[list[Any], list[Any]]:
        wanted_a = {str(a) for a in self.assignment}
        wanted_s = {str(s) for s in self.student}
        assignments = [a for a in gradebook.assignments if not wanted_a or a.name in wanted_a]
        students = sorted((s for s in gradebook.students if not wanted_s or s.id in wanted_s),
                          key=lambda s: s.id)
        return assignments, students

    def heading(self, assignment: Any) -> str:
        return self.columns.get(assignment.name, assignment.name)

    def write(self, rows: list[list[str]]) -> None:
        dest = self.to or self.default_to
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)


# Canvas's own export heads an assignment's column "Title (id)"; its importer reads the
# number in the last parentheses as the assignment's id
CANVAS_HEADING = re.compile(r"\A(.*)\s\((\d+)\)\Z")


class CanvasExport(_LmsExport):
    """Canvas's gradebook import: the columns Student, ID, SIS User ID, SIS Login ID and
    Section, one column per assignment, a "Points Possible" row under the headings, then a
    row per student.

    Canvas finds a student by ID (the Canvas user id: the gradebook's `lms_user_id`,
    empty when it has none, as for every student who came through nbgrader's exchange),
    else by SIS User ID, else by SIS Login ID, which is the nbgrader student id (the unix
    login under the exchange, the LMS login under an LTI JupyterHub): so every row can
    be found without a Canvas user id. An assignment's column is found by the id in its
    heading, "Title (Canvas id)" as Canvas's own export writes it: given the Canvas ids
    (`CanvasExport.assignment_ids`) every heading has that form; without one, Canvas
    matches the exact title, else makes a new assignment, and the log says so
    (docs/instructors.md, step 10, says what this rests on)."""

    default_to = "canvas_grades.csv"
    section = Unicode("", help="The Section column of every student (Canvas's section "
                               "name; default: empty)").tag(config=True)
    assignment_ids = Dict(
        value_trait=Int(), default_value={},
        help="The Canvas id of each assignment, by nbgrader assignment name (the number in "
             "the assignment's Canvas address, .../assignments/4711): its column is then "
             "headed 'Title (4711)', the form Canvas matches by id").tag(config=True)
    FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]

    def heading(self, assignment: Any) -> str:
        title = super().heading(assignment)
        known = self.assignment_ids.get(assignment.name)
        if CANVAS_HEADING.match(title) or known is None:
            return title
        return f"{title} ({known})"

    def export(self, gradebook: Any) -> None:
        assignments, students = self.chosen(gradebook)
        headings = [self.heading(a) for a in assignments]
        by_title = [h for h in headings if not CANVAS_HEADING.match(h)]
        if by_title:
            # the option replaces the ids given so far: the line holds those too
            wanted = ", ".join(f'"{a.name}": {self.assignment_ids.get(a.name, "ID")}'
                               for a in assignments)
            self.log.warning(
                "No Canvas id for %s: Canvas matches such a column by its exact title, and "
                "makes a new assignment when no title matches. Give the ids (each ID the "
                "number in the assignment's Canvas address): "
                "--CanvasExport.assignment_ids='{%s}'",
                ", ".join(by_title), wanted)
        rows = [self.FIXED + headings,
                ["Points Possible", "", "", "", ""] + [points(a.max_score) for a in assignments]]
        for s in students:
            name = ", ".join(x for x in (s.last_name, s.first_name) if x) or s.id
            rows.append([name, s.lms_user_id or "", "", s.id, self.section] +
                        [points(lms_score(gradebook, a.name, s.id)) for a in assignments])
        self.write(rows)


class MoodleExport(_LmsExport):
    """Moodle's grade import (CSV): a column that identifies the user, then one column per
    grade item. On import, "Map from" is that column and "Map to" the user field
    (username or email address), and each assignment's column is mapped to its grade item.

    By username (the nbgrader student id) unless told otherwise: every student of the
    gradebook has one, while an email address is there only when someone added it (never
    for a student who came through nbgrader's exchange). One column, the same for every
    export, so the import's mapping does not change with the class. With `identify_by =
    "email"`, a student without an email address is left out (Moodle stops the whole
    import at a row whose user it cannot find) and named in a warning."""

    default_to = "moodle_grades.csv"
    identify_by = Enum(["username", "email"], default_value="username",
                       help="How Moodle finds the student: 'username' (the nbgrader student "
                            "id, which every student has) or 'email' (the gradebook's "
                            "email; students without one are left out, with a "
                            "warning)").tag(config=True)

    def export(self, gradebook: Any) -> None:
        assignments, students = self.chosen(gradebook)
        head = "Email address" if self.identify_by == "email" else "Username"
        rows = [[head] + [self.heading(a) for a in assignments]]
        unknown = []
        for s in students:
            who = s.email if self.identify_by == "email" else s.id
            if not who:
                unknown.append(s.id)
                continue
            rows.append([who] + [points(lms_score(gradebook, a.name, s.id))
                                 for a in assignments])
        if unknown:
            self.log.warning("Left out of the Moodle file, as they have no email address in "
                             "the gradebook (add one, or leave out "
                             "--MoodleExport.identify_by=email to identify by username): "
                             "%s", ", ".join(unknown))
        self.write(rows)
