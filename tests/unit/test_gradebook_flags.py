"""Flags reach nbgrader's gradebook (issue #28, trap 4): a submission whose code a human
should look at is `flagged`, with the reasons as its answer cells' comment, so formgrader
shows it; its scores stay as they are."""

from nbgrader.api import Gradebook

from autograder.compat import read_alembic_head_in_process
from autograder.grading.gradebook import flag_in_gradebook


def test_flags_are_written_as_nbgraders_flag_and_comment(tmp_path):
    read_alembic_head_in_process()  # a new gradebook without a new Python for `alembic`
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_assignment("A")
        gb.add_notebook("nb", "A")
        gb.add_solution_cell("answer", "nb", "A")
        gb.add_grade_cell("test", "nb", "A", max_score=2, cell_type="code")
        gb.add_student("ada")
        gb.add_student("bob")
        gb.add_submission("A", "ada")
        gb.add_submission("A", "bob")
        flag_in_gradebook(gb, "A", "ada", ["flagged for review: opens files (open)"])
        flag_in_gradebook(gb, "A", "ada", ["flagged for review: opens files (open)"])
        ada = gb.find_submission_notebook("nb", "A", "ada")
        bob = gb.find_submission_notebook("nb", "A", "bob")
        assert ada.flagged and not bob.flagged
        comments = [c.auto_comment for c in ada.comments]
        assert comments and all(c.count("for a human to look at: flagged for review: opens "
                                         "files (open)") == 1 for c in comments)
        assert [g.auto_score for g in ada.grades] == [g.auto_score for g in bob.grades]
        flag_in_gradebook(gb, "A", "bob", [])
        assert not gb.find_submission_notebook("nb", "A", "bob").flagged


def test_a_withheld_score_is_flagged_as_well(tmp_path):
    """A score held back for review needs a manual grade, and its notebook carries
    nbgrader's `flagged` too (issue 40, item 8), so formgrader's flag and a filter on it
    find it; a notebook with nothing withheld stays unflagged."""
    from autograder.grading.nbgrader_steps import withhold_grades

    read_alembic_head_in_process()
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_assignment("A")
        gb.add_notebook("nb", "A")
        gb.add_solution_cell("answer", "nb", "A")
        gb.add_grade_cell("test", "nb", "A", max_score=2, cell_type="code")
        for student in ("ada", "bob"):
            gb.add_student(student)
            (nb,) = gb.add_submission("A", student).notebooks
            (grade,) = nb.grades
            grade.auto_score, grade.needs_manual_grade = 2.0, False
        gb.db.commit()
        held = withhold_grades(gb, "A", "ada", {("nb", "test"): True}, ["nb"],
                               comment="residual-pack: score withheld for review: x")
        ada = gb.find_submission_notebook("nb", "A", "ada")
        bob = gb.find_submission_notebook("nb", "A", "bob")
        assert held == 2.0
        assert [(g.auto_score, g.needs_manual_grade) for g in ada.grades] == [(0.0, True)]
        assert ada.flagged and not bob.flagged
