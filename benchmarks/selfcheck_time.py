"""Grading's time saving, measured on the self-check: every code cell run, or only those
that can change an autograded score, as grading (and so the self-check and the test suite)
now runs them (`cells.left_out_when_grading`).

    .venv/bin/python benchmarks/selfcheck_time.py [-j 2] [ASSIGNMENT ...]

For each assignment (default: all), in the same run and in turn (the order swapped from
one assignment to the next, so that a drift of the machine's load favours neither):

1. the reference run (the solution, once per assignment, says what each check must
   observe): every cell, and as graded (`reference_run.run_reference(to_end=...)`); the
   records must be the same;
2. the self-check of the assignment (`selfcheck.selfcheck`): with `whole=True` (every code
   cell of every submission, as every student's notebook was graded before) and as
   grading runs now (the course's cells after the last autograded test and those tagged
   skip-when-grading left out); both must pass, and every submission must get the same
   score on every cell.

It prints the seconds of each, the mean seconds per graded submission, their ratios, and
the load average before and after. The self-check's own figure includes the reference run
in both columns: what the reference run saves is the first table.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def scores(check):
    """{student: {(notebook, cell): score}} of a self-check of one assignment."""
    return {r.student: {(c.notebook, c.cell): c.score for c in r.cells} for r in check.results}


def time_reference(assignment, to_end):
    from autograder.grading.course import SOURCE
    from autograder.grading.reference_run import run_reference

    start = time.perf_counter()
    records = run_reference(ROOT / SOURCE / assignment, assignment, to_end=to_end)
    return time.perf_counter() - start, records


def time_selfcheck(assignment, whole, jobs):
    from autograder.authoring.selfcheck import report, selfcheck

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="selfcheck-time-") as work:
        (check,) = selfcheck(ROOT, [assignment], workdir=Path(work) / "w", jobs=jobs,
                             whole=whole)
    seconds = time.perf_counter() - start
    if not check.ok:
        raise SystemExit(f"{assignment}: the self-check failed (whole={whole}):\n"
                         + report([check]))
    return seconds, check


def main(argv=None):
    from autograder.grading.course import assignments
    from autograder.sandbox.limits import default_jobs

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p.add_argument("-j", "--jobs", type=int, default=default_jobs(),
                   help="submissions graded at a time (default: %(default)s, one per core)")
    args = p.parse_args(argv)
    names = args.assignments or assignments(ROOT)
    print(f"{len(names)} assignment(s), -j {args.jobs}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    rows, differ = [], []
    for i, name in enumerate(names):
        row = {"assignment": name}
        order = [True, False] if i % 2 == 0 else [False, True]
        refs = {}
        for to_end in order:
            row[("ref", to_end)], refs[to_end] = time_reference(name, to_end)
        if refs[True] != refs[False]:
            differ.append(f"{name}: the reference records differ")
        checks = {}
        for whole in order:
            row[("check", whole)], checks[whole] = time_selfcheck(name, whole, args.jobs)
        if scores(checks[True]) != scores(checks[False]):
            differ.append(f"{name}: the scores differ")
        row["submissions"] = len(checks[False].results)
        for whole in (True, False):
            row[("each", whole)] = checks[whole].seconds["per submission"]
        rows.append(row)
        print(f"{name}: reference run {row[('ref', True)]:.1f} s -> "
              f"{row[('ref', False)]:.1f} s; self-check ({row['submissions']} submissions) "
              f"{row[('check', True)]:.1f} s -> {row[('check', False)]:.1f} s, per "
              f"submission {row[('each', True)]:.1f} s -> {row[('each', False)]:.1f} s; "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    print()
    print("| assignment | reference run: every cell | as graded | self-check: every cell "
          "| as graded | ratio | per submission: every cell | as graded | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    total = {k: 0.0 for k in (("ref", True), ("ref", False), ("check", True), ("check", False))}
    for row in rows:
        for k in total:
            total[k] += row[k]
        print(f"| {row['assignment']} | {row[('ref', True)]:.1f} | {row[('ref', False)]:.1f} | "
              f"{row[('check', True)]:.1f} | {row[('check', False)]:.1f} | "
              f"{row[('check', True)] / row[('check', False)]:.2f}x | "
              f"{row[('each', True)]:.2f} | {row[('each', False)]:.2f} | "
              f"{row[('each', True)] / max(row[('each', False)], 1e-9):.2f}x |")
    print(f"| all | {total[('ref', True)]:.1f} | {total[('ref', False)]:.1f} | "
          f"{total[('check', True)]:.1f} | {total[('check', False)]:.1f} | "
          f"{total[('check', True)] / total[('check', False)]:.2f}x | | | |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    for line in differ:
        print(f"DIFFER: {line}")
    print("same reference records and the same scores on every cell, both ways"
          if not differ else "")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
