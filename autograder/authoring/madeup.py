"""The made-up class: submissions the pack writes itself from an assignment's release and
source, to grade where no student is (the self-check, the demo, the hostile tests, the
grading benchmark).

- `filled_in`: the release with every answer as the source has it (full marks);
- the release untouched: the stub (zero);
- `with_answer`: one answer cell replaced, for a registered wrong answer (`mutants`);
- `class_of`: all of these for one assignment; `demo_class`: the demo's three students.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from autograder import cells
from autograder.answers import mutants as mutant_registry
from autograder.cells import is_solution
from autograder.grading.course import SOURCE, CourseError, read_notebook

if TYPE_CHECKING:
    from autograder.answers.mutants import Mutant
    from autograder.grading.student import Grader

__all__ = ["filled_in", "with_answer", "mutant_notebook_name", "class_of", "partial_mutant",
           "demo_class", "DEMO_STUDENTS"]

SOLUTION_MARKERS = ("BEGIN SOLUTION", "END SOLUTION")
DEMO_STUDENTS = ("solution", "stub", "partly-wrong")


def filled_in(release: nbformat.NotebookNode,
              source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The release notebook with every answer cell written as the source has it (the
    solution markers dropped): what a student who got everything right hands in."""
    answers = {
        cells.grade_id(c): c.source for c in source.cells if is_solution(c)
    }
    nb = copy.deepcopy(release)
    for cell in nb.cells:
        if is_solution(cell):
            text = answers[cells.grade_id(cell)]
            cell.source = "\n".join(
                line for line in text.split("\n") if not any(m in line for m in SOLUTION_MARKERS)
            )
    return nb


def with_answer(nb: nbformat.NotebookNode, grade_id: str,
                source: str) -> nbformat.NotebookNode:
    """A copy of `nb` whose answer cell `grade_id` holds `source`."""
    nb = copy.deepcopy(nb)
    found = [c for c in nb.cells if cells.grade_id(c) == grade_id]
    if len(found) != 1 or not is_solution(found[0]):
        raise CourseError(f"no answer cell {grade_id!r} in the notebook")
    found[0].source = source
    return nb


def mutant_notebook_name(mutant: Mutant, notebooks: Sequence[str]) -> str:
    name = mutant.notebook.removesuffix(".ipynb") if mutant.notebook else ""
    if not name:
        if len(notebooks) != 1:
            raise CourseError(f"mutant {mutant.name!r} must name its notebook (one of {notebooks})")
        return notebooks[0]
    if name not in notebooks:
        raise CourseError(f"mutant {mutant.name!r} names {name!r}, not one of {notebooks}")
    return name


def class_of(grader: Grader, assignment: str, mutants: Sequence[Mutant],
             ) -> dict[str, tuple[str, dict[str, Any], Mutant | None]]:
    """{student id: (label, {notebook: NotebookNode}, mutant or None)} for the solution,
    the stub and each mutant."""
    source_dir = grader.work.path(SOURCE, assignment)
    releases = {name: grader.release_notebook(name) for name in grader.notebooks}
    solution = {
        name: filled_in(releases[name], read_notebook(source_dir / f"{name}.ipynb"))
        for name in grader.notebooks
    }
    made: dict[str, tuple[str, dict[str, Any], Mutant | None]] = {
        "solution": ("solution", solution, None),
        "stub": ("untouched stub", releases, None),
    }
    for i, mutant in enumerate(mutants, 1):
        name = mutant_notebook_name(mutant, grader.notebooks)
        notebooks = dict(solution)
        notebooks[name] = with_answer(solution[name], mutant.cell, mutant.source)
        made[f"mutant-{i:02d}"] = (f"mutant: {mutant.name}", notebooks, mutant)
    return made


def partial_mutant(grader: Grader, registered: Sequence[Mutant]) -> Mutant | None:
    """The registered mutant that should cost the fewest autograded cells, but some."""
    tests = {key for key, auto in grader.autograded.items() if auto}
    fits = []
    for mutant in registered:
        name = mutant_notebook_name(mutant, grader.notebooks)
        loses = {(name, gid) for gid in mutant.loses}
        if loses and loses < tests:
            fits.append((len(loses), mutant))
    return min(fits, key=lambda f: f[0])[1] if fits else None


def demo_class(grader: Grader, folder: str | os.PathLike[str]) -> dict[str, str]:
    """Write the three submissions into `folder` (<student>/<assignment>/<nb>.ipynb).
    Returns {student: a few words on what they handed in}."""
    assignment = grader.assignment
    registered = mutant_registry.load(assignment)
    mutant = partial_mutant(grader, registered)
    made = class_of(grader, assignment, [mutant] if mutant else [])
    handed = {
        "solution": made["solution"][1],
        "stub": made["stub"][1],
    }
    if mutant:
        handed["partly-wrong"] = made["mutant-01"][1]
        about = {"partly-wrong": f"the solution with a wrong answer: {mutant.name}"}
    else:
        # no registered mutant: leave the first answer cell as the stub had it
        first = next(iter(sorted(grader.answer_cells)))
        nb_name, grade_id = first
        notebooks = dict(made["solution"][1])
        stub_cell = next(
            c for c in made["stub"][1][nb_name].cells
            if cells.grade_id(c) == grade_id
        )
        notebooks[nb_name] = with_answer(notebooks[nb_name], grade_id, stub_cell.source)
        handed["partly-wrong"] = notebooks
        about = {"partly-wrong": f"the solution with {grade_id} left undone"}
    about.update({"solution": "every answer right", "stub": "the student version, untouched"})
    for student, notebooks in handed.items():
        dest = Path(folder) / student / assignment
        dest.mkdir(parents=True, exist_ok=True)
        for name, nb in notebooks.items():
            nbformat.write(nb, str(dest / f"{name}.ipynb"))
    return about
