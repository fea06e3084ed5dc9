"""The path of one submission through the grader: the files of `autograder/` whose code
runs in the grading process while one student is graded (hand-in, nbgrader's autograde
with our steps, feedback, the class report), and the deepest chain of `grading/` files on
one call stack.

    .venv/bin/python benchmarks/submission_path.py [--keep DIR] [--course CHECKOUT]

It grades the solution's answers, handed in as the release notebook of 01_residual_stack,
twice in a sandboxed work course (one process, one worker): the first time warms the
imports and the reference run, the second runs under a profile hook (`sys.setprofile`,
`threading.setprofile`) that notes the file of every Python function called. The kernel's
own process is not counted (its code is `autograder/kernel/`, the same on every path).
It uses only `grading_session`, `Grader.submit`, `Grader.grade` and `write_report`, so the
same script counts an older checkout: `--course` that checkout, run with its environment.
"""

import argparse
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_residual_stack"


def _student_notebook(folder, course):
    sys.path.insert(0, str(course / "tests"))
    import nbformat
    from gradedclass import attack_class

    path = folder / "honest.ipynb"
    nbformat.write(attack_class(ASSIGNMENT)["honest"], str(path))
    return path


def trace(folder, course=ROOT):
    """({autograder file: calls}, the deepest chain of grading/ files)."""
    import autograder
    from autograder.grading.report import write_report
    from autograder.grading.session import grading_session

    package = str(Path(autograder.__file__).parent) + "/"
    grading = package + "grading/"
    seen, deepest = {}, []

    def hook(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_filename
        if not name.startswith(package):
            return
        seen[name] = seen.get(name, 0) + 1
        if name.startswith(grading):
            chain, f = [], frame
            while f is not None:
                file = f.f_code.co_filename
                if file.startswith(grading) and (not chain or chain[-1] != file):
                    chain.append(file)
                f = f.f_back
            if len(chain) > len(deepest):
                deepest[:] = chain

    notebook = _student_notebook(folder, course)
    with grading_session(course, folder / "work", [ASSIGNMENT]) as session:
        grader = session.grader(ASSIGNMENT)
        [name] = grader.notebooks
        grader.submit("warm", {name: notebook})
        grader.grade("warm")
        grader.submit("student", {name: notebook})
        (folder / "report").mkdir()
        sys.setprofile(hook)
        threading.setprofile(hook)
        try:
            result = grader.grade("student")
            write_report(grader, [result], folder / "report")
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
        assert result.graded, result.reason
    rel = {str(Path(f).relative_to(Path(package).parent)): n for f, n in seen.items()}
    return rel, [str(Path(f).relative_to(Path(package).parent)) for f in reversed(deepest)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keep", help="work in this folder and keep it")
    p.add_argument("--course", default=str(ROOT), help="the checkout whose course is graded "
                   "(default: this one)")
    args = p.parse_args(argv)
    folder = Path(args.keep or tempfile.mkdtemp(prefix="submission-path-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        files, deepest = trace(folder, Path(args.course).resolve())
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    for name in sorted(files):
        print(f"{files[name]:8d}  {name}")
    in_grading = [f for f in files if f.startswith("autograder/grading/")]
    print(f"{len(files)} files of autograder/ ({len(in_grading)} of them in grading/); "
          f"the deepest chain of grading/ files on one stack: {len(deepest)}")
    print("  " + " -> ".join(deepest))


if __name__ == "__main__":
    main()
