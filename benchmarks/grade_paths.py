"""One class, graded by both of the course's paths: `residual-pack grade` and plain
`nbgrader autograde` (with the course's nbgrader_config.py), both sandboxed.

    .venv/bin/python benchmarks/grade_paths.py [--students NAME ...] [-j JOBS] [--keep DIR]

The class is taken from the hostile class of the tests (`tests/hostile`): the three
honest students and the attacks whose submission is one notebook in nbgrader's layout
(`DEFAULT_STUDENTS`). Each path starts cold (its own course copy, gradebook and
reference run) and runs as a command:

1. `residual-pack grade ASSIGNMENT SUBMISSIONS --out A -j JOBS --no-feedback`;
2. in a copy of the course (config and source/): `nbgrader generate_assignment`
   (untimed setup: `residual-pack grade` generates the release inside its run), the
   submissions copied into `submitted/`, then `nbgrader autograde ASSIGNMENT` (timed).

It prints how each path isolated the kernels, the seconds per submission, and every
student's autograded score per cell with its "needs manual grade" mark from each
gradebook; it exits 1 when a score differs. Needs root and Linux namespaces for the full
sandbox (elsewhere both paths run with limits only, and say so).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

ASSIGNMENT = NOTEBOOK = "01_residual_stack"
BIN = Path(sys.executable).parent
# the honest three, and attacks that are one notebook each in nbgrader's layout and finish
# in seconds (no time limit to sit out)
DEFAULT_STUDENTS = [
    "honest-full", "honest-stub", "honest-partial",
    "deleted-cells", "reordered-cells", "duplicated-cells",
    "patched-checks", "tamper-during-test", "fake-success", "read-hidden-tests",
]


def _command(name):
    script = BIN / name
    return [str(script)] if script.exists() else [name]


def make_class(folder, out, students=None):
    """Write the chosen students of the hostile class as
    `folder/<student>/ASSIGNMENT/NOTEBOOK.ipynb`; returns {student: what it does}. The
    attacks that go for files are told this repository's and the batch run's (`out`)."""
    from hostile import Context, build_class

    context = Context(course=ROOT, out=out, submissions=folder)
    cases = {c.student: c for c in build_class(folder / ".all", context)}
    shutil.rmtree(folder / ".all")
    made = {}
    for student in students or DEFAULT_STUDENTS:
        case = cases[student]
        data = case.files[f"{NOTEBOOK}.ipynb"]
        dest = folder / student / ASSIGNMENT
        dest.mkdir(parents=True)
        (dest / f"{NOTEBOOK}.ipynb").write_bytes(data)
        made[student] = case.what
    return made


def gradebook_scores(path):
    """{student: {grade_id: (auto_score, needs_manual_grade)}} of the autograded cells."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(f"sqlite:///{path}") as gb:
        for student in gb.students:
            try:
                submission = gb.find_submission(ASSIGNMENT, student.id)
            except Exception:  # noqa: BLE001 (registered, not graded)
                found[student.id] = {}
                continue
            cells = found.setdefault(student.id, {})
            for notebook in submission.notebooks:
                for grade in notebook.grades:
                    if grade.cell.cell_type == "code":
                        cells[grade.name] = (float(grade.auto_score or 0.0),
                                             bool(grade.needs_manual_grade))
    return found


def batch(submissions, out, jobs, cluster=None):
    """`residual-pack grade` (on a Dask cluster: `cluster`, e.g. "local"): (seconds,
    scores, how it isolated)."""
    command = [*_command("residual-pack"), "grade", ASSIGNMENT, str(submissions),
               "--out", str(out), "-j", str(jobs), "--fresh", "--no-feedback"]
    if cluster:
        command += ["--cluster", cluster]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        raise RuntimeError(f"residual-pack grade failed:\n{run.stdout[-3000:]}\n"
                           f"{run.stderr[-3000:]}")
    level = next((line for line in run.stdout.splitlines() if line.startswith("isolation:")),
                 "isolation: (not said)")
    return seconds, gradebook_scores(Path(out) / "gradebook.db"), level


