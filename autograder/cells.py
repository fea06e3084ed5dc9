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

While grading, the course's own cells that cannot change an autograded score are left out
(`left_out_when_grading`): the given cells after the last autograded test, and those the
source notebook tags `skip-when-grading` (an experiment that no later test reads). Every
test, every answer and every cell the student added still runs.

Metadata is read as handed in, which may be damaged: `nbgrader_meta` gives {} for
metadata that is not a dict, and every predicate is False for such a cell.
"""

from collections.abc import Callable, Collection
from typing import Any

from nbgrader import utils as nbgrader_utils

__all__ = ["KINDS", "SKIP_TAG", "nbgrader_meta", "grade_id", "is_solution", "is_grade",
           "is_locked", "is_autograded_test", "last_test", "kind", "skipped_when_grading",
           "left_out_when_grading", "as_graded"]

KINDS = ("test", "answer", "given", "own")
SKIP_TAG = "skip-when-grading"


def nbgrader_meta(cell: Any) -> dict[str, Any]:
    """The cell's nbgrader metadata ({} when it has none, or it is not a dict)."""
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return meta if isinstance(meta, dict) else {}


def grade_id(cell: Any) -> str | None:
    """The cell's grade id, or None (no nbgrader metadata, or an id that is not text)."""
    gid = nbgrader_meta(cell).get("grade_id")
    return gid if isinstance(gid, str) and gid else None


def _asks(predicate: Callable[[Any], Any], cell: Any) -> bool:
    # nbgrader's predicates read cell.metadata["nbgrader"] as a dict: only ask them then
    return bool(nbgrader_meta(cell)) and bool(predicate(cell))


def is_solution(cell: Any) -> bool:
    """A cell the student writes (nbgrader's solution cell)."""
    return _asks(nbgrader_utils.is_solution, cell)


def is_grade(cell: Any) -> bool:
    """A cell worth points (tests, or an answer graded by hand)."""
    return _asks(nbgrader_utils.is_grade, cell)


def is_locked(cell: Any) -> bool:
    """A cell nbgrader puts back as released (tests, instructions, given code)."""
    return _asks(nbgrader_utils.is_locked, cell)


def is_autograded_test(cell: Any) -> bool:
    """A code cell of autograder tests that is worth points."""
    return cell.get("cell_type") == "code" and is_grade(cell) and not is_solution(cell)


def last_test(nb: Any) -> int:
    """The index of the notebook's last autograded test cell (-1 when it has none): the
    cells after it cannot change an autograded score."""
    return max((i for i, c in enumerate(nb.cells) if is_autograded_test(c)), default=-1)


def kind(cell: Any) -> str:
    """One of KINDS: test, answer, given (the assignment's) or own (the student's)."""
    if grade_id(cell) is None:
        return "own"
    if is_autograded_test(cell):
        return "test"
    if is_solution(cell):
        return "answer"
    return "given"


def skipped_when_grading(nb: Any, strict: bool = True) -> list[str]:
    """The grade ids of the given cells that `nb` tags `SKIP_TAG`. The grader reads them
    from the source notebook (the instructor's word, never a handed-in copy), where a tag on
    a test or an answer is an error; with `strict` off (a student's own copy, for the
    student's own tools) such a tag is ignored."""
    found: list[Any] = []
    for cell in nb.cells:
        metadata = cell.get("metadata")
        tags = metadata.get("tags") if isinstance(metadata, dict) else None
        if not isinstance(tags, list) or SKIP_TAG not in tags:
            continue
        if kind(cell) != "given" or cell.get("cell_type") != "code":
            if not strict:
                continue
            raise ValueError(f"cell {grade_id(cell) or '(no grade id)'}: only a given code "
                             f"cell of the course may be tagged {SKIP_TAG}")
        found.append(grade_id(cell))
    return sorted(found)


def left_out_when_grading(cell: Any, index: int, last: int,
                          skip: Collection[str | None]) -> bool:
    """Whether grading leaves out the code cell at `index`: a given cell after the last
    autograded test (`last`), or one whose grade id is in `skip`."""
    return kind(cell) == "given" and (index > last or grade_id(cell) in skip)


def as_graded(nb: Any) -> Any:
    """A copy of the instructor's notebook `nb` with only the cells grading runs (the
    reference run and the fingerprints run what a submission runs)."""
    import copy

    last, skip = last_test(nb), set(skipped_when_grading(nb))
    out = copy.copy(nb)
    out.cells = [c for i, c in enumerate(nb.cells)
                 if c.get("cell_type") != "code" or not left_out_when_grading(c, i, last, skip)]
    return out
