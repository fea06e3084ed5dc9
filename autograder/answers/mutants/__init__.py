"""Registered wrong answers ("mutants"): each must lose the points of the cells it targets.

One module per assignment defines `MUTANTS`, a list of `Mutant`s. The module is named
like the assignment's folder in `source/` without its course-order prefix
(`01_residual_stack` -> `residual_stack.py`), as a module name cannot start with a digit;
`module_name` is the one place that maps one to the other. The pack's self-check puts each
mutant's source in place of the solution cell it names, grades the notebook, and fails
unless every cell in `loses` scores zero. Each mutant's `hint` names its mistake for a
student whose answer fails a visible test the same way (`residual-pack fingerprints`,
`autograder.kernel.diagnosis`).
"""

import re
from dataclasses import dataclass


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


def module_name(assignment):
    """The module holding `assignment`'s mutants: the assignment's name without its
    course-order prefix (`01_residual_stack` -> `autograder.answers.mutants.residual_stack`)."""
    return f"{__name__}.{re.sub(r'^[0-9]+_', '', assignment).replace('-', '_')}"


def load(assignment):
    """The registered mutants of `assignment`: its module's `MUTANTS` ([] when it has none)."""
    import importlib

    name = module_name(assignment)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name == name:
            return []
        raise
    return list(getattr(module, "MUTANTS", []))