def plain_nbgrader(submissions, course):
    """`nbgrader autograde` in a copy of the course: (seconds, scores, how it isolated)."""
    course.mkdir(parents=True)
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    env = dict(os.environ, HOME=str(course / ".home"),
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    (course / ".home").mkdir()
    setup = subprocess.run([*_command("nbgrader"), "generate_assignment", ASSIGNMENT],
                           cwd=course, capture_output=True, text=True, env=env)
    if setup.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{setup.stderr[-3000:]}")
    shutil.copytree(submissions, course / "submitted")
    start = time.perf_counter()
    run = subprocess.run([*_command("nbgrader"), "autograde", ASSIGNMENT], cwd=course,
                         capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    lines = [line.split("] ", 1)[-1] for line in run.stderr.splitlines()
             if "residual-pack: student kernels run" in line or "FALLING BACK" in line]
    level = lines[0] if lines else "(no residual-pack line in nbgrader's log)"
    if run.returncode != 0:  # a student nbgrader could not grade: its scores show it
        level += f" [nbgrader autograde exited {run.returncode}]"
    return seconds, gradebook_scores(course / "gradebook.db"), level


def _cells(found, student):
    return " ".join(f"{v[0]:g}{'*' if v[1] else ''}"
                    for _, v in sorted(found.get(student, {}).items()))


def compare(students, a, b):
    """Students whose scores differ between `a` and `b` (per cell and mark)."""
    return [s for s in students if a.get(s, {}) != b.get(s, {})]


def grade_both(folder, students=None, jobs=1, say=print, dask=False):
    """Grade the class both ways in `folder` (and a third, on a local Dask cluster, with
    `dask`); returns a dict with what was measured."""
    folder = Path(folder)
    course = folder / "nbgrader-course"
    submissions = folder / "submissions"
    made = make_class(submissions, folder / "batch", students)
    n = len(made)
    say(f"{n} submissions of {ASSIGNMENT}; {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}")
    t_batch, s_batch, level_batch = batch(submissions, folder / "batch", jobs)
    say(f"residual-pack grade -j {jobs}: {t_batch:.1f} s, {t_batch / n:.2f} s per "
        f"submission; {level_batch}")
    t_plain, s_plain, level_plain = plain_nbgrader(submissions, course)
    say(f"nbgrader autograde: {t_plain:.1f} s, {t_plain / n:.2f} s per submission; "
        f"{level_plain}")
    say("scores per cell (auto score, * = needs manual grade), batch | nbgrader:")
    for student in made:
        say(f"  {student:20s} {_cells(s_batch, student):16s} | {_cells(s_plain, student)}")
    differ = compare(made, s_batch, s_plain)
    found = {"students": made, "batch": (t_batch, s_batch, level_batch),
             "plain": (t_plain, s_plain, level_plain)}
    if dask:
        # the same class once more, on a local Dask cluster: its workers' own sandboxes
        # (the submissions again: the batch run's attacks may have written beside them)
        again = make_class(folder / "submissions-dask", folder / "dask", students)
        t_dask, s_dask, level_dask = batch(folder / "submissions-dask", folder / "dask",
                                           max(jobs, 2), cluster="local")
        say(f"residual-pack grade --cluster local: {t_dask:.1f} s, "
            f"{t_dask / len(again):.2f} s per submission; {level_dask}")
        for student in made:
            say(f"  {student:20s} dask: {_cells(s_dask, student)}")
        differ += [s for s in compare(made, s_batch, s_dask) if s not in differ]
        found["dask"] = (t_dask, s_dask, level_dask)
    say(f"scores differ for: {', '.join(differ)}" if differ else
        f"same scores, cell by cell, for all {n} students")
    found["differ"] = differ
    return found


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--students", nargs="+", help="students of tests/hostile's class "
                   "(default: %(default)s)", default=DEFAULT_STUDENTS)
    p.add_argument("-j", "--jobs", type=int, default=1,
                   help="residual-pack grade's workers (default: 1, as nbgrader's one)")
    p.add_argument("--keep", help="work in this folder and keep it")
    p.add_argument("--dask", action="store_true",
                   help="also grade the class on a local Dask cluster (the dask extra)")
    args = p.parse_args(argv)
    folder = Path(args.keep or tempfile.mkdtemp(prefix="grade-paths-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        found = grade_both(folder, args.students, args.jobs, dask=args.dask)
        return 1 if found["differ"] else 0
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
