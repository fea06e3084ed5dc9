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
