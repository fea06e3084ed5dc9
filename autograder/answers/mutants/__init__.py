"""Registered wrong answers ("mutants"): each must lose the points of the cells it targets.

One module per assignment defines `MUTANTS`, a list of `Mutant`s. The module is named
like the assignment's folder in `source/` without its course-order prefix
(`01_residual_stack` -> `residual_stack.py`), as a module name cannot start with a digit;
`module_name` is the one place that maps one to the other. The pack's self-check puts each
mutant's source in place of the solution cell it names, grades the notebook, and fails
unless every cell in `loses` scores zero. Each mutant's `hint` names its mistake for a
student whose answer fails a visible test the same way (`residual-pack fingerprints`,
`autograder.kernel.diagnosis`).

A module may also define `SLIPS`, a list of `Slip`s: wrong answers that raise, do not run
or make a common Python slip, each with the exact text that every visible test it fails
shows the student (`tests/integration/test_slips.py` runs them in a kernel and compares).
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Mutant:
    name: str  # short, shown in the self-check report
    cell: str  # grade_id of the solution cell whose source is replaced
    source: str  # the wrong answer: the whole new source of that cell
    loses: tuple  # grade_ids of the graded test cells that must score zero
    notebook: str = ""  # notebook file name in the assignment; "" when it has only one
    # the mistake in words for the student, shown when a visible check fails the way this
    # answer fails it (`autograder.kernel.diagnosis`): name the mistake, do not give the answer
    hint: str = ""


def module_name(assignment: str) -> str:
    """The module holding `assignment`'s mutants: the assignment's name without its
    course-order prefix (`01_residual_stack` -> `autograder.answers.mutants.residual_stack`)."""
    return f"{__name__}.{re.sub(r'^[0-9]+_', '', assignment).replace('-', '_')}"


def _module(assignment: str) -> ModuleType | None:
    """The module of `assignment`'s wrong answers (None when it has none)."""
    import importlib

    name = module_name(assignment)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return None
        raise


def load(assignment: str) -> list[Mutant]:
    """The registered mutants of `assignment`: its module's `MUTANTS` ([] when it has none)."""
    return list(getattr(_module(assignment), "MUTANTS", []))


@dataclass(frozen=True)
class Slip:
    """A slip: a wrong answer that raises, or does not run, or fails the way a common
    Python slip does (a misspelt name, an indentation, lists joined with `+`): each visible
    test cell it fails must show the student exactly `shows` (for an error: the error,
    their own lines and the hint, `autograder.kernel.crash`)."""

    name: str
    cell: str  # grade_id of the answer cell whose source is replaced
    source: str  # the slip: the whole new source of that cell
    # (grade_id of a visible test cell, the text its error shows), in notebook order; in
    # the text, "In[@grade_id]" stands for that cell's "In[n]" in the run
    shows: tuple
    notebook: str = ""  # notebook file name in the assignment; "" when it has only one


CELL_NUMBER = re.compile(r"In\[@([\w.-]+)\]")


def shown_text(text: str, numbers: Mapping[str, int]) -> str:
    """`text` of a `Slip.shows` with each "In[@grade_id]" as "In[n]" (`numbers`:
    grade_id -> the cell's execution count in the run)."""
    return CELL_NUMBER.sub(lambda m: f"In[{numbers[m.group(1)]}]", text)


def load_slips(assignment: str) -> list[Slip]:
    """The registered slips of `assignment`: its module's `SLIPS` ([] when it has none)."""
    return list(getattr(_module(assignment), "SLIPS", []))
