"""autograder/grading/lms_export.py: Canvas's and Moodle's CSV grade imports, written by
nbgrader export plugins from a gradebook made with nbgrader's own API (assignments, grade
cells, students, submissions, scores and a late penalty as autograde leaves them).
Issue #28, trap 9: an export that an LMS imports; issue 40, item 7: one that has a row the
LMS can match for every student who came through nbgrader's exchange."""

import csv
import datetime
import logging

import pytest

from autograder.compat import read_alembic_head_in_process
from autograder.grading.lms_export import CanvasExport, MoodleExport, points

# nbgrader's known noise when submissions are added (see course.WorkCourse.api)
pytestmark = pytest.mark.filterwarnings("ignore:.*not in session")


@pytest.fixture
def gradebook(tmp_path):
    from nbgrader.api import Gradebook

    read_alembic_head_in_process()  # no `alembic` process for a new SQLite gradebook
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        due = datetime.datetime(2026, 12, 1, 17, 0)
        gb.add_assignment("hw1", duedate=due)
        gb.add_notebook("nb", "hw1")
        gb.add_grade_cell("t1", "nb", "hw1", max_score=2, cell_type="code")
        gb.add_grade_cell("t2", "nb", "hw1", max_score=4, cell_type="code")
        gb.add_assignment("hw2", duedate=due + datetime.timedelta(days=7))
        gb.add_notebook("nb2", "hw2")
        gb.add_grade_cell("t1", "nb2", "hw2", max_score=3, cell_type="code")
        gb.add_student("ann", first_name="Ann", last_name="Lee", email="ann@uni.example",
                       lms_user_id="4101")
        gb.add_student("bob", email="bob@uni.example")
        gb.add_student("cy")  # no email, no names: handed in nothing
        scores = {("ann", "hw1"): [2, 4], ("ann", "hw2"): [1.5], ("bob", "hw1"): [2, 2.5]}
        for (student, assignment), got in scores.items():
            late = assignment == "hw1" and student == "bob"
            sub = gb.add_submission(assignment, student,
                                    timestamp=due + datetime.timedelta(hours=2 if late else -1))
            (nb,) = sub.notebooks
            for grade, score in zip(sorted(nb.grades, key=lambda g: g.name), got):
                grade.auto_score = score
            if late:  # what AssignLatePenalties writes, here a penalty of 1 point
                nb.late_submission_penalty = 1.0
        gb.db.commit()
        yield gb


def exported(plugin_class, gradebook, tmp_path, **options):
    plugin = plugin_class(log=logging.getLogger("test"), **options)
    plugin.to = str(tmp_path / "out.csv")
    plugin.export(gradebook)
    with open(tmp_path / "out.csv", newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_columns_points_possible_and_scores(gradebook, tmp_path):
    assert exported(CanvasExport, gradebook, tmp_path, section="Lecture A") == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "hw1", "hw2"],
        ["Points Possible", "", "", "", "", "6", "3"],
        ["Lee, Ann", "4101", "", "ann", "Lecture A", "6", "1.5"],
        ["bob", "", "", "bob", "Lecture A", "3.5", "0"],  # 4.5 less the late penalty
        ["cy", "", "", "cy", "Lecture A", "0", "0"],
    ]


def test_canvas_headings_name_the_canvas_assignments_and_filters_apply(gradebook, tmp_path):
    rows = exported(CanvasExport, gradebook, tmp_path,
                    columns={"hw1": "Residual stack (4711)"}, assignment=["hw1"],
                    student=["ann", "cy"])
    assert rows == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Residual stack (4711)"],
        ["Points Possible", "", "", "", "", "6"],
        ["Lee, Ann", "4101", "", "ann", "", "6"],
        ["cy", "", "", "cy", "", "0"],
    ]


def test_moodle_by_email_leaves_out_and_names_students_without_one(gradebook, tmp_path,
                                                                    caplog):
    with caplog.at_level(logging.WARNING, logger="test"):
        rows = exported(MoodleExport, gradebook, tmp_path, identify_by="email")
    assert rows == [["Email address", "hw1", "hw2"],
                    ["ann@uni.example", "6", "1.5"],
                    ["bob@uni.example", "3.5", "0"]]
    assert "no email address" in caplog.text and "cy" in caplog.text


