"""The pack's self-check: do the graded tests tell right from wrong?

For each assignment, in a work copy of the course and under the real nbgrader:

1. the student version nbgrader generates is the one committed in `exercises/`;
2. nbgrader's Validator passes every source notebook, and, inverted, every exercise
   (each graded cell fails on the stub);
3. autograded: the solution earns full marks on every autograded cell, the untouched
   stub earns zero on every one, and every registered mutant (`autograder.answers.mutants`)
   scores zero on each cell in its `loses`;
4. the feedback pages of all of these show no line of a hidden test;
5. any further submissions the caller hands in (`extra`: the test suite's attacks on the
   verdict, graded in the same class) earn nothing: zero on every autograded cell, and
   nothing held back for review that would have counted.

Every submission, the solution too, runs as students' submissions are graded: the
course's cells that cannot change an autograded score are left out
(`cells.left_out_when_grading`: the given cells after the last autograded test, and the
experiments the source tags `skip-when-grading`, which no later test reads). That they
cannot is checked here: the solution must still earn full marks, and the reference run
stops when a test needs a cell left out. Every cell runs with `--whole-notebooks`; that the
scores are the same then is measured by `benchmarks/selfcheck_time.py`. The notebooks run
from top to bottom in full when nbgrader's Validator checks the sources (step 2).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autograder.answers import mutants as mutant_registry
from autograder.authoring.madeup import class_of, mutant_notebook_name
from autograder.grading.classrun import MIN_FOR_WORKERS, grade_all
from autograder.grading.course import (
    EXERCISES,
    SOURCE,
    CourseError,
    notebook_paths,
    read_notebook,
    work_folder,
)
from autograder.grading.feedback import hidden_test_lines, leaked_lines
from autograder.grading.report import score_table
from autograder.grading.session import GradingSession, course_limits, grading_session
from autograder.grading.student import Grader, StudentResult

if TYPE_CHECKING:
    from pathlib import Path

    from autograder.answers.mutants import Mutant

# the self-check's limit for a whole notebook: it grades the slowest notebooks (the GPT
# assignments) and every registered wrong answer, several at a time
NOTEBOOK_TIMEOUT = 3600
EARNS_NOTHING = "earns nothing"  # the label of an extra submission


# ---------------------------------------------------------------- the check


@dataclass
class AssignmentCheck:
    assignment: str
    failures: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)  # student id -> label
    results: list = field(default_factory=list)  # StudentResult
    table: str = ""
    seconds: dict = field(default_factory=dict)  # step -> wall time

    @property
    def ok(self) -> bool:
        return not self.failures


def _registry_problems(grader: Grader, mutants: Sequence[Mutant]) -> list[str]:
    problems = []
    for mutant in mutants:
        try:
            name = mutant_notebook_name(mutant, grader.notebooks)
        except CourseError as exc:
            problems.append(str(exc))
            continue
        answers = {gid for nb, gid in grader.answer_cells if nb == name}
        if mutant.cell not in answers:
            problems.append(
                f"mutant {mutant.name!r}: {mutant.cell!r} is not an answer cell of {name}"
            )
        if not mutant.loses:
            problems.append(f"mutant {mutant.name!r} names no cell it must lose")
        for gid in mutant.loses:
            if not grader.autograded.get((name, gid)):
                problems.append(
                    f"mutant {mutant.name!r}: {gid!r} is not an autograded test cell of {name}"
                )
    return problems


def check_assignment(session: GradingSession, assignment: str, *, validate: bool = True,
                     feedback: bool = True, only: list | None = None, jobs: int = 1,
                     progress: Any = None,
                     whole: bool = False, extra: dict | None = None) -> AssignmentCheck:
    """Self-check one assignment in the grading session `session`. `only`: a list of
    words; when given, only the mutants whose name holds one of them are graded. When the
    session isolates, the made-up class is graded exactly as students are (sandboxed
    kernels, hardened test runner); with `whole`, every code cell runs. `extra`:
    {student: {notebook name: notebook}} graded in the same class, each of which must earn
    nothing (step 5)."""
    from nbgrader.validator import Validator

    say = progress or (lambda *_: None)
    check = AssignmentCheck(assignment)
    t = time.perf_counter()
    grader = session.grader(assignment)
    work = session.work
    check.seconds["generate"] = time.perf_counter() - t

    # 1. the committed student version is the generated one
    committed = work.course / EXERCISES / assignment
    check.failures += exercise_drift(work.path(EXERCISES, assignment), committed)

    # 2. nbgrader's validator: sources pass, exercises fail every graded cell
    if validate:
        t = time.perf_counter()
        cfg = work.config()
        for path in notebook_paths(work.path(SOURCE, assignment)):
            say(f"  validating source {assignment}/{path.name}")
            found = Validator(config=cfg, log=work.api().log).validate(str(path))
            if found:
                check.failures.append(
                    f"validator: source {assignment}/{path.name} does not pass: "
                    + _validator_text(found)
                )
        for path in notebook_paths(work.path(EXERCISES, assignment)):
            say(f"  validating exercise {assignment}/{path.name} (inverted)")
            inverted = Validator(config=cfg, log=work.api().log)
            inverted.invert = True
            found = inverted.validate(str(path))
            if found:
                check.failures.append(
                    f"validator --invert: exercise {assignment}/{path.name}: "
                    + _validator_text(found)
                )
        check.seconds["validate"] = time.perf_counter() - t

    # 3. autograde the solution, the stub and the mutants
    registered = mutant_registry.load(assignment)
    if only:
        registered = [m for m in registered if any(w in m.name for w in only)]
    problems = _registry_problems(grader, registered)
    if problems:
        check.failures += problems
        return check
    if not registered and not only:
        check.notes.append(f"{assignment} has no registered mutants (autograder/answers/mutants/)")
    targeted = {
        (mutant_notebook_name(m, grader.notebooks), gid) for m in registered for gid in m.loses
    }
    for key, auto in grader.autograded.items():
        if auto and key not in targeted and not only:
            check.notes.append(f"no mutant targets {key[1]} ({key[0]})")

    made = class_of(grader, assignment, registered)
    for student, notebooks in (extra or {}).items():
        if student in made:
            raise CourseError(f"an extra submission may not be called {student!r}")
        made[student] = (f"{EARNS_NOTHING}: {student}", notebooks, None)
    if grader.sandbox is not None:
        grader.sandbox.whole = whole
    t = time.perf_counter()
    for student, (label, notebooks, _) in made.items():
        grader.submit(student, notebooks)
        check.labels[student] = label
    at_once = jobs if len(made) >= MIN_FOR_WORKERS else 1
    say(f"  autograding {len(made)} submissions ({at_once} at a time)")

    def graded(result: StudentResult) -> None:
        label = check.labels[result.student]
        got, top = result.score()
        say(f"    {result.student} ({label}): "
            + (f"{got:g}/{top:g}" if result.graded else f"not graded: {result.reason}"))

    check.results = grade_all(grader, made, feedback=feedback, jobs=jobs, progress=graded)
    for result in check.results:
        label, notebooks, mutant = made[result.student]
        if label.startswith(EARNS_NOTHING):
            check.failures += _judge_extra(label, result)
        else:
            check.failures += _judge(result.student, label, result, mutant, grader)
        if feedback and result.graded:
            check.failures += _leaks(result.student, grader, result, notebooks)
    check.seconds["autograde"] = time.perf_counter() - t
    check.seconds["per submission"] = (
        sum(r.seconds for r in check.results) / max(1, len(check.results))
    )
    check.table = score_table(grader, check.results)
    return check


def _judge(student: str, label: str, result: StudentResult, mutant: Mutant | None,
           grader: Grader) -> list[str]:
    if not result.graded:
        return [f"{label}: nbgrader could not grade it: {result.reason}"]
    failures = []
    auto = [c for c in result.cells if c.autograded]
    if not any(grader.autograded.values()):
        # an assignment graded only by hand: nbgrader must list each answer, unscored
        manual = [c for c in result.cells if not c.autograded]
        if not manual:
            return [f"{label}: no cell was graded, neither by the autograder nor by hand"]
        return [f"{label}: hand-graded {c.cell} was given {c.score:g} before a grader saw it"
                for c in manual if c.score]
    if not auto:
        return [f"{label}: no autograded cell was graded"]
    if student == "solution":
        for c in auto:
            if c.score != c.max_score:
                failures.append(
                    f"solution scored {c.score:g}/{c.max_score:g} on {c.cell} (want full marks)"
                )
    elif student == "stub":
        for c in auto:
            if c.score != 0:
                failures.append(
                    f"untouched stub scored {c.score:g}/{c.max_score:g} on {c.cell} (want 0)"
                )
    else:
        name = mutant_notebook_name(mutant, grader.notebooks)  # type: ignore[arg-type]
        for gid in mutant.loses:  # type: ignore[union-attr]
            c = next((c for c in auto if c.cell == gid and c.notebook == name), None)
            if c is None:
                failures.append(f"{label}: {gid} was not graded")
            elif c.score != 0:
                failures.append(
                    f"{label}: kept {c.score:g}/{c.max_score:g} on {gid} (it must lose them: "
                    f"the test does not catch this wrong answer)"
                )
    return failures


def _judge_extra(label: str, result: StudentResult) -> list[str]:
    """An extra submission earns nothing: every autograded cell 0, and no score held back
    for review that a person would give back."""
    if not result.graded:
        return [f"{label}: nbgrader could not grade it: {result.reason}"]
    failures = [f"{label}: scored {c.score:g}/{c.max_score:g} on {c.cell} (want 0)"
                for c in result.cells if c.autograded and c.score]
    if result.withheld_score:
        failures.append(f"{label}: {result.withheld_score:g} points held back for review "
                        "(want 0)")
    return failures


def _leaks(student: str, grader: Grader, result: StudentResult,
           notebooks: Mapping[str, Any]) -> list[str]:
    failures = []
    source_dir = grader.work.path(SOURCE, grader.assignment)
    for page in result.feedback:
        name = page.stem
        hidden = [
            line
            for cell in read_notebook(source_dir / f"{name}.ipynb").cells
            for line in hidden_test_lines(cell.source)
        ]
        shown = "\n".join(c.source for c in notebooks[name].cells)
        leaks = leaked_lines(page.read_text(encoding="utf-8"), hidden, visible_text=shown)
        if leaks:
            failures.append(
                f"feedback for {student} ({page.name}) shows hidden test line(s): {leaks[:3]}"
            )
    return failures


def _validator_text(found: Mapping[str, Any]) -> str:
    parts = []
    for kind, cells in found.items():
        for cell in cells:
            first = cell.get("source", "").strip().splitlines()[:1]
            error = (cell.get("raw_error") or "").strip().splitlines()[-1:]
            parts.append(f"{kind}: {' '.join(first)!r}" + (f" -> {error[0]}" if error else ""))
    return "; ".join(parts)


def exercise_drift(generated: str | os.PathLike[str], committed: Path) -> list[str]:
    """Differences between a generated release folder and the committed one, byte for byte."""
    from autograder.authoring.generate import tree_differences

    if not committed.is_dir():
        return [f"exercises/{committed.name} is missing; run `residual-pack generate`"]
    return [
        f"exercises/{committed.name}: {d} (run `residual-pack generate`)"
        for d in tree_differences(generated, committed)
    ]


def selfcheck(course: str | os.PathLike[str], names: Sequence[str] | None = None, *,
              workdir: str | os.PathLike[str] | None = None, keep: bool = False,
              validate: bool = True, feedback: bool = True, only: list | None = None,
              jobs: int = 1, progress: Any = None, isolate: bool = True, whole: bool = False,
              extra: dict | None = None) -> list:
    """Self-check `names` (all assignments when empty); returns the AssignmentChecks.
    With `isolate` (the default), submissions are graded in sandboxed kernels, as
    `residual-pack grade` grades students; with `whole`, every code cell runs. `extra`:
    {assignment: {student: {notebook name: notebook}}}, submissions graded in that
    assignment's class that must earn nothing (`check_assignment`)."""
    checks = []
    with work_folder(workdir, prefix="residual-pack-selfcheck-", keep=keep) as tmp, \
            grading_session(course, tmp / "course", names, isolate=isolate,
                            limits=course_limits(course, notebook_timeout=NOTEBOOK_TIMEOUT),
                            jupyter=tmp / "jupyter") as session:
        for assignment in session.work.names:
            if progress:
                progress(f"{assignment}:")
            checks.append(check_assignment(session, assignment, validate=validate,
                                           feedback=feedback, only=only, jobs=jobs,
                                           progress=progress, whole=whole,
                                           extra=(extra or {}).get(assignment)))
    return checks


def report(checks: Sequence[AssignmentCheck]) -> str:
    """The self-check report as text."""
    lines = []
    for check in checks:
        lines.append(f"== {check.assignment}: {'ok' if check.ok else 'FAILED'}")
        if check.table:
            lines.append(check.table)
            mutants = [(s, lab) for s, lab in check.labels.items() if s.startswith("mutant-")]
            for student, label in mutants:
                lines.append(f"  {student} = {label.removeprefix('mutant: ')}")
        for note in check.notes:
            lines.append(f"note: {note}")
        for failure in check.failures:
            lines.append(f"FAIL: {failure}")
        if check.seconds:
            lines.append("time: " + ", ".join(f"{k} {v:.1f} s" for k, v in check.seconds.items()))
    return "\n".join(lines)

