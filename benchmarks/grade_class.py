"""Grading a class: our parallel, sandboxed grading against one `nbgrader autograde` call.

    .venv/bin/python benchmarks/grade_class.py [-n 100] [-j JOBS] [--feedback] [--timings]
        [--baseline course|stock|both] [--keep DIR] [--assignment NAME]

A class of N generated submissions of one assignment (the first by default: solutions,
untouched student versions and the registered wrong answers, in turn) is graded twice in
the same run:

1. by `residual-pack grade` (a sandboxed kernel per notebook, tests run in the grader,
   JOBS workers), the whole command, from start to report;
2. by one sequential `nbgrader autograde ASSIGNMENT --force` in a copy of the course where
   the assignment was generated beforehand, with either config (`--baseline`, both by
   default, each in a copy of its own):
   - **course**: the course's `nbgrader_config.py`, whose steps put ours into nbgrader's
     (the sandbox and tests run in the grader): what an
     instructor of this pack gets from `nbgrader autograde`; see grade_paths.py for the
     two sandboxed paths on a class with attacks;
   - **stock**: the same file cut where our steps begin (course id, folders, stubs, time
     limits only), so nbgrader runs its own steps and its own `Execute`: one kernel per
     notebook started the usual way, no sandbox. What `nbgrader autograde` is without
     this pack.

It prints seconds per submission for each and the ratio, and checks that both gave every
student the same autograded score. Every submission is an honest notebook, so that
nbgrader's run finishes (one broken notebook would stop it).

With `--timings` it also prints where our run's submissions spent their time (median
seconds per phase, from each student's timing record in the run's journal; see
grade_phases.py, which compares one at a time with stock nbgrader).
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from autograder.answers import mutants as mutant_registry  # noqa: E402
from autograder.authoring.madeup import filled_in, with_answer  # noqa: E402
from autograder.grading.course import (  # noqa: E402
    EXERCISES,
    SOURCE,
    WorkCourse,
    private_jupyter_dirs,
    read_notebook,
)
from autograder.sandbox.limits import default_jobs  # noqa: E402

ASSIGNMENT = "01_residual_stack"  # --assignment sets it for the whole run


def make_class(folder, n):
    """N submissions in nbgrader's layout; returns {student: what it is}."""
    release = read_notebook(ROOT / EXERCISES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    source = read_notebook(ROOT / SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    solution = filled_in(release, source)
    kinds = [("solution", solution), ("stub", release)]
    for mutant in mutant_registry.load(ASSIGNMENT):
        kinds.append((f"mutant: {mutant.name}", with_answer(solution, mutant.cell, mutant.source)))
    made = {}
    for i in range(n):
        what, nb = kinds[i % len(kinds)]
        student = f"s{i:03d}"
        dest = Path(folder) / student / ASSIGNMENT
        dest.mkdir(parents=True)
        nbformat.write(nb, str(dest / f"{ASSIGNMENT}.ipynb"))
        made[student] = what
    return made


@contextlib.contextmanager
def class_folder(keep, prefix, n):
    """A work folder (`keep`, kept, or a temporary one, removed) holding a fresh class of
    `n` submissions in `submissions/`; yields (folder, submissions, {student: kind})."""
    folder = Path(keep or tempfile.mkdtemp(prefix=prefix))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        submissions = folder / "submissions"
        if submissions.exists():
            shutil.rmtree(submissions)
        yield folder, submissions, make_class(submissions, n)
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def ours(submissions, out, jobs, feedback):
    script = Path(sys.executable).parent / "residual-pack"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "autograder.cli"]
    command += ["grade", ASSIGNMENT, str(submissions), "--out", str(out), "-j", str(jobs),
                "--fresh"]
    if not feedback:
        command.append("--no-feedback")
    start = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"residual-pack grade failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    report = json.loads((Path(out) / "report.json").read_text())
    scores = {s["student"]: s["autograded_score"] for s in report["students"]}
    level = next((line for line in run.stdout.splitlines() if line.startswith("isolation:")), "")
    return seconds, scores, level


def timings(out):
    """The phase table of our run in `out`, from the journal's results."""
    from grade_phases import summary, table

    path = Path(out) / ".grading" / "journal.jsonl"
    results = [json.loads(line).get("result", {})
               for line in path.read_text().splitlines()[1:] if line.strip()]
    return table([("ours", summary(results))])


OUR_STEPS = "# ---- our steps in nbgrader's lists"  # where the course config adds ours


def stock_config(text):
    """The course config without our steps: nbgrader's own autograde."""
    if OUR_STEPS not in text:
        sys.exit(f"nbgrader_config.py has no line {OUR_STEPS!r}: cannot make the stock config")
    return text[:text.index(OUR_STEPS)]


def nbgraders(submissions, folder, stock=False):
    """One sequential `nbgrader autograde` over the class, in a prepared course copy
    (with the stock config when `stock`)."""
    home = Path(folder) / "home"
    with private_jupyter_dirs(home):
        work = WorkCourse(ROOT, Path(folder) / "course", [ASSIGNMENT])
        work.generate_assignment(ASSIGNMENT)
        env = dict(os.environ)
    if stock:
        config = work.path("nbgrader_config.py")
        config.write_text(stock_config(config.read_text()))
    shutil.copytree(submissions, work.path("submitted"))
    nbgrader = Path(sys.executable).parent / "nbgrader"
    command = [str(nbgrader) if nbgrader.exists() else "nbgrader", "autograde", ASSIGNMENT,
               "--force"]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=work.root, capture_output=True, text=True,
                         env=env | {"HOME": str(home)})
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"nbgrader autograde failed:\n{run.stderr[-3000:]}")
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{work.path('gradebook.db')}") as gb:
        for student in gb.students:
            submission = gb.find_submission(ASSIGNMENT, student.id)
            scores[student.id] = float(sum(
                grade.auto_score or 0 for notebook in submission.notebooks
                for grade in notebook.grades if grade.cell.cell_type == "code"))
    return seconds, scores


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=100, help="submissions (default: %(default)s)")
    p.add_argument("-j", "--jobs", type=int, default=default_jobs(),
                   help="our workers (default: %(default)s, one per core)")
    p.add_argument("--feedback", action="store_true",
                   help="our run also writes feedback pages (nbgrader's autograde does not)")
    p.add_argument("--timings", action="store_true",
                   help="also print where our run's submissions spent their time")
    p.add_argument("--baseline", choices=["course", "stock", "both"], default="both",
                   help="nbgrader's run with the course config, the stock one, or both "
                        "(default: %(default)s)")
    p.add_argument("--keep", help="work in this folder and keep it")
    p.add_argument("--assignment", default=ASSIGNMENT,
                   help="the assignment the class hands in (default: %(default)s)")
    args = p.parse_args(argv)
    globals()["ASSIGNMENT"] = args.assignment
    with class_folder(args.keep, "grade-class-", args.n) as (folder, submissions, made):
        print(f"{args.n} submissions of {ASSIGNMENT}; {len(set(made.values()))} kinds "
              f"(solution, stub, registered wrong answers); {os.cpu_count()} cores, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
        t_ours, s_ours, level = ours(submissions, folder / "ours", args.jobs, args.feedback)
        print(f"residual-pack grade -j {args.jobs}: {t_ours:.1f} s, "
              f"{t_ours / args.n:.2f} s per submission ({level or 'isolation: ?'})", flush=True)
        if args.timings:
            print(f"median seconds per submission in our run ({args.jobs} at a time):")
            for line in timings(folder / "ours"):
                print("  " + line)
        differ = []
        for name in (["course", "stock"] if args.baseline == "both" else [args.baseline]):
            t_nb, s_nb = nbgraders(submissions, folder / f"nbgrader-{name}", name == "stock")
            what = ("course config: sandboxed" if name == "course" else
                    "stock steps: no sandbox")
            print(f"nbgrader autograde ({what}; one call, sequential): {t_nb:.1f} s, "
                  f"{t_nb / args.n:.2f} s per submission", flush=True)
            print(f"ratio (nbgrader {name} / ours): {t_nb / t_ours:.2f}x "
                  f"({'faster' if t_nb > t_ours else 'slower'} per submission)", flush=True)
            wrong = sorted(s for s in made if s_ours.get(s) != s_nb.get(s))
            if wrong:
                print(f"scores differ for {len(wrong)} student(s): " + ", ".join(
                    f"{s} ({made[s]}: ours {s_ours.get(s)}, nbgrader {s_nb.get(s)})"
                    for s in wrong[:10]))
            else:
                print(f"same autograded score for all {len(made)} students")
            if name == "course":  # the same grading by two drivers: must agree
                differ += wrong
            elif wrong:  # different grading: reported, not counted
                print("  (stock nbgrader scores a test cell by its own pass or fail in the "
                      "student's kernel, ours by the grader's judge of what the kernel "
                      "observed: a difference is reported, not counted)")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
