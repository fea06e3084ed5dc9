"""nbgrader's cell kinds and metadata, in one place.

nbgrader marks the cells of an assignment in their metadata (`metadata.nbgrader`:
`grade_id`, `solution`, `grade`, `locked`, `points`) and reads them with the predicates of
`nbgrader.utils` (`is_grade`, `is_solution`, `is_locked`). Everything of ours that asks what
a cell is (the course, intake, the sandboxed Execute step, feedback, the self-check) asks
here, with those predicates, so the answer is nbgrader's:

- `test`: a graded code cell of autograder tests (grade, not solution, code);
- `answer`: a cell the student writes (solution), graded by its tests or by hand;
- `given`: any other cell of the assignment (instructions, given code);
- `own`: a cell without a grade id, that the student added.

Metadata is read as handed in, which may be damaged: `nbgrader_meta` gives {} for
metadata that is not a dict, and every predicate is False for such a cell.
"""

from nbgrader import utils as nbgrader_utils

__all__ = ["KINDS", "nbgrader_meta", "grade_id", "is_solution", "is_grade", "is_locked",
           "is_autograded_test", "last_test", "kind"]

KINDS = ("test", "answer", "given", "own")


def nbgrader_meta(cell):
    """The cell's nbgrader metadata ({} when it has none, or it is not a dict)."""
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def grade_id(cell):
    """The cell's grade id, or None (no nbgrader metadata, or an id that is not text)."""
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) and gid else None


def _asks(predicate, cell):
    # nbgrader's predicates read cell.metadata["nbgrader"] as a dict: only ask them then
    return bool(nbgrader_meta(cell)) and bool(predicate(cell))


def is_solution(cell):
    """A cell the student writes (nbgrader's solution cell)."""
    return _asks(nbgrader_utils.is_solution, cell)


def is_grade(cell):
    """A cell worth points (tests, or an answer graded by hand)."""
    return _asks(nbgrader_utils.is_grade, cell)


def is_locked(cell):
    """A cell nbgrader puts back as released (tests, instructions, given code)."""
    return _asks(nbgrader_utils.is_locked, cell)


def is_autograded_test(cell):
    """A code cell of autograder tests that is worth points."""
    return cell.get("cell_type") == "code" and is_grade(cell) and not is_solution(cell)


def last_test(nb):
    """The index of the notebook's last autograded test cell (-1 when it has none): the
    cells after it cannot change an autograded score."""
    return max((i for i, c in enumerate(nb.cells) if is_autograded_test(c)), default=-1)


def kind(cell):
    """One of KINDS: test, answer, given (the assignment's) or own (the student's)."""
    if grade_id(cell) is None:
        return "own"
    if is_autograded_test(cell):
        return "test"
    if is_solution(cell):
        return "answer"
    return "given"
