"""Grades for a learning management system: Canvas's and Moodle's CSV grade imports, as
nbgrader export plugins (`nbgrader.plugins.ExportPlugin`), so that nbgrader's own command
writes them from the course's gradebook, whichever it is (SQLite, PostgreSQL):

    nbgrader export --exporter=autograder.grading.lms_export.CanvasExport --to canvas.csv
    nbgrader export --exporter=autograder.grading.lms_export.MoodleExport --to moodle.csv

Each writes one row per student of the gradebook and one column per assignment, the
score as nbgrader's own CSV export computes it: the submission's score less its late
penalty, never below zero, and 0 for an assignment a student did not hand in. The
plugins' options (`CanvasExport.section`, `CanvasExport.columns`,
`MoodleExport.identify_by`, `MoodleExport.columns`) are nbgrader config, on the command
line (`--CanvasExport.section=...`) or in `nbgrader_config.py`.
"""

import csv

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Dict, Enum, Unicode

__all__ = ["CanvasExport", "MoodleExport", "lms_score", "points"]


def lms_score(gradebook, assignment, student):
    """`student`'s score in `assignment` as nbgrader's CSV export has it: the score less
    the late penalty, at least zero; 0.0 when nothing was handed in."""
    try:
        sub = gradebook.find_submission(assignment, student)
    except MissingEntry:
        return 0.0
    return max(0.0, float(sub.score or 0.0) - float(sub.late_submission_penalty or 0.0))


def points(value):
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

    def chosen(self, gradebook):
        wanted_a = {str(a) for a in self.assignment}
        wanted_s = {str(s) for s in self.student}
        assignments = [a for a in gradebook.assignments if not wanted_a or a.name in wanted_a]
        students = sorted((s for s in gradebook.students if not wanted_s or s.id in wanted_s),
                          key=lambda s: s.id)
        return assignments, students

    def heading(self, assignment):
        return self.columns.get(assignment.name, assignment.name)

    def write(self, rows):
        dest = self.to or self.default_to
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(rows)


class CanvasExport(_LmsExport):
    """Canvas's gradebook import: the columns Student, ID, SIS User ID, SIS Login ID and
    Section, one column per assignment, a "Points Possible" row under the headings, then a
    row per student. Canvas finds the student by ID (the gradebook's `lms_user_id`, the
    Canvas user id), else SIS Login ID (the nbgrader student id), else the name as
    "Last, First"; an assignment's column heading names the Canvas assignment
    ("Name (Canvas id)", set with `CanvasExport.columns`), and a heading Canvas does not
    know makes a new assignment (docs/instructors.md, step 10, says what this rests on)."""

    default_to = "canvas_grades.csv"
    section = Unicode("", help="The Section column of every student (Canvas's section "
                               "name; default: empty)").tag(config=True)
    FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]

    def export(self, gradebook):
        assignments, students = self.chosen(gradebook)
        rows = [self.FIXED + [self.heading(a) for a in assignments],
                ["Points Possible", "", "", "", ""] + [points(a.max_score) for a in assignments]]
        for s in students:
            name = ", ".join(x for x in (s.last_name, s.first_name) if x) or s.id
            rows.append([name, s.lms_user_id or "", "", s.id, self.section] +
                        [points(lms_score(gradebook, a.name, s.id)) for a in assignments])
        self.write(rows)


class MoodleExport(_LmsExport):
    """Moodle's grade import (CSV): a column that identifies the user, then one column per
    grade item. On import, "Map from" is that column and "Map to" the user field (email
    address or username), and each assignment's column is mapped to its grade item."""

    default_to = "moodle_grades.csv"
    identify_by = Enum(["email", "username"], default_value="email",
                       help="How Moodle finds the student: 'email' (the gradebook's email; "
                            "students without one are left out, with a warning) or "
                            "'username' (the nbgrader student id)").tag(config=True)

    def export(self, gradebook):
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
                             "the gradebook (add one, or --MoodleExport.identify_by=username): "
                             "%s", ", ".join(unknown))
        self.write(rows)
