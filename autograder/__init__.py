"""The pack's grading code, in folders by where it runs and who may see it.

- `kernel/`: what a student's kernel loads, in the student's JupyterLab and at grading
  time: the checks that test cells call, the comparisons and messages, the probes handed
  to student code, the named known mistakes, and the graded kernel itself. The package is
  the allowlist: a graded kernel gets this package and nothing else of `autograder`.
- `answers/`: the model answers and the registered wrong answers. The instructor's only;
  never loaded in a student's kernel.
- `grading/`: the instructor's grading process: our steps in nbgrader's autograde, the
  verdict on a test cell, the reference run, the batch command's class run, its report
  and journal, Dask.
- `sandbox/`: how a kernel is isolated; imports nothing of the rest.
- `authoring/`: the instructor's tools for the course itself: generate, self-check,
  the fingerprint table, the notebook guard, the demo class.
- `student/`: what a student runs besides the notebooks (`progress`).
- `cli.py`: the `residual-pack` command; `compat.py`: every patch on a third-party library;
  `cells.py`: nbgrader's cell kinds in a notebook (answers, tests, written answers).

This file imports nothing: a graded kernel loads it as the parent of `autograder.kernel`.
"""
