"""The demo: a small class handed in, graded by nbgrader, and its score table.

Three students hand in the first assignment: `solution` (every answer right), `stub` (the
student version untouched) and `partly-wrong` (the solution with one registered wrong
answer in one cell). They are graded exactly as `residual-pack grade` grades a class,
feedback included.
"""

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autograder.authoring.madeup import DEMO_STUDENTS, demo_class
from autograder.grading.classrun import grade_folder, prepare_out
from autograder.grading.course import CourseError, assignments, check_assignments
from autograder.grading.report import write_report
from autograder.grading.session import grading_session
from autograder.grading.student import Grader, StudentResult

# the demo's assignment unless one is named: the first one, and the quickest to grade
DEMO_ASSIGNMENT = "01_residual_stack"


def default_assignment(course: str | os.PathLike[str]) -> str | None:
    names = assignments(course)
    return DEMO_ASSIGNMENT if DEMO_ASSIGNMENT in names else (names[0] if names else None)


def demo_problems(grader: Grader, results: Sequence[StudentResult]) -> list[str]:
    """What is wrong with the demo's outcome: [] when the solution has full marks on the
    autograded cells, the stub zero and the partly wrong answer something in between."""
    by_student = {r.student: r for r in results}
    problems = []
    for student in DEMO_STUDENTS:
        r = by_student.get(student)
        if r is None or not r.graded:
            problems.append(f"{student} was not graded: {r.reason if r else 'missing'}")
            continue
        got, top = r.score()
        want = {"solution": got == top > 0, "stub": got == 0, "partly-wrong": 0 < got < top}
        if not want[student]:
            problems.append(f"{student} scored {got:g}/{top:g}")
        if not r.feedback:
            problems.append(f"{student} has no feedback page")
    return problems


def _check_out(out: Path) -> None:
    """`out` is new, empty, or an earlier demo's (its work course and its class of
    `DEMO_STUDENTS`, which the run makes again): anything else is someone's, and stays."""
    if out.exists() and not out.is_dir():
        raise CourseError(f"--out {out} is a file, not a folder")
    if not out.is_dir():
        return
    entries = {p.name for p in out.iterdir()}
    students = out / "submissions"
    earlier = entries <= {"course", "submissions"} and (
        not students.exists()
        or (students.is_dir() and {p.name for p in students.iterdir()} <= set(DEMO_STUDENTS)))
    if not earlier:
        raise CourseError(f"{out} is not empty and not an earlier demo's folder; pick "
                          f"another --out")


def run_demo(course: str | os.PathLike[str], assignment: str | None = None,
             out: str | os.PathLike[str] | None = None, jobs: int = 1, progress: Any = None,
             ) -> tuple[Grader, list[StudentResult], dict[str, str], Path, Path]:
    """Build the class in `out` (a new temporary folder when None), grade it.
    Returns (grader, results, about, csv, out)."""
    assignment = check_assignments(course, [assignment or default_assignment(course)])[0]  # type: ignore[list-item]
    out = Path(out).resolve() if out else Path(tempfile.mkdtemp(prefix="residual-pack-demo-"))
    _check_out(out)
    out.mkdir(parents=True, exist_ok=True)
    work_root = prepare_out(out / "course")
    with grading_session(course, work_root, [assignment]) as session:
        grader = session.grader(assignment)
        submissions = out / "submissions"
        if submissions.exists():
            shutil.rmtree(submissions)
        about = demo_class(grader, submissions)
        results, csv = grade_folder(grader, submissions, jobs=jobs, progress=progress)
        write_report(grader, results, work_root, f"{assignment}: the demo class\n"
                     f"isolation: {session.describe()}")
    return grader, results, about, csv, out
