"""`grading/testsource.py`: a graded test cell split into the witness's version (for the
student's kernel: nothing that says what is right) and the reference's, for every test cell
of the pack too."""

import textwrap

import pytest

from autograder.grading.records import WITNESS, recording
from autograder.grading.testsource import GradedCellError, prepare
from autograder.kernel import compare
from autograder.kernel.checks import (
    CheckFailed,
    check_gradient,
)
from microgpt import Value

CELL = textwrap.dedent('''\
    """Task 1.1: a docstring."""
    from autograder.answers import reference
    from autograder.kernel.checks import check_value, task
    from microgpt import Value

    with task("Task 1.1"):
        # a visible check
        check_value(f(Value(1.0)), 2.0, what="f(1)", expected_text="two")
        ### BEGIN HIDDEN TESTS
        check_value(f(Value(3.0)), reference.double(3.0), rtol=1e-3, what="f(3)")
        ### END HIDDEN TESTS
    print("Task 1.1: every check in this cell passed.")
    ''')


# ---------------------------------------------------------------- testsource


def test_the_witness_version_keeps_no_expected_value_tolerance_or_reference():
    split = prepare(CELL)
    assert "2.0" not in split.witness and "reference" not in split.witness
    assert "rtol" not in split.witness and "two" not in split.witness
    assert "check_value(f(Value(3.0)), None, what='f(3)')" in split.witness
    assert "# a visible check" not in split.witness  # comments go
    assert "print(" not in split.witness and "print(" not in split.reference
    assert "reference.double(3.0)" in split.reference  # the reference keeps it all


def test_the_witness_keeps_value_ok_whose_words_the_observation_uses():
    """`value_ok=False` (the task asks for a plain number) makes a wrong type's message
    say "expected a number", in a student's kernel and so in the grader's witness; it says
    nothing about the expected value (issue 42, item 7: the graded message had said "a
    number or a Value" and named no mistake)."""
    split = prepare("from autograder.kernel.checks import check_value\n"
                    "check_value(g(), 2.0, value_ok=False, what='g')\n")
    assert "value_ok=False" in split.witness and "2.0" not in split.witness
    with recording(WITNESS, "<cell>") as records:
        with pytest.raises(CheckFailed, match="expected a number, got a str"):
            exec(compile(split.witness, "<cell>", "exec"), {"g": lambda: "text"})
    assert len(records) == 1


def test_both_versions_have_their_statements_on_the_same_lines():
    split = prepare(CELL)
    witness_lines = split.witness.splitlines()
    reference_lines = split.reference.splitlines()
    assert len(witness_lines) == len(reference_lines)
    hidden = [reference_lines[n - 1] for n in sorted(split.hidden)]
    assert hidden == ["    check_value(f(Value(3.0)), reference.double(3.0), rtol=0.001, "
                      "what='f(3)')"]


def test_a_cell_that_would_hand_the_reference_to_the_student_is_refused():
    cell = ("from autograder.answers import reference\n"
            "check_value(g(reference.plain_layer), 1.0, what='x')\n")
    with pytest.raises(GradedCellError,
                       match=r"autograder\.answers, which only the grader has"):
        prepare(cell)
    with pytest.raises(GradedCellError, match=r"\*args"):
        prepare("check_value(*args)\n")


# ---------------------------------------------------------------- the pack's own test cells


def _graded_code_cells():
    import nbformat

    from autograder.cells import nbgrader_meta
    from autograder.grading.course import SOURCE, assignments, notebook_paths

    course = __import__("pathlib").Path(__file__).resolve().parents[2]
    for name in assignments(course):
        for path in notebook_paths(course / SOURCE / name):
            for cell in nbformat.read(str(path), as_version=4).cells:
                meta = nbgrader_meta(cell)
                if meta.get("grade") and cell.cell_type == "code":
                    yield name, meta["grade_id"], cell.source


def _check_lines(source):
    import ast

    from autograder.grading.testsource import JUDGE_ARGUMENTS

    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            if name in JUDGE_ARGUMENTS or name.startswith("check_"):
                lines.add(node.lineno)
    return lines


def test_every_graded_cell_splits_and_checks_something_the_student_has_not_seen():
    """Each graded test cell of every assignment splits into its two versions, keeps the
    reference answers out of the witness version, and has checks in its hidden tests: a
    kernel that forges the observations of the visible checks (their expected values are
    in the released notebook) still fails the cell."""
    cells = list(_graded_code_cells())
    assert len(cells) >= 30
    for name, grade_id, source in cells:
        split = prepare(source)
        assert "autograder.answers" not in split.witness, (name, grade_id)
        assert "torchtrack import mlp as reference" not in split.witness, (name, grade_id)
        assert _check_lines(split.reference) & set(split.hidden), (name, grade_id)


def test_a_gradient_check_says_when_the_output_was_cut_from_its_input():
    """A result rebuilt from .data fails with words about the cut graph, in the student's
    kernel and in the grader's verdict alike; a connected graph with a zero slope gets none."""
    with pytest.raises(CheckFailed, match="no longer depends on it.*rebuilt from numbers"):
        check_gradient(lambda x: Value(x.data * 2), 1.0, what="d f/dx")
    with pytest.raises(CheckFailed) as raised:
        check_gradient(lambda x: x * 0 + Value(x.data), 1.0, what="d g/dx")
    assert "rebuilt" not in str(raised.value)
    with recording(WITNESS, "<test>") as records:
        check_gradient(lambda x: Value(x.data * 2), 1.0, what="d f/dx")
    message = compare.compare("gradient", records[0]["observed"], {"number": 2.0},
                              {"what": "d f/dx", "rtol": 1e-5, "atol": 1e-8})
    assert "no longer depends on it" in message
