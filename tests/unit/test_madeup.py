"""autograder/authoring/madeup.py: the made-up class, built from the committed release and
source of the first assignment (no grading: see test_pipeline for that)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder import cells
from autograder.answers import mutants as mutant_registry
from autograder.authoring.madeup import (
    DEMO_STUDENTS,
    class_of,
    demo_class,
    filled_in,
    mutant_notebook_name,
    partial_mutant,
    with_answer,
)
from autograder.grading.course import EXERCISES, SOURCE, CourseError, read_notebook

COURSE = Path(__file__).resolve().parents[2]
ASSIGNMENT = NOTEBOOK = "01_residual_stack"
pytestmark = pytest.mark.skipif(not (COURSE / EXERCISES / ASSIGNMENT).is_dir(),
                                reason=f"no {ASSIGNMENT} release")


def _release():
    return read_notebook(COURSE / EXERCISES / ASSIGNMENT / f"{NOTEBOOK}.ipynb")


def _source():
    return read_notebook(COURSE / SOURCE / ASSIGNMENT / f"{NOTEBOOK}.ipynb")


def _grader():
    """What the made-up class reads of a Grader, from the committed folders."""
    source = _source()
    work = SimpleNamespace(path=lambda *parts: COURSE.joinpath(*parts))
    return SimpleNamespace(
        work=work, assignment=ASSIGNMENT, notebooks=[NOTEBOOK],
        release_notebook=lambda name: _release(),
        autograded={(NOTEBOOK, cells.grade_id(c)): cells.is_autograded_test(c)
                    for c in source.cells if cells.is_grade(c)},
        answer_cells={(NOTEBOOK, cells.grade_id(c)) for c in source.cells
                      if cells.is_solution(c)},
    )


def test_filled_in_is_the_release_with_the_sources_answers():
    release, source = _release(), _source()
    nb = filled_in(release, source)
    answers = {cells.grade_id(c): c.source for c in source.cells if cells.is_solution(c)}
    assert [c.metadata for c in nb.cells] == [c.metadata for c in release.cells]
    for cell in nb.cells:
        if cells.is_solution(cell):
            want = [line for line in answers[cells.grade_id(cell)].split("\n")
                    if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line]
            assert cell.source == "\n".join(want)
        else:
            assert cell.source == next(c.source for c in release.cells if c.id == cell.id)
    assert release.cells != nb.cells  # a copy: the release is untouched


def test_with_answer_replaces_one_answer_cell_only():
    nb = _release()
    answer = next(c for c in nb.cells if cells.is_solution(c))
    made = with_answer(nb, cells.grade_id(answer), "x = 1")
    changed = [a for a, b in zip(nb.cells, made.cells) if a.source != b.source]
    assert changed == [answer]
    test = next(c for c in nb.cells if cells.is_autograded_test(c))
    with pytest.raises(CourseError):
        with_answer(nb, cells.grade_id(test), "x = 1")


def test_a_mutant_names_its_notebook_when_there_are_several():
    one = mutant_registry.Mutant("m", "a", "", ("t",))
    assert mutant_notebook_name(one, ["nb"]) == "nb"
    with pytest.raises(CourseError):
        mutant_notebook_name(one, ["nb", "other"])
    named = mutant_registry.Mutant("m", "a", "", ("t",), notebook="other.ipynb")
    assert mutant_notebook_name(named, ["nb", "other"]) == "other"
    with pytest.raises(CourseError):
        mutant_notebook_name(named, ["nb"])


def test_the_class_holds_the_solution_the_stub_and_each_mutant():
    grader = _grader()
    registered = mutant_registry.load(ASSIGNMENT)
    made = class_of(grader, ASSIGNMENT, registered)
    assert list(made) == ["solution", "stub", *(f"mutant-{i:02d}"
                                                for i in range(1, len(registered) + 1))]
    for i, mutant in enumerate(registered, 1):
        label, notebooks, which = made[f"mutant-{i:02d}"]
        assert which is mutant and mutant.name in label
        cell = next(c for c in notebooks[NOTEBOOK].cells if cells.grade_id(c) == mutant.cell)
        assert cell.source == mutant.source


def test_the_demo_class_has_three_students(tmp_path):
    grader = _grader()
    mutant = partial_mutant(grader, mutant_registry.load(ASSIGNMENT))
    tests = {key for key, auto in grader.autograded.items() if auto}
    if mutant is not None:
        assert 0 < len(mutant.loses) < len(tests)
    about = demo_class(grader, tmp_path)
    assert set(about) == set(DEMO_STUDENTS)
    for student in DEMO_STUDENTS:
        assert (tmp_path / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb").is_file()