def test_moodle_by_username(gradebook, tmp_path):
    assert exported(MoodleExport, gradebook, tmp_path, identify_by="username",
                    columns={"hw2": "Assignment 2"}) == [
        ["Username", "hw1", "Assignment 2"],
        ["ann", "6", "1.5"], ["bob", "3.5", "0"], ["cy", "0", "0"]]


def test_points_are_plain_decimals():
    assert [points(x) for x in (6.0, 4.5, 1 / 3, 0.0, -0.0, 12)] == \
        ["6", "4.5", "0.3333", "0", "0", "12"]


@pytest.fixture
def exchange_class(tmp_path):
    """A gradebook as nbgrader's exchange leaves it: `nbgrader collect` and autograde add
    each student by their login, with no name, no email and no LMS user id."""
    from nbgrader.api import Gradebook

    read_alembic_head_in_process()
    with Gradebook(f"sqlite:///{tmp_path / 'exchange.db'}") as gb:
        gb.add_assignment("01_residual_stack")
        gb.add_notebook("01_residual_stack", "01_residual_stack")
        for name, top in (("t1", 2), ("t2", 4)):
            gb.add_grade_cell(name, "01_residual_stack", "01_residual_stack", max_score=top,
                              cell_type="code")
        gb.add_assignment("05_gpt_residual_adds")
        for student, got in (("ann", [2, 4]), ("bob", [2, 0]), ("cy", None)):
            gb.add_student(student)
            if got is None:  # handed in nothing
                continue
            (nb,) = gb.add_submission("01_residual_stack", student).notebooks
            for grade, score in zip(sorted(nb.grades, key=lambda g: g.name), got):
                grade.auto_score = score
        gb.db.commit()
        assert all(s.email is None and s.lms_user_id is None and s.first_name is None
                   for s in gb.students)
        yield gb


def test_moodle_by_default_has_a_row_for_every_exchange_student(exchange_class, tmp_path):
    assert exported(MoodleExport, exchange_class, tmp_path) == [
        ["Username", "01_residual_stack", "05_gpt_residual_adds"],
        ["ann", "6", "0"], ["bob", "2", "0"], ["cy", "0", "0"]]


def test_canvas_rows_of_exchange_students_are_found_by_login_and_headings_by_id(
        exchange_class, tmp_path, caplog):
    """No Canvas user id in the gradebook: `ID` is empty and Canvas goes on to `SIS Login
    ID`, the nbgrader id (their login). The Canvas ids of the assignments, given once,
    head each column "Title (id)", as Canvas's own export does; an assignment without one
    keeps its title, and the log says that Canvas will match it by title."""
    with caplog.at_level(logging.WARNING, logger="test"):
        rows = exported(CanvasExport, exchange_class, tmp_path, section="Lecture A",
                        assignment_ids={"01_residual_stack": 4711},
                        columns={"05_gpt_residual_adds": "GPT residual adds"})
    assert rows == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
         "01_residual_stack (4711)", "GPT residual adds"],
        ["Points Possible", "", "", "", "", "6", "0"],
        ["ann", "", "", "ann", "Lecture A", "6", "0"],
        ["bob", "", "", "bob", "Lecture A", "2", "0"],
        ["cy", "", "", "cy", "Lecture A", "0", "0"],
    ]
    [warned] = [r.getMessage() for r in caplog.records if "No Canvas id" in r.getMessage()]
    assert warned.startswith("No Canvas id for GPT residual adds: "), warned
    # the option with the names filled in; it replaces the ids given, so it holds them too
    assert warned.endswith("--CanvasExport.assignment_ids='{\"01_residual_stack\": 4711, "
                           "\"05_gpt_residual_adds\": ID}'"), warned
    named = exported(CanvasExport, exchange_class, tmp_path, assignment=["01_residual_stack"],
                     assignment_ids={"01_residual_stack": 4711},
                     columns={"01_residual_stack": "Residual stack"})
    assert named[0][5:] == ["Residual stack (4711)"]
