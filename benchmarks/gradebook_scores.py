"""Scores of two gradebooks compared cell by cell: does a change to the grader change any
grade? (issue #25: the same class gets the same scores before and after.)

    .venv/bin/python benchmarks/gradebook_scores.py BEFORE.db AFTER.db

Each gradebook is nbgrader's SQLite file of a run over the same class, e.g. the self-check's
made-up class (`residual-pack selfcheck --workdir DIR`: `DIR/course/gradebook.db`) on two
commits. Every (assignment, student, notebook, cell) is compared on its autograded score
and its "needs manual grade" mark; exits 1 when any differs or is missing on one side.
"""

import sys

from nbgrader.api import Gradebook


def cells(path):
    found = {}
    with Gradebook(f"sqlite:///{path}") as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        key = (assignment.name, submission.student.id, notebook.name,
                               grade.name)
                        found[key] = (grade.auto_score, grade.needs_manual_grade)
    return found


def main(argv=None):
    before_path, after_path = (argv or sys.argv[1:])[:2]
    before, after = cells(before_path), cells(after_path)
    common = sorted(set(before) & set(after))
    differ = [k for k in common if before[k] != after[k]]
    only = sorted(set(before) ^ set(after))
    names = sorted({k[0] for k in before | after})
    print(f"assignments: {', '.join(names)}")
    print(f"cells compared: {len(common)}; different: {len(differ)}; "
          f"on one side only: {len(only)}")
    for key in differ[:20]:
        print("  differs:", "|".join(key), before[key], "->", after[key])
    for key in only[:20]:
        print("  one side only:", "|".join(key))
    return 1 if differ or only else 0


if __name__ == "__main__":
    sys.exit(main())
