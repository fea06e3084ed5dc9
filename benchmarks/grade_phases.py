"""Where a graded submission's time goes: our sandboxed grading against stock nbgrader.

    .venv/bin/python benchmarks/grade_phases.py [-n 6] [--no-stock] [--keep DIR]

A class of N submissions of the first assignment (as in grade_class.py) is graded one
student at a time, in this process, twice:

1. **ours**: a grading session with the sandbox (`Grader` with `SandboxedExecute`),
   as `residual-pack grade -j 1` grades;
2. **stock**: the same `Grader` without a sandbox, so nbgrader's own `Execute` runs
   the notebook in nbgrader's own kernel (ipykernel's, no bubblewrap, no tests in the grader
   runner), its steps wrapped here to note the same phases.

Each graded submission keeps a timing record (`StudentResult.phases` and each
notebook's `NotebookRun.phases`: [name, wall time], see `grading.notebook_record.stamp`). This
prints, per phase, the median seconds over the class (the first student is left out: it
warms the grading process's caches) and the cells that took longest. `grade_class.py
--timings` prints the same table for a parallel run.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

ASSIGNMENT = "01_residual_stack"

# the phases in the order a submission goes through them; each row of the table is the
# time from the previous phase present to this one
ORDER = [
    ("start", ""),
    ("taken in", "intake: the notebook read and repaired against the release"),
    ("autograde", "nbgrader's API object (made once per process)"),
    ("execute step", "nbgrader before execution: gradebook, sanitize steps, converter"),
    ("planned", "sandbox plan: the kernel's folder and spec"),
    ("launch", "nbclient: kernel manager, connection file"),
    ("kernel ready", "bubblewrap (uid, cgroups, tmpfs, namespaces, binds) and the kernel's "
                     "start: Python, its imports; IPKernelApp, kernel_info"),
    ("first cell", "kernel_info for the notebook's language"),
    ("cells done", "the notebook's cells (rows below)"),
    ("kernel stopped", "kernel shutdown (nbclient)"),
    ("sandbox removed", "kill, unmount, remove the kernel's folder"),
    ("autograded", "nbgrader after execution: its steps, scores to the gradebook, writes"),
    ("scores read", "scores read back from the gradebook, report notes"),
    ("feedback", "feedback page"),
]
NAMES = [name for name, _ in ORDER]


def phases_of(result):
    """The merged [name, wall time] of a result (a StudentResult's dict), sorted."""
    found = list(result.get("phases", []))
    for run in result.get("runs", {}).values():
        found += run.get("phases", [])
    return found


def durations(phases):
    """{phase: seconds since the previous phase present}, in ORDER."""
    at = {}
    for name, when in phases:
        at.setdefault(name, when)
    out = {}
    previous = None
    for name in NAMES:
        if name not in at:
            continue
        if previous is not None:
            out[name] = at[name] - at[previous]
        previous = name
    if "start" in at and previous:
        out["total"] = at[previous] - at["start"]
    return out


def cell_seconds(result):
    """{cell label: seconds} of the result's notebook runs."""
    out = {}
    for run in result.get("runs", {}).values():
        for cell in run.get("cells", []):
            label = f"cell {cell['index']} {cell.get('grade_id') or '(own)'}"
            out[label] = cell.get("seconds", 0.0)
    return out


def summary(results, skip_first=True):
    """Median {phase: seconds} and {cell: seconds} over `results` (dicts)."""
    chosen = results[1:] if skip_first and len(results) > 2 else results
    rows, cells = {}, {}
    for result in chosen:
        for name, seconds in durations(phases_of(result)).items():
            rows.setdefault(name, []).append(seconds)
        for name, seconds in cell_seconds(result).items():
            cells.setdefault(name, []).append(seconds)
    return ({k: statistics.median(v) for k, v in rows.items()},
            {k: statistics.median(v) for k, v in cells.items()})


def table(columns, top_cells=5):
    """Lines of a table: one row per phase, one column per (title, summary)."""
    lines = [f"{'phase (time since the previous one)':<72}" +
             "".join(f"{title:>10}" for title, _ in columns)]
    for name, what in ORDER[1:] + [("total", "start to last phase")]:
        values = [rows.get(name) for _, (rows, _) in columns]
        if all(v is None for v in values):
            continue
        label = f"{name}: {what}" if what else name
        lines.append(f"{label[:71]:<72}" + "".join(
            f"{v:>10.3f}" if v is not None else f"{'-':>10}" for v in values))
    every = {}
    for _, (_, cells) in columns:
        for name, seconds in cells.items():
            every[name] = max(every.get(name, 0.0), seconds)
    slow = sorted(every, key=every.get, reverse=True)[:top_cells]
    for name in sorted(slow, key=lambda n: int(n.split()[1])):
        values = [cells.get(name) for _, (_, cells) in columns]
        lines.append(f"{'  of the cells: ' + name:<72}" + "".join(
            f"{v:>10.3f}" if v is not None else f"{'-':>10}" for v in values))
    return lines


# ---------------------------------------------------------------- stock nbgrader


def _stamp_stock_execute(runs):
    """Wrap nbgrader's own Execute so that it notes the same phases as ours (into
    `runs`: {(student, notebook): {"phases", "cells"}})."""
    import time as _time

    from nbgrader.preprocessors import Execute

    def note(self, name):
        self._timing["phases"].append([name, _time.time()])

    preprocess = Execute.preprocess

    def timed_preprocess(self, nb, resources=None, km=None):
        info = (resources or {}).get("nbgrader", {})
        self._timing = {"phases": [], "cells": []}
        runs[(info.get("student", ""), info.get("notebook", ""))] = self._timing
        note(self, "execute step")
        try:
            return preprocess(self, nb, resources, km)
        finally:
            note(self, "sandbox removed")

    start_kernel = Execute.async_start_new_kernel
    start_client = Execute.async_start_new_kernel_client
    cleanup = Execute._async_cleanup_kernel
    execute_cell = Execute.async_execute_cell

    async def timed_start_kernel(self, **kwargs):
        note(self, "launch")
        await start_kernel(self, **kwargs)

    async def timed_start_client(self):
        kc = await start_client(self)
        note(self, "kernel ready")
        return kc

    async def timed_cleanup(self):
        note(self, "cells done")
        await cleanup(self)
        note(self, "kernel stopped")

    async def timed_cell(self, cell, cell_index, execution_count=None, store_history=True):
        if cell.cell_type != "code" or not cell.source.strip():
            return await execute_cell(self, cell, cell_index, execution_count, store_history)
        if not self._timing["cells"]:
            note(self, "first cell")
        start = _time.monotonic()
        try:
            return await execute_cell(self, cell, cell_index, execution_count, store_history)
        finally:
            grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id", "")
            self._timing["cells"].append({"index": cell_index, "grade_id": grade_id,
                                          "seconds": _time.monotonic() - start})

    from nbclient.util import run_sync

    Execute.preprocess = timed_preprocess
    Execute.async_start_new_kernel = timed_start_kernel
    Execute.start_new_kernel = run_sync(timed_start_kernel)
    Execute.async_start_new_kernel_client = timed_start_client
    Execute.start_new_kernel_client = run_sync(timed_start_client)
    Execute._async_cleanup_kernel = timed_cleanup
    Execute._cleanup_kernel = run_sync(timed_cleanup)
    Execute.async_execute_cell = timed_cell
    Execute.execute_cell = run_sync(timed_cell)


def grade(folder, submissions, sandboxed):
    """Grade every student in `submissions` one at a time; their results as dicts."""
    from autograder.grading.course import WorkCourse, private_jupyter_dirs
    from autograder.grading.session import grading_session
    from autograder.grading.student import Grader
    from autograder.grading.submissions import find_submissions

    out = []
    if sandboxed:
        with grading_session(ROOT, folder / "ours", [ASSIGNMENT]) as session:
            grader = session.grader(ASSIGNMENT)
            found = find_submissions(submissions, ASSIGNMENT, grader.notebooks)
            for student in found:
                grader.submit(student, found[student][0])
            for student in found:
                out.append(grader.grade(student, feedback=False).to_dict())
        return out
    runs = {}
    _stamp_stock_execute(runs)
    with private_jupyter_dirs(folder / "stock-home"):
        work = WorkCourse(ROOT, folder / "stock", [ASSIGNMENT])
        grader = Grader(work, ASSIGNMENT)
        found = find_submissions(submissions, ASSIGNMENT, grader.notebooks)
        for student in found:
            grader.submit(student, found[student][0])
        for student in found:
            result = grader.grade(student, feedback=False).to_dict()
            for name in grader.notebooks:
                run = runs.pop((student, name), None)
                if run is not None:
                    result["runs"][name] = run
            out.append(result)
    return out


def main(argv=None):
    import grade_class

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=6, help="submissions (default: %(default)s)")
    p.add_argument("--no-stock", action="store_true", help="only our sandboxed grading")
    p.add_argument("--keep", help="work in this folder and keep it")
    args = p.parse_args(argv)
    with grade_class.class_folder(args.keep, "grade-phases-", args.n) as (folder, submissions, _):
        print(f"{args.n} submissions of {ASSIGNMENT}, graded one at a time; "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
        columns = []
        start = time.perf_counter()
        ours = grade(folder, submissions, sandboxed=True)
        print(f"ours (sandboxed): {time.perf_counter() - start:.1f} s in all", flush=True)
        columns.append(("ours", summary(ours)))
        if not args.no_stock:
            start = time.perf_counter()
            stock = grade(folder, submissions, sandboxed=False)
            print(f"stock nbgrader Execute: {time.perf_counter() - start:.1f} s in all",
                  flush=True)
            columns.append(("stock", summary(stock)))
        print("median seconds per submission (first one left out), "
              f"load {os.getloadavg()[0]:.1f}:")
        for line in table(columns):
            print(line)
        return 0


if __name__ == "__main__":
    sys.exit(main())
