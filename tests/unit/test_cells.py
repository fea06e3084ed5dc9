"""autograder/cells.py: what each kind of nbgrader cell is, with nbgrader's own
predicates, and metadata read as handed in (damaged or not)."""

import nbformat
import pytest

from autograder import cells


def _cell(kind="code", source="", **nbgrader):
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(source)
    if nbgrader:
        cell.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False,
                                     "locked": False, **nbgrader}
    return cell


TEST = _cell(grade_id="t1", grade=True, locked=True, points=2)
ANSWER = _cell(grade_id="a1", solution=True)
WRITTEN = _cell("markdown", grade_id="w1", solution=True, grade=True, points=1)
GIVEN = _cell("markdown", grade_id="intro", locked=True)
GIVEN_CODE = _cell(grade_id="setup", locked=True)
OWN = _cell(source="x = 1")
# nbgrader's metadata on a markdown cell that says "grade, not solution": not a test
GRADED_MARKDOWN = _cell("markdown", grade_id="m1", grade=True, locked=True, points=1)


@pytest.mark.parametrize("cell, kind", [
    (TEST, "test"), (ANSWER, "answer"), (WRITTEN, "answer"), (GIVEN, "given"),
    (GIVEN_CODE, "given"), (OWN, "own"), (GRADED_MARKDOWN, "given"),
])
def test_every_cell_has_one_kind(cell, kind):
    assert cells.kind(cell) == kind
    assert kind in cells.KINDS


def test_only_a_graded_code_cell_that_is_not_an_answer_is_an_autograded_test():
    assert cells.is_autograded_test(TEST)
    for cell in (ANSWER, WRITTEN, GIVEN, GIVEN_CODE, OWN, GRADED_MARKDOWN):
        assert not cells.is_autograded_test(cell)


def test_locked_is_nbgraders_word():
    """nbgrader treats a grade cell that is not a solution as locked, whatever its flag."""
    unflagged = _cell(grade_id="t2", grade=True, locked=False, points=1)
    assert cells.is_locked(unflagged) and cells.is_autograded_test(unflagged)
    assert cells.is_locked(GIVEN) and cells.is_locked(TEST)
    assert not cells.is_locked(ANSWER) and not cells.is_locked(WRITTEN)
    assert not cells.is_locked(OWN)


@pytest.mark.parametrize("damage", [["a", "list"], "text", 3, None])
def test_damaged_metadata_reads_as_none(damage):
    cell = _cell(source="x = 1")
    cell.metadata["nbgrader"] = damage
    assert cells.nbgrader_meta(cell) == {}
    assert cells.grade_id(cell) is None
    assert cells.kind(cell) == "own"
    assert not (cells.is_solution(cell) or cells.is_grade(cell) or cells.is_locked(cell))


@pytest.mark.parametrize("gid", ["", 7, None, ["t1"]])
def test_a_grade_id_that_is_not_text_is_no_grade_id(gid):
    cell = _cell(grade_id=gid, grade=True, locked=True)
    assert cells.grade_id(cell) is None
    assert cells.kind(cell) == "own"


def test_metadata_is_the_cells_own_dict():
    assert cells.nbgrader_meta(TEST)["points"] == 2
    assert cells.grade_id(TEST) == "t1"
    assert cells.nbgrader_meta(OWN) == {}


# ---------------------------------------------------------------- what grading leaves out


def _tagged(cell):
    cell = nbformat.from_dict(cell)
    cell.metadata.setdefault("tags", []).append(cells.SKIP_TAG)
    return cell


EXPERIMENT = _tagged(_cell(grade_id="experiment", locked=True, source="slow()"))
LATE = _cell(grade_id="closing_plot", locked=True, source="plot()")


def _notebook(*cell_list):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.from_dict(c) for c in cell_list]
    return nb


def test_a_tagged_experiment_and_the_courses_cells_after_the_last_test_are_left_out():
    nb = _notebook(GIVEN_CODE, ANSWER, EXPERIMENT, OWN, TEST, LATE, OWN, WRITTEN)
    skip = set(cells.skipped_when_grading(nb))
    assert skip == {"experiment"}
    last = cells.last_test(nb)
    left_out = [i for i, c in enumerate(nb.cells) if cells.left_out_when_grading(c, i, last, skip)]
    # the experiment before the test, the course's plot after it; never the student's own
    # cells (before or after the last test), the answers or the tests
    assert left_out == [2, 5]
    graded = cells.as_graded(nb)
    assert [cells.grade_id(c) for c in graded.cells] == ["setup", "a1", None, "t1", None, "w1"]
    assert len(nb.cells) == 8  # the notebook itself is untouched


def test_which_cells_are_skipped_is_read_from_the_list_given_not_the_cells_tags():
    """The grader passes the source's list: a tag that a student adds to a copy does
    nothing, and a student who removes one does not bring the cell back."""
    assert not cells.left_out_when_grading(EXPERIMENT, 0, 5, skip=set())
    assert cells.left_out_when_grading(GIVEN_CODE, 0, 5, skip={"setup"})
    assert not cells.left_out_when_grading(OWN, 0, 5, skip={None})


@pytest.mark.parametrize("cell", [TEST, ANSWER, OWN])
def test_only_a_given_code_cell_may_be_tagged(cell):
    nb = _notebook(_tagged(cell), TEST)
    with pytest.raises(ValueError, match="only a given code cell"):
        cells.skipped_when_grading(nb)
    # a student's copy, read by the student's own tools: the tag is ignored
    assert cells.skipped_when_grading(nb, strict=False) == []
